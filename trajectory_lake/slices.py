"""Slices: declarative, reproducible selections of labelled candidates for training and evaluation.

A :class:`SliceSpec` (a TOML file, see ``configs/slices/``) says *what* to take: candidate kind and
label (and bounds on its value), filters on domain, benchmark, runs, models, harnesses, exit status and
ingest time, dedup of identical candidates, the split by task hash, and class balance. :func:`resolve_slice` pins it against table
versions (the latest ones, unless the spec pins versions or a time) and returns a
:class:`SliceManifest`: the spec, the versions, the counts and a content hash of the resulting rows.

Contract: the same manifest gives the same rows forever — reads go to the pinned versions, so later
ingests and compaction change nothing, and ``Lake.vacuum`` keeps every version a saved manifest pins.
Manifests are saved in the lake's ``slices`` table (``save=True``) and as JSON files.

Outputs: :func:`scan_slice` (a polars LazyFrame), :func:`slice_batches` (Arrow record batches),
:func:`slice_dataset` (a torch ``IterableDataset`` sharded by rank and worker), and
:func:`export_slice` (Parquet/JSONL rows with OpenAI-style ``messages`` + ``tools``, the layout TRL
and other trainers read).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import tomllib
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trajectory_lake._hashing import canonical_json
from trajectory_lake.dependencies import lazy_import
from trajectory_lake.records import (
    COPIED_CONTEXT,
    NEXT_CALL_ONLY,
    NOT_IN_HISTORY,
    REPLAYED_BY_COMPACTION,
    SUMMARIZES_STEPS,
    TOOL_CALLS_PARSED_FROM,
    step_action,
)

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable

    from trajectory_lake.lake import Lake
else:  # value_model imports this module (task_bucket, SliceSpec) where the lake may be absent
    pl = lazy_import("polars", feature="lake slices")

__all__ = [
    "SLICE_TABLES",
    "STEP_COLUMNS",
    "SeenBefore",
    "SliceManifest",
    "SliceSpec",
    "answer_written_from",
    "calls_parsed_from",
    "export_slice",
    "final_message_at",
    "load_manifest",
    "load_spec",
    "load_steps",
    "own_thought",
    "replayed",
    "resolve_slice",
    "scan_slice",
    "scan_steps",
    "seen_before",
    "slice_batches",
    "slice_dataset",
    "task_bucket",
    "task_buckets",
]

# The tables a slice reads (and so pins).
# The tables a slice pins: those its rows come from, and ``steps``, which exports and action-level or
# context-reading training read for the same trajectories (so vacuum keeps that version too).
SLICE_TABLES = ("runs", "tasks", "trajectories", "steps", "candidates", "outcomes")
# A slice's queries read one benchmark's partitions and then join, dedup and sort frames that fit in
# memory. Polars 2's default streaming engine adds ~50 ms of fixed cost to each such query (measured:
# the final join + split + sort of 12.5k rows, 48 ms streaming vs 4 ms in-memory).
_ENGINE = "in-memory"
Split = Literal["train", "val", "test"]


def task_bucket(task_id: str, seed: int = 0) -> float:
    """A stable number in [0, 1) for ``task_id``: the same on every machine, run and lake.

    Examples:
        >>> 0 <= task_bucket("swe-bench/django__django-11099") < 1
        True
    """
    return task_buckets((task_id,), seed)[0]


def task_buckets(ids: Iterable[str], seed: int = 0) -> list[float]:
    """``task_bucket`` of each id: the same values in about 2/3 of the time (a slice hashes every task).

    Examples:
        >>> task_buckets(["a", "b"]) == [task_bucket("a"), task_bucket("b")]
        True
    """
    digests = _digests(f"{seed}:".encode(), (i.encode() for i in ids))
    return [int.from_bytes(d, "big") / 2**64 for d in digests]


def _digests(prefix: bytes, keys: Iterable[bytes]) -> list[bytes]:
    """The 8-byte BLAKE2b digest of ``prefix + key`` for each key: a task's bucket, as a big-endian
    fraction of 2**64. The prefix is hashed once and its state copied for each key (half the time of
    hashing each whole key: a slice hashes every task)."""
    seeded, digests = hashlib.blake2b(prefix, digest_size=8), []
    for key in keys:
        state = seeded.copy()
        state.update(key)
        digests.append(state.digest())
    return digests


def _task_buckets(ids: pl.Series, seed: int) -> pl.Series:
    """``task_buckets`` of ``ids`` as a Float64 Series: polars encodes the ids and reads the digests, so
    only the hashing runs per id in Python."""
    keys = ids.cast(pl.String).cast(pl.Binary).to_list()
    digests = pl.Series(_digests(f"{seed}:".encode(), keys), dtype=pl.Binary)
    return digests.bin.reinterpret(dtype=pl.UInt64, endianness="big").cast(pl.Float64) / 2.0**64


# Spec options added after manifests were first saved: absent from ``to_dict`` while at their default.
_LATER_OPTIONS = frozenset({"label_min", "label_max", "exit_statuses", "exclude_exit_statuses"})


def _strings(value: Any, name: str, problems: list[str]) -> tuple[str, ...]:  # noqa: ANN401
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{name} must be a list of non-empty strings, got {value!r}")
        return ()
    return tuple(value)


def _time(value: Any, name: str, problems: list[str]) -> datetime | None:  # noqa: ANN401
    """``value`` (ISO-8601 text, a TOML date-time or a TOML date, read as midnight) as an aware datetime;
    one without a zone is read as UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{name} must be an ISO-8601 time, got {value!r}")
            return None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    elif value is not None and not isinstance(value, datetime):
        problems.append(f"{name} must be an ISO-8601 time or a TOML date-time, got {value!r}")
        return None
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _number(value: Any, name: str, problems: list[str], *, optional: bool = False) -> bool:  # noqa: ANN401
    """Whether ``value`` is a finite number (or, when ``optional``, None); if not, says so in ``problems``."""
    if value is None and optional:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        problems.append(f"{name} must be a finite number, got {value!r}")
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class SliceSpec:
    """What a slice selects. Empty filter lists mean "no filter"."""

    name: str = field(metadata={"help": "A name for people; the manifest's id is a hash."})
    kind: str = field(default="patch", metadata={"help": "Candidate kind: patch, answer or action."})
    label: str = field(default="resolved", metadata={"help": "Outcome name used as the label."})
    labelled_only: bool = field(default=True, metadata={"help": "Drop candidates without that outcome."})
    label_min: float | None = field(
        default=None, metadata={"help": "Keep rows whose label (mean outcome value; with dedup, over identical candidates) is >= this."}
    )
    label_max: float | None = field(
        default=None, metadata={"help": "Keep rows whose label (mean outcome value; with dedup, over identical candidates) is <= this."}
    )
    domains: tuple[str, ...] = field(default=(), metadata={"help": "Task domains to keep (swe, assistant, ...)."})
    benchmarks: tuple[str, ...] = field(default=(), metadata={"help": "Task benchmarks to keep."})
    runs: tuple[str, ...] = field(default=(), metadata={"help": "Run names to keep."})
    exclude_runs: tuple[str, ...] = field(default=(), metadata={"help": "Run names to drop."})
    models: tuple[str, ...] = field(default=(), metadata={"help": "Policy models to keep (runs.model)."})
    harnesses: tuple[str, ...] = field(default=(), metadata={"help": "Harnesses to keep."})
    exit_statuses: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Trajectory exit statuses to keep, as written (a trailing * matches a prefix)."},
    )
    exclude_exit_statuses: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Trajectory exit statuses to drop, e.g. error, discarded:* "
                          "(as written; trailing * = prefix)."},
    )
    ingested_after: datetime | None = field(default=None, metadata={"help": "Keep candidates ingested at/after."})
    ingested_before: datetime | None = field(default=None, metadata={"help": "Keep candidates ingested before."})
    drop_empty: bool = field(default=True, metadata={"help": "Drop blank candidates."})
    dedup: bool = field(default=False, metadata={"help": "One row per identical (task, content); label averaged."})
    val_fraction: float = field(default=0.2, metadata={"help": "Fraction of tasks in the val split."})
    test_fraction: float = field(default=0.0, metadata={"help": "Fraction of tasks in the test split."})
    split_seed: int = field(default=0, metadata={"help": "Seed of the task-hash split."})
    balance: Literal["none", "downsample"] = field(
        default="none", metadata={"help": "Downsample the train split's majority class to balance_ratio."}
    )
    balance_ratio: float = field(default=1.0, metadata={"help": "Majority rows per minority row after balancing."})
    balance_seed: int = field(default=0, metadata={"help": "Seed of the downsampling."})
    versions: Mapping[str, int] | None = field(default=None, metadata={"help": "Pin table versions explicitly."})
    as_of: datetime | None = field(default=None, metadata={"help": "Pin every table at this time."})

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not isinstance(self.name, str) or not self.name:
            problems.append("name must be a non-empty string")
        if self.kind not in ("patch", "answer", "action"):
            problems.append(f"kind must be patch, answer or action, got {self.kind!r}")
        for name in ("domains", "benchmarks", "runs", "exclude_runs", "models", "harnesses", "exit_statuses",
                     "exclude_exit_statuses"):
            object.__setattr__(self, name, _strings(getattr(self, name), name, problems))
        for name in ("ingested_after", "ingested_before", "as_of"):
            object.__setattr__(self, name, _time(getattr(self, name), name, problems))
        if (isinstance(self.ingested_after, datetime) and isinstance(self.ingested_before, datetime)
                and self.ingested_after >= self.ingested_before):
            problems.append(f"ingested_after ({self.ingested_after.isoformat()}) is not before "
                            f"ingested_before ({self.ingested_before.isoformat()}): no row can match")
        if not isinstance(self.label, str) or not self.label:
            problems.append(f"label must be an outcome name (a non-empty string), got {self.label!r}")
        for name in ("labelled_only", "drop_empty", "dedup"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("split_seed", "balance_seed"):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), int):
                problems.append(f"{name} must be an integer, got {getattr(self, name)!r}")
        numbers = [n for n in ("val_fraction", "test_fraction", "balance_ratio", "label_min", "label_max")
                   if _number(getattr(self, n), n, problems, optional=n.startswith("label_"))]
        val, test = self.val_fraction, self.test_fraction
        if {"val_fraction", "test_fraction"} <= set(numbers) and not (
                0 <= val < 1 and 0 <= test < 1 and val + test < 1):
            problems.append("val_fraction and test_fraction must be in [0, 1) and sum to less than 1")
        if ({"label_min", "label_max"} <= set(numbers) and None not in (self.label_min, self.label_max)
                and self.label_min > self.label_max):
            problems.append(f"label_min ({self.label_min}) is above label_max ({self.label_max}): no row can match")
        if not self.labelled_only and (self.label_min is not None or self.label_max is not None):
            problems.append("label_min/label_max keep labelled candidates only; they need labelled_only = true")
        if self.balance not in ("none", "downsample"):
            problems.append(f"balance must be none or downsample, got {self.balance!r}")
        if "balance_ratio" in numbers and self.balance_ratio <= 0:
            problems.append(f"balance_ratio must be > 0, got {self.balance_ratio}")
        if self.versions is not None and self.as_of is not None:
            problems.append("pin either versions or as_of, not both")
        if self.versions is not None and not isinstance(self.versions, Mapping):
            problems.append(f"versions must be a table of table = version, e.g. {{candidates = 3}}, "
                            f"got {self.versions!r}")
        elif self.versions is not None:
            unknown = sorted(set(self.versions) - set(SLICE_TABLES))
            if unknown:
                problems.append(f"versions names unknown tables {unknown}; a slice reads {list(SLICE_TABLES)}")
            wrong = {t: v for t, v in self.versions.items()
                     if isinstance(v, bool) or not isinstance(v, int) or v < 0}
            if wrong:
                problems.append(f"versions must be table versions (integers >= 0), got {wrong}")
            object.__setattr__(self, "versions", dict(self.versions))
        if problems:
            raise ValueError(f"invalid slice spec {self.name!r}: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready values (times as ISO strings).

        Options added after slice ids were first saved are left out while unset, so a spec that does not
        use them keeps the slice id (the hash of this dict and the versions) it always had.
        """
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _LATER_OPTIONS and value == f.default:
                continue
            out[f.name] = value.isoformat() if isinstance(value, datetime) else list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SliceSpec:
        """A spec from plain values (a TOML ``[slice]`` table or a manifest's ``spec``).

        Raises:
            ValueError: unknown keys or invalid values.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a slice spec is a table of options, got {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown slice options {unknown}; known: {sorted(known)}")
        if "name" not in data:
            raise ValueError("a slice spec needs a name (name = \"...\")")
        return cls(**dict(data))


def load_spec(path: str | Path) -> SliceSpec:
    """A :class:`SliceSpec` from a TOML file (its ``[slice]`` table, or the top level).

    Raises:
        ValueError: invalid TOML, unknown or invalid options, or options outside a ``[slice]`` table
            that the file has (they would be ignored).
    """
    data = tomllib.loads(Path(path).read_text())
    if "slice" not in data:
        return SliceSpec.from_dict(data)
    outside = sorted(set(data) - {"slice"})
    if outside:
        raise ValueError(f"{outside} sit outside the [slice] table and would be ignored: "
                         "put every option under [slice] (TOML keys before a table header are top-level)")
    return SliceSpec.from_dict(data["slice"])


@dataclass(frozen=True)
class SliceManifest:
    """A resolved slice: enough to rebuild exactly the same rows later.

    Attributes:
        slice_id: hash of (spec, versions) — the identity of the selection.
        spec: the spec, as plain values.
        versions: the pinned version of every table the slice reads.
        counts: rows, tasks and positives, overall and per split.
        content_hash: hash of the ordered (candidate id, label, split) rows — what "same rows" means.
        created_at: when it was resolved.
    """

    slice_id: str
    spec: dict[str, Any]
    versions: dict[str, int]
    counts: dict[str, Any]
    content_hash: str
    created_at: str

    def to_json(self) -> str:
        """The manifest as JSON text."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def save(self, path: str | Path) -> Path:
        """Write the manifest as JSON."""
        path = Path(path)
        path.write_text(self.to_json() + "\n")
        return path

    @property
    def spec_object(self) -> SliceSpec:
        """The spec as a :class:`SliceSpec`."""
        return SliceSpec.from_dict(self.spec)


def load_manifest(source: str | Path | Mapping[str, Any]) -> SliceManifest:
    """A manifest from a JSON file path, JSON text or a dict."""
    if isinstance(source, Mapping):
        data = dict(source)
    else:
        text = str(source)
        data = json.loads(text if text.lstrip().startswith("{") else Path(source).read_text())
    return SliceManifest(**data)


# Tables opened in this process at a version (pinned, or the latest one resolve_slice resolved to), by
# table directory and version, least recently used first. A table's state at a version does not change,
# so a later read at the same versions (each split a training job reads, an export's rows after
# resolving, a repeated query) reuses the open table:
# delta-rs takes 0.4-1.5 ms of CPU to open even a two-commit table, and a slice opens five. Local lakes
# only: an entry is used while the version's commit file is the one it was opened from (a table deleted
# and written again at the same path has the same version numbers in new commit files), which a stat
# tells; on an object store that check would cost a request, about what the open costs.
# An entry: the commit file's stamp, the table, and its scan (:func:`_kept_scan`) once built.
_PINNED: OrderedDict[tuple[str, int], list[Any]] = OrderedDict()
_PINNED_LOCK = threading.Lock()
_PINNED_MAX = 32


def _forget_pinned() -> None:
    """A forked process (a torch DataLoader worker) keeps none of its parent's tables, and a new lock (a
    parent thread may have held it). delta-rs refuses a forked process at its first call, a PanicException
    that names the spawn start method; a kept table and its scan took the child past it into polars,
    whose thread pool hangs after a fork."""
    global _PINNED_LOCK
    _PINNED_LOCK = threading.Lock()
    _PINNED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pinned)


def _commit_stamp(lake: Lake, table: str, version: int | datetime | None) -> tuple[int, ...] | None:
    """The identity of ``table``'s commit file for ``version`` (device, inode, size, times), or None where
    an open table at that version is not reused: a version that is not a number (the latest, a time: a
    table opened for one is kept under the number it resolved to), a lake on an object store, or a commit
    file that is not there (the log cleaned up to a checkpoint)."""
    if not isinstance(version, int) or not lake.is_local:
        return None
    try:
        stat = os.stat(Path(lake.table_uri(table)) / "_delta_log" / f"{version:020d}.json")
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _open_tables(lake: Lake, versions: Mapping[str, int | datetime | None]) -> dict[str, DeltaTable]:
    """Each table of ``versions`` opened once at its version (``None``: the latest), all at the same time:
    delta-rs reads the log without the GIL, so on two cores a slice's five opens take about 4 ms on the
    100k benchmark lake instead of 7 ms one after another. A table this process already opened at that
    version (a number) is reused, and each table opened is kept for the next read at its version
    (:data:`_PINNED`): ``scan_slice`` after ``resolve_slice`` opens none.

    Raises:
        TableNotFoundError: the first table, in ``versions``' order, that does not exist at its version.
    """
    opened: dict[str, DeltaTable] = {}
    with _PINNED_LOCK:
        for table, version in versions.items():
            key = (lake.table_uri(table), version)
            if key in _PINNED and _PINNED[key][0] == _commit_stamp(lake, table, version):
                _PINNED.move_to_end(key)
                opened[table] = _PINNED[key][1]
    missing = [t for t in versions if t not in opened]
    if len(missing) == 1:
        opened[missing[0]] = lake.delta_table(missing[0], version=versions[missing[0]])
    elif missing:
        with ThreadPoolExecutor(max_workers=len(missing)) as pool:
            opened.update(zip(missing, pool.map(lambda t: lake.delta_table(t, version=versions[t]), missing),
                              strict=True))
    stamps = {t: _commit_stamp(lake, t, opened[t].version()) for t in missing}
    with _PINNED_LOCK:
        for table, stamp in stamps.items():
            if stamp is not None:
                _PINNED[(lake.table_uri(table), opened[table].version())] = [stamp, opened[table], None]
        while len(_PINNED) > _PINNED_MAX:
            _PINNED.popitem(last=False)
    return {t: opened[t] for t in versions}


def _pinned_tables(lake: Lake, spec: SliceSpec) -> dict[str, DeltaTable]:
    """Each slice table opened once, at the version the spec pins (the latest unless it pins some)."""
    if spec.versions is not None:
        pins = {t: int(spec.versions[t]) if t in spec.versions else None for t in SLICE_TABLES}
        return _open_tables(lake, pins)
    return _open_tables(lake, dict.fromkeys(SLICE_TABLES, spec.as_of))


def _delta_casts() -> pl.ScanCastOptions:
    """The casts polars' own Delta scan allows between a file's and the table's types (its default for
    table formats, spelled out with the public constructor; built on use, as polars is imported lazily)."""
    return pl.ScanCastOptions(
        integer_cast="upcast", float_cast=("upcast", "downcast"),
        datetime_cast=("nanosecond-downcast", "millisecond-upcast", "convert-timezone"),
        missing_struct_fields="insert", extra_struct_fields="ignore", categorical_to_string="allow",
    )


def _scan(lake: Lake, table: DeltaTable) -> pl.LazyFrame:
    """``pl.scan_delta(table)``, as a Parquet scan of the table's files where that reads the same rows.

    polars' Delta scan resolves the table again when the query runs and turns the log's per-file
    statistics into a frame: 3-6 ms a scan on the 100k benchmark lake, more than reading a small table,
    and a slice makes five. A table at reader protocol 1 (no deletion vectors, column mapping or other
    reader features, as delta-rs writes them) is its files: they are scanned here as polars' Delta scan
    scans them (the partition values from the paths, the table's schema, its casts), less the
    statistics, which only skip files the filters would empty. Other tables go through ``scan_delta``.
    """
    if table.protocol().min_reader_version > 1 or table.table_uri.startswith("lakefs://"):
        return pl.scan_delta(table)
    schema = pl.Schema(table.schema())
    partitions = table.metadata().partition_columns
    return pl.scan_parquet(
        table.file_uris(), schema=schema, hive_partitioning=bool(partitions),
        hive_schema=pl.Schema({c: schema[c] for c in partitions}) if partitions else None,
        cast_options=_delta_casts(),
        missing_columns="insert", extra_columns="ignore", storage_options=lake.storage_options,
    )


def _scans(lake: Lake, tables: Mapping[str, DeltaTable]) -> dict[str, pl.LazyFrame]:
    """A scan of each table a slice's rows come from (all but ``steps``): :func:`_kept_scan`."""
    return {t: _kept_scan(lake, t, dt) for t, dt in tables.items() if t != "steps"}


def _kept_scan(lake: Lake, table: str, dt: DeltaTable) -> pl.LazyFrame:
    """:func:`_scan` of ``dt``, ``table`` at one version. A table kept open (:data:`_PINNED`) keeps its scan
    for the next read (building a slice's five takes ~0.6 ms on the 100k benchmark lake)."""
    with _PINNED_LOCK:
        entry = _PINNED.get((lake.table_uri(table), dt.version()))
    if entry is None or entry[1] is not dt or lake.storage_options:  # the scan carries the options
        return _scan(lake, dt)
    if entry[2] is None:
        entry[2] = _scan(lake, dt)
    return entry[2]


def _table_scan(lake: Lake, table: str, version: int | None) -> pl.LazyFrame:
    """The scan of ``table`` at ``version`` (``None``: the latest), reusing the table and its scan where this
    process has them open (:data:`_PINNED`): an export reads the steps and the tool definitions of the
    versions ``resolve_slice`` opened."""
    return _kept_scan(lake, table, _open_tables(lake, {table: version})[table])


def _benchmark_filter(spec: SliceSpec) -> pl.Expr:
    """Partition pruning: keep the wanted benchmarks' partitions and the unknown-benchmark one."""
    if not spec.benchmarks:
        return pl.lit(True)
    return pl.col("benchmark").is_in(list(spec.benchmarks)) | pl.col("benchmark").is_null()


def _task_rows(tasks: pl.LazyFrame) -> pl.LazyFrame:
    """The task columns a slice row takes (benchmark and domain renamed: the candidate's own come first)."""
    return tasks.select("task_id", "prompt", pl.col("benchmark").alias("task_benchmark"), "repo",
                        pl.col("domain").alias("task_domain"))


def _with_tasks(core: pl.LazyFrame, scan: pl.LazyFrame, spec: SliceSpec,
                wanted: pl.DataFrame | None) -> pl.DataFrame:
    """``core`` joined (left) to the task rows (:func:`_task_rows`) of its ``task_id``.

    With a benchmark filter, ``wanted`` holds the task rows of the wanted benchmarks' partitions and the
    unknown one, read whole beside the other tables (on the 100k benchmark lake, half the time of a scan
    filtered on the ids), and joined to ``core`` in the query that builds it; ids not found there (a
    task that another benchmark's dataset described first) are then looked up in the other partitions
    and the join made again. Without one (``wanted`` is None), the ids are looked up in the whole table,
    whose prompts a slice may mostly not need.
    """
    if wanted is None:
        rows = core.collect(engine=_ENGINE)
        ids = rows["task_id"].unique().implode()
        wanted = _task_rows(scan.filter(pl.col("task_id").is_in(ids))).collect(engine=_ENGINE)
        return rows.join(wanted, on="task_id", how="left")
    joined = core.join(wanted.lazy().with_columns(_found=pl.lit(True)), on="task_id", how="left")
    joined = joined.collect(engine=_ENGINE)
    if not joined["_found"].null_count():
        return joined.drop("_found")
    # A row whose task was not found is its core row with null task columns: joined to the task rows
    # found elsewhere, it gives what a join of core to all task rows gives (the other rows' tasks are
    # not among those looked up), without building core again.
    task_columns = [c for c in wanted.columns if c != "task_id"]
    unmatched = joined.filter(pl.col("_found").is_null()).drop(*task_columns, "_found")
    missing = unmatched["task_id"].unique().implode()
    rest = _task_rows(scan.filter(~_benchmark_filter(spec) & pl.col("task_id").is_in(missing))).collect(
        engine=_ENGINE)
    return pl.concat([joined.filter(pl.col("_found").is_not_null()).drop("_found"),
                      unmatched.join(rest, on="task_id", how="left")])


def _status_matches(patterns: tuple[str, ...]) -> pl.Expr:
    """``exit_status`` equals one of ``patterns``, or starts with one that ends in ``*``. Case counts, as
    saved manifests were resolved with it: harnesses that spell a status two ways (mini-swe-agent's
    trajectories say ``Submitted``, its predictions ``submitted``) need both listed."""
    exact = [p for p in patterns if not p.endswith("*")]
    matches = pl.col("exit_status").is_in(exact)
    for prefix in (p[:-1] for p in patterns if p.endswith("*")):
        matches = matches | pl.col("exit_status").str.starts_with(prefix)
    return matches


def _rows(spec: SliceSpec, scan: Mapping[str, pl.LazyFrame]) -> pl.DataFrame:
    """The slice's rows from ``scan`` (the tables at their pinned versions) with their split, sorted by
    task and candidate, before the split-dependent steps (balance).

    A candidate's benchmark is the one its rollout was evaluated on (the lake's partition column), or,
    when the harness did not say, its task's. With a benchmark filter only the wanted partitions (and
    the unknown one) of candidates, outcomes, trajectories and tasks are read, and the task rows that
    another benchmark described are looked up by id.
    """
    pruned = _benchmark_filter(spec)
    candidates = scan["candidates"].filter(pruned & (pl.col("kind") == spec.kind))
    if spec.ingested_after is not None:
        candidates = candidates.filter(pl.col("ingested_at") >= spec.ingested_after)
    if spec.ingested_before is not None:
        candidates = candidates.filter(pl.col("ingested_at") < spec.ingested_before)
    if spec.drop_empty:
        candidates = candidates.filter(pl.col("content").fill_null("").str.strip_chars() != "")
    labels = (
        scan["outcomes"].filter(pruned & (pl.col("name") == spec.label))
        .group_by("candidate_id").agg(label=pl.col("value").mean(), label_count=pl.len())
    )
    # The bounds apply to a row's label: with dedup that is the mean over identical candidates, so they
    # can only be applied after it (a copy that fits must not stand for a patch whose mean does not).
    bounds = [pl.col("label") >= spec.label_min] if spec.label_min is not None else []
    bounds += [pl.col("label") <= spec.label_max] if spec.label_max is not None else []
    if bounds and not spec.dedup:
        labels = labels.filter(*bounds)
    runs = scan["runs"].select("run_id", pl.col("name").alias("run_name"), pl.col("model").alias("run_model"),
                               pl.col("harness").alias("run_harness"))
    trajectories = (scan["trajectories"].filter(pruned)
                    .select("trajectory_id", "domain", "harness", "model", "exit_status", "n_steps"))
    reads = [
        candidates.select("candidate_id", "trajectory_id", "task_id", "run_id", "benchmark", "kind", "step_index",
                          "content", "content_sha256"),
        labels, trajectories, runs,
    ]
    if spec.benchmarks:
        reads.append(_task_rows(scan["tasks"].filter(pruned)))
    # The reads run side by side (one collect_all), then join in memory.
    candidates, labels, trajectories, runs, *wanted_tasks = pl.collect_all(reads, engine=_ENGINE)
    core = (
        candidates.lazy()
        .join(labels.lazy(), on="candidate_id", how="inner" if spec.labelled_only else "left")
        .join(trajectories.lazy(), on="trajectory_id", how="left")
        .join(runs.lazy(), on="run_id", how="left")
        .with_columns(harness=pl.coalesce("harness", "run_harness"), model=pl.coalesce("model", "run_model"))
        .drop("run_harness", "run_model")
    )
    # Every filter that does not need the task row runs before the tasks are looked up.
    for column, wanted in (("run_name", spec.runs), ("model", spec.models), ("harness", spec.harnesses)):
        if wanted:
            core = core.filter(pl.col(column).is_in(list(wanted)))
    if spec.exclude_runs:
        core = core.filter(~pl.col("run_name").is_in(list(spec.exclude_runs)).fill_null(False))
    if spec.exit_statuses:
        core = core.filter(_status_matches(spec.exit_statuses).fill_null(False))
    if spec.exclude_exit_statuses:
        core = core.filter(~_status_matches(spec.exclude_exit_statuses).fill_null(False))
    task_rows = wanted_tasks[0] if wanted_tasks else None
    rows = _with_tasks(core, scan["tasks"], spec, task_rows).lazy().with_columns(
        benchmark=pl.coalesce("benchmark", "task_benchmark"), domain=pl.coalesce("task_domain", "domain")
    ).drop("task_benchmark", "task_domain")
    for column, wanted in (("domain", spec.domains), ("benchmark", spec.benchmarks)):
        if wanted:
            rows = rows.filter(pl.col(column).is_in(list(wanted)))
    if spec.dedup:
        rows = (
            rows.sort("candidate_id")
            .group_by("task_id", "content_sha256", maintain_order=True)
            .agg(pl.all().exclude("label", "label_count").first(), pl.col("label").mean(),
                 pl.col("label_count").sum(), n_duplicates=pl.len())
        )
        if bounds:
            rows = rows.filter(*bounds)
    else:
        rows = rows.with_columns(n_duplicates=pl.lit(1, dtype=pl.UInt32))
    # Sorted before the split is added (it follows from the task, so the order is the one a sort after
    # it gives): a task's rows are then adjacent, and _with_splits hashes each task once, without a join.
    return _with_splits(rows.sort("task_id", "candidate_id").collect(engine=_ENGINE), spec)


def _with_splits(rows: pl.DataFrame, spec: SliceSpec) -> pl.DataFrame:
    """``rows``, sorted by ``task_id``, with each row's ``split``: its task's bucket (:func:`task_bucket`)
    below ``test_fraction`` is test, below ``test_fraction + val_fraction`` val, else train.

    A task's rows are adjacent, so the first row of each run of equal ids is hashed and its bucket
    repeated over the run: each task is hashed once (BLAKE2b in Python, ~0.16 us a task), the rest is
    columnar.
    """
    runs = rows["task_id"].rle_id()
    bucket = _task_buckets(rows["task_id"].filter(runs.is_first_distinct()), spec.split_seed).gather(runs)
    test, val = spec.test_fraction, spec.val_fraction
    return rows.with_columns(
        split=pl.when(bucket < test).then(pl.lit("test")).when(bucket < test + val).then(pl.lit("val"))
        .otherwise(pl.lit("train"))
    )


def _balanced(frame: pl.DataFrame, spec: SliceSpec, *, refuse_one_class: bool) -> pl.DataFrame:
    """The train split's majority class downsampled. A train split of one class cannot be balanced:
    ``refuse_one_class`` (resolving a spec) raises; reading a saved manifest keeps what it was resolved to
    (before the refusal existed, one row of that class)."""
    if spec.balance == "none" or frame.is_empty():
        return frame
    train = frame.filter(pl.col("split") == "train")
    positive = train.filter(pl.col("label") > 0.5)
    negative = train.filter(~(pl.col("label") > 0.5))
    minority, majority = (positive, negative) if len(positive) <= len(negative) else (negative, positive)
    if refuse_one_class and minority.is_empty() and not majority.is_empty():
        raise ValueError(
            f"slice {spec.name!r} cannot be balanced: its train split has {len(positive)} positive and "
            f"{len(negative)} negative rows (label_min/label_max or the filters leave one class); "
            "set balance = \"none\""
        )
    keep = min(len(majority), max(1, round(len(minority) * spec.balance_ratio)))
    # Deterministic: rank majority rows by a seeded hash of their id, keep the lowest.
    kept = (
        majority.with_columns(_rank=_task_buckets(majority["candidate_id"], spec.balance_seed))
        .sort("_rank").head(keep).drop("_rank")
    )
    return pl.concat([frame.filter(pl.col("split") != "train"), minority, kept]).sort("task_id", "candidate_id")


def _materialise(spec: SliceSpec, scans: Mapping[str, pl.LazyFrame], *, resolving: bool) -> pl.DataFrame:
    """The slice's rows from ``scans`` (of each slice table at its pinned version); ``resolving`` a spec
    (not reading a saved manifest) refuses what cannot be balanced."""
    return _balanced(_rows(spec, scans), spec, refuse_one_class=resolving)


def _content_hash(frame: pl.DataFrame) -> str:
    """SHA-256 over ``f"{candidate_id}\\t{label!r}\\t{split}\\n"`` per row, built column-wise (labels take
    few distinct values, so Python's ``repr`` runs once per value)."""
    if frame.is_empty():
        return f"sha256:{hashlib.sha256().hexdigest()}"
    values = [v for v in frame["label"].unique().to_list() if v is not None]
    label = pl.col("label").replace_strict(values, [repr(v) for v in values], default=None, return_dtype=pl.String)
    line = pl.concat_str([pl.col("candidate_id"), label.fill_null("None"), pl.col("split")], separator="\t")
    text = frame.select(line.str.join("\n")).item() + "\n"  # one string from polars, not a list of rows
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}"


def _counts(frame: pl.DataFrame) -> dict[str, Any]:
    def one(part: pl.DataFrame) -> dict[str, int]:
        return {"rows": part.height, "tasks": part["task_id"].n_unique(),
                "positives": int((part["label"].fill_null(0) > 0.5).sum())}

    return {**one(frame), "splits": {s: one(frame.filter(pl.col("split") == s)) for s in ("train", "val", "test")}}


def resolve_slice(lake: Lake, spec: SliceSpec, *, save: bool = False) -> SliceManifest:
    """Pin ``spec`` to table versions and describe the rows it selects.

    Args:
        lake: the lake.
        spec: what to select.
        save: also record the manifest in the lake's ``slices`` table (so ``vacuum`` keeps its versions).

    Returns:
        The :class:`SliceManifest`.
    """
    tables = _pinned_tables(lake, spec)
    versions = {t: dt.version() for t, dt in tables.items()}
    frame = _materialise(spec, _scans(lake, tables), resolving=True)
    spec_dict = spec.to_dict()
    manifest = SliceManifest(
        slice_id="b2:" + hashlib.blake2b(canonical_json([spec_dict, versions]).encode(), digest_size=16).hexdigest(),
        spec=spec_dict,
        versions=versions,
        counts=_counts(frame),
        content_hash=_content_hash(frame),
        created_at=datetime.now(UTC).isoformat(),
    )
    if save:
        lake.record_slice(manifest.slice_id, spec.name, manifest.to_json(), versions)
    return manifest


def scan_slice(lake: Lake, manifest: SliceManifest, *, split: Split | None = None) -> pl.LazyFrame:
    """The manifest's rows (optionally one split) as a polars LazyFrame.

    Raises:
        ValueError: the rows no longer hash to the manifest's ``content_hash`` (a pinned version was
            rewritten outside Harvest).
        FileNotFoundError: a pinned version's files were vacuumed away (raised by polars; vacuum keeps
            the versions of manifests saved with ``resolve_slice(..., save=True)`` only).
    """
    tables = _open_tables(lake, {t: v for t, v in manifest.versions.items() if t != "steps"})
    frame = _materialise(manifest.spec_object, _scans(lake, tables), resolving=False)
    if _content_hash(frame) != manifest.content_hash:
        raise ValueError(f"slice {manifest.slice_id} no longer reproduces: the rows at the pinned versions "
                         "differ from the manifest's content hash")
    if split is not None:
        frame = frame.filter(pl.col("split") == split)
    return frame.lazy()


def slice_batches(lake: Lake, manifest: SliceManifest, *, split: Split | None = None,
                  batch_size: int = 1024) -> Iterator[pa.RecordBatch]:
    """The manifest's rows as Arrow record batches of at most ``batch_size`` rows."""
    table = scan_slice(lake, manifest, split=split).collect().to_arrow()
    yield from table.to_batches(max_chunksize=batch_size)


def slice_dataset(lake: Lake, manifest: SliceManifest, *, split: Split | None = "train",
                  rank: int | None = None, world_size: int | None = None) -> Any:  # noqa: ANN401 - torch IterableDataset
    """A torch ``IterableDataset`` of the slice's rows (dicts), sharded by distributed rank and loader worker.

    Rank and world size default to ``torch.distributed`` when it is initialised, else (0, 1); pass both
    or neither. A rank takes every ``world_size``-th row from its rank on, whatever the number of loader
    workers, and its workers split those rows the same way: the shards are disjoint, together cover
    the slice exactly once, and ``len`` is the number of rows a rank's loader yields.

    Raises:
        ValueError: only one of ``rank`` and ``world_size``, or ``rank`` outside ``[0, world_size)``.
    """
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    if (rank is None) != (world_size is None):
        raise ValueError(f"pass both rank and world_size or neither, got rank={rank}, "
                         f"world_size={world_size}")
    if rank is None or world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        else:
            rank, world_size = 0, 1
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size), got rank={rank}, world_size={world_size}")
    rows = scan_slice(lake, manifest, split=split).collect().to_dicts()[rank::world_size]

    class _SliceDataset(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self) -> Iterator[dict[str, Any]]:
            worker = get_worker_info()
            workers, worker_id = (worker.num_workers, worker.id) if worker else (1, 0)
            return iter(rows[worker_id::workers])

        def __len__(self) -> int:
            return len(rows)

    return _SliceDataset()


