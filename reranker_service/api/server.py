"""``create_server(app)``: the ``uvicorn.Server`` of ``harvest serve``, with a drain and a bounded graceful
shutdown.

On SIGTERM (or SIGINT) uvicorn closes the listening socket at once, before a load balancer that routes on
``/ready`` can see the server go unready. With ``settings.drain_s``, the server first drains: ``/ready``
answers 503 ``draining`` while every request is still accepted and served, for ``drain_s`` seconds or
until a second signal; then the graceful shutdown below runs.

In it uvicorn stops accepting connections and waits for the requests in flight. Without a bound,
a model that never returns would keep the process up until Kubernetes kills it. Here, once
``settings.shutdown_timeout_s`` has passed, the engine is stopped: the requests it still holds (being
scored or queued) are answered 503 ``not_ready``. Anything else still running ``ANSWER_S`` later is
cancelled by uvicorn (``timeout_graceful_shutdown``), then the lifespan stops the service.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

__all__ = ["ANSWER_S", "create_server"]

logger = logging.getLogger(__name__)

# Time the requests failed by the engine's stop get to send their 503 before uvicorn cancels what is left.
ANSWER_S = 1.0


class _Server(uvicorn.Server):
    """A ``uvicorn.Server`` that drains for ``drain_s`` once told to exit, then stops the app's engine
    ``shutdown_timeout_s`` into its graceful shutdown."""

    def __init__(
        self, config: uvicorn.Config, app: FastAPI, *, drain_s: float, shutdown_timeout_s: float
    ) -> None:
        super().__init__(config)
        self._app = app
        self._drain_s = drain_s
        self._shutdown_timeout_s = shutdown_timeout_s
        self._stopping: asyncio.Task[None] | None = None
        self._hurry = False  # a second signal: skip the rest of the drain

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            self._hurry = True
        super().handle_exit(sig, frame)

    async def main_loop(self) -> None:
        await super().main_loop()
        if self._drain_s > 0 and not self._hurry:
            await self._drain()

    async def _drain(self) -> None:
        """Serve on, with ``/ready`` at 503, for ``drain_s`` or until a second signal."""
        self._app.state.draining = True
        logger.info(
            "draining: /ready answers 503 and requests are still served for %gs (drain_s) before the "
            "shutdown; signal again to skip the rest",
            self._drain_s,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._drain_s
        ticks = 0
        while not self._hurry and (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(0.1, left))  # uvicorn's own tick: a signal handler only sets a flag
            ticks += 1
            await self.on_tick(ticks)  # keeps the Date header current

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

    Told to exit, it first drains for the app's ``settings.drain_s`` (``/ready`` at 503, requests still
    served); its graceful shutdown is then bounded by ``settings.shutdown_timeout_s`` (0: waits forever).
    """
    settings = app.state.settings
    timeout = settings.shutdown_timeout_s
    uvicorn_config = uvicorn.Config(
        app, timeout_graceful_shutdown=timeout + ANSWER_S if timeout > 0 else None, **config
    )
    return _Server(uvicorn_config, app, drain_s=settings.drain_s, shutdown_timeout_s=timeout)
