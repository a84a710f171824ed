"""Unmodified request bodies of real rerank callers, sent over real HTTP to the paths they post to.

Each body is the one the caller puts on the wire, byte for byte where it was captured:

- the cohere SDK's v1 ``cohere.Client.rerank`` (5.15, captured with an httpx mock transport) posts to
  ``/v1/rerank`` with compact JSON and omitted options dropped; LlamaIndex's ``CohereRerank`` calls it
  as ``rerank(model=..., top_n=..., query=..., documents=texts)``;
- the same client with document objects, ``rank_fields``, ``return_documents`` and ``max_chunks_per_doc``;
- Jina's ``POST /v1/rerank`` as in its API documentation (``documents`` and ``return_documents``);
- LangChain's ``CohereRerank`` (``cohere.ClientV2``): ``top_n`` defaults to 3 and an unset
  ``max_tokens_per_doc`` is sent as ``null``.

The answers must have what those callers read: ``results[].index`` and ``relevance_score`` (best first),
``document`` with ``return_documents``, ``id`` and ``meta``.
"""

from __future__ import annotations

import json

import pytest

from reranker_service import DummyBackend, Settings, create_app

pytestmark = pytest.mark.slow  # starts a server

QUERY = "UsernameValidator allows trailing newline in usernames"
DOCS = [
    "diff --git a/django/contrib/auth/validators.py b/django/contrib/auth/validators.py\n-    regex = r'^$'",
    "diff --git a/django/core/validators.py b/django/core/validators.py\n+    regex = r'\\A\\Z'",
    "diff --git a/README.rst b/README.rst\n+Usernames may not end with a newline.",
]
FERN_HEADERS = {
    "content-type": "application/json",
    "accept": "*/*",
    "x-fern-language": "Python",
    "x-fern-sdk-name": "cohere",
    "x-fern-sdk-version": "5.15.0",
    "authorization": "Bearer co-key",
}


def compact(body: dict[str, object]) -> bytes:
    """JSON as httpx encodes it for the SDK (no spaces)."""
    return json.dumps(body, separators=(",", ":")).encode()


@pytest.fixture
def backend():
    return DummyBackend()


@pytest.fixture
def http(live_server, backend):
    server = live_server(create_app(Settings(api_keys=("co-key",)), backend=backend))
    with server.client() as client:
        yield client


def best_first(backend, texts):
    values = backend.score(QUERY, texts).values
    return sorted(range(len(texts)), key=lambda i: -values[i])


class TestCohereV1Client:
    def test_the_v1_sdk_body_at_v1_rerank_gets_a_cohere_answer(self, http, backend):
        # cohere.Client(base_url=...).rerank(model=..., query=..., documents=..., top_n=2), as LlamaIndex
        # calls it
        body = compact({"model": "rerank-english-v3.0", "query": QUERY, "documents": DOCS, "top_n": 2})
        response = http.post("/v1/rerank", content=body, headers=FERN_HEADERS)

        assert response.status_code == 200, response.text
        answer = response.json()
        assert [r["index"] for r in answer["results"]] == best_first(backend, DOCS)[:2]
        # documents unless asked not to, as Jina's API (same path) answers; the SDK reads document as optional
        assert all(r["document"] == {"text": DOCS[r["index"]]} for r in answer["results"])
        assert answer["id"] == response.headers["x-request-id"]
        assert answer["meta"]["api_version"] == {"version": "1"}
        assert answer["meta"]["billed_units"] == {"search_units": 1}

    def test_rank_fields_choose_the_fields_of_document_objects_that_are_scored(self, http, backend):
        documents = [{"title": f"patch {i}", "body": d} for i, d in enumerate(DOCS)]
        body = compact(
            {
                "model": "rerank-english-v3.0",
                "query": QUERY,
                "documents": documents,
                "rank_fields": ["title", "body"],
                "return_documents": True,
                "max_chunks_per_doc": 4,
            }
        )
        response = http.post("/v1/rerank", content=body, headers=FERN_HEADERS)

        assert response.status_code == 200, response.text
        scored = [f"title: {d['title']}\nbody: {d['body']}" for d in documents]
        results = response.json()["results"]
        assert [r["index"] for r in results] == best_first(backend, scored)
        assert [r["document"] for r in results] == [documents[r["index"]] for r in results]

    def test_a_document_object_without_the_scored_fields_gets_422_naming_it(self, http):
        body = {"query": QUERY, "documents": [{"text": DOCS[0]}, {"title": "no text"}]}
        response = http.post("/v2/rerank", json=body, headers={"authorization": "Bearer co-key"})

        assert response.status_code == 422
        assert "documents[1] has none of the fields text" in response.json()["error"]["message"]


class TestJina:
    def test_the_documented_jina_body_at_v1_rerank_is_ranked_with_documents(self, http, backend):
        body = {
            "model": "jina-reranker-v2-base-multilingual",
            "query": QUERY,
            "top_n": 3,
            "documents": DOCS,
            "return_documents": True,
        }
        response = http.post("/v1/rerank", json=body, headers={"authorization": "Bearer co-key"})

        assert response.status_code == 200, response.text
        results = response.json()["results"]
        assert [r["index"] for r in results] == best_first(backend, DOCS)
        assert [r["document"] for r in results] == [{"text": DOCS[r["index"]]} for r in results]

    def test_a_jina_body_gets_its_documents_unless_it_asks_not_to(self, http):
        # Jina's return_documents defaults to true, and its clients read results[].document.text
        body = {"model": "jina-reranker-v2-base-multilingual", "query": QUERY, "documents": DOCS}
        auth = {"authorization": "Bearer co-key"}
        results = http.post("/v1/rerank", json=body, headers=auth).json()["results"]
        assert all(r["document"] == {"text": DOCS[r["index"]]} for r in results)

        quiet = http.post("/v1/rerank", json={**body, "return_documents": False}, headers=auth)
        assert all(set(r) == {"index", "relevance_score"} for r in quiet.json()["results"])
        # Cohere v2 (no return_documents in its API) and TEI answer without documents unless asked
        plain = http.post("/v2/rerank", json={"query": QUERY, "documents": DOCS}, headers=auth)
        assert all(set(r) == {"index", "relevance_score"} for r in plain.json()["results"])


class TestLangChain:
    def test_langchains_default_top_n_over_the_document_count_returns_them_all(self, http, backend):
        body = compact(
            {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS[:2], "top_n": 3,
             "max_tokens_per_doc": None}
        )
        response = http.post("/v2/rerank", content=body, headers=FERN_HEADERS)

        assert response.status_code == 200, response.text
        assert [r["index"] for r in response.json()["results"]] == best_first(backend, DOCS[:2])


class TestNativeStillNative:
    def test_a_native_body_with_errors_names_its_fields_as_sent(self, http):
        response = http.post(
            "/v1/rerank",
            json={"task": {"prompt": ""}, "candidates": [{"content": "a"}]},
            headers={"authorization": "Bearer co-key"},
        )

        assert response.status_code == 422
        assert response.json()["error"]["message"].startswith("task.prompt:")
        assert response.json()["detail"][0]["loc"] == ["body", "task", "prompt"]
