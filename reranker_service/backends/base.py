"""The backend ABC: a model that scores the candidates of one task."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from value_model import ScoredBatch

__all__ = ["Backend", "BackendInfo"]


@dataclass(frozen=True)
class BackendInfo:
    """What a backend serves, reported by ``/v1/models`` and in every response.

    Attributes:
        name: the model's name (the registered name, or the directory name).
        version: registry version, when known.
        uri: what it was loaded from.
        capabilities: what the backend can do (e.g. ``{"calibrated": True, "max_length": 320}``).
    """

    name: str
    version: str | None
    uri: str
    capabilities: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """Scores candidates. Implementations are synchronous and called from one worker thread."""

    info: BackendInfo

    @abstractmethod
    def score(self, prompt: str, candidates: Sequence[str]) -> ScoredBatch:
        """Raw values, calibrated scores and truncation flags, one per candidate."""
