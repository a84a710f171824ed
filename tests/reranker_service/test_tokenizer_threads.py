"""``ValueModelBackend.prepare`` from several tokenizer threads at once (``tokenizer_workers`` > 1).

A Hugging Face fast tokenizer keeps its truncation settings in state that every call rewrites, so two
threads sharing one can each tokenize with the other's settings: the serializer then counted a
candidate's tokens under another call's ``max_length`` and raised "max_length=128 is too small", or
planned its cuts from wrong counts. Under test: real SWE-bench Lite tasks (long issues and patches,
cut to 128 tokens) prepared by 8 threads at once give exactly the items prepared one at a time.
"""

from __future__ import annotations

import pytest

from reranker_service import ScoreInput, ValueModelBackend
from tests._threads import calls_at_once
from value_model import ValueModel


@pytest.fixture(scope="module")
def backend(tiny_encoder_dir, tmp_path_factory):
    model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
    directory = model.save(tmp_path_factory.mktemp("tokenizer-threads"), tokenizer, max_length=128)
    return ValueModelBackend.load(str(directory))


def test_threads_preparing_at_once_get_the_items_of_one_thread(backend, lite_candidate_sets):
    queries = [ScoreInput(prompt=prompt, candidates=tuple(patches))
               for prompt, patches in lite_candidate_sets]
    expected = [[it.payload for it in backend.prepare(q).items] for q in queries]

    def payloads(i: int) -> list[object]:
        return [it.payload for it in backend.prepare(queries[i]).items]

    ok, errors = calls_at_once(payloads, expected, lambda got, want: got == want)
    assert errors == []
    assert ok == [True] * len(queries)
