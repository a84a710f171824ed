"""``ValueModelBackend.prepare`` from several tokenizer threads at once (``tokenizer_workers`` > 1).

A Hugging Face fast tokenizer keeps its truncation settings in state that every call rewrites, so two
threads sharing one can each tokenize with the other's settings: the serializer then counted a
candidate's tokens under another call's ``max_length`` and raised "max_length=128 is too small", or
planned its cuts from wrong counts. Under test: real SWE-bench Lite tasks (long issues and patches,
cut to 128 tokens) prepared by 8 threads at once give exactly the items prepared one at a time.
"""

from __future__ import annotations

import json
import threading

import pytest

from reranker_service import ScoreInput, ValueModelBackend
from value_model import ValueModel


@pytest.fixture(scope="module")
def backend(tiny_encoder_dir, tmp_path_factory):
    model, tokenizer = ValueModel.from_backbone(str(tiny_encoder_dir))
    directory = model.save(tmp_path_factory.mktemp("tokenizer-threads"), tokenizer, max_length=128)
    return ValueModelBackend.load(str(directory))


@pytest.fixture(scope="module")
def lite_tasks(shared_data):
    """(issue, non-empty patches) of the first 40 Lite tasks (by id) with at least two patches."""
    lite = shared_data / "swebench-lite"
    prompts = {}
    for line in (lite / "tasks.jsonl").read_text().splitlines():
        row = json.loads(line)
        prompts[row["instance_id"]] = row["problem_statement"]
    patches: dict[str, list[str]] = {}
    for path in sorted((lite / "candidates").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if (row.get("model_patch") or "").strip() and row["instance_id"] in prompts:
                patches.setdefault(row["instance_id"], []).append(row["model_patch"])
    return [(prompts[i], ps) for i, ps in sorted(patches.items()) if len(ps) >= 2][:40]


def test_threads_preparing_at_once_get_the_items_of_one_thread(backend, lite_tasks):
    queries = [ScoreInput(prompt=prompt, candidates=tuple(patches)) for prompt, patches in lite_tasks]
    expected = [[it.payload for it in backend.prepare(q).items] for q in queries]
    got: dict[int, list[object]] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        for _ in range(3):
            for i in range(k, len(queries), 8):
                try:
                    got[i] = [it.payload for it in backend.prepare(queries[i]).items]
                except ValueError as exc:  # the serializer's "max_length=... is too small"
                    errors.append(exc)
                    return
                if got[i] != expected[i]:
                    return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [got.get(i) == expected[i] for i in range(len(queries))] == [True] * len(queries)
