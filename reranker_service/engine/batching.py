"""Packing candidates into model batches under a token budget: pure functions, no model, no IO.

A batch's cost is what the model computes: every distinct shared prefix once, plus the suffixes
padded to the longest one (``padded=True``, encoder batches) or their sum (``padded=False``). Items
are sorted by (prefix group, length) first, so a batch holds sequences of similar length (little
padding) and a prefix group stays together (its prefix is computed once).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["batch_cost", "plan_batches"]


def batch_cost(
    lengths: Sequence[int],
    *,
    prefixes: Sequence[int] | None = None,
    groups: Sequence[Hashable | None] | None = None,
    padded: bool = True,
) -> int:
    """Tokens a batch of sequences costs.

    Args:
        lengths: each sequence's full length.
        prefixes: each sequence's shared-prefix length (counted once per group).
        groups: each sequence's prefix group.
        padded: suffixes are padded to the longest (else summed).

    Examples:
        >>> batch_cost([10, 30, 20])
        90
        >>> batch_cost([10, 30, 20], padded=False)
        60
        >>> batch_cost([110, 120], prefixes=[100, 100], groups=["a", "a"])
        140
    """
    if not lengths:
        return 0
    prefixes = prefixes or [0] * len(lengths)
    groups = groups or [None] * len(lengths)
    suffixes = [n - p for n, p in zip(lengths, prefixes, strict=True)]
    shared = {g: p for g, p in zip(groups, prefixes, strict=True) if g is not None and p}
    body = max(suffixes) * len(suffixes) if padded else sum(suffixes)
    return sum(shared.values()) + body


def plan_batches(
    lengths: Sequence[int],
    *,
    max_tokens: int,
    max_items: int,
    prefixes: Sequence[int] | None = None,
    groups: Sequence[Hashable | None] | None = None,
    padded: bool = True,
) -> list[list[int]]:
    """Split items into batches of at most ``max_items`` whose cost stays within ``max_tokens``.

    Items are taken sorted by (group, length); an item that alone exceeds the budget gets a batch of
    its own. Every index appears in exactly one batch.

    Args:
        lengths: each item's full length in tokens.
        max_tokens: token budget per batch (see :func:`batch_cost`).
        max_items: most items per batch.
        prefixes: shared-prefix length per item.
        groups: prefix group per item (``None``: no sharing).
        padded: how a batch's cost is counted.

    Returns:
        Batches of item indices.

    Examples:
        >>> plan_batches([5, 50, 6, 48], max_tokens=96, max_items=8)
        [[0, 2], [3], [1]]
        >>> plan_batches([5, 50, 6, 48], max_tokens=100, max_items=8, padded=False)
        [[0, 2, 3], [1]]
        >>> plan_batches([10, 10, 10], max_tokens=1000, max_items=2)
        [[0, 1], [2]]
    """
    if max_tokens < 1 or max_items < 1:
        raise ValueError(f"max_tokens and max_items must be >= 1, got {max_tokens} and {max_items}")
    n = len(lengths)
    prefixes = list(prefixes) if prefixes is not None else [0] * n
    groups = list(groups) if groups is not None else [None] * n
    # str() of the group sorts None and mixed group types together deterministically
    order = sorted(range(n), key=lambda i: ("" if groups[i] is None else str(groups[i]), lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = total = shared = 0  # the current batch's longest suffix, suffix sum, prefix sum
    seen: set[Hashable] = set()
    for i in order:
        suffix = lengths[i] - prefixes[i]
        new_group = groups[i] is not None and prefixes[i] > 0 and groups[i] not in seen
        cost = (
            shared
            + (prefixes[i] if new_group else 0)
            + (max(longest, suffix) * (len(current) + 1) if padded else total + suffix)
        )
        if current and (len(current) + 1 > max_items or cost > max_tokens):
            batches.append(current)
            current, longest, total, shared, seen = [], 0, 0, 0, set()
            new_group = groups[i] is not None and prefixes[i] > 0
        current.append(i)
        longest, total = max(longest, suffix), total + suffix
        if new_group:
            seen.add(groups[i])
            shared += prefixes[i]
    if current:
        batches.append(current)
    return batches
