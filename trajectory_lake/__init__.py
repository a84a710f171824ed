"""trajectory_lake: agent rollouts as versioned Delta tables.

Public surface: :class:`Lake` (the tables), :func:`ingest` (harness files in), the schemas, and the
error hierarchy. See ``../shared/DESIGN.md`` for the tables and their grain.

Importing the package imports neither polars nor deltalake: the names that need them are imported on
first use (PEP 562), so ``value_model`` and ``reranker_service``, which import this package, run
where those packages are not installed as long as no lake is used (:mod:`trajectory_lake.dependencies`).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from trajectory_lake.dependencies import import_optional
from trajectory_lake.exceptions import (
    FormatDetectionError,
    LakeError,
    MalformedRecordError,
    SchemaMismatchError,
    TableNotFoundError,
)

if TYPE_CHECKING:
    from trajectory_lake.ingest import IngestReport, TableCounts, ingest
    from trajectory_lake.lake import Lake
    from trajectory_lake.schema import KEYS, PARTITIONS, SCHEMA_VERSION, TABLE_NAMES, TABLES, schema_of

__all__ = [
    "KEYS",
    "PARTITIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "TABLE_NAMES",
    "FormatDetectionError",
    "IngestReport",
    "Lake",
    "LakeError",
    "MalformedRecordError",
    "SchemaMismatchError",
    "TableCounts",
    "TableNotFoundError",
    "ingest",
    "schema_of",
]

# Public names imported on first use, by the module that defines them.
_LAZY = {
    **dict.fromkeys(("IngestReport", "TableCounts", "ingest"), "trajectory_lake.ingest"),
    "Lake": "trajectory_lake.lake",
    **dict.fromkeys(
        ("KEYS", "PARTITIONS", "SCHEMA_VERSION", "TABLE_NAMES", "TABLES", "schema_of"),
        "trajectory_lake.schema",
    ),
}


def __getattr__(name: str) -> Any:  # noqa: ANN401 - any public name
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_optional(module, feature=f"the lake (trajectory_lake.{name})"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(ModuleType):
    """This package, whose submodules never shadow its public names.

    The import system sets each submodule as an attribute of its package when it first loads it, so
    importing ``trajectory_lake.ingest`` (the module) after this package would replace the function
    ``trajectory_lake.ingest``. When the package imported that module itself, first, the function came
    second and won; now that it is imported on first use, this keeps the function.
    """

    def __setattr__(self, name: str, value: Any) -> None:  # noqa: ANN401 - any attribute
        if name in _LAZY and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
