"""Training examples from the lake, and the split by task.

An example is one candidate with its task prompt and its binary label. Examples are built by joining
``candidates`` × ``outcomes`` (the configured label) × ``tasks`` at pinned table versions; the versions
are returned with the frame so a training run records exactly what it read.

The split is by task: a task's hash decides whether all of its candidates are in validation, so no
task is ever in both splits.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import polars as pl

from trajectory_lake import Lake

__all__ = ["Examples", "load_examples", "split_by_task", "task_bucket"]


@dataclass(frozen=True)
class Examples:
    """Examples and where they came from.

    Attributes:
        frame: one row per candidate: task_id, candidate_id, run_id, prompt, content, label, value.
        versions: the table versions read (lineage for MLflow).
    """

    frame: pl.DataFrame
    versions: dict[str, int]


def load_examples(
    lake: Lake,
    *,
    kind: str = "patch",
    label: str = "resolved",
    drop_empty: bool = True,
    versions: dict[str, int] | None = None,
) -> Examples:
    """Labelled candidates of ``kind`` with their task prompts.

    Args:
        lake: the lake to read.
        kind: candidate kind (``patch``, ``answer``, ``action``).
        label: outcome name; several evaluations of a candidate are averaged, ``> 0.5`` is positive.
        drop_empty: drop candidates whose content is blank.
        versions: pin table versions (default: the latest of each).

    Returns:
        :class:`Examples`. Candidates without a label or without a task prompt are left out.
    """
    tables = ("candidates", "outcomes", "tasks")
    pinned = {t: (versions or {}).get(t, lake.version(t)) for t in tables}
    candidates = (
        lake.scan("candidates", version=pinned["candidates"])
        .filter(pl.col("kind") == kind)
        .select("candidate_id", "task_id", "run_id", "trajectory_id", "content")
    )
    outcomes = (
        lake.scan("outcomes", version=pinned["outcomes"])
        .filter(pl.col("name") == label)
        .group_by("candidate_id")
        .agg(pl.col("value").mean())
    )
    tasks = lake.scan("tasks", version=pinned["tasks"]).select("task_id", "prompt", "benchmark", "repo")
    frame = (
        candidates.join(outcomes, on="candidate_id", how="inner")
        .join(tasks, on="task_id", how="inner")
        .filter(pl.col("prompt").is_not_null())
        .with_columns(label=(pl.col("value") > 0.5).cast(pl.Float32), content=pl.col("content").fill_null(""))
    )
    if drop_empty:
        frame = frame.filter(pl.col("content").str.strip_chars() != "")
    return Examples(frame=frame.sort("task_id", "candidate_id").collect(), versions=pinned)


def task_bucket(task_id: str, seed: int = 0) -> float:
    """A stable number in [0, 1) for ``task_id``: the same on every machine and run.

    Examples:
        >>> 0 <= task_bucket("swe-bench/django__django-11099") < 1
        True
    """
    digest = hashlib.blake2b(f"{seed}:{task_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_by_task(frame: pl.DataFrame, *, val_fraction: float, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split examples into (train, validation) by task hash.

    Raises:
        ValueError: ``val_fraction`` is not in (0, 1).
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    is_val = frame.get_column("task_id").map_elements(
        lambda t: task_bucket(t, seed) < val_fraction, return_dtype=pl.Boolean
    )
    return frame.filter(~is_val), frame.filter(is_val)
