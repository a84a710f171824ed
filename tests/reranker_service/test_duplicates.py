"""``ValueModelBackend.forward`` computes a sequence once when a batch holds it several times.

Under test, on the tiny random encoder and decoder: a task whose candidates repeat (on SWE-bench Lite
9% of candidates are a byte-identical copy of another for the same task) runs the backbone over
each distinct sequence once, and every copy gets the value and embedding of the naive path; through
the engine, duplicates from different requests in one batch are computed once too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reranker_service import RerankEngine, ScoreInput, ValueModelBackend
from value_model import Scorer, ValueModel

pytestmark = pytest.mark.anyio

PROMPT = "Fix the crash in parse() when the input is empty: return an empty document instead. " * 3
DISTINCT = [f"diff --git a/src/p{i}.py b/src/p{i}.py\n+    return Document({i})\n" for i in range(3)]
CANDIDATES = [DISTINCT[0], DISTINCT[1], DISTINCT[0], DISTINCT[2], DISTINCT[1], DISTINCT[0]]


@pytest.fixture(scope="module", params=["encoder", "decoder"])
def artefact(request, tmp_path_factory):
    backbone = request.getfixturevalue(f"tiny_{request.param}_dir")
    torch.manual_seed(0)
    model, tokenizer = ValueModel.from_backbone(str(backbone), seed=3)
    with torch.no_grad():
        model.head.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    return model.save(tmp_path_factory.mktemp(f"dedup-{request.param}"), tokenizer, max_length=256)


def rows_seen(backend: ValueModelBackend) -> list[int]:
    """The backbone's batch sizes, appended at each call."""
    seen: list[int] = []
    backend.scorer.model.backbone.register_forward_hook(
        lambda _m, _args, kwargs, _out: seen.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True
    )
    return seen


class TestDuplicates:
    def test_each_distinct_candidate_is_computed_once_and_every_copy_gets_its_value(self, artefact):
        backend = ValueModelBackend.load(str(artefact))
        seen = rows_seen(backend)
        prepared = backend.prepare(ScoreInput(prompt=PROMPT, candidates=tuple(CANDIDATES)))
        out = backend.forward(prepared.items, embed=True)
        expected = Scorer.from_directory(artefact).score(PROMPT, CANDIDATES)

        assert seen[-1] == len(DISTINCT)
        np.testing.assert_allclose(out.values, expected.values, rtol=1e-5, atol=1e-5)
        assert out.values[0] == out.values[2] == out.values[5] and out.values[1] == out.values[4]
        assert out.embeddings is not None and out.embeddings.shape[0] == len(CANDIDATES)
        np.testing.assert_array_equal(out.embeddings[0], out.embeddings[5])
        assert not np.array_equal(out.embeddings[0], out.embeddings[1])

    def test_a_batch_without_duplicates_is_computed_whole(self, artefact):
        backend = ValueModelBackend.load(str(artefact))
        seen = rows_seen(backend)
        prepared = backend.prepare(ScoreInput(prompt=PROMPT, candidates=tuple(DISTINCT)))
        backend.forward(prepared.items)

        assert seen[-1] == len(DISTINCT)

    async def test_the_same_candidate_from_two_requests_in_one_batch_is_computed_once(self, artefact):
        import asyncio

        backend = ValueModelBackend.load(str(artefact), share_prefix=False)
        seen = rows_seen(backend)
        expected = Scorer.from_directory(artefact).score(PROMPT, DISTINCT[:2]).values
        async with RerankEngine(backend, cache_size=0, max_wait_ms=200) as engine:
            first, second = await asyncio.gather(
                engine.score(PROMPT, DISTINCT[:2]), engine.score(PROMPT, DISTINCT[:2])
            )

        assert sum(seen) == 2
        for result in (first, second):
            np.testing.assert_allclose(result.values, expected, rtol=1e-5, atol=1e-5)
