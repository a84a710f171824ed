"""A small Python client for the reranker API (sync and async), on httpx.

Examples:
    >>> client = RerankClient("http://127.0.0.1:8765")   # doctest: +SKIP
    >>> client.rerank("Fix the crash in parse()", ["diff --git a/...", "diff --git b/..."])["results"][0]  # doctest: +SKIP
    {'index': 1, 'id': None, 'score': 0.71, 'value': 0.93, 'rank': 1}
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx

__all__ = ["AsyncRerankClient", "RerankClient", "RerankError", "rerank_payload"]


class RerankError(RuntimeError):
    """The service answered with an error; ``status`` and the service's ``error`` body are attached."""

    def __init__(self, status: int, body: Any) -> None:  # noqa: ANN401 - the decoded error body
        message = body.get("error", {}).get("message") if isinstance(body, dict) else str(body)
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


def rerank_payload(
    prompt: str,
    candidates: Sequence[str | dict[str, Any]],
    *,
    top_n: int | None = None,
    task_id: str | None = None,
) -> dict[str, Any]:
    """The ``/v1/rerank`` body for a task and its candidates (strings or ``{content, id?, kind?}``)."""
    task: dict[str, Any] = {"prompt": prompt}
    if task_id is not None:
        task["id"] = task_id
    body: dict[str, Any] = {
        "task": task,
        "candidates": [c if isinstance(c, dict) else {"content": c} for c in candidates],
    }
    if top_n is not None:
        body["top_n"] = top_n
    return body


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _decode(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if response.status_code >= 400:
        raise RerankError(response.status_code, body)
    return body


class RerankClient:
    """Synchronous client.

    Args:
        base_url: e.g. ``http://127.0.0.1:8765``.
        api_key: bearer token, when the service requires one.
        timeout: seconds per request.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self._http = httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout)

    def __enter__(self) -> RerankClient:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def rerank(self, prompt: str, candidates: Sequence[str | dict[str, Any]], **kwargs: Any) -> dict[str, Any]:  # noqa: ANN401
        """POST ``/v1/rerank``; returns the response body. Raises :class:`RerankError` on errors."""
        return _decode(self._http.post("/v1/rerank", json=rerank_payload(prompt, candidates, **kwargs)))

    def health(self) -> dict[str, Any]:
        """GET ``/health``."""
        return _decode(self._http.get("/health"))

    def ready(self) -> bool:
        """Whether ``/ready`` answers 200."""
        try:
            return self._http.get("/ready").status_code == 200
        except httpx.TransportError:
            return False

    def wait_until_ready(self, timeout: float = 120.0, interval: float = 0.25) -> None:
        """Poll ``/ready`` until it answers 200.

        Raises:
            TimeoutError: not ready within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return
            time.sleep(interval)
        raise TimeoutError(f"the reranker at {self._http.base_url} was not ready after {timeout:.0f}s")


class AsyncRerankClient:
    """Asynchronous client, same methods as :class:`RerankClient`."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout)

    async def __aenter__(self) -> AsyncRerankClient:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def rerank(self, prompt: str, candidates: Sequence[str | dict[str, Any]], **kwargs: Any) -> dict[str, Any]:  # noqa: ANN401
        """POST ``/v1/rerank``; returns the response body. Raises :class:`RerankError` on errors."""
        return _decode(await self._http.post("/v1/rerank", json=rerank_payload(prompt, candidates, **kwargs)))

    async def health(self) -> dict[str, Any]:
        """GET ``/health``."""
        return _decode(await self._http.get("/health"))
