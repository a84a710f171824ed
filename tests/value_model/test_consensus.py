"""Set-level consensus features, the combiner, and joint scoring through :class:`value_model.Scorer`.

The features are checked against values computed by hand on three tiny diffs; the combiner's fit,
serialisation and cross-fitting on synthetic data; the joint scorer on the real SWE-bench Lite lake
with a tiny random encoder.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from value_model.config import TrainConfig
from value_model.consensus import (
    CONSENSUS_FEATURES,
    FEATURES,
    VALUE,
    Combiner,
    changed_files,
    changed_lines,
    changed_tokens,
    consensus_features,
    consensus_features_by_task,
    cross_fitted_logits,
    hunk_locations,
)
from value_model.data import load_examples, split_by_task
from value_model.inference import Scorer
from value_model.metrics import run_prior_scores, selection_metrics
from value_model.model import ValueModel
from value_model.trainer import baselines, fit_combiner

# A and B make the same edit of f.py (B with other whitespace); C edits f.py differently and adds a test.
A = ("diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -10,3 +10,3 @@ def g():\n"
     "     x = 1\n-    y = x\n+    y = x + 1\n     return y\n")
B = "--- a/f.py\n+++ b/f.py\n@@ -10,3 +10,3 @@\n     x = 1\n-    y =  x\n+    y = x  + 1\n     return y\n"
C = ("--- a/f.py\n+++ b/f.py\n@@ -11 +11 @@\n-    y = x\n+    y = 2\n"
     "--- /dev/null\n+++ b/tests/test_f.py\n@@ -0,0 +1 @@\n+assert g() == 2\n")


def feature(values: np.ndarray, name: str) -> np.ndarray:
    return values[:, FEATURES.index(name)]


class TestParsing:
    def test_changed_lines_are_signed_and_whitespace_collapsed(self):
        assert changed_lines(A) == changed_lines(B) == {"-y = x", "+y = x + 1"}

    def test_changed_files_skip_dev_null(self):
        assert changed_files(C) == {"f.py", "tests/test_f.py"}

    def test_tokens_carry_the_sign_of_their_line(self):
        assert changed_tokens(A) == {"-y", "-=", "-x", "+y", "+=", "+x", "++", "+1"}

    def test_hunk_locations_span_the_pre_image_lines(self):
        assert hunk_locations(A) == {("f.py", 10), ("f.py", 11), ("f.py", 12)}
        assert hunk_locations(C) == {("f.py", 11)}  # the new file has no pre-image


class TestFeatures:
    def test_features_match_a_hand_computation(self):
        f = consensus_features([A, B, C])
        # lines: A = B = {-y = x, +y = x + 1}; C = {-y = x, +y = 2, +assert g() == 2}: J(A, C) = 1/4
        np.testing.assert_allclose(feature(f, "soft_consensus"), [(1 + 0.25) / 2, (1 + 0.25) / 2, 0.25])
        np.testing.assert_allclose(feature(f, "max_similarity"), [1, 1, 0.25])
        np.testing.assert_allclose(feature(f, "exact_share"), [0.5, 0.5, 0])
        # files: {f.py} vs {f.py, tests/test_f.py}: J = 1/2
        np.testing.assert_allclose(feature(f, "file_agreement"), [0.75, 0.75, 0.5])
        # added lines: {+y = x + 1} vs {+y = 2, +assert g() == 2}: J = 0
        np.testing.assert_allclose(feature(f, "added_consensus"), [0.5, 0.5, 0])
        # tokens (one per identifier, number or other character): A has 8; C has -y -= -x +y += +2
        # +assert +g +( +) = 10; they share -y -= -x +y += = 5
        j_ac = 5 / (8 + 10 - 5)
        np.testing.assert_allclose(feature(f, "token_consensus"), [(1 + j_ac) / 2, (1 + j_ac) / 2, j_ac])
        # locations: {10, 11, 12} vs {11}: J = 1/3
        np.testing.assert_allclose(feature(f, "location_overlap"), [(1 + 1 / 3) / 2, (1 + 1 / 3) / 2, 1 / 3])
        np.testing.assert_allclose(feature(f, "relative_size"), [0, 0, np.log(4) - np.log(3)])
        np.testing.assert_allclose(feature(f, "touches_tests"), [0, 0, 1])

    def test_a_lone_candidate_has_no_agreement(self):
        f = consensus_features([A])
        agreement = [n for n in CONSENSUS_FEATURES if n not in ("relative_size", "touches_tests")]
        assert all(feature(f, n)[0] == 0 for n in agreement)

    def test_features_by_task_only_compare_candidates_of_the_same_task(self):
        f = consensus_features_by_task(["t1", "t2", "t1"], [A, B, C])
        np.testing.assert_allclose(feature(f, "soft_consensus"), [0.25, 0, 0.25])

    def test_mismatched_lengths_are_refused(self):
        with pytest.raises(ValueError, match="2 task ids but 1 contents"):
            consensus_features_by_task(["t1", "t2"], [A])


# Two answers that take the same two actions (keys in another order, re-indented) and one that cancels.
ANSWER_1 = ('{"actions": [{"name": "get_user", "arguments": {"id": 7}}, '
            '{"name": "refund", "arguments": {"amount": 5}}]}')
ANSWER_2 = """{
  "actions": [
    {"arguments": {"id": 7}, "name": "get_user"},
    {"arguments": {"amount": 5}, "name": "refund"}
  ]
}"""
ANSWER_3 = '{"actions": [{"name": "get_user", "arguments": {"id": 7}}, {"name": "cancel", "arguments": {}}]}'


class TestAnswers:
    """Candidates that are not diffs (answers, actions) are compared on their own lines."""

    def test_json_answers_normalise_alike_whatever_their_layout(self):
        assert changed_lines(ANSWER_1) == changed_lines(ANSWER_2) == {
            '+actions[]={"arguments": {"id": 7}, "name": "get_user"}',
            '+actions[]={"arguments": {"amount": 5}, "name": "refund"}',
        }
        assert changed_files(ANSWER_1) == frozenset() and hunk_locations(ANSWER_1) == frozenset()

    def test_answer_features_match_a_hand_computation(self):
        f = consensus_features([ANSWER_1, ANSWER_2, ANSWER_3])
        # lines: 1 = 2 = {get_user, refund}; 3 = {get_user, cancel}: J(1, 3) = 1/3
        np.testing.assert_allclose(feature(f, "soft_consensus"), [(1 + 1 / 3) / 2, (1 + 1 / 3) / 2, 1 / 3])
        np.testing.assert_allclose(feature(f, "exact_share"), [0.5, 0.5, 0])
        np.testing.assert_allclose(feature(f, "max_similarity"), [1, 1, 1 / 3])
        for name in ("file_agreement", "location_overlap", "touches_tests"):
            assert not feature(f, name).any()

    def test_json_nested_too_deep_to_walk_is_compared_as_text(self):
        deep = "[" * 5000 + "]" * 5000  # json.loads raises RecursionError, not ValueError
        assert changed_lines(deep) == {"+" + deep}

    def test_plain_text_answers_agree_on_their_lines(self):
        from value_model.metrics import majority_vote_scores

        answers = ["The answer is  42.", "the answer is 41.", "The answer is 42."]
        assert majority_vote_scores(["t"] * 3, answers) == [2.0, 1.0, 2.0]
        np.testing.assert_allclose(feature(consensus_features(answers), "exact_share"), [0.5, 0, 0.5])

    def test_real_tau_bench_answers_get_agreement_features(self, agent_lake):
        """Before, every feature of an answer was 0 and majority vote tied all of a task's answers."""
        from value_model.metrics import majority_vote_scores

        rows = load_examples(agent_lake, kind="answer").frame.sort("candidate_id")
        tasks, contents = rows["task_id"].to_list(), rows["content"].to_list()
        f = consensus_features_by_task(tasks, contents)
        shared = [t for t in set(tasks) if tasks.count(t) > 1]
        assert len(shared) >= 2
        for task in shared:
            idx = [i for i, t in enumerate(tasks) if t == task]
            assert feature(f, "token_consensus")[idx].min() > 0  # the same tools and ids recur
            assert len(set(feature(f, "token_consensus")[idx].round(6))) > 1  # and they tell answers apart
        assert not feature(f, "file_agreement").any()
        # No two trials of these tasks took exactly the same actions and said the same final message.
        assert set(majority_vote_scores(tasks, contents)) == {1.0}


