"""Typed Arrow schemas of every lake table, in one place.

Storage contract (see ``../shared/DESIGN.md``):

* every table is a Delta table ``<lake>/<name>``; columns are typed Arrow, JSON strings only for
  true leftovers (``extra``, ``config``, ``metadata``);
* timestamps are ``timestamp[us, UTC]`` (delta-rs downcasts ns and flips the protocol on naive ones);
* integers are ``int64`` / ``int32`` chosen up front (Delta has no type widening);
* each table has one key (``KEYS``) built from deterministic, content-addressed ids, so writing the
  same record twice adds nothing;
* a table's schema only grows, by nullable columns: each column added after a table could already hold
  rows is a step of ``MIGRATIONS``, which a writer opening an older lake applies (``Lake.create``). A
  table records the schema version it was created at in its Delta table property
  ``harvest.schema_version``, and a migration step the version it brings in its commit metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pyarrow as pa

__all__ = [
    "KEYS",
    "MIGRATIONS",
    "PARTITIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "TABLE_NAMES",
    "TOOL_CALL",
    "Migration",
    "schema_of",
]

# The schema version this code writes: the newest version of MIGRATIONS. 2: tables partitioned by benchmark;
# 3: outcomes.extra, and the rerank_events columns feedback added (see MIGRATIONS).
SCHEMA_VERSION: Final = 3

_TS = pa.timestamp("us", tz="UTC")

TOOL_CALL: Final = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("arguments", pa.string()),  # JSON text, as the OpenAI wire format carries it
    ]
)

_PROVENANCE = [
    pa.field("ingest_id", pa.string(), nullable=False),
    pa.field("ingested_at", _TS, nullable=False),
]

TABLES: Final[dict[str, pa.Schema]] = {
    "runs": pa.schema(
        [
            pa.field("run_id", pa.string(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("harness", pa.string()),
            pa.field("harness_version", pa.string()),
            pa.field("model", pa.string()),
            pa.field("benchmark", pa.string()),
            pa.field("config", pa.string()),
            pa.field("started_at", _TS),
            *_PROVENANCE,
        ]
    ),
    "tasks": pa.schema(
        [
            pa.field("task_id", pa.string(), nullable=False),
            pa.field("domain", pa.string(), nullable=False),
            pa.field("benchmark", pa.string()),
            pa.field("instance_id", pa.string()),
            pa.field("repo", pa.string()),
            pa.field("base_commit", pa.string()),
            pa.field("prompt", pa.string()),
            pa.field("reference", pa.string()),  # gold patch / reference answer, when published
            pa.field("metadata", pa.string()),
            pa.field("source_uri", pa.string()),
            *_PROVENANCE,
        ]
    ),
    "trajectories": pa.schema(
        [
            pa.field("trajectory_id", pa.string(), nullable=False),
            pa.field("run_id", pa.string(), nullable=False),
            pa.field("task_id", pa.string(), nullable=False),
            pa.field("domain", pa.string(), nullable=False),
            pa.field("benchmark", pa.string()),  # what the run was evaluated on (partition column)
            pa.field("harness", pa.string()),
            pa.field("model", pa.string()),
            pa.field("source_format", pa.string(), nullable=False),
            pa.field("source_uri", pa.string()),
            pa.field("source_sha256", pa.string()),
            pa.field("exit_status", pa.string()),
            pa.field("n_steps", pa.int32()),
            pa.field("tokens", pa.int64()),
            pa.field("cost_usd", pa.float64()),
            pa.field("started_at", _TS),
            pa.field("ended_at", _TS),
            pa.field("extra", pa.string()),
            *_PROVENANCE,
        ]
    ),
    "steps": pa.schema(
        [
            pa.field("trajectory_id", pa.string(), nullable=False),
            pa.field("step_index", pa.int32(), nullable=False),
            pa.field("role", pa.string(), nullable=False),
            pa.field("content", pa.string()),
            pa.field("reasoning", pa.string()),
            pa.field("tool_calls", pa.list_(TOOL_CALL)),
            pa.field("tool_call_id", pa.string()),
            pa.field("is_error", pa.bool_()),
            pa.field("tokens", pa.int64()),
            pa.field("timestamp", _TS),
            pa.field("run_id", pa.string()),
            pa.field("task_id", pa.string()),
            pa.field("domain", pa.string()),
            pa.field("benchmark", pa.string()),
            pa.field("extra", pa.string()),
            *_PROVENANCE,
        ]
    ),
    "candidates": pa.schema(
        [
            pa.field("candidate_id", pa.string(), nullable=False),
            pa.field("trajectory_id", pa.string(), nullable=False),
            pa.field("task_id", pa.string(), nullable=False),
            pa.field("run_id", pa.string()),
            pa.field("benchmark", pa.string()),
            pa.field("kind", pa.string(), nullable=False),  # patch | answer | action
            pa.field("step_index", pa.int32()),  # for kind == "action"
            pa.field("content", pa.string()),
            pa.field("content_sha256", pa.string(), nullable=False),
            *_PROVENANCE,
        ]
    ),
    "outcomes": pa.schema(
        [
            pa.field("outcome_id", pa.string(), nullable=False),
            pa.field("candidate_id", pa.string()),
            pa.field("trajectory_id", pa.string()),
            pa.field("task_id", pa.string()),
            pa.field("benchmark", pa.string()),
            pa.field("name", pa.string(), nullable=False),  # resolved | reward | ...
            pa.field("value", pa.float64()),
            pa.field("source", pa.string()),  # harness | tests | judge | human
            pa.field("evaluator", pa.string()),
            pa.field("recorded_at", _TS),
            *_PROVENANCE,
            # JSON: what the label's source says beyond its value (the tests a SWE-bench report lists, its
            # patch flags); added at schema version 3, null in the rows written before
            pa.field("extra", pa.string()),
        ]
    ),
    "ingests": pa.schema(
        [
            pa.field("ingest_id", pa.string(), nullable=False),
            pa.field("adapters", pa.list_(pa.string())),
            pa.field("sources", pa.list_(pa.string())),
            pa.field("tool_version", pa.string()),
            pa.field("started_at", _TS),
            pa.field("finished_at", _TS),
            pa.field("n_read", pa.int64()),
            pa.field("n_written", pa.int64()),
            pa.field("n_duplicate", pa.int64()),
            pa.field("n_quarantined", pa.int64()),
            pa.field("counts", pa.string()),  # JSON: per table read/written/duplicate/quarantined
            pa.field("table_versions", pa.map_(pa.string(), pa.int64())),
        ]
    ),
    "quarantine": pa.schema(
        [
            pa.field("quarantine_id", pa.string(), nullable=False),
            pa.field("ingest_id", pa.string(), nullable=False),
            pa.field("table", pa.string()),  # the table the record was meant for
            pa.field("adapter", pa.string()),
            pa.field("source_uri", pa.string()),
            pa.field("locator", pa.string()),  # line number, byte offset or JSON path
            pa.field("error", pa.string(), nullable=False),
            pa.field("raw", pa.binary()),
            pa.field("raw_size", pa.int64()),  # size before the cap
            pa.field("raw_truncated", pa.bool_()),
            pa.field("recorded_at", _TS, nullable=False),
        ]
    ),
    # One feedback event on a served rerank (trajectory_lake.feedback writes it): what was served, what
    # the agent chose and the outcome it reported. The candidates themselves and the outcome go to
    # `candidates` / `outcomes` too, so training slices read served decisions like any other rollout.
    "rerank_events": pa.schema(
        [
            pa.field("request_id", pa.string(), nullable=False),
            pa.field("model_uri", pa.string()),
            pa.field("task_id", pa.string()),
            pa.field("candidate_hashes", pa.list_(pa.string())),
            pa.field("scores", pa.list_(pa.float64())),
            pa.field("chosen", pa.int32()),
            pa.field("at", _TS),  # when the rerank was served
            # added with feedback (nullable: rows written before have none)
            pa.field("event_id", pa.string()),  # b2: hash of (request_id, chosen, outcome)
            pa.field("model_revision", pa.string()),
            pa.field("candidate_ids", pa.list_(pa.string())),  # their rows in `candidates`
            pa.field("values", pa.list_(pa.float64())),  # raw head outputs; `scores` are calibrated
            pa.field("outcome_name", pa.string()),
            pa.field("outcome_value", pa.float64()),
            pa.field("outcome_index", pa.int32()),  # the candidate the outcome is about
            pa.field("recorded_at", _TS),  # when the feedback arrived
        ]
    ),
    "slices": pa.schema(
        [
            pa.field("slice_id", pa.string(), nullable=False),
            pa.field("name", pa.string()),
            pa.field("manifest", pa.string(), nullable=False),  # the SliceManifest as JSON
            pa.field("table_versions", pa.map_(pa.string(), pa.int64())),  # what vacuum must keep
            pa.field("created_at", _TS),
        ]
    ),
}

TABLE_NAMES: Final = tuple(TABLES)

# Partition columns: low-cardinality, known at ingest, and what curated slices filter on first, so a
# one-benchmark slice reads only that benchmark's files (unknown benchmark: Delta's null partition).
PARTITIONS: Final[dict[str, tuple[str, ...]]] = {
    "tasks": ("benchmark",),
    "trajectories": ("benchmark",),
    "steps": ("benchmark",),
    "candidates": ("benchmark",),
    "outcomes": ("benchmark",),
}

# The key of each table: writing a row whose key is already present adds nothing.
KEYS: Final[dict[str, tuple[str, ...]]] = {
    "runs": ("run_id",),
    "tasks": ("task_id",),
    "trajectories": ("trajectory_id",),
    "steps": ("trajectory_id", "step_index"),
    "candidates": ("candidate_id",),
    "outcomes": ("outcome_id",),
    "ingests": ("ingest_id",),
    "quarantine": ("quarantine_id",),
    "rerank_events": ("request_id", "event_id"),
    "slices": ("slice_id",),
}


@dataclass(frozen=True, kw_only=True)
class Migration:
    """One step of the lake's schema evolution: nullable columns added to a table that may hold rows.

    Attributes:
        version: the schema version the step belongs to (several steps may share one).
        name: the step's name, recorded in the commit metadata of the commit that applies it.
        table: the table it adds columns to.
        columns: the columns it adds, as ``TABLES[table]`` defines them (all nullable: rows written before
            read them as null).
    """

    version: int
    name: str
    table: str
    columns: tuple[str, ...]

    def fields(self) -> list[pa.Field]:
        """The Arrow fields of the columns this step adds, from ``TABLES``."""
        return [TABLES[self.table].field(name) for name in self.columns]


# Every column added to a table after it could hold rows, oldest first; a writer opening the lake applies
# each step its tables lack, one Delta commit per step (trajectory_lake._migrations). A new column is a field
# in TABLES (nullable, at the end) and a step here; a new version also bumps SCHEMA_VERSION.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    # feedback (3aab3ed) grew rerank_events at version 2, upgrading old tables itself, without a bump
    Migration(
        version=3,
        name="rerank_events-feedback-columns",
        table="rerank_events",
        columns=(
            "event_id",
            "model_revision",
            "candidate_ids",
            "values",
            "outcome_name",
            "outcome_value",
            "outcome_index",
            "recorded_at",
        ),
    ),
    Migration(version=3, name="outcomes-extra", table="outcomes", columns=("extra",)),
)


def schema_of(table: str) -> pa.Schema:
    """The Arrow schema of a lake table.

    Args:
        table: one of ``TABLE_NAMES``.

    Returns:
        The table's ``pyarrow.Schema``.

    Raises:
        ValueError: if ``table`` is not a lake table.

    Examples:
        >>> schema_of("steps").field("tool_calls").type.value_type.names
        ['id', 'name', 'arguments']
    """
    try:
        return TABLES[table]
    except KeyError:
        raise ValueError(f"unknown lake table {table!r}; expected one of {', '.join(TABLE_NAMES)}") from None
