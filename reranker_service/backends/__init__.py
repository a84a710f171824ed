"""Scoring backends: everything the engine can run, behind one ABC."""

from reranker_service.backends.base import Backend, BackendInfo
from reranker_service.backends.dummy import DummyBackend
from reranker_service.backends.value_model import ValueModelBackend

__all__ = ["Backend", "BackendInfo", "DummyBackend", "ValueModelBackend"]
