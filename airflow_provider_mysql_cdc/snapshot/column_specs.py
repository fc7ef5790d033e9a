"""A table's :class:`~airflow_provider_mysql_cdc.core.types.ColumnSpec` tuple read from ``information_schema``.

:func:`column_specs_from_information_schema` builds the specs such that they equal what
:func:`~airflow_provider_mysql_cdc.decoding.table_map.column_specs_from_table_map` builds from a
binlog table map of the same table (same Arrow schema, same ``schema_fingerprint``, so snapshot and
binlog files share schema versions). The binlog's view is matched where ``information_schema``
differs: lengths in bytes, ``utf8mb3`` charset names (resolved from the collation id exactly as the
binlog path does), every spatial type as ``geometry``, ``BOOL`` as ``tinyint``, invisible columns
included, promoted ``UNIQUE NOT NULL`` keys as primary key.

One thing ``information_schema`` cannot tell: MySQL keeps ``COLUMN_TYPE`` in ``utf8mb3``, so an
ENUM/SET label character outside the Basic Multilingual Plane (an emoji in a ``utf8mb4`` ENUM) reads
as ``?`` there while the binlog has the real character (``SHOW CREATE TABLE`` has the same loss and
the data dictionary table holding the labels is not readable). Such a spec's ``enum_values`` /
``set_values`` then differ from the binlog's; nothing staged depends on them: snapshot values are
fetched as the labels' text, and ``schema_fingerprint`` and ``ColumnSpec.describe`` do not include
labels.

No Airflow import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.core.types import BINARY_TYPES, INTEGER_TYPES, TEXT_TYPES, ColumnSpec
from airflow_provider_mysql_cdc.decoding.charsets import charset_of_collation_id, text_decoder
from airflow_provider_mysql_cdc.errors import TerminalCdcError
from airflow_provider_mysql_cdc.mysql.client import query

if TYPE_CHECKING:
    from pymysql.connections import Connection

    from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

#: ``information_schema.COLUMNS.DATA_TYPE`` of spatial columns; the binlog calls them all ``geometry``.
_SPATIAL_TYPES = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    }
)
_SIMPLE_TYPES = frozenset({"float", "double", "year", "date", "json"})
_FSP_TYPES = frozenset({"datetime", "timestamp", "time"})
_STRING_TYPES = frozenset({"char", "varchar", "binary", "varbinary"})

_COLUMNS_SQL = (
    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.IS_NULLABLE, c.COLUMN_KEY, c.NUMERIC_PRECISION, "
    "c.NUMERIC_SCALE, c.DATETIME_PRECISION, c.CHARACTER_OCTET_LENGTH, co.ID "
    "FROM information_schema.COLUMNS AS c "
    "LEFT JOIN information_schema.COLLATIONS AS co ON co.COLLATION_NAME = c.COLLATION_NAME "
    "WHERE c.TABLE_SCHEMA = {database} AND c.TABLE_NAME = {table} "
    "ORDER BY c.ORDINAL_POSITION"
)

# -- column specs ---------------------------------------------------------------------------------

#: One quoted ENUM/SET label of ``COLUMN_TYPE`` (MySQL's ``append_unescaped``: ``''`` for a quote,
#: ``\\`` ``\0`` ``\n`` ``\r`` escaped, everything else as is).
_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'", re.DOTALL)
_LABEL_ESCAPE = re.compile(r"''|\\(.)", re.DOTALL)
_UNESCAPES = {"0": "\0", "n": "\n", "r": "\r"}
_UNSIGNED = re.compile(r"\bunsigned\b")
_VECTOR_DIMENSIONS = re.compile(r"\((\d+)\)")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def _labels(column_type: str) -> tuple[str, ...]:
    """ENUM labels / SET members from ``enum('a','b''c')`` as ``COLUMN_TYPE`` prints them."""
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(
        _LABEL_ESCAPE.sub(
            lambda m: "'" if m.group(0) == "''" else _UNESCAPES.get(m.group(1), m.group(1)), match.group(1)
        )
        for match in _LABEL.finditer(inner)
    )


def _spec_from_row(row: Sequence[Any], where: str) -> ColumnSpec:
    name, data_type, column_type, is_nullable, column_key, precision, scale, fsp, octets, collation_id = row
    name = _text(name)
    kind = _text(data_type).lower()
    column_type = _text(column_type).lower() if kind not in ("enum", "set") else _text(column_type)
    where = f"{where}.{name}"
    common: dict[str, Any] = {
        "name": name,
        "nullable": _text(is_nullable).upper() == "YES",
        "primary_key": _text(column_key).upper() == "PRI",
    }
    if kind in INTEGER_TYPES:
        return ColumnSpec(mysql_type=kind, unsigned=bool(_UNSIGNED.search(column_type)), **common)
    if kind in _SIMPLE_TYPES:
        return ColumnSpec(mysql_type=kind, **common)
    if kind in _SPATIAL_TYPES:
        return ColumnSpec(mysql_type="geometry", **common)
    if kind in _FSP_TYPES:
        return ColumnSpec(mysql_type=kind, fsp=int(fsp or 0), **common)
    if kind == "decimal":
        return ColumnSpec(mysql_type="decimal", precision=int(precision), scale=int(scale), **common)
    if kind == "bit":
        return ColumnSpec(mysql_type="bit", bits=int(precision), **common)
    if kind == "vector":
        dimensions = _VECTOR_DIMENSIONS.search(column_type)
        return ColumnSpec(mysql_type="vector", dimensions=int(dimensions.group(1)) if dimensions else None, **common)
    if kind in BINARY_TYPES:
        return ColumnSpec(
            mysql_type=kind, charset="binary", max_length=int(octets) if kind in _STRING_TYPES else None, **common
        )
    charset = charset_of_collation_id(collation_id)
    text_decoder(charset, where)  # as the binlog path: fail on a charset Python cannot decode
    if kind == "enum":
        return ColumnSpec(mysql_type="enum", charset=charset, enum_values=_labels(column_type), **common)
    if kind == "set":
        return ColumnSpec(mysql_type="set", charset=charset, set_values=_labels(column_type), **common)
    if kind in TEXT_TYPES:
        return ColumnSpec(
            mysql_type=kind, charset=charset, max_length=int(octets) if kind in _STRING_TYPES else None, **common
        )
    raise TerminalCdcError(f"{where}: MySQL column type {kind!r} is not supported")


def column_specs_from_information_schema(
    connection: Connection[Any], config: MySqlConnectionConfig, database: str, table: str
) -> tuple[ColumnSpec, ...]:
    """The specs of ``database.table``'s columns in table order (invisible columns included), equal
    to what capture builds from the table's binlog table map (but see the module docstring on ENUM/SET
    labels outside the BMP). Raises :class:`TerminalCdcError` when the table is not visible."""
    sql = _COLUMNS_SQL.format(database=connection.escape(database), table=connection.escape(table))
    rows = query(connection, config, sql)
    where = f"{database}.{table}"
    if not rows:
        raise TerminalCdcError(f"{where}: no such table, or the account may not see its columns")
    return tuple(_spec_from_row(row, where) for row in rows)
