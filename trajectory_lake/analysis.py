"""Analysis over the lake: success rates, where agents fail, and the text that describes a failure.

The analyst notebooks (``notebooks/``) ask their questions through these functions, so what they
compute is tested here and reusable elsewhere. One reader touches the lake
(:func:`scan_trajectory_outcomes`, at pinned table versions); everything else is a pure function of
polars frames (or a single string), testable without a disk.

Contracts:

* **One row per trajectory.** :func:`scan_trajectory_outcomes` joins trajectories with their run,
  task, candidates and outcomes. ``success`` is the trajectory's outcome named ``label`` (the mean of
  its evaluations, ``> 0.5``), null when it has none: unlabelled rollouts are never counted as
  failures.
* **Harness and model** come from the trajectory, else its run; SWE-bench leaderboard runs that name
  neither (``20240402_sweagent_gpt4``) get them from the run name (:func:`system_of_run`), and
  ``harness_inferred`` says so.
* **Observations** are the steps an agent received after its first assistant step: ``tool`` steps,
  and ``user`` steps of harnesses that send tool output as user messages (SWE-agent 0.x). An
  observation is an **error** when the harness flagged it (``is_error``) or, when the harness did not
  say (``is_error`` null), when its text starts like one (a traceback, ``Error:``, a non-zero
  ``<returncode>``, ``command not found``...). :func:`error_signature` reduces it to a short,
  comparable line (exception class, or the message with numbers, paths and long quotes masked).
* **Actions** are named by their tool, and shell tools by the command they ran (``bash:pytest``), see
  :func:`action_label`.

Examples:
    >>> error_signature('Traceback (most recent call last):\\n  File "x.py", line 1\\nKeyError: 3')
    'KeyError'
    >>> action_label("execute_bash", '{"command": "cd /repo && python -m pytest -x"}')
    'execute_bash:pytest'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import polars as pl

from trajectory_lake.lake import Lake
from trajectory_lake.records import COPIED_CONTEXT, REPLAYED_BY_COMPACTION

__all__ = [
    "ANALYSIS_TABLES",
    "SHELL_TOOLS",
    "action_label",
    "bucket_by",
    "changed_lines",
    "error_observations",
    "error_signature",
    "failure_texts",
    "last_actions",
    "name_clusters",
    "plot_rates",
    "rate_by",
    "scan_trajectory_outcomes",
    "system_of_run",
    "touched_files",
]

# The tables :func:`scan_trajectory_outcomes` reads (and so the versions a notebook pins).
ANALYSIS_TABLES = ("runs", "tasks", "trajectories", "candidates", "outcomes")

# Tools whose single argument is a shell command: their label names the program that ran.
SHELL_TOOLS = frozenset({"bash", "execute_bash", "exec_command", "shell", "run", "run_command", "terminal",
                         "local_shell", "container.exec"})

# Leaderboard system names, as written in run names, to the harness names adapters write.
_HARNESS_ALIASES = {"sweagent": "swe-agent", "moatless": "moatless-tools", "openhands": "openhands",
                    "codeact": "openhands", "autocoderover": "autocoderover"}

_MODEL_FAMILY = re.compile(r"(?i)(?:gpt|o\d|claude|deepseek|llama|qwen|gemini|mistral|mixtral|codestral|"
                           r"grok|kimi|glm|command|phi|gemma)[\w.+-]*$")
_ERROR_START = re.compile(
    r"^\s*(?:<returncode>\s*[1-9]\d*\s*</returncode>|Traceback \(most recent call last\)|"
    r"(?:\w+)?(?:Error|ERROR|Exception)\b|error:|fatal:|FAILED\b|E\s{3}|bash: .*(?:not found|No such file)|"
    r"\[Your proposed edit has introduced new syntax error)",
)
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Fault))\b")
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_NOISE = re.compile(r"</?\w+>|<returncode>.*</returncode>|(?:ERROR|Error|error):?|[-=]+|OBSERVATION:?")
_ERROR_WORDS = re.compile(r"(?i)\berror\b|exception|cannot|can't|not found|no such|failed|fatal|denied|"
                          r"invalid|"
                          r"missing|refused|timed? ?out|\bno module\b|not allowed|required")
_NOT_FOUND = re.compile(r"(?:bash: )?(?:line \d+: )?([\w./-]+): command not found")


def system_of_run(name: str | None) -> tuple[str | None, str | None]:
    """(harness, model) read from a SWE-bench leaderboard run name: ``[YYYYMMDD_]<system>_..._<model>``.

    The system is the first ``_``-separated part, without its version suffix and with known spellings
    mapped to the names the adapters write (``sweagent`` → ``swe-agent``). The model is the first later
    part that starts like a model family (``gpt``, ``claude``, ``deepseek``...), else everything after
    the system. Names without an underscore give ``(None, None)``.

    Examples:
        >>> system_of_run("20240402_sweagent_gpt4")
        ('swe-agent', 'gpt4')
        >>> system_of_run("mini-swe-agent-2.2.7_deepseek-chat")
        ('mini-swe-agent', 'deepseek-chat')
        >>> system_of_run("OpenHands-0.15.0_CodeAct_claude-3.5-sonnet-20241022")
        ('openhands', 'claude-3.5-sonnet-20241022')
        >>> system_of_run("openai-chat")
        (None, None)
    """
    if not name:
        return None, None
    parts = re.sub(r"^\d{8}_", "", name).split("_")
    if len(parts) < 2 or not all(parts):
        return None, None
    system = re.sub(r"[-_]?v?\d+(?:\.\d+)+$", "", parts[0])  # mini-swe-agent-2.2.7 -> mini-swe-agent
    model = next((p for p in parts[1:] if _MODEL_FAMILY.match(p)), "_".join(parts[1:]))
    return _HARNESS_ALIASES.get(system.lower(), system), model


def _latest(lake: Lake, versions: Mapping[str, int] | None) -> dict[str, int]:
    pinned = dict(versions or {})
    return {t: int(pinned[t]) if t in pinned else lake.version(t) for t in ANALYSIS_TABLES}


def scan_trajectory_outcomes(
    lake: Lake, *, versions: Mapping[str, int] | None = None, label: str = "resolved"
) -> pl.LazyFrame:
    """One row per trajectory with its run, task, final candidate and outcome, at pinned versions.

    Args:
        lake: the lake.
        versions: table versions to read (e.g. ``lake.versions()`` taken once at the top of a
            notebook); tables not named are read at their latest version.
        label: the outcome that decides ``success``.

    Returns:
        A LazyFrame with ``trajectory_id, run_id, run, task_id, benchmark, domain, repo, harness,
        model, harness_inferred, source_format, exit_status, n_steps, tokens, cost_usd, kind,
        content, n_candidates, empty_candidate, patch_lines, outcome, success``. ``content`` is the
        trajectory's first non-blank candidate (by candidate id), ``empty_candidate`` says the
        trajectory submitted nothing (no candidate, or only blank ones), ``patch_lines`` counts the
        added and removed lines of a ``patch`` candidate (null for other kinds), ``outcome`` is the
        mean value of the ``label`` outcomes and ``success`` is ``outcome > 0.5`` (null when
        unlabelled).
    """
    pinned = _latest(lake, versions)
    scan = {t: lake.scan(t, version=v) for t, v in pinned.items()}
    runs = scan["runs"].select(
        "run_id", pl.col("name").alias("run"), pl.col("harness").alias("run_harness"),
        pl.col("model").alias("run_model"), pl.col("benchmark").alias("run_benchmark"),
    )
    tasks = (scan["tasks"].select("task_id", pl.col("benchmark").alias("task_benchmark"), "repo")
             .unique("task_id"))
    candidates = (
        scan["candidates"]
        .select("trajectory_id", "candidate_id", "kind", "content")
        .with_columns(blank=pl.col("content").fill_null("").str.strip_chars() == "")
        .sort("trajectory_id", "blank", "candidate_id")
        .group_by("trajectory_id")
        .agg(pl.col("kind").first(), pl.col("content").first(), n_candidates=pl.len(),
             empty_candidate=pl.col("blank").all())
    )
    outcomes = (
        scan["outcomes"].filter(pl.col("name") == label)
        .group_by("trajectory_id").agg(outcome=pl.col("value").mean())
    )
    frame = (
        scan["trajectories"]
        .select("trajectory_id", "run_id", "task_id", "domain", "benchmark", "harness", "model",
                "source_format", "exit_status", "n_steps", "tokens", "cost_usd")
        .join(runs, on="run_id", how="left")
        .join(tasks, on="task_id", how="left")
        .join(candidates, on="trajectory_id", how="left")
        .join(outcomes, on="trajectory_id", how="left")
    )
    inferred = pl.col("run").map_elements(lambda n: list(system_of_run(n)), return_dtype=pl.List(pl.String))
    return (
        frame.with_columns(_system=inferred)
        .with_columns(
            benchmark=pl.coalesce("benchmark", "task_benchmark", "run_benchmark"),
            harness_inferred=pl.col("harness").is_null() & pl.col("run_harness").is_null()
            & pl.col("_system").list.get(0, null_on_oob=True).is_not_null(),
            harness=pl.coalesce("harness", "run_harness", pl.col("_system").list.get(0, null_on_oob=True)),
            model=pl.coalesce("model", "run_model", pl.col("_system").list.get(1, null_on_oob=True)),
            n_candidates=pl.col("n_candidates").fill_null(0).cast(pl.Int64),
            empty_candidate=pl.col("empty_candidate").fill_null(True),
            patch_lines=pl.when(pl.col("kind") == "patch").then(changed_lines("content")),
            success=pl.col("outcome") > 0.5,
        )
        .select("trajectory_id", "run_id", "run", "task_id", "benchmark", "domain", "repo", "harness",
                "model", "harness_inferred", "source_format", "exit_status", "n_steps", "tokens", "cost_usd",
                "kind", "content", "n_candidates", "empty_candidate", "patch_lines", "outcome", "success")
        .sort("trajectory_id")
    )


def changed_lines(column: str = "content") -> pl.Expr:
    """The number of added and removed lines of a unified diff in ``column`` (0 for null or other text).

    Examples:
        >>> frame = pl.DataFrame({"p": ["--- a/x\\n+++ b/x\\n@@ -1 +1 @@\\n-a\\n+b\\n", None]})
        >>> frame.select(changed_lines("p"))["p"].to_list()
        [2, 0]
    """
    changed = pl.col(column).fill_null("").str.count_matches(r"(?m)^[+-](?:[^+-]|$)")  # not ---/+++ headers
    return changed.cast(pl.Int64).alias(column)


def _wilson(successes: pl.Expr, n: pl.Expr, z: float) -> tuple[pl.Expr, pl.Expr]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)).sqrt()) / (1 + z * z / n)
    return (centre - half).clip(0, 1), (centre + half).clip(0, 1)


def rate_by(
    frame: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str],
    *,
    column: str = "success",
    confidence: float = 0.95,
    min_count: int = 1,
) -> pl.DataFrame:
    """How often a boolean ``column`` is true in each group, with a Wilson score interval.

    Rows where ``column`` is null (e.g. unlabelled trajectories) are left out of ``n`` but counted in
    ``rows``.

    Args:
        frame: one row per unit (trajectory, candidate).
        by: the grouping column(s); a null group is kept as its own row.
        column: the boolean column whose rate is measured.
        confidence: coverage of the interval (two-sided).
        min_count: drop groups with fewer than this many non-null values.

    Returns:
        ``by..., rows, n, hits, rate, low, high``, highest rate first (ties: larger ``n`` first).

    Raises:
        ValueError: ``confidence`` is not in (0, 1) or ``column`` is missing.

    Examples:
        >>> frame = pl.DataFrame({"run": ["a", "a", "b", "b"], "success": [True, False, True, None]})
        >>> rate_by(frame, "run").select("run", "rows", "n", "hits", "rate").rows()
        [('b', 2, 1, 1, 1.0), ('a', 2, 2, 1, 0.5)]
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95, got {confidence}")
    keys = [by] if isinstance(by, str) else list(by)
    lazy = frame.lazy()
    if column not in lazy.collect_schema().names():
        raise ValueError(f"no column {column!r} to measure; the frame has {lazy.collect_schema().names()}")
    z = _normal_quantile(0.5 + confidence / 2)
    grouped = lazy.group_by(keys).agg(
        rows=pl.len().cast(pl.Int64),
        n=pl.col(column).count().cast(pl.Int64),
        hits=pl.col(column).cast(pl.Int64).sum(),
    )
    low, high = _wilson(pl.col("hits"), pl.col("n"), z)
    return (
        grouped.filter(pl.col("n") >= max(min_count, 1))
        .with_columns(rate=pl.col("hits") / pl.col("n"), low=low, high=high)
        .sort(["rate", "n", *keys], descending=[True, True, *([False] * len(keys))], nulls_last=True)
        .collect()
    )


