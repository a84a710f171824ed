"""Examples from the lake and the split by task, on the real SWE-bench Lite set; step-level examples
from real multi-turn trajectories."""

from __future__ import annotations

import json

import polars as pl
import pytest

from value_model.config import TrainConfig
from value_model.data import (
    action_examples_of,
    contexts_of,
    load_examples,
    load_steps,
    split_by_task,
    task_bucket,
    with_reference_positives,
)
from value_model.trainer import td_targets_of


@pytest.fixture(scope="module")
def lite_examples(lite_lake):
    return load_examples(lite_lake)


class TestLoadExamples:
    def test_every_non_empty_labelled_lite_candidate_becomes_one_example(self, lite_examples, shared_data):
        rows = [json.loads(line) for f in sorted((shared_data / "swebench-lite" / "candidates").glob("*.jsonl"))
                for line in f.read_text().splitlines() if line.strip()]
        non_empty = [r for r in rows if r["model_patch"].strip()]
        frame = lite_examples.frame
        assert len(frame) == len(non_empty)
        assert int(frame["label"].sum()) == sum(bool(r["resolved"]) for r in non_empty)
        assert frame.select(pl.col("prompt").is_null().sum()).item() == 0

    def test_empty_candidates_are_kept_when_asked(self, lite_lake, lite_examples):
        assert len(load_examples(lite_lake, drop_empty=False).frame) > len(lite_examples.frame)

    def test_the_table_versions_read_are_reported(self, lite_lake, lite_examples):
        assert lite_examples.versions == {t: lite_lake.version(t) for t in lite_examples.versions}
        assert {"candidates", "outcomes", "tasks"} <= set(lite_examples.versions)


class TestReferencePositives:
    def test_each_training_task_gets_its_gold_patch_as_one_positive(self, lite_lake, lite_examples, shared_data):
        train, _ = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        gold = {f"swe-bench/{r['instance_id']}": r["patch"]
                for r in map(json.loads, (shared_data / "swebench-lite/tasks.jsonl").read_text().splitlines())}
        out = with_reference_positives(lite_lake, train, version=lite_examples.versions["tasks"])

        added = out.filter(pl.col("candidate_id").str.starts_with("reference:"))
        assert out.head(len(train)).equals(train)  # the real examples, unchanged and first
        assert sorted(added["task_id"]) == sorted(set(train["task_id"]))  # every Lite task has a gold patch
        assert added["label"].to_list() == [1.0] * len(added)
        assert all(row["content"] == gold[row["task_id"]] for row in added.iter_rows(named=True))
        prompts = dict(zip(train["task_id"], train["prompt"], strict=True))
        assert all(row["prompt"] == prompts[row["task_id"]] for row in added.iter_rows(named=True))
        assert added["trajectory_id"].null_count() == len(added)  # no trajectory, so no context

    def test_action_training_refuses_them(self):
        with pytest.raises(ValueError, match="reference_positives"):
            TrainConfig(kind="action", reference_positives=True)


class TestSplitByTask:
    def test_no_task_is_in_both_splits_and_the_split_is_deterministic(self, lite_examples):
        train, val = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        assert not set(train["task_id"]) & set(val["task_id"])
        assert len(train) + len(val) == len(lite_examples.frame)
        again_train, again_val = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        assert again_val["candidate_id"].to_list() == val["candidate_id"].to_list()
        n_tasks = lite_examples.frame["task_id"].n_unique()
        assert 0.1 < val["task_id"].n_unique() / n_tasks < 0.3

    def test_a_different_seed_holds_out_different_tasks(self, lite_examples):
        _, a = split_by_task(lite_examples.frame, val_fraction=0.2, seed=0)
        _, b = split_by_task(lite_examples.frame, val_fraction=0.2, seed=1)
        assert set(a["task_id"]) != set(b["task_id"])

    def test_a_tasks_bucket_does_not_depend_on_the_other_rows(self):
        assert task_bucket("swe-bench/django__django-11099") == task_bucket("swe-bench/django__django-11099")

    def test_an_invalid_fraction_raises(self, lite_examples):
        with pytest.raises(ValueError, match="val_fraction"):
            split_by_task(lite_examples.frame, val_fraction=1.0)


