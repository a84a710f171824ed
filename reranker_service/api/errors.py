"""One place that maps errors to HTTP answers; internals never leak into a response."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from reranker_service.api.routes import check_bearer
from reranker_service.api.schemas import REQUEST_SHAPES
from reranker_service.exceptions import (
    EngineNotReadyError,
    InvalidRequestError,
    OverloadedError,
    ReloadFailedError,
    RequestNotFoundError,
    RequestTooLargeError,
    ScoringFailedError,
    ServiceError,
    UnauthorizedError,
)

__all__ = ["error_body", "install_error_handlers"]

logger = logging.getLogger(__name__)


def error_body(kind: str, message: str, **extra: object) -> dict[str, object]:
    """The JSON error shape: ``{"error": {"type", "message"}, ...}``."""
    return {"error": {"type": kind, "message": message}, **extra}


def _describe(errors: list[dict[str, object]]) -> str:
    parts = []
    for err in errors[:5]:
        loc = tuple(err.get("loc", ()))  # type: ignore[arg-type]
        if err.get("type") == "json_invalid":  # its loc is ("body", character offset), not a field
            reason = (err.get("ctx") or {}).get("error")  # type: ignore[union-attr]
            at = f" at character {loc[1]}" if len(loc) > 1 else ""
            parts.append(f"body: not valid JSON{at}" + (f" ({reason})" if reason else ""))
            continue
        location = ".".join(str(p) for p in loc if p != "body")
        parts.append(f"{location or 'body'}: {err.get('msg')}")
    return "; ".join(parts)


def _without_shape(loc: tuple[object, ...]) -> tuple[object, ...]:
    """``loc`` without the request-shape tag pydantic puts after ``body`` for a tagged union body
    (``/v1/rerank``), so errors name the fields as the client sent them."""
    if len(loc) > 1 and loc[0] == "body" and loc[1] in REQUEST_SHAPES:
        return (loc[0], *loc[2:])
    return loc


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI parses a body before it runs the routes' dependencies, so a body that is not JSON
        # would tell a caller without a token more than 401: check the token first.
        try:
            check_bearer(request)
        except UnauthorizedError as refused:
            return await unauthorized(request, refused)
        found = [{**e, "loc": _without_shape(tuple(e.get("loc", ())))} for e in exc.errors()]
        errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in found]
        message = _describe([{**e, "ctx": e.get("ctx")} for e in found])
        return JSONResponse(status_code=422, content=error_body("invalid_request", message, detail=errors))

    @app.exception_handler(OverloadedError)
    async def overloaded(request: Request, exc: OverloadedError) -> JSONResponse:
        return JSONResponse(
            status_code=429,
            content=error_body("overloaded", str(exc)),
            headers={"Retry-After": str(max(1, round(exc.retry_after)))},
        )

    @app.exception_handler(InvalidRequestError)
    async def cannot_serve(request: Request, exc: InvalidRequestError) -> JSONResponse:
        return JSONResponse(status_code=422, content=error_body("invalid_request", str(exc)))

    @app.exception_handler(RequestNotFoundError)
    async def unknown_request(request: Request, exc: RequestNotFoundError) -> JSONResponse:
        return JSONResponse(status_code=404, content=error_body("not_found", str(exc)))

    @app.exception_handler(ReloadFailedError)
    async def reload_failed(request: Request, exc: ReloadFailedError) -> JSONResponse:
        return JSONResponse(status_code=409, content=error_body("reload_failed", str(exc)))

    @app.exception_handler(RequestTooLargeError)
    async def too_large(request: Request, exc: RequestTooLargeError) -> JSONResponse:
        return JSONResponse(status_code=413, content=error_body("request_too_large", str(exc)))

    @app.exception_handler(EngineNotReadyError)
    async def not_ready(request: Request, exc: EngineNotReadyError) -> JSONResponse:
        return JSONResponse(
            status_code=503, content=error_body("not_ready", str(exc)), headers={"Retry-After": "1"}
        )

    @app.exception_handler(UnauthorizedError)
    async def unauthorized(request: Request, exc: UnauthorizedError) -> JSONResponse:
        return JSONResponse(
            status_code=401,
            content=error_body("unauthorized", str(exc)),
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.exception_handler(ScoringFailedError)
    async def scoring_failed(request: Request, exc: ScoringFailedError) -> JSONResponse:
        # Answered here, not by the catch-all, so the connection stays usable for keep-alive clients.
        return JSONResponse(status_code=500, content=error_body("internal_error", str(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kinds = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}
        return JSONResponse(
            status_code=exc.status_code,
            content=error_body(kinds.get(exc.status_code, "http_error"), str(exc.detail)),
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(status_code=400, content=error_body("bad_request", str(exc)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(status_code=500, content=error_body("internal_error", "internal server error"))
