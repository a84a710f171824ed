"""The service with a real trained value model: registry loading, serving real Lite tasks, the clients.

A module fixture ingests the real ``swebench-lite`` set into a temporary lake, trains a tiny value model
on it (48 examples at 64 tokens, one epoch), logs it to a temporary SQLite MLflow store and registers
it as ``test-value`` with alias ``champion``. The tests then load it as a ``ValueModelBackend``, serve it
through ``create_app`` under a real uvicorn server (the model loads in lifespan), and call it over HTTP
and through ``RerankClient`` / ``AsyncRerankClient``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mlflow
import numpy as np
import polars as pl
import pytest

from reranker_service import (
    AsyncRerankClient,
    RerankClient,
    RerankError,
    Settings,
    ValueModelBackend,
    create_app,
)
from tests.reranker_service._helpers import LiveServer, serve
from trajectory_lake import Lake, ingest
from value_model import ModelNotFoundError, TrainConfig
from value_model.pipeline import TrainingReport, train_from_lake

pytestmark = pytest.mark.slow

MODEL = "models:/test-value@champion"


@dataclass(frozen=True)
class Trained:
    """The trained model's store and the lake it was trained on."""

    lake: Lake
    tracking_uri: str
    report: TrainingReport


@dataclass(frozen=True)
class LiteTask:
    """One real SWE-bench Lite task with its real candidates (several systems' patches)."""

    task_id: str
    prompt: str
    candidate_ids: list[str]
    contents: list[str]

    def body(self, **extra: object) -> dict[str, object]:
        return {
            "task": {"prompt": self.prompt, "id": self.task_id},
            "candidates": [
                {"id": i, "content": c, "kind": "patch"} for i, c in zip(self.candidate_ids, self.contents)
            ],
            **extra,
        }


@pytest.fixture(scope="module")
def trained(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trained]:
    root = tmp_path_factory.mktemp("reranker-real-model")
    tracking_uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HARVEST_HOME", str(root / "home"))
        # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI; record its current state so it is restored.
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        # With an explicit sqlite URI, MLflow puts run artefacts in ./mlruns: keep them in the tmp dir.
        mp.chdir(root)
        # Registry loads download a copy of the model into a new temporary directory each time and
        # never remove it: keep those copies under pytest's tmp tree.
        (root / "tmp").mkdir()
        mp.setattr(tempfile, "tempdir", str(root / "tmp"))
        lake = Lake(root / "lake")
        ingest([shared_data / "swebench-lite"], lake)
        config = TrainConfig(max_length=64, epochs=1, max_examples=48, batch_size=16, val_fraction=0.05)
        report = train_from_lake(
            lake,
            config,
            register="test-value",
            alias="champion",
            tracking_uri=tracking_uri,
            output_dir=root / "model",
        )
        try:
            yield Trained(lake=lake, tracking_uri=tracking_uri, report=report)
        finally:
            mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # unset mlflow's process-wide URI


@pytest.fixture(scope="module")
def lite_task(trained: Trained) -> LiteTask:
    """The first Lite task (by id) with at least five non-empty candidates, read from the lake."""
    candidates = (
        trained.lake.read("candidates")
        .filter((pl.col("kind") == "patch") & (pl.col("content").str.len_chars() > 0))
        .join(trained.lake.read("tasks").select("task_id", "prompt"), on="task_id")
        .sort("task_id", "candidate_id")
    )
    counts = candidates.group_by("task_id").len().filter(pl.col("len") >= 5).sort("task_id")
    task_id = counts.get_column("task_id")[0]
    rows = candidates.filter(pl.col("task_id") == task_id)
    return LiteTask(
        task_id=task_id,
        prompt=rows.get_column("prompt")[0],
        candidate_ids=rows.get_column("candidate_id").to_list(),
        contents=rows.get_column("content").to_list(),
    )


@pytest.fixture(scope="module")
def backend(trained: Trained) -> ValueModelBackend:
    return ValueModelBackend.load(MODEL, tracking_uri=trained.tracking_uri)


@pytest.fixture(scope="module")
def server(trained: Trained) -> Iterator[LiveServer]:
    """The app as deployed: no backend passed, so lifespan loads ``settings.model`` from the registry."""
    with serve(create_app(Settings(model=MODEL, tracking_uri=trained.tracking_uri))) as live:
        yield live