def calls_parsed_from() -> pl.Expr:
    """A ``steps`` column: how a step's harness read its tool calls in the model's text
    (:data:`~trajectory_lake.records.TOOL_CALLS_PARSED_FROM` of its ``extra``), null where the model API
    returned them. A literal search first: parsing every step's extra (model responses, often kilobytes)
    would cost the read."""
    extra = pl.col("extra")
    return (pl.when(extra.str.contains(f'"{TOOL_CALLS_PARSED_FROM}"', literal=True))
            .then(extra.str.json_path_match(f"$.{TOOL_CALLS_PARSED_FROM}")).alias(TOOL_CALLS_PARSED_FROM))


def scan_steps(lake: Lake, trajectory_ids: Iterable[str], *, version: int | None = None,
               benchmarks: Iterable[str | None] | None = None) -> pl.LazyFrame:
    """The steps of ``trajectory_ids`` at ``version`` of ``steps`` (default: the latest), ordered by
    trajectory and step index.

    Args:
        lake: the lake.
        trajectory_ids: the trajectories.
        version: the ``steps`` version (a manifest's ``versions["steps"]``).
        benchmarks: the benchmarks those trajectories were evaluated on (a slice's ``benchmark`` column).
            These partitions and the unknown-benchmark one are read first: a trajectory's steps sit in
            its own benchmark's partition, or in the unknown one when its harness did not say (then a
            slice row shows the task's benchmark). Trajectories with no step found there (a step-less
            prediction, or steps written by another source that named another benchmark) are then
            looked up in the other partitions, so nothing is missed. Without ``benchmarks`` every
            file's ids are read (on the 100k benchmark lake, 2x slower for one benchmark of eight).
    """
    ids = pl.Series("trajectory_id", sorted(set(trajectory_ids)), dtype=pl.String)
    scan = _table_scan(lake, "steps", version)
    if benchmarks is None:
        return scan.filter(pl.col("trajectory_id").is_in(ids.implode())).sort("trajectory_id", "step_index")
    pruned = pl.col("benchmark").is_in(sorted({b for b in benchmarks if b is not None})) | pl.col("benchmark").is_null()
    first = scan.filter(pruned & pl.col("trajectory_id").is_in(ids.implode())).collect(engine=_ENGINE)
    missing = ids.filter(~ids.is_in(first["trajectory_id"].unique().implode()))
    if missing.is_empty():
        return first.lazy().sort("trajectory_id", "step_index")
    rest = scan.filter(~pruned & pl.col("trajectory_id").is_in(missing.implode()))
    return pl.concat([first.lazy(), rest]).sort("trajectory_id", "step_index")


