"""Training examples from the lake, and the split by task.

An example is one candidate with its task prompt and its binary label. Examples are the rows of a
lake slice (:mod:`trajectory_lake.slices`: ``candidates`` × ``outcomes`` × ``tasks`` at pinned table
versions); the versions are returned with the frame so a training run records exactly what it read.

The split is by task: a task's hash decides whether all of its candidates are in validation, so no
task is ever in both splits.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from trajectory_lake import Lake
from trajectory_lake.slices import SliceSpec, resolve_slice, scan_slice, task_bucket

__all__ = ["Examples", "examples_of", "load_examples", "split_by_task", "task_bucket"]


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
    """Labelled candidates of ``kind`` with their task prompts (a slice with no filters and no split).

    Args:
        lake: the lake to read.
        kind: candidate kind (``patch``, ``answer``, ``action``).
        label: outcome name; several evaluations of a candidate are averaged, ``> 0.5`` is positive.
        drop_empty: drop candidates whose content is blank.
        versions: pin table versions (default: the latest of each).

    Returns:
        :class:`Examples`. Candidates without a label or without a task prompt are left out.
    """
    spec = SliceSpec(name="examples", kind=kind, label=label, drop_empty=drop_empty, val_fraction=0.0,
                     versions=versions)
    manifest = resolve_slice(lake, spec)
    return Examples(frame=examples_of(scan_slice(lake, manifest).collect()), versions=manifest.versions)


def examples_of(rows: pl.DataFrame) -> pl.DataFrame:
    """Slice rows as training examples: a binary ``label`` column and a prompt on every row."""
    return rows.filter(pl.col("prompt").is_not_null()).with_columns(
        value=pl.col("label"), label=(pl.col("label") > 0.5).cast(pl.Float32), content=pl.col("content").fill_null("")
    )


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
