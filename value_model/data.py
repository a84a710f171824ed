"""Training examples from the lake, and the split by task.

An example is one candidate with its task prompt and its binary label. Examples are the rows of a
lake slice (:mod:`trajectory_lake.slices`: ``candidates`` x ``outcomes`` x ``tasks`` at pinned table
versions); the versions are returned with the frame so a training run records exactly what it read.

The split is by task: a task's hash decides whether all of its candidates are in validation, so no
task is ever in both splits.

Two kinds of example:

* **trajectory-level** (``patch``, ``answer``): one row per candidate; with context, the
  trajectory's steps come before it;
* **step-level** (``action``): every assistant step of a trajectory whose outcome is known becomes a
  row whose candidate is that step (its text and tool calls) and whose context is the steps before
  it. Its ``value`` is the trajectory's final outcome (the mean of the label over the trajectory's
  candidates), ``t`` its position among the trajectory's actions and ``n_actions`` their count, from
  which the trainer computes TD(λ) targets (:func:`value_model.losses.td_lambda_targets`).

Steps are not copied into the rows: :func:`load_steps` reads them once per trajectory, and
:func:`contexts_of` hands each row the steps it sees.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trajectory_lake.dependencies import lazy_import
from trajectory_lake.records import (
    NEXT_CALL_ONLY,
    NOT_IN_HISTORY,
    SUMMARIZES_STEPS,
)
from trajectory_lake.slices import (
    STEP_COLUMNS,
    SeenBefore,
    SliceSpec,
    final_message_at,
    load_steps,
    own_thought,
    replayed,
    resolve_slice,
    scan_slice,
    seen_before,
    task_bucket,
    task_buckets,
)
from value_model.serialize import render_step, step_action

if TYPE_CHECKING:
    import polars as pl

    from trajectory_lake import Lake
else:  # importing value_model must not need the lake's packages (serving a local model, GPU checks)
    pl = lazy_import("polars", feature="training examples (value_model.data)")

__all__ = [
    "STEP_COLUMNS",
    "Examples",
    "StepsByTrajectory",
    "action_examples_of",
    "contexts_of",
    "decision_ids",
    "examples_of",
    "load_action_examples",
    "load_examples",
    "load_steps",
    "split_by_task",
    "task_bucket",
    "with_reference_positives",
]

StepsByTrajectory = Mapping[str, Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class Examples:
    """Examples and where they came from.

    Attributes:
        frame: one row per candidate: task_id, candidate_id, run_id, prompt, content, label, value
            (and for actions trajectory_id, step_index, t, n_actions, reasoning).
        versions: the table versions read (lineage for MLflow).
        steps: each trajectory's steps in order (:func:`load_steps`), when the examples need context.
    """

    frame: pl.DataFrame
    versions: dict[str, int]
    steps: StepsByTrajectory | None = None


def load_examples(
    lake: Lake,
    *,
    kind: str = "patch",
    label: str = "resolved",
    drop_empty: bool = True,
    versions: dict[str, int] | None = None,
) -> Examples:
    """Labelled candidates of ``kind`` with their task prompts (a slice with no filters and no split).

    Args:
        lake: the lake to read.
        kind: candidate kind (``patch``, ``answer``, ``action``).
        label: outcome name; several evaluations of a candidate are averaged, ``> 0.5`` is positive.
        drop_empty: drop candidates whose content is blank.
        versions: pin table versions (default: the latest of each).

    Returns:
        :class:`Examples`. Candidates without a label or without a task prompt are left out.
    """
    spec = SliceSpec(name="examples", kind=kind, label=label, drop_empty=drop_empty, val_fraction=0.0,
                     versions=versions)
    manifest = resolve_slice(lake, spec)
    return Examples(frame=examples_of(scan_slice(lake, manifest).collect()), versions=manifest.versions)


def examples_of(rows: pl.DataFrame) -> pl.DataFrame:
    """Slice rows as training examples: a binary ``label`` column and a prompt on every row."""
    return rows.filter(pl.col("prompt").is_not_null()).with_columns(
        value=pl.col("label"), label=(pl.col("label") > 0.5).cast(pl.Float32), content=pl.col("content").fill_null("")
    )


def with_reference_positives(lake: Lake, train: pl.DataFrame, *, version: int | None = None) -> pl.DataFrame:
    """``train`` plus one positive example per task whose lake row has a reference solution (``reference``:
    a dataset's gold patch or answer), scored against the same prompt as the task's candidates.

    The added rows have ``candidate_id = "reference:<task_id>"``, label 1 and no trajectory (so no
    context); every other column is null.

    Args:
        lake: where the tasks are.
        train: training examples (``task_id``, ``prompt``, ``content``, ``label``, ...).
        version: the ``tasks`` version to read (the slice's pinned one).
    """
    if train.is_empty():
        return train
    tasks = train.select("task_id", "prompt").unique("task_id", keep="first", maintain_order=True)
    references = (
        lake.scan("tasks", version=version)
        .filter(pl.col("task_id").is_in(tasks.get_column("task_id").implode())
                & (pl.col("reference").fill_null("").str.strip_chars() != ""))
        .select("task_id", "reference")
        .unique("task_id", keep="first")
        .collect()
    )
    kind = train.get_column("kind")[0] if "kind" in train.columns else None
    added = tasks.join(references, on="task_id", how="inner", maintain_order="left").select(
        "task_id", "prompt",
        candidate_id=pl.lit("reference:") + pl.col("task_id"),
        content=pl.col("reference"),
        label=pl.lit(1.0, dtype=train.schema["label"]),
        value=pl.lit(1.0, dtype=train.schema.get("value", pl.Float64)),
        **({"kind": pl.lit(kind)} if kind is not None else {}),
        **({"split": pl.lit("train")} if "split" in train.columns else {}),
    )
    return pl.concat([train, added], how="diagonal_relaxed")


def split_by_task(frame: pl.DataFrame, *, val_fraction: float, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split examples into (train, validation) by task hash.

    Raises:
        ValueError: ``val_fraction`` is not in (0, 1).
    """
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    is_val = pl.Series(task_buckets(frame.get_column("task_id"), seed), dtype=pl.Float64) < val_fraction
    return frame.filter(~is_val), frame.filter(is_val)


def decision_ids(task_id: str, steps: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """The decision each step of one trajectory is taken at: ``<task_id>/<digest>`` of the task and every
    step the model was shown before it (each rendered as the serializer renders context, reasoning included;
    after a compaction, as :func:`contexts_of`), by step index.

    Steps of different trajectories share a decision only when everything before them is the same: only
    there are they alternative actions for one choice (Best@1 of step-level models is measured there,
    :func:`value_model.evaluation.action_metrics`); each other step is the one action taken at its prefix.

    Examples:
        >>> user = {"step_index": 0, "role": "user", "content": "Cancel my flight."}
        >>> a = decision_ids("t", [user, {"step_index": 1, "role": "assistant", "content": "Which one?"}])
        >>> b = decision_ids("t", [user, {"step_index": 1, "role": "assistant", "content": "Done."}])
        >>> a[1] == b[1], a[0] == a[1]
        (True, False)
    """
    out: dict[int, str] = {}
    digest = _context_digest(task_id, ())  # the steps every later context holds
    sent = None  # while steps sent in one call only (a requery's) are seen: the context with them
    for at, step in enumerate(steps):
        out[step["step_index"]] = f"{task_id}/{(digest if sent is None else sent).hexdigest()[:20]}"
        if step.get(SUMMARIZES_STEPS):  # a compaction's summary: what follows is seen after it, not the rest
            kept = seen_before(steps, at + 1)
            digest = _context_digest(task_id, [s for s in kept if not s.get(NEXT_CALL_ONLY)])
            held = step.get(NEXT_CALL_ONLY) or (sent is not None and step.get("role") != "assistant")
            sent = _context_digest(task_id, kept) if held else None
        elif step.get("role") == "assistant":  # the reply to a call: what that call alone was sent is no more
            sent = None
            if step.get(NOT_IN_HISTORY):  # a reply the agent kept out of its history is in no later context
                continue
            rendered = json.dumps(render_step(step, include_reasoning=True)).encode()
            if step.get(NEXT_CALL_ONLY):  # a requery's rejected reply: seen up to the next reply
                sent = digest.copy()
                sent.update(rendered)
            else:
                digest.update(rendered)
        elif not step.get(NOT_IN_HISTORY):
            rendered = json.dumps(render_step(step, include_reasoning=True)).encode()
            if not step.get(NEXT_CALL_ONLY):
                digest.update(rendered)
            elif sent is None:  # a requery's error: seen up to the next reply
                sent = digest.copy()
            if sent is not None:
                sent.update(rendered)
    return out


def _context_digest(task_id: str, steps: Iterable[Mapping[str, Any]]) -> Any:  # noqa: ANN401 - hashlib's
    digest = hashlib.sha256(json.dumps(task_id).encode())
    for step in steps:
        digest.update(json.dumps(render_step(step, include_reasoning=True)).encode())
    return digest


def action_examples_of(trajectories: pl.DataFrame, steps: StepsByTrajectory) -> pl.DataFrame:
    """Step-level examples: every assistant step of every labelled trajectory (see the module docstring).

    Args:
        trajectories: labelled trajectory-level rows (:func:`examples_of` of a ``patch``/``answer``
            slice): ``trajectory_id``, ``task_id``, ``run_id``, ``prompt``, ``value`` and, when
            present, ``split``. Several candidates of one trajectory are averaged.
        steps: each trajectory's steps in order (:func:`load_steps`).

    Returns:
        One row per non-empty assistant step (but those a compaction sent the model again or a copy of
        another trajectory's history, :func:`~trajectory_lake.slices.replayed`: no decision was taken there),
        ordered by task, trajectory and step:
        ``candidate_id`` (``<trajectory_id>/action/<step_index>``), ``kind`` = ``action``, ``step_index``,
        ``t``, ``n_actions``, ``content`` (the step's text and tool calls), ``reasoning`` (its own, with that
        of the reasoning-only steps just before it: its thought, which a client sends with the candidate),
        ``context_end`` (the step index its context ends before: the first of those steps, else its
        own), ``decision_id`` (:func:`decision_ids`, of that context), ``value`` (the trajectory's
        outcome) and the binary ``label``.
    """
    keep = [c for c in ("run_id", "split") if c in trajectories.columns]
    outcome = (
        trajectories.group_by("trajectory_id", maintain_order=True)
        .agg(pl.col("task_id").first(), pl.col("prompt").first(), *(pl.col(c).first() for c in keep),
             pl.col("value").mean())
    )
    rows: list[dict[str, Any]] = []
    for trajectory in outcome.iter_rows(named=True):
        trajectory_steps = steps.get(trajectory["trajectory_id"], ())
        decisions = decision_ids(trajectory["task_id"], trajectory_steps)
        # a step a compaction sent again, or a copy of another trajectory's history, is context, not a
        # decision taken there
        actions = [(at, s) for at, s in enumerate(trajectory_steps) if s["role"] == "assistant"
                   and step_action(s) and not replayed(s)]
        for t, (at, step) in enumerate(actions):
            thought = own_thought(trajectory_steps, at)
            reasoning = [s["reasoning"] for s in trajectory_steps[thought:at + 1] if s["reasoning"]]
            rows.append({
                **trajectory,
                "candidate_id": f"{trajectory['trajectory_id']}/action/{step['step_index']}",
                "kind": "action",
                "step_index": step["step_index"],
                "context_end": trajectory_steps[thought]["step_index"],
                "t": t,
                "n_actions": len(actions),
                "content": step_action(step),
                "reasoning": "\n\n".join(reasoning) if reasoning else None,
                "decision_id": decisions[trajectory_steps[thought]["step_index"]],
            })
    schema = {"trajectory_id": pl.String, "task_id": pl.String, "prompt": pl.String,
              **{c: pl.String for c in keep}, "value": pl.Float64, "candidate_id": pl.String, "kind": pl.String,
              "step_index": pl.Int32, "context_end": pl.Int32, "t": pl.Int32, "n_actions": pl.Int32,
              "content": pl.String,
              "reasoning": pl.String, "decision_id": pl.String}
    frame = pl.DataFrame(rows, schema=schema)
    return frame.with_columns(label=(pl.col("value") > 0.5).cast(pl.Float32)).sort("task_id", "trajectory_id", "t")


def load_action_examples(
    lake: Lake,
    *,
    trajectory_kind: str = "patch",
    label: str = "resolved",
    versions: dict[str, int] | None = None,
    steps_version: int | None = None,
) -> Examples:
    """Step-level examples of every trajectory with a labelled ``trajectory_kind`` candidate.

    Args:
        lake: the lake to read.
        trajectory_kind: the candidate kind (``patch`` or ``answer``) that carries the outcome.
        label: outcome name.
        versions: pin the slice tables' versions (default: the latest of each).
        steps_version: pin the ``steps`` table's version (default: the latest).

    Returns:
        :class:`Examples` with the steps attached; ``versions`` includes ``steps``.
    """
    trajectories = load_examples(lake, kind=trajectory_kind, label=label, drop_empty=False, versions=versions)
    version = lake.version("steps") if steps_version is None else steps_version
    steps = load_steps(lake, trajectories.frame.get_column("trajectory_id"), version=version,
                       benchmarks=trajectories.frame.get_column("benchmark"))
    return Examples(frame=action_examples_of(trajectories.frame, steps), versions={**trajectories.versions,
                    "steps": version}, steps=steps)


def contexts_of(frame: pl.DataFrame, steps: StepsByTrajectory) -> list[list[Mapping[str, Any]]]:
    """Each row's context: the steps of its trajectory before its candidate.

    For an action, the steps before it; for a candidate that is the trajectory's last word (an answer that
    is the agent's last message, in Codex and ATIF; a patch that mini-swe-agent's final ``exit`` step
    holds), the steps before that step, as a client sends the conversation before the candidates;
    otherwise (most patches, a tau-bench answer: actions and final message as JSON) all of them. After a
    compaction (a summary step, ``summarizes_steps``) they are the steps the model was shown then
    (:func:`trajectory_lake.slices.seen_before`): the summary in place of the steps it stands for, as the
    agent sends its model the conversation, and a client the reranker. Each trajectory is read once
    (:class:`~trajectory_lake.slices.SeenBefore`), however many of its actions are rows. A slice export's
    messages are the same steps (:func:`trajectory_lake.slices.export_slice`).
    """
    out: list[list[Mapping[str, Any]]] = []
    # an action's context ends before its own thought (context_end), else before the action itself
    ends = "context_end" if "context_end" in frame.columns else "step_index"
    step_index = frame.get_column(ends) if ends in frame.columns else None
    kinds = frame.get_column("kind") if "kind" in frame.columns else None
    contents = frame.get_column("content") if "content" in frame.columns else None
    # each trajectory read once: its step indices and what was seen at each position (a trajectory scored
    # action by action has as many rows as actions)
    seen: dict[str, SeenBefore] = {}
    for i, trajectory_id in enumerate(frame.get_column("trajectory_id")):
        history = seen.get(trajectory_id)
        if history is None:
            history = seen[trajectory_id] = SeenBefore(list(steps.get(trajectory_id, ())))
        if kinds is not None and step_index is not None and kinds[i] == "action" and step_index[i] is not None:
            end = history.position(step_index[i])
        elif contents is not None and contents[i]:
            end = final_message_at(history.steps, contents[i])
        else:
            end = len(history.steps)
        out.append(history.at(end))
    return out