class TestActionExamples:
    """Step-level examples from real tau-bench / tau2-bench trajectories."""

    def test_every_assistant_step_of_a_labelled_trajectory_becomes_one_example(self, agent_lake, action_examples):
        steps = agent_lake.read("steps")
        labelled = set(action_examples.frame["trajectory_id"])
        assistant = steps.filter((pl.col("role") == "assistant") & pl.col("trajectory_id").is_in(labelled))
        non_empty = assistant.filter(pl.col("content").fill_null("").str.strip_chars().ne("")
                                     | pl.col("tool_calls").list.len().fill_null(0).gt(0))
        assert len(action_examples.frame) == len(non_empty) > 100
        assert action_examples.frame["candidate_id"].n_unique() == len(action_examples.frame)

    def test_an_action_carries_its_trajectorys_outcome(self, agent_lake, action_examples):
        outcomes = (agent_lake.read("outcomes").filter(pl.col("name") == "resolved")
                    .group_by("trajectory_id").agg(pl.col("value").mean()))
        joined = action_examples.frame.join(outcomes, on="trajectory_id", suffix="_lake")
        assert len(joined) == len(action_examples.frame)
        assert (joined["value"] == joined["value_lake"]).all()
        assert set(action_examples.frame["label"].unique()) == {0.0, 1.0}

    def test_an_actions_context_is_exactly_the_steps_before_it(self, action_examples):
        frame = action_examples.frame
        contexts = contexts_of(frame, action_examples.steps)
        for row, context in zip(frame.iter_rows(named=True), contexts, strict=True):
            assert [s["step_index"] for s in context] == list(range(row["step_index"]))
        assert [len(c) for c in contexts[:3]] == sorted(len(c) for c in contexts[:3])

    def test_positions_count_the_actions_of_each_trajectory(self, action_examples):
        per = action_examples.frame.group_by("trajectory_id").agg(pl.col("t").max(), pl.col("n_actions").first(),
                                                                  pl.len())
        assert (per["t"] + 1 == per["n_actions"]).all() and (per["len"] == per["n_actions"]).all()

    def test_the_steps_version_read_is_reported(self, agent_lake, action_examples):
        assert action_examples.versions["steps"] == agent_lake.version("steps")

    def test_monte_carlo_targets_discount_the_final_outcome_back_from_the_last_action(self, action_examples):
        frame = action_examples.frame
        targets = td_targets_of(frame, None, gamma=0.9, lam=1.0)
        expected = frame["value"].to_numpy() * 0.9 ** (frame["n_actions"] - 1 - frame["t"]).to_numpy()
        assert targets == pytest.approx(expected)


class TestAnswerContexts:
    """An answer that is the agent's last message (Codex, ATIF) was also the last step of its own context,
    so a model trained with context read its candidate twice (a 15,927-character Codex answer took its
    share of the context budget again), and read a context a client never sends: at serving time the
    context is the conversation before the candidates."""

    def test_the_context_of_a_final_message_answer_ends_before_that_message(self, shared_data, tmp_path):
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps
        from value_model.serialize import render_action

        lake = Lake(tmp_path / "lake")
        ingest([shared_data / "formats" / "codex-rollout"], lake)
        frame = lake.read("candidates").filter(pl.col("kind") == "answer")
        steps = load_steps(lake, frame["trajectory_id"])
        assert len(frame) == 2
        for row, context in zip(frame.iter_rows(named=True), contexts_of(frame, steps), strict=True):
            trajectory = steps[row["trajectory_id"]]
            said = [i for i, s in enumerate(trajectory) if s["role"] == "assistant"
                    and render_action(s["content"], s["tool_calls"]) == row["content"]]
            assert said  # the answer is the agent's last message
            # it ends before the answer and the answer's own reasoning-only steps (TestAnswerReasoning)
            assert context == trajectory[: len(context)] and len(context) < said[-1]
            assert all(s["reasoning"] and not render_action(s["content"], s["tool_calls"])
                       for s in trajectory[len(context): said[-1]])

    def test_the_context_of_a_patch_ends_before_the_submission_that_is_the_patch(self, shared_data, tmp_path):
        # mini-swe-agent ends a trajectory with an "exit" step whose content is the submitted diff: a patch
        # model with context read the whole patch twice
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps

        lake = Lake(tmp_path / "lake")
        ingest([shared_data / "formats" / "mini-swe-agent"], lake)
        frame = lake.read("candidates").filter(pl.col("kind") == "patch")
        steps = load_steps(lake, frame["trajectory_id"])
        frame = frame.filter(pl.col("trajectory_id").is_in(list(steps)))  # preds.json rows have no steps
        assert len(frame) == 2
        for row, context in zip(frame.iter_rows(named=True), contexts_of(frame, steps), strict=True):
            trajectory = steps[row["trajectory_id"]]
            assert trajectory[-1]["content"] == row["content"]  # the submission is the patch
            assert context == trajectory[:-1]

    def test_other_candidates_keep_the_whole_trajectory(self, agent_lake):
        # a tau-bench answer (its actions and final message as JSON) and a patch are not a step
        examples = load_examples(agent_lake, kind="answer", label="resolved")
        from value_model.data import load_steps

        steps = load_steps(agent_lake, examples.frame["trajectory_id"])
        contexts = contexts_of(examples.frame, steps)
        assert [len(c) for c in contexts] == [len(steps[t]) for t in examples.frame["trajectory_id"]]


