"""End-to-end jobs over the lake: train + log + register, and evaluate a registered model.

These are the functions behind ``harvest train`` and ``harvest evaluate``; they wire the pure parts
(data, trainer, metrics) to their IO (the lake, MLflow, the artefact directory).
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trajectory_lake import Lake
from value_model.config import TrainConfig
from value_model.data import load_examples, split_by_task
from value_model.inference import Scorer
from value_model.model import ValueModel
from value_model.tracking import RegisteredModel, log_and_register, resolve_model
from value_model.trainer import TrainResult, baselines, evaluate_frame, fit

__all__ = ["EvaluationReport", "TrainingReport", "evaluate_registered", "train_from_lake"]

logger = logging.getLogger(__name__)


@dataclass
class TrainingReport:
    """What ``harvest train`` did."""

    result: TrainResult
    registered: RegisteredModel
    model_dir: Path
    n_train: int
    n_val: int
    lineage: dict[str, Any] = field(default_factory=dict)


def train_from_lake(
    lake: Lake,
    config: TrainConfig,
    *,
    register: str | None,
    alias: str | None = "champion",
    tracking_uri: str | None = None,
    output_dir: str | Path | None = None,
) -> TrainingReport:
    """Train a value model on the lake's labelled candidates, log it to MLflow and register it.

    Raises:
        ValueError: the lake holds no labelled candidates of ``config.kind``.
    """
    examples = load_examples(lake, kind=config.kind, label=config.label, drop_empty=config.drop_empty)
    if examples.frame.is_empty():
        raise ValueError(
            f"the lake at {lake.uri} holds no {config.kind!r} candidates labelled {config.label!r} with a task prompt"
        )
    train, val = split_by_task(examples.frame, val_fraction=config.val_fraction, seed=config.split_seed)
    logger.info("training on %d examples (%d tasks), validating on %d (%d tasks)", len(train),
                train.get_column("task_id").n_unique(), len(val), val.get_column("task_id").n_unique())
    model, tokenizer = ValueModel.from_backbone(config.backbone, pooling=config.pooling)
    result = fit(model, tokenizer, train, val, config)
    lineage = {
        "lake": lake.uri,
        "table_versions": examples.versions,
        "n_train": len(train),
        "n_val": len(val),
        "train_tasks": train.get_column("task_id").n_unique(),
        "val_tasks": val.get_column("task_id").n_unique(),
        "split": {"by": "task_hash", "val_fraction": config.val_fraction, "seed": config.split_seed},
    }
    model_dir = Path(output_dir) if output_dir else Path(tempfile.mkdtemp(prefix="harvest-train-"))
    result.model.save(
        model_dir,
        result.tokenizer,
        max_length=config.max_length,
        calibration={"scale": result.calibration.scale, "bias": result.calibration.bias},
        backbone=config.backbone,
        kind=config.kind,
        label=config.label,
        lineage=lineage,
    )
    metrics = {f"val_{k}": v for k, v in result.metrics.items()}
    for name, values in result.baselines.items():
        metrics.update({f"baseline_{name}_{k}": v for k, v in values.items() if k in ("best_at_1", "gap_closed")})
    registered = log_and_register(
        model_dir=model_dir,
        params=config.to_dict(),
        metrics=metrics,
        lineage=lineage,
        register=register,
        alias=alias,
        uri=tracking_uri,
        artifacts={"validation.json": {"model": result.metrics, "baselines": result.baselines}},
    )
    return TrainingReport(result=result, registered=registered, model_dir=model_dir, n_train=len(train),
                          n_val=len(val), lineage=lineage)


@dataclass
class EvaluationReport:
    """Metrics of a model and the baselines on the held-out tasks of a lake."""

    model: dict[str, float]
    baselines: dict[str, dict[str, float]]
    n_examples: int


def evaluate_registered(
    lake: Lake, model: str, *, tracking_uri: str | None = None, val_fraction: float | None = None,
    split_seed: int | None = None,
) -> EvaluationReport:
    """Score the validation split of ``lake`` (the split the model was trained with, by default) with ``model``."""
    directory, _ = resolve_model(model, uri=tracking_uri)
    scorer = Scorer.from_directory(directory)
    split = (scorer.info.get("lineage") or {}).get("split") or {}
    examples = load_examples(lake, kind=scorer.info.get("kind", "patch"), label=scorer.info.get("label", "resolved"))
    _, val = split_by_task(
        examples.frame,
        val_fraction=val_fraction or split.get("val_fraction", 0.2),
        seed=split_seed if split_seed is not None else split.get("seed", 0),
    )
    if val.is_empty():
        raise ValueError("the validation split is empty")
    values = np.zeros(len(val))
    # One scoring call per task, as an agent would send it.
    for task_id, idx in val.with_row_index().group_by("task_id", maintain_order=True).agg("index").iter_rows():
        rows = val[idx]
        values[idx] = scorer.score(rows["prompt"][0], rows["content"].to_list()).values
    return EvaluationReport(model=evaluate_frame(val, values, scorer.calibration), baselines=baselines(val),
                            n_examples=len(val))
