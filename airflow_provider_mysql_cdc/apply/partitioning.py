"""The partitioning of a target table, as the apply's ``partitioning`` setting asks for it.

A pipeline's setting maps ``db.table`` patterns (fnmatch, as ``history``) to Iceberg partition fields
written as in Spark SQL's ``PARTITIONED BY``: a column (identity), ``bucket(N, column)``,
``truncate(W, column)``, ``years(column)``, ``months(column)``, ``days(column)`` or ``hours(column)``.
A target the apply creates, or replaces in one commit (a table re-created in MySQL, a re-loaded
snapshot), gets those fields; an existing target whose fields differ is evolved to them (``ALTER TABLE
... DROP/ADD PARTITION FIELD``: metadata only, files already written keep their layout). A table no
pattern names keeps whatever partitioning its target has (none when the apply creates it).

Partitioning never changes what a table holds: the MERGE and its key filter are the same, Iceberg
routes each row to its partition. Pure logic; :mod:`.table_applier` runs the statements.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.errors import ConfigurationError

__all__ = [
    "PartitionField",
    "configured_fields",
    "evolution_statements",
    "field_of_iceberg",
    "fields_that_fit",
    "parse_field",
    "parse_partitioning",
    "partition_clause",
    "require_columns",
]

#: The forms a field is written in, for messages.
FORMS = "a column, bucket(N, column), truncate(W, column), years(column), months(column), days(column), hours(column)"
_CALL = re.compile(r"(?P<function>[A-Za-z]+)\s*\((?P<arguments>.*)\)", re.DOTALL)
_WIDTH = re.compile(r"(?P<width>\d+)\s*,(?P<column>.*)", re.DOTALL)
_QUOTED = re.compile(r"`((?:[^`]|``)+)`")
_BARE = re.compile(r"[^\s`(),]+")
_WIDTH_FUNCTIONS = ("bucket", "truncate")
_TIME_FUNCTIONS = ("years", "months", "days", "hours")
#: Iceberg's transform names (``Transform.toString()``) -> the Spark SQL function.
_ICEBERG_TIME = {"year": "years", "month": "months", "day": "days", "hour": "hours"}
#: Spark types no partition field takes (Iceberg partitions by primitive values only).
_NESTED = {"array", "map", "struct"}
#: Spark types (``DataType.simpleString()``, without a decimal's precision) each transform takes.
_INTEGRAL = {"tinyint", "smallint", "int", "bigint"}
_TYPES_OF = {
    "bucket": _INTEGRAL | {"decimal", "date", "timestamp", "timestamp_ntz", "string", "binary"},
    "truncate": _INTEGRAL | {"decimal", "string", "binary"},
    "years": {"date", "timestamp", "timestamp_ntz"},
    "months": {"date", "timestamp", "timestamp_ntz"},
    "days": {"date", "timestamp", "timestamp_ntz"},
    "hours": {"timestamp", "timestamp_ntz"},
}


@dataclass(frozen=True)
class PartitionField:
    """One partition field: ``transform`` is ``identity``, ``bucket``, ``truncate``, ``years``,
    ``months``, ``days`` or ``hours``; ``width`` is a bucket count or truncation width."""

    transform: str
    column: str
    width: int | None = None

    def sql(self) -> str:
        """The field as Spark SQL writes it (``PARTITIONED BY``, ``ADD PARTITION FIELD``)."""
        if self.transform == "identity":
            return quote(self.column)
        if self.width is not None:
            return f"{self.transform}({self.width}, {quote(self.column)})"
        return f"{self.transform}({quote(self.column)})"


def parse_field(text: str) -> PartitionField:
    """The field ``text`` names; :class:`ConfigurationError` for anything else."""
    field = _parse_field(text.strip()) if isinstance(text, str) else None
    if field is None:
        raise ConfigurationError(f"partition field {text!r} is not one of: {FORMS}")
    return field


def _parse_field(text: str) -> PartitionField | None:
    call = _CALL.fullmatch(text)
    if call is None:
        column = _column(text)
        return None if column is None else PartitionField("identity", column)
    function, arguments = call.group("function").lower(), call.group("arguments").strip()
    if function in _TIME_FUNCTIONS:
        column = _column(arguments)
        return None if column is None else PartitionField(function, column)
    width = _WIDTH.fullmatch(arguments)
    if function not in _WIDTH_FUNCTIONS or width is None or int(width.group("width")) < 1:
        return None
    column = _column(width.group("column").strip())
    return None if column is None else PartitionField(function, column, int(width.group("width")))


def _column(text: str) -> str | None:
    """A column name, bare or in backquotes (a doubled backquote is one), or None."""
    quoted = _QUOTED.fullmatch(text)
    if quoted is not None:
        return quoted.group(1).replace("``", "`")
    return text if _BARE.fullmatch(text) else None


def parse_partitioning(setting: Mapping[str, Sequence[str]] | None) -> dict[str, tuple[PartitionField, ...]]:
    """The setting, each pattern's fields parsed (a pattern may list none: unpartitioned)."""
    parsed: dict[str, tuple[PartitionField, ...]] = {}
    for pattern, fields in dict(setting or {}).items():
        if not isinstance(pattern, str) or "." not in pattern:
            raise ConfigurationError(f"partitioning pattern {pattern!r} is not a 'db.table' pattern")
        if isinstance(fields, str) or not isinstance(fields, Sequence):
            raise ConfigurationError(
                f"partitioning of {pattern!r} must be a list of partition fields ({FORMS}), not {fields!r}"
            )
        parsed[pattern] = tuple(parse_field(text) for text in fields)
        columns = [(f.transform, f.column) for f in parsed[pattern]]
        if len(set(columns)) != len(columns):
            raise ConfigurationError(f"partitioning of {pattern!r} names the same field twice: {list(fields)}")
    return parsed