class TestSubmissionObservations:
    def test_a_swe_agent_submit_observation_that_is_the_patch_is_left_out_of_its_context(self, shared_data,
                                                                                       tmp_path):
        # SWE-agent's function-calling 'submit' returns the diff followed by its state footer ('(Open file:
        # ...)'), the trajectory's last step: not equal to the patch, so a patch model with context read the
        # whole diff twice there, as it did at mini-swe-agent's 'exit' step
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps
        from value_model.serialize import render_action

        lake = Lake(tmp_path / "lake")
        ingest([shared_data / "formats" / "swe-agent-traj"], lake)
        frame = lake.read("candidates").filter(pl.col("kind") == "patch")
        steps = load_steps(lake, frame["trajectory_id"])
        echoed = 0
        for row, context in zip(frame.iter_rows(named=True), contexts_of(frame, steps), strict=True):
            trajectory, patch = steps[row["trajectory_id"]], row["content"].strip()
            last = trajectory[-1]
            said = render_action(last["content"], None)
            if patch and last["role"] != "assistant" and said.startswith(patch):
                echoed += 1
                assert context == trajectory[:-1]
            else:
                assert context == trajectory
            assert not (patch and any(render_action(s["content"], None).startswith(patch) for s in context))
        assert echoed >= 1 and len(frame) >= 3


class TestAnswerReasoning:
    def test_the_answers_own_reasoning_step_is_left_out_with_it(self, shared_data, tmp_path,
                                                                 minilm_tokenizer):
        # Codex writes the thought behind its final message as a reasoning item, an assistant step of its own
        # just before the answer: the context kept it, so a model trained with reasoning read the candidate's
        # own thought as the last step of its context, which no client sends with the candidates
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps
        from value_model.serialize import render_action, serialize_examples

        lake = Lake(tmp_path / "lake")
        ingest([shared_data / "formats" / "codex-rollout"], lake)
        frame = lake.read("candidates").filter(pl.col("kind") == "answer")
        steps = load_steps(lake, frame["trajectory_id"])
        contexts = contexts_of(frame, steps)
        for row, context in zip(frame.iter_rows(named=True), contexts, strict=True):
            trajectory = steps[row["trajectory_id"]]
            thought = trajectory[len(context)]
            assert thought["role"] == "assistant" and thought["reasoning"]
            assert not render_action(thought["content"], thought["tool_calls"])
            assert render_action(context[-1]["content"], context[-1]["tool_calls"])  # what came before it
        items = serialize_examples(minilm_tokenizer, frame["content"].to_list(), frame["content"].to_list(),
                                   max_length=100_000, contexts=contexts, include_reasoning=True)
        assert not any(item.first.endswith("</think>") for item in items)


class TestActionThoughts:
    def test_a_calls_own_reasoning_item_is_its_reasoning_not_its_context(self, shared_data, tmp_path):
        # Codex writes the thought behind a call as a reasoning item, an assistant step of its own just before
        # the call: an action example kept it as the last step of its context and had no reasoning itself,
        # while a client proposing that call sends its thought with the candidate, after the conversation
        from trajectory_lake import Lake, ingest
        from value_model.data import decision_ids, load_steps
        from value_model.serialize import render_action

        lake = Lake(tmp_path / "lake")
        ingest([shared_data / "formats" / "codex-rollout"], lake)
        trajectories = lake.read("trajectories").select("trajectory_id", "task_id")
        steps = load_steps(lake, trajectories["trajectory_id"])
        frame = action_examples_of(trajectories.with_columns(prompt=pl.lit("t"), value=pl.lit(1.0)), steps)
        thoughtful = frame.filter(pl.col("context_end") < pl.col("step_index"))
        assert thoughtful.height >= 10
        contexts = contexts_of(thoughtful, steps)
        for row, context in zip(thoughtful.iter_rows(named=True), contexts, strict=True):
            trajectory = steps[row["trajectory_id"]]
            own = [s for s in trajectory if row["context_end"] <= s["step_index"] < row["step_index"]]
            assert own and all(s["role"] == "assistant" and not render_action(s["content"], s["tool_calls"])
                               for s in own)
            assert row["reasoning"] == "\n\n".join(s["reasoning"] for s in own if s["reasoning"])
            assert [s["step_index"] for s in context] == [
                s["step_index"] for s in trajectory if s["step_index"] < row["context_end"]]
            assert not context or render_action(context[-1]["content"], context[-1]["tool_calls"]) or (
                context[-1]["role"] != "assistant")
            assert row["decision_id"] == decision_ids(row["task_id"], trajectory)[row["context_end"]]
        plain = frame.filter(pl.col("context_end") == pl.col("step_index"))
        assert plain.height + thoughtful.height == frame.height


