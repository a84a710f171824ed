"""The service with a real trained value model: registry loading, serving real Lite tasks, the clients.

A module fixture ingests the real ``swebench-lite`` set into a temporary lake, trains a tiny value model
on it (48 examples at 64 tokens, one epoch), logs it to a temporary SQLite MLflow store and registers
it as ``test-value`` with alias ``champion``. The tests then load it as a ``ValueModelBackend``, serve it
through ``create_app`` under a real uvicorn server (the model loads in lifespan), and call it over HTTP
and through ``RerankClient`` / ``AsyncRerankClient``: the native and the Cohere endpoints, neighbours
from a faiss index of the real Lite lake, feedback into a copy of that lake (and into the next slice),
and reloads when the registry alias moves (by ``POST /admin/reload`` and by alias polling).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
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
    ScoreInput,
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
        scores = [r["score"] for r in results]  # ranked by the final value, which the probability follows
        assert scores == sorted(scores, reverse=True)
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

        direct = backend.score(lite_task.prompt, lite_task.contents)  # final values: a joint scorer's, if any
        raw = backend.forward(
            backend.prepare(ScoreInput(prompt=lite_task.prompt, candidates=tuple(lite_task.contents))).items
        ).values
        # Ranked by the direct values; two candidates whose values differ by float noise (batches of
        # other sizes) may come in either order.
        served = [direct.values[r["index"]] for r in results]
        assert all(a >= b - 1e-5 for a, b in zip(served, served[1:])), served
        for r in results:
            assert r["value"] == pytest.approx(raw[r["index"]], rel=1e-5, abs=1e-6)
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

        scores = [r["score"] for r in body["results"]]
        assert scores == sorted(scores, reverse=True)
        assert len(scores) == len(lite_task.contents)

    @pytest.mark.anyio
    async def test_async_client_raises_rerank_error_422_on_a_bad_request(self, server, lite_task):
        async with AsyncRerankClient(server.url) as client:
            with pytest.raises(RerankError) as raised:
                await client.rerank(lite_task.prompt, lite_task.contents, top_n=0)
        assert raised.value.status == 422


COHERE_SDK_HEADERS = {
    "content-type": "application/json",
    "x-fern-language": "Python",
    "x-fern-sdk-name": "cohere",
    "x-fern-sdk-version": "5.15.0",
    "authorization": "Bearer unused",
}


class TestCohereWithTheTrainedModel:
    def test_the_cohere_sdk_payload_ranks_a_real_task_like_the_native_endpoint(self, server, lite_task):
        sdk_body = json.dumps(
            {"model": "rerank-v3.5", "query": lite_task.prompt, "documents": lite_task.contents, "top_n": 3}
        ).encode()
        with server.client() as http:
            cohere = http.post("/v2/rerank", content=sdk_body, headers=COHERE_SDK_HEADERS)
            native = http.post("/v1/rerank", json=lite_task.body()).json()["results"]

        assert cohere.status_code == 200, cohere.text
        results = cohere.json()["results"]
        assert [r["index"] for r in results] == [r["index"] for r in native[:3]]
        assert [r["relevance_score"] for r in results] == pytest.approx([r["score"] for r in native[:3]])
        assert cohere.json()["model"] == "test-value/1"


@pytest.fixture(scope="module")
def lake_copy(trained: Trained, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A copy of the trained-on Lite lake that feedback may write to."""
    target = tmp_path_factory.mktemp("lite-lake-copy") / "lake"
    shutil.copytree(trained.lake.uri, target)
    return Lake(target)


@pytest.fixture(scope="module")
def full_server(trained: Trained, lake_copy: Lake, tmp_path_factory) -> Iterator[LiveServer]:
    """The registered model with feedback to a copy of its lake and a neighbour index built from it."""
    settings = Settings(
        model=MODEL,
        tracking_uri=trained.tracking_uri,
        lake=lake_copy.uri,
        neighbors=True,
        index_dir=str(tmp_path_factory.mktemp("indexes")),
    )
    with serve(create_app(settings)) as live:
        with live.client() as http:
            deadline = time.monotonic() + 300
            while (status := http.get("/v1/models").json()["data"][0]["neighbors"])["status"] != "ready":
                assert status["status"] == "building", status
                assert time.monotonic() < deadline, "the neighbour index was not built within 300 s"
                time.sleep(0.2)
        yield live


