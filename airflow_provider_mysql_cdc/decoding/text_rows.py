"""Text-protocol rows (a snapshot's ``SELECT`` over PyMySQL) -> exactly the values binlog capture stages.

A snapshot stages a table's rows (``_cdc_op = 'r'``) in the same Parquet format as the binlog
windows, so the two must agree on every value:

* :func:`select_expressions` gives, per column, the ``SELECT`` expression whose PyMySQL value
  :class:`SnapshotRowConverter` turns into the value capture stages: temporal values as text (zero
  and partial dates survive), text, ENUM and SET as the column's bytes decoded with the binlog
  path's own decoder, geometry and VECTOR as their stored bytes, and so on.
* The connection must run :data:`SNAPSHOT_SESSION_STATEMENTS` first (``time_zone`` UTC).
* :class:`SnapshotRowConverter` converts PyMySQL's rows value by value (and a column at a time,
  :meth:`SnapshotRowConverter.convert_columns`); :func:`text_value_converter` is its per-column
  function, which the Arrow path
  (:class:`~airflow_provider_mysql_cdc.decoding.text_arrow.ArrowBatchDecoder`) uses for what Arrow
  does not parse the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from airflow_provider_mysql_cdc.core.chunks import quote_identifier
from airflow_provider_mysql_cdc.core.types import DECIMAL128_MAX_PRECISION, TEXT_TYPES, ColumnSpec
from airflow_provider_mysql_cdc.decoding.charsets import text_decoder
from airflow_provider_mysql_cdc.decoding.converters import value_converter
from airflow_provider_mysql_cdc.decoding.values import InvalidValue
from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = [
    "SNAPSHOT_SESSION_STATEMENTS",
    "SnapshotRowConverter",
    "select_expressions",
    "text_value_converter",
]

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

# -- SELECT expressions ---------------------------------------------------------------------------


def _expression_template(spec: ColumnSpec) -> str:
    kind = spec.mysql_type
    if kind in TEXT_TYPES or kind in ("enum", "set", "vector"):
        # The stored bytes: decoded below with the binlog path's decoder (PyMySQL would decode with the
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


def text_value_converter(spec: ColumnSpec) -> Callable[[Any], Any] | None:
    """The function that turns a fetched value (never None) into the staged value; None: as is."""
    kind = spec.mysql_type
    if kind in TEXT_TYPES or kind in ("enum", "set"):
        return text_decoder(spec.charset or "utf8mb4", spec.name, key=spec.primary_key and kind in TEXT_TYPES)
    if kind == "json":
        return text_decoder("utf8mb4", spec.name)
    if kind in _TEMPORAL_CONVERTERS:
        return _TEMPORAL_CONVERTERS[kind]
    if kind in ("bit", "geometry", "vector"):
        return value_converter(spec)  # the same bytes as the binlog's: the binlog path's conversion
    # integers, YEAR, FLOAT (as DOUBLE), DOUBLE, DECIMAL (Decimal, or the text beyond 38 digits),
    # binary strings (BINARY(n) comes with its trailing 0x00)
    return None


class SnapshotRowConverter:
    """Converts rows fetched with :func:`select_expressions` into staged values.

    ``convert(row)`` returns the table's values in column order followed by the
    ``_cdc_invalid_values`` map (or None), like
    :class:`~airflow_provider_mysql_cdc.decoding.binlog_rows.RowConverter`: a staged snapshot row is
    ``(*converter.convert(row), "r", None, seq, None)`` under
    :func:`~airflow_provider_mysql_cdc.core.types.arrow_schema`.
    """

    def __init__(self, specs: Iterable[ColumnSpec]) -> None:
        self.specs = tuple(specs)
        self._plan = tuple(
            (spec.name, text_value_converter(spec), spec.mysql_type in _TEMPORAL_CONVERTERS) for spec in self.specs
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