class TestAnswersOverSeveralSteps:
    def test_an_answer_written_over_several_steps_is_left_out_of_its_context(self):
        # Claude Code writes each text block of a response as a line of its own (a step each) and its answer
        # joins them by a blank line: no single step was the answer, so the context kept them all and a model
        # trained with context read its candidate twice
        steps = [
            {"step_index": 0, "role": "user", "content": "Summarise the diff.", "tool_calls": None},
            {"step_index": 1, "role": "assistant", "content": None, "tool_calls": None, "reasoning": "Look."},
            {"step_index": 2, "role": "assistant", "content": "It renames a flag.", "tool_calls": None},
            {"step_index": 3, "role": "assistant", "content": "Tests pass.", "tool_calls": None},
        ]
        frame = pl.DataFrame({"trajectory_id": ["t", "t"], "kind": ["answer", "answer"],
                              "content": ["It renames a flag.\n\nTests pass.", "Tests pass."]})
        whole, last = contexts_of(frame, {"t": steps})
        assert [s["step_index"] for s in whole] == [0]  # the thought before the answer goes with it
        assert [s["step_index"] for s in last] == [0, 1, 2]

    def test_a_claude_code_answer_whose_blocks_carry_line_breaks_is_left_out_of_its_context(self, tmp_path):
        # the session adapter joins the response's text blocks as written ('\n\n'); a block that ends or
        # opens with a line break is stripped when rendered, so the rendered texts never joined to the answer
        from tests.trajectory_lake._helpers import write_jsonl
        from tests.trajectory_lake.test_ingest_claude_code import SESSION, _assistant, _harbor_session
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps

        prompt = _harbor_session()[2] | {"uuid": "u0", "parentUuid": None,
                                         "message": {"role": "user", "content": "Summarise the diff."}}
        thinking = {"type": "thinking", "thinking": "Look.", "signature": "s"}
        lines = [prompt, _assistant("r1", "u0", "msg_1", thinking, 5, None),
                 _assistant("r2", "r1", "msg_1", {"type": "text", "text": "It renames a flag.\n"}, 5, None),
                 _assistant("r3", "r2", "msg_1", {"type": "text", "text": "\nTests pass."}, 5, "end_turn")]
        lake = Lake(tmp_path / "lake")
        ingest([write_jsonl(tmp_path / f"{SESSION}.jsonl", lines)], lake)
        answers = lake.read("candidates").select("trajectory_id", "kind", "content")
        assert answers["content"].to_list() == ["It renames a flag.\n\n\n\nTests pass."]
        steps = load_steps(lake, answers["trajectory_id"])
        assert [s["role"] for s in steps[answers["trajectory_id"][0]]] == ["user"] + ["assistant"] * 3
        (context,) = contexts_of(answers, steps)
        assert [(s["step_index"], s["content"]) for s in context] == [(0, "Summarise the diff.")]

    def test_an_answer_over_several_steps_then_a_slash_command_is_left_out_of_its_context(self, tmp_path):
        # the session adapter's answer is the last response, whatever the user typed after it (a /cost, whose
        # output the CLI writes as a system line): a one-step answer was found before such steps, one written
        # over several steps was looked for only at the trajectory's very end
        from tests.trajectory_lake._helpers import write_jsonl
        from tests.trajectory_lake.test_ingest_claude_code import SESSION, _assistant, _harbor_session
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps

        line = _harbor_session()[2]
        cost = ("<command-name>/cost</command-name>\n<command-message>cost</command-message>\n"
                "<command-args></command-args>")
        output = {k: v for k, v in line.items() if k not in ("message", "promptId")} | {
            "type": "system", "subtype": "local_command", "uuid": "s1", "parentUuid": "u1",
            "content": "<local-command-stdout>Total cost: $0.01</local-command-stdout>"}
        ask = {"role": "user", "content": "Summarise."}
        lines = [line | {"uuid": "u0", "parentUuid": None, "message": ask},
                 _assistant("r1", "u0", "msg_1", {"type": "text", "text": "It renames a flag."}, 5, None),
                 _assistant("r2", "r1", "msg_1", {"type": "text", "text": "Tests pass."}, 5, "end_turn"),
                 line | {"uuid": "u1", "parentUuid": "r2", "message": {"role": "user", "content": cost}},
                 output]
        lake = Lake(tmp_path / "lake")
        ingest([write_jsonl(tmp_path / f"{SESSION}.jsonl", lines)], lake)
        answers = lake.read("candidates").select("trajectory_id", "kind", "content")
        assert answers["content"].to_list() == ["It renames a flag.\n\nTests pass."]
        steps = load_steps(lake, answers["trajectory_id"])
        roles = [s["role"] for s in steps[answers["trajectory_id"][0]]]
        assert roles == ["user", "assistant", "assistant", "user", "system"]
        (context,) = contexts_of(answers, steps)
        assert [(s["step_index"], s["content"]) for s in context] == [(0, "Summarise.")]


def _ingested_mini_swe_agent(tmp_path, document):
    """``document`` (a mini-swe-agent ``.traj.json``) ingested into a new lake: the document, its
    trajectory's id and its steps as ``load_steps`` gives them."""
    from trajectory_lake import Lake, ingest
    from value_model.data import load_steps

    path = tmp_path / "run" / "django__django-11099.traj.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document), encoding="utf-8")
    lake = Lake(tmp_path / "lake")
    ingest([path], lake)
    (trajectory_id,) = lake.read("trajectories")["trajectory_id"].to_list()
    return document, trajectory_id, load_steps(lake, [trajectory_id])


