"""A rollout file that grew since it was ingested (an agent still running, a log appended to): ingesting
it again brings the lake to exactly what ingesting the whole file once gives."""

from __future__ import annotations

import polars as pl
import pytest

from trajectory_lake import Lake, ingest
from trajectory_lake.schema import KEYS

from ._helpers import DATA_TABLES, unreconciled

_PER_INGEST = ("ingest_id", "ingested_at", "recorded_at")


def _rows(lake: Lake, table: str) -> pl.DataFrame:
    frame = lake.read(table)
    return frame.drop([c for c in _PER_INGEST if c in frame.columns]).sort(list(KEYS[table]))


@pytest.fixture(scope="module")
def rollout(shared_data):
    path = sorted((shared_data / "formats" / "codex-rollout").glob("rollout-*.jsonl"))[0]
    return path.name, path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("cut", [66, 198])  # mid-session, at two turn boundaries
def test_a_grown_session_ends_up_as_if_ingested_once(rollout, tmp_path, cut):
    name, lines = rollout
    (tmp_path / "in").mkdir()
    growing = tmp_path / "in" / name  # the same path throughout: source_uri is part of the rows

    growing.write_bytes(b"".join(lines[:cut]))
    grown = Lake(tmp_path / "grown-lake")
    first = ingest([growing], grown)
    before = grown.read("trajectories").row(0, named=True)

    growing.write_bytes(b"".join(lines))
    second = ingest([growing], grown)
    once = Lake(tmp_path / "once-lake")
    ingest([growing], once)

    assert not unreconciled(first) and not unreconciled(second)
    after = grown.read("trajectories").row(0, named=True)
    assert after["trajectory_id"] == before["trajectory_id"] and after["n_steps"] > before["n_steps"]
    assert second.counts["trajectories"].written == 1 and second.counts["steps"].written > 0
    for table in DATA_TABLES:
        assert _rows(grown, table).equals(_rows(once, table)), table


def test_reingesting_an_unchanged_session_replaces_nothing(rollout, tmp_path):
    name, lines = rollout
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(b"".join(lines))
    lake = Lake(tmp_path / "lake")
    ingest([tmp_path / "in"], lake)
    versions = {t: lake.version(t) for t in DATA_TABLES}
    again = ingest([tmp_path / "in"], lake)
    assert again.total("written") == 0
    assert {t: lake.version(t) for t in DATA_TABLES} == versions


def test_a_session_that_answered_again_has_its_candidate_replaced(rollout, tmp_path):
    name, lines = rollout
    path = tmp_path / name
    path.write_bytes(b"".join(lines))
    lake = Lake(tmp_path / "lake")
    ingest([path], lake)
    [first_answer] = lake.read("candidates")["content"].to_list()

    # The agent was asked a follow-up and answered it: two more lines in the same rollout file.
    follow_up = [
        b'{"timestamp":"2026-02-23T23:00:00.000Z","type":"response_item","payload":{"type":"message",'
        b'"role":"user","content":[{"type":"input_text","text":"and now the docs?"}]}}\n',
        b'{"timestamp":"2026-02-23T23:00:05.000Z","type":"response_item","payload":{"type":"message",'
        b'"role":"assistant","content":[{"type":"output_text","text":"Docs updated too."}],'
        b'"phase":"final_answer"}}\n',
    ]
    path.write_bytes(b"".join(lines + follow_up))
    report = ingest([path], lake)

    assert not unreconciled(report)
    assert report.counts["steps"].written == 2 and report.counts["candidates"].written == 1
    candidates = lake.read("candidates")
    assert candidates.height == 1 and candidates["content"][0] == "Docs updated too." != first_answer
    once = Lake(tmp_path / "once")
    ingest([path], once)
    for table in DATA_TABLES:
        assert _rows(lake, table).equals(_rows(once, table)), table
