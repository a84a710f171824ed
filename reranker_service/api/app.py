"""The FastAPI application factory: ``create_app(settings)`` runs the service in ``lifespan``.

Routes (:mod:`reranker_service.api.routes`) only validate, await the service and shape the response;
errors map to HTTP in :mod:`reranker_service.api.errors`. The middlewares are plain ASGI (no
``BaseHTTPMiddleware``), so they add little to a request and never hide a client's disconnect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reranker_service.api.errors import error_body, install_error_handlers
from reranker_service.api.routes import public, router
from reranker_service.backends import Backend, ValueModelBackend
from reranker_service.exceptions import OverloadedError
from reranker_service.metrics import ServiceMetrics
from reranker_service.service import RerankService
from reranker_service.settings import Settings, load_api_keys

__all__ = [
    "AdmissionMiddleware",
    "BodyLimitMiddleware",
    "JsonByDefaultMiddleware",
    "MetricsMiddleware",
    "create_app",
]

logger = logging.getLogger(__name__)


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
        await self.app(
            scope,
            _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive),
            send,
        )

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, what: str) -> None:
        response = JSONResponse(
            status_code=413, content=error_body("request_too_large", f"{what}; the limit is {self.max_bytes}")
        )
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


class JsonByDefaultMiddleware:
    """Reads POST bodies sent without a JSON content type (``curl -d`` sends form encoding) as JSON:
    the API only speaks JSON, so failing on the header would only confuse."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = scope["headers"]
            content_type = next((v for k, v in headers if k == b"content-type"), b"")
            if not content_type or content_type.startswith(
                (b"application/x-www-form-urlencoded", b"text/plain")
            ):
                scope = {
                    **scope,
                    "headers": [
                        *(h for h in headers if h[0] != b"content-type"),
                        (b"content-type", b"application/json"),
                    ],
                }
        await self.app(scope, receive, send)


class AdmissionMiddleware:
    """Answers 429 (with ``Retry-After``) to scoring requests while the engine's queue is full, before
    their body is read or parsed: under overload, refusing must stay cheap."""

    def __init__(self, app: ASGIApp, *, paths: set[str]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.paths:
            engine = getattr(scope["app"].state, "engine", None)
            if engine is not None and engine.ready:
                try:
                    engine.check_admission()
                except OverloadedError as exc:
                    response = JSONResponse(
                        status_code=429,
                        content=error_body("overloaded", str(exc)),
                        headers={"Retry-After": str(max(1, round(exc.retry_after)))},
                    )
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class MetricsMiddleware:
    """Counts answers by route and status and times them (``harvest_requests_total``,
    ``harvest_request_duration_seconds``); unknown paths share one label."""

    def __init__(self, app: ASGIApp, *, metrics: ServiceMetrics, routes: set[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = scope["path"] if scope["path"] in self.routes else "other"
        status = [500]
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.requests.labels(route=route, status=str(status[0])).inc()
            self.metrics.request_duration.labels(route=route).observe(time.perf_counter() - started)


def create_app(
    settings: Settings,
    *,
    backend: Backend | None = None,
    loader: Callable[[str], Backend] | None = None,
) -> FastAPI:
    """Build the app.

    Args:
        settings: service settings.
        backend: a ready backend (tests pass a dummy); default: load ``settings.model`` at start-up.
        loader: loads a model reference, for start-up (without ``backend``) and ``/admin/reload``
            (default: :meth:`ValueModelBackend.load` with the settings' tracking URI and device).

    Raises:
        ValueError: ``settings.api_keys_file`` cannot be read.
    """
    load = loader or (
        lambda ref: ValueModelBackend.load(
            ref, tracking_uri=settings.tracking_uri, device=settings.device, cpu_linear=settings.cpu_linear
        )
    )
    metrics = ServiceMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loaded = backend or await asyncio.to_thread(load, settings.model)
        logger.info("serving %s (revision %s)", loaded.info.label, loaded.info.cache_revision)
        service = RerankService(settings, loaded, loader=load, metrics=metrics)
        app.state.service = service
        app.state.engine = service.engine
        async with service:
            yield

    app = FastAPI(
        title="Harvest reranker",
        version="1",
        summary="Scores and ranks the candidate patches, answers or actions of an agent with a value model.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.draining = False  # set by the server's drain (create_server): /ready answers 503
    app.state.api_keys = load_api_keys(settings)
    install_error_handlers(app)
    app.include_router(public)
    app.include_router(router)
    app.add_middleware(JsonByDefaultMiddleware)
    app.add_middleware(AdmissionMiddleware, paths={"/v1/rerank", "/v2/rerank", "/rerank"})
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    known = {
        path for r in (*public.routes, *router.routes) if isinstance(path := getattr(r, "path", None), str)
    }
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=known)
    return app