class TestCompactedContexts:
    """mini-swe-agent with compaction sends its model the system message, the latest summary and the
    messages it kept (DefaultAgent._messages_for_model), not the whole history it saves: a context is what it
    was shown, in that order, as a client sends the reranker the messages its agent sends its model."""

    @pytest.fixture
    def compacted(self, tmp_path):
        from tests.trajectory_lake.test_ingest_mini_swe_agent import _compacted_traj

        return _ingested_mini_swe_agent(tmp_path, _compacted_traj())

    def test_an_action_after_a_compaction_sees_the_summary_and_the_kept_steps(self, compacted):
        _, trajectory_id, steps = compacted
        trajectories = pl.DataFrame({"trajectory_id": [trajectory_id], "prompt": ["Fix the bug"],
                                     "task_id": ["swe-bench/django__django-11099"], "value": [1.0]})
        actions = action_examples_of(trajectories, steps)
        rows = actions.iter_rows(named=True)
        contexts = {row["step_index"]: [s["step_index"] for s in context]
                    for row, context in zip(rows, contexts_of(actions, steps), strict=True)}
        # steps: 0 system, 1 task, 2-5 two turns, 6 summary (of 1-3), 7-8 a turn, 9 summary (of 1-9), 10-11,
        # 12 exit
        assert contexts == {2: [0, 1], 4: [0, 1, 2, 3], 7: [0, 6, 4, 5], 10: [0, 9]}
        patch = pl.DataFrame({"trajectory_id": [trajectory_id], "kind": ["patch"],
                              "content": ["diff --git a/x b/x\n"]})
        (context,) = contexts_of(patch, steps)
        assert [s["step_index"] for s in context] == [0, 9, 10, 11]

    def test_a_compacted_context_is_what_the_agent_sent_its_model(self, compacted):
        from reranker_service.service import steps_of_messages
        from tests.trajectory_lake.test_ingest_mini_swe_agent import _messages_for_model
        from value_model.serialize import content_text

        document, trajectory_id, steps = compacted
        actions = pl.DataFrame({"trajectory_id": [trajectory_id] * 2, "kind": ["action"] * 2,
                                "context_end": [7, 10]})
        # the model call of the third reply (6 messages held, the first summary made) and of the fourth (8,
        # the third summary: the second was compacted again at once)
        for context, (held, shown) in zip(contexts_of(actions, steps), [(6, 0), (8, 2)], strict=True):
            served = steps_of_messages(_messages_for_model(document, held, shown))
            assert [(s["role"], content_text(s["content"])) for s in context] == [
                (s["role"], s["content"]) for s in served]

    def test_decisions_after_a_compaction_are_those_of_the_context_seen(self, compacted):
        from trajectory_lake.slices import seen_before
        from value_model.data import decision_ids

        _, trajectory_id, steps = compacted
        trajectory = steps[trajectory_id]
        decisions = decision_ids("t", trajectory)
        for at in (7, 10):
            seen = [*seen_before(trajectory, at), trajectory[at]]
            assert decision_ids("t", seen)[at] == decisions[at]
            assert decision_ids("t", [{**s, "summarizes_steps": None} for s in seen])[at] == decisions[at]
        assert decisions[7] != decision_ids("t", [{**s, "summarizes_steps": None} for s in trajectory])[7]


