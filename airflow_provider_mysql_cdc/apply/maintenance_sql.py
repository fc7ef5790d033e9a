"""The ``CALL`` statements of Iceberg's Spark maintenance procedures, and how many snapshots an
expiration must keep. Pure: no Spark import (the job in :mod:`.table_maintenance` runs them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.core.lineage import identifier_parts

#: A procedure argument's value: a string, a number, a timestamp (UTC) or a string map.
ProcedureArgument = str | int | datetime | Mapping[str, str]


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _literal(value: ProcedureArgument) -> str:
    if isinstance(value, bool):
        raise TypeError("procedure arguments here are never booleans")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP {sql_string(value.strftime('%Y-%m-%d %H:%M:%S.%f'))}"
    if isinstance(value, Mapping):
        pairs = [f"{sql_string(key)}, {sql_string(str(item))}" for key, item in sorted(value.items())]
        return f"map({', '.join(pairs)})"
    return sql_string(value)


def procedure_call(catalog: str, procedure: str, arguments: Mapping[str, ProcedureArgument]) -> str:
    """``CALL `catalog`.system.<procedure>(name => value, ...)``; an empty map argument is left out."""
    named = [
        f"{name} => {_literal(value)}"
        for name, value in arguments.items()
        if not (isinstance(value, Mapping) and not value)
    ]
    return f"CALL {quote(catalog)}.system.{procedure}({', '.join(named)})"


def table_argument(target: str) -> str:
    """A target inside the catalog (``namespace.table``, parts plain or backquoted) as the procedures'
    ``table`` argument: each part in backquotes, so names with dots or other characters stay one part."""
    return ".".join(quote(part) for part in identifier_parts(target))


def rewrite_data_files(catalog: str, target: str, options: Mapping[str, str]) -> str:
    """Bin-pack the table's small data files (position deletes applied to the rows it rewrites)."""
    return procedure_call(catalog, "rewrite_data_files", {"table": table_argument(target), "options": options})


def rewrite_position_delete_files(catalog: str, target: str, options: Mapping[str, str]) -> str:
    """Compact the table's position delete files (dropping deletes of data files that are gone)."""
    return procedure_call(
        catalog, "rewrite_position_delete_files", {"table": table_argument(target), "options": options}
    )


def expire_snapshots(catalog: str, target: str, older_than: datetime, retain_last: int) -> str:
    """Expire snapshots older than ``older_than`` (UTC) except the ``retain_last`` newest ancestors."""
    arguments: dict[str, ProcedureArgument] = {
        "table": table_argument(target),
        "older_than": older_than,
        "retain_last": retain_last,
    }
    return procedure_call(catalog, "expire_snapshots", arguments)


def remove_orphan_files(catalog: str, target: str, older_than: datetime) -> str:
    """Delete files under the table's location that no snapshot references and older than ``older_than``."""
    return procedure_call(catalog, "remove_orphan_files", {"table": table_argument(target), "older_than": older_than})


def position_delete_rewrite_skipped(column_types: Sequence[str]) -> str:
    """Why ``rewrite_position_delete_files`` must not run on a table with these column types (Spark's
    ``simpleString``), or "" when it may. Iceberg 1.10 fails it with "Invalid partition field parent" on
    any table with a map or array column (apache/iceberg#15080), which every target has
    (``_cdc_invalid_values``); the data rewrite applies and drops those deletes instead."""
    if any("map<" in kind or "array<" in kind for kind in column_types):
        return (
            "rewrite_position_delete_files skipped: Iceberg 1.10 cannot run it on a table with a map or array "
            "column (apache/iceberg#15080); rewrite_data_files applied the deletes of the files it rewrote"
        )
    return ""


def snapshots_to_keep(apply_commit_flags: Sequence[bool], retain_last: int) -> int:
    """How many of the newest snapshots an expiration must keep (its ``retain_last``).

    ``apply_commit_flags``: for the current snapshot and then each ancestor (newest first), whether its
    summary records the apply's state. The apply reads the newest of those, walking back from the current
    snapshot over the commits without it (compactions), so every snapshot up to and including it is kept;
    a table without one keeps ``retain_last``.
    """
    for depth, is_apply_commit in enumerate(apply_commit_flags):
        if is_apply_commit:
            return max(retain_last, depth + 1)
    return retain_last
