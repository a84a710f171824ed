"""The GPU check script (benchmarks/gpu_check.py) runs its whole code path on a tiny Qwen3 on CPU, so it
cannot rot between the sessions that have a GPU."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_the_gpu_check_runs_end_to_end_on_a_tiny_model(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "gpu_check.py"), "--tiny", "--steps", "1", "--warmup", "0",
         "--seq-lens", "32", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [(r["setting"], r["seq_len"]) for r in rows] == [("LoRA r=8", 32), ("full", 32)]
    lora, full = rows
    assert 0 < lora["trainable_m"] < full["trainable_m"]  # LoRA trains adapters + head only
    assert all(r["tokens_per_s"] and r["tokens_per_s"] > 0 for r in rows)
    assert "tokens/s" in done.stdout and "MFU" in done.stdout
