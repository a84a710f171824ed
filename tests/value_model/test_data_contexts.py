"""``contexts_of`` on long and marked trajectories: the contexts it always gave (the per-row algorithm it had,
kept here as the reference), read once per trajectory rather than once per row."""

from __future__ import annotations

import importlib.util
import random

import polars as pl

from tests.conftest import REPO_ROOT
from tests.trajectory_lake.test_slices_seen import marked_trajectory
from trajectory_lake.records import step_action
from value_model.data import contexts_of


def _load_benchmark():
    """``benchmarks/contexts.py``, whose ``contexts_baseline`` is ``contexts_of`` as it was (per row, the
    trajectory copied, its step indices listed and ``seen_before`` run over the prefix): one copy of the old
    algorithm, the benchmark's baseline and this test's reference."""
    script = REPO_ROOT / "benchmarks" / "contexts.py"
    spec = importlib.util.spec_from_file_location("harvest_contexts_benchmark", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_contexts_as_before = _load_benchmark().contexts_baseline


def _rows(rng, trajectory_id, steps):
    """Rows of one trajectory as slices and ``action_examples_of`` make them: actions at its steps (and at
    indices between them, and without one), trajectory-level candidates that are a step's text, the last
    reply's, a text tool results open with ("same"), or nothing the trajectory says."""
    rows = []
    for step in steps:
        if rng.random() < 0.5:
            index = step["step_index"] + rng.choice((0, 0, 0, 1))
            rows.append({"trajectory_id": trajectory_id, "kind": "action", "step_index": index,
                         "content": step_action(step)})
    rows.append({"trajectory_id": trajectory_id, "kind": "action", "step_index": None, "content": "x"})
    replies = [s for s in steps if s["role"] == "assistant"]
    said = [step_action(s) for s in steps]
    for content in (*rng.sample(said, min(3, len(said))), step_action(replies[-1]) if replies else None,
                    "same", "diff --git a/x b/x", "", None):
        rows.append({"trajectory_id": trajectory_id, "kind": rng.choice(("patch", "answer")),
                     "step_index": None, "content": content})
    return rows


class TestContextsOf:
    def test_it_gives_the_contexts_it_always_gave_on_random_marked_trajectories(self):
        rng = random.Random(7)
        steps = {f"t{i}": marked_trajectory(rng, rng.randint(0, 160)) for i in range(80)}
        for trajectory in steps.values():  # tool results that open with a reply's text, then a line break
            for step in trajectory:
                if step["role"] == "tool" and rng.random() < 0.3:
                    step["content"] = "same\n(Open file: x.py)"
        rows = [row for trajectory_id, trajectory in steps.items()
                for row in _rows(rng, trajectory_id, trajectory)]
        rows += [{"trajectory_id": "absent", "kind": kind, "step_index": 3, "content": "y"}
                 for kind in ("action", "patch")]
        rng.shuffle(rows)
        frame = pl.DataFrame(rows, schema={"trajectory_id": pl.String, "kind": pl.String,
                                           "step_index": pl.Int64, "content": pl.String})
        # slice rows (an action ends at its step) and action examples (at its own thought: context_end)
        for frame_ in (frame, frame.rename({"step_index": "context_end"})):
            got, expected = contexts_of(frame_, steps), _contexts_as_before(frame_, steps)
            assert len(got) == len(expected) == len(rows)
            for row, a, b in zip(frame_.iter_rows(named=True), got, expected, strict=True):
                assert [id(s) for s in a] == [id(s) for s in b], row
        # the cases are there: contexts that hold a summary, a requery's step, and that end before the end
        assert any(any(s.get("summarizes_steps") for s in c) for c in expected)
        assert any(any(s.get("next_call_only") for s in c) for c in expected)
        assert sum(len(c) < len(steps.get(r["trajectory_id"], ())) for r, c in zip(
            frame.iter_rows(named=True), expected, strict=True) if r["kind"] != "action") > 10

    def test_a_trajectory_scored_action_by_action_is_read_once_not_once_per_action(self):
        # a 10,000-step session scored action by action read its whole prefix at every action (~10^8 Python
        # steps); its steps are now read a bounded number of times each
        reads = [0]

        class Step(dict):
            def __getitem__(self, key):
                reads[0] += 1
                return super().__getitem__(key)

            def get(self, key, default=None):
                reads[0] += 1
                return super().get(key, default)

        rng = random.Random(3)
        trajectory = [Step(s) for s in marked_trajectory(rng, 2000)]
        actions = [s for s in trajectory if s["role"] == "assistant"]
        frame = pl.DataFrame({"trajectory_id": ["t"] * len(actions), "kind": ["action"] * len(actions),
                              "step_index": [s["step_index"] for s in actions]})
        reads[0] = 0
        contexts = contexts_of(frame, {"t": trajectory})
        assert len(contexts) == len(actions) > 500
        assert reads[0] <= 20 * len(trajectory)
