"""Selection metrics and baselines, checked against hand computations on a small fixture."""

from __future__ import annotations

import math

import pytest

from value_model.metrics import auroc, majority_vote_scores, normalise_patch, patch_length_scores, selection_metrics

# Three tasks: t1 has a clear winner, t2 a tie between a positive and a negative, t3 no positive at all.
TASKS = ["t1", "t1", "t1", "t2", "t2", "t3", "t3"]
LABELS = [0, 1, 0, 1, 0, 0, 0]
SCORES = [0.2, 0.9, 0.1, 0.5, 0.5, 0.3, 0.7]


class TestSelectionMetrics:
    def test_best_at_1_averages_ties_and_matches_a_hand_computation(self):
        m = selection_metrics(TASKS, LABELS, SCORES)
        # t1: picks the positive -> 1; t2: tie of {1, 0} -> 0.5; t3: 0.
        assert m["best_at_1"] == pytest.approx((1 + 0.5 + 0) / 3)
        # random: t1 1/3, t2 1/2, t3 0
        assert m["random"] == pytest.approx((1 / 3 + 1 / 2 + 0) / 3)
        assert m["oracle"] == pytest.approx(2 / 3)
        expected_gap = (m["best_at_1"] - m["random"]) / (m["oracle"] - m["random"])
        assert m["gap_closed"] == pytest.approx(expected_gap)
        assert m["n_tasks"] == 3 and m["n_candidates"] == 7

    def test_gap_closed_is_zero_when_no_task_has_a_positive(self):
        m = selection_metrics(["a", "a"], [0, 0], [1.0, 0.0])
        assert m["gap_closed"] == 0.0 and m["oracle"] == 0.0

    def test_a_perfect_scorer_closes_the_whole_gap(self):
        assert selection_metrics(TASKS, LABELS, LABELS)["gap_closed"] == pytest.approx(1.0)

    def test_mismatched_lengths_raise(self):
        with pytest.raises(ValueError, match="same length"):
            selection_metrics(["a"], [1, 0], [0.5])


class TestAuroc:
    def test_auroc_matches_pairwise_counting_with_ties_as_half(self):
        # positives {0.9, 0.5}, negatives {0.2, 0.1, 0.5, 0.3, 0.7}: wins 5 + (2 + 0.5 tie)... count by hand
        pos, neg = [0.9, 0.5], [0.2, 0.1, 0.5, 0.3, 0.7]
        wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
        assert auroc(LABELS, SCORES) == pytest.approx(wins / 10)

    def test_auroc_is_nan_with_one_class(self):
        assert math.isnan(auroc([0, 0], [0.1, 0.2]))


class TestBaselines:
    def test_majority_vote_counts_identical_changes_ignoring_whitespace_and_context(self):
        a = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n ctx\n-x  =  1\n+x = 2\n"
        b = "--- a/x\n+++ b/x\n@@ -3 +3 @@\n other context\n-x = 1\n+x   = 2\n"
        c = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x = 1\n+x = 3\n"
        assert normalise_patch(a) == normalise_patch(b)
        assert majority_vote_scores(["t", "t", "t", "u"], [a, b, c, a]) == [2.0, 2.0, 1.0, 1.0]

    def test_patch_length_prefers_fewer_changed_lines(self):
        short, long = "+a\n", "+a\n+b\n-c\n"
        assert patch_length_scores([short, long]) == [-1.0, -3.0]
