"""The production backend: a Harvest value model loaded from the MLflow registry or a directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reranker_service.backends.base import Backend, BackendInfo
from value_model import ScoredBatch, Scorer, resolve_model

__all__ = ["ValueModelBackend"]


class ValueModelBackend(Backend):
    """Wraps :class:`value_model.Scorer`."""

    def __init__(self, scorer: Scorer, info: BackendInfo) -> None:
        self.scorer = scorer
        self.info = info

    @classmethod
    def load(cls, model: str, *, tracking_uri: str | None = None, device: str = "cpu") -> ValueModelBackend:
        """Load ``models:/NAME@ALIAS``, ``models:/NAME/VERSION``, ``runs:/...`` or a local directory.

        Raises:
            value_model.ModelNotFoundError: nothing is found under that reference.
        """
        directory, facts = resolve_model(model, uri=tracking_uri)
        scorer = Scorer.from_directory(directory, device=device)
        info = BackendInfo(
            name=facts.get("name") or Path(model).name,
            version=facts.get("version"),
            uri=model,
            capabilities={"calibrated": True, "max_length": scorer.max_length, "pooling": scorer.model.pooling,
                          "kind": scorer.info.get("kind", "patch")},
        )
        return cls(scorer, info)

    def score(self, prompt: str, candidates: Sequence[str]) -> ScoredBatch:
        return self.scorer.score(prompt, candidates)
