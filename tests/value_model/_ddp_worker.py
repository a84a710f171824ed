"""Trains the two recipes of ``test_distributed`` and writes what it compares.

Run under ``torchrun`` (``python -m torch.distributed.run --standalone --nproc_per_node 2 <this file> ...``),
where each recipe trains twice, replicated (DDP) and sharded (FSDP), or called in-process as the
single-process reference; either way rank 0 writes ``<out>/<name>-<parallel>.json``. Under ``torchrun``
each recipe is then trained again with checkpoints, stopped after its first step and resumed:
``<out>/<name>-<parallel>-resumed.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import torch

from trajectory_lake import Lake
from value_model import trainer
from value_model._runtime import Runtime, distributed_session
from value_model.config import TrainConfig
from value_model.data import load_action_examples, load_examples
from value_model.model import ValueModel
from value_model.trainer import TrainResult, fit

EMPTY = pl.DataFrame(schema={"task_id": pl.String, "prompt": pl.String, "content": pl.String, "label": pl.Float32})


def _lite(lake: Lake) -> tuple[pl.DataFrame, pl.DataFrame, None]:
    frame = load_examples(lake).frame.sort("task_id", "candidate_id")
    tasks = sorted(frame["task_id"].unique())[:8]
    frame = frame.filter(pl.col("task_id").is_in(tasks))
    return frame.filter(pl.col("task_id").is_in(tasks[:6])), frame.filter(pl.col("task_id").is_in(tasks[6:])), None


def _actions(lake: Lake) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    examples = load_action_examples(lake, trajectory_kind="answer", label="resolved")
    frame = examples.frame
    held_out = sorted(frame["task_id"].unique())[0]
    return frame.filter(pl.col("task_id") != held_out), frame.filter(pl.col("task_id") == held_out), examples.steps


RECIPES = {
    # trajectory-level, grouped batches: pairs only meet inside a micro-batch, on every rank
    "patch": (_lite, {"objective": "bce=1,pairwise=0.5", "max_length": 48, "batch_size": 8, "epochs": 1.0}),
    # step-level, TD(0.5) targets bootstrapped from the model's values (sharded scoring), LoRA +
    # checkpointing, with the production recipe's LoRA dropout: each micro-batch draws the same masks on
    # any rank
    "action": (_actions, {"kind": "action", "trajectory_kind": "answer", "objective": "bce=1,td=1", "td_lambda": 0.5,
                          "gamma": 0.9, "max_length": 48, "batch_size": 8, "epochs": 1.0, "max_examples": 24,
                          "lora_rank": 4, "lora_dropout": 0.05, "gradient_checkpointing": True}),
}


class Crash(Exception):
    """Stands for the job dying right after it wrote a checkpoint."""


def run(name: str, lake: Path, backbone: Path, out: Path, *, grad_accum_steps: int, runtime: Runtime,
        parallel: str = "ddp", checkpoint_dir: Path | None = None, resume: Path | None = None) -> None:
    """Train recipe ``name`` (from checkpoint ``resume`` if given) and write what the tests compare; with
    ``checkpoint_dir``, stop after the first step's checkpoint, resume in a fresh model and write
    ``<name>-<parallel>-resumed.json``."""
    load, options = RECIPES[name]
    train, val, steps = load(Lake(lake))
    config = TrainConfig(backbone=str(backbone), grad_accum_steps=grad_accum_steps, learning_rate=1e-3,
                         warmup_ratio=0.0, device="cpu", parallel=parallel, **options)

    def train_once(config: TrainConfig, **kwargs: Any) -> TrainResult:
        model, tokenizer = ValueModel.from_backbone(config.backbone, seed=config.seed)
        return fit(model, tokenizer, train, val, config, steps=steps, runtime=runtime, **kwargs)

    suffix = ""
    if checkpoint_dir is None:
        result = train_once(config, resume=resume)
    else:
        config = config.updated(checkpoint_dir=str(checkpoint_dir / f"{name}-{parallel}"),
                                checkpoint_every_steps=1)
        save = trainer.save_checkpoint

        def save_then_crash(*args: Any, **kwargs: Any) -> Path:
            save(*args, **kwargs)
            raise Crash

        trainer.save_checkpoint = save_then_crash  # type: ignore[assignment]
        try:
            train_once(config)
        except Crash:
            pass
        finally:
            trainer.save_checkpoint = save
        result = train_once(config, resume="latest")
        assert result.resumed_from is not None and result.resumed_from.endswith("step-00000001")
        suffix = "-resumed"
    if runtime.is_main:
        backbone_norm = sum(float(p.detach().double().pow(2).sum()) for p in result.model.backbone.parameters())
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}-{parallel}{suffix}.json").write_text(json.dumps({
            "world_size": runtime.world_size,
            "head": result.model.head.weight.detach().flatten().tolist() + result.model.head.bias.detach().tolist(),
            "backbone_norm": backbone_norm,
            "step_losses": result.step_losses,
            "metrics": {k: v for k, v in result.metrics.items() if k != "train_seconds"},
            "val_values": result.val_values.tolist(),
        }))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lite-lake", type=Path, required=True)
    parser.add_argument("--agent-lake", type=Path, required=True)
    parser.add_argument("--backbone", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    with distributed_session(device="cpu") as runtime:
        for parallel in ("ddp", "fsdp"):
            run("patch", args.lite_lake, args.backbone, args.out, grad_accum_steps=1, runtime=runtime,
                parallel=parallel)
            run("action", args.agent_lake, args.backbone, args.out, grad_accum_steps=1, runtime=runtime,
                parallel=parallel)
            for name, lake in (("patch", args.lite_lake), ("action", args.agent_lake)):
                run(name, lake, args.backbone, args.out, grad_accum_steps=1, runtime=runtime,
                    parallel=parallel, checkpoint_dir=args.out / "checkpoints")


if __name__ == "__main__":
    main(sys.argv[1:])
