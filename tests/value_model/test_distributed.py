"""Data-parallel training: two ``torchrun`` processes on CPU (gloo), with the model replicated (DDP) or
sharded (FSDP), train exactly what one process does when it accumulates the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.value_model._ddp_worker import run
from value_model._runtime import Runtime
from value_model.checkpoint import list_checkpoints

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ddp_results(lite_lake, agent_lake, tiny_decoder_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(REPO_ROOT / "tests" / "value_model" / "_ddp_worker.py"), "--lite-lake", lite_lake.uri,
         "--agent-lake", agent_lake.uri, "--backbone", str(tiny_decoder_dir), "--out", str(out)],
        env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
@pytest.mark.parametrize("recipe", ["patch", "action"])
def test_two_ranks_match_one_process_accumulating_the_same_global_batch(recipe, parallel, ddp_results, lite_lake,
                                                                        agent_lake, tiny_decoder_dir, tmp_path):
    lake = Path(lite_lake.uri if recipe == "patch" else agent_lake.uri)
    run(recipe, lake, tiny_decoder_dir, tmp_path, grad_accum_steps=2, runtime=Runtime())
    two = json.loads((ddp_results / f"{recipe}-{parallel}.json").read_text())
    one = json.loads((tmp_path / f"{recipe}-ddp.json").read_text())
    assert (two["world_size"], one["world_size"]) == (2, 1)
    assert len(two["step_losses"]) == len(one["step_losses"]) > 1
    assert two["step_losses"] == pytest.approx(one["step_losses"], rel=1e-4, abs=1e-6)
    assert two["head"] == pytest.approx(one["head"], rel=1e-4, abs=1e-6)
    assert two["backbone_norm"] == pytest.approx(one["backbone_norm"], rel=1e-6)
    # validation is scored in shards (other batches, so other padding) and gathered back in order
    assert two["val_values"] == pytest.approx(one["val_values"], abs=1e-5)
    assert two["metrics"].keys() == one["metrics"].keys()
    # (not Brier and log loss: they go through Platt scaling, which has no finite optimum on separable data)
    for name in {"best_at_1", "auroc", "td_mse", "truncated_fraction"} & one["metrics"].keys():
        assert two["metrics"][name] == pytest.approx(one["metrics"][name], rel=1e-4, nan_ok=True)


def test_a_cuda_process_group_also_reduces_cpu_tensors(monkeypatch):
    """NCCL alone reduces only CUDA tensors; the trainer also reduces CPU ones (each step's loss, gathered
    objects), so a GPU job's group must carry gloo for the CPU: with NCCL alone the first step crashed
    with "No backend type associated with device type cpu"."""
    import torch.distributed as dist

    from value_model._runtime import distributed_session

    calls = {}
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr("torch.cuda.set_device", lambda device: calls.setdefault("device", str(device)))
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)  # a machine with 2 GPUs: this is rank 1's
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda **kwargs: calls.update(init=kwargs))
    monkeypatch.setattr(dist, "destroy_process_group", lambda: calls.update(destroyed=True))
    with distributed_session(device="cuda") as runtime:
        assert (runtime.rank, runtime.world_size, runtime.local_rank) == (0, 2, 1)
    backends = dict(part.split(":") for part in calls["init"]["backend"].split(","))
    assert backends == {"cpu": "gloo", "cuda": "nccl"}
    assert calls["device"] == "cuda:1" and calls["destroyed"]
    with distributed_session(device="cpu"):
        pass
    assert calls["init"]["backend"] in ("gloo", "cpu:gloo")  # a CPU job: gloo alone, as before


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
@pytest.mark.parametrize("recipe", ["patch", "action"])
def test_two_ranks_stopped_and_resumed_from_a_checkpoint_train_what_they_do_straight(recipe, parallel,
                                                                                     ddp_results):
    """DDP: rank 0 writes the weights and AdamW state; FSDP: each rank writes its shards through
    torch.distributed.checkpoint (with the action recipe's LoRA: the adapters and head, not the frozen
    base)."""
    straight = json.loads((ddp_results / f"{recipe}-{parallel}.json").read_text())
    resumed = json.loads((ddp_results / f"{recipe}-{parallel}-resumed.json").read_text())
    assert resumed["step_losses"] == pytest.approx(straight["step_losses"], rel=1e-6, abs=1e-6)
    assert resumed["head"] == pytest.approx(straight["head"], rel=1e-6, abs=1e-6)
    assert resumed["backbone_norm"] == pytest.approx(straight["backbone_norm"], rel=1e-6)
    assert resumed["val_values"] == pytest.approx(straight["val_values"], rel=1e-6, abs=1e-6)
    checkpoint = ddp_results / "checkpoints" / f"{recipe}-{parallel}"
    files = {p.name for p in max(checkpoint.glob("step-*")).iterdir()}
    assert {"rng-0.pt", "rng-1.pt", "trainer.json", "scheduler.pt"} <= files
    assert ("state" in files) == (parallel == "fsdp") and ("model.pt" in files) == (parallel == "ddp")


@pytest.mark.parametrize("recipe", ["patch", "action"])
def test_a_two_rank_checkpoint_resumes_on_one_process_accumulating_the_same_micro_batches(
    recipe, ddp_results, lite_lake, agent_lake, tiny_decoder_dir, tmp_path
):
    """A job that lost a machine goes on with fewer ranks and more accumulation (same step shape)."""
    before_last = list_checkpoints(ddp_results / "checkpoints" / f"{recipe}-ddp")[0]
    lake = Path(lite_lake.uri if recipe == "patch" else agent_lake.uri)
    run(recipe, lake, tiny_decoder_dir, tmp_path, grad_accum_steps=2, runtime=Runtime(), resume=before_last)
    one = json.loads((tmp_path / f"{recipe}-ddp.json").read_text())
    two = json.loads((ddp_results / f"{recipe}-ddp.json").read_text())
    assert one["step_losses"] == pytest.approx(two["step_losses"], rel=1e-4, abs=1e-6)
    assert one["head"] == pytest.approx(two["head"], rel=1e-4, abs=1e-6)
    assert one["val_values"] == pytest.approx(two["val_values"], abs=1e-5)
