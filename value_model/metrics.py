"""Selection metrics and baselines: pure functions over (task, label, score) arrays.

Definitions (per task, then averaged over tasks):

* **Best@1** — the mean label of the top-scored candidates (ties averaged);
* **Random** — the mean label (what picking uniformly at random gets);
* **Oracle** (Pass@N) — 1 if any candidate is positive;
* **gap closed** — (Best - Random) / (Oracle - Random) over the averages, 0 when Oracle = Random.

The per-task curves behind :mod:`value_model.evaluation` live here too: :func:`pass_at_k_curve`
(Chen et al.'s unbiased 1 - C(n-c, k)/C(n, k)) and :func:`best_at_k_curve` (the expected label of the
top-scored candidate of a uniformly random k-subset, ties averaged), both computed exactly, plus
:func:`within_task_auroc`, :func:`expected_calibration_error`, :func:`reliability_bins` and
:func:`brier_score`. "Best@1" above is the pick among *all* of a task's candidates, i.e. the Best@k
curve at k = n; the curve's own k = 1 is Random.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

__all__ = [
    "auroc",
    "best_at_k_curve",
    "bin_edges",
    "brier_score",
    "expected_calibration_error",
    "is_diff",
    "majority_vote_scores",
    "normalise_candidate",
    "normalise_patch",
    "pass_at_k",
    "pass_at_k_curve",
    "patch_length_scores",
    "reliability_bins",
    "run_prior_scores",
    "selection_metrics",
    "within_task_auroc",
]

# Scores closer than this are one tie (the same candidate scored in two batches can differ in the last bits).
TIE_TOLERANCE = 1e-9


def _finite(what: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` as a float array, refused when one is missing (``None``/NaN) or infinite: a metric over
    them would be a silently wrong number (NaN compares false, so it would count as a failure or a tie)."""
    arr = np.asarray(values, dtype=float)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{what} hold {int(bad.sum())} missing (None/NaN) or infinite value(s), the first at index "
            f"{int(np.flatnonzero(bad)[0])}; drop those candidates or give each a finite value"
        )
    return arr