class TestCodexCompactionReplays:
    """A Codex compaction sends the model its replacement history again: steps marked
    ``replayed_by_compaction`` (codex-rs core/src/compact_remote.rs keeps the assistant messages of the
    remote compaction's output, should_keep_compacted_history_item). They are context, but no decision was
    taken there: an action row for one shifted every later action's ``t`` and ``n_actions`` (review of
    6671f4a), and a replayed copy of the answer was taken as the answer's step."""

    @staticmethod
    def _ingested(tmp_path, compacted, *after, commentary=True):
        from tests.trajectory_lake.test_ingest_codex import (
            TestCodexHistoryRewrites,
            _meta,
            _say,
            _user,
            _write_rollout,
        )
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps

        path = _write_rollout(
            tmp_path / "rollout-2026-03-01T10-00-00-ffff.jsonl",
            [
                _meta("ffff"),
                *TestCodexHistoryRewrites.OPENING,
                *_user("port the parser"),
                ("response_item", {"type": "function_call", "name": "ls", "arguments": "", "call_id": "c1"}),
                ("response_item", {"type": "function_call_output", "call_id": "c1", "output": "parser.py"}),
                _say("Half done."),
                *_user("also add tests"),
                *([_say("Writing tests.", phase="commentary")] if commentary else []),
                ("compacted", compacted),
                ("event_msg", {"type": "context_compacted"}),
                *after,
            ],
        )
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        (trajectory,) = lake.read("trajectories").to_dicts()
        return lake, trajectory, load_steps(lake, [trajectory["trajectory_id"]])

    @staticmethod
    def _replacement():
        from tests.trajectory_lake.test_ingest_codex import _message

        return [
            _message("user", "port the parser"),
            {**_message("assistant", "Half done."), "phase": "final_answer"},  # kept by the remote compaction
            _message("user", "also add tests"),
            {"type": "compaction", "encrypted_content": "gAAAAABpZ..."},
        ]

    def test_a_step_a_compaction_replays_is_no_action(self, tmp_path):
        from tests.trajectory_lake.test_ingest_codex import _say

        compacted = {"message": "", "replacement_history": self._replacement()}
        _, trajectory, steps = self._ingested(tmp_path, compacted, _say("Tests added."))
        (trajectory_steps,) = steps.values()
        replayed = [s["step_index"] for s in trajectory_steps if s.get("replayed_by_compaction")]
        assert replayed == [8, 9, 10]  # the two requests and the message the compaction kept
        frame = pl.DataFrame([{"trajectory_id": trajectory["trajectory_id"], "task_id": trajectory["task_id"],
                               "prompt": "port the parser", "value": 1.0}])
        actions = action_examples_of(frame, steps)
        # the model took four decisions: ls, "Half done.", "Writing tests.", "Tests added."
        assert actions.select("step_index", "t", "n_actions", "content").rows() == [
            (3, 0, 4, actions["content"][0]),
            (5, 1, 4, "Half done."),
            (7, 2, 4, "Writing tests."),
            (12, 3, 4, "Tests added."),
        ]
        (context,) = contexts_of(actions.filter(pl.col("t") == 3), steps)
        assert [s["step_index"] for s in context] == [8, 9, 10, 11]  # the replayed steps are its context

    def test_an_answer_a_compaction_replays_is_not_the_answers_step(self, tmp_path):
        # the session ends at the compaction: its answer is "Half done.", written at step 5, not the copy the
        # compaction sent again at step 8 (whose context holds the answer itself and the request after it)
        compacted = {"message": "", "replacement_history": self._replacement()}
        lake, trajectory, steps = self._ingested(tmp_path, compacted, commentary=False)
        (trajectory_steps,) = steps.values()
        assert [s["step_index"] for s in trajectory_steps if s.get("replayed_by_compaction")] == [7, 8, 9]
        (candidate,) = lake.read("candidates").to_dicts()
        assert candidate["content"] == "Half done."
        frame = pl.DataFrame({"trajectory_id": [trajectory["trajectory_id"]], "kind": ["answer"],
                              "content": [candidate["content"]]})
        (context,) = contexts_of(frame, steps)
        assert [s["step_index"] for s in context] == [0, 1, 2, 3, 4]


class TestFormatErrorContexts:
    """mini-swe-agent 2.4.x never adds a reply it cannot parse to its messages (agents/default.py: query()
    adds the model's message only after model.query() returns, and model.query() raises FormatError from
    _parse_actions; run() then adds the FormatError's user message alone, which carries the reply in
    extra.response): later calls are sent the format error, not the reply. The reply is a step of its own
    (a real, labelled bad action whose context is the messages before it), and no later step's context
    holds it."""

    @pytest.fixture
    def format_error(self, tmp_path):
        from tests.trajectory_lake.test_ingest_mini_swe_agent import _format_error_traj

        return _ingested_mini_swe_agent(tmp_path, _format_error_traj())

    def test_the_context_after_a_format_error_is_what_the_agent_sent_its_model(self, format_error):
        from reranker_service.service import steps_of_messages
        from tests.trajectory_lake.test_ingest_mini_swe_agent import _messages_for_model
        from value_model.serialize import content_text

        document, trajectory_id, steps = format_error
        trajectories = pl.DataFrame({"trajectory_id": [trajectory_id], "prompt": ["Fix it"],
                                     "task_id": ["swe-bench/django__django-11099"], "value": [0.0]})
        actions = action_examples_of(trajectories, steps)
        # steps: 0 system, 1 task, 2 the unparsed reply, 3 its format error, 4 a reply, 5 its output, 6 exit
        assert actions["step_index"].to_list() == [2, 4]
        # each reply's call: the reply the agent could not parse held 2 messages, the next one 3 (the system
        # message, the task and the format error: messages[2], whose extra.response is no message sent)
        for row, context, held in zip(actions.iter_rows(named=True), contexts_of(actions, steps), [2, 3],
                                      strict=True):
            served = steps_of_messages(_messages_for_model(document, held, None))
            assert [(s["role"], content_text(s["content"])) for s in context] == [
                (s["role"], s["content"]) for s in served], row["step_index"]
        assert actions["label"].to_list() == [0.0, 0.0]  # the bad reply is a labelled action of its own
        patch = pl.DataFrame({"trajectory_id": [trajectory_id], "kind": ["patch"], "content": [""]})
        (context,) = contexts_of(patch, steps)
        assert [s["step_index"] for s in context] == [0, 1, 3, 4, 5, 6]

    def test_decisions_after_a_format_error_are_those_of_the_context_seen(self, format_error):
        from trajectory_lake.slices import seen_before
        from value_model.data import decision_ids

        _, trajectory_id, steps = format_error
        trajectory = steps[trajectory_id]
        decisions = decision_ids("t", trajectory)
        unparsed = [s for s in trajectory if s["step_index"] != 2]
        # the next reply is taken where a run whose model never sent that reply would take it
        assert decision_ids("t", unparsed)[4] == decisions[4]
        assert decision_ids("t", [*seen_before(trajectory, 4), trajectory[4]])[4] == decisions[4]
        # the unparsed reply's own decision is at the system message and the task, as a first reply's is
        assert decisions[2] == decision_ids("t", [*trajectory[:2], trajectory[4]])[4]