# The step fields the value model's serializer and the export read.
STEP_COLUMNS = ("step_index", "role", "content", "reasoning", "tool_calls", "tool_call_id", "is_error")


def load_steps(lake: Lake, trajectory_ids: Iterable[str], *, version: int | None = None,
               benchmarks: Iterable[str | None] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The steps of ``trajectory_ids`` at ``version`` of the ``steps`` table (default: the latest), in order.

    ``benchmarks`` (the rows' ``benchmark`` column) limits the read to those partitions (see
    :func:`scan_steps`). A step whose tool calls its harness read in the model's text carries its
    ``extra.tool_calls_parsed_from`` (which :func:`~trajectory_lake.records.step_action` reads: the step is
    rendered as the model wrote it, its content alone). The value model's contexts and the export's
    messages are read from these (:class:`SeenBefore`).

    Returns:
        trajectory id → its steps as dicts with :data:`STEP_COLUMNS` (trajectories without steps are
        absent), and, on a compaction's summary, the steps it stands for (``extra.summarizes_steps``), on a
        step the agent kept out of its history ``not_in_history``, on one it sent in one call only
        ``next_call_only`` (as :func:`seen_before` reads them all), on one a compaction sent again
        ``replayed_by_compaction`` and on a copy of another trajectory's history ``copied_context`` (Codex's
        ``copied_context`` or ATIF's ``is_copied_context``): no decision (:func:`replayed`;
        ``value_model.data.action_examples_of`` skips them).
    """
    ids = set(trajectory_ids)
    if not ids or not lake.exists("steps"):
        return {}
    frame = (
        scan_steps(lake, ids, version=version, benchmarks=benchmarks)
        # the extra of a summary step, a step kept out of the history, one sent in one call only or one a
        # compaction replays alone: a literal search, where parsing every step's extra (model responses, often
        # kilobytes) would cost the read
        .select("trajectory_id", *STEP_COLUMNS, calls_parsed_from(),
                pl.when(pl.col("extra").str.contains(f'"{SUMMARIZES_STEPS}"', literal=True)
                        | pl.col("extra").str.contains(f'"{NOT_IN_HISTORY}"', literal=True)
                        | pl.col("extra").str.contains(f'"{NEXT_CALL_ONLY}"', literal=True)
                        | pl.col("extra").str.contains(f'"{REPLAYED_BY_COMPACTION}"', literal=True)
                        | pl.any_horizontal(pl.col("extra").str.contains(f'"{key}"', literal=True)
                                            for key in COPIED_CONTEXT))
                .then(pl.col("extra")).alias("marked_extra"))
        .collect()
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in frame.iter_rows(named=True):
        if row[TOOL_CALLS_PARSED_FROM] is None:  # the model API returned its calls (the usual case)
            del row[TOOL_CALLS_PARSED_FROM]
        extra = row.pop("marked_extra")
        value = json.loads(extra) if extra is not None else None
        if isinstance(value, dict):
            if value.get(SUMMARIZES_STEPS) is not None:
                row[SUMMARIZES_STEPS] = value[SUMMARIZES_STEPS]
            marks = (NOT_IN_HISTORY, NEXT_CALL_ONLY, REPLAYED_BY_COMPACTION)
            row.update({mark: True for mark in marks if value.get(mark) is True})
            if any(value.get(key) is True for key in COPIED_CONTEXT):
                row[COPIED_CONTEXT[0]] = True
        out.setdefault(row.pop("trajectory_id"), []).append(row)
    return out


def _arguments(text: str | None) -> dict[str, Any] | str:
    """A tool call's arguments as chat templates take them: the JSON object the lake keeps as text (the
    OpenAI wire format) parsed into a dict, as transformers' tool-use guide asks (templates such as
    Qwen2.5's and Llama 3.1's render ``arguments | tojson``: a string would come out double-encoded).
    Text that is not a JSON object (a redacted or truncated call) stays text."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _message(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step as a chat message. Calls its harness read in the model's text (a text-mode agent's, a ReAct
    ``Action:``: :data:`~trajectory_lake.records.TOOL_CALLS_PARSED_FROM`) are left out: the model wrote its
    content alone, which holds them, and a chat model trained on the turn should learn to write that."""
    role = step["role"] if step["role"] in ("system", "user", "assistant", "tool") else "user"
    message: dict[str, Any] = {"role": role, "content": step["content"] or ""}
    if step.get("tool_calls") and not step.get(TOOL_CALLS_PARSED_FROM):
        message["tool_calls"] = [
            {**({"id": c["id"]} if c.get("id") else {}), "type": "function",
             "function": {"name": c["name"], "arguments": _arguments(c["arguments"])}}
            for c in step["tool_calls"]
        ]
    if step.get("tool_call_id"):
        message["tool_call_id"] = step["tool_call_id"]
    if step.get("reasoning"):
        message["reasoning_content"] = step["reasoning"]
    return message


def _answer_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ``tool`` message named after the call it answers (by ``tool_call_id``, else the next
    unanswered call of the assistant turn before it), as TRL's tool-calling examples write them; a
    ``tool`` message that answers no call (a harness's console output, as aider's) becomes a ``user``
    turn: the OpenAI API refuses a tool message without a preceding ``tool_calls`` turn, and so do chat
    templates such as gpt-oss's."""
    pending: list[dict[str, Any]] = []
    ids: list[str | None] = []
    for message in messages:
        if message["role"] == "assistant":
            pending = [c["function"] for c in message.get("tool_calls", [])]
            ids = [c.get("id") for c in message.get("tool_calls", [])]
            continue
        if message["role"] != "tool":
            pending = []
            continue
        if not pending:
            message["role"] = "user"
            message.pop("tool_call_id", None)
            continue
        call_id = message.get("tool_call_id")
        index = ids.index(call_id) if call_id in ids else 0
        message["name"] = pending[index]["name"]
        del pending[index], ids[index]
    return messages


