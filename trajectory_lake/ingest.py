"""Ingest harness files into the lake.

Contract:

* every source file is detected by content and read by one adapter; files that no adapter knows,
  and records an adapter cannot normalise, go to ``quarantine`` with the reason and the raw bytes
  (capped; the original size is recorded) — the rest of the batch goes in;
* ids are deterministic, so a row whose key is already in the lake (or earlier in the batch) is a
  duplicate and is not written: re-ingesting the same files adds nothing to the data tables;
* each table gets at most one commit per ingest, carrying ``harvest.ingest_id``, the adapters, the
  sources and the tool version as commit metadata; a crash between commits leaves every table
  readable, and running the ingest again writes exactly the missing rows;
* counts reconcile per table: ``read = written + duplicate + quarantined``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from trajectory_lake._hashing import stable_id
from trajectory_lake.adapters import Adapter, RunGroup, SourceFile, detect, run_dir_of
from trajectory_lake.exceptions import SchemaMismatchError
from trajectory_lake.lake import Lake, conform
from trajectory_lake.records import Bundle, Quarantined
from trajectory_lake.schema import KEYS

__all__ = ["DATA_SUFFIXES", "IngestReport", "TableCounts", "discover", "ingest"]

logger = logging.getLogger(__name__)

DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
DEFAULT_MAX_RAW_BYTES = 1 << 20
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Tables written per ingest, in this order (parents before children only for readability: ids make
# any order safe to re-run).
_WRITE_ORDER = ("tasks", "runs", "trajectories", "steps", "candidates", "outcomes", "quarantine")


def tool_version() -> str:
    """The installed ``harvest-lake`` version, recorded in every commit."""
    try:
        return version("harvest-lake")
    except PackageNotFoundError:
        return "0+unknown"


@dataclass
class TableCounts:
    """Rows of one table in one ingest. ``read = written + duplicate + quarantined``."""

    read: int = 0
    written: int = 0
    duplicate: int = 0
    quarantined: int = 0


@dataclass
class IngestReport:
    """What one ingest did.

    Attributes:
        ingest_id: the id recorded on every row and commit of this ingest.
        counts: per table counts.
        versions: the table versions this ingest's commits created.
        sources: the files read, with the adapter that read each.
        skipped: files inside given directories that were not data files (by suffix).
        warnings: things a user should know (labels that matched no candidate, ...).
    """

    ingest_id: str
    lake: str
    counts: dict[str, TableCounts] = field(default_factory=lambda: defaultdict(TableCounts))
    versions: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None

    def total(self, what: str) -> int:
        """Sum of one count (``read``, ``written``, ``duplicate``, ``quarantined``) over tables."""
        return sum(getattr(c, what) for c in self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``harvest ingest --json`` prints)."""
        return {
            "ingest_id": self.ingest_id,
            "lake": self.lake,
            "counts": {t: asdict(c) for t, c in sorted(self.counts.items())},
            "totals": {k: self.total(k) for k in ("read", "written", "duplicate", "quarantined")},
            "versions": self.versions,
            "sources": self.sources,
            "skipped": self.skipped,
            "warnings": self.warnings,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


def discover(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[Path]]:
    """Expand files and directories into the files to ingest.

    Files named explicitly are always ingested (an unknown format is quarantined); inside
    directories only data files (``DATA_SUFFIXES``) are, the others are returned as skipped.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    files: list[Path] = []
    skipped: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        if path.is_file():
            files.append(path)
            continue
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            if any(part.startswith(".") for part in child.relative_to(path).parts):
                continue
            (files if child.name.endswith(DATA_SUFFIXES) else skipped).append(child)
    unique = list(dict.fromkeys(p.resolve() for p in files))
    return unique, skipped


def ingest(
    paths: Sequence[str | os.PathLike[str]],
    lake: Lake,
    *,
    max_raw_bytes: int = DEFAULT_MAX_RAW_BYTES,
) -> IngestReport:
    """Ingest files and directories into ``lake``.

    Args:
        paths: files or directories; formats are detected by content.
        lake: the target lake (its tables are created if missing).
        max_raw_bytes: cap on the raw bytes kept per quarantined record.

    Returns:
        The :class:`IngestReport`.

    Raises:
        FileNotFoundError: a path does not exist (nothing is written).

    Examples:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "preds.jsonl").write_text('{"instance_id": "a__b-1", "model_patch": "diff", "resolved": true}\\n')
        >>> report = ingest([d], Lake(d / "lake"))
        >>> report.counts["candidates"].written, report.counts["outcomes"].written
        (1, 1)
    """
    if max_raw_bytes < 0:
        raise ValueError(f"max_raw_bytes must be >= 0, got {max_raw_bytes}")
    files, skipped = discover(paths)
    lake.create()
    report = IngestReport(ingest_id=str(uuid.uuid4()), lake=lake.uri, skipped=[str(p) for p in skipped])

    bundles: list[Bundle] = []
    quarantined: list[tuple[SourceFile, str, Quarantined]] = []
    for group, members in _group(files, report, quarantined):
        for source, adapter in members:
            read = list(adapter.read(source, group))
            for item in _validated(read, adapter):
                if isinstance(item, Quarantined):
                    quarantined.append((source, adapter.name, item))
                else:
                    bundles.append(item)
        unmatched = sorted(set(group.labels) - group.matched)
        if unmatched:
            report.warnings.append(
                f"{len(unmatched)} label(s) in {group.key} matched no candidate of that run "
                f"(e.g. {', '.join(unmatched[:3])})"
            )
    _write(lake, report, bundles, quarantined, max_raw_bytes)
    return report


def _validated(items: list[Bundle | Quarantined], adapter: Adapter) -> list[Bundle | Quarantined]:
    """The items, with every bundle whose rows do not fit their table's schema turned into a quarantine marker.

    All of a source's rows are checked at once (the common, fast case); only when that fails is each
    record checked alone to find the bad ones, so one bad record never fails a commit.
    """
    bundles = [i for i in items if isinstance(i, Bundle)]
    if not bundles or _fits(bundles):
        return items
    out: list[Bundle | Quarantined] = []
    for item in items:
        if isinstance(item, Bundle) and not _fits([item]):
            error = _misfit(item)
            raw = json.dumps(item.rows, default=str, ensure_ascii=False)
            out.append(adapter.quarantine(item.locator or "$", error, raw))
        else:
            out.append(item)
    return out


def _fits(bundles: list[Bundle]) -> bool:
    return not _misfit(*bundles)


def _misfit(*bundles: Bundle) -> str:
    """The first schema problem of the bundles' rows, or ``""``."""
    rows_by_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for bundle in bundles:
        for table, rows in bundle.rows.items():
            rows_by_table[table].extend({**row, "ingest_id": "", "ingested_at": _EPOCH} for row in rows)
    for table, rows in rows_by_table.items():
        try:
            conform(table, rows)
        except SchemaMismatchError as exc:
            return str(exc)
    return ""