class TestRegistryBackend:
    def test_backend_loads_the_champion_and_describes_it(self, backend):
        assert (backend.info.name, backend.info.version, backend.info.uri) == ("test-value", "1", MODEL)
        assert backend.info.capabilities["calibrated"] is True
        assert backend.info.capabilities["max_length"] == 64

    def test_backend_scores_real_candidates_as_probabilities(self, backend, lite_task):
        scored = backend.score(lite_task.prompt, lite_task.contents)

        n = len(lite_task.contents)
        assert scored.values.shape == scored.scores.shape == (n,)
        assert np.all(np.isfinite(scored.values))
        assert np.all((scored.scores >= 0) & (scored.scores <= 1))
        assert len(scored.truncated) == n and any(scored.truncated)  # real issues do not fit in 64 tokens

    def test_backend_scores_the_same_way_as_the_trained_model(self, backend, trained, lite_task):
        from value_model import Scorer

        direct = Scorer.from_directory(trained.report.model_dir).score(lite_task.prompt, lite_task.contents)
        np.testing.assert_allclose(
            backend.score(lite_task.prompt, lite_task.contents).values, direct.values, rtol=1e-5, atol=1e-6
        )

    @pytest.mark.parametrize(
        "uri", ["models:/no-such-model@champion", "models:/test-value@no-such-alias", "models:/test-value/99"]
    )
    def test_load_raises_model_not_found_when_the_reference_does_not_exist(self, trained, uri):
        with pytest.raises(ModelNotFoundError, match="no registered model"):
            ValueModelBackend.load(uri, tracking_uri=trained.tracking_uri)

    def test_server_does_not_start_when_the_model_does_not_exist(self, trained):
        app = create_app(Settings(model="models:/no-such-model@champion", tracking_uri=trained.tracking_uri))
        with pytest.raises(RuntimeError, match="exited before it started"), serve(app):
            pass


class TestServedModel:
    def test_ready_names_the_registered_model(self, server):
        with server.client() as http:
            response = http.get("/ready")
        assert response.json() == {"status": "ready", "model": "test-value", "version": "1"}

    def test_rerank_of_a_real_task_ranks_every_candidate_by_value(self, server, lite_task):
        with server.client() as http:
            response = http.post("/v1/rerank", json=lite_task.body())

        assert response.status_code == 200, response.text
        body = response.json()
        results = body["results"]
        assert body["model"] == "test-value/1"
        assert [r["rank"] for r in results] == list(range(1, len(lite_task.contents) + 1))
        assert sorted(r["index"] for r in results) == list(range(len(lite_task.contents)))
        assert [r["id"] for r in results] == [lite_task.candidate_ids[r["index"]] for r in results]
        values = [r["value"] for r in results]
        assert values == sorted(values, reverse=True)
        assert all(0.0 <= r["score"] <= 1.0 for r in results)

    def test_rerank_reports_truncation_when_candidates_exceed_the_token_budget(self, server, lite_task):
        with server.client() as http:
            body = http.post("/v1/rerank", json=lite_task.body()).json()

        assert body["usage"]["truncated"] > 0
        assert any(f"{body['usage']['truncated']} candidate(s) were truncated" in w for w in body["warnings"])

    def test_identical_requests_get_identical_scores(self, server, lite_task):
        with server.client() as http:
            first = http.post("/v1/rerank", json=lite_task.body()).json()["results"]
            second = http.post("/v1/rerank", json=lite_task.body()).json()["results"]

        assert first == second

    def test_served_scores_match_the_backend_loaded_directly(self, server, backend, lite_task):
        with server.client() as http:
            results = http.post("/v1/rerank", json=lite_task.body()).json()["results"]

        direct = backend.score(lite_task.prompt, lite_task.contents)
        for r in results:
            assert r["value"] == pytest.approx(direct.values[r["index"]], rel=1e-5, abs=1e-6)
            assert r["score"] == pytest.approx(direct.scores[r["index"]], rel=1e-5, abs=1e-6)


class TestClients:
    def test_sync_client_reranks_a_real_task(self, server, lite_task):
        with RerankClient(server.url) as client:
            assert client.ready()
            body = client.rerank(lite_task.prompt, lite_task.contents, top_n=2, task_id=lite_task.task_id)

        assert [r["rank"] for r in body["results"]] == [1, 2]
        assert body["usage"]["candidates"] == len(lite_task.contents)

    def test_sync_client_raises_rerank_error_422_on_a_bad_request(self, server, lite_task):
        with RerankClient(server.url) as client, pytest.raises(RerankError) as raised:
            client.rerank(lite_task.prompt, [])

        assert raised.value.status == 422
        assert raised.value.body["error"]["type"] == "invalid_request"

    @pytest.mark.anyio
    async def test_async_client_reranks_a_real_task(self, server, lite_task):
        async with AsyncRerankClient(server.url) as client:
            assert await client.health() == {"status": "ok"}
            body = await client.rerank(lite_task.prompt, lite_task.contents)

        values = [r["value"] for r in body["results"]]
        assert values == sorted(values, reverse=True)
        assert len(values) == len(lite_task.contents)

    @pytest.mark.anyio
    async def test_async_client_raises_rerank_error_422_on_a_bad_request(self, server, lite_task):
        async with AsyncRerankClient(server.url) as client:
            with pytest.raises(RerankError) as raised:
                await client.rerank(lite_task.prompt, lite_task.contents, top_n=0)
        assert raised.value.status == 422
