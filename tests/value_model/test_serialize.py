"""The token-budget serializer: what is kept, what is cut, and that nothing is silently dropped."""

from __future__ import annotations

import pytest

from value_model.serialize import encode_pairs, split_budget


class TestSplitBudget:
    @pytest.mark.parametrize(
        ("n_prompt", "n_candidate", "budget", "expected"),
        [(10, 10, 100, (10, 10)), (500, 500, 90, (30, 60)), (5, 500, 90, (5, 85)), (500, 5, 90, (85, 5))],
    )
    def test_split_gives_the_candidate_two_thirds_and_lends_unused_budget(self, n_prompt, n_candidate, budget, expected):
        assert split_budget(n_prompt, n_candidate, budget) == expected
        assert sum(split_budget(n_prompt, n_candidate, budget)) <= budget


class TestEncodePairs:
    def test_short_pairs_are_encoded_whole_and_not_flagged(self, minilm_tokenizer):
        encoded = encode_pairs(minilm_tokenizer, ["fix the parser"], ["diff --git a/p.py"], max_length=64)
        assert encoded.truncated == [False]
        text = minilm_tokenizer.decode(encoded.inputs["input_ids"][0], skip_special_tokens=True)
        assert "fix the parser" in text and "diff" in text

    def test_long_candidate_keeps_head_and_tail_with_a_marker(self, minilm_tokenizer):
        candidate = "HEADSTART " + " ".join(f"line{i}" for i in range(600)) + " TAILEND"
        encoded = encode_pairs(minilm_tokenizer, ["TASKHEAD " + "word " * 400], [candidate], max_length=128)
        ids = encoded.inputs["input_ids"][0]
        assert len(ids) <= 128
        assert encoded.truncated == [True]
        text = minilm_tokenizer.decode(ids, skip_special_tokens=True)
        assert "taskhead" in text  # the task head survives
        assert "headstart" in text and "tailend" in text  # candidate head and tail survive
        assert "tokens truncated" in text  # the cut is marked

    def test_every_batch_row_respects_the_budget(self, minilm_tokenizer):
        prompts = ["short", "x " * 1000, "y " * 50]
        candidates = ["z " * 1000, "short", "w " * 50]
        encoded = encode_pairs(minilm_tokenizer, prompts, candidates, max_length=96)
        assert encoded.inputs["input_ids"].shape[1] <= 96
        assert encoded.truncated == [True, True, True]

    def test_mismatched_inputs_raise(self, minilm_tokenizer):
        with pytest.raises(ValueError, match="2 prompts but 1 candidates"):
            encode_pairs(minilm_tokenizer, ["a", "b"], ["c"], max_length=32)
