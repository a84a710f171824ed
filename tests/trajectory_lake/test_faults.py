"""Crash safety and concurrent writers, on a local lake and on S3 (a moto server on 127.0.0.1).

- kill -9 in the middle of an ingest leaves every table readable at a committed version, and running
  the ingest again yields exactly the rows of one clean run;
- four processes ingesting different sources into one lake at once lose nothing and duplicate nothing;
- processes that start at once on a lake that does not exist yet (ingests, feedback writers) create
  each table once, and all of them write into that table; feedback writers that start at once on a
  table from before its schema grew all upgrade it and write;
- ingests at once whose sources share keys (tasks, or the same source twice) write each key once: the
  rows of the same ingests run one after another, and no version of any table holds a key twice;
- kill -9 of an ingest while another writes the same keys: re-running it yields the rows of the two run
  one after another.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from trajectory_lake import KEYS, TABLE_NAMES, Lake, TableNotFoundError, ingest
from trajectory_lake.lake import conform

from ._helpers import comparable_rows

pytestmark = pytest.mark.slow

DATA_TABLES = ("runs", "tasks", "trajectories", "steps", "candidates", "outcomes")

# Runs an ingest in a child process that SIGKILLs itself right after its N-th table commit.
_CRASHING_INGEST = """
import json, os, signal, sys
from trajectory_lake import Lake, ingest
from trajectory_lake.lake import Lake as LakeClass
uri, options, after, *paths = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
commits = []
def crashing(original):
    def commit(self, table, rows, **kwargs):
        version = original(self, table, rows, **kwargs)
        commits.append(table)
        if len(commits) == after:
            os.kill(os.getpid(), signal.SIGKILL)
        return version
    return commit