def _messages(prompt: str | None, steps: list[dict[str, Any]], candidate: str) -> list[dict[str, Any]]:
    """The system turns that open the trajectory, the task prompt as a user turn unless the trajectory
    opens with its own user turn (its harness's rendering of the task: the prompt would be said twice,
    and in a simulated-user benchmark such as tau-bench the prompt is the user's hidden instructions),
    the other steps, then the candidate (a final patch or answer, or an ``action`` candidate's next
    step after the steps before it) as the final assistant turn, unless the trajectory already ends
    with it (a Codex session's answer is its last assistant message: it would be said twice). Tool
    output before the first user turn (aider's banner) neither is that turn nor hides it."""
    messages = [_message(step) for step in steps]
    lead = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    opener = next((m["role"] for m in messages[lead:] if m["role"] != "tool"), None)
    messages = _answer_calls(messages)
    if prompt and opener != "user":
        messages.insert(lead, {"role": "user", "content": prompt})
    final = {"role": "assistant", "content": candidate}
    if not messages or (messages[-1] != final
                        and answer_written_from(messages, candidate, len(messages) - 1) is None):
        messages.append(final)
    return messages


def answer_written_from(turns: Sequence[Mapping[str, Any]], answer: str, last: int) -> int | None:
    """Where the agent's turns ending at ``last`` (its text alone: no tool calls) begin to say ``answer``
    joined by a blank line, as written (Claude Code writes a response's text blocks a line each, and its
    answer joins them; a block may open or end with a line break); ``None`` if they do not.

    Examples:
        >>> turns = [{"role": "user", "content": "Sum up."}, {"role": "assistant", "content": "A.\\n"},
        ...          {"role": "assistant", "content": "B."}]
        >>> answer_written_from(turns, "A.\\n\\n\\nB.", 2), answer_written_from(turns, "C.", 2)
        (1, None)
    """
    texts: list[str] = []
    for i in range(last, -1, -1):
        turn = turns[i]
        if turn["role"] != "assistant" or turn.get("tool_calls"):
            return None
        if isinstance(turn["content"], str) and turn["content"].strip():
            texts.insert(0, turn["content"])
            if "\n\n".join(texts).strip() == answer.strip():
                return i
    return None