class TestRequeryContexts:
    """SWE-agent 1.x sends the call after a rejected reply the history, that reply and the error
    (DefaultAgent.get_model_requery_history), and later calls the history alone; 1.1+ saves each call's
    messages as its trajectory entry's ``query``. Every reply's context (contexts_of, decision_ids) is the
    ``query`` it was sent, read as a client's /v1/rerank messages (steps_of_messages)."""

    @pytest.fixture
    def requeried(self, shared_data, tmp_path):
        from tests.trajectory_lake.test_ingest_swe_agent import V1_TEXT, _requeried
        from trajectory_lake import Lake, ingest
        from value_model.data import load_steps

        path = shared_data / "formats" / "swe-agent-traj" / V1_TEXT
        document = _requeried({V1_TEXT: json.loads(path.read_text(encoding="utf-8"))})
        instance = "marshmallow-code__marshmallow-1867"
        written = tmp_path / "run" / instance / f"{instance}.traj"
        written.parent.mkdir(parents=True)
        written.write_text(json.dumps(document), encoding="utf-8")
        lake = Lake(tmp_path / "lake")
        ingest([tmp_path / "run"], lake)
        (trajectory_id,) = lake.read("trajectories")["trajectory_id"].to_list()
        return document, trajectory_id, load_steps(lake, [trajectory_id])

    def test_each_reply_s_context_is_the_query_it_was_sent(self, requeried):
        from reranker_service.service import steps_of_messages
        from value_model.serialize import render_step

        document, trajectory_id, steps = requeried
        trajectories = pl.DataFrame({"trajectory_id": [trajectory_id], "prompt": ["Fix it"],
                                     "task_id": ["t"], "value": [0.0]})
        actions = action_examples_of(trajectories, steps)
        # one action per call: the rejected replies are decisions of their own, in the entries' order
        assert actions.height == len(document["trajectory"]) == 16
        for row, context, entry in zip(actions.iter_rows(named=True), contexts_of(actions, steps),
                                       document["trajectory"], strict=True):
            sent = steps_of_messages(entry["query"])
            assert [render_step(s) for s in context] == [render_step(s) for s in sent], row["step_index"]
        patch = pl.DataFrame({"trajectory_id": [trajectory_id], "kind": ["patch"], "content": [""]})
        (context,) = contexts_of(patch, steps)
        assert [s["content"] for s in context] == [m["content"] for m in document["history"]]

    def test_each_reply_s_decision_is_that_of_the_query_it_was_sent(self, requeried):
        from reranker_service.service import steps_of_messages
        from value_model.data import decision_ids

        document, trajectory_id, steps = requeried
        trajectory = steps[trajectory_id]
        decisions = decision_ids("t", trajectory)
        replies = [s for s in trajectory if s["role"] == "assistant"]
        for reply, entry in zip(replies, document["trajectory"], strict=True):
            sent = [{**s, "step_index": i} for i, s in enumerate(steps_of_messages(entry["query"]))]
            alone = decision_ids("t", [*sent, {"step_index": len(sent), "role": "assistant", "content": ""}])
            assert decisions[reply["step_index"]] == alone[len(sent)], reply["step_index"]

    @staticmethod
    def _many_requeries(n_calls: int) -> list[dict]:
        """A long 1.x-shaped trajectory (an observation and a reply per call) with every other call's reply
        requeried once first: the rejected reply and its error, both sent in the next call only."""
        steps: list[dict] = [{"role": "system", "content": "You are a helpful assistant."}]
        for call in range(n_calls):
            steps.append({"role": "user", "content": f"OBSERVATION:\n{call}"})
            if call % 2:
                steps.append({"role": "assistant", "content": f"rejected {call}", "next_call_only": True})
                steps.append({"role": "user", "content": f"error {call}", "next_call_only": True})
            steps.append({"role": "assistant", "content": f"reply {call}"})
        return [{**s, "step_index": i} for i, s in enumerate(steps)]

    def test_decision_ids_with_many_requeries_take_linear_time(self, monkeypatch):
        # each requery's steps are seen by a few steps only: the ids of a long run (10k steps is a long
        # SWE-agent run) must not render the whole context again at each of them (quadratic: minutes)
        import value_model.data as data
        from trajectory_lake.slices import seen_before

        steps = self._many_requeries(1500)
        renders = []
        render = data.render_step
        monkeypatch.setattr(data, "render_step", lambda step, **kw: renders.append(1) or render(step, **kw))
        decisions = data.decision_ids("t", steps)
        assert len(renders) <= 2 * len(steps)
        monkeypatch.setattr(data, "render_step", render)
        # and they are still the decisions at the contexts seen_before gives
        for at in [*range(10), *range(len(steps) - 4, len(steps))]:
            alone = data.decision_ids("t", [*seen_before(steps, at), steps[at]])
            assert decisions[at] == alone[at], at

    def test_seen_before_with_many_requeries_reads_each_step_a_bounded_number_of_times(self):
        # contexts_of calls seen_before once per action: each call must stay linear in the steps, not copy
        # the rest of the trajectory once per requery step before it
        from trajectory_lake.slices import seen_before

        copied = []

        class Steps(list):
            def __getitem__(self, key):
                got = super().__getitem__(key)
                if isinstance(key, slice):
                    copied.append(len(got))
                return got

        steps = Steps(self._many_requeries(1500))
        context = seen_before(steps, len(steps))
        assert sum(copied) <= 2 * len(steps)
        # after the last call the history alone is seen: no requery's rejected reply or error is in it
        assert [s["content"] for s in context if not s["content"].startswith(("OBSERVATION", "reply"))] == [
            "You are a helpful assistant."]


