"""Delta versioning of the lake: idempotent re-ingest, time travel, commit metadata, schema enforcement.

Under test: ``trajectory_lake.Lake`` (``read(version=)``, ``history``, ``version``, ``append``) and the
ingest contract that ids are deterministic, so re-ingesting the same real files adds no row and no commit
to any data table, while every ingest that does write commits once per table with its ``ingest_id``.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from tests.trajectory_lake._helpers import DATA_TABLES, read_jsonl, table_state, unreconciled
from trajectory_lake import IngestReport, Lake, SchemaMismatchError, TableNotFoundError, ingest, schema_of

FIRST = "swebench-lite/candidates/mini-swe-agent-2.2.7_deepseek-chat.jsonl"
SECOND = "swebench-lite/candidates/20240609_moatless_gpt4o.jsonl"


class TestReingest:
    @pytest.fixture(scope="class")
    @classmethod
    def reingested(cls, shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
        """swebench-lite and the mini-swe-agent folder ingested, the state noted, then ingested again."""
        paths = [shared_data / "swebench-lite", shared_data / "formats" / "mini-swe-agent"]
        lake = Lake(tmp_path_factory.mktemp("reingest") / "lake")
        first = ingest(paths, lake)
        before = table_state(lake)
        second = ingest(paths, lake)
        return lake, first, second, before

    def test_the_first_ingest_writes_every_data_table(self, reingested):
        _, first, _, before = reingested
        assert all(rows > 0 for _, rows in before.values()), before
        assert all(first.counts[table].written > 0 for table in DATA_TABLES)

    def test_reingesting_the_same_files_keeps_every_data_tables_version_and_row_count(self, reingested):
        lake, _, _, before = reingested
        assert table_state(lake) == before

    def test_reingesting_the_same_files_reports_every_record_as_a_duplicate(self, reingested):
        _, first, second, _ = reingested
        assert second.total("written") == 0
        assert second.total("quarantined") == 0
        assert set(second.counts) == set(first.counts)
        for table, counts in second.counts.items():
            assert counts.duplicate == counts.read == first.counts[table].read, table
        assert unreconciled(second) == {}

    def test_reingesting_the_same_files_commits_only_its_ingests_row(self, reingested):
        lake, first, second, _ = reingested
        assert set(second.versions) == {"ingests"}
        assert second.versions["ingests"] == first.versions["ingests"] + 1
        assert set(lake.read("ingests")["ingest_id"]) == {first.ingest_id, second.ingest_id}


class TestTimeTravel:
    @pytest.fixture(scope="class")
    @classmethod
    def two_ingests(cls, shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
        lake = Lake(tmp_path_factory.mktemp("time-travel") / "lake")
        first = ingest([shared_data / FIRST], lake)
        second = ingest([shared_data / SECOND], lake)
        return lake, first, second

    def test_reading_an_earlier_version_returns_the_earlier_rows(self, two_ingests, shared_data):
        lake, first, second = two_ingests
        n_first, n_second = len(read_jsonl(shared_data / FIRST)), len(read_jsonl(shared_data / SECOND))
        assert (n_first, n_second) == (70, 210)
        assert lake.read("candidates", version=first.versions["candidates"]).height == n_first
        assert lake.read("candidates", version=second.versions["candidates"]).height == n_first + n_second
        assert lake.read("candidates").height == n_first + n_second

    def test_each_ingest_adds_one_version_to_each_table_it_writes(self, two_ingests):
        lake, first, second = two_ingests
        for table in ("runs", "trajectories", "candidates", "outcomes"):
            assert (first.versions[table], second.versions[table]) == (1, 2), table
            assert lake.version(table) == 2
        assert "tasks" not in first.versions  # candidate files carry no task rows
        assert lake.version("tasks") == 0

    def test_version_zero_is_the_empty_table(self, two_ingests):
        lake, _, _ = two_ingests
        empty = lake.read("candidates", version=0)
        assert empty.height == 0
        assert empty.columns == schema_of("candidates").names

    def test_reading_a_version_that_does_not_exist_raises_table_not_found(self, two_ingests):
        lake, _, _ = two_ingests
        with pytest.raises(TableNotFoundError, match="at version 99"):
            lake.read("candidates", version=99)


class TestCommitMetadata:
    @pytest.fixture(scope="class")
    @classmethod
    def ingested(
        cls, shared_data: Path, tmp_path_factory: pytest.TempPathFactory
    ) -> tuple[Lake, IngestReport]:
        lake = Lake(tmp_path_factory.mktemp("metadata") / "lake")
        ingest([shared_data / FIRST], lake)
        return lake, ingest([shared_data / SECOND], lake)

    def test_the_latest_commit_carries_the_ingest_id_of_its_report(self, ingested):
        lake, report = ingested
        latest = lake.history("candidates")[0]
        assert latest["harvest.ingest_id"] == report.ingest_id
        assert latest["version"] == report.versions["candidates"]

    def test_each_commit_names_its_adapters_sources_and_tool_version(self, ingested, shared_data):
        lake, _ = ingested
        latest = lake.history("candidates")[0]
        assert latest["harvest.adapters"] == "swebench-predictions"
        assert json.loads(latest["harvest.sources"]) == [(shared_data / SECOND).resolve().as_uri()]
        assert latest["harvest.tool_version"]

    def test_history_lists_every_ingest_newest_first(self, ingested):
        lake, report = ingested
        history = lake.history("candidates")
        assert [commit["version"] for commit in history] == [2, 1, 0]
        assert history[1]["harvest.ingest_id"] != report.ingest_id
        assert "harvest.ingest_id" not in history[2]  # the table's creation

    def test_every_table_written_by_one_ingest_shares_its_ingest_id(self, ingested):
        lake, report = ingested
        for table in ("runs", "trajectories", "candidates", "outcomes", "ingests"):
            assert lake.history(table)[0]["harvest.ingest_id"] == report.ingest_id, table

    def test_the_ingests_row_records_the_versions_it_created(self, ingested):
        lake, report = ingested
        (row,) = lake.read("ingests").filter(pl.col("ingest_id") == report.ingest_id).to_dicts()
        # The row is written before its own commit, so it records every version but the ingests one.
        assert row["table_versions"] == {t: v for t, v in report.versions.items() if t != "ingests"}
        assert row["table_versions"]["candidates"] == 2
        assert (row["n_read"], row["n_written"]) == (report.total("read"), report.total("written"))


class TestAppend:
    def test_append_with_wrong_columns_raises_schema_mismatch(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        rows = pa.table({"run_id": ["r1"], "colour": ["blue"]})
        with pytest.raises(SchemaMismatchError, match=r"table 'runs'.*unknown columns \['colour'\]"):
            lake.append("runs", rows)
        assert lake.version("runs") == 0

    @staticmethod
    def _run_columns(**overrides: pa.Array) -> pa.Table:
        """One ``runs`` row with the required columns filled, as Arrow columns, with ``overrides``."""
        schema = schema_of("runs")
        columns = {name: pa.nulls(1, field.type) for name, field in zip(schema.names, schema, strict=True)}
        columns["run_id"] = pa.array(["run-1"])
        columns["ingest_id"] = pa.array(["ingest-1"])
        columns["ingested_at"] = pa.array([0], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        return pa.table({**columns, **overrides})

    def test_append_with_an_uncastable_type_raises_schema_mismatch(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        rows = self._run_columns(started_at=pa.array(["not a time"]))
        with pytest.raises(SchemaMismatchError, match=r"rows do not fit table 'runs'.*'not a time'"):
            lake.append("runs", rows)
        assert lake.version("runs") == 0

    def test_append_with_a_null_in_a_required_column_raises_schema_mismatch(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        rows = self._run_columns(run_id=pa.nulls(1, pa.string()))
        with pytest.raises(SchemaMismatchError, match=r"rows do not fit table 'runs'.*run_id"):
            lake.append("runs", rows)
        assert lake.version("runs") == 0

    def test_append_of_fitting_rows_commits_them_with_their_metadata(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        schema = schema_of("rerank_events")
        rows = pa.Table.from_pylist(
            [{"request_id": "req-1", "candidate_hashes": ["a", "b"], "scores": [0.2, 0.8], "chosen": 1}],
            schema=schema,
        )
        assert lake.append("rerank_events", rows, metadata={"harvest.note": "test"}) == 1
        assert lake.read("rerank_events")["request_id"].to_list() == ["req-1"]
        assert lake.history("rerank_events")[0]["harvest.note"] == "test"

    def test_an_unknown_table_is_rejected_with_the_known_names(self, tmp_path):
        with pytest.raises(ValueError, match="unknown lake table 'rollouts'; expected one of runs, tasks"):
            Lake(tmp_path / "lake").table_uri("rollouts")
