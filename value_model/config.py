"""Training configuration: one frozen dataclass, loadable from TOML, validated once.

``configs/*.toml`` hold named recipes; command-line flags are generated from the fields below and
override the file. Each option is documented once, in ``metadata["help"]``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

__all__ = ["TrainConfig", "load_config"]

Objective = Literal["bce"]
Pooling = Literal["auto", "mean", "last", "cls"]


def _opt(default: Any, help: str) -> Any:  # noqa: ANN401, A002 - dataclass field factory
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How a value model is trained (see ``configs/cpu-minilm.toml`` for the CPU default)."""

    backbone: str = _opt("minilm", "Local Hugging Face model directory, or 'minilm' for the packaged all-MiniLM-L6-v2.")
    pooling: Pooling = _opt("auto", "Sequence pooling: auto (mean for encoders, last token for decoders), mean, last, cls.")
    max_length: int = _opt(256, "Token budget per example (task prompt + candidate).")
    kind: str = _opt("patch", "Candidate kind to train on: patch, answer or action.")
    label: str = _opt("resolved", "Outcome name used as the binary label (value > 0.5 is positive).")
    objective: Objective = _opt("bce", "Training objective: pointwise BCE on the label.")
    drop_empty: bool = _opt(True, "Drop empty candidates (an empty patch is not a candidate worth ranking).")
    epochs: float = _opt(2.0, "Passes over the training split (fractions allowed).")
    batch_size: int = _opt(16, "Examples per optimizer step.")
    learning_rate: float = _opt(3e-5, "Peak learning rate of the backbone.")
    head_learning_rate: float = _opt(1e-3, "Learning rate of the scalar head.")
    weight_decay: float = _opt(0.01, "AdamW weight decay.")
    warmup_ratio: float = _opt(0.1, "Fraction of steps with linear warm-up.")
    val_fraction: float = _opt(0.2, "Fraction of tasks held out for validation (split by task hash).")
    split_seed: int = _opt(0, "Seed of the task-hash split.")
    seed: int = _opt(0, "Seed of initialisation and shuffling.")
    eval_batch_size: int = _opt(32, "Examples per forward pass when scoring.")
    max_examples: int = _opt(0, "Cap on training examples (0 = all), for smoke runs.")
    threads: int = _opt(0, "torch CPU threads (0 = torch's default).")

    def __post_init__(self) -> None:
        problems = []
        if self.max_length < 16:
            problems.append(f"max_length must be >= 16, got {self.max_length}")
        if self.kind not in ("patch", "answer", "action"):
            problems.append(f"kind must be patch, answer or action, got {self.kind!r}")
        if self.pooling not in ("auto", "mean", "last", "cls"):
            problems.append(f"pooling must be auto, mean, last or cls, got {self.pooling!r}")
        if self.objective != "bce":
            problems.append(f"objective must be 'bce', got {self.objective!r}")
        if self.epochs <= 0:
            problems.append(f"epochs must be > 0, got {self.epochs}")
        if self.batch_size < 1 or self.eval_batch_size < 1:
            problems.append("batch_size and eval_batch_size must be >= 1")
        if not 0 < self.val_fraction < 1:
            problems.append(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.learning_rate <= 0 or self.head_learning_rate <= 0:
            problems.append("learning rates must be > 0")
        if not 0 <= self.warmup_ratio < 1:
            problems.append(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_examples < 0 or self.threads < 0:
            problems.append("max_examples and threads must be >= 0")
        if problems:
            raise ValueError("invalid TrainConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """The config as plain values (logged as MLflow params)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def updated(self, **changes: Any) -> TrainConfig:  # noqa: ANN401
        """A copy with ``changes`` applied (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_config(path: str | Path | None = None, **overrides: Any) -> TrainConfig:  # noqa: ANN401
    """A :class:`TrainConfig` from a TOML file (its ``[train]`` table or top level), then ``overrides``.

    Raises:
        ValueError: unknown keys in the file, or invalid values.
        FileNotFoundError: ``path`` does not exist.

    Examples:
        >>> load_config(None, epochs=1).epochs
        1
    """
    values: dict[str, Any] = {}
    if path is not None:
        data = tomllib.loads(Path(path).read_text())
        values = dict(data.get("train", data))
        known = {f.name for f in fields(TrainConfig)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: unknown training options {unknown}; known: {sorted(known)}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**values)
