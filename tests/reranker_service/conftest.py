"""Fixtures of the reranker_service tests (the helpers they build on live in ``_helpers.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from fastapi import FastAPI

from tests.reranker_service._helpers import LiveServer, SlowBackend, serve


@pytest.fixture(autouse=True)
def harvest_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test has its own ``HARVEST_HOME`` (the service keeps its feedback store there by default)."""
    monkeypatch.setenv("HARVEST_HOME", str(tmp_path_factory.mktemp("harvest-home")))


@pytest.fixture
def live_server() -> Iterator[Callable[[FastAPI], LiveServer]]:
    """A factory: ``live_server(app)`` serves ``app`` over real HTTP until the test ends."""
    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serve(app))


@pytest.fixture
def slow_backend() -> Iterator[SlowBackend]:
    """A :class:`SlowBackend`, released on teardown so no worker thread outlives the test."""
    backend = SlowBackend()
    yield backend
    backend.release.set()


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio, the loop uvicorn and the engine use."""
    return "asyncio"
