"""Serving and training work where polars, deltalake, MLflow and faiss are not installed (issue 5).

The GPU benchmark machine has torch, transformers and the web stack, not the lake's packages or
MLflow. One child process hides those four packages the way Python does for a package that is not
installed (``None`` in ``sys.modules``: ``import`` fails and ``importlib.util.find_spec`` answers
``None``), then imports ``value_model`` and ``reranker_service``, trains a tiny value model for one
step on in-memory examples, saves it, serves it with ``create_app`` (no lake, registry or neighbours)
and scores requests on ``/v1/rerank`` and ``/v2/rerank``. It also uses each feature that does need one
of the packages, which must fail with an ``ImportError`` naming that package. The child reports as
JSON; the tests below read that report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

HIDDEN = ("polars", "deltalake", "mlflow", "faiss")

CHILD = r"""
import json
import sys
from pathlib import Path

HIDDEN = ("polars", "deltalake", "mlflow", "faiss")
for name in HIDDEN:
    sys.modules[name] = None  # what an uninstalled package looks like to import and find_spec

backbone, work = sys.argv[1], Path(sys.argv[2])
report = {"errors": {}}

import torch
from fastapi.testclient import TestClient

import reranker_service
import trajectory_lake
import value_model
from reranker_service import Settings, ValueModelBackend, create_app
from value_model import ValueModel, encode_pairs
from value_model._runtime import autocast

# -- train one step on in-memory examples, then save the artefact ------------------------------------
model, tokenizer = ValueModel.from_backbone(backbone)
prompts = ["Fix the off-by-one in range()"] * 4
candidates = ["def f(n): return range(n)", "def f(n): return range(n + 1)", "pass", "raise"]
encoded = encode_pairs(tokenizer, prompts, candidates, max_length=64)
labels = torch.tensor([1.0, 0.0, 0.0, 1.0])
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model.train()
with autocast("auto", torch.device("cpu")):
    values = model(input_ids=encoded.inputs["input_ids"], attention_mask=encoded.inputs["attention_mask"])
loss = torch.nn.functional.binary_cross_entropy_with_logits(values.float(), labels)
loss.backward()
optimizer.step()
report["loss"] = loss.item()
model_dir = model.save(work / "model", tokenizer, max_length=64)

# -- serve it: no lake, no registry, no neighbours ---------------------------------------------------
with TestClient(create_app(Settings(model=str(model_dir)))) as http:
    v1 = http.post("/v1/rerank", json={"task": {"prompt": prompts[0]},
                                       "candidates": [{"content": c} for c in candidates]})
    v2 = http.post("/v2/rerank", json={"query": prompts[0], "documents": candidates})
report["v1"] = {"status": v1.status_code, "body": v1.json()}
report["v2"] = {"status": v2.status_code, "body": v2.json()}

# -- the features that do need a hidden package ------------------------------------------------------
def attempt(feature, call):
    try:
        call()
    except ImportError as exc:
        report["errors"][feature] = {"type": type(exc).__name__, "message": str(exc)}
    else:
        report["errors"][feature] = None

def serve_with_lake():
    with TestClient(create_app(Settings(model=str(model_dir), lake=str(work / "lake")))):
        pass

def read_neighbour_index():
    from reranker_service.index import NeighborIndex

    (work / "index").mkdir()
    (work / "index" / "manifest.json").write_text("{}")
    NeighborIndex.load(work / "index")

attempt("lake", lambda: trajectory_lake.Lake(work / "lake"))
attempt("ingest", lambda: trajectory_lake.ingest([], None))
attempt("service_lake", serve_with_lake)
attempt("registry", lambda: ValueModelBackend.load("models:/harvest-value@champion"))
attempt("neighbour_index", read_neighbour_index)

# -- the command line: `harvest serve` loads without the lake's packages ----------------------------
from click.testing import CliRunner

from trajectory_lake.cli import main

served = CliRunner().invoke(main, ["serve", "--help"])
report["cli_serve_help"] = {"exit_code": served.exit_code, "output": served.output}
attempt("cli_lake", lambda: main.main(["lake", "versions", "--lake", str(work / "lake")], standalone_mode=False))

report["imported"] = sorted(n for n, m in sys.modules.items() if n.split(".")[0] in HIDDEN and m is not None)
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report(tiny_decoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the child process without polars, deltalake, MLflow and faiss did."""
    work = tmp_path_factory.mktemp("without-lake-packages")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tiny_decoder_dir), str(work)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, "HARVEST_HOME": str(work / "home")},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class TestServingWithoutLakePackages:
    def test_a_tiny_model_trains_a_step_on_in_memory_examples(self, report):
        assert report["loss"] > 0

    def test_v1_rerank_scores_every_candidate(self, report):
        assert report["v1"]["status"] == 200, report["v1"]
        results = report["v1"]["body"]["results"]
        assert sorted(r["index"] for r in results) == [0, 1, 2, 3]
        assert all(0.0 <= r["score"] <= 1.0 for r in results)

    def test_v2_rerank_scores_every_document(self, report):
        assert report["v2"]["status"] == 200, report["v2"]
        assert sorted(r["index"] for r in report["v2"]["body"]["results"]) == [0, 1, 2, 3]

    def test_harvest_serve_loads_its_command(self, report):
        served = report["cli_serve_help"]
        assert served["exit_code"] == 0 and "--model" in served["output"], served

    def test_none_of_the_hidden_packages_was_imported(self, report):
        assert report["imported"] == []


class TestFeaturesThatNeedAHiddenPackage:
    @pytest.mark.parametrize(
        ("feature", "package"),
        [
            ("lake", "polars"),
            ("ingest", "polars"),
            ("service_lake", "polars"),
            ("registry", "mlflow"),
            ("neighbour_index", "faiss"),
            ("cli_lake", "polars"),
        ],
    )
    def test_using_it_raises_an_import_error_naming_the_package(self, report, feature, package):
        error = report["errors"][feature]
        assert error is not None, f"{feature} worked without {package}"
        assert f"'{package}'" in error["message"] and "not installed" in error["message"], error