class TestNeighborsOnTheLiteLake:
    def test_the_index_covers_the_lakes_non_empty_patches_at_its_versions(self, full_server, lake_copy):
        with full_server.client() as http:
            status = http.get("/v1/models").json()["data"][0]["neighbors"]

        patches = lake_copy.read("candidates").filter(
            (pl.col("kind") == "patch") & (pl.col("content").str.strip_chars() != "")
        )
        assert status["status"] == "ready"
        assert status["size"] == patches.height
        assert status["versions"]["candidates"] <= lake_copy.version("candidates")

    def test_a_served_lake_candidate_finds_itself_and_its_real_outcome(
        self, full_server, lake_copy, lite_task
    ):
        with full_server.client() as http:
            body = http.post("/v1/rerank", json=lite_task.body(return_neighbors=3)).json()

        resolved = dict(
            lake_copy.read("outcomes")
            .filter(pl.col("name") == "resolved")
            .select("candidate_id", "value")
            .iter_rows()
        )
        for result in body["results"]:
            nearest = result["neighbors"]
            assert len(nearest) == 3
            assert [n["similarity"] for n in nearest] == sorted(
                (n["similarity"] for n in nearest), reverse=True
            )
            top = nearest[0]
            assert top["similarity"] == pytest.approx(1.0, abs=1e-4)
            # the same patch text may appear under several systems: the top hit is one of them
            same = (
                lake_copy.read("candidates")
                .filter(pl.col("content") == lite_task.contents[result["index"]])
                .get_column("candidate_id")
                .to_list()
            )
            assert top["candidate_id"] in same and top["task_id"] == lite_task.task_id
            assert top["outcomes"]["resolved"] == resolved[top["candidate_id"]]


class TestFeedbackWithTheTrainedModel:
    def test_feedback_on_a_real_task_adds_a_label_the_next_slice_reads(
        self, full_server, lake_copy, lite_task
    ):
        from value_model import load_examples

        def label_count(frame: pl.DataFrame, content: str) -> int:
            rows = frame.filter((pl.col("task_id") == lite_task.task_id) & (pl.col("content") == content))
            return int(rows.get_column("label_count").sum())

        with full_server.client() as http:
            ranked = http.post("/v1/rerank", json=lite_task.body()).json()
            best = ranked["results"][0]["index"]
            before = label_count(_frame(load_examples(lake_copy)), lite_task.contents[best])
            response = http.post(
                "/v1/feedback",
                json={
                    "request_id": ranked["id"],
                    "chosen_index": best,
                    "outcome": {"value": 1.0, "source": "tests"},
                },
            )

        assert response.status_code == 200, response.text
        assert response.json()["rows"]["tasks"] == 0  # the lake knows the task: no served copy of it
        event = (
            lake_copy.read("rerank_events").filter(pl.col("request_id") == ranked["id"]).row(0, named=True)
        )
        assert event["task_id"] == lite_task.task_id and event["chosen"] == best
        assert event["model_uri"] == MODEL
        after = label_count(_frame(load_examples(lake_copy)), lite_task.contents[best])
        assert after == before + 1


def _frame(examples):
    return examples.frame if hasattr(examples, "frame") else examples


class TestReloadFromTheRegistry:
    """Last in the module: these move the ``champion`` alias (and put it back)."""

    @pytest.fixture
    def second_version(self, trained: Trained) -> Iterator[str]:
        from value_model.tracking import log_and_register

        registered = log_and_register(
            model_dir=trained.report.model_dir,
            params={},
            metrics={},
            lineage={},
            register="test-value",
            alias=None,
            uri=trained.tracking_uri,
        )
        yield registered.version
        mlflow.MlflowClient(tracking_uri=trained.tracking_uri).set_registered_model_alias(
            "test-value", "champion", "1"
        )

    def test_admin_reload_serves_the_version_the_alias_now_names(self, trained, second_version, lite_task):
        client = mlflow.MlflowClient(tracking_uri=trained.tracking_uri)
        with (
            serve(create_app(Settings(model=MODEL, tracking_uri=trained.tracking_uri))) as live,
            live.client() as http,
        ):
            before = http.post("/v1/rerank", json=lite_task.body()).json()
            client.set_registered_model_alias("test-value", "champion", second_version)
            reloaded = http.post("/admin/reload").json()
            after = http.post("/v1/rerank", json=lite_task.body()).json()

        assert reloaded == {
            "previous": "test-value/1",
            "model": f"test-value/{second_version}",
            "revision": reloaded["revision"],
            "changed": True,
        }
        assert (before["model"], after["model"]) == ("test-value/1", f"test-value/{second_version}")
        assert after["usage"]["cached"] == 0  # a new revision: nothing answered from the old model's cache
        assert [r["value"] for r in after["results"]] == pytest.approx(
            [r["value"] for r in before["results"]]
        )

    def test_alias_polling_picks_up_a_moved_alias_by_itself(self, trained, second_version):
        client = mlflow.MlflowClient(tracking_uri=trained.tracking_uri)
        settings = Settings(model=MODEL, tracking_uri=trained.tracking_uri, reload_poll_s=0.2)
        with serve(create_app(settings)) as live, live.client() as http:
            assert http.get("/ready").json()["version"] == "1"
            client.set_registered_model_alias("test-value", "champion", second_version)
            deadline = time.monotonic() + 60
            while http.get("/ready").json()["version"] != second_version:
                assert time.monotonic() < deadline, "the moved alias was never picked up"
                time.sleep(0.1)
