"""lake.conform: rows (dicts or Arrow) cast to a table's exact schema, provenance given once per batch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from trajectory_lake.exceptions import SchemaMismatchError
from trajectory_lake.lake import conform

STAMP = {"ingest_id": "ingest-1", "ingested_at": datetime(2026, 11, 30, 12, 0, tzinfo=UTC)}
STEPS = [
    {"trajectory_id": "t1", "step_index": 0, "role": "user", "content": "fix it", "run_id": "r",
     "task_id": "k", "domain": "swe", "benchmark": "swe-bench-lite",
     "timestamp": datetime(2025, 1, 1, tzinfo=UTC)},
    {"trajectory_id": "t1", "step_index": 1, "role": "assistant", "content": None, "run_id": "r",
     "task_id": "k", "domain": "swe", "benchmark": None,
     "tool_calls": [{"id": "c1", "name": "bash", "arguments": "{}"}], "extra": '{"a":1}'},
]


class TestConstants:
    def test_constants_give_the_same_table_as_the_values_in_every_row(self) -> None:
        merged = conform("steps", [{**row, **STAMP} for row in STEPS])

        assert conform("steps", STEPS, constants=STAMP).equals(merged)

    def test_constants_replace_the_rows_own_values(self) -> None:
        rows = [{**row, "ingest_id": "stale"} for row in STEPS]

        table = conform("steps", rows, constants=STAMP)

        assert table.column("ingest_id").to_pylist() == ["ingest-1", "ingest-1"]

    def test_constants_apply_to_arrow_rows_too(self) -> None:
        stale = {"ingest_id": "stale", "ingested_at": STAMP["ingested_at"]}
        arrow = conform("steps", [{**row, **stale} for row in STEPS])

        assert conform("steps", arrow, constants=STAMP).equals(conform("steps", STEPS, constants=STAMP))

    def test_no_rows_give_an_empty_table_of_the_schema(self) -> None:
        table = conform("runs", [], constants=STAMP)

        assert table.num_rows == 0 and table.schema.names[-2:] == ["ingest_id", "ingested_at"]

    def test_a_row_that_does_not_fit_raises_as_without_constants(self) -> None:
        bad = [{**STEPS[0], "step_index": "first"}]

        with pytest.raises(SchemaMismatchError, match="rows do not fit table 'steps'"):
            conform("steps", bad, constants=STAMP)

    def test_a_missing_required_value_raises(self) -> None:
        with pytest.raises(SchemaMismatchError, match="rows do not fit table 'steps'"):
            conform("steps", [{**STEPS[0], "trajectory_id": None}], constants=STAMP)
