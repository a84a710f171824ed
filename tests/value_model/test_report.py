"""The value-model report (``value_model.report``) and the embeddings behind the similar-failures
notebook (``value_model.embeddings``): model URIs read from one string, every model scoring the same
held-out rows, paired comparisons, where a model is wrong, and neighbours and clusters of vectors.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from trajectory_lake.slices import SliceSpec
from value_model.embeddings import build_index, cluster, embed_texts, nearest_neighbours, project_2d
from value_model.evaluation import EvaluationOptions
from value_model.inference import Scorer
from value_model.report import calibration_by, compare_models, missed_picks, parse_models, score_models

NO_BOOTSTRAP = EvaluationOptions(n_bootstrap=0)


def _scored() -> pl.DataFrame:
    """Three tasks of three candidates, scored by two models that disagree on task ``b``."""
    return pl.DataFrame({
        "task_id": ["a"] * 3 + ["b"] * 3 + ["c"] * 3,
        "repo": ["x"] * 6 + ["y"] * 3,
        "size": ["small", "big", "small"] * 3,
        "content": ["p1", "p2", "p3", "q1", "q2", "q3", "r1", "r2", "r3"],
        "label": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        "value_one": [0.9, 0.1, 0.2, 0.8, 0.3, 0.1, 0.5, 0.4, 0.3],
        "prob_one": [0.7, 0.2, 0.3, 0.6, 0.4, 0.1, 0.2, 0.2, 0.2],
        "value_two": [0.9, 0.1, 0.2, 0.1, 0.9, 0.2, 0.5, 0.4, 0.3],
        "prob_two": [0.8, 0.1, 0.1, 0.1, 0.9, 0.1, 0.1, 0.1, 0.1],
    })


class TestParseModels:
    def test_names_and_bare_uris(self):
        text = " champion=models:/v@champion ,models:/v/3, runs:/abc/model, local=/tmp/m"
        assert parse_models(text) == {"champion": "models:/v@champion", "v3": "models:/v/3",
                                      "model": "runs:/abc/model", "local": "/tmp/m"}

    def test_a_bare_uri_is_named_after_its_alias(self):
        uri = "models:/harvest-value@challenger"
        assert parse_models(uri) == {"challenger": uri}

    @pytest.mark.parametrize(("text", "match"), [
        ("", "no model given"),
        ("a=models:/v@x, a=models:/v@y", "'a' is given twice"),
        ("1a=models:/v@x", "give NAME=URI"),
    ])
    def test_bad_lists_are_refused_with_the_fix(self, text, match):
        with pytest.raises(ValueError, match=match):
            parse_models(text)


class TestWhereWrong:
    def test_a_missed_pick_is_a_failed_top_pick_on_a_task_with_a_success(self):
        frame = _scored()
        one = missed_picks(frame, "one", by="repo")
        # task a: picked the success; task b: picked a failure; task c has no success (not rerankable)
        assert one.select("repo", "tasks", "rerankable", "missed").rows() == [("x", 2, 2, 1), ("y", 1, 0, 0)]
        assert missed_picks(frame, "two", by="repo")["missed"].to_list() == [0, 0]

    def test_calibration_by_group_is_the_mean_probability_next_to_the_rate(self):
        frame = _scored()
        table = calibration_by(frame, "two", by="size")
        big = table.row(by_predicate=pl.col("size") == "big", named=True)
        assert big["candidates"] == 3 and big["success_rate"] == pytest.approx(1 / 3)
        assert big["mean_probability"] == pytest.approx((0.1 + 0.9 + 0.1) / 3)
        total = (table["brier"] * table["candidates"]).sum() / frame.height
        expected = float(np.mean((frame["prob_two"].to_numpy() - frame["label"].to_numpy()) ** 2))
        assert total == pytest.approx(expected)


class TestCompare:
    def test_each_report_carries_the_other_model_as_a_paired_baseline(self):
        reports = compare_models(_scored(), ["one", "two"], group_by=("repo",), options=NO_BOOTSTRAP)
        one, two = reports["one"], reports["two"]
        assert (one.n_tasks, one.n_candidates) == (two.n_tasks, two.n_candidates) == (3, 9)
        assert one.baselines["two"].best == two.model.best == pytest.approx(2 / 3)
        assert one.model.best == pytest.approx(1 / 3)
        assert {"random", "majority_vote", "shortest_patch", "two"} <= set(one.baselines)
        assert set(one.breakdowns["repo"]) == {"x", "y"}

    def test_missing_scores_are_named(self):
        with pytest.raises(ValueError, match=r"no scores for \['three'\]"):
            compare_models(_scored(), ["one", "three"])


@pytest.mark.slow
class TestScoreModels:
    @pytest.fixture
    def model_dirs(self, tmp_path, tiny_encoder_dir):
        from value_model.model import ValueModel

        dirs = {}
        for name, seed in (("one", 0), ("two", 1)):
            model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir), seed=seed)
            dirs[name] = str(model.save(tmp_path / name, tokenizer, max_length=32,
                                        calibration={"scale": 1.0, "bias": 0.0}))
        return dirs

    def test_every_model_scores_the_same_held_out_rows_as_an_agent_would(self, lite_lake, model_dirs):
        spec = SliceSpec(name="lite", benchmarks=["swe-bench-lite"], runs=["20240402_sweagent_gpt4"])
        frame = score_models(lite_lake, model_dirs, slice_spec=spec)
        assert set(frame["split"]) == {"val"} and frame.height > 0
        assert frame["patch_lines"].min() >= 0
        for name in model_dirs:
            assert frame[f"prob_{name}"].is_between(0, 1).all()
        assert not (frame["value_one"] == frame["value_two"]).all()
        task = frame.filter(pl.col("task_id") == frame["task_id"][0])
        direct = Scorer.from_directory(model_dirs["one"]).score(task["prompt"][0], task["content"].to_list())
        assert task["value_one"].to_numpy() == pytest.approx(direct.values, abs=1e-5)

    def test_a_model_without_a_training_slice_needs_one(self, lite_lake, model_dirs):
        with pytest.raises(ValueError, match="records no training slice; pass slice_spec"):
            score_models(lite_lake, model_dirs)


class TestNeighbours:
    @pytest.fixture
    def vectors(self):
        rng = np.random.default_rng(0)
        centres = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]])
        points = np.repeat(centres, 4, axis=0) + rng.normal(scale=0.05, size=(12, 4))
        return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype("float32")

    def test_neighbours_leave_out_the_query_unless_asked(self, vectors):
        index = build_index(vectors)
        found = nearest_neighbours(index, vectors, [0, 5], k=3)
        assert found.columns == ["query", "rank", "neighbour", "similarity"]
        assert found.filter(pl.col("query") == 0)["neighbour"].sort().to_list() == [1, 2, 3]
        assert not (found["query"] == found["neighbour"]).any()
        with_self = nearest_neighbours(index, vectors, [0], k=1, include_self=True)
        assert with_self.row(0) == (0, 1, 0, pytest.approx(1.0, abs=1e-5))

    def test_neighbours_of_the_same_group_can_be_left_out(self, vectors):
        groups = [i // 4 for i in range(12)]  # the blobs
        found = nearest_neighbours(build_index(vectors), vectors, [0], k=4, groups=groups)
        assert found.height == 4 and all(groups[n] != 0 for n in found["neighbour"])
        assert found["similarity"].is_sorted(descending=True)

    @pytest.mark.parametrize(("kwargs", "match"), [
        ({"k": 0}, "k must be >= 1"),
        ({"groups": [1]}, "groups has 1"),
    ])
    def test_bad_arguments_are_refused(self, vectors, kwargs, match):
        with pytest.raises(ValueError, match=match):
            nearest_neighbours(build_index(vectors), vectors, [0], **kwargs)

    def test_clusters_find_the_blobs_the_same_way_every_time(self, vectors):
        labels = cluster(vectors, k=3, seed=0)
        assert len({tuple(labels[i : i + 4]) for i in (0, 4, 8)}) == 3  # one label per blob
        assert all(len(set(labels[i : i + 4])) == 1 for i in (0, 4, 8))
        assert (cluster(vectors, k=3, seed=0) == labels).all()
        with pytest.raises(ValueError, match="k must be in"):
            cluster(vectors, k=13)

    def test_the_projection_keeps_the_blobs_apart(self, vectors):
        xy = project_2d(vectors)
        assert xy.shape == (12, 2)
        assert np.linalg.norm(xy[0] - xy[1]) < np.linalg.norm(xy[0] - xy[4])


class TestEmbeddings:
    def test_embeddings_are_unit_vectors_independent_of_batching(self, tiny_encoder_dir):
        texts = ["fix the failing test", "", "a much longer text about a patch to django forms " * 5]
        together = embed_texts(texts, backbone=str(tiny_encoder_dir), batch_size=8)
        alone = np.vstack([embed_texts([t], backbone=str(tiny_encoder_dir)) for t in texts])
        assert together.shape == (3, 32) and together.dtype == np.float32
        assert np.linalg.norm(together, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
        assert together == pytest.approx(alone, abs=1e-4)

    def test_the_packaged_minilm_puts_paraphrases_together(self):
        a, b, c = embed_texts(["the unit test fails with a KeyError", "a KeyError makes the test fail",
                               "book a flight from New York to Seattle"])
        assert float(a @ b) > float(a @ c) + 0.2
