"""Send one rerank request for a task of the demo lake and print the ranking with the true labels."""

from __future__ import annotations

import argparse

import polars as pl

from reranker_service import RerankClient
from trajectory_lake import Lake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--lake", required=True)
    parser.add_argument("--task", default="swe-bench/harvest-demo__textkit-2")
    args = parser.parse_args()

    lake = Lake(args.lake)
    task = lake.read("tasks").filter(pl.col("task_id") == args.task).row(0, named=True)
    candidates = (
        lake.read("candidates").filter(pl.col("task_id") == args.task)
        .join(lake.read("runs").select("run_id", "name"), on="run_id")
        .join(lake.read("outcomes").filter(pl.col("name") == "resolved").select("candidate_id", "value"),
              on="candidate_id", how="left")
        .sort("name")
    )
    with RerankClient(args.url) as client:
        client.wait_until_ready(timeout=180)
        response = client.rerank(
            task["prompt"],
            [{"id": row["name"], "content": row["content"]} for row in candidates.iter_rows(named=True)],
            task_id=task["instance_id"],
        )
    labels = dict(zip(candidates["name"], candidates["value"], strict=True))
    print(f"task {args.task}: {task['prompt'].splitlines()[0]}")
    print(f"model {response['model']}, {response['usage']['duration_ms']:.0f} ms")
    print(f"{'rank':>4}  {'candidate (run)':<24}{'score':>8}{'value':>9}  resolved")
    for r in response["results"]:
        print(f"{r['rank']:>4}  {r['id']:<24}{r['score']:>8.3f}{r['value']:>9.3f}  {labels.get(r['id'])}")


if __name__ == "__main__":
    main()
