"""The engine's pure parts: batch planning under a token budget, and the score cache with its keys."""

from __future__ import annotations

import numpy as np
import pytest

from reranker_service.engine import ScoreCache, batch_cost, plan_batches
from reranker_service.engine.cache import CachedScore, candidate_key, prefix_digest


class TestPlanBatches:
    def test_every_item_lands_in_exactly_one_batch(self):
        lengths = [37, 5, 120, 64, 64, 9, 300, 18]
        plan = plan_batches(lengths, max_tokens=256, max_items=3)
        assert sorted(i for batch in plan for i in batch) == list(range(len(lengths)))

    def test_batches_stay_within_the_token_budget_and_item_cap(self):
        lengths = [37, 5, 120, 64, 64, 9, 30, 18, 77, 101]
        for batch in plan_batches(lengths, max_tokens=256, max_items=4):
            assert len(batch) <= 4
            assert batch_cost([lengths[i] for i in batch]) <= 256

    def test_an_item_over_the_budget_gets_a_batch_of_its_own(self):
        assert plan_batches([10, 1000, 12], max_tokens=100, max_items=8) == [[0, 2], [1]]

    def test_items_are_sorted_by_length_so_padding_stays_small(self):
        plan = plan_batches([100, 10, 98, 12], max_tokens=200, max_items=2)
        assert plan == [[1, 3], [2, 0]]

    def test_a_prefix_group_is_counted_once_and_kept_together(self):
        lengths = [1010, 1020, 1030, 40]
        prefixes = [1000, 1000, 1000, 0]
        groups = ["req-1", "req-1", "req-1", None]
        plan = plan_batches(
            lengths, max_tokens=1100, max_items=8, prefixes=prefixes, groups=groups, padded=False
        )
        assert plan == [[3, 0, 1, 2]]
        assert batch_cost(lengths, prefixes=prefixes, groups=groups, padded=False) == 1000 + 10 + 20 + 30 + 40

    def test_a_group_split_by_the_budget_pays_its_prefix_in_each_batch(self):
        plan = plan_batches(
            [150, 150, 150], max_tokens=200, max_items=8, prefixes=[100] * 3, groups=["g"] * 3
        )
        assert plan == [[0, 1], [2]]  # 100 + 2 x 50 fits; 100 + 3 x 50 does not

    def test_invalid_budgets_are_refused(self):
        with pytest.raises(ValueError, match="max_tokens and max_items must be >= 1"):
            plan_batches([1], max_tokens=0, max_items=1)


class TestScoreCache:
    def test_least_recently_used_entry_is_evicted_first(self):
        cache = ScoreCache(2)
        for key in (b"a", b"b"):
            cache.put(key, CachedScore(value=1.0, truncated=False, n_tokens=1))
        assert cache.get(b"a") is not None  # a is now the most recent
        cache.put(b"c", CachedScore(value=2.0, truncated=False, n_tokens=1))

        assert cache.get(b"b") is None
        assert cache.get(b"a") is not None and cache.get(b"c") is not None
        assert (cache.hits, cache.misses) == (3, 1)

    def test_entries_with_embeddings_are_bounded_by_bytes_too(self):
        # With neighbours on every entry keeps its embedding: 65536 entries of a 2560-wide model would
        # hold ~680 MB, so the count alone does not bound the memory.
        cache = ScoreCache(100, max_bytes=3_500_000)
        big = np.zeros(250_000, dtype=np.float32)  # 1 MB
        for key in (b"a", b"b", b"c", b"d", b"e"):
            cache.put(key, CachedScore(value=1.0, truncated=False, n_tokens=1, embedding=big))
        cache.put(b"e", CachedScore(value=2.0, truncated=False, n_tokens=1, embedding=big))  # replaced

        assert len(cache) == 3 and cache.nbytes <= 3_500_000
        assert [k for k in (b"a", b"b", b"c", b"d", b"e") if cache.get(k) is not None] == [b"c", b"d", b"e"]
        cache.clear()
        assert (len(cache), cache.nbytes) == (0, 0)

    def test_an_entry_larger_than_the_byte_bound_is_still_kept_alone(self):
        cache = ScoreCache(10, max_bytes=100)
        cache.put(b"a", CachedScore(value=1.0, truncated=False, n_tokens=1, embedding=np.zeros(64)))
        cache.put(b"b", CachedScore(value=1.0, truncated=False, n_tokens=1, embedding=np.zeros(64)))
        assert len(cache) == 1 and cache.get(b"b") is not None

    def test_a_cache_of_size_zero_keeps_nothing(self):
        cache = ScoreCache(0)
        cache.put(b"a", CachedScore(value=1.0, truncated=False, n_tokens=1, embedding=np.zeros(2)))
        assert len(cache) == 0 and cache.get(b"a") is None

    def test_keys_differ_by_model_revision_prompt_context_options_and_candidate(self):
        base = candidate_key(prefix_digest("r1", "p", [], (None, "right")), "c")
        variants = [
            candidate_key(prefix_digest("r2", "p", [], (None, "right")), "c"),
            candidate_key(prefix_digest("r1", "q", [], (None, "right")), "c"),
            candidate_key(prefix_digest("r1", "p", [{"role": "user", "content": "x"}], (None, "right")), "c"),
            candidate_key(prefix_digest("r1", "p", [], (64, "right")), "c"),
            candidate_key(prefix_digest("r1", "p", [], (None, "right")), "d"),
        ]
        assert base not in variants and len(set(variants)) == len(variants)

    def test_a_prompt_ending_like_a_candidate_starts_does_not_collide(self):
        assert candidate_key(prefix_digest("r", "ab", [], ()), "c") != candidate_key(
            prefix_digest("r", "a", [], ()), "bc"
        )
