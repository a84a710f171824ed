"""Default locations, read from the environment at call time (never at import).

``HARVEST_HOME`` (default ``~/.harvest``) holds everything Harvest keeps locally by default: the lake
(``HARVEST_LAKE`` overrides it), the MLflow store and the model artefacts.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_lake_uri", "harvest_home"]


def harvest_home() -> Path:
    """``$HARVEST_HOME``, else ``~/.harvest`` (created on first use)."""
    home = Path(os.environ.get("HARVEST_HOME") or Path.home() / ".harvest").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def default_lake_uri() -> str:
    """``$HARVEST_LAKE``, else ``<harvest home>/lake``."""
    return os.environ.get("HARVEST_LAKE") or str(harvest_home() / "lake")
