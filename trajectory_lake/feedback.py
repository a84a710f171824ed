"""Served decisions and their outcomes, written back so the next training round learns from them.

The reranker service calls :func:`write_feedback` when an agent reports which candidate it chose and,
later, how it did. One feedback event becomes ordinary lake rows, so slices and training read served
decisions exactly like ingested rollouts:

* ``runs``: one run for everything served (harness ``harvest-reranker``);
* ``tasks``: the task, unless the lake knows it already (matched by ``task_id``, then by
  ``instance_id``; otherwise ``served/<id>`` or ``served/<hash of the prompt>``);
* ``trajectories`` + ``candidates``: one per served candidate, with a deterministic id from
  (task, content), so the same patch served twice for a task is one candidate whose outcomes add up;
* ``outcomes``: the reported outcome of one candidate (``name``, default ``resolved``; ``source``,
  default ``agent``), one row per (request, candidate, name, source, evaluator);
* ``rerank_events``: the event itself (what was served with which scores, what was chosen, the
  outcome), keyed by (request_id, event_id).

Each table gets one commit of only the rows whose keys are new, in dependency order, with
``rerank_events`` last: writing the same feedback twice adds nothing, and a crash between tables
leaves rows that the retry completes. The commit is a MERGE that inserts unmatched keys
(:meth:`Lake.insert_new`), so two processes sharing the lake that write the same feedback at once
still add each row once: delta-rs rejects the later MERGE as conflicting and its re-run matches.
:func:`feedback_rows` is the pure part (rows from a :class:`Feedback`); :func:`write_feedback` does
the IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from trajectory_lake._hashing import content_sha256, stable_id
from trajectory_lake.dependencies import lazy_import
from trajectory_lake.records import (
    CANDIDATE_KINDS,
    make_candidate,
    make_outcome,
    make_run,
    make_task,
    make_trajectory,
)
from trajectory_lake.schema import KEYS

if TYPE_CHECKING:
    import polars as pl

    from trajectory_lake.lake import Lake
else:  # the service imports this module for ServedCandidate and FeedbackWrite, with or without a lake
    pl = lazy_import("polars", feature="feedback to the lake")

__all__ = [
    "SERVED_HARNESS",
    "Feedback",
    "FeedbackWrite",
    "ServedCandidate",
    "feedback_rows",
    "write_feedback",
]

SERVED_HARNESS = "harvest-reranker"
_ORDER = ("runs", "tasks", "trajectories", "candidates", "outcomes", "rerank_events")


@dataclass(frozen=True, kw_only=True)
class ServedCandidate:
    """One candidate as it was served."""

    content: str
    kind: str = "patch"
    client_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Feedback:
    """One feedback event on a served rerank.

    Attributes:
        request_id: the served request's id.
        model_uri: the model that scored it.
        model_revision: its exact weights.
        task_id: the lake task id (see :func:`resolve_task_id`).
        prompt: the task statement as served.
        domain: the task's domain.
        candidates: the served candidates, in request order.
        values: raw values served, per candidate.
        scores: calibrated scores served, per candidate.
        served_at: when the rerank was answered.
        chosen: index of the candidate the agent went with.
        outcome_name: what the outcome measures (``resolved``, ``reward``, ...).
        outcome_value: the outcome (``resolved``: 1.0 or 0.0).
        outcome_index: the candidate the outcome is about (default: ``chosen``).
        source: who judged it (``agent``, ``tests``, ``human``, ...).
        evaluator: a finer name for the judge, if any.
        recorded_at: when the feedback arrived.
    """

    request_id: str
    model_uri: str
    model_revision: str | None = None
    task_id: str
    prompt: str
    domain: str = "unknown"
    candidates: Sequence[ServedCandidate]
    values: Sequence[float]
    scores: Sequence[float]
    served_at: datetime
    chosen: int | None = None
    outcome_name: str = "resolved"
    outcome_value: float | None = None
    outcome_index: int | None = None
    source: str = "agent"
    evaluator: str | None = None
    recorded_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        problems = []
        n = len(self.candidates)
        if not (len(self.values) == len(self.scores) == n):
            problems.append(
                f"values ({len(self.values)}) and scores ({len(self.scores)}) must match the {n} candidates"
            )
        for name in ("chosen", "outcome_index"):
            index = getattr(self, name)
            if index is not None and not 0 <= index < n:
                problems.append(f"{name} must be in 0..{n - 1}, got {index}")
        if self.outcome_value is not None and self.outcome_index is None and self.chosen is None:
            problems.append("an outcome needs the candidate it is about: give chosen or outcome_index")
        if self.chosen is None and self.outcome_value is None:
            problems.append("feedback needs a chosen candidate, an outcome, or both")
        for c in self.candidates:
            if c.kind not in CANDIDATE_KINDS:
                problems.append(f"candidate kind must be one of {CANDIDATE_KINDS}, got {c.kind!r}")
                break
        if problems:
            raise ValueError("invalid feedback: " + "; ".join(problems))

    @property
    def target(self) -> int | None:
        """The candidate the outcome is about."""
        return self.outcome_index if self.outcome_index is not None else self.chosen

    @property
    def event_id(self) -> str:
        """Content-addressed id of this event: the same feedback twice is the same event."""
        return stable_id(
            "rerank_event",
            self.request_id,
            self.chosen,
            self.outcome_name,
            self.outcome_value,
            self.target if self.outcome_value is not None else None,
            self.source,
            self.evaluator,
        )


@dataclass(frozen=True)
class FeedbackWrite:
    """What :func:`write_feedback` added: new rows per table (0 = already there), and the event id."""

    event_id: str
    rows: dict[str, int]
    candidate_ids: list[str]


def served_task_id(client_id: str | None, prompt: str) -> str:
    """The id of a task the lake does not know: ``served/<client id>``, else a hash of the prompt.

    Examples:
        >>> served_task_id("django__django-11099", "...")
        'served/django__django-11099'
        >>> served_task_id(None, "fix it")[:9]
        'served/b2'
    """
    return f"served/{client_id}" if client_id else "served/" + stable_id("task", content_sha256(prompt))


def resolve_task_id(lake: Lake, client_id: str | None, prompt: str) -> tuple[str, bool]:
    """The lake's id for a served task, and whether the lake already has it.

    A ``client_id`` matches a ``task_id`` first, then a task's ``instance_id`` (agents send
    ``django__django-11099`` for the lake's ``swe-bench/django__django-11099``).
    """
    if client_id and lake.exists("tasks"):
        tasks = lake.scan("tasks").select("task_id", "instance_id")
        same = tasks.filter(pl.col("task_id") == client_id).select("task_id").head(1).collect()
        if same.height:
            return client_id, True
        same = (
            tasks.filter(pl.col("instance_id") == client_id)
            .select("task_id")
            .sort("task_id")
            .head(1)
            .collect()
        )
        if same.height:
            return same.item(0, 0), True
    return served_task_id(client_id, prompt), False


def feedback_rows(feedback: Feedback, *, ingest_id: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``feedback`` per table (pure: no lake access), provenance columns included."""
    now = feedback.recorded_at
    run = make_run(name="served", harness=SERVED_HARNESS)
    task = make_task(
        task_id=feedback.task_id,
        domain=feedback.domain,
        prompt=feedback.prompt,
        metadata={"served_request": feedback.request_id},
    )
    trajectories, candidates = [], []
    for c in feedback.candidates:
        trajectory = make_trajectory(
            run=run,
            task_id=feedback.task_id,
            domain=feedback.domain,
            source_format="rerank",
            source_uri=f"rerank:{feedback.request_id}",
            source_sha256=None,
            attempt=content_sha256(c.content),  # type: ignore[arg-type]  # any JSON value
            n_steps=0,
            extra={"client_id": c.client_id} if c.client_id else None,
        )
        trajectories.append(trajectory)
        candidates.append(make_candidate(trajectory, kind=c.kind, content=c.content))
    outcomes = []
    if feedback.outcome_value is not None and feedback.target is not None:
        outcome = make_outcome(
            candidates[feedback.target],
            name=feedback.outcome_name,
            value=feedback.outcome_value,
            source=feedback.source,
            evaluator=feedback.evaluator,
            recorded_at=now,
        )
        outcome["outcome_id"] = stable_id(
            "outcome",
            outcome["candidate_id"],
            feedback.outcome_name,
            feedback.source,
            feedback.evaluator,
            feedback.request_id,
        )
        outcomes.append(outcome)
    event = {
        "request_id": feedback.request_id,
        "event_id": feedback.event_id,
        "model_uri": feedback.model_uri,
        "model_revision": feedback.model_revision,
        "task_id": feedback.task_id,
        "candidate_hashes": [c["content_sha256"] for c in candidates],
        "candidate_ids": [c["candidate_id"] for c in candidates],
        "scores": [float(s) for s in feedback.scores],
        "values": [float(v) for v in feedback.values],
        "chosen": feedback.chosen,
        "outcome_name": feedback.outcome_name if feedback.outcome_value is not None else None,
        "outcome_value": feedback.outcome_value,
        "outcome_index": feedback.target if feedback.outcome_value is not None else None,
        "at": feedback.served_at,
        "recorded_at": now,
    }
    provenance = {"ingest_id": ingest_id, "ingested_at": now}
    rows = {
        "runs": [run],
        "tasks": [task],
        "trajectories": trajectories,
        "candidates": candidates,
        "outcomes": outcomes,
    }
    out = {table: [{**r, **provenance} for r in table_rows] for table, table_rows in rows.items()}
    out["rerank_events"] = [event]
    return out


