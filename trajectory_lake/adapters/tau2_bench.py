"""tau2-bench results files: the monolithic ``Results`` JSON that ``tau2 run`` saves.

Documented structure (sierra-research/tau2-bench ``src/tau2/data_model/simulation.py``, ``message.py``,
``tasks.py``)::

    {"timestamp",
     "info": {"git_commit", "num_trials", "max_steps", "max_errors", "seed",
              "user_info": {"implementation", "llm", "llm_args", "global_simulation_guidelines"},
              "agent_info": {"implementation", "llm", "llm_args"},
              "environment_info": {"domain_name", "policy", "tool_defs"}, ...},
     "tasks": [{"id", "description", "user_scenario": {"persona", "instructions": str |
                {"domain", "reason_for_call", "known_info", "unknown_info", "task_instructions"}},
                "initial_state", "evaluation_criteria": {"actions", "env_assertions", "communicate_info",
                "nl_assertions", "reward_basis"}, ...}],
     "simulations": [{"id", "task_id", "trial", "seed", "start_time", "end_time", "duration",
                      "termination_reason", "agent_cost", "user_cost",
                      "reward_info": {"reward", "db_check", "env_assertions", "action_checks",
                                      "nl_assertions", "communicate_checks", "reward_basis",
                                      "reward_breakdown": {"DB": 1.0, "COMMUNICATE": 1.0, ...}, "info"},
                      "messages": [{"role": "assistant" | "user", "content", "tool_calls":
                                    [{"id", "name", "arguments": {...}, "requestor"}], "turn_idx",
                                    "timestamp", "cost", "usage", "raw_data", ...}
                                   | {"role": "tool", "id", "content", "requestor", "error", ...}
                                   | {"role": "tool", "tool_messages": [tool messages]}]}, ...]}

Mapping (domain ``assistant``):

==========================  ===================================================================
source                      lake
==========================  ===================================================================
file                        one run: name = file stem, harness ``tau2-bench``, harness_version =
                            ``info.git_commit``, model = ``agent_info.llm``, benchmark
                            ``tau2-bench-<domain>``, config = everything but tasks and simulations
``tasks[i]``                task ``tau2-bench/<domain>/<id>``: prompt = the user scenario rendered as
                            upstream's ``str(UserScenario)`` (what the user simulator is given),
                            reference = ``evaluation_criteria`` JSON, metadata = the rest
``simulations[i]``          one trajectory; attempt = ``trial``; exit_status = ``termination_reason``;
                            cost_usd = ``agent_cost``; tokens = the agent's completion tokens;
                            started/ended = ``start_time``/``end_time``; the rest in ``extra``
message                     one step each (a ``MultiToolMessage`` gives one step per tool result):
                            tool calls with ids, ``id`` → tool_call_id, ``error`` → is_error,
                            ``usage.completion_tokens`` → tokens, reasoning from ``raw_data``
final answer                ``answer`` candidate (``tau_bench.answer_content``): the agent's last
                            text to the user and its tool calls, in order
``reward_info``             outcomes ``reward``, ``resolved`` (within 1e-6 of 1) and
                            ``reward.<component>`` per ``reward_breakdown`` entry (``reward.db``,
                            ``reward.communicate``, ``reward.env_assertion``, ``reward.nl_assertion``,
                            ``reward.action``); none for runs upstream calls non-evaluable
                            (``infrastructure_error``, ``context_window_exceeded``)
==========================  ===================================================================

Timestamps without a zone (tau2 writes local ``datetime.now()``) are read as UTC. A file cut short
inside ``simulations`` keeps its complete simulations; the unreadable rest is quarantined. The
"dir" layout (``results.json`` + ``simulations/<id>.json``) is read for its run and tasks only.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from trajectory_lake.adapters._base import Adapter, RunGroup, SourceFile
from trajectory_lake.adapters.tau_bench import (
    DOMAIN,
    agent_actions,
    answer_content,
    env_from_name,
    number,
    raw_json,
    reward_outcomes,
    salvage_object,
)
from trajectory_lake.records import (
    Bundle,
    Quarantined,
    as_timestamp,
    json_or_none,
    make_candidate,
    make_run,
    make_step,
    make_task,
    make_trajectory,
    normalise_tool_calls,
    task_id_for,
)

__all__ = ["Tau2BenchResults"]

FAMILY = "tau2-bench"
_KNOWN_DOMAINS = ("airline", "retail", "telecom", "mock")
# tau2.data_model.simulation.NON_EVALUABLE_TERMINATION_REASONS: no evaluable rollout, left out of metrics.
_NON_EVALUABLE = frozenset({"infrastructure_error", "context_window_exceeded"})
_MAPPED_SIMULATION_KEYS = {
    "task_id",
    "trial",
    "start_time",
    "end_time",
    "termination_reason",
    "agent_cost",
    "messages",
}
_MAPPED_MESSAGE_KEYS = {"role", "content", "tool_calls", "timestamp"}
_MAPPED_TOOL_KEYS = {"role", "content", "id", "error", "timestamp"}


class Tau2BenchResults(Adapter):
    """tau2-bench ``Results`` JSON → a run, its tasks, one trajectory per simulation, answers and rewards."""

    name: ClassVar[str] = "tau2-bench"
    rank: ClassVar[int] = 20

    @classmethod
    def sniff(cls, source: SourceFile) -> bool:
        if not source.is_json_document():
            return False
        head = source.head()
        if not head.lstrip().startswith(b"{") or b'"agent_info"' not in head or b'"user_info"' not in head:
            return False  # cheap rejection before parsing
        try:
            document = source.document
        except ValueError:
            return b'"environment_info"' in head  # damaged: read() keeps what it can
        info = document.get("info") if isinstance(document, dict) else None
        return (
            isinstance(info, dict)
            and "agent_info" in info
            and ("simulations" in document or "tasks" in document)
        )

    def read(self, source: SourceFile, group: RunGroup) -> Iterator[Bundle | Quarantined]:
        try:
            text = source.text
        except UnicodeDecodeError as exc:
            yield self.quarantine("$", f"not UTF-8 text: {exc}", source.data)
            return
        broken: tuple[str, str, bytes] | None = None
        try:
            document = source.document
        except ValueError:
            fields, items, error, failed_key, stop = salvage_object(text, "simulations")
            if error and failed_key != "simulations":
                yield self.quarantine("$", f"invalid tau2-bench results file: {error}", source.data)
                return
            simulations = [
                (f"$.simulations[{i}]", raw.encode("utf-8", "surrogatepass"), value)
                for i, (raw, value) in enumerate(items)
            ]
            if error:
                broken = (
                    f"$.simulations[{len(items)}:]",
                    f"{error}; simulations from {len(items)} on are unreadable (truncated file?)",
                    text[stop:].encode("utf-8", "surrogatepass"),
                )
            elif text[stop:].strip():
                broken = (
                    f"character {stop}",
                    "unexpected data after the results object",
                    text[stop:].encode("utf-8", "surrogatepass"),
                )
        else:
            if not isinstance(document, dict):
                yield self.quarantine(
                    "$", f"expected a JSON object, got {type(document).__name__}", source.data
                )
                return
            fields = document
            sims = document.get("simulations") or []
            if not isinstance(sims, list):
                yield self.quarantine(
                    "$.simulations", f"expected a list, got {type(sims).__name__}", raw_json(sims)
                )
                sims = []
            simulations = [(f"$.simulations[{i}]", b"", value) for i, value in enumerate(sims)]

        info = fields.get("info")
        tasks = fields.get("tasks") or []
        if not isinstance(info, dict) or not isinstance(tasks, list):
            yield self.quarantine(
                "$", "expected 'info' (object) and 'tasks' (array) in a tau2-bench results file", source.data
            )
            return
        domain = _domain(source, info, tasks)
        if domain is None:
            yield self.quarantine(
                "$.info.environment_info",
                "cannot tell the tau2-bench domain: no "
                "'environment_info.domain_name', no task domain, and the file name names none",
                source.data,
            )
            return
        try:
            run = _run(source, fields, info, domain)
        except ValueError as exc:  # a name the run id cannot hash (a lone surrogate)
            yield self.quarantine("$", str(exc), source.data)
            return
        policy = _object(info.get("environment_info")).get("policy")

        for index, task in enumerate(tasks):
            locator = f"$.tasks[{index}]"
            try:
                row = _task_row(task, domain, source)
            except (ValueError, TypeError) as exc:
                yield Quarantined(
                    table="tasks", locator=locator, error=f"{self.name}: {exc}", raw=raw_json(task)
                )
                continue
            bundle = Bundle(locator=locator, priority=self.rank)
            bundle.add("tasks", row)
            yield bundle
        for locator, raw, simulation in simulations:
            try:
                yield self._bundle(source, run, domain, policy, locator, simulation)
            except (ValueError, TypeError) as exc:
                yield self.quarantine(locator, str(exc), raw or raw_json(simulation))
        if broken:
            yield self.quarantine(*broken)

    def _bundle(
        self,
        source: SourceFile,
        run: dict[str, Any],
        domain: str,
        policy: Any,  # noqa: ANN401 - the run's policy text, if any
        locator: str,
        sim: Any,  # noqa: ANN401 - validated here
    ) -> Bundle:
        if not isinstance(sim, dict):
            raise ValueError(f"expected a simulation object, got {type(sim).__name__}")
        task_ref = _id_text(sim.get("task_id"), what="field 'task_id'")
        trial = sim.get("trial")
        if trial is None:
            trial = 0
        if isinstance(trial, bool) or not isinstance(trial, int):
            raise ValueError(f"field 'trial' must be an integer, got {trial!r}")
        messages = sim.get("messages")
        if messages is None and sim.get("ticks"):
            raise ValueError(
                "field 'messages' is null and the run is stored as full-duplex 'ticks'; "
                "only half-duplex message lists are read"
            )
        if messages is None:
            messages = []
        if not isinstance(messages, list):
            raise ValueError(f"field 'messages' must be a list, got {type(messages).__name__}")
        reward_info = sim.get("reward_info")
        if reward_info is not None and not isinstance(reward_info, dict):
            raise ValueError(f"field 'reward_info' must be an object, got {reward_info!r:.80}")
        termination = sim.get("termination_reason")
        if termination is not None and not isinstance(termination, str):
            raise ValueError(f"field 'termination_reason' must be a string, got {termination!r}")
        agent_cost = sim.get("agent_cost")
        ended_at = _timestamp(sim.get("end_time"), what="field 'end_time'")
        extra = {k: v for k, v in sim.items() if k not in _MAPPED_SIMULATION_KEYS and v is not None}
        if policy is not None and extra.get("policy") == policy:
            del extra["policy"]  # the run's own policy (in the run's config), repeated per simulation
        trajectory = make_trajectory(
            run=run,
            task_id=task_id_for(FAMILY, f"{domain}/{task_ref}"),
            domain=DOMAIN,
            source_format=self.name,
            source_uri=source.uri,
            source_sha256=source.sha256,
            attempt=trial,
            exit_status=termination,
            cost_usd=None if agent_cost is None else number(agent_cost, what="field 'agent_cost'"),
            started_at=_timestamp(sim.get("start_time"), what="field 'start_time'"),
            ended_at=ended_at,
        )
        steps = [_step(trajectory, i, where, m) for i, (where, m) in enumerate(_flatten(messages))]
        agent_tokens = [s["tokens"] for s in steps if s["role"] == "assistant" and s["tokens"] is not None]
        user_tokens = [s["tokens"] for s in steps if s["role"] == "user" and s["tokens"] is not None]
        if user_tokens:
            extra["user_simulator_completion_tokens"] = sum(user_tokens)
        trajectory.update(
            n_steps=len(steps),
            tokens=sum(agent_tokens) if agent_tokens else None,
            extra=json_or_none(extra),
        )
        bundle = Bundle(locator=locator, priority=self.rank)
        bundle.add("runs", run)
        bundle.add("trajectories", trajectory)
        bundle.extend("steps", steps)
        if not steps:
            return bundle  # nothing was said or done: no answer to score
        candidate = make_candidate(
            trajectory, kind="answer", content=answer_content(_final_message(steps), agent_actions(steps))
        )
        bundle.add("candidates", candidate)
        if reward_info is not None and termination not in _NON_EVALUABLE:
            reward = number(reward_info.get("reward"), what="field 'reward_info.reward'")
            bundle.extend(
                "outcomes",
                reward_outcomes(
                    candidate, reward, _components(reward_info), evaluator=FAMILY, recorded_at=ended_at
                ),
            )
        return bundle


def _object(value: Any) -> dict[str, Any]:  # noqa: ANN401 - any JSON value
    return value if isinstance(value, dict) else {}


def _id_text(value: Any, *, what: str) -> str:  # noqa: ANN401 - validated here
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _timestamp(value: Any, *, what: str) -> Any:  # noqa: ANN401 - datetime or None
    try:
        return as_timestamp(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}: {exc}") from None


def _domain(source: SourceFile, info: Mapping[str, Any], tasks: list[Any]) -> str | None:
    env_info = info.get("environment_info")
    name = env_info.get("domain_name") if isinstance(env_info, dict) else None
    if isinstance(name, str) and name:
        return name
    for task in tasks:
        scenario = task.get("user_scenario") if isinstance(task, dict) else None
        instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
        if (
            isinstance(instructions, dict)
            and isinstance(instructions.get("domain"), str)
            and instructions["domain"]
        ):
            return instructions["domain"]
    return env_from_name(source.path, _KNOWN_DOMAINS)


def _run(
    source: SourceFile, fields: Mapping[str, Any], info: Mapping[str, Any], domain: str
) -> dict[str, Any]:
    agent, audio = _object(info.get("agent_info")), _object(info.get("audio_native_config"))
    model = agent.get("llm") if isinstance(agent.get("llm"), str) else audio.get("model")
    commit = info.get("git_commit")
    try:
        started_at = as_timestamp(fields.get("timestamp"))
    except (ValueError, TypeError):
        started_at = None  # kept verbatim in the config
    return make_run(
        name=source.path.name.removesuffix(".json"),
        harness=FAMILY,
        harness_version=commit if isinstance(commit, str) else None,
        model=model if isinstance(model, str) else None,
        benchmark=f"{FAMILY}-{domain}",
        config={k: v for k, v in fields.items() if k not in ("tasks", "simulations")},
        started_at=started_at,
    )


def _indent(text: str) -> str:
    return textwrap.indent(text, "\t")


def _scenario_text(scenario: Any) -> str:  # noqa: ANN401 - validated here
    """The user scenario as upstream's ``str(UserScenario)`` renders it for the user simulator."""
    if not isinstance(scenario, dict):
        raise ValueError(f"field 'user_scenario' must be an object, got {scenario!r:.80}")
    instructions = scenario.get("instructions")
    if isinstance(instructions, dict):
        parts = []
        for key, title in (
            ("domain", "Domain: "),
            ("reason_for_call", "Reason for call:\n"),
            ("known_info", "Known info:\n"),
            ("unknown_info", "Unknown info:\n"),
            ("task_instructions", "Task instructions:\n"),
        ):
            value = instructions.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"field 'user_scenario.instructions.{key}' must be text, got {value!r:.80}")
            parts.append(f"{title}{value}" if key == "domain" else f"{title}{_indent(value)}")
        if not parts:
            raise ValueError("field 'user_scenario.instructions' has none of its documented fields")
        text = "\n".join(parts)
    elif isinstance(instructions, str) and instructions.strip():
        text = instructions
    else:
        raise ValueError(
            f"field 'user_scenario.instructions' must be text or an object, got {instructions!r:.80}"
        )
    lines = []
    persona = scenario.get("persona")
    if persona is not None:
        if not isinstance(persona, str):
            raise ValueError(f"field 'user_scenario.persona' must be text, got {persona!r:.80}")
        lines += ["Persona:", _indent(persona)]
    lines += ["Instructions:", _indent(text)]
    return "\n".join(lines)


