"""Fixtures of the value-model tests: a lake of real agent trajectories with outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

AGENT_FORMATS = ("tau-bench", "tau2-bench")


@pytest.fixture(scope="session")
def agent_lake(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """A lake of real multi-turn trajectories with 0/1 outcomes: tau-bench and tau2-bench airline runs
    (12 trajectories of 6 tasks, tool calls and tool results, both outcomes on several tasks).

    Their candidates are ``answer``s labelled ``resolved``; step-level (``action``) examples come from
    their steps. Treat the data tables as read only.
    """
    from trajectory_lake import Lake, ingest

    lake = Lake(tmp_path_factory.mktemp("agent-lake"))
    ingest([shared_data / "formats" / name for name in AGENT_FORMATS], lake)
    return lake


@pytest.fixture(scope="session")
def action_examples(agent_lake):
    """Step-level examples of the agent lake (:func:`value_model.data.load_action_examples`)."""
    from value_model.data import load_action_examples

    return load_action_examples(agent_lake, trajectory_kind="answer", label="resolved")
