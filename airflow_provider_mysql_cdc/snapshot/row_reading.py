"""Snapshot rows read with ``SELECT`` over PyMySQL -> exactly the values binlog capture stages.

A snapshot stages a table's rows (``_cdc_op = 'r'``) in the same Parquet format as the binlog
windows, so the two must agree on everything:

* :func:`column_specs_from_information_schema` builds the table's
  :class:`~airflow_provider_mysql_cdc.core.types.ColumnSpec` tuple from ``information_schema`` such
  that it equals what :func:`~airflow_provider_mysql_cdc.capture.row_decoding.column_specs_from_table_map`
  builds from a binlog table map of the same table (same Arrow schema, same ``schema_fingerprint``,
  so snapshot and binlog files share schema versions). The binlog's view is matched where
  ``information_schema`` differs: lengths in bytes, ``utf8mb3`` charset names (resolved from the
  collation id exactly as capture does), every spatial type as ``geometry``, ``BOOL`` as
  ``tinyint``, invisible columns included, promoted ``UNIQUE NOT NULL`` keys as primary key.
* :func:`select_expressions` gives, per column, the ``SELECT`` expression whose PyMySQL value
  :class:`SnapshotRowConverter` turns into the value capture stages: temporal values as text (zero
  and partial dates survive), text, ENUM and SET as the column's bytes decoded with capture's own
  decoder, geometry and VECTOR as their stored bytes, and so on (see :func:`select_expressions`).
* The snapshot connection must run :data:`SNAPSHOT_SESSION_STATEMENTS` first (``time_zone`` UTC).

The snapshot engine reads the rows with :mod:`~airflow_provider_mysql_cdc.snapshot.fast_reader`
(raw row packets into Arrow); :class:`SnapshotRowConverter` on PyMySQL's rows is the reference it
is tested against, and its per-value path for what Arrow does not parse the same way.

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

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from pymysqlreplication.row_event import find_charset

from airflow_provider_mysql_cdc.capture.row_decoding import InvalidValue, _charset_of, _converter, _text_decoder
from airflow_provider_mysql_cdc.core.chunks import quote_identifier
from airflow_provider_mysql_cdc.core.types import (
    BINARY_TYPES,
    DECIMAL128_MAX_PRECISION,
    INTEGER_TYPES,
    TEXT_TYPES,
    ColumnSpec,
)
from airflow_provider_mysql_cdc.errors import TerminalCdcError
from airflow_provider_mysql_cdc.mysql.client import query

if TYPE_CHECKING:
    from pymysql.connections import Connection

    from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

#: Statements the snapshot connection must run before its SELECTs:
#:
#: * ``time_zone = '+00:00'``: TIMESTAMP values are fetched as text, which MySQL prints in the
#:   session time zone; in UTC the text is the stored instant (no DST gaps or folds).
#: * ``sql_mode = ''``: no ``PAD_CHAR_TO_FULL_LENGTH`` (CHAR values without trailing spaces, as the
#:   binlog has them) and no ``ANSI_QUOTES`` / ``NO_BACKSLASH_ESCAPES`` surprises in the expressions.
SNAPSHOT_SESSION_STATEMENTS: tuple[str, ...] = (
    "SET SESSION time_zone = '+00:00'",
    "SET SESSION sql_mode = ''",
)

_UTC = dt.timezone.utc

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


def _charset(collation_id: Any) -> str:
    """The charset capture derives from a column's collation id (python-mysql-replication's table,
    then :func:`~airflow_provider_mysql_cdc.capture.row_decoding._charset_of`)."""
    collation_name = None if collation_id is None else find_charset(str(int(collation_id)))[1]
    return _charset_of(SimpleNamespace(collation_name=collation_name))


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
    charset = _charset(collation_id)
    _text_decoder(charset, where)  # as capture: fail on a charset Python cannot decode
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


# -- SELECT expressions ---------------------------------------------------------------------------


def _expression_template(spec: ColumnSpec) -> str:
    kind = spec.mysql_type
    if kind in TEXT_TYPES or kind in ("enum", "set", "vector"):
        # The stored bytes: decoded below with capture's decoder (PyMySQL would decode with the
        # connection charset, after MySQL's own conversion). VECTOR has no PyMySQL decoder.
        return "CAST({c} AS BINARY)"
    if kind in ("date", "datetime", "timestamp", "time"):
        return "CAST({c} AS CHAR)"  # zero/partial dates and TIME beyond 24 h survive as text
    if kind == "json":
        return "CAST(CAST({c} AS CHAR CHARACTER SET utf8mb4) AS BINARY)"  # MySQL's text, as UTF-8 bytes
    if kind == "float":
        return "CAST({c} AS DOUBLE)"  # exact; the text of a FLOAT is rounded to 6 digits
    if kind == "decimal" and (spec.precision or 0) > DECIMAL128_MAX_PRECISION:
        return "CAST({c} AS CHAR)"  # the staged text itself
    # integers, YEAR, DOUBLE, DECIMAL <= 38 (Decimal), BIT and binary strings (bytes), geometry
    # (MySQL's SRID + WKB bytes, as in the binlog)
    return "{c}"


def select_expressions(specs: Iterable[ColumnSpec]) -> list[str]:
    """The ``SELECT`` expression of each column, in order, for :class:`SnapshotRowConverter`.

    ``CAST(c AS BINARY)`` for text, ENUM, SET and VECTOR; ``CAST(c AS CHAR)`` for DATE, DATETIME,
    TIMESTAMP (UTC session, :data:`SNAPSHOT_SESSION_STATEMENTS`), TIME and DECIMAL wider than 38
    digits; JSON as its ``CAST(j AS CHAR)`` text in UTF-8 bytes; FLOAT widened to DOUBLE; the
    column itself otherwise. Column names are backquoted.
    """
    return [_expression_template(spec).format(c=quote_identifier(spec.name)) for spec in specs]


# -- values ---------------------------------------------------------------------------------------


def _date(text: str) -> Any:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:  # 0000-00-00, 2024-00-15, 2024-02-30, year 0: as capture, NULL + text
        return InvalidValue(text)


def _datetime(text: str) -> Any:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return InvalidValue(text)


def _timestamp(text: str) -> Any:
    try:
        return dt.datetime.fromisoformat(text).replace(tzinfo=_UTC)
    except ValueError:  # the zero TIMESTAMP
        return InvalidValue(text)


def _time(text: str) -> dt.timedelta:
    negative = text.startswith("-")
    hours, minutes, rest = (text[1:] if negative else text).split(":")
    seconds, _, fraction = rest.partition(".")
    value = dt.timedelta(
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds),
        microseconds=int(fraction.ljust(6, "0")) if fraction else 0,
    )
    return -value if negative else value


_TEMPORAL_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "date": _date,
    "datetime": _datetime,
    "timestamp": _timestamp,
    "time": _time,
}


def _value_converter(spec: ColumnSpec) -> Callable[[Any], Any] | None:
    """The function that turns a fetched value (never None) into the staged value; None: as is."""
    kind = spec.mysql_type
    if kind in TEXT_TYPES or kind in ("enum", "set"):
        return _text_decoder(spec.charset or "utf8mb4", spec.name)
    if kind == "json":
        return _text_decoder("utf8mb4", spec.name)
    if kind in _TEMPORAL_CONVERTERS:
        return _TEMPORAL_CONVERTERS[kind]
    if kind in ("bit", "geometry", "vector"):
        return _converter(spec)  # the same bytes as the binlog's: capture's own conversion
    # integers, YEAR, FLOAT (as DOUBLE), DOUBLE, DECIMAL (Decimal, or the text beyond 38 digits),
    # binary strings (BINARY(n) comes with its trailing 0x00)
    return None


class SnapshotRowConverter:
    """Converts rows fetched with :func:`select_expressions` into staged values.

    ``convert(row)`` returns the table's values in column order followed by the
    ``_cdc_invalid_values`` map (or None), like
    :class:`~airflow_provider_mysql_cdc.capture.row_decoding.RowConverter`: a staged snapshot row is
    ``(*converter.convert(row), "r", None, seq, None)`` under
    :func:`~airflow_provider_mysql_cdc.core.types.arrow_schema`.
    """

    def __init__(self, specs: Iterable[ColumnSpec]) -> None:
        self.specs = tuple(specs)
        self._plan = tuple(
            (spec.name, _value_converter(spec), spec.mysql_type in _TEMPORAL_CONVERTERS) for spec in self.specs
        )

    def convert(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """One fetched row (values in the order of :func:`select_expressions`)."""
        if len(row) != len(self._plan):
            raise TerminalCdcError(f"row has {len(row)} columns, the table {len(self._plan)}")
        out: list[Any] = []
        invalid: dict[str, str] | None = None
        for (name, convert, may_be_invalid), value in zip(self._plan, row, strict=True):
            if value is None or convert is None:
                out.append(value)
            elif may_be_invalid:
                staged = convert(value)
                if type(staged) is InvalidValue:  # zero/partial date: NULL, its text in the map
                    invalid = invalid or {}
                    invalid[name] = str(staged)
                    staged = None
                out.append(staged)
            else:
                out.append(convert(value))
        out.append(invalid)
        return tuple(out)

    def convert_columns(self, rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
        """A batch of fetched rows as staged columns: the table's columns then ``_cdc_invalid_values``;
        the same values as :meth:`convert` row by row, computed a column at a time."""
        if not rows:
            return [() for _ in range(len(self._plan) + 1)]
        if len(rows[0]) != len(self._plan):
            raise TerminalCdcError(f"row has {len(rows[0])} columns, the table {len(self._plan)}")
        invalid: list[dict[str, str] | None] = [None] * len(rows)
        out: list[Sequence[Any]] = []
        for (name, convert, may_be_invalid), fetched in zip(self._plan, zip(*rows, strict=True), strict=True):
            if convert is None:
                out.append(fetched)
                continue
            staged = [None if value is None else convert(value) for value in fetched]
            if may_be_invalid:
                for index, value in enumerate(staged):
                    if type(value) is InvalidValue:  # zero/partial date: NULL, its text in the map
                        invalid[index] = {**(invalid[index] or {}), name: str(value)}
                        staged[index] = None
            out.append(staged)
        out.append(invalid)
        return out
