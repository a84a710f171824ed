"""MLflow: tracking runs, registering models, resolving ``models:/NAME@ALIAS`` to a local artefact.

The store is ``$MLFLOW_TRACKING_URI`` when set, else a SQLite file in the Harvest home
(``$HARVEST_HOME/mlflow.db``, artefacts in ``$HARVEST_HOME/mlartifacts``), so every command finds the
same registry without flags. Models are logged as MLflow ``pyfunc`` models whose artefact is the
value-model directory, so ``mlflow.pyfunc.load_model`` works too.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajectory_lake.dependencies import lazy_import
from trajectory_lake.paths import harvest_home

if TYPE_CHECKING:
    import mlflow
    from mlflow import MlflowClient
else:  # a local model directory resolves without MLflow (serving where it is not installed)
    mlflow = lazy_import("mlflow", feature="the MLflow registry (models:/ and runs:/ URIs, logging a run)")

__all__ = ["ModelNotFoundError", "RegisteredModel", "log_and_register", "resolve_model", "tracking_uri"]

logger = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "harvest-value-model"
ARTEFACT_NAME = "value_model"


class ModelNotFoundError(LookupError):
    """A model URI names no registered model, alias, version or local artefact."""


@dataclass(frozen=True)
class RegisteredModel:
    """Where a trained model went."""

    run_id: str
    model_uri: str  # models:/NAME/VERSION when registered, else runs:/RUN/model
    name: str | None = None
    version: str | None = None
    alias: str | None = None


def _default_uri() -> str:
    return f"sqlite:///{harvest_home() / 'mlflow.db'}"


def tracking_uri(explicit: str | None = None) -> str:
    """The tracking URI: ``explicit``, else ``$MLFLOW_TRACKING_URI``, else the local SQLite store."""
    if explicit:
        return explicit
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return _default_uri()


def _experiment_id(client: MlflowClient, name: str, uri: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    location = None
    if uri == _default_uri():
        # Keep artefacts beside the default store instead of in ./mlruns of whatever directory we ran in.
        location = (harvest_home() / "mlartifacts").as_uri()
    try:
        return client.create_experiment(name, artifact_location=location)
    except mlflow.exceptions.MlflowException:  # created concurrently
        return client.get_experiment_by_name(name).experiment_id


def log_and_register(
    *,
    model_dir: Path,
    params: dict[str, Any],
    metrics: dict[str, float],
    lineage: dict[str, Any],
    register: str | None,
    alias: str | None = "champion",
    experiment: str = DEFAULT_EXPERIMENT,
    uri: str | None = None,
    artifacts: dict[str, Any] | None = None,
    history: dict[str, Sequence[float]] | None = None,
) -> RegisteredModel:
    """Log one training run (params, metrics, lineage, the model) and register the model.

    Args:
        model_dir: the value-model artefact directory (see :mod:`value_model.model`).
        params: flat params (the training config).
        metrics: validation metrics.
        lineage: what the run read (lake URI, table versions); logged as ``lineage.json`` and tags.
        register: registered model name, or ``None`` to only log the run.
        alias: alias to point at the new version (e.g. ``champion``).
        experiment: MLflow experiment name.
        uri: tracking URI (default: :func:`tracking_uri`).
        artifacts: extra JSON documents to log, by file name.
        history: metric name → one value per training step (e.g. ``train_loss``), logged as the
            metric's history with step = 1, 2, ...
    """
    from mlflow.entities import Metric

    from value_model.pyfunc import pip_requirements

    uri = tracking_uri(uri)
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment_id = _experiment_id(client, experiment, uri)
    with mlflow.start_run(experiment_id=experiment_id) as run:
        mlflow.log_params({k: v for k, v in params.items()})
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if v == v})  # drop NaN
        mlflow.set_tags({f"harvest.{k}": json.dumps(v) if not isinstance(v, str) else v for k, v in lineage.items()})
        mlflow.log_dict(lineage, "lineage.json")
        now = int(time.time() * 1000)
        points = [Metric(key=key, value=float(v), timestamp=now, step=step)
                  for key, values in (history or {}).items() for step, v in enumerate(values, 1) if v == v]
        for start in range(0, len(points), 1000):  # MLflow takes at most 1000 metrics per batch
            client.log_batch(run.info.run_id, metrics=points[start : start + 1000])
        for name, document in (artifacts or {}).items():
            mlflow.log_dict(document, name)
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(Path(__file__).with_name("_pyfunc_model.py")),
            artifacts={ARTEFACT_NAME: str(model_dir)},
            pip_requirements=pip_requirements(),
            registered_model_name=register,
        )
    if register is None:
        return RegisteredModel(run_id=run.info.run_id, model_uri=f"runs:/{run.info.run_id}/model")
    version = str(info.registered_model_version)
    if alias:
        client.set_registered_model_alias(register, alias, version)
    return RegisteredModel(
        run_id=run.info.run_id, model_uri=f"models:/{register}/{version}", name=register, version=version, alias=alias
    )


def resolve_model(model: str, *, uri: str | None = None, dst: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
    """A model reference to a local value-model directory.

    Args:
        model: ``models:/NAME@ALIAS``, ``models:/NAME/VERSION``, ``runs:/RUN/model``, or a local
            artefact directory (a value-model directory or an MLflow pyfunc model directory).
        uri: tracking URI for registry lookups.
        dst: where to download registry artefacts (default: a new temporary directory).

    Returns:
        (the directory holding ``harvest.json``, facts about the model: uri, name, version, run_id).

    Raises:
        ModelNotFoundError: nothing is found under that reference.
    """
    facts: dict[str, Any] = {"uri": model}
    if model.startswith(("models:/", "runs:/")):
        uri = tracking_uri(uri)
        mlflow.set_tracking_uri(uri)
        if model.startswith("models:/"):
            facts.update(_registry_facts(mlflow.MlflowClient(tracking_uri=uri), model))
        local = _download(model, uri, facts, Path(dst) if dst else None)
    else:
        local = Path(model).expanduser()
        if not local.exists():
            raise ModelNotFoundError(f"no model at {model!r}: not a models:/ or runs:/ URI, and no such directory")
    found = [local] if (local / "harvest.json").is_file() else sorted(p.parent for p in local.rglob("harvest.json"))
    if not found:
        raise ModelNotFoundError(f"{model!r} holds no Harvest value model (no harvest.json under {local})")
    return found[0], facts


def _registry_facts(client: MlflowClient, model: str) -> dict[str, Any]:
    ref = model.removeprefix("models:/")
    try:
        if "@" in ref:
            name, alias = ref.split("@", 1)
            version = client.get_model_version_by_alias(name, alias)
        else:
            name, _, number = ref.partition("/")
            version = client.get_model_version(name, number)
    except mlflow.exceptions.MlflowException as exc:
        raise ModelNotFoundError(f"no registered model {model!r}: {exc.message}") from exc
    return {"name": version.name, "version": str(version.version), "run_id": version.run_id}


def _download(model: str, uri: str, facts: dict[str, Any], dst: Path | None) -> Path:
    """Download a registry or run artefact, once: registry versions are immutable, so they are cached
    under ``$HARVEST_HOME/models/<name>/<version>-<run id>`` (moved into place atomically) and reused.
    The run id (unique across stores) tells apart the same name and version in two stores, or in a
    store created anew."""
    if dst is None and facts.get("version"):
        run = facts.get("run_id") or "norun"
        cache = harvest_home() / "models" / facts["name"] / f"{facts['version']}-{run}"
        if (cache / ".complete").is_file():
            return cache
        cache.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".download-", dir=cache.parent))
        local = _fetch(model, uri, staging)
        (staging / ".complete").write_text(str(local.relative_to(staging)))
        try:
            staging.rename(cache)
        except OSError:  # another process put it there first
            shutil.rmtree(staging, ignore_errors=True)
        return cache
    target = dst or Path(tempfile.mkdtemp(prefix="harvest-model-"))
    return _fetch(model, uri, target)


def _fetch(model: str, uri: str, target: Path) -> Path:
    try:
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=model, dst_path=str(target), tracking_uri=uri))
    except mlflow.exceptions.MlflowException as exc:
        raise ModelNotFoundError(f"cannot load {model!r} from {uri}: {exc.message}") from exc
