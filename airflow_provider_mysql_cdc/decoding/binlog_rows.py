"""Binlog row events decoded value by value (python-mysql-replication's path, with our readers) and
converted into staged values.

Capture reads most row events with :mod:`~airflow_provider_mysql_cdc.decoding.compiled_rows`
(code generated per table version); this module is the reference that code is tested against, and
the path for the events it leaves to the library (partial JSON updates, images without every
column). Two steps, each for one reason:

* :func:`decoded_rows` is ``event.rows`` with our value decoding for the types the library gets
  wrong or lossy (:mod:`~airflow_provider_mysql_cdc.decoding.binlog_values`). It swaps the event's
  class for a subclass that overrides the library's per-value reading routine for the duration of
  the call, so no other user of the library sees a change.
* :class:`RowConverter` turns one decoded row dict into the staged values, in column order, then
  the ``_cdc_invalid_values`` map (see docs/type-map.md "Type map").

The table map the events refer to must have been parsed with the library fixes installed
(:func:`~airflow_provider_mysql_cdc.capture.binlog_library.install_library_fixes`, which
``BinlogReader.open()`` runs); :func:`~airflow_provider_mysql_cdc.decoding.table_map.column_specs_from_table_map`
checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pymysqlreplication.bitmap import BitGet
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    RowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from airflow_provider_mysql_cdc.core.types import ColumnSpec
from airflow_provider_mysql_cdc.decoding.binlog_values import VALUE_READERS
from airflow_provider_mysql_cdc.decoding.converters import value_converter
from airflow_provider_mysql_cdc.decoding.json_diff import JsonDiff, diffs_to_text, parse_json_diffs
from airflow_provider_mysql_cdc.decoding.json_text import json_binary_to_text
from airflow_provider_mysql_cdc.decoding.values import InvalidValue
from airflow_provider_mysql_cdc.errors import JsonDiffError, TerminalCdcError

__all__ = ["ABSENT", "JsonDiffList", "RowConverter", "decoded_rows"]


class _Absent:
    """The value of a column a row image does not hold (``binlog_row_image`` MINIMAL or NOBLOB)."""

    def __repr__(self) -> str:
        return "ABSENT"


#: What :func:`decoded_rows` gives for a column the row image lacks (the library gives None, which
#: would read as SQL NULL).
ABSENT = _Absent()


class JsonDiffList(tuple[JsonDiff, ...]):
    """A JSON column's value in a partial update: the diffs to apply to its previous value, in order
    (the library reads only the first diff of a column; every one is read here)."""


#: The library's own per-value routine (read, never replaced on the library's class).
_LIBRARY_READ_VALUE: Callable[..., Any] = RowsEvent._RowsEvent__read_values_name


def _read_value(
    event: Any,
    column: Any,
    null_bitmap: bytes,
    null_bitmap_index: int,
    is_partial: bool,
    cols_bitmap: bytes,
    unsigned: bool,
    i: int,
) -> Any:
    """Override of ``RowsEvent.__read_values_name``: :data:`ABSENT` for a column the image lacks, every
    diff of a partial JSON update (:class:`JsonDiffList`), our readers (:data:`VALUE_READERS`); the
    library's own code for NULL and the remaining types (integers, FLOAT, DOUBLE, DECIMAL: decoded
    correctly)."""
    if not BitGet(cols_bitmap, i):
        return ABSENT
    reader = VALUE_READERS.get(column.type)
    if is_partial and not event._is_null(null_bitmap, null_bitmap_index):
        data = event.packet.read(event.packet.read_uint_by_size(column.length_size))
        try:
            return JsonDiffList(parse_json_diffs(data, json_binary_to_text))
        except JsonDiffError as exc:
            raise TerminalCdcError(f"column {column.name!r}: unreadable partial JSON update ({exc})") from None
    if reader is None or event._is_null(null_bitmap, null_bitmap_index):
        return _LIBRARY_READ_VALUE(event, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i)
    return reader(event.packet, column)


_FIXED_EVENT_CLASSES: dict[type, type] = {
    base: type(f"Cdc{base.__name__}", (base,), {"_RowsEvent__read_values_name": _read_value})
    for base in (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, PartialUpdateRowsEvent)
}


def columns_only(bitmap: bytes, columns: int) -> bytes:
    """A row event's columns-present ``bitmap`` without the bits past its ``columns`` columns.

    MySQL 9.7 sets those spare bits in the before image of a multi-table ``UPDATE`` (checked: a table
    of 9 columns under ``binlog_row_image=NOBLOB`` gives ``dbff``, the same statement on one table
    ``db01``). The library counts every bit of the bitmap for the length of each image's NULL bitmap,
    so where columns are absent it read one byte too many and every value after it from the wrong
    place."""
    spare = -columns % 8
    if not spare or len(bitmap) != (columns + 7) // 8 or not bitmap[-1] >> (8 - spare):
        return bitmap
    return bytes(bitmap[:-1]) + bytes([bitmap[-1] & (0xFF >> spare)])


def decoded_rows(event: Any) -> list[dict[str, Any]]:
    """``event.rows`` (same shape: ``values``, or ``before_values``/``after_values``) decoded with
    our value readers. Call it instead of ``event.rows``, before anything reads ``event.rows``."""
    base = type(event)
    fixed = _FIXED_EVENT_CLASSES.get(base)
    if fixed is None:
        raise TypeError(f"decoded_rows() needs a library row event, not {base.__name__}")
    if event._RowsEvent__rows is not None:
        raise TerminalCdcError("the event's rows were already decoded by the library; call decoded_rows() first")
    columns = int(event.number_of_columns)
    event.columns_present_bitmap = columns_only(event.columns_present_bitmap, columns)
    if hasattr(event, "columns_present_bitmap2"):
        event.columns_present_bitmap2 = columns_only(event.columns_present_bitmap2, columns)
    event.__class__ = fixed
    try:
        rows: list[dict[str, Any]] = event.rows
    finally:
        event.__class__ = base
    return rows


class RowConverter:
    """Converts the decoded row dicts of one table version into staged values.

    ``convert(values)`` returns the table's values in column order followed by the
    ``_cdc_invalid_values`` map (or None): the leading columns of
    :func:`~airflow_provider_mysql_cdc.core.types.arrow_schema`, so a staged row is
    ``(*converter.convert(values), op, gtid, seq, commit_ts)``.
    """

    def __init__(self, specs: Iterable[ColumnSpec]) -> None:
        self.specs = tuple(specs)
        self._plan = tuple((spec.name, value_converter(spec)) for spec in self.specs)

    def convert(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """One row image (a ``values``/``before_values``/``after_values`` dict of :func:`decoded_rows`)."""
        if len(values) != len(self._plan):
            raise TerminalCdcError(f"row has {len(values)} columns, the table map {len(self._plan)}")
        out: list[Any] = []
        invalid: dict[str, str] | None = None
        try:
            for name, convert in self._plan:
                value = values[name]
                if value is None:
                    out.append(None)
                elif type(value) is InvalidValue:
                    invalid = invalid or {}
                    invalid[name] = str(value)
                    out.append(None)
                else:
                    out.append(value if convert is None else convert(value))
        except (TypeError, AttributeError, KeyError) as exc:
            column = self._plan[len(out)][0]
            raise TerminalCdcError(
                f"column {column!r}: {type(exc).__name__}: {exc}; were the rows decoded with decoded_rows(event)?"
            ) from exc
        out.append(invalid)
        return tuple(out)

    def convert_partial(self, values: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, str] | None]:
        """One row image that may lack columns: :meth:`convert`'s tuple (NULL where a column is
        absent), and the image's ``_cdc_partial`` map (None when it is complete): ``""`` for an absent
        column, the diff list (:func:`~airflow_provider_mysql_cdc.decoding.json_diff.diffs_to_text`)
        for a partially updated JSON column."""
        partial: dict[str, str] = {}
        complete: dict[str, Any] = {}
        for name, value in values.items():
            if value is ABSENT:
                partial[name] = ""
                complete[name] = None
            elif isinstance(value, JsonDiffList):
                partial[name] = diffs_to_text(value)
                complete[name] = None
            else:
                complete[name] = value
        return self.convert(complete), partial or None
