"""Fixtures shared by every test package.

``shared_data`` is the real public data set that lives beside the repository (``../shared/data``, see its
README). Tests that need it skip with a clear reason when it is absent, except under CI (``CI=true``),
where a missing data set is a broken checkout and fails the run instead of passing it silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_path() -> Path:
    """``$HARVEST_SHARED_DATA``, else ``<repo>/../shared/data`` (read at call time, never at import)."""
    override = os.environ.get("HARVEST_SHARED_DATA")
    return Path(override).expanduser() if override else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data set (``../shared/data``); skips when absent, fails when ``CI=true``."""
    path = shared_data_path()
    if not path.is_dir():
        reason = (
            f"../shared/data is not present (looked for {path}); the real-data tests read the public "
            "harness files kept beside the repository. Put them there or point HARVEST_SHARED_DATA at them."
        )
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def lite_lake(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A lake holding the real SWE-bench Lite tasks and candidates, ingested once per session.

    Treat the data tables as read only; training runs may record their slice manifests in ``slices``.
    """
    from trajectory_lake import Lake, ingest

    lake = Lake(tmp_path_factory.mktemp("lite-lake"))
    ingest([shared_data / "swebench-lite"], lake)
    return lake


@pytest.fixture(scope="session")
def lite_candidate_sets(shared_data: Path) -> list[tuple[str, list[str]]]:
    """(issue, non-empty patches) of the first 40 real SWE-bench Lite tasks (by id) with at least two
    patches: long issues and patches, read straight from the files (no lake)."""
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


@pytest.fixture(scope="session")
def minilm_tokenizer():  # noqa: ANN201
    """The tokenizer of the packaged all-MiniLM-L6-v2 (a real fast WordPiece tokenizer, no download)."""
    from transformers import AutoTokenizer

    from value_model.model import resolve_backbone

    return AutoTokenizer.from_pretrained(resolve_backbone("minilm"))


def _save_tiny(directory: Path, config, tokenizer) -> Path:  # noqa: ANN001
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory, minilm_tokenizer) -> Path:  # noqa: ANN001
    """A 2-layer random BERT with the MiniLM tokenizer, saved as a local Hugging Face model directory."""
    from transformers import BertConfig

    config = BertConfig(vocab_size=minilm_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512)
    return _save_tiny(tmp_path_factory.mktemp("tiny-bert"), config, minilm_tokenizer)


@pytest.fixture(scope="session")
def tiny_decoder_dir(tmp_path_factory: pytest.TempPathFactory, minilm_tokenizer) -> Path:  # noqa: ANN001
    """A 2-layer random Qwen3 (the production decoder family) built from its config, no hub access."""
    from transformers import Qwen3Config

    config = Qwen3Config(vocab_size=minilm_tokenizer.vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                         max_position_embeddings=1024, architectures=["Qwen3ForCausalLM"])
    return _save_tiny(tmp_path_factory.mktemp("tiny-qwen3"), config, minilm_tokenizer)
