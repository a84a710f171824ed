"""Turn (task prompt, candidate) pairs into model inputs within a token budget.

Policy (the same at training and at serving time):

* the candidate gets up to two thirds of the budget, the task prompt the rest (and whatever the
  candidate leaves unused);
* the task prompt keeps its head; the candidate keeps its head and tail, with an explicit marker
  ``[... N tokens truncated ...]`` where its middle was cut;
* nothing is dropped: an over-long example is truncated, and the caller gets a ``truncated`` flag.

Cuts are made on token boundaries through the fast tokenizer's offset mapping, so the text that is
encoded is an exact slice of the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Encoded", "encode_pairs", "split_budget"]

_MARKER = "\n[... {n} tokens truncated ...]\n"
_MARKER_TOKENS = 12  # generous allowance for the marker itself


@dataclass(frozen=True)
class Encoded:
    """Tokenised inputs (``input_ids``, ``attention_mask``, maybe ``token_type_ids``) and per-example flags."""

    inputs: dict[str, Any]
    truncated: list[bool]


def split_budget(n_prompt: int, n_candidate: int, budget: int) -> tuple[int, int]:
    """Token counts (prompt, candidate) that fit ``budget``.

    Examples:
        >>> split_budget(100, 50, 300)
        (100, 50)
        >>> split_budget(1000, 1000, 300)
        (100, 200)
        >>> split_budget(1000, 20, 300)
        (280, 20)
    """
    if n_prompt + n_candidate <= budget:
        return n_prompt, n_candidate
    candidate = min(n_candidate, max(budget * 2 // 3, budget - n_prompt))
    prompt = min(n_prompt, budget - candidate)
    return prompt, candidate


def _cut_head(text: str, offsets: Sequence[tuple[int, int]], keep: int) -> str:
    if keep >= len(offsets):
        return text
    return text[: offsets[keep - 1][1]] if keep > 0 else ""


def _cut_head_tail(text: str, offsets: Sequence[tuple[int, int]], keep: int) -> str:
    n = len(offsets)
    if keep >= n:
        return text
    keep = max(keep - _MARKER_TOKENS, 2)
    head, tail = keep * 7 // 10, keep - keep * 7 // 10
    head_end = offsets[head - 1][1] if head else 0
    tail_start = offsets[n - tail][0]
    return text[:head_end] + _MARKER.format(n=n - head - tail) + text[tail_start:]


def encode_pairs(
    tokenizer: Any,  # noqa: ANN401 - a transformers fast tokenizer
    prompts: Sequence[str],
    candidates: Sequence[str],
    *,
    max_length: int,
    return_tensors: str | None = "pt",
) -> Encoded:
    """Encode (prompt, candidate) pairs under ``max_length`` tokens with the policy above.

    Args:
        tokenizer: a fast tokenizer (offset mappings are required).
        prompts: task prompts.
        candidates: candidate texts, same length as ``prompts``.
        max_length: total token budget including special tokens.
        return_tensors: passed to the tokenizer.

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(prompts) != len(candidates):
        raise ValueError(f"got {len(prompts)} prompts but {len(candidates)} candidates")
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    both = tokenizer(
        [*prompts, *candidates], add_special_tokens=False, return_offsets_mapping=True, truncation=False,
        verbose=False,  # over-long texts are expected here: they are cut below
    )["offset_mapping"]
    p_offsets, c_offsets = both[: len(prompts)], both[len(prompts) :]
    cut_prompts, cut_candidates, truncated = [], [], []
    for prompt, candidate, po, co in zip(prompts, candidates, p_offsets, c_offsets, strict=True):
        p_keep, c_keep = split_budget(len(po), len(co), budget)
        cut_prompts.append(_cut_head(prompt, po, p_keep))
        cut_candidates.append(_cut_head_tail(candidate, co, c_keep))
        truncated.append(p_keep < len(po) or c_keep < len(co))
    inputs = tokenizer(
        cut_prompts,
        cut_candidates,
        truncation="longest_first",  # safety net: re-tokenising a slice can shift a token or two
        max_length=max_length,
        padding=True,
        return_tensors=return_tensors,
    )
    return Encoded(inputs=dict(inputs), truncated=truncated)
