"""Every notebook runs top to bottom on the real data and passes its own assertions."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom_on_the_real_data(path: Path, shared_data: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HARVEST_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("HARVEST_FIGURES", str(tmp_path))
    monkeypatch.delenv("HARVEST_LAKE", raising=False)
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]


def test_notebooks_are_committed_without_outputs():
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), path.name