def seen_before(steps: Sequence[Mapping[str, Any]], end: int) -> list[Mapping[str, Any]]:
    """The steps the model was shown before the step at position ``end`` (``steps`` in order): all of them
    but where a compaction's summary came before it, then (the last such summary's ``summarizes_steps``,
    :data:`~trajectory_lake.records.SUMMARIZES_STEPS`, ``[first, kept]``) the steps before ``first``, that
    summary, and the steps from ``kept`` on, without any other summary (each stands for those before it).
    Either way without the steps the agent kept out of its history
    (:data:`~trajectory_lake.records.NOT_IN_HISTORY`: a reply it could not parse), which the model never
    saw again, and without a step it sent in one call only
    (:data:`~trajectory_lake.records.NEXT_CALL_ONLY`: a requery's rejected reply and error message) once an
    assistant step came after it: such a step is seen by the steps up to and including the next assistant
    step.

    Examples:
        >>> steps = [{"step_index": i, "role": r} for i, r in enumerate(["system", "user", "assistant"])]
        >>> steps += [{"step_index": 3, "role": "tool"},
        ...           {"step_index": 4, "role": "user", "summarizes_steps": [1, 3]}]
        >>> [s["step_index"] for s in seen_before(steps, 4)], [s["step_index"] for s in seen_before(steps, 5)]
        ([0, 1, 2, 3], [0, 4, 3])
        >>> steps[2] = {**steps[2], "not_in_history": True}
        >>> [s["step_index"] for s in seen_before(steps, 2)], [s["step_index"] for s in seen_before(steps, 4)]
        ([0, 1], [0, 1, 3])
        >>> marks = [("user", 0), ("assistant", 1), ("user", 1), ("assistant", 0), ("tool", 0)]
        >>> requery = [{"step_index": i, "role": r, "next_call_only": m} for i, (r, m) in enumerate(marks)]
        >>> [[s["step_index"] for s in seen_before(requery, end)] for end in (2, 3, 4, 5)]
        [[0, 1], [0, 1, 2], [0, 3], [0, 3, 4]]
    """
    # a step sent in one call only is seen until an assistant step (that call's reply) follows it: those
    # before the last assistant step are answered
    last = next((i for i in range(end - 1, -1, -1) if steps[i].get("role") == "assistant"), -1)
    held = [s for i, s in enumerate(steps[:end])
            if not s.get(NOT_IN_HISTORY) and not (i < last and s.get(NEXT_CALL_ONLY))]
    at = next((i for i in range(len(held) - 1, -1, -1) if held[i].get(SUMMARIZES_STEPS)), None)
    if at is None:
        return held
    first, kept = held[at][SUMMARIZES_STEPS]
    others = [s for s in held if not s.get(SUMMARIZES_STEPS)]
    return ([s for s in others if s["step_index"] < first] + [held[at]]
            + [s for s in others if s["step_index"] >= kept])


