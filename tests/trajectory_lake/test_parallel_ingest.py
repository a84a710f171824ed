"""Reading files in parallel processes gives the same lake, row for row, as reading them in-process."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from trajectory_lake import Lake, ingest
from trajectory_lake.schema import KEYS

from ._helpers import DATA_TABLES, unreconciled

# Columns that differ between two ingests by design.
_PER_INGEST = ("ingest_id", "ingested_at", "recorded_at")


def _rows(lake: Lake, table: str) -> pl.DataFrame:
    frame = lake.read(table)
    return frame.drop([c for c in _PER_INGEST if c in frame.columns]).sort(list(KEYS[table]))


@pytest.fixture(scope="module")
def corpus(shared_data: Path) -> list[Path]:
    # Every real format, the Lite and Verified candidate sets (report files that label other files of
    # their run) and a malformed file, so labels, duplicates and quarantine all cross process boundaries.
    return [shared_data / "formats", shared_data / "swebench-lite"]


def test_parallel_readers_write_the_same_rows_as_one_process(corpus, tmp_path):
    junk = tmp_path / "in" / "broken.jsonl"
    junk.parent.mkdir()
    junk.write_bytes(b'{"instance_id": "a__b-1", "model_patch": "diff"}\n{"truncated": \n\xff\xfe\n')
    serial_lake, parallel_lake = Lake(tmp_path / "serial"), Lake(tmp_path / "parallel")

    serial = ingest([*corpus, junk.parent], serial_lake, workers=1)
    parallel = ingest([*corpus, junk.parent], parallel_lake, workers=2, parallel_min_bytes=0)

    assert not unreconciled(parallel)
    assert {t: vars(c) for t, c in parallel.counts.items()} == {t: vars(c) for t, c in serial.counts.items()}
    assert parallel.warnings == serial.warnings
    assert parallel.sources == serial.sources
    assert parallel.counts["steps"].written > 1000 and parallel.total("quarantined") >= 3
    for table in (*DATA_TABLES, "quarantine"):
        assert _rows(parallel_lake, table).equals(_rows(serial_lake, table)), table

    # And a second parallel ingest of the same input adds nothing.
    again = ingest([*corpus, junk.parent], parallel_lake, workers=2, parallel_min_bytes=0)
    assert again.total("written") == 0


def test_workers_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="workers must be >= 1"):
        ingest([tmp_path], Lake(tmp_path / "lake"), workers=0)
