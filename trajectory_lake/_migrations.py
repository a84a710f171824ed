"""Schema evolution: an older lake's tables brought to this code's schema, a newer lake refused.

The steps are :data:`trajectory_lake.schema.MIGRATIONS`, in order: each adds nullable columns to one table.
A writer applies them as it opens the lake (:meth:`Lake.create <trajectory_lake.lake.Lake.create>`), before
it writes a row, through delta-rs' own ``DeltaTable.alter.add_columns``: one commit per step, whose commit
metadata names it (``harvest.operation: migrate``, ``harvest.migration``, ``harvest.schema_version``).
Rows written before read the new columns as null; a version pinned before the step reads as it did
(its schema has no such column, and :meth:`Lake.scan <trajectory_lake.lake.Lake.scan>` gives it as null).

Idempotent and safe with writers that open the lake at once: a step whose columns the table has is not
applied again, and of two processes adding the same columns Delta commits one ADD COLUMN and rejects the
other (``CommitFailedError``: the metadata changed), whose process reads the table again, finds the columns
there and goes on.

A table created by this code records ``SCHEMA_VERSION`` in its table property ``harvest.schema_version``.
A table whose recorded version is newer, or that holds columns this code does not know (a newer Harvest's
steps), is refused with :class:`~trajectory_lake.exceptions.SchemaMismatchError`: upgrade Harvest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from deltalake import CommitProperties, DeltaTable, Field
from deltalake.exceptions import CommitFailedError

from trajectory_lake.exceptions import SchemaMismatchError
from trajectory_lake.schema import MIGRATIONS, SCHEMA_VERSION, Migration, schema_of

if TYPE_CHECKING:
    from trajectory_lake.lake import Lake

__all__ = ["SCHEMA_VERSION_PROPERTY", "apply_steps", "check_not_newer", "checked_tables", "migrate"]

logger = logging.getLogger(__name__)

# The Delta table property that records the schema version a table was created at.
SCHEMA_VERSION_PROPERTY = "harvest.schema_version"
# Each failed attempt means another writer changed the table's metadata (or committed) first.
_ATTEMPTS = 20


def migrate(lake: Lake, tables: Iterable[str]) -> list[str]:
    """Check ``tables`` (existing tables of ``lake``) and apply the :data:`MIGRATIONS` steps they lack.

    Args:
        lake: the lake.
        tables: the tables to bring up to date (those this process did not just create).

    Returns:
        The names of the steps this process committed, in order (a step another process committed first,
        or one the table had, is not listed).

    Raises:
        SchemaMismatchError: a table was written by a newer Harvest.
    """
    return apply_steps(lake, checked_tables(lake, tables))


def checked_tables(lake: Lake, tables: Iterable[str]) -> dict[str, DeltaTable]:
    """Open ``tables`` (existing tables of ``lake``) at their latest versions and check each with
    :func:`check_not_newer`, all before :func:`apply_steps` changes any.

    Raises:
        SchemaMismatchError: a table was written by a newer Harvest.
    """
    opened = {table: lake.delta_table(table) for table in tables}
    for table, dt in opened.items():
        check_not_newer(table, dt)
    return opened


def apply_steps(lake: Lake, opened: dict[str, DeltaTable]) -> list[str]:
    """Apply the :data:`MIGRATIONS` steps that the tables ``opened`` (from :func:`checked_tables`) lack;
    the names of the steps this process committed, in order."""
    opened = dict(opened)
    applied: list[str] = []
    for step in MIGRATIONS:
        if step.table in opened:
            opened[step.table], committed = _apply(lake, step, opened[step.table])
            if committed:
                applied.append(step.name)
    return applied


def check_not_newer(table: str, dt: DeltaTable) -> None:
    """Refuse a table that a newer Harvest wrote: a recorded schema version above ``SCHEMA_VERSION``, or
    columns this code's schema does not have.

    Raises:
        SchemaMismatchError: with what to do (upgrade Harvest).
    """
    recorded = dt.metadata().configuration.get(SCHEMA_VERSION_PROPERTY)
    upgrade = f"upgrade Harvest to a version that reads it (this one writes schema version {SCHEMA_VERSION})"
    if recorded is not None:
        try:
            version = int(recorded)
        except ValueError:
            raise SchemaMismatchError(
                f"lake table {table!r} records the schema version {recorded!r} "
                f"({SCHEMA_VERSION_PROPERTY}), not a number: {upgrade}"
            ) from None
        if version > SCHEMA_VERSION:
            raise SchemaMismatchError(
                f"lake table {table!r} has schema version {version}, newer than this Harvest's: {upgrade}"
            )
    unknown = [name for name in _columns(dt) if name not in schema_of(table).names]
    if unknown:
        raise SchemaMismatchError(
            f"lake table {table!r} has columns this Harvest does not know ({unknown}), "
            f"written by a newer Harvest: {upgrade}"
        )


def _columns(dt: DeltaTable) -> list[str]:
    return [field.name for field in dt.schema().fields]


def _apply(lake: Lake, step: Migration, dt: DeltaTable) -> tuple[DeltaTable, bool]:
    """Add the columns of ``step`` that ``dt`` lacks, in one commit; ``dt`` read again whenever another
    commit came first. Returns the table as it is now, and whether this call committed the step."""
    from trajectory_lake.ingest import tool_version  # ingest imports the lake, which imports this module

    metadata = {
        "harvest.operation": "migrate",
        "harvest.migration": step.name,
        "harvest.schema_version": str(step.version),
        "harvest.tool_version": tool_version(),
    }
    attempt = 0
    while True:
        present = set(_columns(dt))
        missing = [field for field in step.fields() if field.name not in present]
        if not missing:
            return dt, False
        try:
            # no retry by delta-rs: a retried ADD COLUMN could land after another writer's, a second commit
            commit = CommitProperties(custom_metadata=metadata, max_commit_retries=0)
            dt.alter.add_columns([Field.from_arrow(field) for field in missing], commit_properties=commit)
        except CommitFailedError as exc:
            attempt += 1
            if attempt >= _ATTEMPTS:
                raise
            logger.debug(
                "migration %s of %s lost to another commit, reading it again: %s", step.name, step.table, exc
            )
            dt = lake.delta_table(step.table)
            continue
        logger.info("lake table %s migrated: %s (schema version %s)", step.table, step.name, step.version)
        return lake.delta_table(step.table), True
