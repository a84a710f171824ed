"""The neighbour index with the deterministic dummy backend (its embedding is a hash of the candidate).

Under test: ``build_index`` pins the lake versions it read and keeps each candidate's outcomes;
search returns the most similar first; an index saved to ``index_dir`` is reused for the same lake
versions and model and rebuilt for new ones; ``return_neighbors`` over HTTP returns each result's
neighbours, warns while the index builds or when neighbours are off, and a reload re-embeds the rows
of the lake versions pinned at start-up for the new model (a model whose index was built is reused).
The real model on the real Lite lake is in ``test_real_model.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from reranker_service import DummyBackend, NeighborIndex, ScoreInput, Settings, build_index, create_app
from reranker_service.backends import Forwarded, Item
from reranker_service.index import load_or_build_index
from reranker_service.service import RerankService
from tests.reranker_service._helpers import WAIT_S
from trajectory_lake import Lake
from trajectory_lake.feedback import Feedback, ServedCandidate, write_feedback

HISTORY = {
    "served/t1": ("Fix parse() on empty input", [("diff one", 1.0), ("diff two", 0.0)]),
    "served/t2": ("Make the CLI print help", [("diff three", 1.0), ("diff one", 0.0)]),
}


def fill(lake: Lake, history=HISTORY) -> Lake:
    for n, (task_id, (prompt, rows)) in enumerate(history.items()):
        for i, (content, outcome) in enumerate(rows):
            write_feedback(
                lake,
                Feedback(
                    request_id=f"hist-{n}-{i}",
                    model_uri="x",
                    task_id=task_id,
                    prompt=prompt,
                    candidates=[ServedCandidate(content=c) for c, _ in rows],
                    values=[0.0] * len(rows),
                    scores=[0.5] * len(rows),
                    served_at=datetime(2026, 1, 1, tzinfo=UTC),
                    outcome_index=i,
                    outcome_value=outcome,
                ),
            )
    return lake


@pytest.fixture
def lake(tmp_path) -> Lake:
    return fill(Lake(tmp_path / "lake"))


class TestIndex:
    def test_the_index_holds_every_candidate_with_its_outcomes_and_pinned_versions(self, lake):
        index = build_index(lake, DummyBackend())

        assert len(index) == 4
        assert index.manifest["versions"] == {t: lake.version(t) for t in ("candidates", "tasks", "outcomes")}
        assert index.manifest["model_revision"] == "dummy:dummy:0"
        outcomes = dict(
            zip(
                index.rows.get_column("task_id").to_list(),
                index.rows.get_column("outcomes").to_list(),
                strict=False,
            )
        )
        assert set(outcomes) == {"served/t1", "served/t2"}

    def test_search_returns_the_identical_candidate_first(self, lake):
        backend = DummyBackend()
        index = build_index(lake, backend)
        query = backend.forward(
            backend.prepare(ScoreInput(prompt="anything", candidates=("diff three",))).items, embed=True
        ).embeddings

        (found,) = index.search(query, 2)
        assert found[0].similarity == pytest.approx(1.0)
        assert (found[0].task_id, found[0].outcomes) == ("served/t2", {"resolved": 1.0})
        assert found[0].similarity >= found[1].similarity

    def test_a_pinned_version_ignores_later_candidates(self, lake):
        pinned = lake.version("candidates")
        fill(lake, {"served/t3": ("Later task", [("diff four", 1.0)])})
        assert len(build_index(lake, DummyBackend(), version=pinned)) == 4
        assert len(build_index(lake, DummyBackend())) == 5

    def test_a_saved_index_is_reused_for_the_same_inputs_only(self, lake, tmp_path):
        first = load_or_build_index(lake, DummyBackend(), directory=tmp_path / "indexes")
        again = load_or_build_index(lake, DummyBackend(), directory=tmp_path / "indexes")
        other = load_or_build_index(lake, DummyBackend("other"), directory=tmp_path / "indexes")

        assert again.manifest["built_at"] == first.manifest["built_at"]
        assert other.manifest["model_revision"] == "dummy:other:0"
        assert len(list((tmp_path / "indexes").iterdir())) == 2

    def test_save_and_load_round_trip(self, lake, tmp_path):
        index = build_index(lake, DummyBackend())
        loaded = NeighborIndex.load(index.save(tmp_path / "ix"))
        probe = np.eye(8, dtype=np.float32)[:2]
        assert [[n.candidate_id for n in found] for found in loaded.search(probe, 3)] == [
            [n.candidate_id for n in found] for found in index.search(probe, 3)
        ]


@pytest.mark.slow
class TestReturnNeighbors:
    @staticmethod
    def ready(http, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = http.get("/v1/models").json()["data"][0]["neighbors"]
            if status["status"] == "ready":
                return status
            time.sleep(0.05)
        raise AssertionError(f"the index was not ready: {status}")

    def test_each_result_carries_its_nearest_historical_candidates(self, live_server, lake, tmp_path):
        server = live_server(
            create_app(
                Settings(lake=lake.uri, neighbors=True, index_dir=str(tmp_path / "ix")),
                backend=DummyBackend(),
            )
        )
        with server.client() as http:
            status = self.ready(http)
            body = http.post(
                "/v1/rerank",
                json={
                    "task": {"prompt": "New task"},
                    "candidates": [{"content": "diff three"}, {"content": "something new"}],
                    "return_neighbors": 2,
                },
            ).json()

        assert status["size"] == 4 and status["versions"]["candidates"] == lake.version("candidates")
        by_content = {r["index"]: r for r in body["results"]}
        nearest = by_content[0]["neighbors"]
        assert len(nearest) == 2
        assert nearest[0]["similarity"] == pytest.approx(1.0)
        assert (nearest[0]["task_id"], nearest[0]["outcomes"]) == ("served/t2", {"resolved": 1.0})
        assert len(by_content[1]["neighbors"]) == 2
        assert body["warnings"] == []

    def test_return_neighbors_true_uses_the_default_k(self, live_server, lake):
        server = live_server(
            create_app(Settings(lake=lake.uri, neighbors=True, neighbors_k=3), backend=DummyBackend())
        )
        with server.client() as http:
            self.ready(http)
            body = http.post(
                "/v1/rerank",
                json={"task": {"prompt": "t"}, "candidates": [{"content": "x"}], "return_neighbors": True},
            ).json()
        assert len(body["results"][0]["neighbors"]) == 3

    def test_neighbors_off_is_a_warning_not_an_error(self, live_server):
        server = live_server(create_app(Settings(), backend=DummyBackend()))
        with server.client() as http:
            body = http.post(
                "/v1/rerank",
                json={"task": {"prompt": "t"}, "candidates": [{"content": "x"}], "return_neighbors": 2},
            ).json()
        assert "neighbors" not in body["results"][0]
        assert any("neighbours are off" in w for w in body["warnings"])

    def test_a_reload_rebuilds_the_index_for_the_new_model(self, live_server, lake):
        server = live_server(
            create_app(
                Settings(lake=lake.uri, neighbors=True),
                backend=DummyBackend(),
                loader=lambda ref: DummyBackend("new", version="2"),
            )
        )
        with server.client() as http:
            assert self.ready(http)["model_revision"] == "dummy:dummy:0"
            http.post("/admin/reload")
            assert self.ready(http)["model_revision"] == "dummy:new:2"

    def test_a_reload_reuses_the_pinned_lake_versions_and_a_known_models_index(
        self, live_server, lake, monkeypatch
    ):
        import reranker_service.service as service_module

        builds = []
        real = service_module.load_or_build_index

        def counted(*args, **kwargs):
            index = real(*args, **kwargs)
            builds.append(index)
            return index

        monkeypatch.setattr(service_module, "load_or_build_index", counted)
        models = iter([DummyBackend("new", version="2"), DummyBackend()])
        server = live_server(
            create_app(
                Settings(lake=lake.uri, neighbors=True),
                backend=DummyBackend(),
                loader=lambda ref: next(models),
            )
        )
        with server.client() as http:
            first = self.ready(http)
            fill(lake, {"served/t3": ("A later task", [("diff four", 1.0)])})  # the lake moves on
            http.post("/admin/reload")
            second = self.ready(http)
            assert second["model_revision"] == "dummy:new:2"
            http.post("/admin/reload")  # back to the first model
            third = self.ready(http)
        assert second["versions"] == first["versions"] and second["size"] == first["size"] == 4
        assert third["model_revision"] == first["model_revision"]
        assert len(builds) == 2  # the first model's index was not built again

    @pytest.mark.parametrize("k", [-1, 51])
    def test_return_neighbors_out_of_range_gets_422(self, live_server, k):
        server = live_server(create_app(Settings(), backend=DummyBackend()))
        with server.client() as http:
            response = http.post(
                "/v1/rerank",
                json={"task": {"prompt": "t"}, "candidates": [{"content": "x"}], "return_neighbors": k},
            )
        assert response.status_code == 422


class ForwardThreads(DummyBackend):
    """Records the thread of every ``forward`` call."""

    def __init__(self, name: str = "dummy", *, version: str = "0") -> None:
        super().__init__(name, version=version)
        self.threads: list[str] = []

    def forward(self, items: Sequence[Item], *, embed: bool = False) -> Forwarded:
        self.threads.append(threading.current_thread().name)
        return super().forward(items, embed=embed)


class TestIndexBuildAndServing:
    def test_the_index_is_embedded_in_the_engines_model_thread(self, lake):
        # One model thread: index batches and request batches must never run the model at the same
        # time (CPU oversubscription, or a second activation footprint on the GPU).
        backend = ForwardThreads()

        async def run() -> None:
            async with RerankService(Settings(lake=lake.uri, neighbors=True), backend) as service:
                await service.wait_for_index(WAIT_S)
                await service.rerank("t", ["x"])

        asyncio.run(run())
        assert len(backend.threads) == 3  # two prompts of history, one request
        assert all(name.startswith("harvest-model") for name in backend.threads), backend.threads

    def test_a_failed_build_says_why_in_models_and_to_whoever_waits_for_it(self, tmp_path):
        # /v1/models said only "TableNotFoundError" (no path, no reason), and wait_for_index waited out
        # its whole timeout on a build that had already failed.
        missing = tmp_path / "no-lake"

        async def run() -> tuple[dict, float]:
            async with RerankService(Settings(lake=str(missing), neighbors=True), DummyBackend()) as service:
                started = time.monotonic()
                reason = r"could not be built: TableNotFoundError: no lake at .*does not exist"
                with pytest.raises(RuntimeError, match=reason):
                    await service.wait_for_index(WAIT_S)
                return service.index_status(), time.monotonic() - started

        status, waited = asyncio.run(run())
        assert status["status"] == "failed" and str(missing) in status["error"], status
        assert "\n" not in status["error"] and waited < WAIT_S / 2

    def test_a_reload_after_a_failed_build_waits_for_the_new_build_not_the_old_error(self, tmp_path):
        # The failed build's error stayed set until the new build's task first ran: wait_for_index, called
        # right after the reload, raised the replaced model's failure instead of waiting for the new index.
        missing = tmp_path / "lake"

        async def run() -> str:
            loader = lambda ref: DummyBackend("new", version="2")  # noqa: E731
            async with RerankService(Settings(lake=str(missing), neighbors=True), DummyBackend(),
                                     loader=loader) as service:
                with pytest.raises(RuntimeError, match="could not be built"):
                    await service.wait_for_index(WAIT_S)
                fill(Lake(missing))  # the lake is there now
                await service.reload()
                return (await service.wait_for_index(WAIT_S)).revision

        assert asyncio.run(run()) == "dummy:new:2"

    def test_a_failed_builds_reason_never_shows_url_credentials_or_tokens(self):
        from reranker_service.service import _public_reason

        error = OSError("cannot read https://bob:hunter2@lakefs.example/repo/main/candidates?sig=SAS&se=1\n"
                        "  caused by: 403 at s3://bucket/lake/x")
        reason = _public_reason(error)
        assert reason == ("OSError: cannot read https://***@lakefs.example/repo/main/candidates?*** "
                          "caused by: 403 at s3://bucket/lake/x")
        assert len(_public_reason(ValueError("x" * 2000))) == 500

    def test_a_reload_stops_the_replaced_models_index_build(self, lake, slow_backend):
        # The old model's build would otherwise embed the whole lake with a model nobody serves.
        async def run() -> str:
            settings = Settings(lake=lake.uri, neighbors=True)
            loader = lambda ref: DummyBackend("new", version="2")  # noqa: E731
            async with RerankService(settings, slow_backend, loader=loader) as service:
                while not slow_backend.entered.is_set():  # its first index batch is in the model
                    await asyncio.sleep(0.005)
                await service.reload()
                slow_backend.release.set()
                index = await service.wait_for_index(WAIT_S)
                await asyncio.sleep(0.3)  # time for the old build to take its next batch, if it would
                return index.revision

        assert asyncio.run(run()) == "dummy:new:2"
        assert slow_backend.calls == 1  # of the two prompts of history, only the batch already running