class SeenBefore:
    """:func:`seen_before` at every position of one trajectory, for the price of one pass over its steps:
    ``SeenBefore(steps).at(end) == seen_before(steps, end)`` (the same step objects, in the same order), each
    ``at`` a few bisections and list copies (C), where :func:`seen_before` reads the whole prefix in Python: a
    trajectory scored step by step (a 10,000-step session, an action per step) took ~10^8 Python steps.

    The steps held at ``end`` are the durable ones (neither
    :data:`~trajectory_lake.records.NOT_IN_HISTORY` nor :data:`~trajectory_lake.records.NEXT_CALL_ONLY`)
    before the last assistant step before ``end``, then every step from that one on but those not in the
    history: each a slice of a list built once, and so are the steps other than summaries, of which a
    compaction keeps those before its ``first`` and from its ``kept`` on (the step indices rise along the
    trajectory: bisections). Steps whose indices do not rise (no ingest writes them) are read by
    :func:`seen_before` itself.

    Examples:
        >>> steps = [{"step_index": i, "role": r} for i, r in enumerate(["system", "user", "assistant"])]
        >>> steps += [{"step_index": 3, "role": "tool"},
        ...           {"step_index": 4, "role": "user", "summarizes_steps": [1, 3]}]
        >>> seen = SeenBefore(steps)
        >>> [s["step_index"] for s in seen.at(4)], [s["step_index"] for s in seen.at(5)], seen.position(3)
        ([0, 1, 2, 3], [0, 4, 3], 3)
    """

    def __init__(self, steps: Sequence[Mapping[str, Any]]) -> None:
        self.steps = steps
        self.indices = [s["step_index"] for s in steps]
        self._rising = all(a < b for a, b in zip(self.indices, self.indices[1:], strict=False))
        # per position p (0..n): the last assistant step before p, the last summary before p not kept out of
        # the history and the last durable one, and how many steps before p each list below holds
        self._assistant = [-1]
        self._summary = [-1]
        self._durable_summary = [-1]
        self._held: list[Mapping[str, Any]] = []  # steps not kept out of the history
        self._durable: list[Mapping[str, Any]] = []  # nor sent in one call only
        self._held_steps: list[Mapping[str, Any]] = []  # the held ones but summaries
        self._durable_steps: list[Mapping[str, Any]] = []  # the durable ones but summaries
        self._counts: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)]
        for at, step in enumerate(steps):
            held = not step.get(NOT_IN_HISTORY)
            durable = held and not step.get(NEXT_CALL_ONLY)
            summary = bool(step.get(SUMMARIZES_STEPS))
            self._assistant.append(at if step.get("role") == "assistant" else self._assistant[-1])
            self._summary.append(at if held and summary else self._summary[-1])
            self._durable_summary.append(at if durable and summary else self._durable_summary[-1])
            for kept, into in ((held, self._held), (durable, self._durable),
                               (held and not summary, self._held_steps),
                               (durable and not summary, self._durable_steps)):
                if kept:
                    into.append(step)
            self._counts.append((len(self._held), len(self._durable), len(self._held_steps),
                                 len(self._durable_steps)))
        self._held_indices = [s["step_index"] for s in self._held_steps]
        self._durable_indices = [s["step_index"] for s in self._durable_steps]

    def position(self, step_index: int) -> int:
        """Where the step ``step_index`` is, or would be: the number of steps with a lower index."""
        return bisect_left(self.indices, step_index)

    def at(self, end: int) -> list[Mapping[str, Any]]:
        """The steps the model was shown before the step at position ``end`` (0 to the number of steps):
        :func:`seen_before`."""
        if not self._rising:
            return seen_before(self.steps, end)
        # a step sent in one call only is seen from the last assistant step before end on (that call's reply)
        last = max(self._assistant[end], 0)
        (held, durable, held_steps, durable_steps), (held_end, _, held_steps_end, _) = (
            self._counts[last], self._counts[end])
        summary = self._summary[end] if self._summary[end] >= last else self._durable_summary[last]
        if summary < 0:
            return self._durable[:durable] + self._held[held:held_end]
        first, kept = self.steps[summary][SUMMARIZES_STEPS]
        # the steps but summaries, in order (their indices rise): those before first, and from kept on
        others = self._durable_steps[:durable_steps] + self._held_steps[held_steps:held_steps_end]
        before, until = (bisect_left(self._durable_indices, bound, 0, durable_steps)
                         + bisect_left(self._held_indices, bound, held_steps, held_steps_end) - held_steps
                         for bound in (first, kept))
        return [*others[:before], self.steps[summary], *others[until:]]


