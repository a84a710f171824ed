"""The lake: a set of Delta tables under one root URI.

Layout: ``<root>/<table>/`` for every table in :data:`trajectory_lake.schema.TABLES`. The root is a
local path by default or any object-store URI delta-rs understands (``s3://``, ``gs://``, ``az://``),
with ``storage_options`` passed through unchanged.

Writes are Delta appends: each call of :meth:`Lake.append` is one atomic commit carrying the caller's
commit metadata; a crash before the commit leaves the table readable at its previous version. Tables
are created once, up front, with long log and file retention so that pinned versions stay readable
for reproducible training slices.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError as DeltaTableNotFound
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction

from trajectory_lake._migrations import SCHEMA_VERSION_PROPERTY, apply_steps, checked_tables
from trajectory_lake.exceptions import CommitConflictError, LakeError, SchemaMismatchError, TableNotFoundError
from trajectory_lake.schema import KEYS, PARTITIONS, SCHEMA_VERSION, TABLE_NAMES, schema_of

__all__ = ["Lake", "StagedAppend"]

logger = logging.getLogger(__name__)

# Time travel must outlive training runs that pin a version; see delta-lake-facts §1.8.
_TABLE_CONFIGURATION = {
    "delta.logRetentionDuration": "interval 3650 days",
    "delta.deletedFileRetentionDuration": "interval 30 days",
}
# Only ids, labels and times get min/max stats in the log: big text columns would bloat it.
_STATS_COLUMNS = {
    "runs": "run_id,harness,model,benchmark,started_at,ingested_at",
    "tasks": "task_id,domain,benchmark,repo,ingested_at",
    "trajectories": "trajectory_id,run_id,task_id,domain,harness,model,source_format,exit_status,"
    "n_steps,ended_at,ingested_at",
    "steps": "trajectory_id,step_index,role,run_id,task_id,domain,ingested_at",
    "candidates": "candidate_id,trajectory_id,task_id,run_id,kind,content_sha256,ingested_at",
    "outcomes": "outcome_id,candidate_id,trajectory_id,task_id,name,value,source,recorded_at",
    "ingests": "ingest_id,started_at,finished_at",
    "quarantine": "quarantine_id,ingest_id,table,adapter,recorded_at",
    "rerank_events": "request_id,model_uri,task_id,at",
    "slices": "slice_id,name,created_at",
}
# A streamed commit keeps one open Parquet file per partition until it reaches the target size, and each
# file buffers its current row group: smaller targets and row groups than delta-rs' defaults (100 MiB,
# 1M rows) keep an ingest's memory flat (bounded by partitions x target) however many rows it writes,
# and let readers skip row groups by their statistics. `harvest lake optimize` compacts files later.
_APPEND_FILE_BYTES = 32 << 20
_ROW_GROUP_ROWS = 16_384
# (compression must be named: WriterProperties without it writes uncompressed files.)
_WRITER_PROPERTIES = WriterProperties(max_row_group_size=_ROW_GROUP_ROWS, compression="SNAPPY")
_MAX_COMMIT_RETRIES = 100  # concurrent appenders exhaust delta-rs' default of 15 (facts §1.12)
# Log actions that change a table's rows but not its schema, properties or protocol (those are metaData and
# protocol actions): commits of only these leave a table as Lake.create checked it.
_DATA_ACTIONS = frozenset({"add", "remove", "commitInfo", "txn", "cdc"})
_T = TypeVar("_T")


class Lake:
    """A handle on the lake's Delta tables.

    Args:
        uri: the lake root: a local directory or an object-store URI.
        storage_options: credentials and client options for object stores (delta-rs keys).

    Examples:
        >>> import tempfile
        >>> lake = Lake(tempfile.mkdtemp()).create()
        >>> lake.version("tasks")
        0
    """

    def __init__(self, uri: str | os.PathLike[str], *, storage_options: Mapping[str, str] | None = None) -> None:
        text = os.fspath(uri)
        self.is_local = "://" not in text or text.startswith("file://")
        if self.is_local:
            text = str(Path(text.removeprefix("file://")).expanduser().resolve())
        self.uri = text.rstrip("/")
        self.storage_options = dict(storage_options) if storage_options else None
        # table -> (the version create() checked it at or found only data commits up to, sha256 of that
        # version's log entry): see _unchanged_since_checked
        self._checked: dict[str, tuple[int, bytes]] = {}

    def __repr__(self) -> str:
        return f"Lake({self.uri!r})"

    def table_uri(self, table: str) -> str:
        """The URI of one table's Delta directory."""
        schema_of(table)  # validates the name
        return f"{self.uri}/{table}"

    # -- creation -------------------------------------------------------------------------------

    def create(self, *, tables: Iterable[str] | None = None) -> Lake:
        """Create every missing table and bring the others to this code's schema (idempotent, safe to race
        with other processes); every writer opens the lake with it, or, with ``tables``, with the tables it
        writes (a slice's record writes ``slices`` alone).

        Each table is created by exactly one commit, its version 0, whoever runs this at the same time:
        the commit that writes version 0 is put-if-absent (on S3, a conditional PUT), and a process that
        loses that race uses the table the winner created. A table created before columns were added to
        its schema gets them (the steps of ``schema.MIGRATIONS`` it lacks, one commit each: see
        ``trajectory_lake._migrations``).

        Called again on the same instance (the reranker service writes each feedback through one), a table
        this instance checked is not opened again if every commit since was a data commit (its new log
        entries hold only add, remove, commitInfo, txn or cdc actions) and the entry of the version it
        checked is still the one it read: a few small reads instead of a log replay. A table another
        process changed the metadata of (a newer Harvest's migration), deleted, or deleted and created
        again is checked again as on the first call.

        Returns:
            ``self``, for chaining.

        Raises:
            SchemaMismatchError: a table was written by a newer Harvest (upgrade).
        """
        existing = []
        for table in TABLE_NAMES if tables is None else tuple(tables):
            if self._unchanged_since_checked(table):
                continue
            if self.exists(table):
                existing.append(table)
                continue
            if self.is_local:
                Path(self.table_uri(table)).mkdir(parents=True, exist_ok=True)
            configuration = {**_TABLE_CONFIGURATION, "delta.dataSkippingStatsColumns": _STATS_COLUMNS[table],
                             SCHEMA_VERSION_PROPERTY: str(SCHEMA_VERSION)}
            try:
                DeltaTable.create(
                    self.table_uri(table),
                    schema_of(table),
                    mode="ignore",
                    name=table,
                    configuration=configuration,
                    partition_by=list(PARTITIONS.get(table, ())) or None,
                    storage_options=self.storage_options,
                    # No retry: delta-rs retries a CREATE that lost version 0 as a later commit, a second
                    # CREATE that replaces the winner's metadata (a new table id and creation time, and this
                    # process's schema and properties) after the others may have written. It fails instead.
                    commit_properties=CommitProperties(max_commit_retries=0),
                    raise_if_key_not_exists=False,  # delta-rs refuses other keys than delta.* without it
                )
            except (DeltaError, CommitFailedError, OSError) as exc:
                # Another process created it between our check and our commit (facts §1.12).
                if not self.exists(table):
                    raise
                logger.debug("table %s was created concurrently: %s", table, exc)
        opened = checked_tables(self, existing)  # all checked before any is changed
        checked_at = {table: dt.version() for table, dt in opened.items()}
        apply_steps(self, opened)
        # The version checked, not the migrated one: a later call reads this call's steps as metadata
        # commits and checks the table once more. A table created here is checked by the next call.
        for table, version in checked_at.items():
            self._remember_checked(table, version)
        return self

    def _unchanged_since_checked(self, table: str) -> bool:
        """Whether ``table`` is as :meth:`create` last checked it on this instance, but for data commits
        (:data:`_DATA_ACTIONS`): the log entry of the version checked is the one read then (not deleted,
        nor deleted and written again), and every entry after it holds only data actions. Moves the
        table's mark to its latest entry when so, drops it when not."""
        mark = self._checked.pop(table, None)
        if mark is None:
            return False
        version, digest = mark
        store = self._log_store(table)
        try:
            entry = None if store is None else _log_bytes(store, version)
            if store is None or entry is None or hashlib.sha256(entry).digest() != digest:
                return False
            while (entry := _log_bytes(store, version + 1)) is not None:
                version += 1
                actions = [json.loads(line) for line in entry.splitlines() if line.strip()]
                if not all(isinstance(action, dict) and action.keys() <= _DATA_ACTIONS for action in actions):
                    return False
                digest = hashlib.sha256(entry).digest()
        except (OSError, ValueError):
            return False  # unreadable now, or not an entry delta-rs wrote: the full check decides
        self._checked[table] = (version, digest)
        return True

    def _remember_checked(self, table: str, version: int) -> None:
        """Mark ``table`` as checked at ``version`` (see :meth:`_unchanged_since_checked`)."""
        store = self._log_store(table)
        try:
            entry = None if store is None else _log_bytes(store, version)
        except OSError:
            return
        if entry is not None:
            self._checked[table] = (version, hashlib.sha256(entry).digest())

    def _log_store(self, table: str) -> DeltaStorageHandler | None:
        """The store of ``table``'s folder; ``None`` if the folder is gone (delta-rs refuses a local path
        that does not exist)."""
        try:
            return DeltaStorageHandler(self.table_uri(table), self.storage_options)
        except (DeltaError, OSError):
            return None

    def exists(self, table: str) -> bool:
        """Whether ``table`` exists as a Delta table."""
        return DeltaTable.is_deltatable(self.table_uri(table), storage_options=self.storage_options)

    # -- reading --------------------------------------------------------------------------------

    def delta_table(self, table: str, *, version: int | str | datetime | None = None) -> DeltaTable:
        """The ``deltalake.DeltaTable`` of ``table`` at ``version`` (a number, an RFC 3339 time, a datetime).

        A time is the latest version committed at or before it (a naive time is UTC); a time before the
        table was created is an error, not its empty first version.

        Raises:
            TableNotFoundError: the table or the version does not exist.
        """
        if isinstance(version, int) and version < 0:
            raise TableNotFoundError(f"cannot load {table!r} at version {version}: versions start at 0")
        when = _as_datetime(version) if isinstance(version, str) else version
        try:
            if isinstance(version, int):  # straight to that version: one log replay, not two
                dt = DeltaTable(self.table_uri(table), version=version, storage_options=self.storage_options)
            else:
                dt = DeltaTable(self.table_uri(table), storage_options=self.storage_options)
                if version is not None:
                    dt.load_as_version(when)
        except (DeltaTableNotFound, FileNotFoundError) as exc:
            if self.is_local and not Path(self.uri).exists():  # delta-rs' own text adds only an OS error
                raise TableNotFoundError(f"no lake at {self.uri}: the directory does not exist "
                                         "(harvest ingest creates it)") from exc
            if self.is_local and not Path(self.table_uri(table)).exists():
                raise TableNotFoundError(f"lake table {table!r} not found at {self.table_uri(table)}: the "
                                         "lake has no such table yet (harvest ingest creates it)") from exc
            raise TableNotFoundError(f"lake table {table!r} not found at {self.table_uri(table)}: "
                                     f"{_one_line(exc)}") from exc
        except DeltaError as exc:
            at = f"from {self.table_uri(table)}" if version is None else f"at version {version!r}"
            note = "" if version is None else self._latest_note(table)
            raise TableNotFoundError(f"cannot load {table!r} {at}{note}: {_one_line(exc)}") from exc
        if isinstance(when, datetime):
            # delta-rs answers a time before the first commit with version 0; Spark and the kernel refuse it.
            created = datetime.fromtimestamp(dt.metadata().created_time / 1000, tz=UTC)
            asked = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
            if asked < created:
                raise TableNotFoundError(f"cannot load {table!r} as of {asked.isoformat()}: the table was "
                                         f"created later, at {created.isoformat()}")
            # delta-rs picks the version by its commit file's modification time, which object stores keep to
            # the second (a commit up to a second after the time would count) and which a file system sets
            # when the file is written, after the time its commit info records (on a busy machine, a
            # commit asked for at its own recorded time could be missed). Move to the commit times the
            # log records (those `history` shows), to the millisecond, in both directions.
            resolved, asked_ms = dt.version(), asked.timestamp() * 1000
            while resolved > 0 and self.commit_info(table, resolved).get("timestamp", 0) > asked_ms:
                resolved -= 1
            while self.commit_info(table, resolved + 1).get("timestamp", math.inf) <= asked_ms:
                resolved += 1
            if resolved != dt.version():
                dt.load_as_version(resolved)
        return dt

    def commit_info(self, table: str, version: int) -> dict[str, Any]:
        """The commit info the log entry of ``version`` records (operation, timestamp in ms, metadata such
        as ``harvest.ingest_id``); empty if the entry is gone (log cleanup) or holds none."""
        for action in self._log_entry(table, version):
            info = action.get("commitInfo")
            if isinstance(info, dict):
                return info
        return {}

    def _log_entry(self, table: str, version: int) -> list[dict[str, Any]]:
        """The actions of the log entry of ``version`` (one small JSON file); empty if it is gone."""
        store = DeltaStorageHandler(self.table_uri(table), self.storage_options)
        try:
            entry = _log_bytes(store, version)
        except OSError:
            return []
        if entry is None:
            return []
        return [json.loads(line) for line in entry.decode().splitlines() if line.strip()]

    def _version_adding(self, table: str, path: str, *, after: int) -> int:
        """The first version after ``after`` whose commit adds the file ``path`` (as the file is named, not
        URL-encoded as the log holds it)."""
        version = after + 1
        while entry := self._log_entry(table, version):
            if any(unquote(action["add"]["path"]) == path for action in entry if "add" in action):
                return version
            version += 1
        raise LakeError(f"no commit of {table!r} after version {after} adds {path}")

    def added_keys(self, table: str, versions: Iterable[int], *, columns: Sequence[str] = ()) -> pa.Table:
        """The key columns (``KEYS[table]``), then ``columns``, of every row of the files the commits
        ``versions`` added (their log entries' add actions), read from those files alone, not from a
        snapshot.

        A file a later commit removed is still read (a compaction, or a MERGE that rewrote it): what a
        commit added is what it added. A file added without changing the data (``dataChange`` false: a
        compaction's rewrite of rows already there) is not read: it adds no row.
        """
        columns = [*KEYS[table], *(c for c in columns if c not in KEYS[table])]
        schema = pa.schema([schema_of(table).field(name) for name in columns])
        partitions = [c for c in columns if c in PARTITIONS.get(table, ())]  # in the log, not the files
        store = DeltaStorageHandler(self.table_uri(table), self.storage_options)
        parts = []
        for version in versions:
            for action in self._log_entry(table, version):
                if "add" in action and action["add"].get("dataChange", True):
                    add = action["add"]
                    with store.open_input_file(unquote(add["path"])) as handle:
                        part = pq.read_table(handle, columns=[c for c in columns if c not in partitions])
                    for name in partitions:
                        value = pa.scalar((add.get("partitionValues") or {}).get(name), pa.string())
                        part = part.append_column(name, pa.repeat(value, part.num_rows))
                    parts.append(part.select(columns))
        return pa.concat_tables([part.cast(schema) for part in parts]) if parts else schema.empty_table()

    def _latest_note(self, table: str) -> str:
        """``" (its latest version is N)"``, for an error about a version the table does not have."""
        try:
            latest = DeltaTable(self.table_uri(table), storage_options=self.storage_options).version()
        except (DeltaError, FileNotFoundError):
            return ""
        return f" (its latest version is {latest})"

    def scan(self, table: str, *, version: int | str | datetime | None = None) -> pl.LazyFrame:
        """A lazy polars frame over ``table`` (at ``version``, else the latest), with every column of the
        table's schema: one a version lacks (written before a migration added it) reads as null."""
        dt = self.delta_table(table, version=version)
        frame = pl.scan_delta(dt)
        present = {field.name for field in dt.schema().fields}
        missing = [field for field in schema_of(table) if field.name not in present]
        if missing:
            nulls = pl.from_arrow(pa.schema(missing).empty_table()).schema
            frame = frame.with_columns(pl.lit(None, dtype).alias(name) for name, dtype in nulls.items())
        return frame

    def read(self, table: str, *, version: int | str | datetime | None = None) -> pl.DataFrame:
        """``scan`` + collect.

        Raises:
            TableNotFoundError: the table or the version does not exist, or a data file of the version is
                gone (``vacuum`` deleted it).
        """
        frame = self.scan(table, version=version)
        try:
            return frame.collect()
        except FileNotFoundError as exc:
            raise TableNotFoundError(_missing_files_message(table, version, exc)) from exc

    def version(self, table: str) -> int:
        """The latest version of ``table``."""
        return self.delta_table(table).version()

    def versions(self) -> dict[str, int]:
        """The latest version of every existing table."""
        return {t: self.version(t) for t in TABLE_NAMES if self.exists(t)}

    def history(self, table: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The commit history of ``table``, newest first, with Harvest's commit metadata."""
        return self.delta_table(table).history(limit)

    def existing_keys(self, table: str, keys: pl.DataFrame) -> pl.DataFrame:
        """The subset of ``keys`` (columns = the table's key) already present in ``table``."""
        key_cols = list(KEYS[table])
        if keys.is_empty():
            return keys.select(key_cols)
        first = key_cols[0]
        wanted = keys.get_column(first).unique()
        present = (
            self.scan(table)
            .select(key_cols)
            .filter(pl.col(first).is_in(wanted.implode()))
            .unique()
            .collect()
        )
        return keys.select(key_cols).join(present, on=key_cols, how="semi")

    @property
    def maintenance(self) -> _Maintenance:
        """Compaction, vacuum (keeping pinned versions) and statistics."""
        return _Maintenance(self)

    def pinned_versions(self) -> dict[str, set[int]]:
        """Table versions pinned by the slice manifests saved in the ``slices`` table."""
        if not self.exists("slices"):
            return {}
        pinned: dict[str, set[int]] = {}
        for versions in self.read("slices").get_column("table_versions").to_list():
            pairs = versions.items() if isinstance(versions, dict) else ((e["key"], e["value"]) for e in versions or [])
            for table, version in pairs:  # a Delta map reads back as a dict (or [{key, value}] elsewhere)
                pinned.setdefault(table, set()).add(int(version))
        return pinned

    def record_slice(self, slice_id: str, name: str, manifest_json: str, versions: Mapping[str, int]) -> None:
        """Save a slice manifest in the ``slices`` table (once per slice id). A slice already saved writes
        nothing, so a reader that may not write the lake re-resolves a saved slice; a new one creates (or
        brings up to date) the ``slices`` table alone."""
        if self.exists("slices") and not self.existing_keys(
                "slices", pl.DataFrame({"slice_id": [slice_id]})).is_empty():
            return
        self.create(tables=("slices",))
        row = {"slice_id": slice_id, "name": name, "manifest": manifest_json,
               "table_versions": list(versions.items()), "created_at": datetime.now(UTC)}
        self.append("slices", conform("slices", [row]), metadata=_maintenance_metadata("record_slice"))

    # -- writing --------------------------------------------------------------------------------

    def append_stream(
        self,
        table: str,
        reader: pa.RecordBatchReader,
        *,
        metadata: Mapping[str, str] | None = None,
        chunk_bytes: int | None = None,
        read_version: int | None = None,
    ) -> int:
        """Append a stream of record batches (already conforming to the schema) in one atomic commit,
        without holding them in memory.

        delta-rs' writer keeps about half a byte per byte of Arrow it writes in one call until that call
        commits (delta-io/delta-rs#3578), so one write of a huge stream grows with it. With
        ``chunk_bytes``, the stream is written in chunks of about that many bytes, each by its own
        delta-rs write into a staging table in a folder of this table (``harvest-staging-<id>/``), and
        all the chunks' files (with the statistics delta-rs computed) are then added to the table by ONE
        commit: memory is bounded by the chunk, and readers see the whole stream at once or not at all.
        A crash before that commit leaves only unreferenced files, which ``vacuum`` deletes.

        With ``read_version``, the commit is made against that version of the table and only if no other
        commit followed it (delta-rs' own check, no retry): it is then ``read_version + 1``. Otherwise
        ``CommitConflictError`` is raised and nothing is committed; the files already written stay
        unreferenced (``vacuum`` deletes them), and the stream is spent.

        Returns:
            The table version this commit created.

        Raises:
            SchemaMismatchError: the stream's schema is not the table's.
            ValueError: ``chunk_bytes`` is not positive.
            CommitConflictError: another commit followed ``read_version``.
        """
        if not reader.schema.equals(schema_of(table)):
            raise SchemaMismatchError(f"stream does not fit table {table!r}: {reader.schema} != {schema_of(table)}")
        if chunk_bytes is not None:
            if chunk_bytes < 1:
                raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
            staged = self.staged_append(table)
            for chunk in _chunks(reader, chunk_bytes):
                staged.write(chunk)
            version = staged.commit(metadata, read_version=read_version)
            return self.version(table) if version is None else version
        dt = self.delta_table(table, version=read_version)
        try:
            write_deltalake(dt, reader, mode="append", target_file_size=_APPEND_FILE_BYTES,
                            writer_properties=_WRITER_PROPERTIES,
                            commit_properties=_commit_properties(metadata, read_version))
        except CommitFailedError as exc:
            if read_version is None:
                raise
            raise CommitConflictError(f"{table!r} has commits after version {read_version}") from exc
        return dt.version()  # this commit's: the table's latest may already be another writer's

    def staged_append(self, table: str) -> StagedAppend:
        """An append to ``table`` written in several parts now and committed at once later (see
        :class:`StagedAppend`)."""
        schema_of(table)  # validates the name
        return StagedAppend(self, table)

    def merge_update(self, table: str, rows: pa.Table, *, key: str | Sequence[str], only_if: str,
                     metadata: Mapping[str, str], within: str = "") -> int:
        """Update the rows of ``table`` whose ``key`` (a column, or several) matches ``rows`` and that
        satisfy ``only_if`` (a SQL predicate over target ``t`` and source ``s``), in one commit. delta-rs
        rewrites every file a MERGE touches: on a large table, ``within`` (a predicate over ``t`` of
        literals: its partitions, the ids concerned) keeps the files scanned to those that may match
        (facts §1.5). A commit that conflicts with a concurrent one (another ingest's MERGE rewriting a
        file this MERGE read) is run again on the new version.

        Returns:
            The table version the commit created.
        """
        rows = conform(table, rows)
        commit = CommitProperties(custom_metadata=dict(metadata), max_commit_retries=_MAX_COMMIT_RETRIES)
        keys = [key] if isinstance(key, str) else list(key)
        predicate = " AND ".join([*([f"({within})"] if within else []), *(f"t.{k} = s.{k}" for k in keys)])

        def update() -> int:
            dt = self.delta_table(table)
            (dt.merge(rows, predicate=predicate, source_alias="s", target_alias="t", commit_properties=commit)
             .when_matched_update_all(predicate=only_if)
             .execute())
            return dt.version()

        return _rerun_on_conflict(update)

    def delete_where(self, table: str, predicate: str, *, metadata: Mapping[str, str]) -> int:
        """Delete the rows of ``table`` that satisfy ``predicate`` (SQL over its columns; literals on its
        partition columns and ids keep the files rewritten to those that may hold such rows), in one commit.
        A commit that conflicts with a concurrent one is run again on the new version.

        Returns:
            The table version the commit created.
        """
        commit = CommitProperties(custom_metadata=dict(metadata), max_commit_retries=_MAX_COMMIT_RETRIES)

        def delete() -> int:
            dt = self.delta_table(table)
            dt.delete(predicate, writer_properties=_WRITER_PROPERTIES, commit_properties=commit)
            return dt.version()

        return _rerun_on_conflict(delete)

    def insert_new(self, table: str, rows: pa.Table, *, metadata: Mapping[str, str] | None = None) -> int:
        """Insert the rows of ``rows`` whose key (``KEYS[table]``) ``table`` lacks, in one atomic commit,
        exactly once even when other processes insert the same keys at the same time.

        A MERGE that inserts only unmatched rows: delta-rs rejects its commit when a concurrent commit
        added data it should have read (``CommitFailedError``), and the MERGE is then run again on the
        new version, where those rows match. No rows are rewritten; no commit when nothing is new.

        Returns:
            How many rows were inserted.
        """
        key = KEYS[table]
        rows = conform(table, rows)
        first = pc.unique(rows.column(key[0])).to_pylist()
        # a literal target-side filter lets delta-rs skip files by their statistics (facts §1.5)
        within = f"t.{key[0]} IN ({', '.join(_sql_string(v) for v in first)}) AND " if first else ""
        predicate = within + " AND ".join(f"t.{k} = s.{k}" for k in key)
        commit = CommitProperties(custom_metadata=dict(metadata or {}),
                                  max_commit_retries=_MAX_COMMIT_RETRIES)

        def insert() -> int:
            result = (
                self.delta_table(table)
                .merge(rows, predicate=predicate, source_alias="s", target_alias="t",
                       writer_properties=_WRITER_PROPERTIES, commit_properties=commit)
                .when_not_matched_insert_all()
                .execute()
            )
            return int(result["num_target_rows_inserted"])

        return _rerun_on_conflict(insert)

    def append(self, table: str, rows: pa.Table, *, metadata: Mapping[str, str] | None = None) -> int:
        """Append ``rows`` to ``table`` in one atomic commit.

        Args:
            table: the lake table.
            rows: rows conforming to the table's schema (columns may come in any order).
            metadata: commit metadata recorded in the table history.

        Returns:
            The table version this commit created.

        Raises:
            SchemaMismatchError: ``rows`` do not fit the table's schema.
        """
        rows = conform(table, rows)
        dt = self.delta_table(table)
        write_deltalake(dt, rows, mode="append", target_file_size=_APPEND_FILE_BYTES,
                        writer_properties=_WRITER_PROPERTIES,
                        commit_properties=_commit_properties(metadata, read_version=None))
        return dt.version()  # this commit's: the table's latest may already be another writer's


class StagedAppend:
    """An append written in parts, each by its own delta-rs write, and committed by ONE transaction.

    delta-rs holds about half a byte per byte of Arrow one ``write_deltalake`` call gets until that call
    commits (delta-io/delta-rs#3578). Here each part is a write into a staging table inside the
    table's folder (``harvest-staging-<id>/``): memory is bounded by the part, and :meth:`commit` adds
    every part's files, with the statistics delta-rs computed for them, to the table in one commit, so
    readers see all of the parts or none. Until then the table is untouched; a crash leaves only
    unreferenced files, which ``vacuum`` deletes. Made by :meth:`Lake.staged_append`.
    """

    def __init__(self, lake: Lake, table: str) -> None:
        self._lake, self._table = lake, table
        self._folder = f"harvest-staging-{uuid.uuid4().hex}"
        self._uri = f"{lake.table_uri(table)}/{self._folder}"
        self._partitions = list(PARTITIONS.get(table, ())) or None
        self._written = False

    def write(self, reader: pa.RecordBatchReader | pa.Table) -> None:
        """Write one part (rows conforming to the table's schema); it is not visible until :meth:`commit`.

        Raises:
            SchemaMismatchError: the rows' schema is not the table's.
        """
        if not reader.schema.equals(schema_of(self._table)):
            raise SchemaMismatchError(f"rows do not fit table {self._table!r}: {reader.schema}")
        write_deltalake(
            self._uri,
            reader,
            mode="append",
            partition_by=self._partitions,
            configuration={**_TABLE_CONFIGURATION, "delta.dataSkippingStatsColumns": _STATS_COLUMNS[self._table]},
            target_file_size=_APPEND_FILE_BYTES,
            writer_properties=_WRITER_PROPERTIES,
            storage_options=self._lake.storage_options,
        )
        self._written = True

    def discard(self, keys: pa.Table) -> None:
        """Delete the rows written so far whose key columns (those of ``keys``) match a row of ``keys``: rows
        a later part replaces. Nothing is visible until :meth:`commit`, which adds the files left."""
        if not self._written or keys.num_rows == 0:
            return
        predicate = " AND ".join(f"t.{name} = s.{name}" for name in keys.column_names)
        (
            DeltaTable(self._uri, storage_options=self._lake.storage_options)
            .merge(keys, predicate=predicate, source_alias="s", target_alias="t")
            .when_matched_delete()
            .execute()
        )

    def matching(self, keys: pa.Table) -> pl.DataFrame:
        """The rows written so far (less those discarded) whose key columns (those of ``keys``) match a row
        of ``keys``."""
        schema = schema_of(self._table)
        if not self._written or keys.num_rows == 0:
            return pl.DataFrame(schema.empty_table())
        written = pl.scan_delta(DeltaTable(self._uri, storage_options=self._lake.storage_options))
        return written.join(pl.DataFrame(keys).lazy(), on=keys.column_names, how="semi").collect()

    def commit(self, properties: Mapping[str, str] | None = None, *,
               read_version: int | None = None) -> int | None:
        """Add every part written to the table in one commit (none when nothing was written, or every row
        was discarded).

        Args:
            properties: the commit's custom metadata.
            read_version: commit against this version of the table, and only if no other commit followed
                it (delta-rs' own check, no retry): the commit is then ``read_version + 1``. Else
                ``CommitConflictError`` is raised, nothing is committed and the parts stay staged: rows
                can be discarded and the commit tried again against a later version.

        Returns:
            The version this commit created; ``None`` when nothing was committed.

        Raises:
            CommitConflictError: another commit followed ``read_version``.
            LakeError: staged parts are gone (a vacuum with a short retention deleted them).
        """
        lake = self._lake
        if not self._written:
            return None
        files = pa.table(DeltaTable(self._uri, storage_options=lake.storage_options).get_add_actions(flatten=False))
        # The log holds paths URL-encoded (the file `benchmark=a%20b/x` is `benchmark=a%2520b/x` there), and so
        # does get_add_actions; AddAction takes the file's own path and encodes it again.
        actions = [_add_action(f"{self._folder}/{unquote(row['path'])}", row) for row in files.to_pylist()]
        # A vacuum whose retention is shorter than this append has run deletes its parts (they are
        # unreferenced until now): adding them would commit files that are gone, and every later read of
        # the table would fail. Refuse instead; the table stays as it was.
        paths = [a.path for a in actions]
        gone = sorted(set(paths) - set(lake.maintenance._present(self._table, paths)))
        if gone:
            raise LakeError(f"cannot commit the append to {self._table!r}: {len(gone)} of its staged files "
                            f"are gone (deleted by vacuum with a retention shorter than this ingest?), e.g. "
                            f"{gone[0]}; nothing was committed: ingest again")
        if not actions:  # every row discarded: nothing to commit
            self._drop_staging_log()
            return None
        dt = lake.delta_table(self._table, version=read_version)
        read = dt.version()
        try:
            dt.create_write_transaction(
                actions, mode="append", schema=schema_of(self._table), partition_by=self._partitions,
                commit_properties=_commit_properties(properties, read_version),
            )
        except CommitFailedError as exc:
            if read_version is None:
                raise
            raise CommitConflictError(f"{self._table!r} has commits after version {read_version}") from exc
        self._drop_staging_log()
        if read_version is not None:
            return read + 1
        # delta-rs does not say which version the commit got (retried past other writers' commits, it may
        # not be read + 1, nor the latest): the one whose log entry adds our first file.
        return lake._version_adding(self._table, paths[0], after=read)

    def _drop_staging_log(self) -> None:
        """Delete the staging table's log (its files now belong to the table's, or are all discarded) and
        start a new staging folder for later parts."""
        lake = self._lake
        store = DeltaStorageHandler(lake.table_uri(self._table), lake.storage_options)
        store.delete_dir(f"{self._folder}/_delta_log")
        self.__init__(lake, self._table)  # type: ignore[misc]  # later parts go to a new staging folder


class _Maintenance:
    """``lake.maintenance``: compaction, vacuum and statistics (modelled on ``dt.optimize``)."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake

    def optimize(self, table: str, *, z_order: Sequence[str] = ()) -> dict[str, Any]:
        """Compact ``table``'s small files (or z-order them by ``z_order`` columns); returns delta-rs metrics."""
        dt = self._lake.delta_table(table)
        properties = CommitProperties(custom_metadata=_maintenance_metadata("optimize"),
                                      max_commit_retries=_MAX_COMMIT_RETRIES)
        if z_order:
            return dt.optimize.z_order(list(z_order), commit_properties=properties)
        return dt.optimize.compact(commit_properties=properties)

    def vacuum(self, table: str, *, retention_hours: int | None = None, dry_run: bool = True) -> list[str]:
        """Delete files no longer needed, keeping every version a saved slice manifest pins.

        Deleted: files the table removed (compaction, rewrites) longer than ``retention_hours`` ago, and
        files in the table's folder that no version references and that were written longer ago than
        that: what a crashed ingest left (``harvest-staging-<id>/`` parts). A retention shorter than a
        running ingest can delete the parts it has staged but not yet committed.

        Args:
            table: the table.
            retention_hours: whole hours (default: the table's ``delta.deletedFileRetentionDuration``,
                30 days); below the table's retention is allowed on purpose.
            dry_run: only list what would be deleted (the default, as in delta-rs).

        Returns:
            The files deleted (or that would be), relative to the table's folder.

        Raises:
            ValueError: ``retention_hours`` is negative or not a whole number.
        """
        if retention_hours is not None and (retention_hours < 0 or retention_hours != int(retention_hours)):
            raise ValueError(f"retention_hours must be a whole number of hours >= 0, got {retention_hours}")
        keep = sorted(self._lake.pinned_versions().get(table, set()))
        dt = self._lake.delta_table(table)
        options: dict[str, Any] = {
            "retention_hours": None if retention_hours is None else int(retention_hours),
            "enforce_retention_duration": retention_hours is None,
            "keep_versions": keep or None,
            # delta-rs' default "lite" vacuum never deletes a file no commit removed (a crashed ingest's
            # staged parts); "full" also deletes unreferenced files older than the retention.
            "full": True,
        }
        # delta-rs lists a removed file as deleted on every later vacuum, even once it is gone (and
        # commits VACUUM START/END for it): report, and delete, only files still there.
        planned = dt.vacuum(dry_run=True, **options)
        present = self._present(table, planned)
        if dry_run or not present:
            return present
        gone = set(planned) - set(present)
        properties = CommitProperties(custom_metadata=_maintenance_metadata("vacuum"))
        return [f for f in dt.vacuum(dry_run=False, commit_properties=properties, **options) if f not in gone]

    def _present(self, table: str, paths: list[str]) -> list[str]:
        """The ``paths`` (relative to ``table``'s folder, as stored: ``b=x%20y/...``) that exist."""
        if not paths:
            return []
        store = DeltaStorageHandler(self._lake.table_uri(table), self._lake.storage_options)
        infos = store.get_file_info(paths)
        return [p for p, info in zip(paths, infos, strict=True) if info.type != pa_fs.FileType.NotFound]

    def stats(self, table: str, *, version: int | str | datetime | None = None) -> dict[str, Any]:
        """Version, rows, data files, bytes and last commit of ``table``."""
        dt = self._lake.delta_table(table, version=version)
        actions = pl.DataFrame(dt.get_add_actions(flatten=True))
        last = self._lake.commit_info(table, dt.version())  # of the version read, not only the latest
        return {
            "table": table,
            "version": dt.version(),
            "rows": int(actions["num_records"].sum()) if actions.height else 0,
            "files": actions.height,
            "bytes": int(actions["size_bytes"].sum()) if actions.height else 0,
            "last_operation": last.get("operation"),
            "last_commit": datetime.fromtimestamp(last["timestamp"] / 1000, tz=UTC).isoformat()
            if "timestamp" in last else None,
        }


def _rerun_on_conflict(run: Callable[[], _T]) -> _T:
    """``run()`` (a MERGE on the table's latest version), run again while its commit conflicts with a
    concurrent one (``CommitFailedError``: delta-rs' own retries only re-check the conflict)."""
    attempt = 0
    while True:
        try:
            return run()
        except CommitFailedError:
            attempt += 1
            if attempt >= _MAX_COMMIT_RETRIES:
                raise
            time.sleep(random.uniform(0, 0.01 * attempt))  # spread the losers' re-runs


def _commit_properties(metadata: Mapping[str, str] | None, read_version: int | None) -> CommitProperties:
    """An append's commit properties: no retry when it must land right after ``read_version``, else
    enough retries for many concurrent appenders."""
    retries = _MAX_COMMIT_RETRIES if read_version is None else 0
    return CommitProperties(custom_metadata=dict(metadata or {}), max_commit_retries=retries)


def _maintenance_metadata(operation: str) -> dict[str, str]:
    """The commit metadata of a maintenance operation: what ran, and which Harvest ran it."""
    from trajectory_lake.ingest import tool_version  # ingest imports this module

    return {"harvest.operation": operation, "harvest.tool_version": tool_version()}


def _as_datetime(text: str) -> datetime | str:
    """An ISO 8601 / RFC 3339 time as a datetime (``Z`` or an offset; none is UTC), else ``text``
    unchanged for delta-rs to judge."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return text
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _sql_string(value: object) -> str:
    """``value`` as a SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def _log_bytes(store: DeltaStorageHandler, version: int) -> bytes | None:
    """The bytes of the log entry of ``version`` in a table's ``store``; ``None`` if there is none (another
    error reading it, a network one, is raised: it does not say the entry is absent)."""
    try:
        with store.open_input_file(f"_delta_log/{version:020d}.json") as entry:
            return entry.read()
    except FileNotFoundError:
        return None


def _one_line(exc: BaseException) -> str:
    """An error's message on one line: delta-rs and object_store messages span several, with ANSI colours."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    return " ".join(part for part in re.split(r"\s*(?:\n|↳)\s*", text) if part).strip()


def _missing_files_message(table: str, version: object, exc: BaseException) -> str:
    """The error for a read whose data files are gone."""
    at = "the latest version" if version is None else f"version {version!r}"
    return (f"cannot read {table!r} at {at}: a data file it references is gone (deleted by vacuum?): "
            f"{_one_line(exc)}")


def _chunks(reader: pa.RecordBatchReader, chunk_bytes: int) -> Iterator[pa.RecordBatchReader]:
    """``reader``'s batches as consecutive readers of about ``chunk_bytes`` each (at least one batch),
    streamed: each must be read to its end before the next is taken."""
    batches = iter(reader)
    pending = next(batches, None)

    def take() -> Iterator[pa.RecordBatch]:
        nonlocal pending
        size = 0
        while pending is not None and size < chunk_bytes:
            batch, pending = pending, next(batches, None)
            size += batch.nbytes
            yield batch

    while pending is not None:
        yield pa.RecordBatchReader.from_batches(reader.schema, take())


def _add_action(path: str, file: Mapping[str, Any]) -> AddAction:
    """The add action of a file of a staging table (a row of ``get_add_actions(flatten=False)``), at ``path``."""
    stats: dict[str, Any] = {"numRecords": file["num_records"]}
    for column, name in (("min", "minValues"), ("max", "maxValues"), ("null_count", "nullCount")):
        values = _stats_json(file.get(column) or {})
        if values:
            stats[name] = values
    return AddAction(path=path, size=file["size_bytes"], partition_values=dict(file.get("partition") or {}),
                     modification_time=file["modification_time"], data_change=True, stats=json.dumps(stats))


def _stats_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """Column statistics as the Delta log writes them: timestamps in ISO 8601 with milliseconds (UTC,
    ``Z``), dates in ISO; a missing or non-finite value is left out (no statistic: no skipping)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, Mapping):
            value = _stats_json(value) or None
        elif isinstance(value, datetime):
            value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
            value = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
        elif isinstance(value, date):
            value = value.isoformat()
        elif isinstance(value, float) and not math.isfinite(value):
            value = None
        if value is not None:
            out[name] = value
    return out


