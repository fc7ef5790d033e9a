"""Tracked table schemas (pure): columns with stable identities, resolved definitions.

See :mod:`~airflow_provider_mysql_cdc.core.table_schema` (which re-exports :class:`TrackedColumn` and
:class:`TrackedTable`) for what the identities mean and how statements change them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysql_cdc.core.ddl_charsets import binary_collation, charset_of_collation, resolve_charset
from airflow_provider_mysql_cdc.core.ddl_columns import text_type_for, uses_charset
from airflow_provider_mysql_cdc.core.ddl_statements import ColumnDefinition, DefaultValue, GeneratedColumn, TableRef
from airflow_provider_mysql_cdc.errors import ModelMismatch


@dataclass(frozen=True)
class TrackedColumn:
    """A column and its identity within its table."""

    column_id: int
    definition: ColumnDefinition

    @property
    def name(self) -> str:
        """The column's current name."""
        return self.definition.name


@dataclass(frozen=True)
class TrackedTable:
    """A table's tracked schema: columns in table order with stable ids, primary key, default charset."""

    database: str
    table: str
    columns: tuple[TrackedColumn, ...]
    primary_key: tuple[str, ...]
    next_column_id: int
    default_charset: str | None = None
    default_collation: str | None = None

    @property
    def ref(self) -> TableRef:
        """The table's name."""
        return TableRef(self.database, self.table)

    def column(self, name: str) -> TrackedColumn | None:
        """The column called ``name`` (MySQL column names are case-insensitive)."""
        lowered = name.lower()
        return next((column for column in self.columns if column.name.lower() == lowered), None)

    def column_by_id(self, column_id: int) -> TrackedColumn | None:
        """The column with identity ``column_id``."""
        return next((column for column in self.columns if column.column_id == column_id), None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (deterministic: the same schema gives the same dict)."""
        return {
            "database": self.database,
            "table": self.table,
            "columns": [{"column_id": c.column_id, **_definition_to_json(c.definition)} for c in self.columns],
            "primary_key": list(self.primary_key),
            "next_column_id": self.next_column_id,
            "default_charset": self.default_charset,
            "default_collation": self.default_collation,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrackedTable:
        """The inverse of :meth:`to_json`."""
        columns = tuple(
            TrackedColumn(
                int(item["column_id"]), _definition_from_json({k: v for k, v in item.items() if k != "column_id"})
            )
            for item in data["columns"]
        )
        return cls(
            database=data["database"],
            table=data["table"],
            columns=columns,
            primary_key=tuple(data["primary_key"]),
            next_column_id=int(data["next_column_id"]),
            default_charset=data.get("default_charset"),
            default_collation=data.get("default_collation"),
        )


def _definition_to_json(definition: ColumnDefinition) -> dict[str, Any]:
    data = dataclasses.asdict(definition)
    for key in ("enum_values", "set_values"):
        data[key] = list(data[key])
    return data


def _definition_from_json(data: Mapping[str, Any]) -> ColumnDefinition:
    values = dict(data)
    values["enum_values"] = tuple(values.get("enum_values", ()))
    values["set_values"] = tuple(values.get("set_values", ()))
    if values.get("default") is not None:
        values["default"] = DefaultValue(**values["default"])
    if values.get("generated") is not None:
        values["generated"] = GeneratedColumn(**values["generated"])
    return ColumnDefinition(**values)


# -- resolving definitions --------------------------------------------------------------------------


def resolve_column(definition: ColumnDefinition, charset: str | None, collation: str | None) -> ColumnDefinition:
    """``definition`` with its character set and collation resolved against the table defaults
    (``charset``/``collation``, None when unknown) and ``TEXT(n)`` made a concrete type."""
    if definition.auto_increment and definition.nullable:  # MySQL makes AUTO_INCREMENT columns NOT NULL
        definition = dataclasses.replace(definition, nullable=False)
    if not uses_charset(definition):
        return dataclasses.replace(definition, charset=None, collation=None, binary_collation=False)
    if charset is None and collation is not None:
        charset = charset_of_collation(collation)
    written_collation = None if definition.binary_collation else definition.collation
    resolved_charset, resolved_collation = resolve_charset(definition.charset, written_collation, (charset, collation))
    if definition.binary_collation and definition.collation is None:
        resolved_collation = binary_collation(resolved_charset) if resolved_charset else None
    resolved = dataclasses.replace(
        definition, charset=resolved_charset, collation=resolved_collation, binary_collation=False
    )
    if definition.type_text.startswith("text("):
        text_type = text_type_for(definition.length or 0, resolved_charset)
        if text_type is None:
            raise ModelMismatch(f"column {definition.name!r}: TEXT({definition.length}) in an unknown character set")
        resolved = dataclasses.replace(resolved, type_text=text_type, mysql_type=text_type, length=None)
    return resolved


def table_defaults(charset: str | None, collation: str | None) -> tuple[str | None, str | None]:
    """A table's (DEFAULT CHARSET, COLLATE) as MySQL completes them."""
    resolved_charset, resolved_collation = resolve_charset(charset, collation, (None, None))
    return resolved_charset, resolved_collation


def build_table(
    ref: TableRef,
    definitions: tuple[ColumnDefinition, ...],
    primary_key: tuple[str, ...],
    charset: str | None,
    collation: str | None,
) -> TrackedTable:
    """A new table (ids 1..n) from a CREATE TABLE's columns, key and table defaults."""
    charset, collation = table_defaults(charset, collation)
    columns = tuple(
        TrackedColumn(index, resolve_column(definition, charset, collation))
        for index, definition in enumerate(definitions, start=1)
    )
    key = primary_key or tuple(column.name for column in columns if column.definition.primary_key)
    table = TrackedTable(ref.database, ref.table, columns, (), len(columns) + 1, charset, collation)
    return with_key(table, key)


def with_key(table: TrackedTable, key: tuple[str, ...]) -> TrackedTable:
    """``table`` with primary key ``key`` (names as the columns spell them). Key columns are made NOT NULL
    and, in a tracked table, a definition's ``primary_key`` says whether the column is in the key."""
    spelled = []
    for name in key:
        column = table.column(name)
        if column is None:
            raise ModelMismatch(f"{table.ref}: primary key column {name!r} does not exist")
        spelled.append(column.name)
    columns = []
    for column in table.columns:
        in_key = column.name in spelled
        definition = dataclasses.replace(
            column.definition, primary_key=in_key, nullable=column.definition.nullable and not in_key
        )
        columns.append(TrackedColumn(column.column_id, definition))
    return dataclasses.replace(table, columns=tuple(columns), primary_key=tuple(spelled))