class TestCombiner:
    @staticmethod
    def synthetic(n_tasks: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
        rng = np.random.default_rng(seed)
        features = rng.normal(size=(4 * n_tasks, len(FEATURES)))
        logits = 3 * features[:, FEATURES.index("soft_consensus")]
        labels = (rng.random(len(logits)) < 1 / (1 + np.exp(-logits))).astype(float)
        return features, labels, [f"t{i // 4}" for i in range(len(labels))]

    def test_fitting_weights_the_informative_input_and_not_the_noise(self):
        features, labels, _ = self.synthetic()
        combiner = Combiner.fit(["soft_consensus", "relative_size"], features, labels)
        assert combiner.weights[0] > 1 and abs(combiner.weights[1]) < 0.5

    def test_a_round_trip_through_json_keeps_the_scores(self):
        features, labels, _ = self.synthetic()
        values = np.linspace(-1, 1, len(labels))
        combiner = Combiner.fit([VALUE, "soft_consensus"], features, labels, values=values)
        again = Combiner.from_dict(json.loads(json.dumps(combiner.to_dict())))
        np.testing.assert_allclose(again.logits(features, values), combiner.logits(features, values))

    def test_a_value_input_needs_values(self):
        combiner = Combiner(inputs=(VALUE,), weights=(1.0,))
        assert combiner.uses_value
        with pytest.raises(ValueError, match="pass values"):
            combiner.logits(np.zeros((2, len(FEATURES))))

    def test_unknown_inputs_are_refused(self):
        with pytest.raises(ValueError, match="unknown inputs"):
            Combiner(inputs=("system_name",), weights=(1.0,))

    def test_one_class_keeps_zero_weights_and_the_base_rate(self):
        combiner = Combiner.fit(["soft_consensus"], np.ones((3, len(FEATURES))), [0, 0, 0])
        assert combiner.weights == (0.0,) and combiner.bias < -5

    def test_cross_fitting_with_one_fold_per_task_is_leave_one_task_out(self):
        features, labels, tasks = self.synthetic(n_tasks=6)
        held_out = cross_fitted_logits(["soft_consensus"], features, labels, tasks, folds=6)
        rows = np.array([t == "t3" for t in tasks])
        alone = Combiner.fit(["soft_consensus"], features[~rows], labels[~rows])
        np.testing.assert_allclose(held_out[rows], alone.logits(features[rows]))

    def test_config_accepts_none_and_refuses_unknown_inputs(self):
        assert TrainConfig(combiner=("none",)).combiner == ()
        with pytest.raises(ValueError, match="unknown combiner inputs"):
            TrainConfig(combiner=("value", "run_id"))


@pytest.fixture(scope="module")
def lite(lite_lake) -> pl.DataFrame:
    """The labelled, non-empty SWE-bench Lite candidates."""
    return load_examples(lite_lake).frame


class TestOnLite:
    def test_soft_consensus_alone_beats_random_on_lite(self, lite):
        tasks, labels = lite.get_column("task_id").to_list(), lite.get_column("label").to_numpy()
        f = consensus_features_by_task(tasks, lite.get_column("content").to_list())
        m = selection_metrics(tasks, labels, feature(f, "soft_consensus"))
        assert m["best_at_1"] > m["random"] + 0.015

    def test_the_best_single_run_baseline_reads_run_rates_from_training_only(self, lite):
        train, val = split_by_task(lite, val_fraction=0.2, seed=0)
        out = baselines(val, train=train)
        prior = run_prior_scores(train.get_column("run_id").to_list(), train.get_column("label").to_list(),
                                 val.get_column("run_id").to_list())
        assert out["best_single_run"] == selection_metrics(val.get_column("task_id").to_list(),
                                                           val.get_column("label").to_numpy(), prior)

    def test_the_scorer_scores_a_task_jointly_and_reloads_its_combiner(self, lite, tiny_encoder_dir,
                                                                        tmp_path):
        _, val = split_by_task(lite, val_fraction=0.2, seed=0)
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        config = TrainConfig(backbone=str(tiny_encoder_dir), max_length=32)
        scorer = Scorer(model=model, tokenizer=tokenizer, max_length=32)
        tasks = val.get_column("task_id").to_list()
        raw = np.zeros(val.height)
        for task in dict.fromkeys(tasks):
            rows = [i for i, t in enumerate(tasks) if t == task]
            raw[rows] = scorer.score("issue", [val["content"][i] for i in rows]).values
        combiner, metrics = fit_combiner(val, raw, config)
        assert combiner is not None and combiner.inputs == config.combiner
        assert 0 <= metrics["best_at_1"] <= metrics["oracle"]
        directory = model.save(tmp_path / "model", tokenizer, max_length=32, combiner=combiner.to_dict())
        loaded = Scorer.from_directory(directory)
        task = tasks[0]
        contents = [c for c, t in zip(val.get_column("content"), tasks, strict=True) if t == task]
        scored = loaded.score("issue", contents)
        expected, probabilities = combiner.apply(contents, scored.model_values)
        np.testing.assert_allclose(scored.values, expected)
        np.testing.assert_allclose(scored.scores, probabilities)
        assert np.all((scored.scores > 0) & (scored.scores < 1))
        # the service's path: raw values cached per candidate, combined once per request
        np.testing.assert_allclose(loaded.combine(contents, scored.model_values)[0], scored.values)

    def test_without_a_combiner_scores_are_the_calibrated_network_values(self, tiny_encoder_dir):
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        scorer = Scorer(model=model, tokenizer=tokenizer, max_length=32)
        scored = scorer.score("issue", [A, C])
        np.testing.assert_allclose(scored.values, scored.model_values)
        np.testing.assert_allclose(scored.scores, scorer.calibration.apply(scored.values))
