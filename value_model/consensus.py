"""Set-level (joint) features of one task's candidates, and the combiner that mixes them with a value.

A rerank request carries a task's whole candidate set, so a candidate can be judged by how much the
*other* candidates agree with it (self-consistency), not only on its own. On the SWE-bench Lite
candidates this agreement is the strongest content-only signal there is (see the README's results),
stronger than a small cross-encoder fine-tuned on a thousand examples. Everything here reads the
candidates' text only, never which system or model wrote them.

Per candidate, within its task (:data:`FEATURES`):

* ``soft_consensus`` — mean line-level Jaccard similarity between its set of changed lines (the
  ``+``/``-`` lines of :func:`~value_model.metrics.normalise_candidate`) and each other candidate's;
* ``exact_share`` — the fraction of the other candidates whose normalised content is identical;
* ``file_agreement`` — mean Jaccard similarity of the sets of files touched;
* ``added_consensus`` — mean Jaccard similarity of the added (``+``) lines alone: the fix itself;
* ``max_similarity`` — the largest line-level Jaccard similarity to any other candidate;
* ``token_consensus`` — mean Jaccard similarity of the sets of tokens (identifiers, numbers,
  punctuation) on the changed lines: agreement that survives reformatting and renamed temporaries;
* ``location_overlap`` — mean Jaccard similarity of the sets of (file, pre-image line number)
  that the hunks span: agreement on *where* to change the code;
* ``relative_size`` — log(1 + changed lines) minus the task's median of it (bigger than peers > 0);
* ``touches_tests`` — 1 when the patch edits or adds a file under a test directory or named
  ``test_*``/``*_test.py``: a fix that also rewrites tests (or adds a reproduction script) is rarer
  among correct candidates.

A task with one candidate gets zeros for the agreement features. All are pure functions of strings.

Candidates that are not diffs (a tau-bench answer's actions and final message, a next action, a
plain-text answer) are compared on their own lines (:func:`~value_model.metrics.normalise_candidate`:
a JSON answer gives a line per action and per field), so the line, token, exact-match and size
features measure agreement between answers as they do between patches; the file, location and test
features are 0 for them.

:data:`FEATURES` also holds the per-candidate content features of :mod:`value_model.patch_features`
(the patch relative to the issue, and their within-task z-scores). The issue features read the
task's prompt; :func:`consensus_features` leaves them 0 without one, and a combiner that uses them
refuses to score without a prompt (:attr:`Combiner.uses_issue`).

The :class:`Combiner` is a linear model over a chosen subset of these features plus, optionally,
the neural value model's raw ``value``: ``logit = bias + Σ w_f · (x_f - mean_f) / std_f``. It is fitted
on held-out tasks (:meth:`Combiner.fit`) with one of three objectives (:data:`OBJECTIVES`): pointwise
logistic loss, a listwise conditional logit (softmax over a task's candidates), or pairwise
Bradley-Terry over a task's (resolved, unresolved) pairs; it is serialised into the artefact's
``harvest.json`` under
``"combiner"`` (:meth:`Combiner.to_dict`), and applied by :meth:`value_model.inference.Scorer.score`;
its logit is the candidate's final value and ``sigmoid(logit)`` its probability.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from value_model.metrics import normalise_candidate
from value_model.patch_features import ISSUE_FEATURES, PATCH_FEATURES, RELATIVE_FEATURES, task_patch_features

__all__ = [
    "CONSENSUS_FEATURES",
    "FEATURES",
    "OBJECTIVES",
    "VALUE",
    "Combiner",
    "Objective",
    "changed_files",
    "changed_lines",
    "changed_tokens",
    "consensus_features",
    "consensus_features_by_task",
    "cross_fitted_logits",
    "hunk_locations",
]

CONSENSUS_FEATURES = (
    "soft_consensus",
    "exact_share",
    "file_agreement",
    "added_consensus",
    "max_similarity",
    "token_consensus",
    "location_overlap",
    "relative_size",
    "touches_tests",
)
# Every input a combiner may use besides the value: set-level agreement, then the patch's own features.
FEATURES = (*CONSENSUS_FEATURES, *PATCH_FEATURES, *RELATIVE_FEATURES)
Objective = Literal["pointwise", "listwise", "pairwise"]
OBJECTIVES: tuple[Objective, ...] = ("pointwise", "listwise", "pairwise")
# The name of the neural value model's raw score among a combiner's inputs.
VALUE = "value"

_FILE = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|\S")
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_tests?\.py$|(^|/)conftest\.py$")


def changed_lines(patch: str) -> frozenset[str]:
    """The set of changed lines of a unified diff, each ``+``/``-`` prefixed and whitespace-collapsed;
    of any other candidate, its lines (:func:`~value_model.metrics.normalise_candidate`).

    Examples:
        >>> sorted(changed_lines("--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a  = 1\\n+a = 2\\n same\\n"))
        ['+a = 2', '-a = 1']
        >>> sorted(changed_lines('{"actions": [{"name": "cancel"}], "final_message": "Done."}'))
        ['+actions[]={"name": "cancel"}', '+final_message="Done."']
    """
    text = normalise_candidate(patch)
    return frozenset(text.splitlines()) if text else frozenset()


def changed_files(patch: str) -> frozenset[str]:
    """The files a unified diff touches (from its ``---``/``+++`` headers; ``/dev/null`` left out).

    Examples:
        >>> sorted(changed_files("--- a/pkg/x.py\\n+++ b/pkg/x.py\\n@@ -1 +1 @@\\n-a\\n+b\\n"))
        ['pkg/x.py']
    """
    files = set()
    for line in patch.splitlines():
        match = _FILE.match(line)
        if match and match.group(1) != "/dev/null":
            files.add(match.group(1))
    return frozenset(files)


def changed_tokens(patch: str) -> frozenset[str]:
    """The set of tokens on a diff's changed lines, each prefixed by its line's ``+``/``-``.

    Examples:
        >>> sorted(changed_tokens("--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a = 1\\n+a = 2\\n"))
        ['+2', '+=', '+a', '-1', '-=', '-a']
    """
    return frozenset(line[0] + token for line in changed_lines(patch) for token in _TOKEN.findall(line[1:]))


def hunk_locations(patch: str) -> frozenset[tuple[str, int]]:
    """The (file, line number) pairs of the pre-image that a diff's hunks span.

    Examples:
        >>> sorted(hunk_locations("--- a/x.py\\n+++ b/x.py\\n@@ -3,2 +3,2 @@\\n-a\\n+b\\n c\\n"))
        [('x.py', 3), ('x.py', 4)]
    """
    out: set[tuple[str, int]] = set()
    current: str | None = None
    for line in patch.splitlines():
        if line.startswith("--- "):
            match = _FILE.match(line)
            current = match.group(1) if match else None
            continue
        hunk = _HUNK.match(line)
        if hunk and current is not None and current != "/dev/null":
            start, length = int(hunk.group(1)), int(hunk.group(2) or 1)
            out.update((current, n) for n in range(start, start + length))
    return frozenset(out)


def _jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def consensus_features(candidates: Sequence[str], *, prompt: str | None = None) -> np.ndarray:
    """The :data:`FEATURES` of one task's candidates, as an ``[n, len(FEATURES)]`` array.

    Args:
        candidates: the task's candidate patches.
        prompt: the task's issue text; without it the :data:`ISSUE_FEATURES` are 0.

    Examples:
        >>> a = "--- a/f.py\\n+++ b/f.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
        >>> b = "--- a/f.py\\n+++ b/f.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 3\\n"
        >>> f = consensus_features([a, a, b])
        >>> dict(zip(CONSENSUS_FEATURES, f[0].round(3).tolist())) == {
        ...     "soft_consensus": 0.667, "exact_share": 0.5,
        ...     "file_agreement": 1.0, "added_consensus": 0.5, "max_similarity": 1.0,
        ...     "token_consensus": 0.857, "location_overlap": 1.0, "relative_size": 0.0, "touches_tests": 0.0}
        True
    """
    n = len(candidates)
    out = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if n == 0:
        return out
    lines = [changed_lines(c) for c in candidates]
    added = [frozenset(x for x in s if x.startswith("+")) for s in lines]
    files = [changed_files(c) for c in candidates]
    tokens = [changed_tokens(c) for c in candidates]
    locations = [hunk_locations(c) for c in candidates]
    keys = [normalise_candidate(c) for c in candidates]
    counts = Counter(keys)
    sizes = np.log1p([len(s) for s in lines])
    median = float(np.median(sizes))
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if others:
            sims = [_jaccard(lines[i], lines[j]) for j in others]
            out[i, 0] = float(np.mean(sims))
            out[i, 1] = (counts[keys[i]] - 1) / len(others)
            out[i, 2] = float(np.mean([_jaccard(files[i], files[j]) for j in others]))
            out[i, 3] = float(np.mean([_jaccard(added[i], added[j]) for j in others]))
            out[i, 4] = max(sims)
            out[i, 5] = float(np.mean([_jaccard(tokens[i], tokens[j]) for j in others]))
            out[i, 6] = float(np.mean([_jaccard(locations[i], locations[j]) for j in others]))
        out[i, 7] = sizes[i] - median
        out[i, 8] = float(any(_TEST_PATH.search(f) for f in files[i]))
    out[:, len(CONSENSUS_FEATURES):] = task_patch_features(candidates, prompt or "")
    return out


def consensus_features_by_task(
    task_ids: Sequence[str], contents: Sequence[str], *, prompts: Sequence[str] | None = None
) -> np.ndarray:
    """:func:`consensus_features` of every row, each computed among the rows of its own task.

    Args:
        task_ids: each row's task.
        contents: each row's candidate.
        prompts: each row's issue text (a task's first row's is used); ``None`` leaves the issue
            features 0.

    Returns:
        ``[len(task_ids), len(FEATURES)]``, rows in the input order.
    """
    if len(task_ids) != len(contents):
        raise ValueError(f"got {len(task_ids)} task ids but {len(contents)} contents")
    if prompts is not None and len(prompts) != len(contents):
        raise ValueError(f"got {len(prompts)} prompts but {len(contents)} contents: one per row, or None")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, task in enumerate(task_ids):
        groups[task].append(i)
    out = np.zeros((len(contents), len(FEATURES)), dtype=np.float64)
    for idx in groups.values():
        out[idx] = consensus_features([contents[i] for i in idx],
                                      prompt=None if prompts is None else prompts[idx[0]])
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class Combiner:
    """A logistic model over named inputs: consensus :data:`FEATURES` and, optionally, :data:`VALUE`.

    Attributes:
        inputs: the input names, in order (each one of :data:`FEATURES` or :data:`VALUE`).
        weights: one weight per input, applied to the standardised input.
        bias: the intercept.
        mean: per input, the mean subtracted before weighting.
        std: per input, the scale divided by (1 where an input was constant).
    """

    inputs: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float = 0.0
    mean: tuple[float, ...] = field(default=())
    std: tuple[float, ...] = field(default=())

    def __post_init__(self) -> None:
        problems = []
        unknown = [name for name in self.inputs if name not in (*FEATURES, VALUE)]
        if unknown:
            problems.append(f"unknown inputs {unknown}; known: {[*FEATURES, VALUE]}")
        n = len(self.inputs)
        if not self.mean:
            object.__setattr__(self, "mean", (0.0,) * n)
        if not self.std:
            object.__setattr__(self, "std", (1.0,) * n)
        if not (len(self.weights) == len(self.mean) == len(self.std) == n):
            problems.append(f"inputs, weights, mean and std need one entry each per input ({n})")
        if problems:
            raise ValueError("invalid Combiner: " + "; ".join(problems))

    @property
    def uses_issue(self) -> bool:
        """Whether an input reads the issue text (:data:`ISSUE_FEATURES`): scoring then needs the prompt."""
        return any(name in ISSUE_FEATURES for name in self.inputs)

    @property
    def uses_value(self) -> bool:
        """Whether the neural value is one of the inputs (if not, the backbone's score is not needed)."""
        return VALUE in self.inputs

    def design(self, features: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """The ``[n, len(inputs)]`` input matrix from consensus ``features`` (all :data:`FEATURES`) and
        raw ``values``.

        Raises:
            ValueError: the combiner uses the value but ``values`` is ``None``.
        """
        columns = []
        for name in self.inputs:
            if name == VALUE:
                if values is None:
                    raise ValueError("this combiner mixes in the value model's score: pass values")
                columns.append(np.asarray(values, dtype=np.float64))
            else:
                columns.append(features[:, FEATURES.index(name)])
        return np.stack(columns, axis=1) if columns else np.zeros((len(features), 0))

    def logits(self, features: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """The combined value (a logit) of each candidate."""
        x = (self.design(features, values) - np.asarray(self.mean)) / np.asarray(self.std)
        return self.bias + x @ np.asarray(self.weights, dtype=np.float64)

    def apply(
        self, candidates: Sequence[str], values: np.ndarray | None = None, *, prompt: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(combined values, probabilities) of one task's candidates, given the model's raw ``values``.

        Raises:
            ValueError: the combiner reads the issue (:attr:`uses_issue`) but ``prompt`` is ``None``.

        Examples:
            >>> c = Combiner(inputs=("soft_consensus",), weights=(1.0,))
            >>> a = "--- a/f\\n+++ b/f\\n@@ -1 +1 @@\\n-x\\n+y\\n"
            >>> combined, p = c.apply([a, a, "--- a/g\\n+++ b/g\\n@@ -1 +1 @@\\n-u\\n+v\\n"])
            >>> combined.tolist(), bool(p[0] > p[2])
            ([0.5, 0.5, 0.0], True)
        """
        if prompt is None and self.uses_issue:
            raise ValueError("this combiner reads the issue text "
                             f"({[n for n in self.inputs if n in ISSUE_FEATURES]}): pass prompt=")
        logits = self.logits(consensus_features(candidates, prompt=prompt), values)
        return logits, _sigmoid(logits)

    @classmethod
    def fit(
        cls,
        inputs: Sequence[str],
        features: np.ndarray,
        labels: Sequence[float],
        *,
        values: np.ndarray | None = None,
        l2: float = 1.0,
        steps: int = 200,
        objective: Objective = "pointwise",
        task_ids: Sequence[str] | None = None,
    ) -> Combiner:
        """Fit weights (and bias) by L2-regularised LBFGS on labelled candidates.

        Inputs are standardised first; the penalty ``l2 / 2 · Σ w²`` (the bias is not penalised) is
        added to the summed loss of ``objective``:

        * ``"pointwise"`` — log loss of each candidate (as scikit-learn's ``C = 1 / l2``);
        * ``"listwise"`` — per task with both outcomes, ``-log Σ_pos softmax(logits)``: the chance
          that a draw from the softmax over the task's candidates is a resolved one;
        * ``"pairwise"`` — per task, Bradley-Terry ``log(1 + exp(s_neg - s_pos))`` over its
          (resolved, unresolved) pairs.

        The within-task objectives cannot see a shift shared by a task's candidates, so their bias
        stays the base-rate log-odds and their probabilities are a ranking, not calibrated.

        Args:
            inputs: input names (:data:`FEATURES` and/or :data:`VALUE`).
            features: ``[n, len(FEATURES)]`` features of the examples.
            labels: binary labels (> 0.5 positive).
            values: the value model's raw scores, when ``VALUE`` is an input.
            l2: regularisation strength.
            steps: LBFGS iterations.
            objective: one of :data:`OBJECTIVES`.
            task_ids: each example's task (needed by the within-task objectives).

        Returns:
            The fitted combiner; with a single class it keeps zero weights and the base-rate bias.

        Raises:
            ValueError: unknown objective, or a within-task objective without ``task_ids``.
        """
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")
        if objective != "pointwise" and (task_ids is None or len(task_ids) != len(features)):
            raise ValueError(f"the {objective} objective compares a task's candidates: pass task_ids")
        unfitted = cls(inputs=tuple(inputs), weights=(0.0,) * len(inputs))
        x = unfitted.design(features, values)
        y = (np.asarray(labels, dtype=np.float64) > 0.5).astype(np.float64)
        mean = x.mean(axis=0) if len(x) else np.zeros(len(inputs))
        std = x.std(axis=0) if len(x) else np.ones(len(inputs))
        std = np.where(std > 1e-12, std, 1.0)
        rate = float(np.clip(y.mean(), 1e-3, 1 - 1e-3)) if len(y) else 0.5
        base = math.log(rate / (1 - rate))
        if len(y) < 2 or y.min() == y.max():
            return cls(inputs=tuple(inputs), weights=(0.0,) * len(inputs), bias=base,
                       mean=tuple(mean.tolist()), std=tuple(std.tolist()))
        xt = torch.tensor((x - mean) / std)
        loss_of = _loss(objective, torch.tensor(y), task_ids)
        params = torch.zeros(len(inputs) + 1, dtype=torch.float64, requires_grad=True)
        with torch.no_grad():
            params[-1] = base
        optimizer = torch.optim.LBFGS([params], max_iter=steps, line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = loss_of(xt @ params[:-1] + params[-1]) + 0.5 * l2 * (params[:-1] ** 2).sum()
            loss.backward()
            return loss

        optimizer.step(closure)
        fitted = params.detach().numpy()
        if not np.all(np.isfinite(fitted)):
            return unfitted
        return cls(inputs=tuple(inputs), weights=tuple(float(w) for w in fitted[:-1]), bias=float(fitted[-1]),
                   mean=tuple(mean.tolist()), std=tuple(std.tolist()))

    def to_dict(self) -> dict[str, Any]:
        """Plain values for ``harvest.json``."""
        return {"inputs": list(self.inputs), "weights": list(self.weights), "bias": self.bias,
                "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Combiner:
        """The inverse of :meth:`to_dict`.

        Raises:
            ValueError: unknown inputs or mismatched lengths.
        """
        return cls(inputs=tuple(data["inputs"]), weights=tuple(float(w) for w in data["weights"]),
                   bias=float(data.get("bias", 0.0)), mean=tuple(float(m) for m in data.get("mean", ())),
                   std=tuple(float(s) for s in data.get("std", ())))


def _loss(
    objective: Objective, y: torch.Tensor, task_ids: Sequence[str] | None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The summed loss of ``objective`` as a function of the logits (see :meth:`Combiner.fit`)."""
    if objective == "pointwise":
        return lambda s: torch.nn.functional.binary_cross_entropy_with_logits(s, y, reduction="sum")
    labels = y.numpy()
    groups: dict[str, list[int]] = defaultdict(list)
    for i, task in enumerate(task_ids or ()):
        groups[task].append(i)
    # Tasks where every candidate shares one outcome say nothing about the order within a task.
    mixed = [idx for idx in groups.values() if 0 < labels[idx].sum() < len(idx)]
    if objective == "pairwise":
        pairs = [(i, j) for idx in mixed for i in idx for j in idx if labels[i] > 0.5 > labels[j]]
        pos = torch.tensor([i for i, _ in pairs], dtype=torch.long)
        neg = torch.tensor([j for _, j in pairs], dtype=torch.long)
        return lambda s: torch.nn.functional.softplus(s[neg] - s[pos]).sum()
    members = [torch.tensor(idx, dtype=torch.long) for idx in mixed]
    positives = [torch.tensor([i for i in idx if labels[i] > 0.5], dtype=torch.long) for idx in mixed]
    return lambda s: sum((torch.logsumexp(s[m], 0) - torch.logsumexp(s[p], 0) for m, p in
                          zip(members, positives, strict=True)), torch.zeros((), dtype=s.dtype))


def cross_fitted_logits(
    inputs: Sequence[str],
    features: np.ndarray,
    labels: Sequence[float],
    task_ids: Sequence[str],
    *,
    values: np.ndarray | None = None,
    folds: int = 5,
    l2: float = 1.0,
    seed: int = 0,
    objective: Objective = "pointwise",
) -> np.ndarray:
    """Out-of-fold combiner logits: tasks are dealt into ``folds`` groups, and each group is scored by a
    :class:`Combiner` fitted on the other groups, so no candidate is scored by a fit that saw its task.

    This is how a combiner fitted on the validation tasks is itself evaluated honestly on them.

    Args:
        inputs: the combiner's inputs.
        features: ``[n, len(FEATURES)]`` features.
        labels: binary labels.
        task_ids: each row's task.
        values: the network's raw values, when ``VALUE`` is an input.
        folds: number of task groups (clipped to the number of tasks).
        l2: regularisation strength of each fit.
        seed: seed of the task shuffle.
        objective: the fit's objective (:data:`OBJECTIVES`).

    Returns:
        One logit per row, in the input order.
    """
    tasks = np.asarray(task_ids)
    y = np.asarray(labels, dtype=np.float64)
    unique = np.random.default_rng(seed).permutation(np.unique(tasks))
    folds = max(1, min(folds, len(unique)))
    fold_of = {task: k % folds for k, task in enumerate(unique)}
    which = np.array([fold_of[t] for t in tasks])
    out = np.zeros(len(tasks), dtype=np.float64)
    for k in range(folds):
        held, rest = which == k, which != k
        if not rest.any():  # one fold: nothing to fit on but the rows themselves
            rest = held
        rest_values = None if values is None else values[rest]
        combiner = Combiner.fit(inputs, features[rest], y[rest], values=rest_values, l2=l2,
                                objective=objective, task_ids=list(tasks[rest]))
        out[held] = combiner.logits(features[held], None if values is None else values[held])
    return out
