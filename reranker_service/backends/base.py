"""The backend ABC: a model that turns candidates into items, and items into raw values.

A backend works in two steps so that the engine can batch across requests:

1. :meth:`Backend.prepare` (tokenizer thread, one request): serialize and tokenize one task's
   candidates into :class:`Item` s, each knowing its token cost, and which items share a prefix;
2. :meth:`Backend.forward` (model thread, any mix of requests): raw values (and, when asked, the
   pooled embeddings) of a batch of items, under ``torch.inference_mode``.

:meth:`Backend.score` chains both for one request, without the engine (tests, scripts).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from value_model import ScoredBatch

__all__ = ["Backend", "BackendInfo", "Forwarded", "Item", "Prepared", "ScoreInput"]


@dataclass(frozen=True)
class BackendInfo:
    """What a backend serves, reported by ``/v1/models`` and in every response.

    Attributes:
        name: the model's name (the registered name, or the directory name).
        version: registry version, when known.
        uri: what it was loaded from.
        capabilities: what the backend can do (e.g. ``{"calibrated": True, "max_length": 320}``).
        revision: identifies the weights exactly (the registry version, else a hash of the artefact);
            score-cache keys and the neighbour index are tied to it.
    """

    name: str
    version: str | None
    uri: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    revision: str = ""

    @property
    def label(self) -> str:
        """``name/version`` (or ``name``), as responses name the model."""
        return f"{self.name}/{self.version}" if self.version else self.name

    @property
    def cache_revision(self) -> str:
        """What score-cache keys carry: the revision, else ``uri@version``."""
        return self.revision or f"{self.uri}@{self.version}"


@dataclass(frozen=True, kw_only=True)
class ScoreInput:
    """One task's candidates and how to read them.

    Attributes:
        prompt: the task statement.
        candidates: candidate texts.
        context: trajectory steps before the candidates (``role``, ``content``, ``tool_calls``, ...).
        max_tokens_per_candidate: cut each candidate to this many tokens first (``None``: the
            model's own budget decides).
        truncation_side: which end of a candidate that cut keeps: ``right`` cuts the end (keeps the
            head), ``left`` cuts the start (keeps the tail).
        truncate: when ``False``, an input that does not fit the model is an error
            (:class:`~reranker_service.exceptions.InputTooLongError`), not silently cut.
    """

    prompt: str
    candidates: tuple[str, ...]
    context: tuple[Mapping[str, Any], ...] = ()
    max_tokens_per_candidate: int | None = None
    truncation_side: Literal["left", "right"] = "right"
    truncate: bool = True

    def options(self) -> tuple[object, ...]:
        """The fields besides the texts that change a score (part of score-cache keys)."""
        return (self.max_tokens_per_candidate, self.truncation_side)


@dataclass(slots=True)
class Item:
    """One candidate ready for the model.

    Attributes:
        n_tokens: the sequence's length in tokens.
        payload: backend-specific (token ids for model backends, texts for the dummy).
        group: items with the same group share their first ``prefix_len`` tokens exactly, so a
            decoder computes that prefix once (``None``: no sharing).
        prefix_len: length of the shared prefix (0 without sharing).
    """

    n_tokens: int
    payload: Any
    group: Hashable | None = None
    prefix_len: int = 0


@dataclass(frozen=True)
class Prepared:
    """One request's candidates as items, in candidate order, with their truncation flags."""

    items: list[Item]
    truncated: list[bool]

    @property
    def n_tokens(self) -> int:
        """Tokens the request carries (every sequence counted whole)."""
        return sum(item.n_tokens for item in self.items)


@dataclass(frozen=True)
class Forwarded:
    """Raw values of a batch of items, and their pooled embeddings when asked for."""

    values: np.ndarray
    embeddings: np.ndarray | None = None


class Backend(ABC):
    """Scores candidates. ``prepare`` may run in several threads; ``forward`` runs in one model thread."""

    info: BackendInfo
    #: whether ``forward(..., embed=True)`` returns embeddings (for the neighbour index)
    embeds: bool = False
    #: whether a batch is padded to its longest item (encoder batches) or costs the sum of its items
    padded: bool = True

    @abstractmethod
    def prepare(self, query: ScoreInput) -> Prepared:
        """Serialize and tokenize one task's candidates (CPU work, no model call).

        Raises:
            InputTooLongError: ``query.truncate`` is false and an input does not fit.
        """

    @abstractmethod
    def forward(self, items: Sequence[Item], *, embed: bool = False) -> Forwarded:
        """Raw values of ``items`` (from any requests), in order."""

    def finalize(
        self, candidates: Sequence[str], values: np.ndarray, *, prompt: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One request's final (ranking values, probabilities) from its candidates' raw values.

        Runs once per request, after the score cache: a model may score a candidate set jointly
        (value_model's combiner mixes each raw value with consensus features of the whole set, and
        may read the task's ``prompt``), so only raw values are cached per candidate. Default: the
        raw values and their logistic.
        """
        values = np.asarray(values, dtype=np.float64)
        return values, 1.0 / (1.0 + np.exp(-values))

    def score(
        self, prompt: str, candidates: Sequence[str], *, context: Sequence[Mapping[str, Any]] = ()
    ) -> ScoredBatch:
        """Score one task's candidates directly (no engine, no batching across requests)."""
        prepared = self.prepare(
            ScoreInput(prompt=prompt, candidates=tuple(candidates), context=tuple(context))
        )
        values = self.forward(prepared.items).values if prepared.items else np.zeros(0)
        final, scores = self.finalize(candidates, values, prompt=prompt)
        return ScoredBatch(values=final, scores=scores, truncated=prepared.truncated)

    def close(self) -> None:
        """Release what the backend holds (called when a reload replaced it and it drained)."""
