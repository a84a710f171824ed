"""Examples from the lake and the split by task, on the real SWE-bench Lite set."""

from __future__ import annotations

import json

import polars as pl
import pytest

from value_model.data import load_examples, split_by_task, task_bucket


@pytest.fixture(scope="module")
def lite_examples(lite_lake):
    return load_examples(lite_lake)


class TestLoadExamples:
    def test_every_non_empty_labelled_lite_candidate_becomes_one_example(self, lite_examples, shared_data):
        rows = [json.loads(line) for f in sorted((shared_data / "swebench-lite" / "candidates").glob("*.jsonl"))
                for line in f.read_text().splitlines() if line.strip()]
        non_empty = [r for r in rows if r["model_patch"].strip()]
        frame = lite_examples.frame
        assert len(frame) == len(non_empty)
        assert int(frame["label"].sum()) == sum(bool(r["resolved"]) for r in non_empty)
        assert frame.select(pl.col("prompt").is_null().sum()).item() == 0

    def test_empty_candidates_are_kept_when_asked(self, lite_lake, lite_examples):
        assert len(load_examples(lite_lake, drop_empty=False).frame) > len(lite_examples.frame)

    def test_the_table_versions_read_are_reported(self, lite_lake, lite_examples):
        assert lite_examples.versions == {t: lite_lake.version(t) for t in lite_examples.versions}
        assert {"candidates", "outcomes", "tasks"} <= set(lite_examples.versions)


class TestSplitByTask:
    def test_no_task_is_in_both_splits_and_the_split_is_deterministic(self, lite_examples):
        train, val = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        assert not set(train["task_id"]) & set(val["task_id"])
        assert len(train) + len(val) == len(lite_examples.frame)
        again_train, again_val = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        assert again_val["candidate_id"].to_list() == val["candidate_id"].to_list()
        n_tasks = lite_examples.frame["task_id"].n_unique()
        assert 0.1 < val["task_id"].n_unique() / n_tasks < 0.3

    def test_a_different_seed_holds_out_different_tasks(self, lite_examples):
        _, a = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        _, b = split_by_task(lite_examples.frame, val_fraction=0.2, seed=1)
        assert set(a["task_id"]) != set(b["task_id"])

    def test_a_tasks_bucket_does_not_depend_on_the_other_rows(self):
        assert task_bucket("swe-bench/django__django-11099") == task_bucket("swe-bench/django__django-11099")

    def test_an_invalid_fraction_raises(self, lite_examples):
        with pytest.raises(ValueError, match="val_fraction"):
            split_by_task(lite_examples.frame, val_fraction=1.0)
