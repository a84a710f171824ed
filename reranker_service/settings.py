"""Service settings: one frozen dataclass, read from ``HARVEST_*`` environment variables in one place.

Every field ``name`` is read from ``HARVEST_<NAME>`` (``HARVEST_MAX_QUEUE`` → ``max_queue``), except
``tracking_uri`` (``MLFLOW_TRACKING_URI``, MLflow's own variable). Lists (``api_keys``) are
comma-separated; booleans are ``1/true/yes/on`` or ``0/false/no/off``; an empty variable keeps the
default. ``harvest serve --help`` lists the same fields as flags.

Limits and what exceeding them answers:

| setting | default | over it |
|---|---|---|
| ``max_request_bytes`` | 8 MiB | 413 before the body is read |
| ``max_candidates`` | 256 | 413 |
| ``max_request_tokens`` | 131072 (after truncation) | 413 |
| ``max_queue`` | 64 requests waiting | 429 + ``Retry-After`` at once |
| the model's token budget | the artefact's ``max_length`` | cut + a warning (422 if ``truncate=false``) |
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

__all__ = ["Settings", "load_api_keys"]

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
# reranker_service.backends._cpu_linear.CPU_LINEAR_KINDS: not imported, so that settings stay free of torch
_CPU_LINEAR = ("auto", "torch", "onednn", "int8", "bf16")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How the reranker service runs."""

    model: str = field(
        default="models:/harvest-value@champion", metadata={"help": "Model URI or local path."}
    )
    host: str = field(default="127.0.0.1", metadata={"help": "Interface to bind."})
    port: int = field(default=8765, metadata={"help": "Port to bind."})
    device: str = field(default="cpu", metadata={"help": "Torch device of the model (cpu, cuda, cuda:1)."})
    cpu_linear: str = field(
        default="auto",
        metadata={
            "help": "Kernels of the model's Linear layers on a CPU: auto (= onednn on CPU, torch elsewhere), "
            "onednn (float32 with weights prepacked for oneDNN: same values up to float rounding, 1.3-2x "
            "faster on a 2-core AMD EPYC), torch (plain nn.Linear), or the approximate int8 (dynamic "
            "quantization) and bf16, which change values and can change rankings (opt-in)."
        },
    )
    max_candidates: int = field(default=256, metadata={"help": "Most candidates one request may carry."})
    max_request_bytes: int = field(default=8 << 20, metadata={"help": "Largest request body accepted."})
    max_request_tokens: int = field(
        default=131072,
        metadata={
            "help": "Most tokens one request may carry, counted after truncation to the model's budget."
        },
    )
    max_queue: int = field(default=64, metadata={"help": "Requests allowed to wait; more get 429."})
    max_batch_tokens: int = field(default=16384, metadata={"help": "Token budget of one model batch."})
    max_batch_size: int = field(default=64, metadata={"help": "Most candidates in one model batch."})
    max_wait_ms: float = field(
        default=0.0,
        metadata={
            "help": "How long the batcher waits for more requests when "
            "the model is idle (0: never; requests that arrive while "
            "the model works are batched anyway)."
        },
    )
    cache_size: int = field(
        default=65536,
        metadata={"help": "Score-cache entries (0: off); they hold at most 256 MiB, embeddings included."},
    )
    tokenizer_workers: int = field(default=1, metadata={"help": "Threads that tokenize requests."})
    api_keys: tuple[str, ...] = field(
        default=(), metadata={"help": "Bearer tokens accepted (empty: no auth)."}
    )
    api_keys_file: str | None = field(
        default=None, metadata={"help": "File with more bearer tokens, one a line."}
    )
    tracking_uri: str | None = field(default=None, metadata={"help": "MLflow tracking URI."})
    reload_poll_s: float = field(
        default=0.0,
        metadata={
            "help": "Re-resolve a models:/NAME@ALIAS this often and "
            "swap when it moved (0: only POST /admin/reload)."
        },
    )
    lake: str | None = field(
        default=None,
        metadata={"help": "Lake URI: feedback is written there, and the neighbour index is built from it."},
    )
    feedback_window: int = field(default=10000, metadata={"help": "Served requests remembered for feedback."})
    feedback_store: str | None = field(
        default=None,
        metadata={
            "help": "SQLite file that keeps the last feedback_window served requests so feedback resolves "
            "after a restart (default with a lake: served-requests.sqlite in HARVEST_HOME; 'memory': "
            "memory only)."
        },
    )
    neighbors: bool = field(
        default=False,
        metadata={"help": "Build a faiss index of the lake's candidates at start-up, for return_neighbors."},
    )
    index_version: int | None = field(
        default=None,
        metadata={
            "help": "Pin the index to this version of the candidates table (default: the latest at start-up)."
        },
    )
    index_dir: str | None = field(default=None, metadata={"help": "Keep built indexes here and reuse them."})
    neighbors_k: int = field(
        default=5, metadata={"help": "Neighbours returned when return_neighbors is true."}
    )
    drain_s: float = field(
        default=0.0,
        metadata={
            "help": "On SIGTERM or SIGINT, answer /ready with 503 for this long first while still serving "
            "every request, so load balancers stop routing here before the port closes; then the graceful "
            "shutdown (shutdown_timeout_s). A second signal skips the rest (0: no delay)."
        },
    )
    shutdown_timeout_s: float = field(
        default=30.0,
        metadata={
            "help": "On SIGTERM, how long requests in flight may still run; then the engine stops and "
            "those it holds get 503 (0: wait forever)."
        },
    )

    def __post_init__(self) -> None:
        problems = []
        if not self.model:
            problems.append("model must name a model URI or path")
        if not 0 < self.port < 65536:
            problems.append(f"port must be in 1..65535, got {self.port}")
        if self.cpu_linear not in _CPU_LINEAR:
            problems.append(f"cpu_linear must be one of {', '.join(_CPU_LINEAR)}, got {self.cpu_linear!r}")
        elif self.cpu_linear not in ("auto", "torch") and not self.device.startswith("cpu"):
            problems.append(
                f"cpu_linear={self.cpu_linear} is for CPU inference, but device is {self.device!r}"
            )
        for name in (
            "max_candidates",
            "max_request_bytes",
            "max_request_tokens",
            "max_queue",
            "max_batch_tokens",
            "max_batch_size",
            "tokenizer_workers",
            "feedback_window",
            "neighbors_k",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("max_wait_ms", "reload_poll_s", "cache_size", "drain_s", "shutdown_timeout_s"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        if not isinstance(self.api_keys, tuple) or not all(isinstance(k, str) and k for k in self.api_keys):
            problems.append("api_keys must be a tuple of non-empty strings")
        if self.neighbors and not self.lake:
            problems.append("neighbors needs a lake to build the index from (set lake / HARVEST_LAKE)")
        if self.index_version is not None and self.index_version < 0:
            problems.append(f"index_version must be >= 0, got {self.index_version}")
        if problems:
            raise ValueError("invalid Settings: " + "; ".join(problems))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:  # noqa: ANN401
        """Settings from ``HARVEST_*`` variables (``env`` defaults to ``os.environ``), then ``overrides``.

        Overrides given as strings (command-line flags) are parsed like variables; ``None`` is ignored.

        Raises:
            ValueError: a value does not parse or is out of range; the message names the variable.
        """
        env = os.environ if env is None else env
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        origin: dict[str, str] = {}
        for f in fields(cls):
            var = "MLFLOW_TRACKING_URI" if f.name == "tracking_uri" else f"HARVEST_{f.name.upper()}"
            raw = env.get(var)
            if raw is not None and raw.strip():
                values[f.name] = _parse(hints[f.name], raw, var)
                origin[f.name] = var
        for name, value in overrides.items():
            if value is None:
                continue
            if name not in hints:
                raise ValueError(f"unknown setting {name!r}")
            values[name] = (
                _parse(hints[name], value, f"--{name.replace('_', '-')}") if isinstance(value, str) else value
            )
            origin.pop(name, None)
        try:
            return cls(**values)
        except ValueError as exc:
            named = [f"{var}={env[var]!r}" for name, var in origin.items() if name in str(exc)]
            raise ValueError(f"{exc}" + (f" (from {', '.join(named)})" if named else "")) from None

    def updated(self, **changes: Any) -> Settings:  # noqa: ANN401
        """A copy with ``changes`` (``None`` ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _parse(hint: Any, raw: str, where: str) -> Any:  # noqa: ANN401 - a field's type and value
    """Parse ``raw`` as the field type ``hint``; ``where`` names the source in the error."""
    kind = hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None
        kind = next(a for a in typing.get_args(hint) if a is not type(None))
    text = raw.strip()
    try:
        if typing.get_origin(kind) is tuple:
            return tuple(k.strip() for k in text.split(",") if k.strip())
        if kind is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        name = getattr(kind, "__name__", str(kind))
        raise ValueError(f"{where}={raw!r} is not a valid {name}") from None


def load_api_keys(settings: Settings) -> tuple[str, ...]:
    """``settings.api_keys`` plus the keys in ``settings.api_keys_file`` (one a line, ``#`` comments).

    Raises:
        ValueError: the file cannot be read.
    """
    keys = list(settings.api_keys)
    if settings.api_keys_file:
        path = Path(settings.api_keys_file).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ValueError(f"api_keys_file {str(path)!r} cannot be read: {exc.strerror}") from None
        keys.extend(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))
    return tuple(dict.fromkeys(keys))
