"""The error hierarchy of ``reranker_service``; :mod:`reranker_service.api.errors` maps it to HTTP."""

from __future__ import annotations

__all__ = [
    "EngineNotReadyError",
    "FeatureDisabledError",
    "InputTooLongError",
    "InvalidRequestError",
    "OverloadedError",
    "ReloadFailedError",
    "RequestNotFoundError",
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


class InvalidRequestError(ServiceError):
    """A request that parses but cannot be served as asked, e.g. an index out of range (HTTP 422)."""


class InputTooLongError(InvalidRequestError):
    """An input does not fit the model's token budget and the request asked not to truncate (HTTP 422)."""


class RequestNotFoundError(ServiceError):
    """Feedback names a request id the service does not remember (never served, or too old) (HTTP 404)."""


class FeatureDisabledError(ServiceError):
    """The request needs something this deployment does not have configured, e.g. feedback
    without a lake (HTTP 400; the message names the setting)."""


class ReloadFailedError(ServiceError):
    """A model reload failed; the previous model keeps serving (HTTP 409; the cause is logged)."""