def final_message_at(trajectory: Sequence[Mapping[str, Any]], candidate: str) -> int:
    """Where the candidate stands at the trajectory's end, else its length: the first step, from the last
    assistant step on (the agent's last message, and what follows it), that renders to ``candidate``, or
    that is not the agent's and opens with it followed by a line break (SWE-agent's ``submit`` observation:
    the diff, then its ``(Open file: ...)`` footer); mini-swe-agent's ``exit`` step holds the diff alone; or
    the agent's last steps without calls whose texts as written, joined by a blank line, are the candidate
    (a Claude Code response's text blocks). An answer found so takes with it the reasoning-only steps just
    before it. Steps the trajectory was shown again (:func:`replayed`: a compaction's replay, a copied
    history) are passed over: no one wrote them there."""
    candidate = candidate.strip()
    at = len(trajectory)
    last = -1  # the agent's last step
    for i in range(len(trajectory) - 1, -1, -1):
        step = trajectory[i]
        if replayed(step):
            continue
        said = step_action(step)
        echoed = (step["role"] != "assistant" and said.startswith(candidate)
                  and said[len(candidate):][:1] in "\r\n")
        if said and (said == candidate or echoed):
            at = i
        if step["role"] == "assistant":
            last = i
            break
    if at == len(trajectory) and last >= 0:
        # an answer the agent wrote over several steps (a Claude Code response's text blocks, a line each),
        # ending at its last step as a one-step answer does (a slash command typed after it is no answer)
        written = answer_written_from(trajectory, candidate, last)
        if written is not None:
            at = written
    if at < len(trajectory) and trajectory[at]["role"] == "assistant":
        at = own_thought(trajectory, at)
    return at


def replayed(step: Mapping[str, Any]) -> bool:
    """Whether a step of :func:`load_steps` is history its trajectory was shown again rather than wrote: one a
    compaction sends the model again (:data:`~trajectory_lake.records.REPLAYED_BY_COMPACTION`) or a copy of
    another trajectory's (:data:`~trajectory_lake.records.COPIED_CONTEXT`). It is context, never a decision,
    an answer or a thought of this trajectory."""
    return bool(step.get(REPLAYED_BY_COMPACTION) or step.get(COPIED_CONTEXT[0]))


def own_thought(trajectory: Sequence[Mapping[str, Any]], at: int) -> int:
    """Where the assistant step at ``at`` begins with its own thought: the reasoning-only assistant steps just
    before it (Codex's reasoning items, a Claude Code response's thinking line) go with it, as a client sends
    a candidate's reasoning with the candidate, not in the conversation before it. A reasoning step a
    compaction sent again or a copied history holds (:func:`replayed`) is the context's, not the step's own
    thought."""
    while (at and trajectory[at - 1]["role"] == "assistant" and not step_action(trajectory[at - 1])
           and not replayed(trajectory[at - 1])):
        at -= 1
    return at


