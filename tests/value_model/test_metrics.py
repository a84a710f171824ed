"""Selection metrics and baselines, checked against hand computations on a small fixture."""

from __future__ import annotations

import math

import pytest

from value_model.metrics import (
    auroc,
    best_at_k_curve,
    brier_score,
    expected_calibration_error,
    majority_vote_scores,
    normalise_patch,
    pass_at_k_curve,
    patch_length_scores,
    reliability_bins,
    selection_metrics,
    within_task_auroc,
)

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


NAN = float("nan")


class TestMissingValuesAreRefused:
    """A NaN compares false: a NaN score used to rank first (AUROC 1.0) or join the top tie, a NaN label
    counted as a failure. Each metric now refuses them by name."""

    @pytest.mark.parametrize(
        ("metric", "args", "what"),
        [
            (auroc, ([0, 1, 1], [0.1, NAN, 0.2]), "scores"),
            (auroc, ([0, None, 1], [0.1, 0.3, 0.2]), "labels"),
            (within_task_auroc, (["a"] * 3, [0, 1, 1], [0.1, NAN, 0.2]), "scores"),
            (best_at_k_curve, ([0, 1], [0.2, NAN], 2), "scores"),
            (best_at_k_curve, ([1, NAN], [0.1, 0.2], 2), "labels"),
            (pass_at_k_curve, ([1, NAN], 2), "labels"),
            (selection_metrics, (["a", "a"], [0, 1], [0.1, NAN]), "scores"),
            (selection_metrics, (["a", "a"], [1, None], [0.2, 0.1]), "labels"),
            (brier_score, ([0, NAN], [0.1, 0.2]), "labels"),
            (brier_score, ([0, 1], [0.1, NAN]), "probabilities"),
            (expected_calibration_error, ([0, 1], [0.2, NAN]), "probabilities"),
            (reliability_bins, ([0, 1], [0.5, math.inf]), "probabilities"),
        ],
    )
    def test_a_missing_or_infinite_value_is_refused_by_name(self, metric, args, what):
        with pytest.raises(ValueError, match=f"^{what} hold 1 missing .* the first at index 1"):
            metric(*args)

    def test_nothing_to_measure_is_an_error_not_a_nan(self):
        with pytest.raises(ValueError, match="empty"):
            selection_metrics([], [], [])
        with pytest.raises(ValueError, match="at least one candidate"):
            pass_at_k_curve([], 2)
        with pytest.raises(ValueError, match="max_k must be >= 1"):
            best_at_k_curve([1, 0], [0.2, 0.1], 0)


class TestReliabilityBins:
    @pytest.mark.parametrize("n_bins", [7, 10, 20, 100])
    def test_a_probability_on_an_edge_starts_the_bin_above_it(self, n_bins):
        # b / n_bins, as a user's probabilities would hold it (0.29, 0.7, 5/7): exactly bin b, whatever
        # float rounding does to b / n_bins * n_bins (0.29 * 100 = 28.999999999999996).
        edges = [b / n_bins for b in range(n_bins)]
        counts, _, _ = reliability_bins([0] * n_bins, edges, n_bins=n_bins)
        assert counts.tolist() == [1.0] * n_bins
        assert reliability_bins([1], [1.0], n_bins=n_bins)[0][-1] == 1.0  # 1.0 closes the last bin

    def test_ece_puts_0_29_with_0_295_at_100_bins(self):
        # one bin [0.29, 0.30) holds both: |0.2925 - 0.5| = 0.2075; with 0.29 in the bin below it was
        # (|0.29 - 0| + |0.295 - 1|) / 2 = 0.4975
        assert expected_calibration_error([0, 1], [0.29, 0.295], n_bins=100) == pytest.approx(0.2075)


class TestEmptyCandidatesInBaselines:
    """Agentless's majority vote (agentless/repair/rerank.py) skips empty normalised patches; an empty
    submission is what an agent that gave up sends, and several of them must not outvote real fixes."""

    NO_OP = "diff --git a/r.py b/r.py\nnew file mode 100644\n--- /dev/null\n+++ b/r.py\n@@ -0,0 +1,1 @@\n+\n"

    def test_empty_submissions_cast_no_vote(self):
        contents = ["", "", self.NO_OP, "+fix\n", "+other\n"]
        assert majority_vote_scores(["t"] * 5, contents) == [0.0, 0.0, 0.0, 1.0, 1.0]
        # the pick is among the real patches: one success in two
        assert selection_metrics(["t"] * 5, [0, 0, 0, 1, 0], majority_vote_scores(["t"] * 5, contents))[
            "best_at_1"] == pytest.approx(0.5)

    def test_a_task_of_empty_submissions_only_is_a_tie(self):
        assert majority_vote_scores(["t", "t"], ["", "  \n"]) == [0.0, 0.0]

    def test_shortest_patch_ranks_an_empty_submission_last(self):
        assert patch_length_scores(["+a\n+b\n", "", self.NO_OP, "+a\n"]) == [-2.0, -3.0, -3.0, -1.0]