def configured_fields(
    setting: Mapping[str, Sequence[str]] | None, table_name: str
) -> tuple[PartitionField, ...] | None:
    """The fields the setting gives ``table_name`` (``db.table``), or None when no pattern names it;
    :class:`ConfigurationError` when two patterns with different fields do."""
    matching = {
        pattern: fields
        for pattern, fields in parse_partitioning(setting).items()
        if fnmatch.fnmatchcase(table_name, pattern)
    }
    if len(set(matching.values())) > 1:
        raise ConfigurationError(
            f"{table_name} matches partitioning patterns {sorted(matching)} with different fields; "
            "make the patterns name it once"
        )
    return next(iter(matching.values()), None)


def require_columns(table_name: str, fields: Sequence[PartitionField], column_types: Mapping[str, str]) -> None:
    """Refuse fields on a column the target does not have, or of a type their transform does not take
    (``column_types``: the target's columns and Spark types)."""
    for field in fields:
        refusal = _refusal(field, column_types)
        if refusal is not None:
            raise ConfigurationError(
                f"the partitioning of {table_name}{refusal}. Correct the apply's partitioning setting"
            )


def fields_that_fit(fields: Sequence[PartitionField], column_types: Mapping[str, str]) -> tuple[PartitionField, ...]:
    """The fields :func:`require_columns` accepts for ``column_types`` (a re-created table keeps those of
    its old partitioning that still fit)."""
    return tuple(field for field in fields if _refusal(field, column_types) is None)


def _refusal(field: PartitionField, column_types: Mapping[str, str]) -> str | None:
    """Why the target cannot take ``field`` (the end of :func:`require_columns`' message), or None."""
    if field.column not in column_types:
        return f" names column {field.column!r}, which the table does not have (its columns: {', '.join(column_types)})"
    type_name = re.split(r"[(<]", column_types[field.column], maxsplit=1)[0]
    accepted = _TYPES_OF.get(field.transform)
    if (accepted is not None and type_name not in accepted) or type_name in _NESTED:
        wanted = ", ".join(sorted(accepted)) if accepted is not None else "other than array, map and struct"
        return f": {field.sql()} needs a column of type {wanted}; {field.column!r} is {column_types[field.column]}"
    return None


def field_of_iceberg(transform: str, column: str) -> PartitionField | None:
    """The field of an Iceberg partition field (``Transform.toString()`` such as ``bucket[16]``, its
    source column's name); None for a dropped (``void``) field."""
    if transform == "void":
        return None
    if transform == "identity":
        return PartitionField("identity", column)
    if transform in _ICEBERG_TIME:
        return PartitionField(_ICEBERG_TIME[transform], column)
    match = re.fullmatch(r"(bucket|truncate)\[(\d+)\]", transform)
    if match is None:
        raise ConfigurationError(f"the target's partition field {transform}({column}) has no Spark SQL form here")
    return PartitionField(match.group(1), column, int(match.group(2)))


def partition_clause(fields: Sequence[PartitionField]) -> str:
    """`` PARTITIONED BY (...)`` of ``CREATE TABLE``; empty for no field."""
    return f" PARTITIONED BY ({', '.join(f.sql() for f in fields)})" if fields else ""


def evolution_statements(target: str, current: Sequence[PartitionField], wanted: Sequence[PartitionField]) -> list[str]:
    """The ``ALTER TABLE`` statements that take ``target`` from ``current`` to ``wanted`` fields
    (drops first; none when they are the same set)."""
    drops = [f"ALTER TABLE {target} DROP PARTITION FIELD {f.sql()}" for f in current if f not in wanted]
    adds = [f"ALTER TABLE {target} ADD PARTITION FIELD {f.sql()}" for f in wanted if f not in current]
    return drops + adds
