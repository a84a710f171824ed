"""Delta versioning of the lake: idempotent re-ingest, time travel, commit metadata, schema enforcement.

Under test: ``trajectory_lake.Lake`` (``read(version=)``, ``history``, ``version``, ``append``) and the
ingest contract that ids are deterministic, so re-ingesting the same real files adds no row and no commit
to any data table, while every ingest that does write commits once per table with its ``ingest_id``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from tests.trajectory_lake._helpers import DATA_TABLES, read_jsonl, table_state, unreconciled
from trajectory_lake import (
    IngestReport,
    Lake,
    LakeError,
    SchemaMismatchError,
    TableNotFoundError,
    ingest,
    schema_of,
)
from trajectory_lake.exceptions import CommitConflictError

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

    def test_appends_return_their_own_commits_version_when_another_writer_commits_right_after(
            self, tmp_path, monkeypatch):
        # An ingest looks for concurrent commits between the version it read and its own commit's: the
        # version an append returns must be its commit's, not the table's latest when it asked.
        import deltalake

        import trajectory_lake.lake as lake_module

        lake = Lake(tmp_path / "lake").create()
        uri = lake.table_uri("rerank_events")

        def another(*_args: object, **_kwargs: object) -> None:
            deltalake.write_deltalake(uri, _event("theirs"), mode="append")

        def write_then_another(*args, **kwargs):
            deltalake.write_deltalake(*args, **kwargs)
            if str(args[0]).rstrip("/") == uri or getattr(args[0], "table_uri", "").rstrip("/") == uri:
                another()

        def transaction_then_another(self, *args, **kwargs):
            create_write_transaction(self, *args, **kwargs)
            another()

        create_write_transaction = deltalake.DeltaTable.create_write_transaction
        monkeypatch.setattr(lake_module, "write_deltalake", write_then_another)
        monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", transaction_then_another)
        versions = [
            lake.append("rerank_events", _event("append"), metadata={"harvest.note": "append"}),
            lake.append_stream("rerank_events", _event("stream").to_reader(),
                               metadata={"harvest.note": "stream"}),
            lake.append_stream("rerank_events", _event("chunks").to_reader(),
                               metadata={"harvest.note": "chunks"}, chunk_bytes=1),
        ]
        assert [lake.commit_info("rerank_events", v).get("harvest.note") for v in versions] == [
            "append", "stream", "chunks"]
        assert versions[-1] < lake.version("rerank_events")

    @pytest.mark.parametrize("how", ["append", "staged"])
    def test_an_append_against_a_version_another_commit_followed_is_refused_and_commits_nothing(
            self, tmp_path, how):
        # An ingest commits against the version it read its keys at; delta-rs must refuse it (no retry past
        # the other commit), and a commit against the new latest version must then land right after it.
        lake = Lake(tmp_path / "lake").create()
        read = lake.version("rerank_events")
        lake.append("rerank_events", _event("theirs"))
        staged = lake.staged_append("rerank_events")
        staged.write(_event("ours"))
        staged.write(_event("theirs"))
        with pytest.raises(CommitConflictError, match="after version 0"):
            if how == "append":
                lake.append_stream("rerank_events", _event("ours").to_reader(), read_version=read)
            else:
                staged.commit({"harvest.note": "ours"}, read_version=read)
        assert lake.version("rerank_events") == 1
        assert lake.read("rerank_events")["request_id"].to_list() == ["theirs"]
        # The staged parts outlive a refused commit: drop the clashing row, commit against the new version.
        theirs = pa.table({"request_id": ["theirs"]})
        assert staged.matching(theirs)["request_id"].to_list() == ["theirs"]
        staged.discard(theirs)
        assert staged.matching(theirs).is_empty()
        assert staged.commit({"harvest.note": "ours"}, read_version=1) == 2
        assert sorted(lake.read("rerank_events")["request_id"].to_list()) == ["ours", "theirs"]
        assert lake.commit_info("rerank_events", 2).get("harvest.note") == "ours"
        # Everything discarded: no commit.
        empty = lake.staged_append("rerank_events")
        empty.write(_event("theirs"))
        empty.discard(theirs)
        assert empty.commit(read_version=2) is None and lake.version("rerank_events") == 2

    def test_the_keys_a_commit_added_are_those_of_its_new_rows_not_a_compactions_rewrite(self, compacted):
        # An ingest whose commit a compaction refused reads the keys the commits since its read added: the
        # compaction's files hold rows already there (dataChange false), which need no reading, however
        # large the table.
        assert compacted.added_keys("rerank_events", [3]).num_rows == 0
        added = compacted.added_keys("rerank_events", [1, 2, 3])
        assert sorted(added["request_id"].to_pylist()) == ["req-1", "req-2"]

    def test_an_unknown_table_is_rejected_with_the_known_names(self, tmp_path):
        with pytest.raises(ValueError, match="unknown lake table 'rollouts'; expected one of runs, tasks"):
            Lake(tmp_path / "lake").table_uri("rollouts")


def _event(request_id: str) -> pa.Table:
    """One ``rerank_events`` row: the smallest table to write versions of."""
    row = {"request_id": request_id, "candidate_hashes": ["a"], "scores": [0.5], "chosen": 0}
    return pa.Table.from_pylist([row], schema=schema_of("rerank_events"))


@pytest.fixture
def compacted(tmp_path) -> Lake:
    """``rerank_events`` written twice (v1, v2), then compacted (v3): v1's and v2's files are removed."""
    lake = Lake(tmp_path / "lake").create()
    lake.append("rerank_events", _event("req-1"))
    lake.append("rerank_events", _event("req-2"))
    lake.maintenance.optimize("rerank_events")
    return lake


class TestAsOf:
    @pytest.fixture(scope="class")
    @classmethod
    def lake(cls, tmp_path_factory: pytest.TempPathFactory) -> Lake:
        lake = Lake(tmp_path_factory.mktemp("as-of") / "lake").create()
        time.sleep(0.05)  # v0 and v1 apart, so that a time between them is not within a clock tick of either
        lake.append("rerank_events", _event("req-1"))
        return lake

    @pytest.mark.parametrize("when", [datetime(2020, 1, 1, tzinfo=UTC), datetime(2020, 1, 1),
                                      "2020-01-01T00:00:00Z", "2020-01-01T01:00:00+01:00"])
    def test_a_time_before_the_table_was_created_raises_table_not_found(self, lake, when):
        # delta-rs alone answers it with version 0, the empty table, as if the table had been empty then.
        with pytest.raises(TableNotFoundError, match=r"as of 2020-01-01T00:00:00\+00:00: the table was"):
            lake.read("rerank_events", version=when)

    def test_a_time_with_an_offset_or_none_is_the_same_utc_instant(self, lake):
        v1, v0 = (datetime.fromtimestamp(c["timestamp"] / 1000, UTC) for c in lake.history("rerank_events"))
        east = timezone(timedelta(hours=5, minutes=30))
        for when, version in ((v1 + timedelta(seconds=1), 1), (v0 + (v1 - v0) / 2, 0)):
            assert lake.delta_table("rerank_events", version=when.astimezone(east)).version() == version
            assert lake.delta_table("rerank_events", version=when.replace(tzinfo=None)).version() == version
            text = when.isoformat().replace("+00:00", "Z")
            assert lake.delta_table("rerank_events", version=text).version() == version

    def test_a_time_resolves_by_the_commit_times_history_shows_not_by_file_times(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        lake.append("rerank_events", _event("req-1"))
        time.sleep(0.3)
        lake.append("rerank_events", _event("req-2"))
        v1 = lake.history("rerank_events")[1]["timestamp"]
        # S3 keeps a file's time to the second: v2's commit file can look as old as v1's.
        entry = Path(lake.table_uri("rerank_events")) / "_delta_log" / f"{2:020d}.json"
        os.utime(entry, ns=(v1 * 1_000_000, v1 * 1_000_000))
        between = datetime.fromtimestamp((v1 + 100) / 1000, tz=UTC)  # v2 was committed >= 300 ms later
        assert lake.read("rerank_events", version=between)["request_id"].to_list() == ["req-1"]

    def test_a_commit_asked_for_at_its_own_recorded_time_is_found_though_its_file_was_written_later(
            self, tmp_path):
        # The commit info's time is taken before the log entry is written; on a busy machine the entry's
        # modification time, which delta-rs goes by, can be later, and delta-rs then answers the version
        # before.
        lake = Lake(tmp_path / "lake").create()
        lake.append("rerank_events", _event("req-1"))
        v1 = lake.history("rerank_events")[0]["timestamp"]
        entry = Path(lake.table_uri("rerank_events")) / "_delta_log" / f"{1:020d}.json"
        late = (v1 + 2000) * 1_000_000
        os.utime(entry, ns=(late, late))
        at_v1 = datetime.fromtimestamp(v1 / 1000, tz=UTC)
        assert lake.read("rerank_events", version=at_v1)["request_id"].to_list() == ["req-1"]
        assert lake.delta_table("rerank_events", version=at_v1 - timedelta(milliseconds=1)).version() == 0

    def test_a_negative_version_raises_table_not_found(self, lake):
        with pytest.raises(TableNotFoundError, match="versions start at 0"):
            lake.read("rerank_events", version=-1)


class TestMaintenance:
    def test_optimize_keeps_every_row_and_every_version_and_records_what_it_did(self, compacted):
        lake = compacted
        assert sorted(lake.read("rerank_events")["request_id"]) == ["req-1", "req-2"]
        assert lake.read("rerank_events", version=1)["request_id"].to_list() == ["req-1"]
        commit = lake.history("rerank_events")[0]
        assert commit["operation"] == "OPTIMIZE"
        metrics = commit["operationMetrics"]
        assert (metrics["numFilesRemoved"], metrics["numFilesAdded"]) == (2, 1)
        assert commit["harvest.operation"] == "optimize" and commit["harvest.tool_version"]

    def test_vacuum_keeps_the_files_of_a_version_a_saved_slice_pins(self, compacted):
        lake = compacted
        lake.record_slice("b2:pinned", "pinned", "{}", {"rerank_events": 1})
        deleted = lake.maintenance.vacuum("rerank_events", retention_hours=0, dry_run=False)
        assert len(deleted) == 1  # v2's own file; v1's file stays for the slice
        assert lake.read("rerank_events", version=1)["request_id"].to_list() == ["req-1"]
        with pytest.raises(TableNotFoundError, match=r"at version 2: a data file it references is gone"):
            lake.read("rerank_events", version=2)
        assert sorted(lake.read("rerank_events")["request_id"]) == ["req-1", "req-2"]
        commit = lake.history("rerank_events")[0]
        assert (commit["operation"], commit["harvest.operation"]) == ("VACUUM END", "vacuum")
        assert commit["harvest.tool_version"]
        assert lake.history("slices")[0]["harvest.tool_version"]  # the manifest's own commit

    def test_stats_of_an_earlier_version_name_that_versions_commit(self, compacted):
        stats = compacted.maintenance.stats("rerank_events", version=1)
        committed = compacted.history("rerank_events")[-2]
        assert (stats["version"], stats["rows"], stats["files"]) == (1, 1, 1)
        assert stats["last_operation"] == "WRITE"
        assert stats["last_commit"] == datetime.fromtimestamp(committed["timestamp"] / 1000, tz=UTC).isoformat()
        assert compacted.maintenance.stats("rerank_events")["last_operation"] == "OPTIMIZE"

    def test_a_dry_run_deletes_nothing(self, compacted):
        lake = compacted
        version = lake.version("rerank_events")
        assert len(lake.maintenance.vacuum("rerank_events", retention_hours=0)) == 2
        assert lake.version("rerank_events") == version
        assert lake.read("rerank_events", version=1).height == 1

    def test_the_default_retention_keeps_files_removed_recently(self, compacted):
        assert compacted.maintenance.vacuum("rerank_events", dry_run=False) == []
        assert compacted.read("rerank_events", version=1).height == 1

    def test_vacuuming_again_reports_and_commits_nothing(self, compacted):
        lake = compacted
        assert len(lake.maintenance.vacuum("rerank_events", retention_hours=0, dry_run=False)) == 2
        version = lake.version("rerank_events")
        # delta-rs lists the files it deleted before as deleted again, and commits VACUUM START/END for them.
        assert lake.maintenance.vacuum("rerank_events", retention_hours=0) == []
        assert lake.maintenance.vacuum("rerank_events", retention_hours=0, dry_run=False) == []
        assert lake.version("rerank_events") == version

    def test_vacuum_deletes_what_a_crashed_staged_append_left_once_older_than_the_retention(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        staged = lake.staged_append("rerank_events")
        staged.write(_event("req-1"))  # then the process dies: no commit
        folder = Path(lake.table_uri("rerank_events"))
        left = sorted(p.relative_to(folder).as_posix() for p in folder.glob("harvest-staging-*/**/*")
                      if p.is_file())
        assert any(p.endswith(".parquet") for p in left)
        # An hour's retention keeps them: an ingest may still be writing its parts.
        assert lake.maintenance.vacuum("rerank_events", retention_hours=1, dry_run=False) == []
        assert sorted(lake.maintenance.vacuum("rerank_events", retention_hours=0, dry_run=False)) == left
        assert not [p for p in folder.glob("harvest-staging-*/**/*") if p.is_file()]
        assert lake.read("rerank_events").height == 0
    def test_an_append_whose_staged_parts_vacuum_deleted_is_refused_not_committed(self, tmp_path):
        # A full vacuum with a retention shorter than a running ingest deletes its staged parts; the commit
        # must not then add files that are gone (every later read of the table would fail).
        lake = Lake(tmp_path / "lake").create()
        lake.append("rerank_events", _event("req-0"))
        version = lake.version("rerank_events")
        staged = lake.staged_append("rerank_events")
        staged.write(_event("req-1"))
        folder = Path(lake.table_uri("rerank_events"))
        for part in folder.glob("harvest-staging-*/**/*.parquet"):
            part.unlink()  # what `vacuum --retention-hours 0` does to a part of a running ingest
        with pytest.raises(LakeError, match=r"staged files are gone.*vacuum"):
            staged.commit()
        assert lake.version("rerank_events") == version
        assert lake.read("rerank_events")["request_id"].to_list() == ["req-0"]


    @pytest.mark.parametrize("hours", [-1, 0.5])
    def test_a_retention_that_is_not_whole_hours_is_rejected(self, compacted, hours):
        # delta-rs takes whole hours: 0.5 would have been cut to 0, deleting what was removed minutes ago.
        with pytest.raises(ValueError, match="whole number of hours"):
            compacted.maintenance.vacuum("rerank_events", retention_hours=hours, dry_run=False)
        assert compacted.read("rerank_events", version=1).height == 1


def test_the_sources_of_an_ingest_of_many_files_stay_a_json_list_in_the_commit(tmp_path):
    """Commit metadata values are capped at 4 KiB; the list keeps the sources that fit and counts the rest."""
    folder = tmp_path / ("a-folder-with-a-long-name-" * 4)
    folder.mkdir()
    for i in range(60):
        (folder / f"unknown-{i:02d}.json").write_text('{"neither": "format"}\n')
    lake = Lake(tmp_path / "lake")
    ingest([folder], lake)
    sources = json.loads(lake.history("ingests")[0]["harvest.sources"])
    assert 0 < len(sources) - 1 < 60 and sources[-1] == f"+{61 - len(sources)} more"
    assert sources[0] == (folder / "unknown-00.json").as_uri()
    assert len(lake.history("ingests")[0]["harvest.sources"]) <= 4096