def _unique(table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(tuple(row[k] for k in KEYS[table]), row)
    return list(seen.values())


def write_feedback(lake: Lake, feedback: Feedback) -> FeedbackWrite:
    """Append ``feedback`` to the lake (tables and order in the module docstring); idempotent.

    Args:
        lake: the lake (tables are created if missing).
        feedback: the event.

    Returns:
        How many new rows each table got, the event id, and the lake ids of the served candidates.
    """
    from trajectory_lake.lake import conform

    lake.create()  # and gives a rerank_events table from before feedback its columns (schema.MIGRATIONS)
    rows = feedback_rows(feedback, ingest_id=stable_id("feedback", feedback.request_id, feedback.event_id))
    metadata = {
        "harvest.operation": "feedback",
        "harvest.request_id": feedback.request_id,
        "harvest.event_id": feedback.event_id,
    }
    written: dict[str, int] = {}
    for table in _ORDER:
        table_rows = _unique(table, rows[table])
        if not table_rows:
            written[table] = 0
            continue
        keys = pl.DataFrame(
            {k: [r[k] for r in table_rows] for k in KEYS[table]}, schema={k: pl.String for k in KEYS[table]}
        )
        present = {tuple(r) for r in lake.existing_keys(table, keys).iter_rows()}
        new = [r for r in table_rows if tuple(r[k] for k in KEYS[table]) not in present]
        # the check above only spares a commit; the MERGE decides, so concurrent retries insert once
        written[table] = lake.insert_new(table, conform(table, new), metadata=metadata) if new else 0
    return FeedbackWrite(
        event_id=feedback.event_id,
        rows=written,
        candidate_ids=[c["candidate_id"] for c in rows["candidates"]],
    )
