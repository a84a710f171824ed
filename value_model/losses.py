"""Training objectives and TD(λ) targets: pure functions on tensors.

The head's raw output ``v`` is a logit: ``sigmoid(v)`` is the model's estimate of the outcome (the
probability of success for binary labels, the expected reward in [0, 1] otherwise). Every objective
reads it that way, so objectives can be mixed in one weighted sum:

* ``bce`` — pointwise binary cross-entropy of ``v`` against the outcome label (the default);
* ``pairwise`` — Bradley-Terry within a group (a task): ``-log sigmoid(v_i - v_j)`` for every pair
  of the same group where ``label_i > label_j``;
* ``td`` — squared error between ``sigmoid(v)`` and a per-step TD(λ) target
  (:func:`td_lambda_targets`), for scoring next actions.

Each loss takes ``reduction``: ``"mean"`` for a stand-alone value, ``"sum"`` so that a caller
splitting one global batch over micro-batches and data-parallel ranks can divide by the global count
(:func:`loss_terms` returns the counts) and get exactly the full-batch mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch
import torch.nn.functional as F

__all__ = [
    "OBJECTIVES",
    "bce_loss",
    "group_ids",
    "loss_terms",
    "pair_count",
    "pairwise_loss",
    "td_lambda_targets",
    "td_loss",
]

OBJECTIVES = ("bce", "pairwise", "td")
Reduction = Literal["mean", "sum"]


def _reduce(losses: torch.Tensor, count: int, reduction: Reduction) -> torch.Tensor:
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.sum() / max(count, 1)
    raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def bce_loss(values: torch.Tensor, labels: torch.Tensor, *, reduction: Reduction = "mean") -> torch.Tensor:
    """Pointwise binary cross-entropy of logits ``values`` against ``labels`` in [0, 1].

    Examples:
        >>> round(bce_loss(torch.tensor([0.0]), torch.tensor([1.0])).item(), 4)
        0.6931
    """
    losses = F.binary_cross_entropy_with_logits(values.float(), labels.float(), reduction="none")
    return _reduce(losses, losses.numel(), reduction)


def _pair_mask(labels: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """``mask[i, j]``: i and j share a group and i is labelled strictly better than j."""
    same = groups.unsqueeze(1) == groups.unsqueeze(0)
    better = labels.unsqueeze(1) > labels.unsqueeze(0)
    return same & better


def pair_count(labels: torch.Tensor, groups: torch.Tensor) -> int:
    """How many (better, worse) pairs :func:`pairwise_loss` sees in a batch.

    Examples:
        >>> pair_count(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 0, 1]))
        2
    """
    return int(_pair_mask(labels, groups).sum())


def pairwise_loss(
    values: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, *, reduction: Reduction = "mean"
) -> torch.Tensor:
    """Bradley-Terry loss over every within-group pair with different labels.

    Args:
        values: logits ``[B]``.
        labels: outcomes ``[B]`` (binary or graded; only the order matters).
        groups: integer group ids ``[B]`` (one per task); pairs never cross groups.
        reduction: ``"mean"`` over pairs, or ``"sum"``.

    Returns:
        A scalar. With no pair in the batch it is ``0`` and still attached to the graph, so a
        data-parallel backward pass sees every parameter.

    Examples:
        >>> v = torch.tensor([2.0, 0.0, 5.0])
        >>> round(pairwise_loss(v, torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0, 0, 1])).item(), 4)
        0.1269
    """
    mask = _pair_mask(labels, groups)
    margins = values.float().unsqueeze(1) - values.float().unsqueeze(0)
    losses = F.softplus(-margins)[mask]  # -log sigmoid(v_i - v_j)
    return _reduce(losses, losses.numel(), reduction) + 0.0 * values.sum()


def td_loss(values: torch.Tensor, targets: torch.Tensor, *, reduction: Reduction = "mean") -> torch.Tensor:
    """Squared error between ``sigmoid(values)`` and TD(λ) targets in [0, 1].

    Examples:
        >>> td_loss(torch.tensor([0.0]), torch.tensor([0.5])).item()
        0.0
    """
    losses = (torch.sigmoid(values.float()) - targets.float()) ** 2
    return _reduce(losses, losses.numel(), reduction)


def td_lambda_targets(
    rewards: torch.Tensor, values: torch.Tensor | None, *, gamma: float, lam: float
) -> torch.Tensor:
    """λ-returns of one trajectory's actions, computed backwards from the end.

    ``G_t = r_t + gamma * ((1 - lam) * V_{t+1} + lam * G_{t+1})`` with ``G_{T-1} = r_{T-1}``: the last
    action is followed by the terminal state, whose value is 0. ``lam = 1`` gives the Monte-Carlo
    return (``values`` are not read and may be ``None``); ``lam = 0`` gives one-step TD targets that
    bootstrap entirely from the next action's value.

    Args:
        rewards: ``[T]`` reward received after each action (for outcome-only data: zeros, then the
            trajectory's final reward at ``T-1``).
        values: ``[T]`` current value estimates of each action (``sigmoid`` of the model's logits);
            required when ``lam < 1``. They are treated as constants (no gradient flows through).
        gamma: discount in [0, 1].
        lam: λ in [0, 1].

    Returns:
        ``[T]`` targets, float64.

    Raises:
        ValueError: ``gamma`` or ``lam`` outside [0, 1], shapes differ, or values are missing.

    Examples:
        >>> td_lambda_targets(torch.tensor([0.0, 0.0, 1.0]), None, gamma=0.5, lam=1.0).tolist()
        [0.25, 0.5, 1.0]
    """
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must be in [0, 1], got gamma={gamma}, lam={lam}")
    rewards = rewards.detach().to(torch.float64)
    if lam < 1.0:
        if values is None:
            raise ValueError("td_lambda_targets needs the model's values to bootstrap when lam < 1")
        if values.shape != rewards.shape:
            raise ValueError(f"rewards {tuple(rewards.shape)} and values {tuple(values.shape)} differ in shape")
        values = values.detach().to(torch.float64)
    targets = torch.zeros_like(rewards)
    following = 0.0  # G_{t+1}
    for t in range(rewards.shape[0] - 1, -1, -1):
        if t == rewards.shape[0] - 1:
            targets[t] = rewards[t]
        else:
            bootstrap = values[t + 1] if (lam < 1.0 and values is not None) else 0.0
            targets[t] = rewards[t] + gamma * ((1.0 - lam) * bootstrap + lam * following)
        following = targets[t]
    return targets


def loss_terms(
    values: torch.Tensor,
    *,
    labels: torch.Tensor,
    groups: torch.Tensor,
    targets: torch.Tensor | None,
    weights: Mapping[str, float],
    denominators: Mapping[str, float] | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted objective of a batch and each term's value.

    Args:
        values: logits ``[B]``.
        labels: outcome labels ``[B]``.
        groups: task group ids ``[B]`` (for ``pairwise``).
        targets: TD(λ) targets ``[B]`` (for ``td``).
        weights: objective name → weight; names are from :data:`OBJECTIVES`, zero weights are skipped.
        denominators: objective name → the count to divide that term's sum by (the global number of
            examples or pairs in the optimizer step). ``None``: each term is a mean over this batch.

    Returns:
        (the weighted loss to back-propagate, each term's unweighted value as a float).

    Raises:
        ValueError: an unknown objective, or ``td`` without targets.
    """
    total = values.sum() * 0.0
    parts: dict[str, float] = {}
    reduction: Reduction = "mean" if denominators is None else "sum"
    for name, weight in weights.items():
        if not weight:
            continue
        if name == "bce":
            term = bce_loss(values, labels, reduction=reduction)
        elif name == "pairwise":
            term = pairwise_loss(values, labels, groups, reduction=reduction)
        elif name == "td":
            if targets is None:
                raise ValueError("the td objective needs per-step targets (train on kind='action')")
            term = td_loss(values, targets, reduction=reduction)
        else:
            raise ValueError(f"unknown objective {name!r}; expected one of {OBJECTIVES}")
        if denominators is not None:
            term = term / max(float(denominators.get(name, 0.0)), 1.0)
        parts[name] = float(term.detach())
        total = total + weight * term
    return total, parts


def group_ids(keys: Sequence[str]) -> torch.Tensor:
    """Integer ids for string group keys (the same key, the same id), in first-seen order.

    Examples:
        >>> group_ids(["t1", "t2", "t1"]).tolist()
        [0, 1, 0]
    """
    seen: dict[str, int] = {}
    return torch.tensor([seen.setdefault(k, len(seen)) for k in keys], dtype=torch.long)