def conform(
    table: str, rows: pa.Table | Iterable[Mapping[str, Any]], *, constants: Mapping[str, Any] | None = None
) -> pa.Table:
    """Cast rows (an Arrow table or dicts) to ``table``'s exact schema.

    Args:
        table: the lake table whose schema the rows must fit.
        rows: an Arrow table, or dicts keyed by column.
        constants: columns that hold one value in every row (an ingest's provenance), replacing the rows'
            own: the same table as with the values in every row, without a dict per row to merge them in.

    Raises:
        SchemaMismatchError: a column is missing, unknown, or of a type that does not cast.
    """
    schema = schema_of(table)
    try:
        if not isinstance(rows, pa.Table):
            fields = schema if not constants else pa.schema([f for f in schema if f.name not in constants])
            rows = pa.Table.from_pylist(list(rows), schema=fields)
        for name, value in (constants or {}).items():
            column = pa.repeat(pa.scalar(value, schema.field(name).type), rows.num_rows)
            if name in rows.column_names:
                rows = rows.set_column(rows.column_names.index(name), name, column)
            else:
                rows = rows.append_column(name, column)
        unknown = set(rows.column_names) - set(schema.names)
        missing = set(schema.names) - set(rows.column_names)
        if unknown or missing:
            raise SchemaMismatchError(
                f"rows do not fit table {table!r}: unknown columns {sorted(unknown)}, missing {sorted(missing)}"
            )
        rows = rows.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, ValueError,
            OverflowError) as exc:  # OverflowError: an integer beyond int64
        raise SchemaMismatchError(f"rows do not fit table {table!r}: {exc}") from exc
    nulls = [f.name for f in schema if not f.nullable and rows.column(f.name).null_count]
    if nulls:
        raise SchemaMismatchError(f"rows do not fit table {table!r}: nulls in required column(s) {nulls}")
    return rows