def _group(
    files: list[Path], report: IngestReport, quarantined: list[tuple[SourceFile, str, Quarantined]]
) -> list[tuple[RunGroup, list[tuple[SourceFile, Adapter]]]]:
    """Read and detect every file, and gather them into run groups (labels and run hints resolved)."""
    groups: dict[Path, tuple[RunGroup, list[tuple[SourceFile, Adapter]]]] = {}
    for path in files:
        source = SourceFile(path=path, data=path.read_bytes())
        adapter = detect(source)
        if adapter is None:
            reason = "empty file" if not source.data.strip() else "unknown format: no adapter recognises this content"
            quarantined.append((source, "detect", Quarantined(table="unknown", locator="$", error=reason, raw=source.data)))
            report.sources[source.uri] = "quarantined"
            continue
        report.sources[source.uri] = adapter.name
        key = run_dir_of(path)
        group, members = groups.setdefault(key, (RunGroup(key=key), []))
        for name, value in adapter.hints(source).items():
            group.run_hints.setdefault(name, value)
        for item in adapter.labels(source):
            if isinstance(item, Quarantined):
                quarantined.append((source, adapter.name, item))
            else:
                instance_id, outcome = item
                group.labels.setdefault(instance_id, {}).update(outcome)
        members.append((source, adapter))
    for _, members in groups.values():
        members.sort(key=lambda m: -m[1].rank)
    return list(groups.values())


