"""``create_server(app)``: the ``uvicorn.Server`` of ``harvest serve``, with a bounded graceful shutdown.

On SIGTERM uvicorn stops accepting connections and waits for the requests in flight. Without a bound,
a model that never returns would keep the process up until Kubernetes kills it. Here, once
``settings.shutdown_timeout_s`` has passed, the engine is stopped: the requests it still holds (being
scored or queued) are answered 503 ``not_ready``. Anything else still running ``ANSWER_S`` later is
cancelled by uvicorn (``timeout_graceful_shutdown``), then the lifespan stops the service.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import uvicorn
from fastapi import FastAPI

__all__ = ["ANSWER_S", "create_server"]

logger = logging.getLogger(__name__)

# Time the requests failed by the engine's stop get to send their 503 before uvicorn cancels what is left.
ANSWER_S = 1.0


class _Server(uvicorn.Server):
    """A ``uvicorn.Server`` that stops the app's engine ``shutdown_timeout_s`` into a graceful shutdown."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, shutdown_timeout_s: float) -> None:
        super().__init__(config)
        self._app = app
        self._shutdown_timeout_s = shutdown_timeout_s
        self._stopping: asyncio.Task[None] | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        timer = None
        if self._shutdown_timeout_s > 0:
            timer = asyncio.get_running_loop().call_later(self._shutdown_timeout_s, self._stop_engine)
        try:
            await super().shutdown(sockets)
        finally:
            if timer is not None:
                timer.cancel()

    def _stop_engine(self) -> None:
        engine = getattr(self._app.state, "engine", None)
        if engine is None or not engine.ready:
            return
        logger.error(
            "requests still running %.0fs into shutdown (shutdown_timeout_s): stopping the engine, "
            "they get 503",
            self._shutdown_timeout_s,
        )
        self._stopping = asyncio.create_task(engine.stop(), name="harvest-shutdown-timeout")


def create_server(app: FastAPI, **config: Any) -> uvicorn.Server:  # noqa: ANN401 - uvicorn.Config's options
    """A server for ``app`` (from :func:`~reranker_service.api.create_app`) with ``uvicorn.Config(**config)``.

    Its graceful shutdown is bounded by the app's ``settings.shutdown_timeout_s`` (0: waits forever).
    """
    timeout = app.state.settings.shutdown_timeout_s
    uvicorn_config = uvicorn.Config(
        app, timeout_graceful_shutdown=timeout + ANSWER_S if timeout > 0 else None, **config
    )
    return _Server(uvicorn_config, app, timeout)