def _write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    """``records`` as Parquet whose ``messages`` are a list of JSON values (Parquet's JSON logical type,
    Arrow's ``arrow.json``), each message exactly the keys it has; ``tools`` too, as each tool's
    ``parameters`` is a JSON Schema of its own, which no one struct types. A struct column would give every
    message every key any message has, null where absent (``tool_calls: None`` on a user turn): TRL
    documents these "spurious None values" (its ``remove_none_values``), and templates that test a key's
    presence (Llama 3.1's ``'tool_calls' in message``, DeepSeek-V3's) fail on them wherever the messages
    reach the template as read (transformers 5's ``apply_chat_template`` drops a message's top-level
    None keys first; earlier ones and other renderers do not). ``datasets`` (>= 4.7, its ``Json`` type)
    reads these back as the dicts written; polars and pandas read JSON text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def messages(name: str) -> pa.Array:
        offsets, texts = [0], []
        for record in records:
            texts += [json.dumps(m, ensure_ascii=False) for m in record[name]]
            offsets.append(len(texts))
        values = pa.ExtensionArray.from_storage(pa.json_(), pa.array(texts, pa.string()))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)

    types = {"label": pa.bool_() if "score" in records[0] else pa.float64(), "score": pa.float64()}
    pq.write_table(pa.table({
        name: messages(name) if name in ("messages", "prompt", "completion", "tools")
        else pa.array([r[name] for r in records], types.get(name, pa.string()))
        for name in records[0]
    }), path)


_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def _tool_definitions(lake: Lake, trajectory_ids: pl.Series, *, version: int | None) -> dict[str, list[Any]]:
    """Each trajectory's ``extra.tool_definitions`` (the tools its harness offered, normalised at ingest:
    :func:`~trajectory_lake.records.normalise_tool_definitions`) at ``version`` of ``trajectories``."""
    if trajectory_ids.is_empty():
        return {}
    ids = trajectory_ids.unique().implode()
    rows = (
        _table_scan(lake, "trajectories", version)
        .filter(pl.col("trajectory_id").is_in(ids)
                & pl.col("extra").str.contains('"tool_definitions"', literal=True).fill_null(False))
        .select("trajectory_id", "extra")
        .collect(engine=_ENGINE)
    )
    out = {}
    for trajectory_id, text in rows.iter_rows():
        extra = json.loads(text)
        if not isinstance(extra, dict):
            continue
        found = extra.get("tool_definitions")
        if found:
            out[trajectory_id] = found
    return out


def _tools(definitions: list[dict[str, Any]] | None, called: set[str]) -> list[dict[str, Any]]:
    """A row's ``tools``: every tool its trajectory was offered, with its definition (called or not), then
    each tool it called that has none, by name. Chat templates render ``function.parameters`` (gpt-oss's,
    Qwen's), so a tool without a schema gets an empty object schema."""
    tools = [
        {**d, "function": {**d["function"], "parameters": d["function"].get("parameters") or _NO_PARAMETERS}}
        for d in definitions or []
    ]
    defined = {d["function"]["name"] for d in tools}
    tools += [
        {"type": "function", "function": {"name": name, "parameters": _NO_PARAMETERS}}
        for name in sorted(called - defined)
    ]
    return tools


def _layout(record: dict[str, Any], layout: str) -> dict[str, Any]:
    """``record`` in TRL's prompt-completion layout when asked: the conversation before the candidate as
    ``prompt``, the candidate's turn as ``completion``, ``label`` a bool (positive: the mean outcome
    above 0.5; None unlabelled) as KTO's and BCO's unpaired-preference rows have it, the mean outcome
    kept as ``score``."""
    if layout == "messages":
        return record
    messages, label = record.pop("messages"), record.pop("label")
    return {"prompt": messages[:-1], "completion": messages[-1:], "tools": record.pop("tools"),
            "label": None if label is None else bool(label > 0.5), "score": label, **record}


def _shown_with(row: Mapping[str, Any], seen: dict[str, SeenBefore],
               steps: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """The steps an export row's messages hold: what the model was shown when it wrote the row's candidate
    (:class:`SeenBefore`), then the candidate's own steps, as :func:`_messages` takes them. For an action,
    what was shown before its own thought (:func:`own_thought`: the reasoning-only steps just before it),
    then that thought; for a candidate that is the trajectory's last word (:func:`final_message_at`), what
    was shown before it, then that step and those after it (the trajectory's last message, which
    :func:`_messages` does not say twice; SWE-agent's ``submit`` observation, mini-swe-agent's ``exit``);
    otherwise what was shown at the trajectory's end. These are the contexts ``value_model.data.contexts_of``
    gives the value model (an action example's ends at its own thought, ``context_end``), then the
    candidate's own steps. On a trajectory with no step kept out of its history, sent in one call only or
    summarising others, they are all its steps before the action, or all of them, as the export always
    wrote."""
    history = seen.get(row["trajectory_id"])
    if history is None:
        history = seen[row["trajectory_id"]] = SeenBefore(steps)
    if row["kind"] == "action" and row["step_index"] is not None:
        stop = history.position(row["step_index"])
        end = own_thought(steps, stop)
    elif row["content"]:
        stop, end = len(steps), final_message_at(steps, row["content"])
    else:
        stop = end = len(steps)
    return [*history.at(end), *steps[end:stop]]


def export_slice(lake: Lake, manifest: SliceManifest, directory: str | Path, *,
                 fmt: Literal["parquet", "jsonl"] = "parquet", include_steps: bool = True,
                 layout: Literal["messages", "prompt-completion"] = "messages") -> dict[str, Path]:
    """Write the slice, one file per split, as rows with OpenAI-style ``messages`` and ``tools``.

    Each row: ``messages`` (the trajectory's opening system turns, the task prompt as a user turn
    unless the trajectory opens with its own, the other steps the model was shown when it wrote the
    candidate (:func:`_shown_with`: after a compaction its summary in place of the steps it stands for,
    never a reply the agent kept out of its history, a requery's rejected reply and error only in the call
    they were sent in), then the candidate as the final assistant turn), ``tools`` (the definitions of the
    tools its harness offered it, called or not, as the source recorded them (``extra.tool_definitions``),
    then each tool those steps called that has none, by name with an empty parameter schema:
    :func:`_tools`), ``label``, ``split`` and the ids. The manifest
    is written beside the files.
    Messages are as transformers' chat templates and TRL take them: tool-call ``arguments`` a dict,
    ``tool`` results with the ``name`` of the call they answer, reasoning as ``reasoning_content``, no
    key a message does not have (Parquet keeps each message as a JSON value for that: see
    :func:`_write_parquet`); JSONL is one row object per line. A split without rows gets no file, and
    split files an earlier export left in ``directory`` (``train.parquet``, ``val.jsonl``, ...) are
    removed, so the directory holds this manifest's splits only.

    ``layout="prompt-completion"`` writes TRL's conversational prompt-completion rows instead
    (:func:`_layout`): what its KTO and BCO trainers read, and what its SFT trainer trains on the
    candidate only (completion-only loss) rather than on every assistant turn.

    Returns:
        split name -> file written.

    Raises:
        ValueError: ``fmt`` is neither ``parquet`` nor ``jsonl``, or ``layout`` is unknown.
    """
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"fmt must be parquet or jsonl, got {fmt!r}")
    if layout not in ("messages", "prompt-completion"):
        raise ValueError(f"layout must be messages or prompt-completion, got {layout!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    frame = scan_slice(lake, manifest).collect()
    steps_by_trajectory: dict[str, list[dict[str, Any]]] = {}
    if include_steps and not frame.is_empty():
        steps_by_trajectory = load_steps(lake, frame["trajectory_id"], version=manifest.versions.get("steps"),
                                         benchmarks=frame["benchmark"])
    definitions = _tool_definitions(lake, frame["trajectory_id"],
                                    version=manifest.versions.get("trajectories"))
    seen: dict[str, SeenBefore] = {}  # each trajectory's, read once for all its rows
    written = {}
    for split in ("train", "val", "test"):
        part = frame.filter(pl.col("split") == split)
        if part.is_empty():
            continue
        records = []
        for row in part.iter_rows(named=True):
            steps = _shown_with(row, seen, steps_by_trajectory.get(row["trajectory_id"], []))
            called = {c["name"] for s in steps if not s.get(TOOL_CALLS_PARSED_FROM)
                      for c in (s.get("tool_calls") or []) if c.get("name")}
            records.append(_layout({
                "messages": _messages(row["prompt"], steps, row["content"]),
                "tools": _tools(definitions.get(row["trajectory_id"]), called),
                "label": row["label"], "split": split, "task_id": row["task_id"],
                "candidate_id": row["candidate_id"], "trajectory_id": row["trajectory_id"], "kind": row["kind"],
            }, layout))
        path = directory / f"{split}.{fmt}"
        if fmt == "parquet":
            _write_parquet(records, path)
        else:
            lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            path.write_text("".join(lines), encoding="utf-8")  # JSON Lines is UTF-8 whatever the locale
        written[split] = path
    for stale in (directory / f"{s}.{ext}" for s in ("train", "val", "test") for ext in ("parquet", "jsonl")):
        if stale not in written.values():
            stale.unlink(missing_ok=True)
    manifest.save(directory / "manifest.json")
    return written
