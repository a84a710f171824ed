"""Scoring backends: everything the engine can run, behind one ABC (:class:`Backend`)."""

from reranker_service.backends.base import Backend, BackendInfo, Forwarded, Item, Prepared, ScoreInput
from reranker_service.backends.dummy import DummyBackend
from reranker_service.backends.value_model import ValueModelBackend

__all__ = [
    "Backend",
    "BackendInfo",
    "DummyBackend",
    "Forwarded",
    "Item",
    "Prepared",
    "ScoreInput",
    "ValueModelBackend",
]