LakeClass.append = crashing(LakeClass.append)
LakeClass.append_stream = crashing(LakeClass.append_stream)
ingest(paths, Lake(uri, storage_options=options or None))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server in its own process (delta-rs holds the GIL during requests, so not a thread)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("the moto S3 server did not start")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def _s3_options(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@pytest.fixture(params=["local", "s3"])
def new_lake(request, tmp_path):
    """A factory of empty lakes on the local disk or in a fresh S3 bucket."""

    def make() -> Lake:
        if request.param == "local":
            return Lake(tmp_path / f"lake-{uuid.uuid4().hex[:8]}")
        import boto3

        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"lake-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        return Lake(f"s3://{bucket}/harvest", storage_options=_s3_options(endpoint))

    return make


def _snapshot(lake: Lake) -> dict[str, pl.DataFrame]:
    """Every data table's rows, without the per-ingest provenance columns, in key order."""
    out = {}
    for table in DATA_TABLES:
        frame = lake.read(table).drop("ingest_id", "ingested_at")
        if "recorded_at" in frame.columns:
            frame = frame.drop("recorded_at")
        out[table] = frame.sort(list(KEYS[table]))
    return out


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def _killed_ingest(lake: Lake, shared_data: Path, script: str, after: int) -> list[str]:
    """Run ``script`` (an ingest that SIGKILLs itself after ``after`` steps) into ``lake``; its sources."""
    sources = [str(shared_data / "swebench-lite" / "tasks.jsonl"), str(shared_data / "formats" / "mini-swe-agent")]
    proc = subprocess.run(
        [sys.executable, "-c", script, lake.uri, json.dumps(lake.storage_options or {}), str(after), *sources],
        env=_env(), capture_output=True, timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    return sources


class TestKillDashNine:
    @pytest.mark.parametrize("after_commits", [1, 3, 5])
    def test_an_ingest_killed_midway_leaves_readable_tables_and_a_rerun_completes_it(
        self, new_lake, shared_data, after_commits
    ):
        lake = new_lake()
        sources = _killed_ingest(lake, shared_data, _CRASHING_INGEST, after_commits)
        # every table reads at its last committed version; exactly `after_commits` data commits landed
        versions = lake.versions()
        assert sum(versions[t] for t in DATA_TABLES) == after_commits
        for table in DATA_TABLES:
            lake.read(table)
        ingest(sources, lake)

        clean = new_lake()
        ingest(sources, clean)
        got, want = _snapshot(lake), _snapshot(clean)
        for table in DATA_TABLES:
            assert got[table].equals(want[table]), table


# Runs an ingest whose tables are all written in chunks, and SIGKILLs it in its N-th chunk write.
_CRASHING_CHUNKED_INGEST = """
import importlib, json, os, signal, sys
from trajectory_lake import Lake, ingest
lake_module, ingest_module = importlib.import_module("trajectory_lake.lake"), importlib.import_module("trajectory_lake.ingest")
uri, options, after, *paths = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
ingest_module.WRITE_CHUNK_BYTES = 1 << 10
original, writes = lake_module.write_deltalake, []
def crashing(table_uri, data, **kwargs):
    if "harvest-staging-" in table_uri:
        writes.append(table_uri)
        if len(writes) == after:
            os.kill(os.getpid(), signal.SIGKILL)
    return original(table_uri, data, **kwargs)
lake_module.write_deltalake = crashing
ingest(paths, Lake(uri, storage_options=options or None))
"""


class TestChunkedCommits:
    def test_a_stream_written_in_chunks_is_one_commit_of_every_row(self, new_lake, shared_data):
        source = new_lake()
        ingest([shared_data / "swebench-lite" / "tasks.jsonl"], source)
        tasks = conform("tasks", source.read("tasks").to_arrow())
        whole, chunked = new_lake().create(), new_lake().create()
        for target, chunk in ((whole, None), (chunked, 16 << 10)):
            reader = pa.RecordBatchReader.from_batches(tasks.schema, tasks.to_batches(max_chunksize=8))
            assert target.append_stream("tasks", reader, metadata={"harvest.test": "1"}, chunk_bytes=chunk) == 1

        assert chunked.read("tasks").sort("task_id").equals(whole.read("tasks").sort("task_id"))
        assert chunked.history("tasks")[0]["harvest.test"] == "1"
        assert chunked.maintenance.stats("tasks")["files"] > whole.maintenance.stats("tasks")["files"]
        # Every file carries delta-rs' statistics, so a point query still skips files.
        one = tasks["task_id"][17].as_py()
        assert chunked.scan("tasks").filter(pl.col("task_id") == one).collect().height == 1
        actions = pl.DataFrame(pa.table(chunked.delta_table("tasks").get_add_actions(flatten=True)))
        assert actions["num_records"].sum() == tasks.num_rows and actions["min.task_id"].null_count() == 0
        # The staging table is gone: its files belong to the table now.
        staging = {Path(p).parts[0] for p in actions["path"].to_list()}
        assert len(staging) == 1 and staging.pop().startswith("harvest-staging-")
        assert not DeltaTable.is_deltatable(f"{chunked.table_uri('tasks')}/{Path(actions['path'][0]).parts[0]}",
                                            storage_options=chunked.storage_options)

    @pytest.mark.parametrize("after_writes", [1, 4])
    def test_an_ingest_killed_between_chunk_writes_changes_nothing_and_reruns_clean(
        self, new_lake, shared_data, after_writes
    ):
        lake = new_lake()
        sources = _killed_ingest(lake, shared_data, _CRASHING_CHUNKED_INGEST, after_writes)
        clean = new_lake()
        ingest(sources, clean)
        want = _snapshot(clean)
        # Each table holds all of its rows of the killed ingest (committed before the kill) or none: the
        # chunks written before the kill are not in the table.
        got = _snapshot(lake)
        for table in DATA_TABLES:
            assert got[table].height in (0, want[table].height), table
            assert got[table].height == 0 or got[table].equals(want[table]), table
        assert sum(frame.height for frame in got.values()) < sum(frame.height for frame in want.values())
        ingest(sources, lake)
        got = _snapshot(lake)
        for table in DATA_TABLES:
            assert got[table].equals(want[table]), table


class TestConcurrentWriters:
    def test_four_processes_ingesting_into_one_lake_lose_and_duplicate_nothing(self, new_lake, shared_data):
        lake = new_lake()
        files = sorted((shared_data / "swebench-lite" / "candidates").glob("*.jsonl"))[:4]
        args = ["--storage-option=" + f"{k}={v}" for k, v in (lake.storage_options or {}).items()]
        procs = [
            subprocess.Popen([sys.executable, "-m", "trajectory_lake.cli", "ingest", str(f), "--lake", lake.uri,
                              "--json", *args], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for f in files
        ]
        outputs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0, 0], [o[1].decode()[-1500:] for o in outputs]
        expected = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
        for table in ("trajectories", "candidates", "outcomes"):
            frame = lake.read(table)
            assert frame.height == expected, table
            assert frame.select(KEYS[table]).n_unique() == expected, table
        assert lake.read("runs").height == 4
        assert lake.read("ingests").height == 4


# The start of a child that waits for the others: argv = [repository, signals folder, its number, lake uri,
# storage options as JSON, ...]; the code after it runs once the test touches `go`.
_AT_ONCE = """
import json, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[1]]
signals, me, uri, options = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
from trajectory_lake import Lake, ingest
from trajectory_lake.cli import main
from trajectory_lake.feedback import write_feedback
from tests.trajectory_lake.test_feedback import feedback
lake = Lake(uri, storage_options=options or None)
(signals / f"ready-{me}").touch()
while not (signals / "go").exists():
    time.sleep(0.0005)
"""
_CREATE = _AT_ONCE + """
lake.create()
print(json.dumps({t: lake.delta_table(t).metadata().id for t in sorted(lake.versions())}))
"""
_MIGRATE = _AT_ONCE + """
from trajectory_lake._migrations import migrate
print(json.dumps(migrate(lake, ["outcomes"])))
"""
_INGEST = _AT_ONCE + """
main(["ingest", sys.argv[6], "--lake", uri, "--json",
      *(f"--storage-option={k}={v}" for k, v in options.items())], prog_name="harvest")
"""
_FEEDBACK = _AT_ONCE + """
print(json.dumps(write_feedback(lake, feedback(request_id=f"rr-{me}", task_id=f"served/t{me}")).rows))
"""


def _run_at_once(script: str, lake: Lake, extra: list[str], signals: Path) -> list[str]:
    """Start a child per ``extra`` argument, wait until all are ready, release them at once; their outputs."""
    signals.mkdir()
    root = str(Path(__file__).resolve().parents[2])
    options = json.dumps(lake.storage_options or {})
    procs = [
        subprocess.Popen([sys.executable, "-c", script, root, str(signals), str(i), lake.uri, options, arg],
                         env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, arg in enumerate(extra)
    ]
    try:
        deadline = time.monotonic() + 120
        while len(list(signals.glob("ready-*"))) < len(procs):
            started = time.monotonic() < deadline and all(p.poll() is None for p in procs)
            assert started, [p.communicate()[1][-1500:] for p in procs if p.poll() is not None]
            time.sleep(0.01)
        (signals / "go").touch()
        outputs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0] * len(procs), [err[-1500:] for _, err in outputs]
    return [out for out, _ in outputs]


def _assert_created_once(lake: Lake, reference: Lake) -> None:
    """Every table exists, was created by one commit (version 0, the only CREATE in its history), and has
    the schema, partitioning, properties and protocol of ``reference`` (a lake created by one process)."""
    assert sorted(lake.versions()) == sorted(TABLE_NAMES)
    for table in TABLE_NAMES:
        creates = [c["version"] for c in lake.history(table) if c["operation"] == "CREATE TABLE"]
        assert creates == [0], (table, creates)
        got, want = lake.delta_table(table), reference.delta_table(table)
        assert got.schema().to_json() == want.schema().to_json(), table
        assert got.metadata().partition_columns == want.metadata().partition_columns, table
        assert got.metadata().configuration == want.metadata().configuration, table
        assert got.protocol() == want.protocol(), table


class TestBrandNewLake:
    """Processes that start at the same moment on a lake that does not exist yet. delta-rs retries a CREATE
    that lost the race to version 0 as a later commit, which replaces the table's metadata (a new table id
    and creation time, and whatever schema and properties that process had) after the others' writes."""

    def test_processes_creating_a_new_lake_at_once_create_each_table_once(self, new_lake, tmp_path):
        lake = new_lake()
        outputs = _run_at_once(_CREATE, lake, [""] * 4, tmp_path / "signals")
        _assert_created_once(lake, new_lake().create())
        final = {t: lake.delta_table(t).metadata().id for t in TABLE_NAMES}
        assert [json.loads(out) for out in outputs] == [final] * 4  # each went on with the table that stayed

    def test_four_ingests_starting_at_once_on_a_new_lake_write_every_row_once(self, new_lake, shared_data,
                                                                               tmp_path):
        sources = [shared_data / "formats" / "mini-swe-agent", shared_data / "formats" / "tau-bench",
                   shared_data / "formats" / "swe-agent-traj",
                   shared_data / "swebench-lite" / "candidates" / "20240609_moatless_gpt4o.jsonl"]
        lake = new_lake()
        reports = [json.loads(out) for out in _run_at_once(_INGEST, lake, [str(s) for s in sources],
                                                           tmp_path / "signals")]
        reference = new_lake()
        for source in sources:  # one after the other
            ingest([source], reference)
        _assert_created_once(lake, reference)
        assert sorted(lake.read("ingests")["ingest_id"]) == sorted(r["ingest_id"] for r in reports)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
            assert lake.read(table).select(KEYS[table]).n_unique() == lake.read(table).height, table

    def test_four_feedback_writers_starting_at_once_on_a_new_lake_write_each_event_once(self, new_lake,
                                                                                         tmp_path):
        from trajectory_lake.feedback import write_feedback

        from .test_feedback import feedback

        lake = new_lake()
        written = [json.loads(out) for out in _run_at_once(_FEEDBACK, lake, [""] * 4, tmp_path / "signals")]
        reference = new_lake()
        for i in range(4):
            write_feedback(reference, feedback(request_id=f"rr-{i}", task_id=f"served/t{i}"))
        _assert_created_once(lake, reference)
        assert [w["rerank_events"] for w in written] == [1] * 4
        assert lake.read("rerank_events").height == 4
        for table in (*DATA_TABLES, "rerank_events"):
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table


class TestUpgradeAtOnce:
    """Processes that start at the same moment on a lake whose table predates its current schema."""

    def test_feedback_writers_upgrading_an_old_rerank_events_table_at_once_all_succeed(self, new_lake,
                                                                                       tmp_path):
        # Each writer adds the missing columns first; Delta commits one of those ADD COLUMNs and rejects
        # the others (the metadata changed), whose writers must read the table again.
        from trajectory_lake.schema import schema_of

        from .test_feedback import old_rerank_events_schema

        lake = new_lake()
        DeltaTable.create(lake.table_uri("rerank_events"), old_rerank_events_schema(),
                          storage_options=lake.storage_options)
        # no lake.create() here: it would add the columns itself (the writers create the other tables)
        written = [json.loads(out) for out in _run_at_once(_FEEDBACK, lake, [""] * 6, tmp_path / "signals")]
        assert [w["rerank_events"] for w in written] == [1] * 6
        assert [c["operation"] for c in lake.history("rerank_events")].count("ADD COLUMN") == 1
        events = lake.read("rerank_events")
        assert events.columns == schema_of("rerank_events").names and events["event_id"].n_unique() == 6

    def test_two_writers_opening_a_lake_whose_outcomes_lack_extra_migrate_it_once(self, new_lake, tmp_path):
        # Both find the column missing; Delta commits one ADD COLUMN (the migration outcomes-extra) and
        # rejects the other, whose writer reads the table again, finds the column and goes on.
        from trajectory_lake.schema import schema_of

        from .test_migrations import OLD_OUTCOMES

        lake = new_lake()
        DeltaTable.create(lake.table_uri("outcomes"), OLD_OUTCOMES, partition_by=["benchmark"],
                          storage_options=lake.storage_options)
        outputs = _run_at_once(_MIGRATE, lake, [""] * 2, tmp_path / "signals")
        assert sorted(json.loads(out) for out in outputs) == [[], ["outcomes-extra"]]  # each one's commits
        history = lake.history("outcomes")
        assert [c.get("harvest.migration") for c in history if c["operation"] == "ADD COLUMN"] == [
            "outcomes-extra"
        ]
        assert [f.name for f in lake.delta_table("outcomes").schema().fields] == schema_of("outcomes").names


def _assert_ingests_reconcile(lake: Lake, reports: list[dict]) -> None:
    """One ``ingests`` row per report, holding the report's counts, and every table's counts reconcile."""
    rows = {row["ingest_id"]: json.loads(row["counts"]) for row in lake.read("ingests").iter_rows(named=True)}
    assert rows == {r["ingest_id"]: r["counts"] for r in reports}
    for counts in rows.values():
        for table, c in counts.items():
            assert c["read"] == c["written"] + c["duplicate"] + c["quarantined"], (table, c)


def _assert_no_version_holds_a_key_twice(lake: Lake) -> None:
    """Every version of every data table, from its creation to its latest, holds each key once: not only
    the latest (a reader pinned to any version sees no duplicate)."""
    for table in DATA_TABLES:
        for version in range(lake.version(table) + 1):
            keys = lake.scan(table, version=version).select(KEYS[table]).collect()
            assert keys.n_unique() == keys.height, (table, version)


def _assert_each_key_once(lake: Lake, reports: list[dict]) -> None:
    """No key twice in a data table, and the rows the reports count as written are the rows there (tasks:
    at least, as an inferred task row upgraded by a dataset's counts as written by both)."""
    for table in DATA_TABLES:
        frame = lake.read(table)
        assert frame.select(KEYS[table]).n_unique() == frame.height, table
        written = sum(r["counts"].get(table, {}).get("written", 0) for r in reports)
        assert written >= frame.height if table == "tasks" else written == frame.height, (table, written)


class TestSharedKeysAtOnce:
    """Ingests at once whose sources share keys: runs of one benchmark (their tasks), the same source again
    (a retried job while the first still runs). Each reads the shared keys as missing; each table's commit
    is made against the version read and refused if another came first, and the ingest then drops its rows
    of the keys that commit added and commits again."""

    def test_four_ingests_of_sources_sharing_tasks_write_what_one_after_another_do(
            self, new_lake, shared_data, tmp_path):
        # SWE-bench Lite's task rows; trajectories whose tasks (inferred from them) are some of those
        sources = [shared_data / "swebench-lite" / "tasks.jsonl", shared_data / "formats" / "mini-swe-agent",
                   shared_data / "formats" / "moatless", shared_data / "formats" / "swe-agent-traj"]
        lake = new_lake()
        reports = [json.loads(out) for out in _run_at_once(_INGEST, lake, [str(s) for s in sources],
                                                           tmp_path / "signals")]
        reference = new_lake()
        for source in sources:
            ingest([source], reference)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
        _assert_each_key_once(lake, reports)
        _assert_ingests_reconcile(lake, reports)
        _assert_no_version_holds_a_key_twice(lake)

    def test_no_version_of_any_table_holds_a_key_twice_while_ingests_sharing_keys_run_at_once(
            self, new_lake, shared_data, tmp_path):
        # Lite's task rows, trajectories inferring some of those tasks, and one source twice: every table
        # gets commits of the same keys from two ingests at once. A reader pinned to any version between
        # the first commit and the last sees each key once.
        formats = shared_data / "formats"
        sources = [shared_data / "swebench-lite" / "tasks.jsonl", formats / "mini-swe-agent",
                   formats / "mini-swe-agent", formats / "moatless"]
        lake = new_lake()
        reports = [json.loads(out) for out in _run_at_once(_INGEST, lake, [str(s) for s in sources],
                                                           tmp_path / "signals")]
        _assert_no_version_holds_a_key_twice(lake)
        reference = new_lake()
        for source in sources:
            ingest([source], reference)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
        _assert_ingests_reconcile(lake, reports)

    def test_one_source_ingested_twice_at_once_is_written_once(self, new_lake, shared_data, tmp_path):
        source = shared_data / "formats" / "mini-swe-agent"
        lake = new_lake()
        outputs = _run_at_once(_INGEST, lake, [str(source)] * 2, tmp_path / "signals")
        reports = [json.loads(out) for out in outputs]
        reference = new_lake()
        ingest([source], reference)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
        _assert_each_key_once(lake, reports)
        _assert_ingests_reconcile(lake, reports)
        _assert_no_version_holds_a_key_twice(lake)


def _meanwhile(monkeypatch, run: Callable[[], object]) -> None:
    """Make the next ingest ``run`` (another ingest into its lake) once it has read the keys the lake holds
    and before its first commit: what an ingest at once that commits first does, deterministically."""
    from trajectory_lake.ingest import _Writer

    original, armed = _Writer._append_staged, [True]

    def append_staged(self, table, metadata):
        if armed:
            armed.clear()
            run()
        return original(self, table, metadata)

    monkeypatch.setattr(_Writer, "_append_staged", append_staged)


def _race_two_lengths(tmp_path: Path, monkeypatch, name: str, short: bytes, full: bytes, meanwhile: str, *,
                      held: bytes | None = None) -> tuple[Lake, list[dict]]:
    """One file read at two lengths by two ingests at once: this ingest reads one while another ingests the
    other (``meanwhile``: the ``"shorter"`` or the ``"longer"``) and commits first (:func:`_meanwhile`), into
    a lake that first holds ``held`` ingested from the same path, if given. Checks the lake then holds what
    one ingest of ``full`` gives; returns the lake and the reports (dicts, in commit order)."""
    (tmp_path / "in").mkdir()
    growing = tmp_path / "in" / name  # one path: source_uri is part of the rows
    lake = Lake(tmp_path / "lake")
    reports = []
    if held is not None:
        growing.write_bytes(held)
        reports.append(ingest([growing], lake))

    def other() -> None:  # the other length, ingested while this ingest holds what it read
        kept = growing.read_bytes()
        growing.write_bytes(short if meanwhile == "shorter" else full)
        reports.append(ingest([growing], lake))
        growing.write_bytes(kept)

    growing.write_bytes(full if meanwhile == "shorter" else short)
    _meanwhile(monkeypatch, other)
    reports.append(ingest([growing], lake))
    growing.write_bytes(full)
    once = Lake(tmp_path / "once")
    ingest([growing], once)
    for table in DATA_TABLES:
        assert comparable_rows(lake, table).equals(comparable_rows(once, table)), table
    return lake, [report.to_dict() for report in reports]


class TestKeysCommittedMeanwhile:
    """An ingest handed a lake where another ingest committed rows of its keys after it read the lake's keys:
    its commit against the version it read is refused, and it drops its own rows of those keys before it
    commits, as if it had run after the other; no version ever holds a key twice."""

    @pytest.mark.parametrize("how", ["one commit", "commits as it goes", "written in parts"])
    def test_the_same_source_committed_meanwhile_leaves_nothing_to_write(self, shared_data, tmp_path,
                                                                         monkeypatch, how):
        ingest_module = importlib.import_module("trajectory_lake.ingest")

        source = shared_data / "formats" / "mini-swe-agent"
        lake = Lake(tmp_path / "lake")
        first = []
        _meanwhile(monkeypatch, lambda: first.append(ingest([source], lake)))
        if how == "written in parts":  # StagedAppend parts, one commit of them
            monkeypatch.setattr(ingest_module, "WRITE_CHUNK_BYTES", 1)
        options = {"flush_bytes": 1, "commit_bytes": 1} if how == "commits as it goes" else {}
        second = ingest([source], lake, **options)
        once = Lake(tmp_path / "once")
        ingest([source], once)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(once, table)), table
            counts = second.counts[table]
            assert (counts.written, counts.duplicate) == (0, counts.read - counts.quarantined), table
        reports = [r.to_dict() for r in (*first, second)]
        _assert_each_key_once(lake, reports)
        _assert_ingests_reconcile(lake, reports)
        _assert_no_version_holds_a_key_twice(lake)
        # Every row was the other's: the second ingest committed nothing to a data table, and says so.
        assert not set(second.versions) & set(DATA_TABLES), second.versions
        for table in DATA_TABLES:
            versions = range(lake.version(table) + 1)
            committed = [lake.commit_info(table, v).get("harvest.ingest_id") for v in versions]
            assert second.ingest_id not in committed, table

    @pytest.mark.parametrize("how", ["one commit", "written in parts"])
    def test_the_report_counts_each_tables_commit_refusals(self, shared_data, tmp_path, monkeypatch, how):
        ingest_module = importlib.import_module("trajectory_lake.ingest")

        source = shared_data / "formats" / "mini-swe-agent"
        lake = Lake(tmp_path / "lake")
        first = []
        _meanwhile(monkeypatch, lambda: first.append(ingest([source], lake)))
        if how == "written in parts":
            monkeypatch.setattr(ingest_module, "WRITE_CHUNK_BYTES", 1)
        second = ingest([source], lake)
        # Each table the other ingest committed first refused this one's commit once (an append, or a
        # commit of parts); every row then was a duplicate: no second attempt. The first was never refused.
        written = {table for table in (*DATA_TABLES, "quarantine") if lake.read(table).height}
        assert second.commit_refusals == dict.fromkeys(sorted(written), 1)
        assert second.to_dict()["commit_refusals"] == second.commit_refusals
        assert first[0].commit_refusals == {} and first[0].to_dict()["commit_refusals"] == {}

    def test_an_upgrade_made_on_a_refusal_does_not_refuse_the_commit_after_it(self, shared_data, tmp_path,
                                                                              monkeypatch):
        # The dataset's ingest finds the tasks it stages committed meanwhile as inferred rows: its commit
        # is refused once, it upgrades those rows (its own MERGE, right after the others' commit) and then
        # commits the rest against that MERGE, not refused by its own commit.
        lake = Lake(tmp_path / "lake")
        _meanwhile(monkeypatch, lambda: ingest([shared_data / "formats" / "mini-swe-agent"], lake))
        report = ingest([shared_data / "swebench-lite" / "tasks.jsonl"], lake)
        assert report.commit_refusals == {"tasks": 1}
        operations = [lake.commit_info("tasks", v).get("operation") for v in range(lake.version("tasks") + 1)]
        assert operations == ["CREATE TABLE", "WRITE", "MERGE", "WRITE"]
        assert report.versions["tasks"] == 3

    @pytest.mark.parametrize("meanwhile", ["dataset", "trajectories"])
    def test_a_datasets_task_row_wins_over_an_inferred_one_whichever_commits_first(
            self, shared_data, tmp_path, monkeypatch, meanwhile):
        # mini-swe-agent's trajectories infer two of SWE-bench Lite's tasks (no benchmark, no reference)
        dataset = shared_data / "swebench-lite" / "tasks.jsonl"
        trajectories = shared_data / "formats" / "mini-swe-agent"
        first, later = (dataset, trajectories) if meanwhile == "dataset" else (trajectories, dataset)
        lake = Lake(tmp_path / "lake")
        reports = []
        _meanwhile(monkeypatch, lambda: reports.append(ingest([first], lake)))
        reports.append(ingest([later], lake))
        reference = Lake(tmp_path / "reference")
        for source in (trajectories, dataset):
            ingest([source], reference)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
        reports = [r.to_dict() for r in reports]
        _assert_each_key_once(lake, reports)
        _assert_ingests_reconcile(lake, reports)
        _assert_no_version_holds_a_key_twice(lake)

    @pytest.mark.parametrize("meanwhile", ["shorter", "longer"])
    def test_a_grown_session_wins_over_its_shorter_self_whichever_commits_first(
            self, shared_data, tmp_path, monkeypatch, meanwhile):
        path = sorted((shared_data / "formats" / "codex-rollout").glob("rollout-*.jsonl"))[0]
        lines = path.read_bytes().splitlines(keepends=True)
        short, full = b"".join(lines[:66]), b"".join(lines)
        lake, reports = _race_two_lengths(tmp_path, monkeypatch, path.name, short, full, meanwhile)
        for table in DATA_TABLES:
            assert lake.read(table).select(KEYS[table]).n_unique() == lake.read(table).height, table
        _assert_ingests_reconcile(lake, reports)
        _assert_no_version_holds_a_key_twice(lake)

    def test_three_ingests_of_one_task_leave_it_once_when_the_richer_row_lands_between_the_others(
            self, shared_data, tmp_path, monkeypatch):
        # X and Y infer the same tasks from mini-swe-agent's trajectories, Z holds the dataset's rows of them.
        # Y reads the lake, X commits, and Z runs right after Y's first table commit. (The old repair left a
        # task twice: Z's upgrade restamped X's and Y's inferred rows before Y deleted its own by ingest id.)
        from trajectory_lake.lake import StagedAppend

        formats = shared_data / "formats"
        x, y, z = [formats / "mini-swe-agent"], [formats / "mini-swe-agent", formats / "moatless"], [
            shared_data / "swebench-lite" / "tasks.jsonl"]
        lake = Lake(tmp_path / "lake")
        reports, then = [], []

        def after_commit(original):
            def commit(*args, **kwargs):
                version = original(*args, **kwargs)
                if version is not None and then:
                    then.pop()()
                return version
            return commit

        def run_x() -> None:
            reports.append(ingest(x, lake))
            then.append(lambda: reports.append(ingest(z, lake)))

        monkeypatch.setattr(Lake, "append_stream", after_commit(Lake.append_stream))
        monkeypatch.setattr(StagedAppend, "commit", after_commit(StagedAppend.commit))
        _meanwhile(monkeypatch, run_x)
        reports.append(ingest(y, lake))
        assert not then  # Z ran between Y's commits
        reference = Lake(tmp_path / "reference")
        for sources in (x, y, z):
            ingest(sources, reference)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
        reports = [r.to_dict() for r in reports]
        _assert_each_key_once(lake, reports)
        _assert_ingests_reconcile(lake, reports)
        _assert_no_version_holds_a_key_twice(lake)


# An ingest that, once it has read the lake's keys and before its first commit, touches `read` in the
# signals folder and waits for `go` (the test runs another ingest meanwhile), then SIGKILLs itself right
# after its N-th table commit (an append or a staged append's commit that added rows).
_KILLED_AFTER_ANOTHER = """
import json, os, signal, sys, time
from pathlib import Path
from trajectory_lake import Lake, ingest
from trajectory_lake.ingest import _Writer
from trajectory_lake.lake import Lake as LakeClass, StagedAppend
uri, options, after, signals, *paths = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]
signals = Path(signals)
commits = []
def counted(original):
    def commit(*args, **kwargs):
        version = original(*args, **kwargs)
        if version is not None:
            commits.append(version)
            if len(commits) == after:
                os.kill(os.getpid(), signal.SIGKILL)
        return version
    return commit
LakeClass.append_stream = counted(LakeClass.append_stream)
StagedAppend.commit = counted(StagedAppend.commit)
append_staged = _Writer._append_staged
def waiting(self, table, metadata):
    if not (signals / "read").exists():
        (signals / "read").touch()
        while not (signals / "go").exists():
            time.sleep(0.01)
    return append_staged(self, table, metadata)
_Writer._append_staged = waiting
ingest(paths, Lake(uri, storage_options=options or None))
"""


class TestKilledWhileAnotherIngests:
    """kill -9 of an ingest whose keys another ingest committed after it read them: no version holds a key
    twice, and running the killed ingest again yields the rows of the two ingests run one after another."""

    @pytest.mark.parametrize("after_commits", [1, 3])
    def test_an_ingest_killed_after_another_wrote_its_keys_reruns_to_the_rows_of_a_clean_sequence(
            self, new_lake, shared_data, tmp_path, after_commits):
        formats = shared_data / "formats"
        # The other ingest shares mini-swe-agent's rows and (inferred) tasks; swe-agent's are the killed's.
        killed = [str(shared_data / "swebench-lite" / "tasks.jsonl"), str(formats / "mini-swe-agent"),
                  str(formats / "swe-agent-traj")]
        other = [formats / "mini-swe-agent", formats / "moatless"]
        lake, signals = new_lake(), tmp_path / "signals"
        signals.mkdir()
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_AFTER_ANOTHER, lake.uri, json.dumps(lake.storage_options or {}),
             str(after_commits), str(signals), *killed],
            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while not (signals / "read").exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
                time.sleep(0.01)
            ingest(other, lake)  # commits the shared keys while the killed ingest holds its read
            (signals / "go").touch()
            _, err = proc.communicate(timeout=300)
        finally:
            proc.kill()
        assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        _assert_no_version_holds_a_key_twice(lake)

        ingest(killed, lake)
        reference = new_lake()
        ingest(other, reference)
        ingest(killed, reference)
        for table in DATA_TABLES:
            assert comparable_rows(lake, table).equals(comparable_rows(reference, table)), table
        _assert_no_version_holds_a_key_twice(lake)


