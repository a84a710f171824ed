"""The rows an ingest writes do not depend on how it splits the reading of its input.

Under test: every folder of real samples (``../shared/data/formats``), ingested with the default settings
and with one flush per file (``flush_bytes=1``) and its JSONL files read in small parts (``part_bytes``),
each in this process and with two reader processes, gives the same rows in every table (ingest ids and
times aside), the same counts and the same report; ingesting it again adds nothing. Its files named in
the reverse order give the same rows too (of equally rich descriptions, the file first by path wins, not
the one named first). A folder that
describes an entity more than once (a conversation in each of its call logs, a run or a task in each of
its trajectories) is where a reading that depends on the flushes would show: the first description
staged would win over a richer one read after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trajectory_lake import IngestReport, Lake, ingest
from trajectory_lake.ingest import discover

from ._helpers import DATA_TABLES, comparable_rows, unreconciled

FORMATS = (
    "aider",
    "codex-rollout",
    "mini-swe-agent",
    "moatless",
    "openai-chat",
    "openhands",
    "swe-agent-traj",
    "tau-bench",
    "tau2-bench",
)
_SMALL = {"flush_bytes": 1, "part_bytes": 4 << 10}
_READERS = {"workers": 2, "parallel_min_bytes": 0}
READINGS: dict[str, dict[str, Any]] = {
    "one-flush": {"workers": 1},
    "one-flush-readers": _READERS,
    "flush-per-file": {"workers": 1, **_SMALL},
    "flush-per-file-readers": {**_READERS, **_SMALL},
}


def _outcome(report: IngestReport, lake: Lake) -> tuple[Any, ...]:
    """What an ingest did and left, comparable between two readings of the same input."""
    counts = {table: vars(c) for table, c in sorted(report.counts.items())}
    rows = {table: comparable_rows(lake, table) for table in (*DATA_TABLES, "quarantine")}
    return counts, report.sources, report.ignored, report.warnings, rows


def test_every_sample_folder_is_under_test(shared_data: Path) -> None:
    assert sorted(p.name for p in (shared_data / "formats").iterdir() if p.is_dir()) == sorted(FORMATS)


@pytest.mark.parametrize("name", FORMATS)
def test_the_rows_do_not_depend_on_the_flushes_the_parts_or_the_readers(
    shared_data: Path, tmp_path: Path, name: str
) -> None:
    folder = shared_data / "formats" / name
    outcomes = {}
    for reading, options in READINGS.items():
        lake = Lake(tmp_path / reading)
        report = ingest([folder], lake, **options)
        assert not unreconciled(report), reading
        outcomes[reading] = _outcome(report, lake)
        assert ingest([folder], lake, **options).total("written") == 0, reading
    *expected_report, expected_rows = outcomes.pop("one-flush")
    assert expected_report[0]["trajectories"]["written"] > 0
    for reading, (*report_seen, rows) in outcomes.items():
        assert report_seen == expected_report, reading
        for table, table_rows in rows.items():
            assert table_rows.equals(expected_rows[table]), (reading, table)


@pytest.mark.parametrize("name", FORMATS)
def test_the_rows_do_not_depend_on_the_order_the_files_are_named_in(
    shared_data: Path, tmp_path: Path, name: str
) -> None:
    files, _ = discover([shared_data / "formats" / name])
    forward, backward = Lake(tmp_path / "forward"), Lake(tmp_path / "backward")
    forward_report = ingest(files, forward, workers=1)
    backward_report = ingest(files[::-1], backward, workers=1, flush_bytes=1)
    assert _outcome(backward_report, backward)[:3] == _outcome(forward_report, forward)[:3]
    for table in (*DATA_TABLES, "quarantine"):
        assert comparable_rows(backward, table).equals(comparable_rows(forward, table)), table
