"""``benchmarks/lake.py``'s slice baselines build the slice's own rows, so the speed ratios it prints
compare the same query (a small corpus from the real OpenHands sample; the timings are not tested)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import REPO_ROOT
from trajectory_lake import Lake, ingest
from trajectory_lake.slices import SliceSpec, resolve_slice, scan_slice


@pytest.fixture(scope="module")
def bench(shared_data: Path):  # the benchmark script as a module
    script = REPO_ROOT / "benchmarks" / "lake.py"
    spec = importlib.util.spec_from_file_location("harvest_lake_benchmark", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.SAMPLE = shared_data / "formats/openhands/official_example_multi_swe_bench_output.jsonl"
    return module


@pytest.fixture(scope="module")
def bench_lake(bench, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("bench-corpus")
    bench.build_corpus(root / "corpus", trajectories=64, steps=6, files=8, max_text=200, seed=0)
    lake = Lake(root / "lake")
    ingest([root / "corpus"], lake, workers=1)
    return lake


@pytest.mark.parametrize("label_min", [None, 1.0])
def test_full_scan_builds_the_slices_rows(bench, bench_lake: Lake, label_min: float | None) -> None:
    benchmark = "swe-bench-verified"
    spec = SliceSpec(name="bench", benchmarks=[benchmark], label="resolved", label_min=label_min)
    rows = scan_slice(bench_lake, resolve_slice(bench_lake, spec)).collect()
    full = bench.full_scan(bench_lake, benchmark, label_min)

    assert rows.height == full.height
    assert 0 < rows.height < 64 and set(rows["benchmark"]) == {benchmark}
    assert bench._same_rows(rows, full)
    # Other rows, another label or another split would be told apart.
    assert not bench._same_rows(rows, full.head(rows.height - 1))
    assert not bench._same_rows(rows, full.with_columns(label=pl.col("label") + 0.5))
    flipped = full.with_columns(
        split=pl.when(pl.col("split") == "train").then(pl.lit("val")).otherwise(pl.lit("train"))
    )
    assert not bench._same_rows(rows, flipped)


def test_duckdb_baseline_counts_the_slices_rows(bench, bench_lake: Lake) -> None:
    pytest.importorskip("duckdb", reason="DuckDB is the optional [bench] extra")
    spec = SliceSpec(name="bench", benchmarks=["swe-bench-lite"], label="resolved", label_min=1.0)
    rows = scan_slice(bench_lake, resolve_slice(bench_lake, spec)).collect()
    assert rows.height > 0 and bench.duckdb_query(bench_lake, "swe-bench-lite", 1.0) == rows.height
