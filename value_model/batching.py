"""Task-grouped batching, identical on every data-parallel rank.

An epoch is planned as a list of optimizer steps; a step is a list of micro-batches; a micro-batch
is a list of example indices. The plan depends only on the examples' groups, the sizes and the seed,
never on the rank, so every rank computes the same global batches and takes its share of each step
with :func:`rank_share`: micro-batch ``k`` of a step goes to rank ``k % world_size``. A single
process that accumulates all ``world_size x grad_accum_steps`` micro-batches of a step therefore
sees exactly the same micro-batches as a ``torchrun`` job, and — with losses normalised by
the step's global counts — computes the same gradient.

Grouping keeps a task's candidates in one micro-batch (the pairwise objective only compares
candidates that meet there): groups are shuffled, each group's members are shuffled, and whole
groups are packed into micro-batches; a group larger than a micro-batch is split over several.
With one group per example this is an ordinary seeded shuffle.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence

__all__ = ["plan_epoch", "rank_share"]


def plan_epoch(
    groups: Sequence[Hashable], *, micro_batch_size: int, micro_batches_per_step: int, seed: int
) -> list[list[list[int]]]:
    """Optimizer steps of one epoch over ``len(groups)`` examples.

    Args:
        groups: each example's group key (a task id), or a unique key per example for no grouping.
        micro_batch_size: the most examples in a micro-batch.
        micro_batches_per_step: micro-batches per optimizer step (``world_size x grad_accum_steps``).
        seed: shuffling seed (vary it per epoch).

    Returns:
        Steps, each exactly ``micro_batches_per_step`` non-empty micro-batches. The trailing examples
        that would make an incomplete step are spread over one last full step, whole groups to the
        least-filled micro-batch (a group is cut there only when there are fewer groups than
        micro-batches); when fewer examples than micro-batches remain, they sit this epoch out (each
        epoch shuffles anew).

    Raises:
        ValueError: a size is below 1.

    Examples:
        >>> plan_epoch(["a", "a", "b", "b", "c"], micro_batch_size=2, micro_batches_per_step=1, seed=0)
        [[[1, 0]], [[4]], [[2, 3]]]
    """
    if micro_batch_size < 1 or micro_batches_per_step < 1:
        raise ValueError("micro_batch_size and micro_batches_per_step must be >= 1")
    rng = random.Random(seed)
    members: dict[Hashable, list[int]] = {}
    for index, key in enumerate(groups):
        members.setdefault(key, []).append(index)
    order = list(members)
    rng.shuffle(order)
    micro: list[list[int]] = []
    current: list[int] = []
    for key in order:
        group = members[key][:]
        rng.shuffle(group)
        if current and len(current) + len(group) > micro_batch_size:
            micro.append(current)
            current = []
        while len(group) > micro_batch_size:
            micro.append(group[:micro_batch_size])
            group = group[micro_batch_size:]
        current.extend(group)
    if current:
        micro.append(current)
    full = len(micro) // micro_batches_per_step * micro_batches_per_step
    steps = [micro[i : i + micro_batches_per_step] for i in range(0, full, micro_batches_per_step)]
    rest = micro[full:]
    if sum(map(len, rest)) >= micro_batches_per_step:
        pieces = [run for batch in rest for run in _runs(batch, groups)]
        steps.append(_spread(pieces, micro_batches_per_step, micro_batch_size))
    return steps


def _runs(batch: list[int], groups: Sequence[Hashable]) -> list[list[int]]:
    """A micro-batch cut into its groups' pieces (a group's members sit next to each other)."""
    runs: list[list[int]] = []
    for index in batch:
        if runs and groups[runs[-1][-1]] == groups[index]:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _spread(pieces: list[list[int]], bins: int, capacity: int) -> list[list[int]]:
    """``bins`` non-empty micro-batches of at most ``capacity`` from pieces holding at least ``bins`` examples
    and at most ``(bins - 1) x capacity``: largest piece first into the emptiest micro-batch, so a piece
    is cut only where it fits nowhere whole, or where there are fewer pieces than micro-batches."""
    packed: list[list[list[int]]] = [[] for _ in range(bins)]
    load = [0] * bins
    for piece in sorted(pieces, key=len, reverse=True):
        while piece:
            target = min(range(bins), key=load.__getitem__)
            room = capacity - load[target]
            packed[target].append(piece[:room])
            load[target] += len(piece[:room])
            piece = piece[room:]
    for empty in [b for b in range(bins) if not load[b]]:
        donor = max(range(bins), key=load.__getitem__)  # holds one piece: it went to an empty micro-batch
        piece = packed[donor][0]
        moved = piece[len(piece) // 2 :]
        del piece[len(piece) // 2 :]
        packed[empty].append(moved)
        load[empty], load[donor] = len(moved), load[donor] - len(moved)
    return [[i for piece in batch for i in piece] for batch in packed]


def rank_share(step: Sequence[Sequence[int]], *, rank: int, world_size: int) -> list[list[int]]:
    """The micro-batches of ``step`` that ``rank`` runs: every ``world_size``-th, from ``rank``.

    Examples:
        >>> rank_share([[0], [1], [2], [3]], rank=1, world_size=2)
        [[1], [3]]
    """
    return [list(batch) for batch in step[rank::world_size]]
