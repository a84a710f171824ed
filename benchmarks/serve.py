"""Reranker serving benchmark: one table, every number measured in the same run on the same machine.

Sections (each server runs in its own process on 127.0.0.1; the load comes from other processes):

1. **throughput**: real SWE-bench Lite tasks (one request = one task's non-empty candidates, 2-6 real
   patches), closed loop at concurrency 1, 8 and 32, through the service (dynamic batching, score
   cache off so every candidate is computed) and through a naive server with the *same model*: a
   FastAPI route that runs one forward pass per candidate in a thread per request (what
   ``mlflow models serve`` does). Both servers run at once and take turns (ABBA) so load changes on a
   shared machine fall on both. Model: all-MiniLM-L6-v2 with a random value head at 128 tokens.
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

``--threads`` (default 1) pins torch to that many threads in every server: on a small shared machine
one thread is the stable setting; with more threads than idle cores, a batch-1 forward pass can be
several times slower still, which flatters batching.

Usage: ``python benchmarks/serve.py [--data ../shared/data/swebench-lite] [--threads 1] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "swebench-lite"
THREADS = 0  # set by --threads


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
    return bodies[:limit]


def minilm_artefact(directory: Path, *, max_length: int) -> Path:
    """all-MiniLM-L6-v2 with a random (seeded) value head, saved as a value-model artefact."""
    from value_model import ValueModel

    model, tokenizer = ValueModel.from_backbone("minilm", seed=0)
    return model.save(directory, tokenizer, max_length=max_length)


def decoder_artefact(directory: Path, *, max_length: int) -> Path:
    """A small random Qwen3 (4 layers, d=256) with the MiniLM tokenizer, as a value-model artefact."""
    import torch
    from transformers import AutoModel, AutoTokenizer, Qwen3Config

    from value_model import ValueModel
    from value_model.model import resolve_backbone

    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm"))
    config = Qwen3Config(
        vocab_size=tokenizer.vocab_size,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        architectures=["Qwen3ForCausalLM"],
    )
    torch.manual_seed(0)
    model = ValueModel(AutoModel.from_config(config), pooling="last")
    return model.save(directory, tokenizer, max_length=max_length)


# -- servers (child processes) --------------------------------------------------------------------------


def _server_main(argv: Sequence[str]) -> None:
    """``serve.py _server KIND PORT [MODEL_DIR]``: run one server until killed."""
    import uvicorn

    kind, port = argv[0], int(argv[1])
    if kind == "naive":
        from fastapi import FastAPI

        from value_model import Scorer

        scorer = Scorer.from_directory(argv[2])
        app = FastAPI()

        @app.post("/v1/rerank")
        async def rerank(body: dict[str, Any]) -> dict[str, Any]:
            prompt = body["task"]["prompt"]
            contents = [c["content"] for c in body["candidates"]]

            def one_by_one() -> list[float]:  # one forward pass per candidate, no batching
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
                    cache_size=0,
                    max_queue=256,
                    max_batch_tokens=8192,
                    max_batch_size=64,
                    max_wait_ms=2.0,
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
def server(kind: str, model_dir: Path | None = None, *, timeout: float = 300) -> Iterator[Server]:
    port = _free_port()
    cmd = [sys.executable, __file__, "_server", kind, str(port), *([str(model_dir)] if model_dir else [])]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARVEST_HOME": tempfile.mkdtemp(prefix="harvest-bench-")}
    if THREADS:  # the same torch/OpenMP thread count in every server
        env.update(OMP_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the {kind} server exited with {proc.returncode}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {kind} server did not start within {timeout:.0f}s")
            time.sleep(0.1)
        yield Server(proc, url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


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
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


# -- sections -------------------------------------------------------------------------------------------


def section_throughput(
    bodies: list[dict[str, Any]], model_dir: Path, levels: dict[int, int]
) -> list[list[str]]:
    """Both servers run at once; each level's requests are split in halves sent naive, harvest, harvest,
    naive (ABBA), so a change in the machine's load during the run falls on both alike."""
    labels = {"naive": "naive server: 1 forward per candidate, thread per request", "engine": "harvest serve"}
    rows = []
    with server("naive", model_dir) as naive, server("engine", model_dir) as engine:
        live = {"naive": naive, "engine": engine}
        for kind in live:
            asyncio.run(drive(live[kind].url, "/v1/rerank", bodies[:2], concurrency=2))  # warm-up
        start = 2
        for concurrency, n in levels.items():
            chunk = bodies[start : start + n]
            start += n
            halves = [chunk[: n // 2], chunk[n // 2 :]]
            stats: dict[str, dict[str, Any]] = {
                k: {"wall": 0.0, "latencies": [], "candidates": 0} for k in live
            }
            for kind, half in (("naive", 0), ("engine", 0), ("engine", 1), ("naive", 1)):
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
                vs = f"**{rate['engine'] / rate['naive']:.1f}x**" if kind == "engine" else "1x"
                rows.append(
                    [
                        f"1. throughput, c={concurrency}, {n} tasks",
                        labels[kind],
                        f"{rate[kind]:,.1f} cand/s",
                        ms(pct(latencies, 50)),
                        ms(pct(latencies, 99)),
                        vs,
                        "≥ 5x" if kind == "engine" else "",
                    ]
                )
    return rows


def section_prefix(bodies: list[dict[str, Any]], model_dir: Path, repeat: int) -> list[list[str]]:
    import numpy as np

    from reranker_service import ScoreInput, ValueModelBackend
    from reranker_service.service import steps_of_messages

    shared = ValueModelBackend.load(str(model_dir))
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
            "2. shared prefix (small random Qwen3, CPU)",
            f"recompute prefix per candidate: {what}",
            f"{len(patches) / t_whole:,.1f} cand/s",
            ms(t_whole),
            "",
            "1x",
            "",
        ],
        [
            "2. shared prefix (small random Qwen3, CPU)",
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
    args = parser.parse_args()
    global THREADS
    THREADS = args.threads
    if THREADS:
        import torch

        torch.set_num_threads(THREADS)
    levels = {1: 4, 8: 16, 32: 64} if not args.quick else {1: 2, 8: 8, 32: 32}
    bodies = lite_requests(args.data, limit=2 + sum(levels.values()))
    rows: list[list[str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="harvest-serve-bench-") as tmp:
        if "1" in args.sections:
            rows += section_throughput(bodies, minilm_artefact(Path(tmp) / "minilm", max_length=128), levels)
        if "2" in args.sections:
            rows += section_prefix(
                bodies,
                decoder_artefact(Path(tmp) / "qwen3", max_length=2048),
                repeat=3 if not args.quick else 1,
            )
    if "3" in args.sections:
        rows += section_overhead(300 if not args.quick else 50)
    if "4" in args.sections:
        rows += section_load(1000 if not args.quick else 300, 64)
    cores = os.cpu_count()
    load = os.getloadavg()[0]
    print(
        f"\nbenchmarks/serve.py on {cores} CPU cores (load average {load:.1f} at the end), "
        f"{time.perf_counter() - started:,.0f} s in all\n"
    )
    header = ["section", "setting", "throughput", "p50", "p99", "vs baseline", "target"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
