"""Selection metrics and baselines: pure functions over (task, label, score) arrays.

Definitions (per task, then averaged over tasks):

* **Best@1** — the mean label of the top-scored candidates (ties averaged);
* **Random** — the mean label (what picking uniformly at random gets);
* **Oracle** (Pass@N) — 1 if any candidate is positive;
* **gap closed** — (Best − Random) / (Oracle − Random) over the averages, 0 when Oracle = Random.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

__all__ = ["auroc", "majority_vote_scores", "normalise_patch", "patch_length_scores", "selection_metrics"]


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
    labels_arr = np.asarray(labels, dtype=float)
    scores_arr = np.asarray(scores, dtype=float)
    if not (len(task_ids) == len(labels_arr) == len(scores_arr)):
        raise ValueError("task_ids, labels and scores must have the same length")
    best, rand, oracle = [], [], []
    for idx in _groups(task_ids).values():
        y, s = labels_arr[idx], scores_arr[idx]
        top = np.isclose(s, s.max(), rtol=0, atol=1e-9)
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
    """Area under the ROC curve (ties count one half); ``nan`` if only one class is present.

    Examples:
        >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        0.75
    """
    y = np.asarray(labels, dtype=float) > 0.5
    s = np.asarray(scores, dtype=float)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    pos, neg = s[y], s[~y]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (n_pos * n_neg))


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


def majority_vote_scores(task_ids: Sequence[str], contents: Sequence[str]) -> list[float]:
    """How many candidates of the same task share each candidate's normalised patch (self-consistency)."""
    keys = [normalise_patch(c) for c in contents]
    out = [0.0] * len(keys)
    for idx in _groups(task_ids).values():
        counts = Counter(keys[i] for i in idx)
        for i in idx:
            out[i] = float(counts[keys[i]])
    return out


def patch_length_scores(contents: Sequence[str]) -> list[float]:
    """Shorter patches first: minus the number of changed lines."""
    return [-float(len(normalise_patch(c).splitlines())) for c in contents]
