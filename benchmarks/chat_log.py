"""A large chat-completions proxy log: the two-pass streamed read against holding every call.

A recording proxy (LiteLLM, OpenHands' completion log) writes one record per model call, and every
call re-sends the conversation so far, so a log holds each conversation once per call. The adapter
reads such a log in two passes (``trajectory_lake.adapters.openai_chat``): the first keeps only each
call's identity, the second re-reads one conversation's calls at a time. Files under ``_HOLD_BYTES``
keep their parsed calls between the passes instead; this benchmark forces each way on the same file.

The log is built from the real OpenHands call in ``../shared/data/formats/openai-chat``: its last
call's messages are cut back into the calls that made them (call k sends the messages before the
k-th assistant message and gets that message back), and each conversation gets its own task text
and session id. Each way runs ``trajectory_lake.ingest`` (in-process reading, a new lake) in a fresh
child process; the table gives seconds, input MB/s and the child's peak RSS.

Usage: ``python benchmarks/chat_log.py [--conversations 1500] [--workdir DIR] [--keep]``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parents[2] / "shared/data/formats/openai-chat"

# Run in a child: ingest the log with the adapter's hold threshold set, report time and peak RSS.
_CHILD = r"""
import json, resource, sys, time
from trajectory_lake import Lake, ingest
from trajectory_lake.adapters import openai_chat
openai_chat._HOLD_BYTES = int(sys.argv[3])
started = time.perf_counter()
report = ingest([sys.argv[1]], Lake(sys.argv[2]), workers=1)
print(json.dumps({"seconds": time.perf_counter() - started,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "written": {t: c.written for t, c in report.counts.items()},
                  "quarantined": report.total("quarantined")}))
"""


def conversation_calls(last: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The calls of one conversation, rebuilt from its last call, with a task text of its own."""
    last = copy.deepcopy(last)
    messages = last["messages"]
    for part in messages[1]["content"] if isinstance(messages[1]["content"], list) else []:
        if part.get("type") == "text":
            part["text"] = f"[conversation {index}] {part['text']}"
            break
    else:
        messages[1]["content"] = f"[conversation {index}] {messages[1]['content']}"
    session = {"metadata": {"session_id": f"bench-{index}"}}
    calls = []
    for turn, position in enumerate(i for i, m in enumerate(messages) if m["role"] == "assistant"):
        call = {k: v for k, v in last.items() if k not in ("messages", "response")}
        call["messages"] = messages[:position]
        call["response"] = {
            "id": f"chatcmpl-{index}-{turn}",
            "model": last["response"].get("model"),
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": messages[position]}],
            "usage": {"prompt_tokens": 1000 + position, "completion_tokens": 50, "total_tokens": 1050 + position},
        }
        call["timestamp"] = last["timestamp"] - 60 + turn
        calls.append({**call, **session})
    return [*calls, {**last, **session}]


def build(path: Path, conversations: int) -> tuple[int, int]:
    """Write the log; returns (calls, bytes)."""
    last = json.loads((SAMPLE / "openhands_litellm_completion_last_call.json").read_text(encoding="utf-8"))
    calls = 0
    with path.open("w", encoding="utf-8") as handle:
        for index in range(conversations):
            for call in conversation_calls(last, index):
                handle.write(json.dumps(call) + "\n")
                calls += 1
    return calls, path.stat().st_size


def measure(log: Path, lake: Path, hold_bytes: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(log), str(lake), str(hold_bytes)],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=1500)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="Keep the log and the lakes.")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="harvest-chat-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        log = workdir / "proxy" / "calls.jsonl"
        log.parent.mkdir(exist_ok=True)
        calls, size = build(log, args.conversations)
        held = measure(log, workdir / "held", 1 << 62)
        streamed = measure(log, workdir / "streamed", 0)
        if held["written"] != streamed["written"] or held["quarantined"] != streamed["quarantined"]:
            raise SystemExit(f"the two ways wrote different rows: {held['written']} vs {streamed['written']}")
        print(f"chat-completions log: {args.conversations} conversations, {calls} calls, {size / 1e6:.0f} MB "
              f"(from the real OpenHands call); written {streamed['written']}")
        print(f"{'how the log is read':<46}{'seconds':>9}{'MB/s':>8}{'peak RSS MiB':>14}")
        for name, row in (("held: every parsed call kept (the baseline)", held),
                          ("streamed: two passes, one conversation at a time", streamed)):
            print(f"{name:<46}{row['seconds']:>9.1f}{size / 1e6 / row['seconds']:>8.1f}{row['rss_mib']:>14.0f}")
        print(f"  streamed / held: {streamed['seconds'] / held['seconds']:.2f}x the time, "
              f"{streamed['rss_mib'] / held['rss_mib']:.2f}x the memory")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
