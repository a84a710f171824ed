"""Reranker serving benchmark: one table, every number measured in the same run on the same machine.

Sections (each server runs in its own process on 127.0.0.1; the load comes from other processes):

1. **throughput**: real SWE-bench Lite tasks (one request = one task's non-empty candidates, 2-6 real
   patches), closed loop at concurrency 1, 8 and 32, through the service (dynamic batching, score
   cache off so every candidate is computed) and through a naive server with the *same model*: a
   FastAPI route that runs one forward pass per candidate in a thread per request (what
   ``mlflow models serve`` does). All servers run at once and take turns (ABBA) so load changes on a
   shared machine fall on all. Model: all-MiniLM-L6-v2 with a random value head at 128 tokens. The
   naive server runs torch's own float32 kernels; on CPU, ``harvest serve`` runs once per
   ``--cpu-linear`` kind (default ``torch``, ``auto`` and ``int8``: torch's kernels as before, the
   service's default ``onednn`` float32 kernels, and the opt-in approximate int8), each its own row
   against the same naive baseline, with the largest difference in values from the naive server.
2. **shared prefix**: a small random Qwen3 decoder (4 layers, d=256: CPU-sized; the production target
   is a 4B Qwen3) scoring one request, task + trajectory prefix of 1-2k tokens and 12 real patches cut
   to 128 tokens, with the prefix's KV cache shared against recomputing it for every candidate (in
   process, median of 3; the largest difference in values is printed).
3. **overhead**: p50/p99 of a trivial request (2 tiny candidates, a new prompt each time so the score
   cache misses) through the whole path with the dummy backend, next to ``GET /health``, from one
   keep-alive ``http.client`` connection.
4. **load**: two bounded bursts from a second process (bare asyncio HTTP/1.1, c=64) against a server whose
   model takes 20 ms per candidate and whose queue holds 16 requests: status counts (every request
   answered: 200 or 429, none lost), what a newcomer probing from a third connection meanwhile gets
   and how fast, and the server's RSS before, at peak and after each burst.

**On a GPU** (``--device cuda``, or ``auto`` where one is visible) sections 1 and 2 use a realistic value
model instead: ``--model qwen3-4b``, a Qwen3-4B-shaped decoder (36 layers, d=2560, the shape
``benchmarks/gpu_check.py`` trains) with random weights built from its config on the device and saved
in bf16 as a value-model artefact (nothing is downloaded; the tokenizer is MiniLM's, ``--tokenizer``),
served at ``--max-length`` 2048 with GPU-sized batches (``--max-batch-tokens`` 65536). The naive server
and ``harvest serve`` load that same artefact on the same device in the same dtype, and the table
prints the largest difference between the values the two return for the same requests.
``--tiny`` runs the same path with a 2-layer Qwen3 and a handful of requests: a CPU smoke run of the
GPU benchmark. Serving a local model directory needs torch, transformers and the web stack only:
polars, deltalake, MLflow and faiss are imported when a lake, the registry or neighbours are used.
``benchmarks/gpu_all.sh`` runs this and ``gpu_check.py`` on a GPU machine in one bounded command.

``--threads`` (default 1) pins torch to that many threads in every server: on a small shared machine
one thread is the stable setting; with more threads than idle cores, a batch-1 forward pass can be
several times slower still, which flatters batching.

Usage: ``python benchmarks/serve.py [--data ../shared/data/swebench-lite] [--threads 1] [--quick]
[--sections 1234] [--device auto|cpu|cuda] [--model auto|minilm|qwen3-small|qwen3-4b] [--tiny]
[--cpu-linear torch,auto,int8] [--json PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "swebench-lite"
THREADS = 0  # set by --threads

# The small CPU decoder of section 2 (vocabulary: the tokenizer's).
SMALL_QWEN3 = dict(
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=4096,
)


# -- data and models ------------------------------------------------------------------------------------


def lite_requests(data: Path, *, limit: int) -> list[dict[str, Any]]:
    """One native /v1/rerank body per Lite task that has at least two non-empty candidates."""
    prompts = {}
    for line in (data / "tasks.jsonl").read_text().splitlines():
        row = json.loads(line)
        prompts[row["instance_id"]] = row["problem_statement"]
    patches: dict[str, list[str]] = {}
    for path in sorted((data / "candidates").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if (row.get("model_patch") or "").strip() and row["instance_id"] in prompts:
                patches.setdefault(row["instance_id"], []).append(row["model_patch"])
    bodies = [
        {"task": {"prompt": prompts[i], "id": i}, "candidates": [{"content": c, "kind": "patch"} for c in cs]}
        for i, cs in sorted(patches.items())
        if len(cs) >= 2
    ]
    if len(bodies) < limit:  # more requests than Lite has tasks: send them again (no score cache)
        bodies = bodies * (limit // len(bodies) + 1)
    return bodies[:limit]


def minilm_artefact(directory: Path, *, max_length: int) -> Path:
    """all-MiniLM-L6-v2 with a random (seeded) value head, saved as a value-model artefact."""
    from value_model import ValueModel

    model, tokenizer = ValueModel.from_backbone("minilm", seed=0)
    return model.save(directory, tokenizer, max_length=max_length)


def decoder_artefact(
    directory: Path,
    *,
    max_length: int,
    shape: dict[str, Any] | None = None,
    device: str = "cpu",
    tokenizer: Path | None = None,
) -> Path:
    """A random Qwen3 with the MiniLM tokenizer, as a value-model artefact.

    ``shape`` is a Qwen3 config (default: the small CPU one, 4 layers, d=256, vocabulary the
    tokenizer's). On CUDA the weights are initialised on the device and saved in bf16, as a trained
    Qwen3-4B artefact would be; on CPU in float32.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer, Qwen3Config, Qwen3Model

    from value_model import ValueModel
    from value_model.model import resolve_backbone

    tokens = AutoTokenizer.from_pretrained(tokenizer or resolve_backbone("minilm"))
    torch.manual_seed(0)
    if shape is None:  # the CPU default, built exactly as before
        config = Qwen3Config(vocab_size=tokens.vocab_size, **SMALL_QWEN3, architectures=["Qwen3ForCausalLM"])
        backbone = AutoModel.from_config(config)
    else:
        vocab = max(int(shape.get("vocab_size", 0)), len(tokens))
        config = Qwen3Config(**{**shape, "vocab_size": vocab}, architectures=["Qwen3ForCausalLM"])
        with torch.device(device):
            backbone = Qwen3Model(config)
        if torch.device(device).type == "cuda":
            backbone = backbone.to(torch.bfloat16)
    model = ValueModel(backbone, pooling="last")
    path = model.save(directory, tokens, max_length=max_length)
    del model, backbone
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return path


# -- servers (child processes) --------------------------------------------------------------------------


def _server_main(argv: Sequence[str]) -> None:
    """``serve.py _server KIND PORT [MODEL_DIR DEVICE MAX_BATCH_TOKENS CPU_LINEAR]``: run one server until
    killed."""
    import uvicorn

    kind, port = argv[0], int(argv[1])
    device = argv[3] if len(argv) > 3 else "cpu"
    if kind == "naive":
        from fastapi import FastAPI

        from value_model import Scorer

        scorer = Scorer.from_directory(argv[2], device=device)
        app = FastAPI()

        @app.post("/v1/rerank")
        async def rerank(body: dict[str, Any]) -> dict[str, Any]:
            prompt = body["task"]["prompt"]
            contents = [c["content"] for c in body["candidates"]]

            def one_by_one() -> list[float]:  # one forward pass per candidate, no batching
                # request threads share the scorer (it tokenizes with a tokenizer copy per thread)
                return [float(scorer.score(prompt, [c]).values[0]) for c in contents]

            values = await asyncio.to_thread(one_by_one)
            return {
                "results": [
                    {"index": i, "value": v} for i, v in sorted(enumerate(values), key=lambda iv: -iv[1])
                ]
            }

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

    else:
        from reranker_service import DummyBackend, Settings, create_app
        from reranker_service.backends import Forwarded

        class PacedDummy(DummyBackend):
            """The dummy backend with a slow model: 20 ms per candidate (50 candidates/s)."""

            def forward(self, items: Any, *, embed: bool = False) -> Forwarded:
                time.sleep(0.02 * len(items))
                return super().forward(items, embed=embed)

        if kind == "engine":
            app = create_app(
                Settings(
                    model=argv[2],
                    device=device,
                    cache_size=0,
                    max_queue=256,
                    max_batch_tokens=int(argv[4]) if len(argv) > 4 else 8192,
                    cpu_linear=argv[5] if len(argv) > 5 else "auto",
                    max_batch_size=64,
                    max_wait_ms=2.0,
                    # a GPU scores a batch fast enough that one tokenizer thread could keep it
                    # waiting: tokenize several requests at once there
                    tokenizer_workers=4 if device.startswith("cuda") else 1,
                )
            )
        elif kind == "dummy":
            app = create_app(Settings(max_queue=256), backend=DummyBackend())
        elif kind == "paced":
            app = create_app(Settings(max_queue=16, cache_size=0), backend=PacedDummy())
        else:
            raise SystemExit(f"unknown server kind {kind!r}")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A server process: ``url``, ``pid`` and its resident memory."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc, self.url = proc, url

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


@contextmanager
def servers(*specs: Sequence[str], timeout: float = 600) -> Iterator[list[Server]]:
    """Start one server per ``(kind, *args)`` spec at once (a big model loads in all of them in
    parallel), wait until every one answers ``/health``, and stop them all afterwards."""
    started: list[tuple[str, Server]] = []
    try:
        for kind, *args in specs:
            port = _free_port()
            cmd = [sys.executable, __file__, "_server", kind, str(port), *map(str, args)]
            env = {
                **os.environ,
                # keep what the caller put on the path (gpu_all.sh's carried wheels)
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                "HARVEST_HOME": tempfile.mkdtemp(prefix="harvest-bench-"),
            }
            if THREADS:  # the same torch/OpenMP thread count in every server
                env.update(OMP_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
            started.append((kind, Server(proc, f"http://127.0.0.1:{port}")))
        deadline = time.monotonic() + timeout
        for kind, live in started:
            while True:
                if live.proc.poll() is not None:
                    raise RuntimeError(f"the {kind} server exited with {live.proc.returncode}")
                try:
                    if httpx.get(f"{live.url}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {kind} server did not start within {timeout:.0f}s")
                time.sleep(0.1)
        yield [live for _, live in started]
    finally:
        for _, live in started:
            live.proc.terminate()
        for _, live in started:
            try:
                live.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                live.proc.kill()


@contextmanager
def server(kind: str, *args: Any, timeout: float = 600) -> Iterator[Server]:
    """One server (see :func:`servers`)."""
    with servers((kind, *args), timeout=timeout) as (live,):
        yield live


# -- load generation ------------------------------------------------------------------------------------


async def drive(
    url: str, path: str, bodies: Sequence[Any], *, concurrency: int, timeout: float = 600
) -> tuple[list[tuple[int, float]], float]:
    """Send ``bodies`` from ``concurrency`` workers, closed loop: ((status, seconds) per request, wall)."""
    results: list[tuple[int, float]] = []
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                started = time.perf_counter()
                try:
                    response = await (client.get(path) if body is None else client.post(path, json=body))
                    status = response.status_code
                except httpx.HTTPError:
                    status = -1  # lost: no answer
                results.append((status, time.perf_counter() - started))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results, time.perf_counter() - started


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return (
        ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]
        if ordered
        else float("nan")
    )


def ms(seconds: float) -> str:
    """A duration for the table: ms under 10 s, s above; ``-`` when there was nothing to time (nan)."""
    if math.isnan(seconds):
        return "-"
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


# -- sections -------------------------------------------------------------------------------------------


def _values(url: str, bodies: Sequence[dict[str, Any]]) -> list[float]:
    """The raw values a server returns for ``bodies``, in candidate order (one request at a time)."""
    out: list[float] = []
    with httpx.Client(base_url=url, timeout=600) as client:
        for body in bodies:
            response = client.post("/v1/rerank", json=body)
            response.raise_for_status()
            by_index = {r["index"]: float(r["value"]) for r in response.json()["results"]}
            out += [by_index[i] for i in range(len(body["candidates"]))]
    return out


def section_throughput(
    bodies: list[dict[str, Any]],
    model_dir: Path,
    levels: dict[int, int],
    *,
    device: str = "cpu",
    max_batch_tokens: int = 8192,
    cpu_linear: Sequence[str] = ("auto",),
) -> list[list[str]]:
    """All servers run at once; each level's requests are split in halves sent naive, harvest, harvest,
    naive (ABBA; with several harvest servers, naive, H1, H2, ..., H2, H1, naive), so a change in the
    machine's load during the run falls on all alike.

    Every server loads the same artefact on the same device (in its saved dtype: float32 on CPU, bf16 on
    GPU). The naive server runs torch's own kernels; each harvest server runs one ``cpu_linear`` kind
    (``auto``: the service's default). The warm-up requests double as a check of how alike they score."""
    engines = [f"engine:{kind}" for kind in dict.fromkeys(cpu_linear)]
    labels = {"naive": "naive server: 1 forward per candidate, thread per request"}
    for name in engines:
        kind = name.split(":", 1)[1]
        approximate = ", approximate" if kind in ("int8", "bf16") else ""
        labels[name] = "harvest serve" + ("" if kind == "auto" else f", cpu_linear={kind}{approximate}")
    rows = []
    specs = [("naive", model_dir, device)]
    specs += [("engine", model_dir, device, max_batch_tokens, n.split(":", 1)[1]) for n in engines]
    with servers(*specs) as started:
        live = dict(zip(["naive", *engines], started, strict=True))
        warm = {kind: _values(live[kind].url, bodies[:2]) for kind in live}  # warm-up
        for name in engines:
            delta = max(abs(a - b) for a, b in zip(warm["naive"], warm[name], strict=True))
            labels[name] += f" (max abs Δvalue vs naive {delta:.1e})"
        order = [("naive", 0), *((n, 0) for n in engines), *((n, 1) for n in reversed(engines)), ("naive", 1)]
        start = 2
        for concurrency, n in levels.items():
            chunk = bodies[start : start + n]
            start += n
            halves = [chunk[: n // 2], chunk[n // 2 :]]
            stats: dict[str, dict[str, Any]] = {
                k: {"wall": 0.0, "latencies": [], "candidates": 0} for k in live
            }
            for kind, half in order:
                part = halves[half]
                results, wall = asyncio.run(
                    drive(live[kind].url, "/v1/rerank", part, concurrency=concurrency)
                )
                assert all(s == 200 for s, _ in results), f"{kind}: {[s for s, _ in results if s != 200][:5]}"
                stats[kind]["wall"] += wall
                stats[kind]["latencies"] += [t for _, t in results]
                stats[kind]["candidates"] += sum(len(b["candidates"]) for b in part)
            rate = {k: v["candidates"] / v["wall"] for k, v in stats.items()}
            for kind in live:
                latencies = stats[kind]["latencies"]
                engine = kind != "naive"
                vs = f"**{rate[kind] / rate['naive']:.1f}x**" if engine else "1x"
                rows.append(
                    [
                        f"1. throughput, c={concurrency}, {n} tasks",
                        labels[kind],
                        f"{rate[kind]:,.1f} cand/s",
                        ms(pct(latencies, 50)),
                        ms(pct(latencies, 99)),
                        vs,
                        "≥ 5x" if engine else "",
                    ]
                )
    return rows


def section_prefix(
    bodies: list[dict[str, Any]],
    model_dir: Path,
    repeat: int,
    *,
    device: str = "cpu",
    label: str = "small random Qwen3, CPU",
) -> list[list[str]]:
    import numpy as np

    from reranker_service import ScoreInput, ValueModelBackend
    from reranker_service.service import steps_of_messages

    shared = ValueModelBackend.load(str(model_dir), device=device)
    whole = ValueModelBackend(shared.scorer, shared.info, share_prefix=False)
    body = max(bodies, key=lambda b: len(b["task"]["prompt"]))
    patches = [c["content"] for b in bodies for c in b["candidates"]][:12]
    # a long task + trajectory prefix: the task, then a few real patches read back as tool output
    context = steps_of_messages([{"role": "tool", "content": p} for p in patches[:3]])
    query = ScoreInput(
        prompt=body["task"]["prompt"],
        candidates=tuple(patches),
        context=tuple(context),
        max_tokens_per_candidate=128,
    )
    runs: dict[str, list[float]] = {"shared": [], "whole": []}
    outputs = {}
    if device != "cpu":  # CUDA context, kernels and allocator warm-up, not timed
        for backend in (whole, shared):
            backend.forward(backend.prepare(query).items)
    for _ in range(repeat):
        for name, backend in (("whole", whole), ("shared", shared)):
            prepared = backend.prepare(query)
            started = time.perf_counter()
            outputs[name] = backend.forward(prepared.items).values
            runs[name].append(time.perf_counter() - started)
            if name == "shared":
                prefix = prepared.items[0].prefix_len
                suffix = statistics.mean(it.n_tokens - it.prefix_len for it in prepared.items)
    delta = float(np.max(np.abs(outputs["shared"] - outputs["whole"])))
    t_whole, t_shared = statistics.median(runs["whole"]), statistics.median(runs["shared"])
    what = f"prefix {prefix} tok + {len(patches)} x {suffix:.0f} tok"
    return [
        [
            f"2. shared prefix ({label})",
            f"recompute prefix per candidate: {what}",
            f"{len(patches) / t_whole:,.1f} cand/s",
            ms(t_whole),
            "",
            "1x",
            "",
        ],
        [
            f"2. shared prefix ({label})",
            f"prefix KV shared; max abs Δvalue = {delta:.1e}",
            f"{len(patches) / t_shared:,.1f} cand/s",
            ms(t_shared),
            "",
            f"**{t_whole / t_shared:.1f}x**",
            "≥ 3x",
        ],
    ]


def _sequential(url: str, path: str, bodies: Sequence[Any]) -> list[float]:
    """Seconds per request, one keep-alive connection, the lightest client there is (``http.client``)."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    out = []
    for body in bodies:
        payload = None if body is None else json.dumps(body).encode()
        headers = {} if body is None else {"content-type": "application/json"}
        started = time.perf_counter()
        connection.request("GET" if body is None else "POST", path, body=payload, headers=headers)
        response = connection.getresponse()
        response.read()
        out.append(time.perf_counter() - started)
        assert response.status == 200, response.status
    connection.close()
    return out


def section_overhead(n: int) -> list[list[str]]:
    bodies = [
        {"task": {"prompt": f"trivial task {i}"}, "candidates": [{"content": "a"}, {"content": "b"}]}
        for i in range(n)
    ]
    with server("dummy") as live:
        _sequential(live.url, "/v1/rerank", bodies[:20])
        h = _sequential(live.url, "/health", [None] * n)
        r = _sequential(live.url, "/v1/rerank", bodies)
    return [
        [
            "3. overhead, c=1 (dummy model)",
            "GET /health (HTTP floor)",
            "",
            ms(pct(h, 50)),
            ms(pct(h, 99)),
            "",
            "",
        ],
        [
            "3. overhead, c=1 (dummy model)",
            "POST /v1/rerank, 2 tiny candidates, cache miss",
            "",
            f"**{ms(pct(r, 50))}**",
            ms(pct(r, 99)),
            "",
            "p50 < 5 ms",
        ],
    ]


async def _raw_drive(
    url: str, body: dict[str, Any], n: int, concurrency: int
) -> tuple[list[tuple[int, float]], float]:
    """Like :func:`drive`, on bare asyncio streams (keep-alive HTTP/1.1): a client light enough that the
    latencies it sees are the server's, not its own."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    request = (
        f"POST /v1/rerank HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    left = [n]
    results: list[tuple[int, float]] = []

    async def worker() -> None:
        reader = writer = None
        while left[0] > 0:
            left[0] -= 1
            started = time.perf_counter()
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, int(port))
                assert reader is not None
                writer.write(request)
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length:")
                )
                await reader.readexactly(length)
                results.append((int(lines[0].split()[1]), time.perf_counter() - started))
                if any(x.lower() == "connection: close" for x in lines):
                    writer.close()
                    reader = writer = None
            except (OSError, asyncio.IncompleteReadError, TimeoutError, StopIteration):
                results.append((-1, time.perf_counter() - started))
                if writer is not None:
                    writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.perf_counter() - started


def _burst(url: str, body: dict[str, Any], n: int, concurrency: int, out: Any) -> None:
    """The load generator's process: ``n`` requests at ``concurrency``, results sent back through ``out``."""
    out.send(asyncio.run(_raw_drive(url, body, n, concurrency)))
    out.close()


def _probe(url: str, body: dict[str, Any], stop: threading.Event) -> list[tuple[int, float]]:
    """One request at a time on its own connection while the burst runs: what a newcomer sees."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    seen = []
    while not stop.is_set():
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        started = time.perf_counter()
        connection.request("POST", "/v1/rerank", body=payload, headers={"content-type": "application/json"})
        response = connection.getresponse()
        response.read()
        seen.append((response.status, time.perf_counter() - started))
        connection.close()
        time.sleep(0.02)
    return seen


def section_load(n: int, concurrency: int) -> list[list[str]]:
    import multiprocessing

    body = {"task": {"prompt": "load"}, "candidates": [{"content": f"c{i}"} for i in range(4)]}
    rows = []
    context = multiprocessing.get_context("spawn")
    with server("paced") as live:
        asyncio.run(drive(live.url, "/v1/rerank", [body] * 10, concurrency=2))
        before = live.rss_mib()
        peak = [before]
        after = []
        for burst in (1, 2):
            receive, send = context.Pipe(duplex=False)
            generator = context.Process(target=_burst, args=(live.url, body, n, concurrency, send))
            generator.start()
            stop = threading.Event()
            probes: list[tuple[int, float]] = []
            prober = threading.Thread(target=lambda: probes.extend(_probe(live.url, body, stop)), daemon=True)
            prober.start()
            while not receive.poll(0.1):
                peak.append(live.rss_mib())
                assert generator.is_alive() or receive.poll(), "the load generator died"
            results, wall = receive.recv()
            generator.join()
            stop.set()
            prober.join()
            after.append(live.rss_mib())
            counts = {s: sum(1 for x, _ in results if x == s) for s in sorted({x for x, _ in results})}
            served = [t for s, t in results if s == 200]
            refused = [t for s, t in results if s == 429]
            probe_refused = [t for s, t in probes if s == 429]
            lost = n - len(results) + counts.get(-1, 0)
            healthy = httpx.get(f"{live.url}/health", timeout=5).status_code == 200
            other = sum(v for k, v in counts.items() if k not in (200, 429))
            what = (
                f"200: {counts.get(200, 0)}, 429: {counts.get(429, 0)}, other: {other}, lost: {lost}, "
                f"healthy after: {'yes' if healthy else 'NO'}; 200 p50 {ms(pct(served, 50))}, "
                f"p99 {ms(pct(served, 99))}; {len(probe_refused)} of {len(probes)} probes from a 3rd "
                f"connection refused, p50 {ms(pct(probe_refused, 50))}"
            )
            rows.append(
                [
                    f"4. load burst {burst}: {n} req at c={concurrency} from a 2nd process, queue 16",
                    what,
                    f"{len(served) * 4 / wall:,.0f} cand/s",
                    f"429: **{ms(pct(refused, 50))}**",
                    f"429: {ms(pct(refused, 99))}",
                    "",
                    "fast 429s, none lost",
                ]
            )
        stop.set()
    rows.append(
        [
            "4. load: server memory",
            f"RSS before {before:,.0f} MiB, peak {max(peak):,.0f} MiB, "
            f"after burst 1 {after[0]:,.0f} MiB, after burst 2 {after[1]:,.0f} MiB",
            "",
            "",
            "",
            "",
            "flat",
        ]
    )
    return rows


HEADER = ["section", "setting", "throughput", "p50", "p99", "vs baseline", "target"]


def _table(rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_server":
        _server_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--quick", action="store_true", help="fewer requests per section (a smoke run)")
    parser.add_argument("--sections", default="1234", help="which sections to run, e.g. 23")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads in every server and in the "
        "shared-prefix section (0: torch's default, one per core)",
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the models of sections 1 and 2 run (auto: cuda when a GPU is visible)",
    )
    parser.add_argument(
        "--model",
        choices=("auto", "minilm", "qwen3-small", "qwen3-4b"),
        default="auto",
        help="section 1's model (auto: minilm on CPU, qwen3-4b on CUDA); section 2 uses it when it is a "
        "decoder, else qwen3-small on CPU and qwen3-4b on CUDA",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="qwen3-4b becomes a 2-layer Qwen3 and every section sends a handful of requests: a CPU smoke "
        "run of the GPU benchmark",
    )
    parser.add_argument(
        "--max-length", type=int, default=None, help="token budget of qwen3-4b (default 2048; tiny 512)"
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=None,
        help="harvest serve's token budget per batch (default 8192 on CPU, 65536 on CUDA)",
    )
    parser.add_argument(
        "--tokenizer", type=Path, default=None, help="tokenizer of the decoders (default: MiniLM's)"
    )
    parser.add_argument(
        "--cpu-linear",
        default=None,
        help="section 1: one harvest server per cpu_linear kind, comma-separated (default on CPU: "
        "torch,auto,int8: torch's own kernels as the naive server runs them, the service's default, and "
        "the approximate int8; on CUDA: auto)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the rows here (rewritten after each section)"
    )
    args = parser.parse_args()
    # ``timeout`` (gpu_all.sh) sends SIGTERM: unwind, so the server processes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import torch

    global THREADS
    THREADS = args.threads
    if THREADS:
        torch.set_num_threads(THREADS)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no GPU is visible to torch")
    model = args.model if args.model != "auto" else ("qwen3-4b" if device == "cuda" else "minilm")
    decoder = model if model.startswith("qwen3") else ("qwen3-4b" if device == "cuda" else "qwen3-small")
    max_batch_tokens = args.max_batch_tokens or (65536 if device == "cuda" else 8192)
    cpu_linear = (args.cpu_linear or ("auto" if device == "cuda" else "torch,auto,int8")).split(",")
    max_length = args.max_length or (512 if args.tiny else 2048)
    if args.tiny:
        levels = {1: 2, 8: 4, 32: 8}
    elif args.quick:
        levels = {1: 2, 8: 8, 32: 32}
    else:
        levels = {1: 8, 8: 48, 32: 128} if device == "cuda" else {1: 4, 8: 16, 32: 64}
    bodies = lite_requests(args.data, limit=2 + sum(levels.values()))
    gpu = torch.cuda.get_device_name() if device == "cuda" else None
    from gpu_check import QWEN3_4B, TINY

    names = {
        "minilm": "all-MiniLM-L6-v2 + random head, 128 tokens",
        "qwen3-small": "small random Qwen3 (4 layers, d=256), 2048 tokens",
        "qwen3-4b": (
            f"tiny random Qwen3 (2 layers, d=64; --tiny), {max_length} tokens"
            if args.tiny
            else f"Qwen3-4B-shaped decoder, random weights, {max_length} tokens"
        )
        + (", bf16" if device == "cuda" else ", float32"),
    }
    short = {
        "qwen3-small": "small random Qwen3",
        "qwen3-4b": "tiny random Qwen3" if args.tiny else "random Qwen3-4B shape",
    }
    meta = {
        "device": gpu or "CPU",
        "cpu_cores": os.cpu_count(),
        "torch": torch.__version__,
        "section_1_model": names[model],
        "section_2_model": names[decoder],
        "max_batch_tokens": max_batch_tokens,
        "cpu_linear": cpu_linear,
        "tiny": args.tiny,
        "quick": args.quick,
    }
    print(f"benchmarks/serve.py: {json.dumps(meta)}", file=sys.stderr, flush=True)
    rows: list[list[str]] = []
    started = time.perf_counter()

    def done(new: list[list[str]]) -> None:
        rows.extend(new)
        print(_table(new), file=sys.stderr, flush=True)  # each section as soon as it is measured
        if args.json:
            elapsed = time.perf_counter() - started
            args.json.write_text(
                json.dumps({"meta": {**meta, "seconds": round(elapsed, 1)}, "header": HEADER, "rows": rows})
            )

    def run(section: str, measure: Callable[[], list[list[str]]]) -> None:
        """One section; a failure becomes a row (and a traceback on stderr) and the next section runs."""
        try:
            done(measure())
        except Exception as exc:
            traceback.print_exc()
            done([[f"{section}. FAILED", f"{type(exc).__name__}: {exc}"[:300], "", "", "", "", ""]])

    with tempfile.TemporaryDirectory(prefix="harvest-serve-bench-") as tmp:
        built: dict[str, Path] = {}

        def artefact(name: str) -> Path:
            if name not in built:
                if name == "minilm":
                    built[name] = minilm_artefact(Path(tmp) / "minilm", max_length=128)
                elif name == "qwen3-small":
                    built[name] = decoder_artefact(
                        Path(tmp) / "qwen3", max_length=2048, tokenizer=args.tokenizer
                    )
                else:
                    built[name] = decoder_artefact(
                        Path(tmp) / "qwen3-4b",
                        max_length=max_length,
                        shape=TINY if args.tiny else QWEN3_4B,
                        device=device,
                        tokenizer=args.tokenizer,
                    )
            return built[name]

        if "1" in args.sections:
            run(
                "1",
                lambda: section_throughput(
                    bodies,
                    artefact(model),
                    levels,
                    device=device,
                    max_batch_tokens=max_batch_tokens,
                    cpu_linear=cpu_linear,
                ),
            )
        if "2" in args.sections:
            where = gpu or "CPU"
            run(
                "2",
                lambda: section_prefix(
                    bodies,
                    artefact(decoder),
                    repeat=3 if not (args.quick or args.tiny) else 1,
                    device=device,
                    label=f"{short[decoder]}, {where}",
                ),
            )
    if "3" in args.sections:
        run("3", lambda: section_overhead(300 if not (args.quick or args.tiny) else 50))
    if "4" in args.sections:
        run("4", lambda: section_load(1000 if not (args.quick or args.tiny) else 300, 64))
    cores = os.cpu_count()
    load = os.getloadavg()[0]
    where = f"{gpu} + {cores} CPU cores" if gpu else f"{cores} CPU cores"
    print(
        f"\nbenchmarks/serve.py on {where} (load average {load:.1f} at the end), "
        f"{time.perf_counter() - started:,.0f} s in all\n"
    )
    if "1" in args.sections or "2" in args.sections:
        print(f"Section 1 model: {names[model]}; section 2 model: {names[decoder]}.\n")
    print(_table(rows))
    if any(row[0].endswith("FAILED") for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