def _normal_quantile(p: float) -> float:
    """The standard normal quantile (Acklam's rational approximation; |error| < 1.2e-9)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - 0.02425:
        return -_normal_quantile(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (
        ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def bucket_by(column: str, edges: Sequence[int]) -> pl.Expr:
    """An ordered (``Enum``) bucket label of an integer column: ``[e0, e1)``, ``[e1, e2)``, ... ``≥ last``.

    Buckets of width one read as the number alone; values below ``edges[0]`` and nulls give null.

    Args:
        column: an integer column (``n_steps``, ``patch_lines``).
        edges: strictly increasing lower bounds.

    Raises:
        ValueError: ``edges`` is empty or not strictly increasing.

    Examples:
        >>> frame = pl.DataFrame({"n": [0, 3, 12, 400]})
        >>> frame.select(bucket_by("n", [0, 1, 10, 100]))["n"].to_list()
        ['0', '1-9', '10-99', '≥100']
    """
    edges = list(edges)
    if not edges or any(b <= a for a, b in pairwise(edges)):
        raise ValueError(f"edges must be a non-empty, strictly increasing list of bounds, got {edges}")
    labels = [str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}" for lo, hi in pairwise(edges)]
    labels.append(f"≥{edges[-1]}")
    expr = pl.lit(None, dtype=pl.String)
    for lo, text in zip(edges, labels, strict=True):  # the highest bound ends up outermost
        expr = pl.when(pl.col(column) >= lo).then(pl.lit(text)).otherwise(expr)
    return expr.cast(pl.Enum(labels)).alias(column)


def action_label(name: str | None, arguments: str | None = None) -> str | None:
    """A short name for one tool call: the tool, and for shell tools the program the command ran.

    The program is the first word of the command's last ``&&``/``;``/``|`` segment that is not a
    ``cd``, an environment assignment or a wrapper (``timeout``, ``sudo``); ``python -m X`` names ``X``
    and ``python script.py`` names ``python``.

    Examples:
        >>> action_label("bash", '{"command": "cd /testbed && python -m pytest tests/ -q"}')
        'bash:pytest'
        >>> action_label("str_replace_editor", '{"command": "view", "path": "/a.py"}')
        'str_replace_editor'
        >>> action_label("bash", '{"command": "submit\\\\n"}')
        'bash:submit'
    """
    if not name:
        return None
    if name not in SHELL_TOOLS or not arguments:
        return name
    try:
        parsed: Any = json.loads(arguments)
    except ValueError:
        parsed = arguments
    command = parsed
    if isinstance(parsed, dict):
        command = next((parsed[k] for k in ("command", "cmd", "code", "input") if k in parsed), None)
    if isinstance(command, list):  # codex: ["bash", "-lc", "..."]
        command = command[-1] if command else None
    if not isinstance(command, str) or not command.strip():
        return name
    program = _program(command)
    return f"{name}:{program}" if program else name


def _program(command: str) -> str | None:
    segments = [s.strip() for s in re.split(r"&&|\|\||;|\n|\|", command) if s.strip()]
    for segment in segments:
        words = [w for w in segment.split() if not re.match(r"^\w+=", w)]
        while words and words[0] in ("timeout", "sudo", "time", "env", "nohup", "exec"):
            words = words[1:]
            while words and re.match(r"^-|^\d+[smh]?$", words[0]):
                words = words[1:]
        if not words or words[0] in ("cd", "pushd", "source", "export", "set", "."):
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program.startswith("python") and len(words) > 2 and words[1] == "-m":
            program = words[2]
        return program[:40]
    return None


def _shown_again(steps: pl.LazyFrame) -> pl.Expr:
    """Whether a step is history the trajectory was shown again rather than wrote
    (``extra.replayed_by_compaction``, ``copied_context``, ATIF's ``is_copied_context``:
    :func:`trajectory_lake.slices.replayed`); false for every step of a frame without ``extra``."""
    shown = pl.lit(False)
    if "extra" in steps.collect_schema().names():
        for key in (REPLAYED_BY_COMPACTION, *COPIED_CONTEXT):
            # a literal search first: parsing every step's extra (model responses, often kilobytes) costs
            marked = (pl.col("extra").str.contains(f'"{key}"', literal=True)
                      & (pl.col("extra").str.json_path_match(f"$.{key}") == "true"))
            shown |= marked.fill_null(False)
    return shown


def _actions(steps: pl.LazyFrame) -> pl.LazyFrame:
    """One row per tool call of an assistant step: ``trajectory_id, step_index, action``. A step that is
    history the trajectory was shown again rather than wrote (:func:`_shown_again`) is no action of its
    own."""
    return (
        steps.filter((pl.col("role") == "assistant") & ~_shown_again(steps))
        .select("trajectory_id", "step_index", "tool_calls")
        .explode("tool_calls")
        .filter(pl.col("tool_calls").is_not_null())
        .with_columns(
            action=pl.struct(name=pl.col("tool_calls").struct.field("name"),
                             arguments=pl.col("tool_calls").struct.field("arguments"))
            .map_elements(lambda c: action_label(c["name"], c["arguments"]), return_dtype=pl.String)
        )
        .filter(pl.col("action").is_not_null())
        .select("trajectory_id", "step_index", "action")
    )


def last_actions(steps: pl.DataFrame | pl.LazyFrame, *, n: int = 3) -> pl.DataFrame:
    """Each trajectory's last ``n`` actions (tool calls, see :func:`action_label`), oldest first.

    Args:
        steps: rows of the ``steps`` table (at least ``trajectory_id, step_index, role, tool_calls``).
        n: how many trailing actions to keep.

    Returns:
        ``trajectory_id, last_actions (list[str]), last_action, n_actions`` for every trajectory with
        at least one tool call.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return (
        _actions(steps.lazy())
        .sort("trajectory_id", "step_index", maintain_order=True)
        .group_by("trajectory_id", maintain_order=True)
        .agg(last_actions=pl.col("action").tail(n), n_actions=pl.len().cast(pl.Int64))
        .with_columns(last_action=pl.col("last_actions").list.last())
        .select("trajectory_id", "last_actions", "last_action", "n_actions")
        .sort("trajectory_id")
        .collect()
    )


