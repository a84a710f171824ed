"""A deterministic backend for engine and API tests: no model, no IO."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from reranker_service.backends.base import Backend, BackendInfo, Forwarded, Item, Prepared, ScoreInput

__all__ = ["DummyBackend"]


def _unit(text: str) -> float:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big") / 2**32


class DummyBackend(Backend):
    """Scores a candidate by a hash of (prompt, candidate): stable, spread over (-3, 3).

    A candidate costs one token per 4 characters; an 8-dimensional embedding is a hash of the
    candidate alone, so equal candidates of different tasks are each other's nearest neighbours.

    Args:
        name: the model name it reports.
        version: the version it reports (part of score-cache keys).
    """

    embeds = True

    def __init__(self, name: str = "dummy", *, version: str = "0") -> None:
        self.info = BackendInfo(
            name=name,
            version=version,
            uri=f"dummy:{name}",
            capabilities={"calibrated": False},
            revision=f"dummy:{name}:{version}",
        )
        self.calls = 0  # forward calls
        self.items_scored = 0

    def prepare(self, query: ScoreInput) -> Prepared:
        items = [
            Item(n_tokens=max(1, (len(query.prompt) + len(c)) // 4), payload=(query.prompt, c))
            for c in query.candidates
        ]
        return Prepared(items=items, truncated=[False] * len(items))

    def forward(self, items: Sequence[Item], *, embed: bool = False) -> Forwarded:
        self.calls += 1
        self.items_scored += len(items)
        values = np.array([_unit(f"{p}\0{c}") * 6 - 3 for p, c in (item.payload for item in items)])
        embeddings = None
        if embed:
            embeddings = np.array(
                [[_unit(f"{j}\0{c}") - 0.5 for j in range(8)] for _, c in (item.payload for item in items)],
                dtype=np.float32,
            )
        return Forwarded(values=values, embeddings=embeddings)
