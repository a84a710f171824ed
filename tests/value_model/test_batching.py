"""Task-grouped batch planning: a task's candidates stay together, every rank plans the same steps."""

from __future__ import annotations

import pytest

from value_model.batching import plan_epoch, rank_share

# 7 tasks of 1-6 candidates, like the SWE-bench Lite candidate sets
GROUPS = [f"task{t}" for t, n in enumerate([5, 6, 1, 3, 6, 2, 4]) for _ in range(n)]


def _indices(steps):
    return [i for step in steps for batch in step for i in batch]


class TestPlanEpoch:
    def test_every_example_appears_at_most_once_and_only_stragglers_wait(self):
        steps = plan_epoch(GROUPS, micro_batch_size=6, micro_batches_per_step=2, seed=0)
        seen = _indices(steps)
        assert len(seen) == len(set(seen))
        assert len(GROUPS) - len(seen) < 2  # fewer left over than micro-batches per step

    def test_a_task_that_fits_a_micro_batch_is_never_split(self):
        steps = plan_epoch(GROUPS, micro_batch_size=6, micro_batches_per_step=1, seed=3)
        for step in steps:
            for batch in step:
                for task in {GROUPS[i] for i in batch}:
                    assert sum(GROUPS[i] == task for i in batch) == GROUPS.count(task)

    @pytest.mark.parametrize("per_step", [2, 3, 4])
    def test_the_last_step_keeps_tasks_whole_when_it_has_a_task_per_micro_batch(self, per_step):
        # the stragglers of an epoch fill one last step; a task there used to be cut in two (its pairs
        # lost) when the examples were spread evenly; now only a step with fewer tasks than micro-batches
        # cuts one
        for seed in range(30):
            for step in plan_epoch(GROUPS, micro_batch_size=6, micro_batches_per_step=per_step, seed=seed):
                tasks = {GROUPS[i] for batch in step for i in batch}
                if len(tasks) < per_step:
                    continue
                for batch in step:
                    for task in {GROUPS[i] for i in batch}:
                        assert sum(GROUPS[i] == task for i in batch) == GROUPS.count(task), (seed, step)
                assert all(len(batch) <= 6 for batch in step)

    def test_a_task_larger_than_a_micro_batch_is_split_over_several(self):
        steps = plan_epoch(["big"] * 10, micro_batch_size=4, micro_batches_per_step=1, seed=0)
        assert sorted(len(s[0]) for s in steps) == [2, 4, 4]

    def test_every_step_has_exactly_the_asked_number_of_non_empty_micro_batches(self):
        for per_step in (1, 2, 3, 4):
            for step in plan_epoch(GROUPS, micro_batch_size=4, micro_batches_per_step=per_step, seed=1):
                assert len(step) == per_step and all(step)

    def test_the_plan_depends_on_the_seed_only(self):
        a = plan_epoch(GROUPS, micro_batch_size=6, micro_batches_per_step=2, seed=5)
        assert a == plan_epoch(GROUPS, micro_batch_size=6, micro_batches_per_step=2, seed=5)
        assert a != plan_epoch(GROUPS, micro_batch_size=6, micro_batches_per_step=2, seed=6)

    def test_unique_keys_give_an_ordinary_shuffle_into_full_batches(self):
        steps = plan_epoch(list(range(20)), micro_batch_size=4, micro_batches_per_step=1, seed=0)
        assert [len(s[0]) for s in steps] == [4] * 5
        assert sorted(_indices(steps)) == list(range(20))

    def test_sizes_below_one_are_refused(self):
        with pytest.raises(ValueError, match="must be >= 1"):
            plan_epoch(GROUPS, micro_batch_size=0, micro_batches_per_step=1, seed=0)


class TestRankShare:
    def test_the_ranks_shares_partition_each_step(self):
        for step in plan_epoch(GROUPS, micro_batch_size=3, micro_batches_per_step=4, seed=0):
            shares = [rank_share(step, rank=r, world_size=2) for r in range(2)]
            assert all(len(s) == 2 for s in shares)
            assert sorted(i for s in shares for b in s for i in b) == sorted(i for b in step for i in b)