class TestCopiedContext:
    """Steps a trajectory holds as a copy of another's history: a Codex sub-agent's replay of its parent's
    conversation (``extra.copied_context``) and an ATIF continuation's copy of the trajectory it continues
    (``is_copied_context``). The model is shown them, so they are context, but the decisions in them were the
    other trajectory's: an action row for one gave the parent's (or the first part's) decision the child's
    outcome, twice over, and shifted every later ``t``."""

    @staticmethod
    def _frame(lake, trajectory):
        return pl.DataFrame([{"trajectory_id": trajectory["trajectory_id"], "task_id": trajectory["task_id"],
                              "prompt": "t", "value": 1.0}])

    def test_a_codex_subagents_copy_of_its_parents_history_is_no_action(self, tmp_path):
        from tests.trajectory_lake.test_ingest_codex import TestCodexSubagentCopiedHistory, _say
        from trajectory_lake import Lake, ingest

        own = [_say("Looking at parser.py.", phase="commentary"), _say("It is in tokenize().")]
        path = TestCodexSubagentCopiedHistory()._rollout(tmp_path, own)
        lake = Lake(tmp_path / "lake")
        ingest([path], lake)
        (trajectory,) = lake.read("trajectories").to_dicts()
        steps = load_steps(lake, [trajectory["trajectory_id"]])
        actions = action_examples_of(self._frame(lake, trajectory), steps)
        assert actions.select("t", "n_actions", "content").rows() == [
            (0, 2, "Looking at parser.py."), (1, 2, "It is in tokenize().")]
        (context,) = contexts_of(actions.head(1), steps)
        # the copied history is still what the child was shown
        assert [s["content"] for s in context] == [
            "Fix the flaky parser tests.", "The parser tests pass now.",
            "Find where the parser drops trailing commas."]

    def test_an_atif_continuations_copied_steps_are_no_actions(self, tmp_path, shared_data):
        from tests.trajectory_lake.test_ingest_atif import TestAtifContinuedTrajectory
        from trajectory_lake import Lake, ingest

        case = TestAtifContinuedTrajectory()
        lake = Lake(tmp_path / "lake")
        ingest([case._trial(tmp_path)], lake)
        (continuation,) = (lake.read("trajectories")
                           .filter(pl.col("source_uri").str.ends_with("trajectory.cont-1.json")).to_dicts())
        steps = load_steps(lake, [continuation["trajectory_id"]])
        actions = action_examples_of(self._frame(lake, continuation), steps)
        assert actions.select("t", "n_actions", "content").rows() == [(0, 1, case.DONE)]

    def test_copied_and_replayed_tool_calls_are_not_counted_as_the_trajectorys_actions(self):
        from trajectory_lake.analysis import last_actions

        def step(index, command, **extra):
            call = {"id": f"c{index}", "name": "bash", "arguments": json.dumps({"command": command})}
            return {"trajectory_id": "t", "step_index": index, "role": "assistant", "tool_calls": [call],
                    "extra": json.dumps(extra, sort_keys=True) if extra else None}

        steps = pl.DataFrame([step(0, "ls", copied_context=True), step(1, "cat a.py", is_copied_context=True),
                              step(2, "pytest", replayed_by_compaction=False),
                              step(3, "ls", replayed_by_compaction=True), step(4, "git diff")])
        (row,) = last_actions(steps, n=5).to_dicts()
        assert (row["n_actions"], row["last_actions"]) == (2, ["bash:pytest", "bash:git"])