def _task_row(task: Any, domain: str, source: SourceFile) -> dict[str, Any]:  # noqa: ANN401 - validated here
    if not isinstance(task, dict):
        raise ValueError(f"expected a task object, got {type(task).__name__}")
    task_ref = _id_text(task.get("id"), what="field 'id'")
    criteria = task.get("evaluation_criteria")
    if criteria is not None and not isinstance(criteria, dict):
        raise ValueError(f"field 'evaluation_criteria' must be an object, got {criteria!r:.80}")
    return make_task(
        task_id=task_id_for(FAMILY, f"{domain}/{task_ref}"),
        domain=DOMAIN,
        benchmark=f"{FAMILY}-{domain}",
        instance_id=task_ref,
        prompt=_scenario_text(task.get("user_scenario")),
        reference=raw_json(criteria).decode("utf-8", "surrogatepass") if criteria is not None else None,
        metadata={k: v for k, v in task.items() if k not in ("id", "evaluation_criteria") and v is not None},
        source_uri=source.uri,
    )


def _flatten(messages: list[Any]) -> Iterator[tuple[str, Any]]:
    """``(where, message)``: each message, with a ``MultiToolMessage`` opened into its tool messages."""
    for i, message in enumerate(messages):
        if isinstance(message, dict) and isinstance(message.get("tool_messages"), list):
            for j, tool_message in enumerate(message["tool_messages"]):
                yield f"messages[{i}].tool_messages[{j}]", tool_message
        else:
            yield f"messages[{i}]", message


