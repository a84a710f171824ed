"""End-to-end jobs over the lake: train + log + register, and evaluate a registered model.

These are the functions behind ``harvest train`` and ``harvest evaluate``; they wire the pure parts
(data, trainer, metrics) to their IO (the lake, MLflow, the artefact directory).
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from trajectory_lake import Lake
from trajectory_lake.slices import SliceSpec, resolve_slice, scan_slice
from value_model.config import TrainConfig
from value_model.data import examples_of
from value_model.inference import Scorer
from value_model.model import ValueModel
from value_model.tracking import RegisteredModel, log_and_register, resolve_model
from value_model.trainer import TrainResult, baselines, evaluate_frame, fit

__all__ = ["EvaluationReport", "TrainingReport", "default_slice", "evaluate_registered", "train_from_lake"]

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


def default_slice(config: TrainConfig) -> SliceSpec:
    """The slice a config trains on when no slice spec is given: every labelled candidate of its kind."""
    return SliceSpec(name=f"all-{config.kind}-{config.label}", kind=config.kind, label=config.label,
                     drop_empty=config.drop_empty, val_fraction=config.val_fraction, split_seed=config.split_seed)


def train_from_lake(
    lake: Lake,
    config: TrainConfig,
    *,
    register: str | None,
    alias: str | None = "champion",
    tracking_uri: str | None = None,
    output_dir: str | Path | None = None,
    slice_spec: SliceSpec | None = None,
) -> TrainingReport:
    """Train a value model on a lake slice, log it to MLflow and register it.

    The slice (``slice_spec``, else :func:`default_slice`) is resolved against pinned table versions
    and saved in the lake, so ``vacuum`` keeps what this model was trained on; its manifest is logged
    with the run and stored in the artefact.

    Raises:
        ValueError: the slice holds no labelled candidates.
    """
    spec = slice_spec or default_slice(config)
    manifest = resolve_slice(lake, spec, save=True)
    rows = examples_of(scan_slice(lake, manifest).collect())
    if rows.is_empty():
        raise ValueError(
            f"the lake at {lake.uri} holds no {spec.kind!r} candidates labelled {spec.label!r} with a task prompt"
            + (f" in slice {spec.name!r}" if slice_spec else "")
        )
    train, val = rows.filter(pl.col("split") == "train"), rows.filter(pl.col("split") == "val")
    logger.info("training on %d examples (%d tasks), validating on %d (%d tasks)", len(train),
                train.get_column("task_id").n_unique(), len(val), val.get_column("task_id").n_unique())
    model, tokenizer = ValueModel.from_backbone(config.backbone, pooling=config.pooling)
    result = fit(model, tokenizer, train, val, config)
    lineage = {
        "lake": lake.uri,
        "table_versions": manifest.versions,
        "slice_id": manifest.slice_id,
        "slice_name": spec.name,
        "content_hash": manifest.content_hash,
        "n_train": len(train),
        "n_val": len(val),
        "train_tasks": train.get_column("task_id").n_unique(),
        "val_tasks": val.get_column("task_id").n_unique(),
    }
    model_dir = Path(output_dir) if output_dir else Path(tempfile.mkdtemp(prefix="harvest-train-"))
    result.model.save(
        model_dir,
        result.tokenizer,
        max_length=config.max_length,
        calibration={"scale": result.calibration.scale, "bias": result.calibration.bias},
        backbone=config.backbone,
        kind=spec.kind,
        label=spec.label,
        lineage=lineage,
        slice_manifest=json.loads(manifest.to_json()),
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
        artifacts={"validation.json": {"model": result.metrics, "baselines": result.baselines},
                   "slice_manifest.json": json.loads(manifest.to_json())},
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
    lake: Lake, model: str, *, tracking_uri: str | None = None, slice_spec: SliceSpec | None = None,
) -> EvaluationReport:
    """Score the validation split of a slice with ``model``: by default the slice the model was trained
    on, re-resolved against the lake's current versions (so new candidates of held-out tasks count)."""
    directory, _ = resolve_model(model, uri=tracking_uri)
    scorer = Scorer.from_directory(directory)
    if slice_spec is None:
        trained_on = scorer.info.get("slice_manifest")
        if not trained_on:
            raise ValueError(f"{model} records no training slice; pass a slice spec to evaluate on")
        slice_spec = SliceSpec.from_dict({**trained_on["spec"], "versions": None, "as_of": None})
    manifest = resolve_slice(lake, slice_spec)
    val = examples_of(scan_slice(lake, manifest, split="val").collect())
    if val.is_empty():
        raise ValueError(f"the validation split of slice {slice_spec.name!r} is empty")
    values = np.zeros(len(val))
    # One scoring call per task, as an agent would send it.
    for _, idx in val.with_row_index().group_by("task_id", maintain_order=True).agg("index").iter_rows():
        rows = val[idx]
        values[idx] = scorer.score(rows["prompt"][0], rows["content"].to_list()).values
    return EvaluationReport(model=evaluate_frame(val, values, scorer.calibration), baselines=baselines(val),
                            n_examples=len(val))
