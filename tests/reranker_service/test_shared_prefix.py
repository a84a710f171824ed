"""``ValueModelBackend`` against the naive path (``value_model.Scorer.score``) on tiny random models.

Under test: shared-prefix scoring for a decoder (the tiny Qwen3 of ``tiny_decoder_dir``: one prefix
forward pass with ``use_cache``, then the candidates' own tokens against its KV cache) gives the same
values and embeddings as scoring every sequence whole, with and without trajectory context, when the
token budget truncates, when a request is split over several model batches, and through the engine;
encoders are never shared. Inputs are serialized exactly as at training time, so the truncation
flags match too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from reranker_service import RerankEngine, ScoreInput, ValueModelBackend
from reranker_service.service import steps_of_messages
from value_model import Scorer, ValueModel

pytestmark = pytest.mark.anyio

PROMPT = (
    "Fix the crash in parse() when the input is empty. The parser should return an empty document "
    "instead of raising IndexError, and keep the error for truly malformed input. "
) * 6
CANDIDATES = [
    f"diff --git a/src/parse_{i}.py b/src/parse_{i}.py\n"
    + "".join(f"+    if not tokens:  # case {i}.{j}\n+        return Document()\n" for j in range(i + 1))
    for i in range(7)
]
CONTEXT = steps_of_messages(
    [
        {"role": "user", "content": "parse('') raises IndexError"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "grep -n def parse"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "src/parse.py:12:def parse(text):"},
    ]
)


def _artefact(backbone_dir, tmp_path, *, max_length: int):
    torch.manual_seed(0)
    model, tokenizer = ValueModel.from_backbone(str(backbone_dir), seed=3)
    with torch.no_grad():  # a head that is not ~0 everywhere, so differences would show
        model.head.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    return model.save(
        tmp_path / f"model-{max_length}",
        tokenizer,
        max_length=max_length,
        calibration={"scale": 1.5, "bias": -0.2},
    )


@pytest.fixture(scope="module")
def decoder_artefacts(tiny_decoder_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("decoder-value-model")
    return {n: _artefact(tiny_decoder_dir, root, max_length=n) for n in (1024, 96)}


@pytest.fixture(scope="module")
def encoder_artefact(tiny_encoder_dir, tmp_path_factory):
    return _artefact(tiny_encoder_dir, tmp_path_factory.mktemp("encoder-value-model"), max_length=128)


def naive(directory, prompt=PROMPT, candidates=CANDIDATES, context=()):
    """Every sequence scored whole by value_model's own scorer."""
    return Scorer.from_directory(directory).score(prompt, candidates, context=list(context) or None)


def served(backend, prompt=PROMPT, candidates=CANDIDATES, context=(), *, embed=False):
    prepared = backend.prepare(
        ScoreInput(prompt=prompt, candidates=tuple(candidates), context=tuple(context))
    )
    return prepared, backend.forward(prepared.items, embed=embed)


class TestDecoderSharesThePrefix:
    @pytest.mark.parametrize("with_context", [False, True], ids=["task-only", "task+context"])
    def test_shared_prefix_values_equal_the_naive_path(self, decoder_artefacts, with_context):
        context = CONTEXT if with_context else ()
        backend = ValueModelBackend.load(str(decoder_artefacts[1024]))
        prepared, out = served(backend, context=context)
        expected = naive(decoder_artefacts[1024], context=context)

        assert backend.share_prefix
        assert len({it.group for it in prepared.items}) == 1 and prepared.items[0].prefix_len > 150
        np.testing.assert_allclose(out.values, expected.values, rtol=0, atol=1e-5)
        assert prepared.truncated == expected.truncated == [False] * len(CANDIDATES)
        np.testing.assert_allclose(
            backend.finalize(CANDIDATES, out.values)[1], expected.scores, rtol=0, atol=1e-5
        )

    def test_ranking_equals_the_naive_ranking(self, decoder_artefacts):
        backend = ValueModelBackend.load(str(decoder_artefacts[1024]))
        _, out = served(backend)
        expected = naive(decoder_artefacts[1024])
        assert list(np.argsort(-out.values)) == list(np.argsort(-expected.values))

    def test_truncated_inputs_still_match_and_are_flagged(self, decoder_artefacts):
        backend = ValueModelBackend.load(str(decoder_artefacts[96]))
        prepared, out = served(backend, context=CONTEXT)
        expected = naive(decoder_artefacts[96], context=CONTEXT)

        np.testing.assert_allclose(out.values, expected.values, rtol=0, atol=1e-5)
        assert prepared.truncated == expected.truncated and all(prepared.truncated)

    def test_embeddings_equal_the_pooled_states_of_whole_sequences(self, decoder_artefacts):
        shared = ValueModelBackend.load(str(decoder_artefacts[1024]))
        whole = ValueModelBackend.load(str(decoder_artefacts[1024]), share_prefix=False)
        _, a = served(shared, embed=True)
        prepared, b = served(whole, embed=True)

        assert all(it.prefix_len == 0 for it in prepared.items)
        np.testing.assert_allclose(a.values, b.values, rtol=0, atol=1e-5)
        np.testing.assert_allclose(a.embeddings, b.embeddings, rtol=0, atol=1e-5)

    async def test_a_request_split_over_several_batches_by_the_engine_still_matches(self, decoder_artefacts):
        backend = ValueModelBackend.load(str(decoder_artefacts[1024]))
        expected = naive(decoder_artefacts[1024])
        async with RerankEngine(backend, max_batch_size=3, max_batch_tokens=4096) as engine:
            result = await engine.score(PROMPT, CANDIDATES)

        assert engine.stats.batches == 3
        np.testing.assert_allclose(result.values, expected.values, rtol=0, atol=1e-5)
        np.testing.assert_allclose(result.scores, expected.scores, rtol=0, atol=1e-5)

    async def test_concurrent_requests_with_different_prefixes_each_match(self, decoder_artefacts):
        backend = ValueModelBackend.load(str(decoder_artefacts[1024]))
        prompts = [PROMPT, "Make the CLI print --help when run without arguments.", PROMPT[:200]]
        import asyncio

        async with RerankEngine(backend, max_wait_ms=50) as engine:
            results = await asyncio.gather(*(engine.score(p, CANDIDATES[:4]) for p in prompts))

        for prompt, result in zip(prompts, results, strict=True):
            np.testing.assert_allclose(
                result.values,
                naive(decoder_artefacts[1024], prompt, CANDIDATES[:4]).values,
                rtol=0,
                atol=1e-5,
            )

    @pytest.mark.parametrize(
        "candidates",
        [
            ["x", "diff --git a/a.py b/a.py\n" + "+    a long line of code\n" * 120, "", "y = 1"],
            ["same patch"] * 3,
            ["abc", "abc def", "abc def ghi"],
            ["the only candidate"],
        ],
        ids=["very-different-lengths", "identical", "each-a-prefix-of-the-next", "one"],
    )
    @pytest.mark.parametrize("prompt", [PROMPT, ""], ids=["task", "empty-task"])
    async def test_padding_edge_cases_through_the_engine_equal_the_naive_path(
        self, decoder_artefacts, candidates, prompt
    ):
        backend = ValueModelBackend.load(str(decoder_artefacts[1024]))
        async with RerankEngine(backend, max_batch_tokens=300, max_batch_size=2) as engine:
            result = await engine.score(prompt, candidates)

        expected = naive(decoder_artefacts[1024], prompt, candidates)
        np.testing.assert_allclose(result.values, expected.values, rtol=0, atol=1e-5)
        assert result.truncated == expected.truncated


