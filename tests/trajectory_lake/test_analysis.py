"""Analysis over the lake (``trajectory_lake.analysis``): one row per trajectory with its outcome, rates
with intervals, length buckets, the last actions and the error observations of real trajectories, and
the texts and names the similar-failures notebook builds on.

Real data: the SWE-bench Lite candidate set (``lite_lake``) and the sample trajectories of every
harness format in ``../shared/data/formats``; expected values are read from the files themselves.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import NormalDist

import polars as pl
import pytest

from trajectory_lake import Lake, ingest
from trajectory_lake.analysis import (
    action_label,
    bucket_by,
    changed_lines,
    error_observations,
    error_signature,
    failure_texts,
    last_actions,
    name_clusters,
    rate_by,
    scan_trajectory_outcomes,
    system_of_run,
    touched_files,
)

TAU_FILE = Path("formats") / "tau-bench" / "gpt-4o-airline_tasks0-1_all_trials.json"


@pytest.fixture(scope="module")
def formats_lake(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """Every sample trajectory of ``../shared/data/formats`` (tool calls, errors, exit statuses)."""
    lake = Lake(tmp_path_factory.mktemp("formats-lake"))
    ingest([shared_data / "formats"], lake)
    return lake


@pytest.fixture(scope="module")
def formats_trajectories(formats_lake: Lake) -> pl.DataFrame:
    return scan_trajectory_outcomes(formats_lake).collect()


@pytest.fixture(scope="module")
def tau_records(shared_data: Path) -> list[dict]:
    return json.loads((shared_data / TAU_FILE).read_text(encoding="utf-8"))


def _steps_of(lake: Lake, source_format: str) -> pl.LazyFrame:
    """The steps of the trajectories read from one format."""
    ids = lake.read("trajectories").filter(pl.col("source_format") == source_format)["trajectory_id"]
    return lake.scan("steps").filter(pl.col("trajectory_id").is_in(ids.implode()))


class TestTrajectoryOutcomes:
    def test_every_trajectory_is_one_row(self, formats_lake, formats_trajectories):
        ids = formats_lake.read("trajectories")["trajectory_id"]
        assert formats_trajectories.height == ids.len()
        assert formats_trajectories["trajectory_id"].is_unique().all()
        assert set(formats_trajectories["trajectory_id"]) == set(ids)

    def test_lite_successes_per_run_match_the_candidate_files(self, lite_lake, shared_data):
        expected = {}
        for path in (shared_data / "swebench-lite" / "candidates").glob("*.jsonl"):
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            expected[path.stem] = (len(rows), sum(bool(r["resolved"]) for r in rows))
        frame = scan_trajectory_outcomes(lite_lake).collect()
        got = {run: (n, hits) for run, n, hits in rate_by(frame, "run").select("run", "n", "hits").rows()}
        assert got == expected

    def test_unlabelled_trajectories_have_no_success_rather_than_a_failure(self, formats_trajectories):
        codex = formats_trajectories.filter(pl.col("harness") == "codex")
        assert codex.height == 3 and codex["success"].null_count() == 3 and codex["outcome"].null_count() == 3

    def test_tau_bench_outcomes_are_the_rewards_of_the_file(self, formats_trajectories, tau_records):
        tau = formats_trajectories.filter(pl.col("source_format") == "tau-bench")
        assert sorted(tau["outcome"].to_list()) == sorted(float(r["reward"]) for r in tau_records)

    def test_empty_lite_patches_are_flagged_and_never_resolved(self, lite_lake, shared_data):
        blank = sum(
            not json.loads(line)["model_patch"].strip()
            for path in (shared_data / "swebench-lite" / "candidates").glob("*.jsonl")
            for line in path.read_text().splitlines() if line.strip()
        )
        frame = scan_trajectory_outcomes(lite_lake).collect()
        empty = frame.filter(pl.col("empty_candidate"))
        assert empty.height == blank == 36 and not empty["success"].any()
        assert (empty["patch_lines"] == 0).all()
        # The one non-blank patch that changes no line only creates empty files.
        unchanged = frame.filter(~pl.col("empty_candidate") & (pl.col("patch_lines") == 0))["content"]
        assert len(unchanged) == 1 and "new file mode" in unchanged[0]

    def test_leaderboard_runs_get_harness_and_model_from_their_names(self, lite_lake):
        frame = scan_trajectory_outcomes(lite_lake).collect()
        systems = frame.select("run", "harness", "model", "harness_inferred").unique().sort("run")
        row = systems.row(by_predicate=pl.col("run") == "20240402_sweagent_gpt4", named=True)
        assert row == {"run": "20240402_sweagent_gpt4", "harness": "swe-agent", "model": "gpt4",
                       "harness_inferred": True}
        assert systems["harness_inferred"].all()

    def test_harnesses_named_by_the_adapter_are_not_inferred(self, formats_trajectories):
        tau = formats_trajectories.filter(pl.col("source_format") == "tau-bench")
        assert set(tau["harness"]) == {"tau-bench"} and not tau["harness_inferred"].any()

    def test_pinned_versions_ignore_a_later_ingest(self, shared_data, tmp_path):
        lake = Lake(tmp_path / "lake")
        ingest([shared_data / "formats" / "tau-bench"], lake)
        pinned = lake.versions()
        ingest([shared_data / "formats" / "tau2-bench"], lake)
        assert scan_trajectory_outcomes(lake, versions=pinned).collect().height == 8
        assert scan_trajectory_outcomes(lake).collect().height == 12


class TestSystemOfRun:
    @pytest.mark.parametrize(("name", "expected"), [
        ("20240617_moatless_gpt-4o-2024-05-13", ("moatless-tools", "gpt-4o-2024-05-13")),
        ("polydev_baseline_claude-haiku-4.5_val40", ("polydev", "claude-haiku-4.5")),
        ("aider_gpt-4o+claude-3-opus", ("aider", "gpt-4o+claude-3-opus")),
        ("Codex Desktop 0.104.0-alpha.1", (None, None)),
        (None, (None, None)),
    ])
    def test_names_split_into_system_and_model(self, name, expected):
        assert system_of_run(name) == expected


class TestRates:
    def test_the_interval_is_wilsons(self):
        frame = pl.DataFrame({"g": ["a"] * 8, "success": [True] + [False] * 7})
        row = rate_by(frame, "g", confidence=0.9).row(0, named=True)
        z, p, n = NormalDist().inv_cdf(0.95), 1 / 8, 8
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
        assert row["rate"] == p
        assert (row["low"], row["high"]) == pytest.approx((centre - half, centre + half))

    def test_nulls_count_as_rows_but_not_as_attempts(self):
        frame = pl.DataFrame({"g": ["a", "a", "a"], "success": [True, None, False]})
        assert rate_by(frame, "g").select("rows", "n", "hits", "rate").row(0) == (3, 2, 1, 0.5)

    def test_small_groups_can_be_left_out(self):
        frame = pl.DataFrame({"g": ["a", "b", "b"], "success": [True, True, False]})
        assert rate_by(frame, "g", min_count=2)["g"].to_list() == ["b"]

    def test_a_confidence_outside_zero_one_is_refused(self):
        with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
            rate_by(pl.DataFrame({"g": ["a"], "success": [True]}), "g", confidence=95)

    def test_a_missing_column_is_named(self):
        with pytest.raises(ValueError, match="no column 'resolved'"):
            rate_by(pl.DataFrame({"g": ["a"], "success": [True]}), "g", column="resolved")


class TestBuckets:
    def test_buckets_are_ordered_labels(self):
        frame = pl.DataFrame({"n": [250, 0, 7, 12, None]}).with_columns(bucket_by("n", [0, 1, 10, 100]))
        assert frame["n"].to_list() == ["≥100", "0", "1-9", "10-99", None]
        assert frame.sort("n", nulls_last=True)["n"].to_list() == ["0", "1-9", "10-99", "≥100", None]

    @pytest.mark.parametrize("edges", [[], [0, 0], [10, 5]])
    def test_edges_must_increase(self, edges):
        with pytest.raises(ValueError, match="strictly increasing"):
            bucket_by("n", edges)

    def test_changed_lines_count_only_added_and_removed_lines(self):
        patch = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n context\n-old\n+new\n+more\n"
        assert pl.DataFrame({"p": [patch]}).select(changed_lines("p")).item() == 3


class TestActions:
    @pytest.mark.parametrize(("name", "arguments", "expected"), [
        ("bash", '{"command": "cd /testbed && python -m pytest tests -x"}', "bash:pytest"),
        ("execute_bash", '{"command": "FOO=1 timeout 30 make -j4"}', "execute_bash:make"),
        ("exec_command", '{"cmd": ["bash", "-lc", "git status"]}', "exec_command:git"),
        ("bash", "not json: ls -la", "bash:not"),
        ("str_replace_editor", '{"command": "create", "path": "/x.py"}', "str_replace_editor"),
        ("bash", "{}", "bash"),
        (None, None, None),
    ])
    def test_shell_calls_are_named_by_their_program(self, name, arguments, expected):
        assert action_label(name, arguments) == expected

    def test_tau_bench_last_actions_are_the_files_last_tool_calls(self, formats_lake, tau_records):
        expected = Counter(
            tuple(calls[-3:]) for r in tau_records
            if (calls := [c["function"]["name"] for m in r["traj"] if m.get("role") == "assistant"
                          for c in m.get("tool_calls") or []])
        )
        last = last_actions(_steps_of(formats_lake, "tau-bench"))
        assert Counter(tuple(a) for a in last["last_actions"].to_list()) == expected

    def test_a_swe_agent_run_ends_by_submitting(self, formats_lake):
        last = last_actions(_steps_of(formats_lake, "swe-agent:0.x"), n=2)
        assert last["last_actions"].to_list() == [["bash:rm", "bash:submit"]]

    def test_n_must_be_positive(self, formats_lake):
        with pytest.raises(ValueError, match="n must be >= 1"):
            last_actions(formats_lake.scan("steps"), n=0)


class TestErrors:
    def test_tau_bench_errors_are_the_files_error_results(self, formats_lake, tau_records):
        expected = [m["content"] for r in tau_records for m in r["traj"]
                    if m.get("role") == "tool" and str(m.get("content", "")).startswith("Error")]
        errors = error_observations(_steps_of(formats_lake, "tau-bench"))
        assert errors.height == len(expected) == 7 and errors["flagged"].all()
        assert set(errors["signature"]) == {
            "Error: payment amount does not add up, total price is N, but paid N",
            "Error: payment method certificate_N not found",
        }
        assert set(errors["action"]) == {"book_reservation"}  # matched to the call each result answers

    def test_task_prompts_with_tracebacks_are_not_errors(self, formats_lake):
        steps = formats_lake.read("steps")
        errors = error_observations(steps)
        first_assistant = steps.filter(pl.col("role") == "assistant").group_by("trajectory_id").agg(
            first=pl.col("step_index").min())
        joined = errors.join(first_assistant, on="trajectory_id")
        assert joined.height == errors.height and (joined["step_index"] > joined["first"]).all()

    def test_unflagged_observations_are_recognised_by_their_text(self, formats_lake):
        errors = error_observations(_steps_of(formats_lake, "swe-agent:0.x"))
        assert errors.select("action", "flagged", "signature").rows() == [
            ("bash:python", False, "AttributeError")]

    def test_real_error_texts_get_short_signatures(self, formats_lake):
        signatures = set(error_observations(formats_lake.scan("steps"))["signature"])
        assert {"ModuleNotFoundError", "command not found: ponyc", "exit code 1",
                "Your proposed edit has introduced new syntax error(s)."} <= signatures
        assert max(len(s) for s in signatures) <= 80

    def test_errors_of_copied_or_replayed_history_are_not_the_trajectorys(self):
        """History a trajectory was shown again (a Codex sub-agent's copy of its parent's conversation,
        ``copied_context``, every step marked; a compaction's replay, ``replayed_by_compaction``) holds
        errors another trajectory (or an earlier context) hit: they were counted as this one's, and a task
        prompt after the copied assistant steps counted as an observation."""

        def step(index, role, content=None, *, call=None, answers=None, is_error=None, **extra):
            arguments = json.dumps({"command": "pytest"})
            calls = [{"id": call, "name": "bash", "arguments": arguments}] if call else None
            return {"trajectory_id": "t", "step_index": index, "role": role, "content": content,
                    "tool_calls": calls, "tool_call_id": answers, "is_error": is_error,
                    "extra": json.dumps(extra) if extra else None}

        steps = pl.DataFrame([
            step(0, "user", "Fix the parser.", copied_context=True),
            step(1, "assistant", call="c1", copied_context=True),
            step(2, "tool", "ImportError: no module named parser", answers="c1", copied_context=True),
            step(3, "user", "Error: the child's task quotes its parent's failure"),  # the child's own task
            step(4, "assistant", call="c4", replayed_by_compaction=True),
            step(5, "tool", "Traceback (most recent call last):\nKeyError: 'x'", answers="c4",
                 replayed_by_compaction=True),
            step(6, "assistant", call="c6"),
            step(7, "tool", "exit code 1", answers="c6", is_error=True),
        ])
        errors = error_observations(steps)
        assert errors.select("step_index", "action", "flagged").rows() == [(7, "bash:pytest", True)]
        frame = pl.DataFrame({"trajectory_id": ["t"], "task_id": ["x"], "repo": [None], "content": ["done"]})
        (text,) = failure_texts(frame, actions=last_actions(steps), errors=errors)["text"]
        assert text == "actions: bash:pytest\nerrors: exit code N\ncandidate: done"

    def test_an_atif_copied_steps_observation_errors_are_not_the_trajectorys(self, tmp_path):
        """ATIF marks the step (``is_copied_context``), not the tool rows its observation results become:
        a result is skipped as the answer of a marked step's call, by its ``source_call_id``, else as the
        result following that step."""

        def agent(step_id, call, output, **fields):
            return {"step_id": step_id, "source": "agent", "message": "", **fields,
                    "tool_calls": [{"tool_call_id": call, "function_name": "bash",
                                    "arguments": {"command": "make"}}],
                    "observation": {"results": [{"source_call_id": call, "content": output}]}}

        copied_without_id = agent(3, "c3", "Error: make failed again", is_copied_context=True)
        del copied_without_id["observation"]["results"][0]["source_call_id"]
        document = {
            "schema_version": "ATIF-v1.5",
            "session_id": "s-cont",
            "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-4o"},
            "steps": [
                {"step_id": 1, "source": "user", "message": "Build it.", "is_copied_context": True},
                agent(2, "c2", "Error: make failed", is_copied_context=True),
                copied_without_id,
                agent(4, "c4", "Error: no rule to make target 'all'"),
            ],
        }
        path = tmp_path / "trajectory.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        steps = lake.read("steps")
        tool_rows = steps.filter(pl.col("role") == "tool").sort("step_index")
        assert tool_rows.height == 3
        assert not any("is_copied_context" in json.loads(extra) for extra in tool_rows["extra"])
        errors = error_observations(steps)
        expected = [("bash:make", "Error: no rule to make target 'all'")]
        assert errors.select("action", "signature").rows() == expected

    @pytest.mark.parametrize(("text", "expected"), [
        ("Traceback (most recent call last):\n  File \"/a.py\", line 3\nValueError: bad", "ValueError"),
        ("Traceback (most recent call last):\n  File \"/a.py\", line 3",
         "Traceback (output cut before the exception)"),
        ("ERROR:\nInvalid `path` parameter: /workspace/x/y.py. The path should be absolute.",
         "Invalid `path` parameter: <path>."),
        ("E: Failed to fetch http://archive.ubuntu.com/x  Temporary failure resolving 'archive.ubuntu.com'",
         "E: Failed to fetch <url> Temporary failure resolving 'archive.ubuntu.com'"),
        ("ls: cannot access 'src/lib/a/very/long/path/indeed': No such file or directory",
         "ls: cannot access '…': No such file or directory"),
        ("<returncode>2</returncode>\n<output>\n</output>", "exit code 2"),
        (None, None),
    ])
    def test_signatures_mask_what_varies_between_runs(self, text, expected):
        assert error_signature(text) == expected


class TestFailureTexts:
    def test_texts_say_what_was_tried_and_never_how_it_ended(self, formats_lake, formats_trajectories):
        steps = formats_lake.scan("steps")
        texts = failure_texts(formats_trajectories, actions=last_actions(steps),
                              errors=error_observations(steps), prompts=formats_lake.read("tasks"))
        assert texts.height == formats_trajectories.height
        tau = texts.join(formats_trajectories, on="trajectory_id").filter(
            (pl.col("source_format") == "tau-bench") & pl.col("errors").list.len().gt(0))
        text = tau["text"][0]
        assert "actions: " in text and "errors: Error: payment" in text and "task: " in text
        for text in texts["text"]:  # the parts before the task prompt are the rollout's own
            assert not {"outcome", "reward", "resolved"} & set(text.split("task: ")[0].split())

    def test_an_empty_patch_says_nothing_was_submitted(self):
        frame = pl.DataFrame({"trajectory_id": ["t"], "task_id": ["x"], "repo": ["a/b"], "content": ["  "]})
        assert failure_texts(frame)["text"].item() == "repo: a/b\ncandidate: (nothing submitted)"

    def test_a_diff_is_described_by_its_files_and_changed_lines(self, lite_lake):
        frame = scan_trajectory_outcomes(lite_lake).filter(~pl.col("empty_candidate")).head(1).collect()
        text = failure_texts(frame)
        files = touched_files(frame["content"][0])
        assert files and text["files"].to_list() == [files]
        assert f"files: {', '.join(files[:5])}" in text["text"][0] and "diff --git" not in text["text"][0]
        directories = dict.fromkeys(f.rpartition("/")[0] for f in files if "/" in f)
        assert text["modules"].to_list() == [list(directories)]

    def test_touched_files_skip_dev_null(self):
        patch = "diff --git a/x b/x\n--- a/x\n+++ /dev/null\ndiff --git a/y b/y\n--- /dev/null\n+++ b/y\n"
        assert touched_files(patch) == ["y"]


class TestClusterNames:
    def test_clusters_are_named_by_their_most_frequent_items(self):
        frame = pl.DataFrame({
            "cluster": [0, 0, 0, 1],
            "actions": [["bash:pytest", "bash:pytest"], ["bash:pytest"], ["edit"], []],
            "errors": [["KeyError"], ["ValueError"], ["ValueError"], []],
        })
        named = name_clusters(frame, columns=("actions", "errors"))
        assert named.rows() == [
            (0, 3, "bash:pytest · ValueError", ["bash:pytest (2)"], ["ValueError (2)"]),
            (1, 1, "(no tools, errors or files)", [], []),
        ]

    def test_ties_are_broken_alphabetically(self):
        frame = pl.DataFrame({"cluster": [0, 0], "errors": [["b"], ["a"]]})
        assert name_clusters(frame, columns=("errors",))["name"].item() == "a"
