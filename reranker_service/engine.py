"""The rerank engine: a bounded queue in front of one model worker, usable without FastAPI.

Requests wait in a bounded ``asyncio.Queue``; a full queue refuses at once with
:class:`~reranker_service.exceptions.OverloadedError` (the API answers 429 with ``Retry-After``)
instead of letting latency grow without bound. One worker task takes requests in order and runs the
backend in a dedicated thread, so the event loop keeps serving health checks while the model works.
A request whose caller went away (its future was cancelled) is skipped, not computed.

Examples:
    >>> import asyncio
    >>> from reranker_service.backends import DummyBackend
    >>> async def main():
    ...     async with RerankEngine(DummyBackend()) as engine:
    ...         scored = await engine.score("fix the bug", ["diff a", "diff b"])
    ...     return len(scored.scores)
    >>> asyncio.run(main())
    2
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType

from reranker_service.backends import Backend
from reranker_service.exceptions import EngineNotReadyError, OverloadedError, ScoringFailedError
from value_model import ScoredBatch

__all__ = ["EngineStats", "RerankEngine"]

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    prompt: str
    candidates: Sequence[str]
    future: asyncio.Future[ScoredBatch]
    enqueued: float = field(default_factory=time.monotonic)


@dataclass
class EngineStats:
    """Counters the engine keeps (exported by ``/metrics`` later)."""

    requests: int = 0
    candidates: int = 0
    rejected: int = 0
    cancelled: int = 0
    failed: int = 0


class RerankEngine:
    """Scores candidate sets through a backend, one model call at a time, behind a bounded queue.

    Args:
        backend: the model.
        max_queue: requests allowed to wait before new ones are refused.
    """

    def __init__(self, backend: Backend, *, max_queue: int = 64) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.backend = backend
        self.max_queue = max_queue
        self.stats = EngineStats()
        self._queue: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._current: _Job | None = None

    @property
    def ready(self) -> bool:
        """Whether the engine accepts requests."""
        return self._worker is not None and not self._worker.done()

    @property
    def queue_depth(self) -> int:
        """Requests waiting."""
        return self._queue.qsize() if self._queue else 0

    async def start(self) -> None:
        """Start the worker (idempotent)."""
        if self.ready:
            return
        self._queue = asyncio.Queue(maxsize=self.max_queue)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harvest-model")
        self._worker = asyncio.create_task(self._run(), name="harvest-rerank-worker")

    async def stop(self) -> None:
        """Stop the worker; the request being scored and those still waiting fail with :class:`EngineNotReadyError`."""
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        stopped = EngineNotReadyError("the rerank engine stopped")
        if self._current is not None and not self._current.future.done():
            self._current.future.set_exception(stopped)
        self._current = None
        if self._queue is not None:
            while not self._queue.empty():
                job = self._queue.get_nowait()
                if not job.future.done():
                    job.future.set_exception(stopped)
        if self._executor is not None:
            # Do not block the event loop on a model call still running in the thread.
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def __aenter__(self) -> RerankEngine:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def score(self, prompt: str, candidates: Sequence[str]) -> ScoredBatch:
        """Score one task's candidates.

        Raises:
            EngineNotReadyError: the engine is not started.
            OverloadedError: the queue is full.
        """
        if not self.ready or self._queue is None:
            raise EngineNotReadyError("the rerank engine is not running")
        future: asyncio.Future[ScoredBatch] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Job(prompt, candidates, future))
        except asyncio.QueueFull:
            self.stats.rejected += 1
            raise OverloadedError(f"{self.max_queue} requests are already waiting", retry_after=1.0) from None
        return await future

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            job = await self._queue.get()
            if job.future.done():  # the caller disconnected or timed out
                self.stats.cancelled += 1
                continue
            self._current = job  # stop() answers it if the worker is cancelled mid-call
            try:
                result = await loop.run_in_executor(self._executor, self.backend.score, job.prompt, job.candidates)
            except Exception:  # noqa: BLE001 - logged here; the caller gets a generic error
                self._current = None
                self.stats.failed += 1
                logger.exception("scoring failed")
                if not job.future.done():
                    job.future.set_exception(ScoringFailedError("the model failed to score this request"))
                continue
            self._current = None
            self.stats.requests += 1
            self.stats.candidates += len(job.candidates)
            if not job.future.done():
                job.future.set_result(result)
