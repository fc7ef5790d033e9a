"""What the apply's MERGE and CREATE statements say, from a step's staged schemas and schema events:
pure text and choices, no Spark (:mod:`.table_applier` runs them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_mysql_cdc.apply.plan import ApplyWindow, quote
from airflow_provider_mysql_cdc.apply.schema_alignment import ColumnBackfill
from airflow_provider_mysql_cdc.apply.staged_rows import PARTIAL_COLUMN, sql_string
from airflow_provider_mysql_cdc.core.schema_events import SchemaEvent
from airflow_provider_mysql_cdc.core.staging import SchemaVersionInfo

#: Properties of every target table the apply creates: merge-on-read row-level operations (a MERGE
#: writes new rows and position deletes for the changed keys only; it still scans the target's keys),
#: format v2, serializable validation.
TARGET_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.merge.isolation-level": "serializable",
    "write.parquet.compression-codec": "zstd",
    # Check the row group's size from the first row on (Iceberg's default waits for 100 rows): a task
    # writing rows of many MiB otherwise buffers 100 of them before its first check.
    "write.parquet.row-group-check-min-record-count": "1",
}
#: The staged column that only drives the MERGE (it is kept in changelog tables).
OP_COLUMN = "_cdc_op"


#: Changelog tables are partitioned by this column (the window id), so re-writing a window
#: replaces exactly its partition.
CHANGELOG_WINDOW_COLUMN = "_cdc_window_id"


def final_version(step: ApplyWindow, table_schemas: Sequence[SchemaVersionInfo]) -> SchemaVersionInfo | None:
    """The table's schema version at the end of the window: the one its last schema event leaves, or
    the one of its last staged change."""
    by_version = {info.schema_version: info for info in table_schemas}
    candidates: list[tuple[int, int | None]] = [(event.seq, event.schema_version) for event in step.events]
    candidates += [(staged.last_seq, staged.schema_version) for staged in step.files if staged.rows]
    candidates += [(-1, staged.schema_version) for staged in step.files]
    for _, version in sorted(candidates, key=lambda item: item[0], reverse=True):
        if version is not None and version in by_version:
            return by_version[version]
    return None


def merge_statement(
    target: str,
    view: str,
    on: str,
    columns: Sequence[str],
    updates: str,
    insert_condition: str = "",
    untouched: str = "",
) -> str:
    """The apply's MERGE of the staged rows of ``view`` (``s``, one per key) into ``target`` (``t``) on
    ``on``: a staged delete deletes the matched row, any other change sets ``updates`` on it, or inserts
    ``columns`` where the key is new (and ``insert_condition``, `` AND ...``, holds); ``untouched`` is the
    clause for target rows no staged row matches (`` WHEN NOT MATCHED BY SOURCE ...``)."""
    names = ", ".join(quote(c) for c in columns)
    values = ", ".join(f"s.{quote(c)}" for c in columns)
    return (
        f"MERGE INTO {target} t USING {view} s ON {on} "
        f"WHEN MATCHED AND s.{OP_COLUMN} = 'd' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {updates} "
        f"WHEN NOT MATCHED AND s.{OP_COLUMN} <> 'd'{insert_condition} THEN INSERT ({names}) VALUES ({values})"
        + untouched
    )


def merge_update_value(column: str, partial: bool, backfill: str | None = None) -> str:
    """The MERGE's new value of a target column: the staged one, or, where a partial row image lacks the
    column, the target's own, or ``backfill`` (an expression) for a column the window added: the row
    existed when it was added and no image since has set it, so it holds the value MySQL gave it then."""
    staged = f"s.{quote(column)}"
    if not partial:
        return staged
    absent = f"s.{PARTIAL_COLUMN} IS NOT NULL AND map_contains_key(s.{PARTIAL_COLUMN}, {sql_string(column)})"
    return f"CASE WHEN {absent} THEN {backfill or f't.{quote(column)}'} ELSE {staged} END"


def backfill_expressions(
    backfills: Sequence[ColumnBackfill], types: dict[str, str], args: dict[str, Any]
) -> dict[str, str]:
    """The value of each column the window added, as a typed MERGE expression, by the target column's
    lower-case name (``types``: its Spark type by that name); the values go into ``args``."""
    values = {}
    for index, backfill in enumerate(backfills):
        args[f"cdc_backfill_{index}"] = backfill.value
        column_type = types.get(backfill.column.lower(), "string")
        values[backfill.column.lower()] = f"CAST(:cdc_backfill_{index} AS {column_type})"
    return values


def json_document_columns(final: SchemaVersionInfo | None, columns: Sequence[str]) -> list[str]:
    """The staged columns that hold MySQL JSON documents."""
    present = set(columns)
    return [
        str(column["name"])
        for column in (final.columns if final is not None else ())
        if str(column.get("mysql_type", "")).startswith("json") and column["name"] in present
    ]


def describe_event(event: SchemaEvent) -> str:
    """A schema event as the report lists it."""
    what = {
        "column_added": f"column {event.name!r} added",
        "column_dropped": f"column {event.name!r} dropped",
        "column_renamed": f"column {event.old_name!r} renamed to {event.name!r}",
        "column_retyped": f"column {event.name!r} retyped",
        "truncated": "truncated",
        "reset": "dropped or created again",
        "rebuild": f"needs a rebuild: {event.reason}",
    }[event.kind]
    return f"{what} (GTID {event.gtid})" if event.gtid else what