def _groups(task_ids: Sequence[str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, task in enumerate(task_ids):
        groups[task].append(i)
    return groups


def selection_metrics(task_ids: Sequence[str], labels: Sequence[float], scores: Sequence[float]) -> dict[str, float]:
    """Best@1, Random, Oracle and gap closed of choosing by ``scores`` within each task.

    Examples:
        >>> m = selection_metrics(["a", "a", "b", "b"], [1, 0, 0, 0], [0.9, 0.1, 0.5, 0.5])
        >>> m["best_at_1"], m["random"], m["oracle"], m["gap_closed"]
        (0.5, 0.25, 0.5, 1.0)
    """
    labels_arr = _finite("labels", labels)
    scores_arr = _finite("scores", scores)
    if not (len(task_ids) == len(labels_arr) == len(scores_arr)):
        raise ValueError("task_ids, labels and scores must have the same length")
    if len(labels_arr) == 0:
        raise ValueError("no candidates to measure: task_ids, labels and scores are empty")
    best, rand, oracle = [], [], []
    for idx in _groups(task_ids).values():
        y, s = labels_arr[idx], scores_arr[idx]
        top = np.isclose(s, s.max(), rtol=0, atol=TIE_TOLERANCE)
        best.append(y[top].mean())
        rand.append(y.mean())
        oracle.append(y.max())
    b, r, o = float(np.mean(best)), float(np.mean(rand)), float(np.mean(oracle))
    return {
        "best_at_1": b,
        "random": r,
        "oracle": o,
        "gap_closed": (b - r) / (o - r) if o > r else 0.0,
        "n_tasks": float(len(best)),
        "n_candidates": float(len(labels_arr)),
    }


def auroc(labels: Sequence[float], scores: Sequence[float]) -> float:
    """Area under the ROC curve (ties count one half); ``nan`` if only one class is present (or none).

    Labels ``> 0.5`` are positives. A missing (``None``/NaN) or infinite label or score is refused.
    Computed from ranks (Mann-Whitney U with tied ranks averaged), so it needs O(n log n) time and
    O(n) memory.

    Examples:
        >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        0.75
    """
    y = _finite("labels", labels) > 0.5
    s = _finite("scores", scores)
    if len(y) != len(s):
        raise ValueError(f"got {len(y)} labels but {len(s)} scores")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    # the average 1-based rank of each distinct score: the ranks it spans are (before + 1 .. before + count)
    before = np.cumsum(counts) - counts
    ranks = (before + (counts + 1) / 2.0)[inverse]
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def within_task_auroc(task_ids: Sequence[str], labels: Sequence[float], scores: Sequence[float]) -> float:
    """AUROC within each task, averaged over the tasks that have both a positive and a negative.

    It is the fraction of (positive, negative) pairs of the same task that the scores order
    correctly (ties one half), so task difficulty does not count; ``nan`` when no task is mixed.

    Examples:
        >>> within_task_auroc(["a", "a", "b", "b", "b"], [1, 0, 1, 0, 0], [0.9, 0.1, 0.2, 0.5, 0.1])
        0.75
    """
    labels_arr = _finite("labels", labels)
    scores_arr = _finite("scores", scores)
    if not (len(task_ids) == len(labels_arr) == len(scores_arr)):
        raise ValueError("task_ids, labels and scores must have the same length")
    values = [auroc(labels_arr[idx], scores_arr[idx]) for idx in _groups(task_ids).values()]
    mixed = [v for v in values if not np.isnan(v)]
    return float(np.mean(mixed)) if mixed else float("nan")


def _hypergeometric_none(pool: np.ndarray, n: int, max_k: int) -> np.ndarray:
    """``C(a, k) / C(n, k)`` for each ``a`` in ``pool`` (rows) and k = 1..max_k (columns), k clipped to n.

    That is the probability that a uniformly random k-subset of n items lies inside a fixed set of
    ``a`` of them; computed as the running product of (a - i) / (n - i), which stays in [0, 1].
    """
    ks = min(max_k, n)
    i = np.arange(ks)
    factors = np.clip(pool[:, None] - i[None, :], 0, None) / (n - i)[None, :]
    out = np.cumprod(factors, axis=1)
    if max_k > ks:  # more draws than candidates: every candidate is drawn
        out = np.concatenate([out, np.repeat(out[:, -1:], max_k - ks, axis=1)], axis=1)
    return out


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased Pass@k of one task with ``n`` candidates of which ``c`` pass: 1 - C(n-c, k)/C(n, k).

    ``k`` larger than ``n`` is clipped to ``n`` (a task with fewer candidates uses all of them).

    Examples:
        >>> pass_at_k(4, 1, 2)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        0.5
        >>> pass_at_k(3, 1, 5)
        1.0
    """
    if not 0 <= c <= n or n < 1 or k < 1:
        raise ValueError(f"need 0 <= c <= n, n >= 1 and k >= 1, got n={n}, c={c}, k={k}")
    k = min(k, n)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k_curve(labels: Sequence[float], max_k: int) -> np.ndarray:
    """:func:`pass_at_k` of one task for k = 1..max_k (labels > 0.5 pass).

    Examples:
        >>> pass_at_k_curve([1, 0, 0, 0], 4).tolist()
        [0.25, 0.5, 0.75, 1.0]
    """
    y = _finite("labels", labels) > 0.5
    if len(y) == 0 or max_k < 1:
        raise ValueError(f"need at least one candidate and max_k >= 1, got {len(y)} and {max_k}")
    n, c = len(y), int(y.sum())
    return 1.0 - _hypergeometric_none(np.array([n - c]), n, max_k)[0]


def best_at_k_curve(labels: Sequence[float], scores: Sequence[float], max_k: int) -> np.ndarray:
    """Best@k of one task for k = 1..max_k, exactly: the expected label of the top-scored candidate of a
    uniformly random k-subset of the task's candidates, tied top scores averaged.

    Group the candidates into score levels. The subset's top level is level v exactly when the subset
    avoids every candidate above v and is not entirely below v, which has probability
    (C(at_or_below(v), k) - C(below(v), k)) / C(n, k). Given that, the subset's members at level v are
    a uniformly random subset of that level, so their average label is the level's mean label in
    expectation. Best@k is the sum over levels of these two factors. k = 1 gives the mean label
    (Random), k ≥ n the pick among all candidates.

    Examples:
        >>> best_at_k_curve([1, 0, 0], [0.9, 0.5, 0.1], 3).round(4).tolist()  # P(positive drawn) = k/3
        [0.3333, 0.6667, 1.0]
    """
    y = _finite("labels", labels)
    s = _finite("scores", scores)
    if len(y) != len(s) or len(y) == 0:
        raise ValueError("labels and scores must be non-empty and of the same length")
    if max_k < 1:
        raise ValueError(f"max_k must be >= 1, got {max_k}")
    order = np.argsort(s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    # a new level starts where the score rises by more than the tie tolerance
    starts = np.concatenate([[0], np.flatnonzero(np.diff(s_sorted) > TIE_TOLERANCE) + 1])
    counts = np.diff(np.concatenate([starts, [len(s)]]))
    level_means = np.add.reduceat(y_sorted, starts) / counts
    at_or_below = np.cumsum(counts)
    pool = np.concatenate([[0], at_or_below])  # below(level 0) = 0, then at_or_below of each level
    inside = _hypergeometric_none(pool, len(y), max_k)
    p_top = inside[1:] - inside[:-1]  # levels x k
    return level_means @ p_top


def bin_edges(n_bins: int) -> np.ndarray:
    """The ``n_bins + 1`` edges of equal-width bins of [0, 1], each the float nearest ``b / n_bins``
    (``np.linspace`` gives 0.30000000000000004 for 3/10).

    Examples:
        >>> bool(bin_edges(10)[3] == 0.3), bool(np.linspace(0, 1, 11)[3] == 0.3)
        (True, False)
    """
    return np.arange(n_bins + 1) / n_bins


def reliability_bins(
    labels: Sequence[float], probabilities: Sequence[float], *, n_bins: int = 10
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal-width bins of [0, 1]: (candidates, mean probability, fraction positive) per bin.

    Bin ``b`` holds probabilities in [b/n_bins, (b+1)/n_bins); 1.0 goes in the last bin. The edges are
    :func:`bin_edges` (each the float nearest b/n_bins), so a probability equal to an edge, such as
    0.29 with 100 bins, starts the bin above it. Empty bins have count 0 and ``nan`` means.

    Examples:
        >>> reliability_bins([0, 1, 1], [0.29, 0.3, 1.0], n_bins=100)[0][[29, 30, 99]].tolist()
        [1.0, 1.0, 1.0]
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    y = (_finite("labels", labels) > 0.5).astype(float)
    p = _finite("probabilities", probabilities)
    if len(y) != len(p):
        raise ValueError("labels and probabilities must have the same length")
    if len(p) and (p.min() < 0 or p.max() > 1):
        raise ValueError("probabilities must lie in [0, 1]; calibrate raw scores first")
    # not floor(p * n_bins): 0.29 * 100 = 28.999999999999996 would put 0.29 in the bin below its edge
    which = np.searchsorted(bin_edges(n_bins)[1:-1], p, side="right")
    counts = np.bincount(which, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, weights=p, minlength=n_bins) / counts
        frac = np.bincount(which, weights=y, minlength=n_bins) / counts
    return counts, mean_p, frac


def expected_calibration_error(
    labels: Sequence[float], probabilities: Sequence[float], *, n_bins: int = 10
) -> float:
    """ECE over equal-width bins: Σ_b (n_b / n) · |mean probability_b - fraction positive_b|.

    Examples:
        >>> round(expected_calibration_error([0, 1, 1, 1], [0.1, 0.3, 0.9, 0.9], n_bins=2), 6)
        0.2
    """
    counts, mean_p, frac = reliability_bins(labels, probabilities, n_bins=n_bins)
    full = counts > 0
    if not full.any():
        return float("nan")
    return float(np.sum(counts[full] * np.abs(mean_p[full] - frac[full])) / counts.sum())


def brier_score(labels: Sequence[float], probabilities: Sequence[float]) -> float:
    """Mean squared error of probabilities against binary labels (> 0.5 positive).

    Examples:
        >>> round(brier_score([0, 1], [0.2, 0.6]), 6)  # (0.04 + 0.16) / 2
        0.1
    """
    y = (_finite("labels", labels) > 0.5).astype(float)
    p = _finite("probabilities", probabilities)
    if len(y) != len(p) or len(y) == 0:
        raise ValueError("labels and probabilities must be non-empty and of the same length")
    return float(np.mean((p - y) ** 2))


_WS = re.compile(r"\s+")


def normalise_patch(patch: str) -> str:
    """The changed lines of a unified diff, whitespace-collapsed (context and headers ignored).

    Examples:
        >>> normalise_patch("--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a  = 1\\n+a = 2\\n same\\n")
        '-a = 1\\n+a = 2'
    """
    changed = []
    for line in patch.splitlines():
        if line.startswith(("+++", "---")):
            continue
        if line.startswith(("+", "-")):
            text = _WS.sub(" ", line[1:]).strip()
            if text:
                changed.append(line[0] + text)
    return "\n".join(changed)


_DIFF = re.compile(r"^(?:@@ -\d|diff --git |\+\+\+ )", re.MULTILINE)


def is_diff(content: str) -> bool:
    """Whether ``content`` is a unified diff: it has a hunk header, a ``diff --git`` line or a ``+++`` header.

    Examples:
        >>> is_diff("--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a\\n+b\\n"), is_diff("- buy milk\\n- call Bob")
        (True, False)
    """
    return _DIFF.search(content) is not None


def _json_lines(value: object, path: str) -> list[str]:
    if isinstance(value, dict):
        return [line for key in sorted(value, key=str)
                for line in _json_lines(value[key], f"{path}.{key}" if path else str(key))]
    if isinstance(value, list):
        return [f"{path}[]=" + json.dumps(item, sort_keys=True, ensure_ascii=False) for item in value]
    return [f"{path}=" + json.dumps(value, ensure_ascii=False)]


def normalise_candidate(content: str) -> str:
    """The lines that carry a candidate's meaning, whitespace-collapsed, each ``+``/``-`` prefixed.

    A unified diff gives its changed lines (:func:`normalise_patch`). Any other candidate (a final
    answer, an action, a tool call) gives all its lines, each prefixed ``+``; a JSON document gives one
    line per leaf (``path=value``, keys sorted) and per list item (``path[]=item`` as canonical
    JSON), so a re-indented answer or one with its keys in another order normalises alike, and two
    answers that take the same actions share those lines. Agreement between candidates
    (:func:`majority_vote_scores`, :mod:`value_model.consensus`) is measured on these lines.

    Examples:
        >>> normalise_candidate("--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a  = 1\\n+a = 2\\n same\\n")
        '-a = 1\\n+a = 2'
        >>> normalise_candidate('{"b": 1, "a": [{"y": 2, "x": 1}]}')
        '+a[]={"x": 1, "y": 2}\\n+b=1'
        >>> normalise_candidate("The answer  is\\n\\n 42.")
        '+The answer is\\n+42.'
    """
    if is_diff(content):
        return normalise_patch(content)
    lines = content.splitlines()
    if content.lstrip()[:1] in ("{", "["):
        try:
            lines = _json_lines(json.loads(content), "")
        except (ValueError, RecursionError):  # not JSON, or nested too deep to walk: compared as text
            pass
    collapsed = (_WS.sub(" ", line).strip() for line in lines)
    return "\n".join("+" + line for line in collapsed if line)


def majority_vote_scores(task_ids: Sequence[str], contents: Sequence[str]) -> list[float]:
    """How many candidates of the same task share each candidate's normalised content
    (:func:`normalise_candidate`): self-consistency, for patches and answers alike.

    A candidate that normalises to nothing (an empty submission, a diff that only adds blank lines or
    empty files) casts no vote and scores 0, below every real candidate, as Agentless's majority vote
    skips empty normalised patches (``agentless/repair/rerank.py``): agents that give up agree on
    submitting nothing, and that agreement must not win the vote.

    Examples:
        >>> majority_vote_scores(["t"] * 4, ["", "", "+a", "+b"])
        [0.0, 0.0, 1.0, 1.0]
    """
    keys = [normalise_candidate(c) for c in contents]
    out = [0.0] * len(keys)
    for idx in _groups(task_ids).values():
        counts = Counter(keys[i] for i in idx)
        for i in idx:
            out[i] = float(counts[keys[i]]) if keys[i] else 0.0
    return out


def patch_length_scores(contents: Sequence[str]) -> list[float]:
    """Shorter candidates first: minus the number of lines of :func:`normalise_candidate`
    (a patch's changed lines). A candidate that normalises to nothing (an empty submission) changes
    nothing, so it ranks below every candidate that changes something rather than first.

    Examples:
        >>> patch_length_scores(["+a\\n+b\\n", "", "+a\\n"])
        [-2.0, -3.0, -1.0]
    """
    lengths = [len(normalise_candidate(c).splitlines()) for c in contents]
    last = -float(max(lengths, default=0) + 1)
    return [-float(n) if n else last for n in lengths]


def run_prior_scores(
    train_runs: Sequence[str], train_labels: Sequence[float], runs: Sequence[str]
) -> list[float]:
    """Each candidate scored by its run's success rate on the training candidates: the "best single
    system" baseline, which picks, in every task, the candidate of the best run that has one.

    This reads which run (system) wrote a candidate, so it is a baseline only: a value model never
    sees it. Runs absent from training score -1 (last).

    Examples:
        >>> run_prior_scores(["a", "a", "b"], [1, 0, 0], ["b", "a", "c"])
        [0.0, 0.5, -1.0]
    """
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for run, label in zip(train_runs, train_labels, strict=True):
        totals[run][0] += float(label > 0.5)
        totals[run][1] += 1.0
    return [totals[r][0] / totals[r][1] if r in totals else -1.0 for r in runs]
