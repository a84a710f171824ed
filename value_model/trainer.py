"""The training loop: pointwise BCE on (task prompt, candidate) → label.

``fit`` takes its dependencies as arguments (model, tokenizer, the two splits, the config) and
returns the trained model with its validation metrics; it does no IO besides an optional ``log``
callback, so it can be tested without MLflow or a lake.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import torch
from transformers import get_linear_schedule_with_warmup

from value_model.config import TrainConfig
from value_model.inference import Calibration, predict_values
from value_model.metrics import auroc, majority_vote_scores, patch_length_scores, selection_metrics
from value_model.model import ValueModel
from value_model.serialize import encode_pairs

__all__ = ["TrainResult", "evaluate_frame", "fit"]

logger = logging.getLogger(__name__)

LogFn = Callable[[dict[str, float], int], None]


@dataclass
class TrainResult:
    """A trained model and what was measured on the validation split."""

    model: ValueModel
    tokenizer: Any
    calibration: Calibration
    metrics: dict[str, float] = field(default_factory=dict)
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def evaluate_frame(frame: pl.DataFrame, values: np.ndarray, calibration: Calibration) -> dict[str, float]:
    """Selection, discrimination and calibration metrics of ``values`` on labelled examples."""
    labels = frame.get_column("label").to_numpy()
    tasks = frame.get_column("task_id").to_list()
    probs = calibration.apply(values)
    metrics = selection_metrics(tasks, labels, values)
    metrics["auroc"] = auroc(labels, values)
    metrics["brier"] = float(np.mean((probs - labels) ** 2))
    eps = 1e-7
    metrics["log_loss"] = float(-np.mean(labels * np.log(probs + eps) + (1 - labels) * np.log(1 - probs + eps)))
    return metrics


def baselines(frame: pl.DataFrame) -> dict[str, dict[str, float]]:
    """Content-only baselines on the same examples: majority vote, shortest patch."""
    tasks = frame.get_column("task_id").to_list()
    labels = frame.get_column("label").to_numpy()
    contents = frame.get_column("content").to_list()
    return {
        "majority_vote": selection_metrics(tasks, labels, majority_vote_scores(tasks, contents)),
        "shortest_patch": selection_metrics(tasks, labels, patch_length_scores(contents)),
    }


def fit(
    model: ValueModel,
    tokenizer: Any,  # noqa: ANN401 - a transformers tokenizer
    train: pl.DataFrame,
    val: pl.DataFrame,
    config: TrainConfig,
    *,
    log: LogFn | None = None,
) -> TrainResult:
    """Train ``model`` on ``train`` and measure it on ``val``.

    Args:
        model: a :class:`ValueModel` (its head may be fresh).
        tokenizer: the backbone's tokenizer.
        train: examples with ``prompt``, ``content``, ``label`` (and ``task_id``).
        val: held-out examples, from tasks not in ``train``.
        config: the recipe.
        log: called with (metrics, step) after each epoch and at the end.

    Returns:
        :class:`TrainResult` with validation metrics, baselines and the fitted calibration.

    Raises:
        ValueError: the training split is empty or the splits share a task.
    """
    if train.is_empty():
        raise ValueError("no training examples: ingest labelled candidates first (harvest ingest ...)")
    shared = set(train.get_column("task_id")) & set(val.get_column("task_id"))
    if shared:
        raise ValueError(f"{len(shared)} task(s) are in both splits, e.g. {sorted(shared)[:3]}")
    _seed_everything(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    if config.max_examples and len(train) > config.max_examples:
        train = train.sample(config.max_examples, seed=config.seed)
    prompts = train.get_column("prompt").to_list()
    contents = train.get_column("content").to_list()
    labels = torch.tensor(train.get_column("label").to_numpy(), dtype=torch.float32)

    steps_per_epoch = math.ceil(len(train) / config.batch_size)
    total_steps = max(1, math.ceil(steps_per_epoch * config.epochs))
    optimizer = torch.optim.AdamW(
        [
            {"params": model.backbone.parameters(), "lr": config.learning_rate},
            {"params": model.head.parameters(), "lr": config.head_learning_rate},
        ],
        weight_decay=config.weight_decay,
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    rng = random.Random(config.seed)
    started = time.monotonic()
    step = 0
    model.train()
    while step < total_steps:
        order = list(range(len(train)))
        rng.shuffle(order)
        running = 0.0
        for start in range(0, len(order), config.batch_size):
            if step >= total_steps:
                break
            idx = order[start : start + config.batch_size]
            encoded = encode_pairs(tokenizer, [prompts[i] for i in idx], [contents[i] for i in idx],
                                   max_length=config.max_length)
            values = model(**encoded.inputs)
            loss = loss_fn(values, labels[idx])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            running += loss.item()
            step += 1
            if step % 10 == 0:
                logger.info("step %d/%d loss %.4f (%.0fs)", step, total_steps, loss.item(), time.monotonic() - started)
        if log:
            log({"train_loss": running / max(1, math.ceil(len(order) / config.batch_size))}, step)
        model.train()

    calibration = Calibration()
    metrics: dict[str, float] = {}
    if not val.is_empty():
        values, truncated = predict_values(
            model, tokenizer, val.get_column("prompt").to_list(), val.get_column("content").to_list(),
            max_length=config.max_length, batch_size=config.eval_batch_size,
        )
        calibration = Calibration.fit(values, val.get_column("label").to_numpy())
        metrics = evaluate_frame(val, values, calibration)
        metrics["truncated_fraction"] = float(np.mean(truncated)) if truncated else 0.0
    seconds = time.monotonic() - started
    metrics["train_seconds"] = seconds
    if log:
        log({f"val_{k}": v for k, v in metrics.items() if not math.isnan(v)}, step)
    return TrainResult(model=model, tokenizer=tokenizer, calibration=calibration, metrics=metrics,
                       baselines=baselines(val) if not val.is_empty() else {}, seconds=seconds)
