"""reranker_service: the HTTP endpoint agents call to score and rank their candidates.

Public surface: :func:`create_app`, :class:`Settings`, :class:`RerankEngine`, the backends and errors.
"""

from reranker_service.api import create_app
from reranker_service.client import AsyncRerankClient, RerankClient, RerankError
from reranker_service.backends import Backend, BackendInfo, DummyBackend, ValueModelBackend
from reranker_service.engine import RerankEngine
from reranker_service.exceptions import (
    EngineNotReadyError,
    OverloadedError,
    RequestTooLargeError,
    ScoringFailedError,
    ServiceError,
    UnauthorizedError,
)
from reranker_service.settings import Settings

__all__ = [
    "AsyncRerankClient",
    "Backend",
    "BackendInfo",
    "DummyBackend",
    "EngineNotReadyError",
    "OverloadedError",
    "RequestTooLargeError",
    "RerankClient",
    "RerankEngine",
    "RerankError",
    "ScoringFailedError",
    "ServiceError",
    "Settings",
    "UnauthorizedError",
    "ValueModelBackend",
    "create_app",
]
