"""``ModelThread``: the engine's one model thread, an executor whose thread never holds up the process's exit.

A ``ThreadPoolExecutor``'s threads are joined when the interpreter exits (``concurrent.futures`` registers
that join with ``threading``), so a model call that never returns kept a stopped server's process alive
for ever: after SIGINT, uvicorn ends ``harvest serve`` with a ``KeyboardInterrupt`` and the exit then
waited on the stuck thread. (SIGTERM did not hang: uvicorn re-raises it, and its default action kills the
process before any join.) This thread is a daemon: once the engine has stopped, the process exits
without it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, TypeVar

__all__ = ["ModelThread"]

T = TypeVar("T")

_Call = tuple[Future[Any], Callable[[], Any]]


class ModelThread(Executor):
    """One daemon thread that runs the calls submitted to it, one at a time, in order.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._busy = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """Whether a call is running now."""
        return self._busy

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:  # noqa: ANN401
        """Run ``fn(*args, **kwargs)`` in the thread after the calls already submitted.

        Raises:
            RuntimeError: the executor was shut down (the message ``ThreadPoolExecutor`` uses).
        """
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._calls.put((future, partial(fn, *args, **kwargs)))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more calls; the thread ends after the calls still queued (cancelled with
        ``cancel_futures``). ``wait`` waits for that, and for ever if a call never returns."""
        with self._lock:
            if not self._closed:
                self._closed = True
                while cancel_futures:
                    try:
                        call = self._calls.get_nowait()
                    except queue.Empty:
                        break
                    if call is not None:
                        call[0].cancel()
                self._calls.put(None)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            self._run(*call)
            del call  # nothing of the last call (its model, its batch) stays referenced while idle

    def _run(self, future: Future[Any], fn: Callable[[], Any]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        self._busy = True
        try:
            result = fn()
        except BaseException as exc:  # as ThreadPoolExecutor does: the caller gets it from the future
            future.set_exception(exc)
        else:
            future.set_result(result)
        finally:
            self._busy = False
