"""Content features of a patch relative to its issue (value_model.patch_features), the combiner's
within-task objectives, and issue-reading combiners through the scorer.

Each feature is checked against a value worked out by hand on a tiny diff; the objectives' losses on a
four-candidate example; the features and the within-task fits on the real SWE-bench Lite lake.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import torch

from value_model.config import TrainConfig
from value_model.consensus import FEATURES, Combiner, _loss, consensus_features, consensus_features_by_task
from value_model.consensus import cross_fitted_logits as cross_fit
from value_model.data import load_examples, split_by_task
from value_model.inference import Scorer
from value_model.metrics import selection_metrics
from value_model.model import ValueModel
from value_model.patch_features import (
    PATCH_FEATURES,
    RELATIVE_FEATURES,
    parse_patch,
    patch_features,
    relative_features,
    task_patch_features,
)
from value_model.trainer import fit_combiner


def one(patch: str, issue: str = "") -> dict[str, float]:
    return dict(zip(PATCH_FEATURES, patch_features(patch, issue).round(4).tolist(), strict=True))


EDIT = ("--- a/pkg/io/reader.py\n+++ b/pkg/io/reader.py\n@@ -1,2 +1,2 @@ def read_table(x):\n"
        "-    a = 1\n+    a = 2\n     return a\n")
OTHER = "--- a/pkg/other.py\n+++ b/pkg/other.py\n@@ -5 +5 @@\n-b = 1\n+b = 2\n"
NEW_SCRIPT = "--- /dev/null\n+++ b/reproduce.py\n@@ -0,0 +1,2 @@\n+import pkg\n+print(pkg.x)\n"
NEW_TEST = "--- /dev/null\n+++ b/tests/test_reader.py\n@@ -0,0 +1 @@\n+assert True\n"


class TestParsing:
    def test_a_removed_line_that_looks_like_a_header_stays_in_its_hunk(self):
        patch = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,1 @@\n--- not a header\n keep\n"
        (only,) = parse_patch(patch)
        assert only.hunks[0].removed == ["-- not a header"] and only.hunks[0].context == ["keep"]

    def test_no_newline_markers_and_git_headers_are_skipped(self):
        patch = ("diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n"
                 "\\ No newline at end of file\n+b\n\\ No newline at end of file\n" + OTHER)
        files = parse_patch(patch)
        assert [f.path for f in files] == ["x.py", "pkg/other.py"]
        assert (files[0].hunks[0].removed, files[0].hunks[0].added) == (["a"], ["b"])

    def test_a_new_file_is_marked_new_and_tests_are_recognised(self):
        script, test = parse_patch(NEW_SCRIPT + NEW_TEST)
        assert (script.path, script.new, script.is_test) == ("reproduce.py", True, False)
        assert (test.path, test.new, test.is_test) == ("tests/test_reader.py", True, True)


class TestIssueFeatures:
    @pytest.mark.parametrize(
        ("issue", "expected"),
        [
            ("the bug is in pkg/io/reader.py", 1.0),
            ("from pkg.io.reader import read_table fails", 1.0),
            ('Traceback:\n  File "/venv/site-packages/pkg/io/reader.py", line 3, in f', 1.0),
            ("the reader module breaks", 0.5),
            ("the csv parser breaks", 0.0),
        ],
    )
    def test_issue_files_scores_how_plainly_the_issue_names_the_file(self, issue, expected):
        assert one(EDIT, issue)["issue_files"] == expected

    def test_issue_files_averages_over_source_files_and_ignores_tests(self):
        assert one(EDIT + OTHER + NEW_TEST, "see pkg/io/reader.py")["issue_files"] == 0.5

    def test_generic_stems_do_not_count_as_named(self):
        patch = "--- a/pkg/utils.py\n+++ b/pkg/utils.py\n@@ -1 +1 @@\n-a\n+b\n"
        assert one(patch, "some utils are slow")["issue_files"] == 0.0

    def test_issue_identifiers_is_the_share_of_the_issues_code_names_in_the_hunks(self):
        # code-like names of the issue: read_table (underscore), `frob` (backticks), camelCase; "table" is not
        issue = "read_table ignores `frob` and camelCase in the table"
        assert one(EDIT, issue)["issue_identifiers"] == round(1 / 3, 4)

    def test_issue_functions_is_one_when_a_hunk_header_function_is_named(self):
        assert one(EDIT, "read_table(x) returns 1")["issue_functions"] == 1.0
        assert one(EDIT, "write_table returns 1")["issue_functions"] == 0.0

    def test_without_an_issue_the_issue_features_are_zero(self):
        f = one(EDIT)
        assert (f["issue_files"], f["issue_identifiers"], f["issue_functions"]) == (0.0, 0.0, 0.0)


class TestShapeFeatures:
    def test_added_files_counts_new_files_outside_the_tests(self):
        assert one(EDIT + NEW_SCRIPT + NEW_TEST)["added_files"] == 1.0

    def test_debug_prints_flags_prints_added_to_existing_source(self):
        patch = "--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n x = 1\n+print(x)\n"
        assert one(patch)["debug_prints"] == 1.0
        # a print in a new script or a test, or a print replaced by a print, is not a leftover
        assert one(NEW_SCRIPT)["debug_prints"] == 0.0
        swapped = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-print(x)\n+print(y)\n"
        assert one(swapped)["debug_prints"] == 0.0

    def test_source_size_is_log_changed_non_blank_lines_of_existing_source(self):
        patch = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,3 @@\n-a = 1\n+a = 2\n+\n+b = 3\n c\n"
        # 1 removed + 2 added non-blank lines; the new script and the test do not count
        assert one(patch + NEW_SCRIPT + NEW_TEST)["source_size"] == round(math.log(4), 4)

    def test_comment_lines_counts_added_comments(self):
        patch = ("--- a/m.py\n+++ b/m.py\n@@ -1 +1,3 @@\n-a = 1\n+# why\n+a = 2  # not a comment line\n"
                 "+  # also why\n")
        assert one(patch)["comment_lines"] == round(math.log(3), 4)

    def test_relative_features_are_within_task_z_scores(self):
        x = np.array([[0.0, 2.0], [1.0, 2.0], [2.0, 2.0]])
        np.testing.assert_allclose(relative_features(x), [[-1.2247, 0], [0, 0], [1.2247, 0]], atol=1e-4)
        np.testing.assert_allclose(relative_features(x[:1]), [[0, 0]])

    def test_task_features_put_raw_then_relative_columns(self):
        small, big = EDIT, EDIT + OTHER  # source_size log(3) vs log(5)
        f = task_patch_features([small, big])
        col = PATCH_FEATURES.index("source_size")
        np.testing.assert_allclose(f[:, col], [math.log(3), math.log(5)])
        np.testing.assert_allclose(f[:, len(PATCH_FEATURES) + col], [-1, 1])


class TestIssueReadingCombiner:
    def test_consensus_features_carry_the_patch_features_after_the_agreement_ones(self):
        f = consensus_features([EDIT, OTHER], prompt="pkg/io/reader.py is wrong")
        assert f.shape == (2, len(FEATURES))
        np.testing.assert_allclose(f[:, FEATURES.index("issue_files")], [1.0, 0.0])
        np.testing.assert_allclose(f[:, FEATURES.index("issue_files_z")], [1.0, -1.0])

    def test_a_combiner_that_reads_the_issue_refuses_to_score_without_the_prompt(self):
        combiner = Combiner(inputs=("issue_files",), weights=(1.0,))
        assert combiner.uses_issue
        with pytest.raises(ValueError, match="reads the issue text"):
            combiner.apply([EDIT, OTHER])
        logits, _ = combiner.apply([EDIT, OTHER], prompt="pkg/io/reader.py")
        assert logits.tolist() == [1.0, 0.0]

    def test_the_scorer_passes_the_prompt_to_its_combiner(self, tiny_encoder_dir):
        model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
        combiner = Combiner(inputs=("value", "issue_files"), weights=(0.0, 1.0))
        scorer = Scorer(model=model, tokenizer=tokenizer, max_length=32, combiner=combiner)
        scored = scorer.score("pkg/io/reader.py breaks", [OTHER, EDIT])
        assert scored.values.tolist() == [0.0, 1.0]
        # the cached-values path (the service's) takes the prompt too, and cannot score without it
        combined, _ = scorer.combine([OTHER, EDIT], scored.model_values, prompt="pkg/io/reader.py")
        assert combined.tolist() == [0.0, 1.0]
        with pytest.raises(ValueError, match="reads the issue text"):
            scorer.combine([OTHER, EDIT], scored.model_values)


class TestObjectives:
    Y = torch.tensor([1.0, 0.0, 0.0, 0.0])
    TASKS = ("a", "a", "b", "b")

    def test_listwise_loss_is_minus_log_softmax_mass_on_positives_of_mixed_tasks(self):
        # task b has no positive, so only task a counts: -log(e^0 / (e^0 + e^0)) = log 2
        loss = _loss("listwise", self.Y, self.TASKS)(torch.tensor([0.0, 0.0, 5.0, 1.0], dtype=torch.float64))
        assert float(loss) == pytest.approx(math.log(2))

    def test_pairwise_loss_is_bradley_terry_over_positive_negative_pairs(self):
        loss = _loss("pairwise", self.Y, self.TASKS)(torch.tensor([1.0, 0.0, 5.0, 1.0], dtype=torch.float64))
        assert float(loss) == pytest.approx(math.log1p(math.exp(-1.0)))

    @pytest.mark.parametrize("objective", ["listwise", "pairwise"])
    def test_within_task_fits_rank_by_the_feature_and_keep_the_base_rate_bias(self, objective):
        rng = np.random.default_rng(0)
        n_tasks = 60
        features = rng.normal(size=(4 * n_tasks, len(FEATURES)))
        tasks = [f"t{i // 4}" for i in range(4 * n_tasks)]
        col = features[:, FEATURES.index("soft_consensus")]
        # the best-scored candidate of each task is the resolved one; a task-level shift adds nothing
        labels = np.zeros(4 * n_tasks)
        for t in range(n_tasks):
            labels[4 * t + int(np.argmax(col[4 * t:4 * t + 4]))] = 1
        combiner = Combiner.fit(["soft_consensus", "exact_share"], features, labels, objective=objective,
                                task_ids=tasks)
        assert combiner.weights[0] > 1 and abs(combiner.weights[1]) < combiner.weights[0] / 3
        assert combiner.bias == pytest.approx(math.log(0.25 / 0.75))

    def test_within_task_objectives_need_task_ids(self):
        with pytest.raises(ValueError, match="pass task_ids"):
            Combiner.fit(["soft_consensus"], np.zeros((2, len(FEATURES))), [0, 1], objective="listwise")

    def test_unknown_objectives_are_refused(self):
        with pytest.raises(ValueError, match="objective must be one of"):
            Combiner.fit(["soft_consensus"], np.zeros((2, len(FEATURES))), [0, 1],
                         objective="huber")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="combiner_objective must be one of"):
            TrainConfig(combiner_objective="huber")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def lite(lite_lake) -> pl.DataFrame:
    """The labelled, non-empty SWE-bench Lite candidates, with their issue text as ``prompt``."""
    return load_examples(lite_lake).frame


class TestOnLite:
    def test_patch_features_of_the_real_candidates_are_sane(self, lite):
        tasks, contents = lite.get_column("task_id").to_list(), lite.get_column("content").to_list()
        f = consensus_features_by_task(tasks, contents, prompts=lite.get_column("prompt").to_list())
        named = f[:, FEATURES.index("issue_files")]
        # most issues name the file the fix lands in, at least by its stem; no issue names every file
        assert 0.2 < named.mean() < 0.8
        assert f[:, FEATURES.index("source_size")].min() >= 0
        z = f[:, [FEATURES.index(n) for n in RELATIVE_FEATURES]]
        for task in set(tasks):
            rows = [i for i, t in enumerate(tasks) if t == task]
            np.testing.assert_allclose(z[rows].sum(axis=0), 0, atol=1e-9)

    def test_a_listwise_consensus_combiner_beats_random_on_held_out_lite_tasks(self, lite):
        tasks, labels = lite.get_column("task_id").to_list(), lite.get_column("label").to_numpy()
        f = consensus_features_by_task(tasks, lite.get_column("content").to_list())
        logits = cross_fit(("soft_consensus", "max_similarity", "token_consensus"), f, labels, tasks,
                           objective="listwise", l2=10.0)
        m = selection_metrics(tasks, labels, logits)
        assert m["best_at_1"] > m["random"] + 0.02

    def test_training_fits_an_issue_reading_combiner_from_the_examples_prompts(self, lite):
        _, val = split_by_task(lite, val_fraction=0.2, seed=0)
        config = TrainConfig(combiner=("soft_consensus", "issue_files", "source_size_z"),
                             combiner_objective="pairwise")
        combiner, metrics = fit_combiner(val, None, config)
        assert combiner is not None and combiner.uses_issue
        assert 0 <= metrics["best_at_1"] <= metrics["oracle"]
        task = val.get_column("task_id")[0]
        rows = val.filter(pl.col("task_id") == task)
        logits, _ = combiner.apply(rows.get_column("content").to_list(), prompt=rows.get_column("prompt")[0])
        assert np.all(np.isfinite(logits))
