"""Write the small example rollouts in ``examples/rollouts/`` (run once; the output is committed).

The files are in the real harness formats Harvest ingests — SWE-bench task rows, a mini-swe-agent run
directory (``preds.json``, per-instance ``.traj.json`` files, a run summary report), a leaderboard-style
``all_preds.jsonl`` + ``results.json`` run, and a labelled candidate set — about a toy repository,
``harvest-demo/textkit``, so that ``make demo`` runs end to end in a minute on any machine.

Usage: ``python examples/generate.py``
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).parent / "rollouts"
REPO = "harvest-demo/textkit"
BASE = "4f1c2d9e8b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d"

# (instance suffix, file, function, issue text, buggy line, fixed line, plausible wrong fix)
BUGS = [
    ("1", "textkit/case.py", "title_case", "title_case() lowercases acronyms: title_case('NASA rocket') gives 'Nasa Rocket'.",
     "    return ' '.join(w.capitalize() for w in text.split())",
     "    return ' '.join(w if w.isupper() else w.capitalize() for w in text.split())",
     "    return text.title()"),
    ("2", "textkit/slug.py", "slugify", "slugify() keeps trailing dashes: slugify('Hello, World!') returns 'hello-world-'.",
     "    return re.sub(r'[^a-z0-9]+', '-', text.lower())",
     "    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')",
     "    return re.sub(r'[^a-z0-9]+', '-', text.lower()).rstrip()"),
    ("3", "textkit/wrap.py", "truncate", "truncate(s, n) returns n+3 characters when it adds the ellipsis; it must return at most n.",
     "    return s if len(s) <= n else s[:n] + '...'",
     "    return s if len(s) <= n else s[: max(n - 3, 0)] + '...'",
     "    return s[:n] + '...'"),
    ("4", "textkit/count.py", "word_count", "word_count() counts empty strings between double spaces as words.",
     "    return len(text.split(' '))",
     "    return len(text.split())",
     "    return len(text.split(' ')) - 1"),
    ("5", "textkit/parse.py", "parse_bool", "parse_bool('False') returns True because any non-empty string is truthy.",
     "    return bool(value)",
     "    return str(value).strip().lower() in {'1', 'true', 'yes', 'on'}",
     "    return value == 'True'"),
    ("6", "textkit/pad.py", "center", "center(s, width) puts the extra space on the left for odd padding; the docs say right.",
     "    left = (width - len(s) + 1) // 2",
     "    left = (width - len(s)) // 2",
     "    left = (width - len(s) - 1) // 2"),
    ("7", "textkit/lines.py", "dedent_lines", "dedent_lines() crashes with ValueError on input that is only blank lines.",
     "    indent = min(len(l) - len(l.lstrip()) for l in lines if l.strip())",
     "    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)",
     "    indent = min(len(l) - len(l.lstrip()) for l in lines)"),
    ("8", "textkit/num.py", "format_bytes", "format_bytes(1024) returns '1024 B' instead of '1.0 KiB'.",
     "    while size > 1024 and unit < len(UNITS) - 1:",
     "    while size >= 1024 and unit < len(UNITS) - 1:",
     "    while size > 1000 and unit < len(UNITS) - 1:"),
    ("9", "textkit/split.py", "chunk", "chunk(items, 0) loops forever; it should raise ValueError for a size below 1.",
     "    return [items[i : i + size] for i in range(0, len(items), size)]",
     "    if size < 1:\n        raise ValueError(f'size must be >= 1, got {size}')\n    return [items[i : i + size] for i in range(0, len(items), size)]",
     "    return [items[i : i + size] for i in range(0, len(items), max(size, 1))]"),
    ("10", "textkit/escape.py", "escape_html", "escape_html() does not escape single quotes, which breaks attribute values.",
     "    return s.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;').replace('\"', '&quot;')",
     "    return html.escape(s, quote=True)",
     "    return s.replace('<', '&lt;').replace('>', '&gt;').replace('&', '&amp;')"),
    ("11", "textkit/case.py", "snake_case", "snake_case('HTTPServer') gives 'h_t_t_p_server' instead of 'http_server'.",
     "    return re.sub(r'([A-Z])', r'_\\1', name).lower().lstrip('_')",
     "    return re.sub(r'(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])', '_', name).lower()",
     "    return name.lower()"),
    ("12", "textkit/wrap.py", "indent", "indent(text, prefix) also prefixes empty lines, leaving trailing whitespace.",
     "    return ''.join(prefix + line for line in text.splitlines(True))",
     "    return ''.join(prefix + line if line.strip() else line for line in text.splitlines(True))",
     "    return prefix + text"),
]


def diff(path: str, before: str, after: str) -> str:
    """A unified diff replacing one line (or block) in ``path``."""
    minus = "".join(f"-{line}\n" for line in before.splitlines())
    plus = "".join(f"+{line}\n" for line in after.splitlines())
    n_before, n_after = len(before.splitlines()), len(after.splitlines())
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -10,{n_before + 1} +10,{n_after + 1} @@\n \n{minus}{plus}"
    )


def iid(suffix: str) -> str:
    return f"harvest-demo__textkit-{suffix}"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tasks, labelled = [], []
    alpha_preds, alpha_resolved, beta_preds, beta_resolved = {}, [], [], []
    for n, (suffix, path, fn, issue, bug, fix, wrong) in enumerate(BUGS):
        gold = diff(path, bug, fix)
        bad = diff(path, bug, wrong)
        tasks.append({
            "instance_id": iid(suffix), "repo": REPO, "base_commit": BASE,
            "problem_statement": f"{fn}: {issue}\n\nSteps to reproduce are in the description above.",
            "hints_text": "", "created_at": f"2026-0{1 + n % 9}-1{n % 10}T10:00:00Z", "version": "1.0",
            "FAIL_TO_PASS": [f"tests/test_{fn}.py::test_{fn}_issue"], "PASS_TO_PASS": [f"tests/test_{fn}.py::test_{fn}_basic"],
            "patch": gold, "test_patch": "", "environment_setup_commit": BASE,
        })
        # Three systems of different strength: alpha fixes 2 of 3, beta 1 of 2, gamma 1 of 3.
        alpha_ok, beta_ok, gamma_ok = n % 3 != 2, n % 2 == 0, n % 3 == 0
        alpha_preds[iid(suffix)] = {"model_name_or_path": "demo/alpha-7b", "instance_id": iid(suffix),
                                    "model_patch": gold if alpha_ok else bad}
        if alpha_ok:
            alpha_resolved.append(iid(suffix))
        beta_preds.append({"instance_id": iid(suffix), "model_name_or_path": "demo/beta-13b",
                           "model_patch": gold if beta_ok else bad})
        if beta_ok:
            beta_resolved.append(iid(suffix))
        labelled.append({"instance_id": iid(suffix), "system": "gamma-agent_demo-3b",
                         "model_patch": gold if gamma_ok else ("" if n % 3 == 1 else bad),
                         "resolved": gamma_ok, "benchmark": "swe-bench-demo"})

    write_jsonl(OUT / "tasks.jsonl", tasks)
    write_jsonl(OUT / "labelled-candidates.jsonl", labelled)

    alpha = OUT / "run-alpha"
    alpha.mkdir(exist_ok=True)
    (alpha / "preds.json").write_text(json.dumps(alpha_preds, indent=2) + "\n")
    (alpha / "report.json").write_text(json.dumps({
        "total_instances": len(BUGS), "submitted_ids": sorted(alpha_preds), "completed_ids": sorted(alpha_preds),
        "resolved_ids": alpha_resolved, "unresolved_ids": sorted(set(alpha_preds) - set(alpha_resolved)),
        "error_ids": [], "empty_patch_ids": [], "schema_version": 2,
    }, indent=2) + "\n")
    for suffix in ("1", "3"):
        instance = iid(suffix)
        (alpha / instance).mkdir(exist_ok=True)
        (alpha / instance / f"{instance}.traj.json").write_text(
            json.dumps(mini_traj(instance, tasks[int(suffix) - 1], alpha_preds[instance]["model_patch"]), indent=1) + "\n"
        )

    beta = OUT / "run-beta"
    beta.mkdir(exist_ok=True)
    write_jsonl(beta / "all_preds.jsonl", beta_preds)
    (beta / "results.json").write_text(json.dumps({
        "generated": [p["instance_id"] for p in beta_preds], "applied": [p["instance_id"] for p in beta_preds],
        "resolved": beta_resolved,
    }, indent=2) + "\n")


def mini_traj(instance: str, task: dict, patch: str) -> dict:
    """A mini-swe-agent 1.1 trajectory (tool-calling model) that explores, edits, tests and submits."""
    path = patch.split(" b/")[1].split("\n")[0]
    commands = [
        (f"grep -n 'def ' {path}", f"10:def {task['problem_statement'].split(':')[0]}(...):"),
        (f"python -m pytest tests -q -k {task['FAIL_TO_PASS'][0].split('::')[-1]}", "1 failed in 0.12s"),
        (f"git apply <<'EOF'\n{patch}EOF", ""),
        ("python -m pytest tests -q", "12 passed in 0.31s"),
    ]
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer shell to solve programming tasks."},
        {"role": "user", "content": f"<pr_description>\nConsider the following PR description:\n{task['problem_statement']}\n</pr_description>\n\nSolve the issue in /testbed."},
    ]
    ts = 1767261600.0
    for k, (command, output) in enumerate(commands):
        call_id = f"call_{k}_{instance[-2:].strip('-')}"
        ts += 7.5
        messages.append({
            "role": "assistant", "content": f"Step {k + 1}: running `{command.splitlines()[0]}`.",
            "tool_calls": [{"index": 0, "id": call_id, "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}],
            "extra": {"actions": [{"command": command, "tool_call_id": call_id}], "cost": 0.0004, "timestamp": ts,
                      "response": {"model": "demo/alpha-7b", "usage": {"prompt_tokens": 900 + 150 * k, "completion_tokens": 60}}},
        })
        ts += 1.5
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"<returncode>{1 if 'failed' in output else 0}</returncode>\n<output>\n{output}\n</output>",
                         "extra": {"returncode": 1 if "failed" in output else 0, "timestamp": ts}})
    messages.append({"role": "exit", "content": patch, "extra": {"exit_status": "Submitted", "submission": patch}})
    return {
        "info": {
            "model_stats": {"instance_cost": 0.0016, "api_calls": len(commands)},
            "config": {"agent": {"step_limit": 50}, "agent_type": "minisweagent.agents.default.DefaultAgent",
                       "model": {"model_name": "demo/alpha-7b"}, "model_type": "minisweagent.models.litellm_model.LitellmModel",
                       "environment": {"cwd": "/testbed"}, "environment_type": "minisweagent.environments.docker.DockerEnvironment"},
            "mini_version": "2.2.7", "exit_status": "Submitted", "submission": patch,
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": instance,
    }


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
