"""``harvest train`` for step-level examples and weighted objectives: lake → MLflow registry → a scorer
that reads the serialization options it was trained with."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from trajectory_lake.cli import main
from value_model.data import load_steps
from value_model.inference import Scorer
from value_model.tracking import resolve_model

pytestmark = pytest.mark.slow


@pytest.fixture
def harvest_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def test_harvest_train_on_actions_registers_a_model_that_scores_with_trajectory_context(
    agent_lake, harvest_home, tiny_decoder_dir
):
    result = CliRunner().invoke(main, [
        "train", "--lake", agent_lake.uri, "--register", "agent-actions", "--backbone", str(tiny_decoder_dir),
        "--kind", "action", "--trajectory-kind", "answer", "--objective", "bce=1,td=1", "--td-lambda", "0.8",
        "--max-length", "48", "--epochs", "1", "--max-examples", "24", "--val-fraction", "0.3", "--json",
    ])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["n_train"] > 0 and "td_mse" in body["validation"]
    directory, _ = resolve_model("models:/agent-actions@champion")
    scorer = Scorer.from_directory(directory)
    assert scorer.info["kind"] == "action"
    assert scorer.info.get("combiner") is None  # next actions of different trajectories are not compared
    assert scorer.info["serialize"]["include_context"] is True
    assert scorer.info["training"]["objective"] == "bce=1,td=1"
    assert scorer.info["lineage"]["steps_version"] == agent_lake.version("steps")
    steps = next(iter(load_steps(agent_lake, agent_lake.read("trajectories")["trajectory_id"]).values()))
    scored = scorer.score("help the customer", ["<tool_call>get_user_details {}</tool_call>", "Goodbye."],
                          context=steps[:5])
    assert np.all(np.isfinite(scored.values)) and len(scored.truncated) == 2
    # the MLflow pyfunc flavour scores with the same context (a JSON array of steps), or without one
    pyfunc = mlflow.pyfunc.load_model("models:/agent-actions@champion")
    candidates = ["<tool_call>get_user_details {}</tool_call>", "Goodbye."]
    rows = pd.DataFrame({"prompt": ["help the customer"] * 4, "candidate": candidates * 2,
                         "context": [json.dumps(steps[:5], default=str)] * 2 + [None] * 2})
    scores = pyfunc.predict(rows)
    plain = scorer.score("help the customer", candidates).scores
    assert scores == pytest.approx([*scored.scores, *plain], abs=1e-6)
    assert scored.scores != pytest.approx(plain, abs=1e-6)  # the context matters to this model


def test_an_action_slice_is_refused_with_a_pointer_to_trajectory_slices(agent_lake, harvest_home, tmp_path):
    spec = tmp_path / "actions.toml"
    spec.write_text('[slice]\nname = "actions"\nkind = "action"\n')
    result = CliRunner().invoke(main, ["train", "--lake", agent_lake.uri, "--slice", str(spec), "--kind", "action"])
    assert result.exit_code != 0 and "give a slice of kind 'patch' or 'answer'" in result.output


def test_evaluate_serializes_each_candidate_after_its_own_trajectory_for_a_context_model(
    agent_lake, harvest_home, tiny_decoder_dir
):
    from trajectory_lake.slices import SliceSpec, resolve_slice, scan_slice
    from value_model.data import examples_of
    from value_model.pipeline import _score, evaluate_registered

    result = CliRunner().invoke(main, [
        "train", "--lake", agent_lake.uri, "--register", "agent-context", "--backbone", str(tiny_decoder_dir),
        "--kind", "answer", "--include-context", "--max-length", "96", "--epochs", "1", "--val-fraction", "0.5",
    ])
    assert result.exit_code == 0, result.output
    report = evaluate_registered(agent_lake, "models:/agent-context@champion", log=False)
    assert report.n_candidates > 0

    directory, _ = resolve_model("models:/agent-context@champion")
    scorer = Scorer.from_directory(directory)
    assert scorer.info["combiner"] is not None  # answers are compared with each other, as patches are
    spec = SliceSpec.from_dict({**scorer.info["slice_manifest"]["spec"], "versions": None, "as_of": None})
    frame = examples_of(scan_slice(agent_lake, resolve_slice(agent_lake, spec), split="val").collect())
    steps = load_steps(agent_lake, frame["trajectory_id"].unique().to_list())
    with_context, _ = _score(scorer, frame, steps)
    without, _ = _score(scorer, frame)
    assert not np.allclose(with_context, without)  # the steps reach the model
