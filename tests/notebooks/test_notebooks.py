"""Every notebook runs top to bottom on the real data, passes its own checks, and is committed clean.

Each notebook ends with a cell of assertions about what it computed that prints ``ok``; the run test
executes the notebook in a fresh kernel (nbclient) and requires that ``ok``. The kernel gets:

* ``HARVEST_SHARED_DATA``: the real data; each notebook ingests what it needs into a temporary lake;
* ``HARVEST_FIGURES``: where the notebooks save their figures as PNG (to look at them);
* for the value-model report, an MLflow store in ``tmp_path`` holding two tiny registered models
  (``models:/harvest-value@champion`` and ``@challenger``, trained here on the Lite lake in seconds)
  and ``HARVEST_HOME`` (where registry downloads are cached) in ``tmp_path`` as well.
"""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
REPORT = "04_value_model_report"


@pytest.fixture(scope="session")
def registered_models(lite_lake, tiny_encoder_dir, tmp_path_factory) -> dict[str, str]:
    """Two tiny value models trained on the Lite lake and registered in a fresh MLflow store: the
    environment the report notebook reads them from."""
    from value_model.config import TrainConfig
    from value_model.pipeline import train_from_lake

    home = tmp_path_factory.mktemp("report-home")
    uri = f"sqlite:///{home / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARVEST_HOME", str(home))
        for alias, objective, seed in (("champion", "bce", 0), ("challenger", "pairwise", 1)):
            config = TrainConfig(backbone=str(tiny_encoder_dir), max_length=64, epochs=1, max_examples=64,
                                 batch_size=16, objective=objective, seed=seed)
            train_from_lake(lite_lake, config, register="harvest-value", alias=alias, tracking_uri=uri)
    return {
        "HARVEST_HOME": str(home),
        "MLFLOW_TRACKING_URI": uri,
        "HARVEST_REPORT_MODELS": "champion=models:/harvest-value@champion, "
                                 "challenger=models:/harvest-value@challenger",
    }


def _stream_text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom_on_the_real_data(path, shared_data, tmp_path, monkeypatch, request):
    monkeypatch.setenv("HARVEST_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("HARVEST_FIGURES", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' scratch lakes go away with the test
    monkeypatch.delenv("HARVEST_LAKE", raising=False)
    if path.stem == REPORT:
        for name, value in request.getfixturevalue("registered_models").items():
            monkeypatch.setenv(name, value)
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert not [o for cell in code for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert _stream_text(code[-1]).strip().endswith("ok"), "the notebook's last cell checks what it computed"
    assert list(tmp_path.glob("*.png")), "the notebook saves its figures to HARVEST_FIGURES"


def test_notebooks_are_committed_without_outputs():
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, path.name


def test_every_notebook_ends_with_its_checks():
    for path in NOTEBOOKS:
        code = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
        assert "assert" in code[-1].source and 'print("ok")' in code[-1].source, path.name


def test_notebooks_read_their_paths_from_the_environment():
    for path in NOTEBOOKS:
        source = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
        assert "HARVEST_SHARED_DATA" in source and "HARVEST_LAKE" in source, path.name
