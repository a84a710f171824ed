"""The FastAPI application factory: ``create_app(settings)`` starts the engine in ``lifespan``.

Routes only validate, await the engine and shape the response; errors map to HTTP in
:mod:`reranker_service.api.errors`.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reranker_service.api.errors import error_body, install_error_handlers
from reranker_service.api.schemas import RerankRequest, RerankResponse, RerankResult, Usage
from reranker_service.backends import Backend, ValueModelBackend
from reranker_service.engine import RerankEngine
from reranker_service.exceptions import RequestTooLargeError, UnauthorizedError
from reranker_service.settings import Settings

__all__ = ["BodyLimitMiddleware", "create_app"]

logger = logging.getLogger(__name__)
_bearer = HTTPBearer(auto_error=False)


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` with 413: at once when ``Content-Length`` says so, and
    while reading for bodies without one (chunked transfer), so no body is ever buffered past the limit."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit():
            if int(length) > self.max_bytes:
                await self._refuse(scope, receive, send, f"request body is {int(length)} bytes")
                return
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked): read up to the limit, then replay what was read to the app.
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send, f"request body exceeds {self.max_bytes} bytes")
                return
        await self.app(scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}],
                                      receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, what: str) -> None:
        response = JSONResponse(status_code=413, content=error_body(
            "request_too_large", f"{what}; the limit is {self.max_bytes}"))
        await response(scope, receive, send)


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A ``receive`` that hands out ``messages`` first, then defers to ``then``."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive


def create_app(settings: Settings, *, backend: Backend | None = None) -> FastAPI:
    """Build the app.

    Args:
        settings: service settings.
        backend: a ready backend (tests pass a dummy); default: load ``settings.model`` at start-up.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loaded = backend or ValueModelBackend.load(settings.model, tracking_uri=settings.tracking_uri)
        logger.info("serving %s (version %s)", loaded.info.name, loaded.info.version)
        engine = RerankEngine(loaded, max_queue=settings.max_queue)
        app.state.engine = engine
        async with engine:
            yield

    app = FastAPI(
        title="Harvest reranker",
        version="1",
        summary="Scores and ranks the candidate patches, answers or actions of an agent with a value model.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)

    @app.middleware("http")
    async def json_by_default(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        # The API only speaks JSON: read bodies sent without a JSON content type (curl -d sends
        # application/x-www-form-urlencoded) as JSON rather than failing on the header.
        if request.method == "POST":
            content_type = request.headers.get("content-type", "")
            if not content_type or content_type.startswith(("application/x-www-form-urlencoded", "text/plain")):
                headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
                request.scope["headers"] = [*headers, (b"content-type", b"application/json")]
        return await call_next(request)

    async def authorize(credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:  # noqa: B008
        if not settings.api_keys:
            return
        token = credentials.credentials if credentials else ""
        if not any(secrets.compare_digest(token, key) for key in settings.api_keys):
            raise UnauthorizedError("missing or invalid bearer token (send 'Authorization: Bearer <key>')")

    def engine_of(request: Request) -> RerankEngine:
        return request.app.state.engine

    @app.get("/health", summary="Liveness: the process answers.")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ready", summary="Readiness: a model is loaded and the engine runs.")
    async def ready(request: Request) -> JSONResponse:
        engine: RerankEngine | None = getattr(request.app.state, "engine", None)
        if engine is None or not engine.ready:
            return JSONResponse(status_code=503, content={"status": "loading"})
        return JSONResponse({"status": "ready", "model": engine.backend.info.name,
                             "version": engine.backend.info.version})

    @app.post("/v1/rerank", response_model=RerankResponse, dependencies=[Depends(authorize)],
              summary="Score and rank the candidates of one task.")
    async def rerank(body: RerankRequest, request: Request, response: Response) -> RerankResponse:
        if len(body.candidates) > settings.max_candidates:
            raise RequestTooLargeError(
                f"{len(body.candidates)} candidates; the limit is {settings.max_candidates} per request"
            )
        engine = engine_of(request)
        started = time.perf_counter()
        request_id = request.headers.get("x-request-id") or f"rr-{uuid.uuid4().hex}"
        scored = await engine.score(body.task.prompt, [c.content for c in body.candidates])
        # Rank by the raw value: calibration is monotone, and raw values keep ties apart.
        order = sorted(range(len(body.candidates)), key=lambda i: (-scored.values[i], i))
        results = [
            RerankResult(index=i, id=body.candidates[i].id, score=float(scored.scores[i]),
                         value=float(scored.values[i]), rank=rank)
            for rank, i in enumerate(order, start=1)
        ]
        if body.top_n is not None:
            results = results[: body.top_n]
        n_truncated = sum(scored.truncated)
        warnings = []
        if n_truncated:
            warnings.append(f"{n_truncated} candidate(s) were truncated to the model's token budget "
                            f"(task head, candidate head and tail kept)")
        response.headers["X-Request-ID"] = request_id
        info = engine.backend.info
        return RerankResponse(
            id=request_id,
            model=f"{info.name}/{info.version}" if info.version else info.name,
            results=results,
            usage=Usage(candidates=len(body.candidates), truncated=n_truncated,
                        duration_ms=(time.perf_counter() - started) * 1000),
            warnings=warnings,
        )

    return app
