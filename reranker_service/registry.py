"""A cheap registry check for alias polling: which version does ``models:/NAME@ALIAS`` point at now?

Loading a model downloads its artefact; polling must not. This asks the MLflow registry for the
alias only. (Candidate to move into ``value_model.tracking`` next to ``resolve_model``.)
"""

from __future__ import annotations

__all__ = ["alias_version"]


def alias_version(reference: str, tracking_uri: str | None = None) -> str | None:
    """The version ``models:/NAME@ALIAS`` resolves to, or ``None`` for references without an alias.

    Raises:
        mlflow.exceptions.MlflowException: the registry cannot be reached or has no such alias.
    """
    if not reference.startswith("models:/") or "@" not in reference:
        return None
    from mlflow import MlflowClient

    from value_model import tracking_uri as resolve_uri

    name, alias = reference.removeprefix("models:/").split("@", 1)
    client = MlflowClient(tracking_uri=resolve_uri(tracking_uri), registry_uri=resolve_uri(tracking_uri))
    return str(client.get_model_version_by_alias(name, alias).version)
