"""Ingesting real Codex CLI session rollouts (``../shared/data/formats/codex-rollout``).

Under test: the Codex rollout adapter. Each ``rollout-*.jsonl`` is one session and becomes one
trajectory: one step per ``response_item`` line (messages, reasoning, tool calls, tool outputs), token
counts from the cumulative ``token_count`` events, the task from the first ``user_message`` event, the
model from ``turn_context``, and the final answer (the last ``final_answer`` message) as the candidate.
The publisher redacted the free text but kept the structure, ids, token counts and timestamps, so
expected values are read from the files themselves. Also: the pre-envelope layout of older rollouts,
malformed lines and files, and re-ingestion.
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
from trajectory_lake._hashing import content_sha256
from trajectory_lake.adapters import SourceFile, detect
from trajectory_lake.ingest import discover

FINISHED = "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
LONG = "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
STOPPED = "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
SESSIONS = (FINISHED, LONG, STOPPED)


@pytest.fixture(scope="module")
def codex_dir(shared_data: Path) -> Path:
    return shared_data / "formats" / "codex-rollout"


@pytest.fixture(scope="module")
def lines(codex_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: read_jsonl(codex_dir / name) for name in SESSIONS}


@pytest.fixture(scope="module")
def codex(codex_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, IngestReport]:
    """The folder ingested once into a fresh lake; tests only read it."""
    lake = Lake(tmp_path_factory.mktemp("codex") / "lake")
    return lake, ingest([codex_dir], lake)


def _session_id(session: list[dict[str, Any]]) -> str:
    return session[0]["payload"]["id"]


def _trajectory(lake: Lake, session: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [
        row
        for row in lake.read("trajectories").to_dicts()
        if json.loads(row["extra"])["session"]["id"] == _session_id(session)
    ]
    (row,) = rows
    return row


def _steps(lake: Lake, trajectory: dict[str, Any]) -> pl.DataFrame:
    return (
        lake.read("steps").filter(pl.col("trajectory_id") == trajectory["trajectory_id"]).sort("step_index")
    )


def _items(session: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["payload"] for line in session if line["type"] == "response_item"]


def _expected_role(item: dict[str, Any]) -> str:
    if item["type"] == "message":
        return item["role"]
    return "tool" if item["type"].endswith("_output") else "assistant"


class TestCodexSessions:
    def test_each_rollout_is_one_trajectory_of_one_run(self, codex, lines):
        lake, _ = codex
        trajectories = lake.read("trajectories")
        assert trajectories.height == len(SESSIONS)
        (run,) = lake.read("runs").to_dicts()
        meta = lines[FINISHED][0]["payload"]
        assert (run["harness"], run["harness_version"], run["model"]) == (
            "codex",
            "0.104.0-alpha.1",
            "gpt-5.3-codex",
        )
        assert run["name"] == f"{meta['originator']} {meta['cli_version']}" == "Codex Desktop 0.104.0-alpha.1"
        assert trajectories["run_id"].unique().to_list() == [run["run_id"]]
        assert set(trajectories["source_format"]) == {"codex:rollout"}

    @pytest.mark.parametrize("name", SESSIONS)
    def test_every_response_item_becomes_one_step_in_file_order(self, codex, lines, name):
        lake, _ = codex
        items = _items(lines[name])
        trajectory = _trajectory(lake, lines[name])
        steps = _steps(lake, trajectory)
        assert trajectory["n_steps"] == steps.height == len(items)
        assert steps["role"].to_list() == [_expected_role(item) for item in items]
        times = [line["timestamp"] for line in lines[name] if line["type"] == "response_item"]
        assert [t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" for t in steps["timestamp"]] == times

    def test_the_step_counts_are_those_of_the_files(self, codex, lines):
        lake, _ = codex
        assert {name: _trajectory(lake, lines[name])["n_steps"] for name in SESSIONS} == {
            FINISHED: 29,
            LONG: 286,
            STOPPED: 11,
        }

    def test_a_function_call_keeps_its_call_id_name_and_arguments(self, codex, lines):
        lake, _ = codex
        steps = _steps(lake, _trajectory(lake, lines[FINISHED]))
        items = _items(lines[FINISHED])
        index = next(i for i, item in enumerate(items) if item["type"] == "function_call")
        step = steps.row(index, named=True)
        assert step["role"] == "assistant"
        assert step["content"] is None
        (call,) = step["tool_calls"]
        assert call == {
            "id": "call_OIMY41RetdVChp5U51mMLGOD",
            "name": "mcp__cloud-associates__search_workflows",
            "arguments": items[index]["arguments"],
        }
        assert call["arguments"] == "[REDACTED_ARGUMENTS len=46 sha=4cb9a2fc]"

    def test_a_function_call_output_points_back_at_its_call(self, codex, lines):
        lake, _ = codex
        steps = _steps(lake, _trajectory(lake, lines[FINISHED]))
        items = _items(lines[FINISHED])
        index = next(i for i, item in enumerate(items) if item["type"] == "function_call_output")
        step = steps.row(index, named=True)
        assert step["role"] == "tool"
        assert step["tool_call_id"] == "call_OIMY41RetdVChp5U51mMLGOD"
        assert step["content"] == items[index]["output"] == "[REDACTED_OUTPUT len=4215 sha=9a9d94de]"
        calls = steps.filter(pl.col("role") == "assistant")["tool_calls"].drop_nulls().explode()
        outputs = steps.filter(pl.col("role") == "tool")["tool_call_id"]
        assert set(outputs) <= {c["id"] for c in calls}  # every output answers a call of the session

    def test_a_reasoning_item_is_an_assistant_step_with_its_summary_as_reasoning(self, codex, lines):
        lake, _ = codex
        steps = _steps(lake, _trajectory(lake, lines[FINISHED]))
        items = _items(lines[FINISHED])
        index = next(i for i, item in enumerate(items) if item["type"] == "reasoning")
        step = steps.row(index, named=True)
        assert (step["role"], step["content"]) == ("assistant", None)
        assert (
            step["reasoning"] == items[index]["summary"][0]["text"] == "[REDACTED_TEXT len=32 sha=beedaecc]"
        )
        assert json.loads(step["extra"])["encrypted_content"] == items[index]["encrypted_content"]

    def test_a_message_keeps_its_role_text_and_phase(self, codex, lines):
        lake, _ = codex
        steps = _steps(lake, _trajectory(lake, lines[FINISHED]))
        items = _items(lines[FINISHED])
        assert steps["content"][0] == items[0]["content"][0]["text"]
        assert steps["role"][0] == "developer"
        final = steps.row(steps.height - 1, named=True)
        assert final["content"] == "[REDACTED_TEXT len=647 sha=10502814]"
        assert json.loads(final["extra"])["phase"] == "final_answer"


class TestCodexTokensAndTimes:
    @pytest.mark.parametrize("name", SESSIONS)
    def test_trajectory_tokens_are_the_last_snapshots_output_tokens(self, codex, lines, name):
        lake, _ = codex
        snapshots = [
            line["payload"]["info"]["total_token_usage"]
            for line in lines[name]
            if line["type"] == "event_msg"
            and line["payload"]["type"] == "token_count"
            and line["payload"]["info"]
        ]
        trajectory = _trajectory(lake, lines[name])
        assert trajectory["tokens"] == snapshots[-1]["output_tokens"]
        assert json.loads(trajectory["extra"])["token_usage"] == snapshots[-1]
        assert _steps(lake, trajectory)["tokens"].sum() == snapshots[-1]["output_tokens"]

    def test_a_model_calls_usage_goes_to_the_step_that_ended_the_call(self, codex, lines):
        lake, _ = codex
        assert _trajectory(lake, lines[FINISHED])["tokens"] == 1123
        steps = _steps(lake, _trajectory(lake, lines[FINISHED]))
        call_step = steps.filter(pl.col("tool_calls").list.len() > 0).row(0, named=True)
        assert call_step["tokens"] == 204  # last_token_usage.output_tokens of the first model call
        assert json.loads(call_step["extra"])["usage"]["reasoning_output_tokens"] == 124

    def test_times_span_the_session(self, codex, lines):
        lake, _ = codex
        trajectory = _trajectory(lake, lines[LONG])
        started = lines[LONG][0]["payload"]["timestamp"]
        assert trajectory["started_at"].isoformat().replace("+00:00", "Z")[:23] == started[:23]
        assert (
            trajectory["ended_at"].isoformat().replace("+00:00", "Z")[:23]
            == lines[LONG][-1]["timestamp"][:23]
        )


class TestCodexTaskAndAnswer:
    @pytest.mark.parametrize("name", SESSIONS)
    def test_the_task_is_the_users_first_message_hashed_into_its_id(self, codex, lines, name):
        lake, _ = codex
        (prompt,) = [
            line["payload"]["message"]
            for line in lines[name]
            if line["type"] == "event_msg" and line["payload"]["type"] == "user_message"
        ]
        task_id = f"codex/{content_sha256(prompt)[:16]}"
        assert _trajectory(lake, lines[name])["task_id"] == task_id
        (task,) = lake.read("tasks").filter(pl.col("task_id") == task_id).to_dicts()
        assert (task["prompt"], task["domain"], task["benchmark"]) == (prompt, "swe", None)

    @pytest.mark.parametrize(
        ("name", "status"), [(FINISHED, "completed"), (LONG, "completed"), (STOPPED, "incomplete")]
    )
    def test_the_exit_status_is_the_last_turns(self, codex, lines, name, status):
        assert _trajectory(codex[0], lines[name])["exit_status"] == status

    @pytest.mark.parametrize("name", [FINISHED, LONG])
    def test_the_final_answer_is_the_answer_candidate(self, codex, lines, name):
        lake, _ = codex
        finals = [item for item in _items(lines[name]) if item.get("phase") == "final_answer"]
        trajectory = _trajectory(lake, lines[name])
        (candidate,) = (
            lake.read("candidates").filter(pl.col("trajectory_id") == trajectory["trajectory_id"]).to_dicts()
        )
        assert candidate["kind"] == "answer"
        assert candidate["content"] == finals[-1]["content"][0]["text"]
        assert candidate["step_index"] is None

    def test_a_session_that_stopped_mid_turn_has_no_candidate(self, codex, lines):
        lake, _ = codex
        trajectory = _trajectory(lake, lines[STOPPED])
        assert (
            lake.read("candidates").filter(pl.col("trajectory_id") == trajectory["trajectory_id"]).height == 0
        )

    def test_rollouts_carry_no_label(self, codex):
        assert codex[0].read("outcomes").height == 0


class TestCodexFolder:
    def test_every_file_is_read_by_the_expected_adapter(self, codex, codex_dir):
        _, report = codex
        by_name = {Path(uri).name: adapter for uri, adapter in report.sources.items()}
        assert by_name == {**dict.fromkeys(SESSIONS, "codex"), "manifest.json": "quarantined"}
        assert report.skipped == [str(codex_dir / "README.fixture.md")]

    def test_only_the_fixture_manifest_is_quarantined_and_counts_reconcile(self, codex):
        lake, report = codex
        (row,) = lake.read("quarantine").to_dicts()
        assert row["source_uri"].endswith("manifest.json") and row["error"].startswith("unknown format")
        assert unreconciled(report) == {}

    def test_no_other_shared_file_is_taken_for_a_rollout(self, shared_data):
        files, _ = discover([shared_data])
        codex_files = {
            path.name
            for path in files
            if (a := detect(SourceFile(path=path, data=path.read_bytes()))) and a.name == "codex"
        }
        assert codex_files == set(SESSIONS)

    def test_reingesting_the_folder_adds_nothing(self, codex_dir, tmp_path):
        lake = Lake(tmp_path / "lake")
        ingest([codex_dir], lake)
        before = table_state(lake)
        again = ingest([codex_dir], lake)
        assert table_state(lake) == before
        assert again.total("written") == 0


class TestCodexOlderLayout:
    """Rollouts written before lines were wrapped: a bare header, state records, bare response items."""

    LEGACY = (
        {
            "id": "4bb054bf-0000-4000-8000-000000000001",
            "timestamp": "2025-07-05T23:31:25.580Z",
            "instructions": None,
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>",
                }
            ],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "**Listing**"}],
            "encrypted_content": "gAAAA",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "name": "shell",
            "arguments": '{"command":["ls"]}',
            "call_id": "call_1",
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": '{"output":"README.md\\n","metadata":{"exit_code":0,"duration_seconds":0.1}}',
        },
        {"type": "function_call", "name": "shell", "arguments": '{"command":["false"]}', "call_id": "call_2"},
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": '{"output":"","metadata":{"exit_code":1,"duration_seconds":0.0}}',
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "There is README.md."}],
        },
    )

    @pytest.fixture
    def legacy(self, tmp_path: Path) -> tuple[Lake, IngestReport]:
        path = tmp_path / "rollout-2025-07-05T23-31-25-4bb054bf-0000-4000-8000-000000000001.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in self.LEGACY), encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        return lake, ingest([path], lake)

    def test_the_old_layout_is_read_as_a_session(self, legacy):
        lake, report = legacy
        assert list(report.sources.values()) == ["codex"]
        (trajectory,) = lake.read("trajectories").to_dicts()
        assert trajectory["source_format"] == "codex:legacy"
        assert trajectory["n_steps"] == 8
        steps = _steps(lake, trajectory)
        assert steps["role"].to_list() == [
            "user",
            "user",
            "assistant",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]

    def test_the_task_skips_injected_context_and_the_answer_is_the_last_message(self, legacy):
        lake, _ = legacy
        (task,) = lake.read("tasks").to_dicts()
        assert task["prompt"] == "list the files"
        assert task["task_id"] == f"codex/{content_sha256('list the files')[:16]}"
        (candidate,) = lake.read("candidates").to_dicts()
        assert (candidate["kind"], candidate["content"]) == ("answer", "There is README.md.")

    def test_shell_exit_codes_set_is_error(self, legacy):
        lake, _ = legacy
        tools = lake.read("steps").filter(pl.col("role") == "tool").sort("step_index")
        assert tools.select("tool_call_id", "is_error").rows() == [("call_1", False), ("call_2", True)]


class TestCodexMalformed:
    def test_a_truncated_last_line_is_quarantined_and_the_session_kept(self, codex_dir, lines, tmp_path):
        text = (codex_dir / FINISHED).read_text(encoding="utf-8")
        body, last = text.rstrip("\n").rsplit("\n", 1)
        path = tmp_path / FINISHED
        path.write_text(body + "\n" + last[: len(last) // 2], encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        report = ingest([path], lake)
        (row,) = lake.read("quarantine").to_dicts()
        assert row["locator"] == f"line {len(lines[FINISHED])}"
        assert "invalid JSON" in row["error"]
        assert row["raw"] == last[: len(last) // 2].encode()
        (trajectory,) = lake.read("trajectories").to_dicts()
        assert trajectory["n_steps"] == 29  # the cut line was the task_complete event, not an item
        assert trajectory["exit_status"] == "incomplete"
        assert json.loads(trajectory["extra"])["quarantined_lines"] == [len(lines[FINISHED])]
        assert unreconciled(report) == {}

    def test_a_line_with_wrong_types_is_quarantined_alone(self, codex_dir, lines, tmp_path):
        session = [dict(line) for line in lines[FINISHED]]
        index = next(i for i, line in enumerate(session) if line["payload"].get("type") == "function_call")
        session[index] = {**session[index], "payload": {**session[index]["payload"], "name": 42}}
        path = tmp_path / FINISHED
        path.write_text("".join(json.dumps(line) + "\n" for line in session), encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        (row,) = lake.read("quarantine").to_dicts()
        assert row["locator"] == f"line {index + 1}"
        assert row["error"] == "codex: function_call.name must be a non-empty string, got 42"
        (trajectory,) = lake.read("trajectories").to_dicts()
        assert trajectory["n_steps"] == 28
        assert json.loads(trajectory["extra"])["quarantined_lines"] == [index + 1]

    def test_a_file_without_session_metadata_is_quarantined_whole(self, lines, tmp_path):
        path = tmp_path / FINISHED
        path.write_text("".join(json.dumps(line) + "\n" for line in lines[FINISHED][1:]), encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        report = ingest([path], lake)
        (row,) = lake.read("quarantine").to_dicts()
        assert row["locator"] == "$"
        assert "no valid session_meta line" in row["error"]
        assert report.counts["trajectories"].quarantined == 1
        assert lake.read("trajectories").height == 0

    def test_a_bad_file_does_not_stop_the_good_ones(self, codex_dir, tmp_path):
        shutil.copy(codex_dir / STOPPED, tmp_path / STOPPED)
        (tmp_path / "rollout-broken.jsonl").write_text(
            '{"timestamp": "2026-02-23T00:00:00Z", "type": "session_meta", "payload": {"id": 7}}\n',
            encoding="utf-8",
        )
        lake = Lake(tmp_path / "lake")
        ingest([tmp_path], lake)
        assert lake.read("trajectories").height == 1
        errors = sorted(lake.read("quarantine")["error"])
        assert errors == [
            "codex: no valid session_meta line: a Codex rollout starts with the session's metadata "
            "(id, timestamp, ...)",
            "codex: session_meta.id must be a non-empty string, got 7",
        ]