def error_signature(text: str | None) -> str | None:
    """A short line that identifies an error observation, equal across runs that hit the same error.

    The exception class of a Python traceback (or of a line that starts with one); ``command not
    found: X``; else the first line that reads like an error (or the first line), joined with the
    lines it needs to close a backtick-quoted span, with numbers → ``N``, URLs → ``<url>``, paths →
    ``<path>`` and quoted spans over 20 characters → ``…``, cut to its first sentence and 80
    characters; ``exit code N`` when only a return code is there; ``(no output)`` for a blank error.

    Examples:
        >>> error_signature("Error: payment method certificate_7504069 not found")
        'Error: payment method certificate_N not found'
        >>> error_signature("<returncode>1</returncode>\\n<output>\\n</output>")
        'exit code 1'
        >>> error_signature("bash: ponyc: command not found")
        'command not found: ponyc'
        >>> error_signature("  ")
        '(no output)'
    """
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines()]
    if any("Traceback (most recent call last)" in line for line in lines):
        for line in reversed(lines):
            match = _EXCEPTION_LINE.match(line)
            if match:
                return match.group(1).rsplit(".", 1)[-1]
        return "Traceback (output cut before the exception)"
    missing = _NOT_FOUND.search(text)
    if missing:
        return f"command not found: {missing.group(1)}"
    meaningful = [line.strip("[]").strip() for line in lines if line and not _NOISE.fullmatch(line)]
    meaningful = [line for line in meaningful if line]
    if not meaningful:
        code = _RETURNCODE.search(text)
        return f"exit code {code.group(1)}" if code else "(no output)"
    for line in meaningful[:3]:
        match = _EXCEPTION_LINE.match(line)
        if match:  # "KeyError: 'x'" outside a traceback (pytest, logged exceptions)
            return match.group(1).rsplit(".", 1)[-1]
    pick = next((i for i, line in enumerate(meaningful) if _ERROR_WORDS.search(line)), 0)
    line = meaningful[pick]
    for more in meaningful[pick + 1 : pick + 12]:  # a `quoted` span that runs over lines: close it
        if line.count("`") % 2 == 0:
            break
        line += " " + more
    return _normalise(line)


