"""Service settings: one frozen dataclass, read from ``HARVEST_*`` environment variables in one place.

| variable | field | default |
|---|---|---|
| ``HARVEST_MODEL`` | model | ``models:/harvest-value@champion`` |
| ``HARVEST_HOST`` / ``HARVEST_PORT`` | host / port | ``127.0.0.1`` / ``8765`` |
| ``HARVEST_MAX_CANDIDATES`` | max_candidates | 256 |
| ``HARVEST_MAX_REQUEST_BYTES`` | max_request_bytes | 8 MiB |
| ``HARVEST_MAX_QUEUE`` | max_queue | 64 requests waiting |
| ``HARVEST_API_KEYS`` | api_keys | none (comma-separated bearer tokens; auth is off when empty) |
| ``MLFLOW_TRACKING_URI`` | tracking_uri | the local Harvest store |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Settings"]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How the reranker service runs."""

    model: str = field(default="models:/harvest-value@champion", metadata={"help": "Model URI or local path."})
    host: str = field(default="127.0.0.1", metadata={"help": "Interface to bind."})
    port: int = field(default=8765, metadata={"help": "Port to bind."})
    max_candidates: int = field(default=256, metadata={"help": "Most candidates one request may carry."})
    max_request_bytes: int = field(default=8 << 20, metadata={"help": "Largest request body accepted."})
    max_queue: int = field(default=64, metadata={"help": "Requests allowed to wait; more get 429."})
    api_keys: tuple[str, ...] = field(default=(), metadata={"help": "Bearer tokens accepted (empty: no auth)."})
    tracking_uri: str | None = field(default=None, metadata={"help": "MLflow tracking URI."})

    def __post_init__(self) -> None:
        problems = []
        if not self.model:
            problems.append("model must name a model URI or path")
        if not 0 < self.port < 65536:
            problems.append(f"port must be in 1..65535, got {self.port}")
        for name in ("max_candidates", "max_request_bytes", "max_queue"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if not isinstance(self.api_keys, tuple) or not all(isinstance(k, str) and k for k in self.api_keys):
            problems.append("api_keys must be a tuple of non-empty strings")
        if problems:
            raise ValueError("invalid Settings: " + "; ".join(problems))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:  # noqa: ANN401
        """Settings from ``HARVEST_*`` variables (``env`` defaults to ``os.environ``), then ``overrides``."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, cast in (("model", str), ("host", str), ("port", int), ("max_candidates", int),
                           ("max_request_bytes", int), ("max_queue", int)):
            raw = env.get(f"HARVEST_{name.upper()}")
            if raw:
                try:
                    values[name] = cast(raw)
                except ValueError as exc:
                    raise ValueError(f"HARVEST_{name.upper()}={raw!r} is not a valid {cast.__name__}") from exc
        if env.get("HARVEST_API_KEYS"):
            values["api_keys"] = tuple(k.strip() for k in env["HARVEST_API_KEYS"].split(",") if k.strip())
        if env.get("MLFLOW_TRACKING_URI"):
            values["tracking_uri"] = env["MLFLOW_TRACKING_URI"]
        from_env = {name: f"HARVEST_{name.upper()}" for name in values}
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValueError as exc:
            named = [f"{var}={env[var]!r}" for name, var in from_env.items()
                     if name in str(exc) and name not in overrides and var in env]
            raise ValueError(f"{exc}" + (f" (from {', '.join(named)})" if named else "")) from None

    def updated(self, **changes: Any) -> Settings:  # noqa: ANN401
        """A copy with ``changes`` (``None`` ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
