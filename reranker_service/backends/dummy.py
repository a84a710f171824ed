"""A deterministic backend for engine and API tests: no model, no IO."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from reranker_service.backends.base import Backend, BackendInfo
from value_model import ScoredBatch

__all__ = ["DummyBackend"]


class DummyBackend(Backend):
    """Scores a candidate by a hash of (prompt, candidate): stable, spread over (-3, 3)."""

    def __init__(self, name: str = "dummy") -> None:
        self.info = BackendInfo(name=name, version="0", uri=f"dummy:{name}", capabilities={"calibrated": False})
        self.calls = 0

    def score(self, prompt: str, candidates: Sequence[str]) -> ScoredBatch:
        self.calls += 1
        values = np.array(
            [int.from_bytes(hashlib.blake2b(f"{prompt}\0{c}".encode(), digest_size=4).digest(), "big") / 2**32 * 6 - 3
             for c in candidates]
        )
        return ScoredBatch(values=values, scores=1 / (1 + np.exp(-values)), truncated=[False] * len(candidates))