def _write(
    lake: Lake,
    report: IngestReport,
    bundles: list[Bundle],
    quarantined: list[tuple[SourceFile, str, Quarantined]],
    max_raw_bytes: int,
) -> None:
    now = datetime.now(UTC)
    rows_by_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    seen: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    # Highest priority first, so the richest description of an entity is the one kept.
    for bundle in sorted(bundles, key=lambda b: -b.priority):
        for table, rows in bundle.rows.items():
            counts = report.counts[table]
            for row in rows:
                counts.read += 1
                key = tuple(row[k] for k in KEYS[table])
                if key in seen[table]:
                    counts.duplicate += 1
                    continue
                seen[table].add(key)
                rows_by_table[table].append(row)

    for source, adapter_name, item in quarantined:
        counts = report.counts[item.table]
        counts.read += 1
        counts.quarantined += 1
        raw = item.raw
        quarantine_id = stable_id("quarantine", source.uri, source.sha256, item.locator, item.error)
        if (quarantine_id,) in seen["quarantine"]:
            continue
        seen["quarantine"].add((quarantine_id,))
        rows_by_table["quarantine"].append(
            {
                "quarantine_id": quarantine_id,
                "ingest_id": report.ingest_id,
                "table": item.table,
                "adapter": adapter_name,
                "source_uri": source.uri,
                "locator": item.locator,
                "error": item.error,
                "raw": raw[:max_raw_bytes],
                "raw_size": len(raw),
                "raw_truncated": len(raw) > max_raw_bytes,
                "recorded_at": now,
            }
        )
        logger.warning("quarantined %s %s: %s", source.path, item.locator, item.error)

    metadata = {
        "harvest.ingest_id": report.ingest_id,
        "harvest.adapters": ",".join(sorted({a for a in report.sources.values()})),
        "harvest.sources": json.dumps(sorted(report.sources))[:4096],
        "harvest.tool_version": tool_version(),
    }
    for table in _WRITE_ORDER:
        rows = rows_by_table.get(table)
        if not rows:
            continue
        fresh = _drop_existing(lake, table, rows)
        if table == "tasks":
            upgraded = _upgrade_inferred_tasks(lake, [r for r in rows if r not in fresh], report.ingest_id, now, metadata)
            report.counts[table].written += upgraded
            report.counts[table].duplicate -= upgraded
            if upgraded:
                report.versions[table] = lake.version(table)
        if table != "quarantine":
            report.counts[table].duplicate += len(rows) - len(fresh)
            report.counts[table].written += len(fresh)
        if not fresh:
            continue
        if table != "quarantine":
            for row in fresh:
                row["ingest_id"] = report.ingest_id
                row["ingested_at"] = now
        report.versions[table] = lake.append(table, conform(table, fresh), metadata=metadata)

    report.finished_at = datetime.now(UTC)
    report.versions["ingests"] = lake.append("ingests", _ingest_row(report), metadata=metadata)


def _upgrade_inferred_tasks(
    lake: Lake, rows: list[dict[str, Any]], ingest_id: str, now: datetime, metadata: dict[str, str]
) -> int:
    """Replace task rows that were only inferred from a trajectory (no benchmark, no reference) with the
    dataset's own rows for the same task, so the result does not depend on ingest order. Returns the
    number of rows replaced."""
    richer = [r for r in rows if r.get("benchmark") is not None or r.get("reference") is not None]
    if not richer:
        return 0
    inferred = (
        lake.scan("tasks")
        .filter(pl.col("task_id").is_in([r["task_id"] for r in richer]) & pl.col("benchmark").is_null()
                & pl.col("reference").is_null())
        .select("task_id").collect()["task_id"].to_list()
    )
    if not inferred:
        return 0
    wanted = set(inferred)
    source = conform("tasks", [{**r, "ingest_id": ingest_id, "ingested_at": now} for r in richer if r["task_id"] in wanted])
    lake.merge_update("tasks", source, key="task_id", only_if="t.benchmark IS NULL AND t.reference IS NULL",
                      metadata=metadata)
    return source.num_rows


def _drop_existing(lake: Lake, table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    key_cols = KEYS[table]
    keys = pl.DataFrame({k: [row[k] for row in rows] for k in key_cols})
    present = {tuple(r) for r in lake.existing_keys(table, keys).iter_rows()}
    return [row for row in rows if tuple(row[k] for k in key_cols) not in present]


def _ingest_row(report: IngestReport) -> pa.Table:
    return conform(
        "ingests",
        [
            {
                "ingest_id": report.ingest_id,
                "adapters": sorted(set(report.sources.values())),
                "sources": sorted(report.sources),
                "tool_version": tool_version(),
                "started_at": report.started_at,
                "finished_at": report.finished_at,
                "n_read": report.total("read"),
                "n_written": report.total("written"),
                "n_duplicate": report.total("duplicate"),
                "n_quarantined": report.total("quarantined"),
                "counts": json.dumps({t: asdict(c) for t, c in report.counts.items()}),
                "table_versions": list(report.versions.items()),
            }
        ],
    )
