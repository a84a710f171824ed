"""``trajectory_lake.feedback``: served decisions and outcomes written as ordinary lake rows.

Under test: the pure row builder (``feedback_rows``), the idempotent writer (``write_feedback``), the
task-id resolution against the lake, the upgrade of a ``rerank_events`` table created before its
schema grew, and the link that matters: a served candidate with an outcome is a training example.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from trajectory_lake import Lake
from trajectory_lake.feedback import Feedback, ServedCandidate, feedback_rows, resolve_task_id, write_feedback
from trajectory_lake.schema import schema_of

SERVED_AT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def feedback(**changes: object) -> Feedback:
    values: dict[str, object] = {
        "request_id": "rr-1",
        "model_uri": "models:/harvest-value@champion",
        "model_revision": "b2:abc",
        "task_id": "served/t1",
        "prompt": "Fix the crash in parse()",
        "candidates": [ServedCandidate(content="diff a", client_id="a"), ServedCandidate(content="diff b")],
        "values": [0.1, 0.9],
        "scores": [0.4, 0.7],
        "served_at": SERVED_AT,
        "chosen": 1,
        "outcome_value": 1.0,
        "recorded_at": SERVED_AT,
    }
    values.update(changes)
    return Feedback(**values)  # type: ignore[arg-type]


def old_rerank_events_schema() -> pa.Schema:
    """The ``rerank_events`` schema before it grew its event id, model revision, candidate ids, values,
    outcome and recorded_at columns."""
    kept = ("request_id", "model_uri", "task_id", "candidate_hashes", "scores", "chosen", "at")
    return pa.schema([f for f in schema_of("rerank_events") if f.name in kept])


class TestRows:
    def test_one_trajectory_and_candidate_per_served_candidate_and_one_outcome_for_the_chosen(self):
        rows = feedback_rows(feedback(), ingest_id="i")
        assert [
            len(rows[t]) for t in ("runs", "tasks", "trajectories", "candidates", "outcomes", "rerank_events")
        ] == [1, 1, 2, 2, 1, 1]
        outcome = rows["outcomes"][0]
        assert outcome["candidate_id"] == rows["candidates"][1]["candidate_id"]
        assert (outcome["name"], outcome["value"], outcome["source"]) == ("resolved", 1.0, "agent")
        event = rows["rerank_events"][0]
        assert event["candidate_ids"] == [c["candidate_id"] for c in rows["candidates"]]
        assert (event["chosen"], event["outcome_index"], event["scores"]) == (1, 1, [0.4, 0.7])

    def test_the_same_content_for_the_same_task_is_the_same_candidate_across_requests(self):
        first = feedback_rows(feedback(), ingest_id="i")["candidates"]
        second = feedback_rows(feedback(request_id="rr-2"), ingest_id="i")["candidates"]
        assert [c["candidate_id"] for c in first] == [c["candidate_id"] for c in second]

    def test_a_choice_without_outcome_writes_no_outcome_row(self):
        rows = feedback_rows(feedback(outcome_value=None), ingest_id="i")
        assert rows["outcomes"] == []
        assert rows["rerank_events"][0]["outcome_name"] is None

    @pytest.mark.parametrize(
        ("changes", "says"),
        [
            ({"chosen": 2}, "chosen must be in 0..1"),
            ({"chosen": None}, "an outcome needs the candidate"),
            ({"chosen": None, "outcome_value": None}, "needs a chosen candidate, an outcome, or both"),
            ({"values": [0.1]}, "must match the 2 candidates"),
            (
                {"candidates": [ServedCandidate(content="x", kind="essay")], "values": [0], "scores": [0]},
                "kind must be one of",
            ),
        ],
    )
    def test_invalid_feedback_raises_value_error_saying_what_is_wrong(self, changes, says):
        with pytest.raises(ValueError, match=says):
            feedback(**changes)


class TestWrite:
    def test_writing_the_same_feedback_twice_adds_nothing(self, tmp_path):
        lake = Lake(tmp_path / "lake")
        first = write_feedback(lake, feedback())
        versions = lake.versions()
        second = write_feedback(lake, feedback())

        assert first.rows == {
            "runs": 1,
            "tasks": 1,
            "trajectories": 2,
            "candidates": 2,
            "outcomes": 1,
            "rerank_events": 1,
        }
        assert set(second.rows.values()) == {0}
        assert lake.versions() == versions
        assert first.event_id == second.event_id

    def test_a_later_outcome_for_the_same_request_is_a_second_event(self, tmp_path):
        lake = Lake(tmp_path / "lake")
        write_feedback(lake, feedback(outcome_value=None))
        later = write_feedback(lake, feedback(outcome_value=0.0))

        assert later.rows["rerank_events"] == 1 and later.rows["outcomes"] == 1
        assert later.rows["candidates"] == 0
        assert lake.read("rerank_events").height == 2

    def test_a_served_candidate_with_an_outcome_is_a_training_example(self, tmp_path):
        from value_model import load_examples

        lake = Lake(tmp_path / "lake")
        write_feedback(lake, feedback())

        examples = load_examples(lake)
        frame = examples.frame if hasattr(examples, "frame") else examples
        assert frame.select("task_id", "prompt", "content", "label").rows() == [
            ("served/t1", "Fix the crash in parse()", "diff b", 1.0)
        ]

    def test_a_rerank_events_table_created_before_the_new_columns_is_upgraded(self, tmp_path):
        lake = Lake(tmp_path / "lake")
        DeltaTable.create(lake.table_uri("rerank_events"), old_rerank_events_schema())

        write_feedback(lake, feedback())

        assert lake.read("rerank_events").get_column("event_id").to_list() == [feedback().event_id]

    def test_a_writer_whose_upgrade_loses_the_race_reads_the_table_again(self, tmp_path, monkeypatch):
        lake = Lake(tmp_path / "lake")
        DeltaTable.create(lake.table_uri("rerank_events"), old_rerank_events_schema())
        stale = lake.delta_table("rerank_events")  # what this writer reads ...
        other = feedback(request_id="rr-other")
        write_feedback(Lake(lake.uri), other)  # ... before another writer adds the columns and commits
        original, handed = Lake.delta_table, []

        def stale_first(self, table, **kwargs):
            if table == "rerank_events" and not handed:
                handed.append(stale)
                return stale
            return original(self, table, **kwargs)

        monkeypatch.setattr(Lake, "delta_table", stale_first)
        write_feedback(lake, feedback())

        assert handed  # its ADD COLUMN was rejected (the metadata changed), and it read the table again
        assert sorted(lake.read("rerank_events")["event_id"]) == sorted([other.event_id, feedback().event_id])
        assert [c["operation"] for c in lake.history("rerank_events")].count("ADD COLUMN") == 1


class TestTaskIds:
    def test_a_task_the_lake_knows_by_instance_id_keeps_its_lake_id(self, tmp_path):
        lake = Lake(tmp_path / "lake")
        rows = feedback_rows(feedback(task_id="swe-bench/django__django-1"), ingest_id="i")["tasks"]
        lake.create().append(
            "tasks",
            pa.Table.from_pylist([{**rows[0], "instance_id": "django__django-1"}], schema=schema_of("tasks")),
        )

        assert resolve_task_id(lake, "django__django-1", "p") == ("swe-bench/django__django-1", True)
        assert resolve_task_id(lake, "swe-bench/django__django-1", "p") == (
            "swe-bench/django__django-1",
            True,
        )

    def test_an_unknown_task_gets_a_served_id(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        assert resolve_task_id(lake, "mine-7", "p") == ("served/mine-7", False)
        assert resolve_task_id(lake, None, "p")[0].startswith("served/b2:")


_RETRY_AT_ONCE = """
import sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[3]]
from tests.trajectory_lake.test_feedback import feedback
from trajectory_lake import Lake
from trajectory_lake.feedback import write_feedback

