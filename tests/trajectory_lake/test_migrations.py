"""Schema evolution: a lake written before a table's schema grew is migrated by the next writer that opens it.

Under test: ``schema.MIGRATIONS`` (the ordered registry of added columns) and ``trajectory_lake._migrations``
as ``Lake.create`` runs them: each missing step is one ADD COLUMN commit whose metadata names it, applied
once however often the lake is opened; rows written before read the new column as null, at the latest
version and at versions pinned before the step (a slice manifest resolves to the same rows and hash); a
table a newer Harvest wrote is refused with ``SchemaMismatchError``. The lake before the change is built as
the old code left it: its outcomes table written with the old Arrow schema, its rows those of a real ingest.
Two processes migrating at once: ``test_faults.py`` (``TestUpgradeAtOnce``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.trajectory_lake.test_feedback import feedback
from trajectory_lake import Lake, SchemaMismatchError, ingest, schema_of
from trajectory_lake.feedback import write_feedback
from trajectory_lake.lake import conform
from trajectory_lake.records import make_outcome
from trajectory_lake.schema import MIGRATIONS, PARTITIONS, SCHEMA_VERSION, TABLE_NAMES, TABLES
from trajectory_lake.slices import SliceSpec, load_manifest, resolve_slice, scan_slice

_TS = pa.timestamp("us", tz="UTC")
# The outcomes table of schema version 2, as the code before outcomes.extra wrote it.
OLD_OUTCOMES = pa.schema(
    [
        pa.field("outcome_id", pa.string(), nullable=False),
        pa.field("candidate_id", pa.string()),
        pa.field("trajectory_id", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("benchmark", pa.string()),
        pa.field("name", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
        pa.field("source", pa.string()),
        pa.field("evaluator", pa.string()),
        pa.field("recorded_at", _TS),
        pa.field("ingest_id", pa.string(), nullable=False),
        pa.field("ingested_at", _TS, nullable=False),
    ]
)
LABELLED = "swebench-lite/candidates/mini-swe-agent-2.2.7_deepseek-chat.jsonl"


def old_lake(path: Path, source: Path) -> Lake:
    """A lake as the code of schema version 2 left it after ingesting ``source``: every table written
    directly, the outcomes table with :data:`OLD_OUTCOMES` (the rows are those a current ingest writes)."""
    scratch = ingest_into(path / "scratch", source)
    lake = Lake(path / "lake")
    for table in TABLE_NAMES:
        schema = OLD_OUTCOMES if table == "outcomes" else schema_of(table)
        DeltaTable.create(lake.table_uri(table), schema, partition_by=list(PARTITIONS.get(table, ())) or None)
        rows = scratch.read(table).to_arrow().select(schema.names).cast(schema)
        if rows.num_rows:
            write_deltalake(lake.table_uri(table), rows, mode="append")
    return lake


def ingest_into(path: Path, source: Path) -> Lake:
    lake = Lake(path)
    ingest([source], lake)
    return lake


def columns(lake: Lake, table: str, version: int | None = None) -> list[str]:
    return [f.name for f in lake.delta_table(table, version=version).schema().fields]


def migrations_committed(lake: Lake, table: str) -> list[dict]:
    return [c for c in lake.history(table) if c.get("harvest.operation") == "migrate"]


class TestRegistry:
    def test_steps_are_ordered_and_end_at_the_schema_version(self):
        versions = [step.version for step in MIGRATIONS]
        assert versions == sorted(versions) and versions[-1] == SCHEMA_VERSION

    def test_each_added_column_is_a_nullable_column_of_its_table_added_by_one_step(self):
        added = [(step.table, name) for step in MIGRATIONS for name in step.columns]
        assert len(added) == len(set(added))
        for step in MIGRATIONS:
            assert all(field.nullable for field in step.fields()), step.name
            assert [f.name for f in step.fields()] == list(step.columns)
        assert len({step.name for step in MIGRATIONS}) == len(MIGRATIONS)

    def test_the_outcomes_extra_column_is_a_step_of_the_current_version(self):
        step = next(s for s in MIGRATIONS if s.table == "outcomes")
        assert (step.version, step.columns) == (SCHEMA_VERSION, ("extra",))
        assert TABLES["outcomes"].field("extra").type == pa.string()


class TestNewLake:
    def test_each_table_records_the_schema_version_it_was_created_at(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        for table in TABLE_NAMES:
            configuration = lake.delta_table(table).metadata().configuration
            assert configuration["harvest.schema_version"] == str(SCHEMA_VERSION), table

    def test_opening_a_current_lake_again_commits_nothing(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        before = lake.versions()
        lake.create()
        assert lake.versions() == before == dict.fromkeys(TABLE_NAMES, 0)


class TestOldLake:
    @pytest.fixture(scope="class")
    @classmethod
    def migrated(cls, shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
        """An old lake, a slice resolved on it and saved, then the lake opened by a writer of this code."""
        path = tmp_path_factory.mktemp("old")
        lake = old_lake(path, shared_data / LABELLED)
        before = lake.versions()
        manifest = resolve_slice(lake, SliceSpec(name="old", benchmarks=["swe-bench-lite"]))
        rows = scan_slice(lake, manifest).collect()
        saved = manifest.save(path / "old.json")
        lake.create()
        return lake, before, saved, rows

    def test_the_writer_adds_the_column_in_one_commit_naming_the_migration(self, migrated):
        lake, before, _, _ = migrated
        assert columns(lake, "outcomes") == [*OLD_OUTCOMES.names, "extra"]
        assert lake.version("outcomes") == before["outcomes"] + 1
        (commit,) = migrations_committed(lake, "outcomes")
        assert commit["operation"] == "ADD COLUMN"
        assert (commit["harvest.migration"], commit["harvest.schema_version"]) == ("outcomes-extra", "3")
        assert json.loads(commit["operationParameters"]["fields"])[0]["name"] == "extra"

    def test_the_other_tables_are_left_as_they_were(self, migrated):
        lake, before, _, _ = migrated
        assert {t: v for t, v in lake.versions().items() if t != "outcomes"} == {
            t: v for t, v in before.items() if t != "outcomes"
        }

    def test_old_rows_read_null_at_the_latest_version_and_at_the_version_before(self, migrated):
        lake, before, _, _ = migrated
        latest = lake.read("outcomes")
        pinned = lake.read("outcomes", version=before["outcomes"])
        assert latest.height == pinned.height == 70
        assert latest["extra"].null_count() == pinned["extra"].null_count() == 70
        assert "extra" not in columns(lake, "outcomes", before["outcomes"])  # the version as it was written

    def test_a_slice_pinned_before_the_migration_resolves_to_the_same_rows_and_hash(self, migrated):
        lake, _, saved, rows = migrated
        manifest = load_manifest(saved)
        again = scan_slice(lake, manifest).collect()  # checks the content hash, else ValueError
        assert again.equals(rows) and again.height == 70
        pinned = dataclasses.replace(manifest.spec_object, versions=manifest.versions)  # `--version N`
        assert resolve_slice(lake, pinned).content_hash == manifest.content_hash

    def test_new_rows_carry_extra_and_a_second_writer_commits_nothing(self, migrated):
        lake, _, _, _ = migrated
        candidate = lake.read("candidates").row(0, named=True)
        outcome = make_outcome(candidate, name="judge", value=0.5, source="judge", extra={"rubric": "r1"})
        lake.append(
            "outcomes",
            conform(
                "outcomes",
                [{**outcome, "ingest_id": "i", "ingested_at": None}],
                constants={"ingest_id": "i", "ingested_at": outcome["recorded_at"]},
            ),
        )
        version = lake.version("outcomes")
        Lake(lake.uri).create()
        assert lake.version("outcomes") == version and len(migrations_committed(lake, "outcomes")) == 1
        written = lake.read("outcomes").filter(name="judge")
        assert json.loads(written["extra"].item()) == {"rubric": "r1"}

    def test_a_writer_of_the_old_lake_migrates_it_and_ingests(self, shared_data, tmp_path):
        lake = old_lake(tmp_path, shared_data / LABELLED)
        report = ingest([shared_data / LABELLED], lake)  # the same labelled candidates again
        assert report.total("written") == 0 and report.total("quarantined") == 0
        assert [c["harvest.migration"] for c in migrations_committed(lake, "outcomes")] == ["outcomes-extra"]

    def test_a_saved_slice_resolved_again_writes_nothing_and_a_new_one_only_its_record(
        self, shared_data, tmp_path
    ):
        """Re-resolving a slice the lake has saved (``harvest slice``, a training job pinned to it) is a read:
        it migrated the whole lake first, so a reader that may not write an old lake could not re-run its
        job (review of d09e0d4). A new slice writes the ``slices`` table alone."""
        lake = old_lake(tmp_path, shared_data / LABELLED)
        before = lake.versions()
        spec = SliceSpec(name="old", benchmarks=["swe-bench-lite"])
        first = resolve_slice(lake, spec, save=True)
        after_first = lake.versions()
        assert {t: v for t, v in after_first.items() if t != "slices"} == {
            t: v for t, v in before.items() if t != "slices"
        }
        assert migrations_committed(lake, "outcomes") == []
        again = resolve_slice(Lake(lake.uri), spec, save=True)  # the same tables' versions: the same slice
        assert again.content_hash == first.content_hash
        assert lake.versions() == after_first


class TestRerankEventsStep:
    def test_a_rerank_events_table_from_before_feedback_gets_its_columns_in_one_commit(self, tmp_path):
        lake = Lake(tmp_path / "lake")
        kept = ("request_id", "model_uri", "task_id", "candidate_hashes", "scores", "chosen", "at")
        DeltaTable.create(
            lake.table_uri("rerank_events"),
            pa.schema([f for f in schema_of("rerank_events") if f.name in kept]),
        )
        lake.create()
        assert columns(lake, "rerank_events") == schema_of("rerank_events").names
        (commit,) = migrations_committed(lake, "rerank_events")
        assert commit["harvest.migration"] == "rerank_events-feedback-columns"


class TestNewerLake:
    def test_a_table_recording_a_newer_schema_version_is_refused(self, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        newer = str(SCHEMA_VERSION + 1)
        lake.delta_table("runs").alter.set_table_properties(
            {"harvest.schema_version": newer}, raise_if_not_exists=False
        )
        with pytest.raises(SchemaMismatchError, match=rf"'runs' has schema version {newer}.*upgrade Harvest"):
            Lake(lake.uri).create()

    def test_a_table_with_a_column_this_code_does_not_know_is_refused_and_left_alone(self, tmp_path):
        lake = Lake(tmp_path / "lake")
        newer = pa.schema(
            [*OLD_OUTCOMES, pa.field("extra", pa.string()), pa.field("judge_model", pa.string())]
        )
        DeltaTable.create(lake.table_uri("outcomes"), newer)
        with pytest.raises(SchemaMismatchError, match=r"'outcomes' has columns .*'judge_model'.*upgrade"):
            lake.create()
        assert lake.version("outcomes") == 0  # not migrated: this code cannot write it

    def test_an_ingest_into_a_newer_lake_fails_before_it_writes(self, shared_data, tmp_path):
        lake = Lake(tmp_path / "lake").create()
        lake.delta_table("outcomes").alter.set_table_properties(
            {"harvest.schema_version": "99"}, raise_if_not_exists=False
        )
        before = lake.versions()
        with pytest.raises(SchemaMismatchError, match="upgrade Harvest"):
            ingest([shared_data / LABELLED], lake)
        assert {t: v for t, v in lake.versions().items() if t != "outcomes"} == {
            t: v for t, v in before.items() if t != "outcomes"
        }


class TestCreateAgain:
    """``Lake.create`` called again on the same instance (the reranker service opens the lake for every
    feedback write) opens only the tables whose metadata may have changed since it checked them."""

    @pytest.fixture
    def looked_at(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        """The tables opened (``Lake.delta_table``) or looked for (``Lake.exists``) from now on."""
        names: list[str] = []
        delta_table, exists = Lake.delta_table, Lake.exists

        def counting_delta_table(lake: Lake, table: str, **options: object) -> DeltaTable:
            names.append(table)
            return delta_table(lake, table, **options)  # type: ignore[arg-type]

        def counting_exists(lake: Lake, table: str) -> bool:
            names.append(table)
            return exists(lake, table)

        monkeypatch.setattr(Lake, "delta_table", counting_delta_table)
        monkeypatch.setattr(Lake, "exists", counting_exists)
        return names

    @staticmethod
    def checked_lake(path: Path) -> Lake:
        """A lake whose every table the instance returned has checked (the call that creates a table does
        not check it: the next one does)."""
        return Lake(path).create().create()

    def test_after_only_rows_were_committed_no_table_is_opened(self, tmp_path, looked_at):
        lake = self.checked_lake(tmp_path / "lake")
        write_feedback(lake, feedback())  # MERGE commits to six tables
        write_feedback(lake, feedback(request_id="rr-2"))
        looked_at.clear()
        lake.create()
        assert looked_at == []
        Lake(lake.uri).create()  # another instance checks every table
        assert set(looked_at) == set(TABLE_NAMES)

    def test_a_newer_harvests_change_made_since_is_refused(self, tmp_path):
        lake = self.checked_lake(tmp_path / "lake")
        lake.append("runs", Lake(lake.uri).read("runs").to_arrow())  # a data commit before the change
        newer = str(SCHEMA_VERSION + 1)
        Lake(lake.uri).delta_table("runs").alter.set_table_properties(
            {"harvest.schema_version": newer}, raise_if_not_exists=False
        )
        with pytest.raises(SchemaMismatchError, match=rf"'runs' has schema version {newer}"):
            lake.create()

    def test_a_table_deleted_since_is_created_again(self, tmp_path):
        lake = self.checked_lake(tmp_path / "lake")
        shutil.rmtree(lake.table_uri("slices"))
        lake.create()
        assert lake.version("slices") == 0 and columns(lake, "slices") == schema_of("slices").names

    def test_a_table_deleted_and_created_again_at_the_version_checked_is_checked_again(self, tmp_path):
        lake = self.checked_lake(tmp_path / "lake")
        shutil.rmtree(lake.table_uri("runs"))
        DeltaTable.create(
            lake.table_uri("runs"),
            schema_of("runs"),
            configuration={"harvest.schema_version": "99"},
            raise_if_key_not_exists=False,
        )
        assert lake.version("runs") == 0  # the version this instance checked: only its log entry differs
        with pytest.raises(SchemaMismatchError, match="'runs' has schema version 99"):
            lake.create()

    def test_a_migrated_table_is_opened_once_more_then_not_again(self, tmp_path, looked_at):
        lake = Lake(tmp_path / "lake")
        kept = ("request_id", "model_uri", "task_id", "candidate_hashes", "scores", "chosen", "at")
        DeltaTable.create(
            lake.table_uri("rerank_events"),
            pa.schema([f for f in schema_of("rerank_events") if f.name in kept]),
        )
        Lake(lake.uri).create(tables=[t for t in TABLE_NAMES if t != "rerank_events"])
        lake.create()  # checks every table and migrates rerank_events
        assert len(migrations_committed(lake, "rerank_events")) == 1
        looked_at.clear()
        lake.create()  # the migration's commit changed the metadata: checked again, nothing to commit
        assert looked_at == ["rerank_events", "rerank_events"]
        assert len(migrations_committed(lake, "rerank_events")) == 1
        looked_at.clear()
        lake.create()
        assert looked_at == []