def _normalise(line: str) -> str:
    line = re.sub(r"\b[a-z][a-z+.-]*://\S+", "<url>", line)
    line = re.sub(r"`[^`]{21,}`", "`…`", line)
    line = re.sub(r"(?<!\w)'[^']{21,}'", "'…'", line)
    line = re.sub(r'(?<!\w)"[^"]{21,}"', '"…"', line)
    line = re.sub(r"(?<![\w.:])(?:/[\w.@+-]*[\w@+-])+/?", "<path>", line)  # a trailing "." ends the sentence
    line = re.sub(r"0x[0-9a-fA-F]+", "N", line)
    line = re.sub(r"\d+(?:\.\d+)*", "N", line)
    line = re.sub(r"\s+", " ", line).strip()
    # The first sentence is enough to identify the error; what follows is usually instructions.
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    line = first if len(first) >= 12 else line
    return line[:79] + "…" if len(line) > 80 else line


def error_observations(steps: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """The error observations of each trajectory, with the action they answered and a signature.

    Args:
        steps: rows of the ``steps`` table (``trajectory_id, step_index, role, content, tool_calls,
            tool_call_id, is_error``).

    Returns:
        ``trajectory_id, step_index, action, flagged, signature, excerpt``: ``action`` is the labelled
        tool call the observation answers (matched by ``tool_call_id``, else the latest earlier
        action), ``flagged`` whether the harness marked it ``is_error`` (else it was recognised by its
        text), ``excerpt`` the first 300 characters. History the trajectory was shown again rather than
        went through (a compaction's replay, a copy of another trajectory's: :func:`_shown_again`) gives
        none: neither a marked step nor a tool result of a marked step's call (ATIF marks the step whose
        observation the result is, not the result's row), matched by ``tool_call_id``, else as the result
        of the latest earlier call; the task is what follows the first assistant step of its own.
    """
    lazy = steps.lazy()
    lazy = lazy.with_columns(shown_again=_shown_again(lazy))
    first_assistant = (
        lazy.filter((pl.col("role") == "assistant") & ~pl.col("shown_again")).group_by("trajectory_id")
        .agg(first_assistant=pl.col("step_index").min())
    )
    observations = (
        lazy.join(first_assistant, on="trajectory_id", how="inner")
        .filter(~pl.col("shown_again"))
        .filter((pl.col("role") == "tool")
                | ((pl.col("role") == "user") & (pl.col("step_index") > pl.col("first_assistant"))))
        .with_columns(content=pl.col("content").fill_null(""))
        .filter(pl.col("is_error").fill_null(False)
                | (pl.col("is_error").is_null() & pl.col("content").str.contains(_ERROR_START.pattern)))
        .select("trajectory_id", "step_index", "role", "tool_call_id", "content",
                flagged=pl.col("is_error").fill_null(False))
    )
    calls = (
        lazy.filter(pl.col("role") == "assistant")
        .select("trajectory_id", "step_index", "tool_calls", "shown_again")
        .explode("tool_calls").filter(pl.col("tool_calls").is_not_null())
        .select("trajectory_id", "shown_again", pl.col("step_index").alias("call_step"),
                tool_call_id=pl.col("tool_calls").struct.field("id"),
                action=pl.struct(name=pl.col("tool_calls").struct.field("name"),
                                 arguments=pl.col("tool_calls").struct.field("arguments"))
                .map_elements(lambda c: action_label(c["name"], c["arguments"]), return_dtype=pl.String))
    )
    by_id = calls.filter(pl.col("tool_call_id").is_not_null()).unique(["trajectory_id", "tool_call_id"])
    frame = observations.join(
        by_id.select("trajectory_id", "tool_call_id", "action", call_shown_again="shown_again"),
        on=["trajectory_id", "tool_call_id"], how="left",
    )
    # Without a matching id, an observation answers the latest action before it: interleave the
    # actions with the observations by step and carry the last action (and whether it was shown again)
    # forward.
    previous = (
        pl.concat([
            calls.group_by("trajectory_id", "call_step")
            .agg(pl.col("action").last(), pl.col("shown_again").any())
            .select("trajectory_id", pl.col("call_step").alias("step_index"), "action", "shown_again",
                    is_call=pl.lit(True)),
            frame.select("trajectory_id", "step_index", action=pl.lit(None, dtype=pl.String),
                         shown_again=pl.lit(None, dtype=pl.Boolean), is_call=pl.lit(False)),
        ])
        .sort("trajectory_id", "step_index", "is_call")
        .with_columns(previous_action=pl.col("action").forward_fill().over("trajectory_id"),
                      previous_shown_again=pl.col("shown_again").forward_fill().over("trajectory_id"))
        .filter(~pl.col("is_call"))
        .select("trajectory_id", "step_index", "previous_action", "previous_shown_again")
    )
    frame = frame.join(previous, on=["trajectory_id", "step_index"], how="left").collect()
    # a tool result answers the call its id names, else the latest call before it
    answers_shown = pl.when(pl.col("call_shown_again").is_not_null()).then(pl.col("call_shown_again"))
    answers_shown = answers_shown.otherwise((pl.col("role") == "tool") & pl.col("previous_shown_again"))
    frame = frame.filter(~answers_shown.fill_null(False))
    return (
        frame.with_columns(
            action=pl.coalesce("action", "previous_action"),
            signature=pl.col("content").map_elements(error_signature, return_dtype=pl.String),
            excerpt=pl.col("content").str.slice(0, 300),
        )
        .select("trajectory_id", "step_index", "action", "flagged", "signature", "excerpt")
        .sort("trajectory_id", "step_index")
    )


def touched_files(patch: str | None) -> list[str]:
    """The files a unified diff changes, in order of appearance (``+++ b/`` paths, else ``diff --git``).

    Examples:
        >>> touched_files("diff --git a/x.py b/x.py\\n--- a/x.py\\n+++ b/x.py\\n@@ -1 +1 @@\\n-a\\n+b\\n")
        ['x.py']
    """
    if not patch:
        return []
    files = re.findall(r"(?m)^\+\+\+ (?:b/)?(\S+)", patch)
    if not files:
        files = re.findall(r"(?m)^diff --git a/\S+ b/(\S+)", patch)
    seen: dict[str, None] = {}
    for path in files:
        if path != "/dev/null":
            seen.setdefault(path, None)
    return list(seen)


def failure_texts(
    trajectories: pl.DataFrame,
    *,
    actions: pl.DataFrame | None = None,
    errors: pl.DataFrame | None = None,
    prompts: pl.DataFrame | None = None,
    max_chars: int = 600,
) -> pl.DataFrame:
    """A short text per trajectory that says what was attempted and how it went, for embedding.

    Parts, in this order, each only when known: ``repo``, the last ``actions``, the ``errors`` seen
    (distinct signatures), the ``files`` a patch changes, the candidate (a diff's changed lines, or
    the head of the text; ``(nothing submitted)`` when blank) and the first 200 characters of the task
    ``prompt``. The most distinctive parts come first, so an encoder that keeps only the head of a
    text keeps them. Outcomes are never part of the text, so the neighbours it finds are honest
    evidence about an outcome.

    Args:
        trajectories: rows of :func:`scan_trajectory_outcomes` (``trajectory_id, task_id, repo,
            content``).
        actions: :func:`last_actions` rows.
        errors: :func:`error_observations` rows.
        prompts: ``task_id, prompt`` rows (the ``tasks`` table).
        max_chars: cut each text to this length.

    Returns:
        ``trajectory_id, text, files, modules, actions, errors``: the text, and as lists (for naming
        clusters) the files changed, their directories, the last actions and the error signatures.
    """
    frame = trajectories.select("trajectory_id", "task_id", "repo", "content")
    if prompts is not None:
        frame = frame.join(prompts.select("task_id", "prompt").unique("task_id"), on="task_id", how="left")
    else:
        frame = frame.with_columns(prompt=pl.lit(None, dtype=pl.String))
    if actions is not None:
        frame = frame.join(actions.select("trajectory_id", pl.col("last_actions").alias("actions")),
                           on="trajectory_id", how="left")
    else:
        frame = frame.with_columns(actions=pl.lit(None, dtype=pl.List(pl.String)))
    if errors is not None:
        distinct = (errors.filter(pl.col("signature").is_not_null())
                    .group_by("trajectory_id").agg(errors=pl.col("signature").unique(maintain_order=True)))
        frame = frame.join(distinct, on="trajectory_id", how="left")
    else:
        frame = frame.with_columns(errors=pl.lit(None, dtype=pl.List(pl.String)))
    frame = frame.with_columns(
        files=pl.col("content").map_elements(touched_files, return_dtype=pl.List(pl.String)),
        actions=pl.col("actions").fill_null([]),
        errors=pl.col("errors").fill_null([]),
    ).with_columns(
        modules=pl.col("files").list.eval(pl.element().str.replace(r"/?[^/]*$", ""))
        .list.unique(maintain_order=True).list.eval(pl.element().filter(pl.element() != "")),
    )

    def text(row: dict[str, Any]) -> str:
        parts = []
        if row["repo"]:
            parts.append(f"repo: {row['repo']}")
        if row["actions"]:
            parts.append("actions: " + ", ".join(row["actions"]))
        if row["errors"]:
            parts.append("errors: " + "; ".join(row["errors"][:5]))
        if row["files"]:
            parts.append("files: " + ", ".join(row["files"][:5]))
        parts.append("candidate: " + (_gist(row["content"], bool(row["files"])) or "(nothing submitted)"))
        if row["prompt"]:
            parts.append("task: " + " ".join(row["prompt"].split())[:200])
        return "\n".join(parts)[:max_chars]

    texts = [text(row) for row in frame.iter_rows(named=True)]
    return frame.with_columns(text=pl.Series(texts, dtype=pl.String)).select(
        "trajectory_id", "text", "files", "modules", "actions", "errors"
    )


def _gist(content: str | None, is_diff: bool, limit: int = 300) -> str:
    """The head of a candidate: for a diff, its changed lines without the markers and headers."""
    text = (content or "").strip()
    if is_diff:
        text = " | ".join(" ".join(line[1:].split()) for line in text.splitlines()
                          if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip())
    return " ".join(text.split())[:limit]


def name_clusters(
    frame: pl.DataFrame,
    *,
    cluster: str = "cluster",
    columns: Sequence[str] = ("actions", "errors", "files"),
    top: int = 1,
) -> pl.DataFrame:
    """Name each cluster by its most frequent items (tools, errors, files...): ``"bash:pytest · KeyError"``.

    Each list column contributes its ``top`` most frequent items in the cluster (counted once per
    member; ties broken alphabetically). A cluster with none of them is named ``"(no tools, errors or
    files)"``.

    Args:
        frame: one row per member, with ``cluster`` and list-of-string ``columns``.
        cluster: the cluster id column.
        columns: list columns to name clusters by, in the order their items appear in the name.
        top: items taken from each column.

    Returns:
        ``cluster, size, name`` and, per column, ``top_<column>`` (list of ``"item (count)"``), largest
        cluster first.

    Examples:
        >>> frame = pl.DataFrame({"cluster": [0, 0, 1], "actions": [["bash:ls"], ["bash:ls"], []],
        ...                       "errors": [["KeyError"], [], []]})
        >>> name_clusters(frame, columns=("actions", "errors"))["name"].to_list()
        ['bash:ls · KeyError', '(no tools, errors or files)']
    """
    out = frame.group_by(cluster).agg(size=pl.len().cast(pl.Int64))
    for column in columns:
        counts = (
            frame.select(cluster, pl.col(column).list.unique())
            .explode(column).drop_nulls(column)
            .group_by(cluster, column).agg(count=pl.len())
            .sort([cluster, "count", column], descending=[False, True, False])
            .group_by(cluster, maintain_order=True)
            .agg(pl.col(column).head(top).alias(f"_{column}"),
                 (pl.col(column) + " (" + pl.col("count").cast(pl.String) + ")").head(top)
                 .alias(f"top_{column}"))
        )
        out = out.join(counts, on=cluster, how="left")
    parts = [pl.col(f"_{c}").fill_null([]) for c in columns]
    name = pl.concat_list(parts).list.join(" · ") if parts else pl.lit("")
    return (
        out.with_columns(name=pl.when(name == "").then(pl.lit("(no tools, errors or files)")).otherwise(name))
        .with_columns([pl.col(f"top_{c}").fill_null([]) for c in columns])
        .select(cluster, "size", "name", *[f"top_{c}" for c in columns])
        .sort(["size", cluster], descending=[True, False])
    )


def plot_rates(
    rates: pl.DataFrame,
    label: str,
    *,
    ax: Any,  # noqa: ANN401 - a matplotlib Axes
    title: str,
    xlabel: str = "success rate",
    color: str = "#4c72b0",
    max_label: int = 34,
) -> Any:  # noqa: ANN401 - the Axes
    """Draw a :func:`rate_by` table as horizontal bars with interval whiskers and ``hits/n`` beside.

    Args:
        rates: the output of :func:`rate_by` (its order is kept, top to bottom).
        label: the group column to label bars with (long labels are cut to ``max_label``).
        ax: the matplotlib Axes to draw on.
        title: the axes title.
        xlabel: the x axis label.
        color: the bar colour.
        max_label: longest bar label, in characters.

    Returns:
        ``ax``.
    """
    names = ["(none)" if v is None else str(v) for v in rates.get_column(label).to_list()]
    names = [n if len(n) <= max_label else n[: max_label - 1] + "…" for n in names]
    y = list(range(len(names)))
    rate = rates.get_column("rate").to_list()
    low = [r - lo for r, lo in zip(rate, rates.get_column("low").to_list(), strict=True)]
    high = [hi - r for r, hi in zip(rate, rates.get_column("high").to_list(), strict=True)]
    ax.barh(y, rate, color=color, alpha=0.85)
    ax.errorbar(rate, y, xerr=[low, high], fmt="none", ecolor="#333333", elinewidth=1, capsize=3)
    for i, (hits, n) in enumerate(zip(rates.get_column("hits").to_list(), rates.get_column("n").to_list(),
                                      strict=True)):
        ax.text(1.02, i, f"{hits}/{n}", va="center", fontsize=9, transform=ax.get_yaxis_transform())
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_title(title, loc="left")
    ax.grid(axis="x", alpha=0.3)
    return ax
