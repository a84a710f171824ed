"""Ingesting real OpenHands outputs (``../shared/data/formats/openhands``).

Under test: the OpenHands adapters. Evaluation ``output.jsonl`` lines become trajectories of the run
named by their ``metadata`` (one step per event, tool calls as the model emitted them, the git patch as
the candidate); the resolver's lines become trajectories per GitHub issue with the resolver's own
verdict as a judge outcome; an event-store session folder becomes one trajectory, read whole when its
first event file is handed over. Damaged records are quarantined with a reason while the rest goes
in, and re-ingesting adds nothing. Expected values are read from the files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.trajectory_lake._helpers import read_jsonl, table_state, unreconciled
from trajectory_lake import IngestReport, Lake, ingest

EVAL_FILE = "official_example_multi_swe_bench_output.jsonl"
RESOLVER_FILE = "official_resolver_mock_output.jsonl"
SESSION = "ergt10_event_store_session"
NON_STEP = {("action", "recall"), ("action", "change_agent_state"), ("observation", "agent_state_changed")}


@pytest.fixture(scope="module")
def oh_dir(shared_data: Path) -> Path:
    return shared_data / "formats" / "openhands"


@pytest.fixture(scope="module")
def eval_lines(oh_dir: Path) -> dict[str, dict[str, Any]]:
    return {r["instance_id"]: r for r in read_jsonl(oh_dir / EVAL_FILE)}


@pytest.fixture(scope="module")
def resolver_lines(oh_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(oh_dir / RESOLVER_FILE)


@pytest.fixture(scope="module")
def session_events(oh_dir: Path) -> list[dict[str, Any]]:
    files = sorted((oh_dir / SESSION / "events").glob("*.json"), key=lambda p: int(p.stem))
    return [json.loads(p.read_text(encoding="utf-8")) for p in files]


@pytest.fixture(scope="module")
def oh(oh_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, IngestReport]:
    """The folder ingested once into a fresh lake; tests only read it."""
    lake = Lake(tmp_path_factory.mktemp("openhands") / "lake")
    return lake, ingest([oh_dir], lake)


def _kind(event: dict[str, Any]) -> tuple[str, str]:
    return ("action", event["action"]) if "action" in event else ("observation", event["observation"])


def _step_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if _kind(e) not in NON_STEP]


def _trajectory(lake: Lake, task_id: str) -> dict[str, Any]:
    (row,) = lake.read("trajectories").filter(pl.col("task_id") == task_id).to_dicts()
    return row


def _steps(lake: Lake, task_id: str) -> pl.DataFrame:
    trajectory_id = _trajectory(lake, task_id)["trajectory_id"]
    return lake.read("steps").filter(pl.col("trajectory_id") == trajectory_id).sort("step_index")


def _candidate(lake: Lake, task_id: str) -> dict[str, Any]:
    (row,) = lake.read("candidates").filter(pl.col("task_id") == task_id).to_dicts()
    return row


class TestOpenHandsFolder:
    def test_every_data_file_is_read_by_the_expected_adapter(self, oh):
        _, report = oh
        by_name = {"/".join(Path(uri).parts[-2:]): adapter for uri, adapter in report.sources.items()}
        assert by_name == {
            **{f"events/{i}.json": "openhands-events" for i in range(8)},
            "openhands/metadata.json": "openhands-eval-metadata",
            f"openhands/{EVAL_FILE}": "openhands-eval",
            f"openhands/{RESOLVER_FILE}": "openhands-resolver",
        }

    def test_nothing_is_quarantined_and_counts_reconcile(self, oh):
        lake, report = oh
        assert report.total("quarantined") == 0
        assert lake.read("quarantine").height == 0
        assert unreconciled(report) == {}

    def test_reingesting_the_folder_adds_nothing(self, oh_dir, tmp_path):
        lake = Lake(tmp_path / "lake")
        ingest([oh_dir], lake)
        before = table_state(lake)
        again = ingest([oh_dir], lake)
        assert again.total("written") == 0
        assert table_state(lake) == before


class TestOpenHandsEvalOutput:
    @pytest.mark.parametrize(
        "instance_id", ["ponylang__ponyc-4595", "ponylang__ponyc-4593", "ponylang__ponyc-4588"]
    )
    def test_each_line_is_a_trajectory_with_one_step_per_event(self, oh, eval_lines, instance_id):
        lake, _ = oh
        line = eval_lines[instance_id]
        trajectory = _trajectory(lake, f"multi-swe-bench/{instance_id}")
        expected = len(_step_events(line["history"]))
        assert trajectory["n_steps"] == expected == _steps(lake, trajectory["task_id"]).height
        assert trajectory["source_format"] == "openhands-eval"
        usage = line["metrics"]["accumulated_token_usage"]
        assert trajectory["tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert trajectory["cost_usd"] == line["metrics"]["accumulated_cost"]

    def test_a_tool_call_keeps_the_models_arguments_thought_and_tokens(self, oh, eval_lines):
        lake, _ = oh
        history = eval_lines["ponylang__ponyc-4595"]["history"]
        action = next(e for e in history if e.get("action") == "run")
        response = action["tool_call_metadata"]["model_response"]
        (source_call,) = response["choices"][0]["message"]["tool_calls"]
        index = _step_events(history).index(action)
        step = _steps(lake, "multi-swe-bench/ponylang__ponyc-4595").row(index, named=True)
        assert step["role"] == "assistant"
        (call,) = step["tool_calls"]
        assert (
            (call["id"], call["name"]) == (source_call["id"], "execute_bash") == ("toolu_01", "execute_bash")
        )
        assert call["arguments"] == source_call["function"]["arguments"]
        assert json.loads(call["arguments"]) == {"command": "ls -l /workspace/ponylang__ponyc__0.1"}
        assert step["reasoning"] == action["args"]["thought"]
        assert step["tokens"] == response["usage"]["completion_tokens"] == 128

    def test_an_observation_points_back_at_its_call(self, oh, eval_lines):
        lake, _ = oh
        history = eval_lines["ponylang__ponyc-4595"]["history"]
        observation = next(e for e in history if e.get("observation") == "run")
        index = _step_events(history).index(observation)
        step = _steps(lake, "multi-swe-bench/ponylang__ponyc-4595").row(index, named=True)
        assert step["role"] == "tool"
        assert step["tool_call_id"] == observation["tool_call_metadata"]["tool_call_id"] == "toolu_01"
        assert step["content"] == observation["content"]
        assert step["is_error"] is (not observation["success"]) is False

    def test_a_failed_edit_is_an_error_step(self, oh, eval_lines):
        lake, _ = oh
        history = eval_lines["ponylang__ponyc-4595"]["history"]
        failed = next(
            e for e in history if e.get("observation") == "edit" and e["content"].startswith("ERROR:")
        )
        step = _steps(lake, "multi-swe-bench/ponylang__ponyc-4595").row(
            _step_events(history).index(failed), named=True
        )
        assert step["is_error"] is True

    def test_the_git_patch_is_the_candidate(self, oh, eval_lines):
        lake, _ = oh
        for instance_id, line in eval_lines.items():
            candidate = _candidate(lake, f"multi-swe-bench/{instance_id}")
            assert candidate["kind"] == "patch"
            assert candidate["content"] == line["test_result"]["git_patch"]
        assert _candidate(lake, "multi-swe-bench/ponylang__ponyc-4595")["content"].startswith(
            "diff --git a/src/libponyc/ast/parser.c"
        )

    def test_the_exit_status_says_how_the_rollout_ended(self, oh, eval_lines):
        lake, _ = oh
        assert eval_lines["ponylang__ponyc-4588"]["error"].startswith(
            "RuntimeError: Agent reached maximum iteration"
        )
        assert _trajectory(lake, "multi-swe-bench/ponylang__ponyc-4588")["exit_status"] == "max_iterations"
        assert eval_lines["ponylang__ponyc-4595"]["history"][-1]["action"] == "finish"
        assert _trajectory(lake, "multi-swe-bench/ponylang__ponyc-4595")["exit_status"] == "finished"

    def test_the_run_is_named_by_the_lines_metadata(self, oh, eval_lines):
        lake, _ = oh
        metadata = eval_lines["ponylang__ponyc-4595"]["metadata"]
        run_id = _trajectory(lake, "multi-swe-bench/ponylang__ponyc-4595")["run_id"]
        (run,) = lake.read("runs").filter(pl.col("run_id") == run_id).to_dicts()
        assert run["name"] == "/".join(metadata["eval_output_dir"].split("/")[-3:])
        assert run["model"] == metadata["llm_config"]["model"] == "openai/openrouter-llama-4-maverick"
        assert (run["harness"], run["harness_version"], run["benchmark"]) == (
            "openhands",
            "0.35.0",
            "multi-swe-bench",
        )
        assert {
            t["run_id"]
            for t in lake.read("trajectories").filter(pl.col("source_format") == "openhands-eval").to_dicts()
        } == {run_id}

    def test_the_task_is_the_instance(self, oh, eval_lines):
        lake, _ = oh
        instance = eval_lines["ponylang__ponyc-4593"]["instance"]
        (task,) = (
            lake.read("tasks").filter(pl.col("task_id") == "multi-swe-bench/ponylang__ponyc-4593").to_dicts()
        )
        assert (task["domain"], task["benchmark"], task["repo"], task["base_commit"]) == (
            "swe",
            "multi-swe-bench",
            "ponylang/ponyc",
            instance["base_commit"],
        )
        assert task["prompt"] == instance["problem_statement"]

    def test_a_swe_bench_report_in_test_result_labels_the_patch(self, oh_dir, eval_lines, tmp_path):
        line = dict(eval_lines["ponylang__ponyc-4595"])
        line["metadata"] = {**line["metadata"], "dataset": "princeton-nlp__SWE-bench_Verified-test"}
        line["test_result"] = {**line["test_result"], "report": {"resolved": True, "empty_generation": False}}
        path = tmp_path / "run" / "output.jsonl"
        path.parent.mkdir()
        path.write_text(json.dumps(line) + "\n", encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        (outcome,) = lake.read("outcomes").to_dicts()
        assert (outcome["task_id"], outcome["name"], outcome["value"], outcome["source"]) == (
            "swe-bench/ponylang__ponyc-4595",
            "resolved",
            1.0,
            "harness",
        )
        assert lake.read("runs")["benchmark"].to_list() == ["swe-bench-verified"]

    def test_the_older_action_observation_pairs_give_the_same_tool_steps(self, eval_lines, tmp_path):
        line = dict(eval_lines["ponylang__ponyc-4595"])
        events = line["history"]
        by_cause = {e["cause"]: e for e in events if "observation" in e and e.get("cause") is not None}
        null = {"observation": "null", "content": "", "extras": {}, "message": "No observation"}
        line["history"] = [[e, by_cause.get(e["id"], null)] for e in events if "action" in e]
        path = tmp_path / "output.jsonl"
        path.write_text(json.dumps(line) + "\n", encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        calls = lake.read("steps").explode("tool_calls").drop_nulls("tool_calls")["tool_calls"].to_list()
        expected = [
            e["tool_call_metadata"]["tool_call_id"]
            for e in events
            if "tool_call_metadata" in e and "action" in e
        ]
        assert [c["id"] for c in calls] == expected
        extra = json.loads(lake.read("trajectories")["extra"][0])
        assert extra["skipped_events"]["null_observation"] == sum(
            1 for e in events if "action" in e and e["id"] not in by_cause
        )


class TestOpenHandsResolverOutput:
    def test_each_issue_is_a_trajectory_with_its_patch_and_the_resolvers_verdict(self, oh, resolver_lines):
        lake, _ = oh
        for line in resolver_lines:
            issue = line["issue"]
            task_id = f"github/{issue['owner']}/{issue['repo']}#{issue['number']}"
            trajectory = _trajectory(lake, task_id)
            assert trajectory["n_steps"] == len(line["history"])
            assert trajectory["cost_usd"] == pytest.approx(line["metrics"]["accumulated_cost"])
            candidate = _candidate(lake, task_id)
            assert candidate["content"] == line["git_patch"]
            (outcome,) = (
                lake.read("outcomes").filter(pl.col("candidate_id") == candidate["candidate_id"]).to_dicts()
            )
            assert (outcome["name"], outcome["value"], outcome["source"]) == (
                "resolved",
                float(line["success"]),
                "judge",
            )

    def test_flat_legacy_events_become_steps(self, oh, resolver_lines):
        lake, _ = oh
        history = resolver_lines[0]["history"]
        steps = _steps(lake, "github/neubig/pr-viewer#5")
        assert steps["role"].to_list() == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        assert (
            steps.row(0, named=True)["content"] == history[0]["content"] == resolver_lines[0]["instruction"]
        )
        run_step = steps.row(1, named=True)
        assert run_step["tool_calls"] == [
            {"id": None, "name": "run", "arguments": json.dumps({"command": "touch LICENSE"})}
        ]
        assert run_step["reasoning"] == history[1]["thought"]
        assert steps.row(2, named=True)["is_error"] is (history[2]["exit_code"] != 0) is False
        assert steps.row(7, named=True)["tool_calls"][0]["name"] == "finish"

    def test_the_task_is_the_github_issue(self, oh, resolver_lines):
        lake, _ = oh
        issue = resolver_lines[1]["issue"]
        (task,) = lake.read("tasks").filter(pl.col("task_id") == "github/neubig/pr-viewer#1").to_dicts()
        assert task["repo"] == "neubig/pr-viewer"
        assert task["prompt"] == f"{issue['title']}\n\n{issue['body']}"
        assert task["base_commit"] is None  # the line's base_commit is ""


class TestOpenHandsEventStore:
    def test_the_session_is_one_trajectory_read_from_its_first_event_file(self, oh, session_events, oh_dir):
        lake, _ = oh
        (trajectory,) = (
            lake.read("trajectories").filter(pl.col("source_format") == "openhands-events").to_dicts()
        )
        assert trajectory["source_uri"] == (oh_dir / SESSION / "events" / "0.json").resolve().as_uri()
        assert trajectory["n_steps"] == len(_step_events(session_events)) == 6
        extra = json.loads(trajectory["extra"])
        assert extra["session_id"] == SESSION
        assert extra["event_files"] == [f"{i}.json" for i in range(8)]
        assert extra["agent_states"] == ["running"] == [trajectory["exit_status"]]
        (task,) = lake.read("tasks").filter(pl.col("task_id") == trajectory["task_id"]).to_dicts()
        assert task["prompt"] == session_events[1]["args"]["content"]

    def test_the_think_call_and_the_error_observation(self, oh, session_events):
        lake, _ = oh
        (trajectory,) = (
            lake.read("trajectories").filter(pl.col("source_format") == "openhands-events").to_dicts()
        )
        steps = (
            lake.read("steps")
            .filter(pl.col("trajectory_id") == trajectory["trajectory_id"])
            .sort("step_index")
        )
        think = session_events[5]
        (source_call,) = think["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"]
        step = steps.row(3, named=True)
        assert step["tool_calls"] == [
            {"id": "toolu_01", "name": "think", "arguments": source_call["function"]["arguments"]}
        ]
        assert step["reasoning"] == think["args"]["thought"]
        assert steps.row(4, named=True)["tool_call_id"] == "toolu_01"
        error = steps.row(5, named=True)
        assert (error["role"], error["is_error"], error["content"]) == (
            "user",
            True,
            session_events[7]["content"],
        )

    def test_handing_over_only_the_first_event_file_still_reads_the_whole_session(self, oh_dir, tmp_path):
        lake = Lake(tmp_path / "lake")
        ingest([oh_dir / SESSION / "events" / "0.json"], lake)
        assert lake.read("trajectories")["n_steps"].to_list() == [6]

    def test_a_later_event_file_alone_is_recognised_but_emits_nothing(self, oh_dir, tmp_path):
        lake = Lake(tmp_path / "lake")
        report = ingest([oh_dir / SESSION / "events" / "3.json"], lake)
        assert list(report.sources.values()) == ["openhands-events"]
        assert report.total("quarantined") == 0
        assert lake.read("trajectories").height == 0

    def test_a_truncated_event_file_is_quarantined_and_left_out_of_the_session(self, oh_dir, tmp_path):
        session = tmp_path / SESSION
        shutil.copytree(oh_dir / SESSION, session)
        damaged = session / "events" / "5.json"
        damaged.write_bytes(damaged.read_bytes()[:300])
        lake = Lake(tmp_path / "lake")
        report = ingest([session], lake)
        (bad,) = lake.read("quarantine").to_dicts()
        assert bad["source_uri"] == damaged.resolve().as_uri()
        assert "invalid JSON" in bad["error"] and bad["error"].startswith("openhands-events:")
        (trajectory,) = lake.read("trajectories").to_dicts()
        assert trajectory["n_steps"] == 5
        assert "events/5.json" in json.loads(trajectory["extra"])["left_out"]
        assert unreconciled(report) == {}

    def test_when_the_first_event_file_is_damaged_the_next_one_leads(self, oh_dir, tmp_path):
        session = tmp_path / SESSION
        shutil.copytree(oh_dir / SESSION, session)
        first = session / "events" / "0.json"
        first.write_text(
            '{"id": 0, "timestamp": "2026-01-06T15:17:07", "source": "agent", "action": 7}', encoding="utf-8"
        )
        lake = Lake(tmp_path / "lake")
        ingest([session], lake)
        (bad,) = lake.read("quarantine").to_dicts()
        assert "'action' must be a non-empty string" in bad["error"]
        (trajectory,) = lake.read("trajectories").to_dicts()
        assert trajectory["source_uri"].endswith("events/1.json")
        assert trajectory["n_steps"] == 5  # the system prompt is gone, the rest is there


class TestOpenHandsMalformedLines:
    def test_a_truncated_output_file_keeps_its_whole_lines(self, oh_dir, tmp_path):
        data = (oh_dir / EVAL_FILE).read_bytes()
        cut = data.rstrip(b"\n").rfind(b"\n") + 200  # into the last line
        path = tmp_path / "output.jsonl"
        path.write_bytes(data[:cut])
        lake = Lake(tmp_path / "lake")
        report = ingest([path], lake)
        (bad,) = lake.read("quarantine").to_dicts()
        assert bad["locator"] == "line 3" and "invalid JSON" in bad["error"]
        assert lake.read("trajectories").height == 2
        assert unreconciled(report) == {}

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("history", "not a list", "'history' must be a list"),
            ("test_result", {"git_patch": 42}, "test_result.git_patch must be a string"),
            ("instance_id", None, "'instance_id' must be a non-empty string"),
        ],
    )
    def test_a_line_with_a_wrong_type_is_quarantined_with_the_reason(
        self, oh_dir, tmp_path, field, value, message
    ):
        lines = (oh_dir / EVAL_FILE).read_text(encoding="utf-8").splitlines()
        broken = json.loads(lines[1])
        broken[field] = value
        path = tmp_path / "output.jsonl"
        path.write_text("\n".join([lines[0], json.dumps(broken), lines[2]]) + "\n", encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        (bad,) = lake.read("quarantine").to_dicts()
        assert bad["locator"] == "line 2"
        assert message in bad["error"]
        assert lake.read("trajectories").height == 2

    def test_a_malformed_event_names_its_place_in_the_history(self, oh_dir, tmp_path):
        lines = read_jsonl(oh_dir / RESOLVER_FILE)
        lines[0]["history"][2]["exit_code"] = 0
        lines[0]["history"][3] = {"action": "run_ipython", "observation": "run_ipython"}
        lines[1]["issue"]["number"] = "one"
        path = tmp_path / "output.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        errors = dict(lake.read("quarantine").select("locator", "error").iter_rows())
        assert "history[3]: an event needs exactly one of 'action' or 'observation'" in errors["line 1"]
        assert "issue.number must be an integer" in errors["line 2"]
        assert lake.read("trajectories").height == 0