class TestMaintenance:
    """History, time travel and vacuum on both stores: S3 keeps file times to the second and lists
    objects instead of reading a directory."""

    @staticmethod
    def _event(request_id: str) -> pa.Table:
        row = {"request_id": request_id, "candidate_hashes": ["a"], "scores": [0.5], "chosen": 0}
        return conform("rerank_events", [row])

    def test_as_of_history_and_vacuum_keep_pinned_versions_and_delete_a_crashed_appends_parts(self, new_lake):
        lake = new_lake().create()
        lake.append("rerank_events", self._event("r1"), metadata={"harvest.ingest_id": "first"})
        lake.append("rerank_events", self._event("r2"))  # most likely within the same second as r1
        history = lake.history("rerank_events")
        assert [c["version"] for c in history] == [2, 1, 0] and history[1]["harvest.ingest_id"] == "first"
        at_v1 = datetime.fromtimestamp(history[1]["timestamp"] / 1000, tz=UTC)
        assert lake.read("rerank_events", version=at_v1)["request_id"].to_list() == ["r1"]
        with pytest.raises(TableNotFoundError, match="the table was created later"):
            lake.read("rerank_events", version="2000-01-01T00:00:00Z")

        lake.staged_append("rerank_events").write(self._event("r3"))  # a crash before its commit
        lake.maintenance.optimize("rerank_events")
        lake.record_slice("b2:pinned", "pinned", "{}", {"rerank_events": 1})
        deleted = lake.maintenance.vacuum("rerank_events", retention_hours=0, dry_run=False)
        # v2's own file, and the staging table's part and log entry; v1's file stays for the slice
        assert len(deleted) == 3 and sum(p.startswith("harvest-staging-") for p in deleted) == 2, deleted
        assert lake.maintenance.vacuum("rerank_events", retention_hours=0) == []
        assert lake.read("rerank_events", version=1)["request_id"].to_list() == ["r1"]
        with pytest.raises(TableNotFoundError, match="a data file it references is gone"):
            lake.read("rerank_events", version=2)
        assert sorted(lake.read("rerank_events")["request_id"]) == ["r1", "r2"]
