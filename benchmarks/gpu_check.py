"""GPU check for the production value-model recipe: a Qwen3-4B-shaped decoder, random weights, scalar head.

Builds the model from its config (nothing is downloaded), then trains it for a few steps on random
tokens in each setting the ``qwen3-4b`` recipe can use, and prints one table:

* LoRA (r=64 on every linear layer, frozen bf16 backbone) and full fine-tuning (fp32 master weights,
  AdamW, bf16 autocast), each at 8k and 32k tokens per sequence, batch of one sequence, gradient
  checkpointing on — the same ``ValueModel`` methods ``harvest train`` calls (``add_lora``,
  ``enable_checkpointing``, ``value_model._runtime.autocast``);
* tokens/s (median step after warm-up), peak GPU memory (``torch.cuda.max_memory_allocated``), and MFU:
  model FLOPs per token (6N for full fine-tuning, 4N for LoRA: no weight gradients for the frozen
  backbone; plus causal attention, 6·L·s·d full / 4·L·s·d LoRA) × tokens/s over the GPU's peak dense
  bf16 FLOPs (``--peak-tflops``, default 989 for an H100/H200 SXM). Recomputation by checkpointing is
  not counted as useful work, so MFU is the conservative convention.

Usage::

    python benchmarks/gpu_check.py                     # on a GPU machine: the four settings (~3-5 min)
    python benchmarks/gpu_check.py --tiny --steps 2    # smoke run of the same code on CPU (tests do this)

A setting that runs out of memory is reported as ``OOM`` and the others still run.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3Model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Needs torch and transformers only: value_model imports polars, deltalake and MLflow on first use.
from value_model._runtime import autocast
from value_model.model import ValueModel

# Qwen3-4B's published config.json (the shape that matters: layers, widths, heads, vocabulary).
QWEN3_4B = dict(
    vocab_size=151_936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40_960,
    rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
)
TINY = dict(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
)


@dataclass
class Result:
    setting: str
    seq_len: int
    params_b: float
    trainable_m: float
    tokens_per_s: float | None
    step_s: float | None
    peak_gib: float | None
    mfu: float | None
    note: str = ""


def build(shape: dict, *, lora: bool, rank: int, device: torch.device) -> ValueModel:
    config = Qwen3Config(**shape, attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    with device:
        backbone = Qwen3Model(config)
    if lora:  # the frozen backbone in bf16, as the trainer loads it under bf16 + LoRA
        backbone = backbone.to(torch.bfloat16)
    model = ValueModel(backbone, pooling="last").to(device)
    if lora:
        model.add_lora(rank=rank, alpha=2.0 * rank, dropout=0.0)
    return model.enable_checkpointing()


def flops_per_token(params: int, config: Qwen3Config, seq_len: int, *, lora: bool) -> float:
    dense = (4 if lora else 6) * params
    attention = (4 if lora else 6) * config.num_hidden_layers * seq_len * config.num_attention_heads * config.head_dim
    return dense + attention


def run_setting(shape: dict, *, lora: bool, seq_len: int, steps: int, warmup: int, device: torch.device,
                peak_tflops: float) -> Result:
    rank = 64 if shape is QWEN3_4B else 8
    name = f"LoRA r={rank}" if lora else "full"
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    model = build(shape, lora=lora, rank=rank, device=device)
    config = (model.backbone.get_base_model() if model.has_lora else model.backbone).config
    params = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-5, weight_decay=0.0)
    model.train()
    generator = torch.Generator(device="cpu").manual_seed(0)
    times = []
    try:
        for step in range(warmup + steps):
            ids = torch.randint(0, config.vocab_size, (1, seq_len), generator=generator).to(device)
            mask = torch.ones_like(ids)
            label = torch.tensor([float(step % 2)], device=device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            with autocast("bf16", device):
                value = model(input_ids=ids, attention_mask=mask)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(value.float(), label)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if step >= warmup:
                times.append(time.perf_counter() - started)
        step_s = statistics.median(times)
        tokens_per_s = seq_len / step_s
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
        mfu = tokens_per_s * flops_per_token(params, config, seq_len, lora=lora) / (peak_tflops * 1e12)
        return Result(name, seq_len, params / 1e9, sum(p.numel() for p in trainable) / 1e6, tokens_per_s, step_s,
                      peak, mfu if device.type == "cuda" else None)
    except torch.OutOfMemoryError:
        return Result(name, seq_len, params / 1e9, sum(p.numel() for p in trainable) / 1e6, None, None, None, None,
                      "OOM")
    finally:
        del model, optimizer, trainable
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model and short sequences (CPU smoke run)")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=None, help="default: 8192 32768 (tiny: 64 256)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per setting")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="GPU peak dense bf16 TFLOPs for MFU")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    shape = TINY if args.tiny else QWEN3_4B
    seq_lens = args.seq_lens or ([64, 256] if args.tiny else [8192, 32768])
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"value-model GPU check: {'tiny Qwen3' if args.tiny else 'Qwen3-4B shape'}, random weights, "
          f"batch 1, gradient checkpointing, bf16 autocast; device {gpu}; torch {torch.__version__}")
    print(f"{'setting':<12}{'tokens':>8}{'params B':>10}{'trainable M':>13}{'tokens/s':>11}{'s/step':>9}"
          f"{'peak GiB':>10}{'MFU':>7}", flush=True)
    results = []
    for lora in (True, False):
        for seq_len in seq_lens:  # each row as soon as it is measured: a run cut short keeps what it did
            r = run_setting(shape, lora=lora, seq_len=seq_len, steps=args.steps, warmup=args.warmup, device=device,
                            peak_tflops=args.peak_tflops)
            results.append(r)

            def fmt(value: float | None, spec: str, r: Result = r) -> str:
                width = int(spec[1:spec.index(".")]) if "." in spec else int(spec[1:])
                return format(value, spec) if value is not None else format(r.note or "n/a", f">{width}")
            print(f"{r.setting:<12}{r.seq_len:>8}{r.params_b:>10.2f}{r.trainable_m:>13.1f}"
                  f"{fmt(r.tokens_per_s, '>11.0f')}{fmt(r.step_s, '>9.2f')}{fmt(r.peak_gib, '>10.1f')}"
                  f"{fmt(r.mfu, '>7.1%')}", flush=True)
            if args.json:
                args.json.write_text(json.dumps([asdict(x) for x in results], indent=2))


if __name__ == "__main__":
    main()