lake, signals = Lake(sys.argv[1]), Path(sys.argv[2])
(signals / f"ready-{sys.argv[4]}").touch()
while not (signals / "go").exists():
    time.sleep(0.001)
print(write_feedback(lake, feedback()).rows["rerank_events"])
"""


class TestConcurrentRetries:
    def test_processes_writing_the_same_feedback_at_once_write_one_event_and_one_outcome(self, tmp_path):
        import subprocess
        import sys
        import time
        from pathlib import Path

        lake = Lake(tmp_path / "lake").create()
        signals = tmp_path / "signals"
        signals.mkdir()
        root = str(Path(__file__).resolve().parents[2])
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _RETRY_AT_ONCE, lake.uri, str(signals), root, str(i)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(3)
        ]
        deadline = time.monotonic() + 60
        while len(list(signals.glob("ready-*"))) < len(workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        (signals / "go").touch()
        results = [w.communicate(timeout=120) for w in workers]

        assert [w.returncode for w in workers] == [0] * len(workers), [err for _, err in results]
        assert sorted(int(out) for out, _ in results) == [0] * (len(workers) - 1) + [1]
        assert lake.read("rerank_events").get_column("event_id").to_list() == [feedback().event_id]
        assert lake.read("outcomes").height == 1
        assert lake.read("candidates").height == 2 and lake.read("trajectories").height == 2
        assert lake.read("runs").height == 1 and lake.read("tasks").height == 1
