"""Scoring from several threads at once: :meth:`value_model.Scorer.score` and the MLflow pyfunc's ``predict``.

A Hugging Face fast tokenizer keeps its truncation and padding settings in state that every call
rewrites, so threads sharing one tokenize with each other's settings: the serializer then counts a
text's tokens cut at another call's ``max_length`` (or padded to another call's longest input) and
raises "max_length=... is too small", or cuts from wrong counts and scores other inputs, and a batch
tokenized without its padding cannot become a tensor. MLflow's scoring server runs each request's
``predict`` in a thread (``asyncio.to_thread``), and any caller may share a :class:`~value_model.Scorer`
between threads. Under test: real SWE-bench Lite tasks (long issues and patches of different lengths,
cut to 128 tokens) scored by 8 threads at once give what they give scored one at a time.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests._threads import calls_at_once
from value_model import ScoredBatch, Scorer, ValueModel
from value_model.pyfunc import HarvestValueModel, ScoringPair


@pytest.fixture(scope="module")
def artefact(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
    return model.save(tmp_path_factory.mktemp("inference-threads"), tokenizer, max_length=128)


def test_threads_scoring_at_once_get_the_scores_of_one_thread(artefact, lite_candidate_sets):
    scorer = Scorer.from_directory(artefact)
    expected = [scorer.score(prompt, patches) for prompt, patches in lite_candidate_sets]
    assert any(any(s.truncated) for s in expected)  # the budget cuts, so truncation settings matter

    def same(got: ScoredBatch, want: ScoredBatch) -> bool:
        return got.truncated == want.truncated and np.allclose(got.values, want.values, rtol=0, atol=1e-6)

    ok, errors = calls_at_once(lambda i: scorer.score(*lite_candidate_sets[i]), expected, same)
    assert errors == []
    assert ok == [True] * len(expected)


def test_pyfunc_predicting_from_threads_at_once_gives_the_scores_of_one_thread(artefact, lite_candidate_sets):
    pyfunc = HarvestValueModel()
    pyfunc.load_context(SimpleNamespace(artifacts={"value_model": str(artefact)}))
    requests = [[ScoringPair(prompt=prompt, candidate=patch) for patch in patches]
                for prompt, patches in lite_candidate_sets]
    expected = [pyfunc.predict(rows) for rows in requests]

    def same(got: list[float], want: list[float]) -> bool:
        return np.allclose(got, want, rtol=0, atol=1e-6)

    ok, errors = calls_at_once(lambda i: pyfunc.predict(requests[i]), expected, same)
    assert errors == []
    assert ok == [True] * len(expected)
