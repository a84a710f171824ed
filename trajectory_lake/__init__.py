"""trajectory_lake: agent rollouts as versioned Delta tables.

Public surface: :class:`Lake` (the tables), :func:`ingest` (harness files in), the schemas, and the
error hierarchy. See ``../shared/DESIGN.md`` for the tables and their grain.
"""

from trajectory_lake.exceptions import (
    FormatDetectionError,
    LakeError,
    MalformedRecordError,
    SchemaMismatchError,
    TableNotFoundError,
)
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