class TestEncoderIsScoredWhole:
    def test_encoder_items_share_nothing_and_match_the_naive_path(self, encoder_artefact):
        backend = ValueModelBackend.load(str(encoder_artefact))
        prepared, out = served(backend, context=CONTEXT)

        assert not backend.share_prefix
        assert all(it.prefix_len == 0 and it.group is None for it in prepared.items)
        np.testing.assert_allclose(
            out.values, naive(encoder_artefact, context=CONTEXT).values, rtol=0, atol=1e-5
        )

    def test_asking_an_encoder_to_share_its_prefix_is_refused(self, encoder_artefact):
        with pytest.raises(ValueError, match="needs a causal decoder with last-token pooling"):
            ValueModelBackend.load(str(encoder_artefact), share_prefix=True)


class TestIssueReadingCombiner:
    async def test_the_engine_passes_the_task_prompt_to_a_combiner_that_reads_the_issue(
        self, encoder_artefact
    ):
        # A combiner over the raw value and whether a patch touches a file the issue names: the served
        # (cached-values) path must hand it the request's prompt and give the naive joint scores.
        from value_model.consensus import Combiner

        backend = ValueModelBackend.load(str(encoder_artefact))
        backend.scorer.combiner = Combiner(inputs=("value", "issue_files"), weights=(0.5, 2.0))
        prompt = "src/parse_3.py crashes on empty input"
        patches = [
            f"diff --git a/src/parse_{i}.py b/src/parse_{i}.py\n"
            f"--- a/src/parse_{i}.py\n+++ b/src/parse_{i}.py\n"
            f"@@ -1,2 +1,4 @@\n def parse(text):\n+    if not text:  # {i}\n+        return Document()\n"
            for i in range(5)
        ]
        expected = naive(encoder_artefact, prompt=prompt, candidates=patches)  # no combiner: raw values
        async with RerankEngine(backend) as engine:
            result = await engine.score(prompt, patches)

        touched = np.array([1.0 if i == 3 else 0.0 for i in range(len(patches))])
        np.testing.assert_allclose(result.values, expected.values, rtol=0, atol=1e-5)  # raw, as cached
        np.testing.assert_allclose(result.final, 0.5 * expected.values + 2.0 * touched, rtol=0, atol=1e-5)
        assert int(np.argmax(result.final)) == 3


class TestTruncationOptions:
    def test_truncate_false_refuses_an_input_over_the_budget(self, decoder_artefacts):
        from reranker_service import InputTooLongError

        backend = ValueModelBackend.load(str(decoder_artefacts[96]))
        with pytest.raises(InputTooLongError, match="do not fit the model's 96-token budget"):
            backend.prepare(ScoreInput(prompt=PROMPT, candidates=tuple(CANDIDATES), truncate=False))

    @pytest.mark.parametrize("side", ["right", "left"])
    def test_max_tokens_per_candidate_cuts_the_candidate_first_and_flags_it(self, decoder_artefacts, side):
        backend = ValueModelBackend.load(str(decoder_artefacts[1024]))
        long = CANDIDATES[-1]
        prepared = backend.prepare(
            ScoreInput(
                prompt="p", candidates=(long, "short"), max_tokens_per_candidate=8, truncation_side=side
            )
        )
        tokenizer = backend.scorer.tokenizer
        kept = tokenizer.decode(prepared.items[0].payload[0], skip_special_tokens=True)
        edge = tokenizer.decode(
            tokenizer(long, add_special_tokens=False)["input_ids"][:3]
            if side == "right"
            else tokenizer(long, add_special_tokens=False)["input_ids"][-3:]
        )
        assert edge in kept
        assert prepared.truncated == [True, False]