def _reasoning(message: Mapping[str, Any]) -> str | None:
    """Reasoning text, from the message or from the provider response kept in ``raw_data``."""
    value = message.get("reasoning_content")
    raw = message.get("raw_data")
    if value is None and isinstance(raw, dict):
        choices = raw.get("choices")
        first = _object(choices[0] if isinstance(choices, list) and choices else None)
        value = _object(first.get("message")).get("reasoning_content")
    return value if isinstance(value, str) and value else None


def _step(trajectory: Mapping[str, Any], index: int, where: str, message: Any) -> dict[str, Any]:  # noqa: ANN401
    if not isinstance(message, dict):
        raise ValueError(f"{where} must be a message object, got {type(message).__name__}")
    role, content = message.get("role"), message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError(f"{where}.content must be text, got {type(content).__name__}")
    if not isinstance(role, str) or not role:
        raise ValueError(f"{where}.role must be a non-empty string, got {role!r}")
    timestamp = _timestamp(message.get("timestamp"), what=f"{where}.timestamp")
    if role == "tool":
        call_id, error = message.get("id"), message.get("error")
        if call_id is not None and not isinstance(call_id, str):
            raise ValueError(f"{where}.id must be the tool call's id (text), got {call_id!r}")
        if error is not None and not isinstance(error, bool):
            raise ValueError(f"{where}.error must be a boolean, got {error!r}")
        extra = {k: v for k, v in message.items() if k not in _MAPPED_TOOL_KEYS and v is not None}
        return make_step(
            trajectory,
            index,
            role=role,
            content=content,
            tool_call_id=call_id,
            is_error=error,
            timestamp=timestamp,
            extra=extra,
        )
    raw_calls = message.get("tool_calls")
    try:
        tool_calls = normalise_tool_calls(raw_calls)
    except ValueError as exc:
        raise ValueError(f"{where}.tool_calls: {exc}") from None
    for call in tool_calls or []:
        if not isinstance(call["name"], str) or not call["name"]:
            raise ValueError(f"{where}.tool_calls: a tool call has no name")
    extra = {k: v for k, v in message.items() if k not in _MAPPED_MESSAGE_KEYS and v is not None}
    requestors = [c.get("requestor") for c in raw_calls or []]
    if any(r is not None and r != role for r in requestors):
        extra["tool_call_requestors"] = requestors
    usage = message.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return make_step(
        trajectory,
        index,
        role=role,
        content=content,
        reasoning=_reasoning(message),
        tool_calls=tool_calls,
        tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        timestamp=timestamp,
        extra=extra,
    )


def _final_message(steps: Sequence[Mapping[str, Any]]) -> str | None:
    """The last text the agent sent to the user (messages carrying tool calls go to the environment)."""
    said = None
    for step in steps:
        if step["role"] == "assistant" and not step["tool_calls"] and (step["content"] or "").strip():
            said = step["content"]
    return said


def _components(reward_info: Mapping[str, Any]) -> dict[str, float]:
    """``reward_breakdown`` as ``{"db": 1.0, "communicate": 0.0, ...}``."""
    breakdown = reward_info.get("reward_breakdown")
    if breakdown is None:
        return {}
    if not isinstance(breakdown, dict):
        raise ValueError(f"field 'reward_info.reward_breakdown' must be an object, got {breakdown!r:.80}")
    return {
        str(key).rsplit(".", 1)[-1].lower(): number(value, what=f"field 'reward_info.reward_breakdown.{key}'")
        for key, value in breakdown.items()
    }
