"""RerankClient and AsyncRerankClient against a real server with the dummy backend, and ``rerank_payload``."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from reranker_service import AsyncRerankClient, DummyBackend, RerankClient, RerankError, Settings, create_app
from reranker_service.client import rerank_payload


@pytest.fixture
def server(live_server):
    return live_server(create_app(Settings(), backend=DummyBackend()))


@pytest.fixture
def dead_url() -> str:
    """A URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class TestPayload:
    def test_strings_become_candidate_objects(self):
        assert rerank_payload("p", ["a", "b"]) == {
            "task": {"prompt": "p"},
            "candidates": [{"content": "a"}, {"content": "b"}],
        }

    def test_dict_candidates_pass_through_and_options_are_added_when_given(self):
        body = rerank_payload("p", [{"content": "a", "id": "x", "kind": "patch"}], top_n=1, task_id="t-1")
        assert body == {
            "task": {"prompt": "p", "id": "t-1"},
            "candidates": [{"content": "a", "id": "x", "kind": "patch"}],
            "top_n": 1,
        }


@pytest.mark.slow
class TestSyncClient:
    def test_rerank_returns_the_ranked_body(self, server):
        with RerankClient(server.url) as client:
            body = client.rerank("Fix parse()", [{"content": "a", "id": "x"}, "b", "c"], top_n=2, task_id="t")

        assert [r["rank"] for r in body["results"]] == [1, 2]
        assert body["usage"]["candidates"] == 3

    def test_health_and_ready_answer_when_the_server_runs(self, server):
        with RerankClient(server.url) as client:
            assert client.health() == {"status": "ok"}
            assert client.ready() is True
            client.wait_until_ready(timeout=5)

    def test_bad_request_raises_rerank_error_with_status_422(self, server):
        with (
            RerankClient(server.url) as client,
            pytest.raises(RerankError, match="HTTP 422: top_n") as raised,
        ):
            client.rerank("p", ["a"], top_n=0)

        assert raised.value.status == 422
        assert raised.value.body["error"]["type"] == "invalid_request"

    def test_api_key_is_sent_as_a_bearer_token(self, live_server):
        guarded = live_server(create_app(Settings(api_keys=("k1",)), backend=DummyBackend()))
        with RerankClient(guarded.url, api_key="k1") as client:
            assert len(client.rerank("p", ["a", "b"])["results"]) == 2
        with RerankClient(guarded.url) as client, pytest.raises(RerankError) as raised:
            client.rerank("p", ["a"])
        assert raised.value.status == 401

    def test_ready_is_false_when_nothing_listens(self, dead_url):
        with RerankClient(dead_url, timeout=2) as client:
            assert client.ready() is False

    def test_wait_until_ready_times_out_when_nothing_listens(self, dead_url):
        with (
            RerankClient(dead_url, timeout=2) as client,
            pytest.raises(TimeoutError, match="not ready after"),
        ):
            client.wait_until_ready(timeout=0.3, interval=0.05)


@pytest.fixture
def proxy(live_server):
    """A server in front of the reranker that answers errors in other shapes: a 503 with an HTTP-date
    Retry-After and a ``{"error": "..."}`` body (TEI's shape), and FastAPI's default 404 ``{"detail"}``."""
    app = FastAPI()

    @app.post("/v1/rerank")
    async def busy() -> JSONResponse:
        later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
        return JSONResponse({"error": "upstream busy"}, status_code=503, headers={"Retry-After": later})

    return live_server(app)


@pytest.mark.slow
class TestErrorsFromOtherServers:
    def test_an_http_date_retry_after_and_a_string_error_give_a_rerank_error(self, proxy):
        with (
            RerankClient(proxy.url) as client,
            pytest.raises(RerankError, match="HTTP 503: upstream busy") as raised,
        ):
            client.rerank("p", ["a"])

        assert raised.value.status == 503
        assert 20 < raised.value.retry_after <= 30

    @pytest.mark.anyio
    async def test_a_fastapi_detail_body_names_its_detail(self, proxy):
        async with AsyncRerankClient(proxy.url) as client:
            with pytest.raises(RerankError, match="HTTP 404: Not Found") as raised:
                await client.models()
        assert raised.value.retry_after is None


@pytest.mark.slow
@pytest.mark.anyio
class TestAsyncClient:
    async def test_rerank_returns_the_ranked_body(self, server):
        async with AsyncRerankClient(server.url) as client:
            body = await client.rerank("Fix parse()", ["a", "b", "c"])
        assert [r["rank"] for r in body["results"]] == [1, 2, 3]

    async def test_health_answers_when_the_server_runs(self, server):
        async with AsyncRerankClient(server.url) as client:
            assert await client.health() == {"status": "ok"}

    async def test_bad_request_raises_rerank_error_with_status_422(self, server):
        async with AsyncRerankClient(server.url) as client:
            with pytest.raises(RerankError) as raised:
                await client.rerank("p", [])
        assert raised.value.status == 422
        assert "candidates" in str(raised.value)

    async def test_ready_wait_and_metrics_answer_as_the_sync_clients_do(self, server):
        async with AsyncRerankClient(server.url) as client:
            assert await client.ready() is True
            await client.wait_until_ready(timeout=5)
            assert "harvest_requests_total" in await client.metrics()

    async def test_ready_is_false_and_wait_times_out_when_nothing_listens(self, dead_url):
        async with AsyncRerankClient(dead_url, timeout=2) as client:
            assert await client.ready() is False
            with pytest.raises(TimeoutError, match="not ready after"):
                await client.wait_until_ready(timeout=0.3, interval=0.05)
