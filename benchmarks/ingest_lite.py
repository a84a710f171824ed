"""Ingest throughput on the real SWE-bench Lite files, against the floor of writing the same rows with pyarrow.

Prints one table: Harvest's full ingest (detect, normalise, dedup against the lake, one Delta commit
per table) and a re-ingest of the same files (all duplicates), next to writing the already-normalised
Arrow rows with plain ``pyarrow.parquet`` (the floor no ingest can beat).

Usage: ``python benchmarks/ingest_lite.py [--data ../shared/data/swebench-lite] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from trajectory_lake import Lake, ingest


def _time(fn, repeat: int) -> float:  # noqa: ANN001
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/swebench-lite")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    size_mb = sum(p.stat().st_size for p in args.data.rglob("*") if p.is_file()) / 1e6

    def fresh() -> None:
        with tempfile.TemporaryDirectory() as d:
            ingest([args.data], Lake(d))

    with tempfile.TemporaryDirectory() as d:
        lake = Lake(d)
        report = ingest([args.data], lake)
        n_traj = report.counts["trajectories"].written
        tables = {t: lake.delta_table(t).to_pyarrow_table() for t in ("tasks", "runs", "trajectories", "candidates", "outcomes")}
        t_fresh = _time(fresh, args.repeat)
        t_again = _time(lambda: ingest([args.data], lake), args.repeat)

        def floor() -> None:
            with tempfile.TemporaryDirectory() as out:
                for name, table in tables.items():
                    pq.write_table(table, Path(out) / f"{name}.parquet")

        t_floor = _time(floor, args.repeat)

    print(f"SWE-bench Lite: {n_traj} trajectories, {size_mb:.1f} MB of input, median of {args.repeat}")
    print(f"{'what':<40}{'seconds':>9}{'traj/s':>10}{'MB/s':>8}{'x floor':>9}")
    for name, t in (("harvest ingest (new lake)", t_fresh), ("harvest re-ingest (all duplicates)", t_again),
                    ("floor: pyarrow.parquet write of rows", t_floor)):
        print(f"{name:<40}{t:>9.3f}{n_traj / t:>10.0f}{size_mb / t:>8.1f}{t / t_floor:>9.1f}")


if __name__ == "__main__":
    main()
