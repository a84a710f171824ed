"""reranker_service: the HTTP endpoint agents call to score and rank their candidates.

Public surface: :func:`create_app`, :class:`Settings`, :class:`RerankService` (engine, neighbour
index, feedback, reloads), :class:`RerankEngine` (batching, usable alone), the backends, the
neighbour index, the clients and the errors.
"""

from reranker_service.api import create_app
from reranker_service.backends import Backend, BackendInfo, DummyBackend, ScoreInput, ValueModelBackend
from reranker_service.client import AsyncRerankClient, RerankClient, RerankError
from reranker_service.engine import EngineResult, RerankEngine
from reranker_service.exceptions import (
    EngineNotReadyError,
    FeatureDisabledError,
    InputTooLongError,
    InvalidRequestError,
    OverloadedError,
    ReloadFailedError,
    RequestNotFoundError,
    RequestTooLargeError,
    ScoringFailedError,
    ServiceError,
    UnauthorizedError,
)
from reranker_service.index import NeighborIndex, build_index
from reranker_service.service import RerankService
from reranker_service.settings import Settings

__all__ = [
    "AsyncRerankClient",
    "Backend",
    "BackendInfo",
    "DummyBackend",
    "EngineNotReadyError",
    "EngineResult",
    "FeatureDisabledError",
    "InputTooLongError",
    "InvalidRequestError",
    "NeighborIndex",
    "OverloadedError",
    "ReloadFailedError",
    "RequestNotFoundError",
    "RequestTooLargeError",
    "RerankClient",
    "RerankEngine",
    "RerankError",
    "RerankService",
    "ScoreInput",
    "ScoringFailedError",
    "ServiceError",
    "Settings",
    "UnauthorizedError",
    "ValueModelBackend",
    "build_index",
    "create_app",
]
