"""Fixtures shared by every test package.

``shared_data`` is the real public data set that lives beside the repository (``../shared/data``, see its
README). Tests that need it skip with a clear reason when it is absent, except under CI (``CI=true``),
where a missing data set is a broken checkout and fails the run instead of passing it silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_path() -> Path:
    """``$HARVEST_SHARED_DATA``, else ``<repo>/../shared/data`` (read at call time, never at import)."""
    override = os.environ.get("HARVEST_SHARED_DATA")
    return Path(override).expanduser() if override else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data set (``../shared/data``); skips when absent, fails when ``CI=true``."""
    path = shared_data_path()
    if not path.is_dir():
        reason = (
            f"../shared/data is not present (looked for {path}); the real-data tests read the public "
            "harness files kept beside the repository. Put them there or point HARVEST_SHARED_DATA at them."
        )
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return path
