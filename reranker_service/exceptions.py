"""The error hierarchy of ``reranker_service``; :mod:`reranker_service.api.errors` maps it to HTTP."""

from __future__ import annotations

__all__ = [
    "EngineNotReadyError",
    "OverloadedError",
    "RequestTooLargeError",
    "ScoringFailedError",
    "ServiceError",
    "UnauthorizedError",
]


class ServiceError(Exception):
    """Base class of every error the service raises on purpose."""


class OverloadedError(ServiceError):
    """The request queue is full; the client should retry after ``retry_after`` seconds (HTTP 429)."""

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EngineNotReadyError(ServiceError):
    """The engine has no model loaded yet or is shutting down (HTTP 503)."""


class RequestTooLargeError(ServiceError):
    """A request exceeds a configured limit (candidates, bytes) (HTTP 413)."""


class UnauthorizedError(ServiceError):
    """The request carries no bearer token, or one that is not configured (HTTP 401)."""


class ScoringFailedError(ServiceError):
    """The model failed on a request (HTTP 500; the cause is logged, never sent to the client)."""
