"""The ``cpu_linear`` setting: which kernels a served backbone's Linear layers run on a CPU.

Under test, on tiny random models: ``onednn`` (the default on CPU) gives the float32 values of the
naive path (``value_model.Scorer.score``) and their ranking, for an encoder and for a decoder scored
with a shared prefix, and keeps the revision; the approximate ``int8`` and ``bf16`` stay close to
float32, are reported in the capabilities and change the revision (so score-cache keys and the
neighbour index never mix their values with float32 ones); how kinds resolve per device; the
``HARVEST_CPU_LINEAR`` variable; and a server started from settings serving with the chosen kernels
over real HTTP.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from reranker_service import ScoreInput, Settings, ValueModelBackend, create_app
from reranker_service.backends._cpu_linear import (
    CPU_LINEAR_KINDS,
    Int8Linear,
    PackedLinear,
    onednn_available,
    resolve_cpu_linear,
)
from reranker_service.settings import _CPU_LINEAR
from value_model import Scorer, ValueModel

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="this torch has no oneDNN")

PROMPT = "Fix the crash in parse() when the input is empty: return an empty document instead. " * 3
CANDIDATES = [
    f"diff --git a/src/parse_{i}.py b/src/parse_{i}.py\n"
    + "".join(f"+    if not tokens:  # case {i}.{j}\n+        return Document({j})\n" for j in range(i + 1))
    for i in range(6)
]


def _artefact(backbone_dir, directory, *, max_length: int):
    torch.manual_seed(0)
    model, tokenizer = ValueModel.from_backbone(str(backbone_dir), seed=3)
    with torch.no_grad():  # a head that is not ~0 everywhere, so differences would show
        model.head.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    return model.save(directory, tokenizer, max_length=max_length)


@pytest.fixture(scope="module")
def encoder_artefact(tiny_encoder_dir, tmp_path_factory):
    return _artefact(tiny_encoder_dir, tmp_path_factory.mktemp("cpu-linear-encoder"), max_length=128)


@pytest.fixture(scope="module")
def decoder_artefact(tiny_decoder_dir, tmp_path_factory):
    return _artefact(tiny_decoder_dir, tmp_path_factory.mktemp("cpu-linear-decoder"), max_length=512)


def naive(directory) -> np.ndarray:
    return Scorer.from_directory(directory).score(PROMPT, CANDIDATES).values


def served(backend: ValueModelBackend) -> np.ndarray:
    prepared = backend.prepare(ScoreInput(prompt=PROMPT, candidates=tuple(CANDIDATES)))
    return backend.forward(prepared.items).values


def linears(backend: ValueModelBackend) -> list[type]:
    return [type(m) for m in backend.scorer.model.backbone.modules() if "Linear" in type(m).__name__]


class TestResolve:
    def test_auto_is_onednn_on_cpu_and_torch_elsewhere(self):
        assert resolve_cpu_linear("auto", "cpu") == ("onednn" if onednn_available() else "torch")
        assert resolve_cpu_linear("auto", "cuda:0") == "torch"

    def test_an_unknown_kind_is_refused_with_the_choices(self):
        with pytest.raises(ValueError, match="cpu_linear must be one of auto, torch, onednn, int8, bf16"):
            resolve_cpu_linear("fp8", "cpu")

    @pytest.mark.parametrize("kind", ["onednn", "int8", "bf16"])
    def test_cpu_kernels_are_refused_for_another_device(self, kind):
        with pytest.raises(ValueError, match=f"cpu_linear={kind} is for CPU inference"):
            resolve_cpu_linear(kind, "cuda")

    def test_the_settings_accept_the_backends_kinds(self):
        assert _CPU_LINEAR == CPU_LINEAR_KINDS


@needs_onednn
class TestFloat32Kernels:
    def test_onednn_is_the_default_and_replaces_the_backbones_linears_not_the_head(self, encoder_artefact):
        backend = ValueModelBackend.load(str(encoder_artefact))

        assert backend.info.capabilities["cpu_linear"] == "onednn"
        assert linears(backend) and set(linears(backend)) == {PackedLinear}
        assert type(backend.scorer.model.head) is nn.Linear

    def test_onednn_values_and_ranking_equal_the_naive_path_for_an_encoder(self, encoder_artefact):
        values = served(ValueModelBackend.load(str(encoder_artefact), cpu_linear="onednn"))
        expected = naive(encoder_artefact)

        np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-5)
        assert list(np.argsort(-values)) == list(np.argsort(-expected))

    def test_onednn_with_a_shared_prefix_equals_the_naive_path_for_a_decoder(self, decoder_artefact):
        backend = ValueModelBackend.load(str(decoder_artefact), cpu_linear="onednn")
        values = served(backend)

        assert backend.share_prefix and set(linears(backend)) == {PackedLinear}
        np.testing.assert_allclose(values, naive(decoder_artefact), rtol=1e-5, atol=1e-5)

    def test_onednn_keeps_the_revision_of_the_float32_model(self, encoder_artefact):
        onednn = ValueModelBackend.load(str(encoder_artefact), cpu_linear="onednn")
        plain = ValueModelBackend.load(str(encoder_artefact), cpu_linear="torch")

        assert onednn.info.revision == plain.info.revision
        assert set(linears(plain)) == {nn.Linear}
        np.testing.assert_allclose(served(plain), naive(encoder_artefact), rtol=1e-6, atol=1e-6)


@needs_onednn
class TestApproximateKernels:
    @pytest.mark.parametrize(("kind", "share"), [("int8", 0.1), ("bf16", 0.02)])
    @pytest.mark.parametrize("model", ["encoder", "decoder"])
    def test_values_stay_close_to_float32(self, request, kind, share, model):
        directory = request.getfixturevalue(f"{model}_artefact")
        backend = ValueModelBackend.load(str(directory), cpu_linear=kind)
        values, expected = served(backend), naive(directory)

        # within a small share of the spread of the candidates' values (random weights: a spread of ~1)
        np.testing.assert_allclose(values, expected, rtol=0, atol=share * np.ptp(expected))
        assert nn.Linear not in set(linears(backend))

    @pytest.mark.parametrize("bias", [True, False])
    def test_int8_linear_is_within_two_percent_of_the_float_layer_for_every_token(self, bias):
        torch.manual_seed(0)
        linear = nn.Linear(96, 40, bias=bias)
        x = torch.randn(3, 7, 96) * torch.logspace(-3, 3, 7)[None, :, None]  # tokens of very different size
        x[0, 0] = 0  # a zero row (padding): no division by zero
        expected = linear(x).detach()

        out = Int8Linear(linear)(x)

        assert out.shape == expected.shape and out.dtype == torch.float32
        error = (out - expected).norm(dim=-1) / expected.norm(dim=-1)
        # per-token scales: a token 1000x smaller than another is as exact as it
        assert float(error.flatten()[1:].max()) < 0.02
        torch.testing.assert_close(out[0, 0], expected[0, 0])

    @pytest.mark.parametrize("kind", ["int8", "bf16"])
    def test_an_approximate_kind_is_reported_and_changes_the_revision(self, encoder_artefact, kind):
        backend = ValueModelBackend.load(str(encoder_artefact), cpu_linear=kind)
        plain = ValueModelBackend.load(str(encoder_artefact), cpu_linear="torch")

        assert backend.info.capabilities["cpu_linear"] == kind
        assert backend.info.revision == f"{plain.info.revision}+{kind}"
        assert backend.info.cache_revision != plain.info.cache_revision


class TestSetting:
    def test_the_default_is_auto(self):
        assert Settings().cpu_linear == "auto"

    def test_it_is_read_from_harvest_cpu_linear(self):
        assert Settings.from_env({"HARVEST_CPU_LINEAR": "int8"}).cpu_linear == "int8"

    def test_an_unknown_value_names_the_variable(self):
        with pytest.raises(ValueError, match=r"cpu_linear must be one of .*HARVEST_CPU_LINEAR='fp4'"):
            Settings.from_env({"HARVEST_CPU_LINEAR": "fp4"})

    def test_cpu_kernels_with_a_gpu_device_are_refused(self):
        with pytest.raises(ValueError, match="cpu_linear=int8 is for CPU inference, but device is 'cuda'"):
            Settings(device="cuda", cpu_linear="int8")

    def test_auto_and_torch_are_accepted_on_any_device(self):
        assert Settings(device="cuda", cpu_linear="auto").cpu_linear == "auto"
        assert Settings(device="cuda:1", cpu_linear="torch").cpu_linear == "torch"


@needs_onednn
class TestServedOverHttp:
    @pytest.mark.parametrize("kind", ["auto", "int8"])
    def test_a_server_started_from_settings_serves_with_the_chosen_kernels(
        self, live_server, encoder_artefact, kind
    ):
        server = live_server(create_app(Settings(model=str(encoder_artefact), cpu_linear=kind)))
        body = {"task": {"prompt": PROMPT}, "candidates": [{"content": c} for c in CANDIDATES]}
        with server.client() as http:
            models = http.get("/v1/models").json()
            response = http.post("/v1/rerank", json=body)
        assert response.status_code == 200, response.text

        capabilities = models["data"][0]["capabilities"]
        assert capabilities["cpu_linear"] == ("onednn" if kind == "auto" else kind)
        values = [r["value"] for r in sorted(response.json()["results"], key=lambda r: r["index"])]
        expected = served(ValueModelBackend.load(str(encoder_artefact), cpu_linear=kind))
        np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-5)
