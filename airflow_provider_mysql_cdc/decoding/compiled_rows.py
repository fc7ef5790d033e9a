"""Row images decoded by a function compiled once per table version: capture's fast path.

python-mysql-replication decodes a row event value by value, through several Python calls per
value and a dict per row image, and :class:`~airflow_provider_mysql_cdc.decoding.binlog_rows.RowConverter`
then converts each dict into the staged values. :func:`compile_row_decoder` instead generates, from
the table map of one table version, one Python function that walks the event's row images with each
column's bytes read by inline code (precomputed sizes, ``struct`` formats, shifts and masks; no
per-value dispatch, no dicts) and returns, per image, exactly the tuple ``RowConverter.convert``
returns for the library's decoding of that image: the values in column order, then the
``_cdc_invalid_values`` map or None. Common types (integers, FLOAT, DOUBLE, DECIMAL, DATE,
DATETIME, TIMESTAMP, YEAR, CHAR, VARCHAR, TEXT, BLOB) are read inline; the others (TIME, BIT, ENUM,
SET, JSON, geometry, VECTOR, the pre-5.6.4 temporal types) call the binlog path's own readers
(:mod:`~airflow_provider_mysql_cdc.decoding.binlog_values`) and converters
(:func:`~airflow_provider_mysql_cdc.decoding.converters.value_converter`) for their column.

:func:`row_images` finds the row images' bytes in a library row event. It returns None, and the
caller decodes with the library path instead, for what the compiled code does not read:
``PARTIAL_UPDATE_ROWS_EVENT`` (partial JSON), images without every column
(``binlog_row_image`` other than FULL) and events the library has already started to decode.

``tests/integration/test_compiled_rows.py`` proves equality with the library path for every type
of the type map (inserts, both images of updates, deletes, NULLs, invalid dates).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.constants.BINLOG import (
    DELETE_ROWS_EVENT_V1,
    DELETE_ROWS_EVENT_V2,
    UPDATE_ROWS_EVENT_V1,
    UPDATE_ROWS_EVENT_V2,
    WRITE_ROWS_EVENT_V1,
    WRITE_ROWS_EVENT_V2,
)

from airflow_provider_mysql_cdc.core.types import DECIMAL128_MAX_PRECISION, ColumnSpec
from airflow_provider_mysql_cdc.decoding.binlog_values import VALUE_READERS
from airflow_provider_mysql_cdc.decoding.converters import value_converter
from airflow_provider_mysql_cdc.decoding.values import EPOCH, InvalidValue, datetime_or_invalid, decimal_groups
from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = ["CompiledRowDecoder", "compile_row_decoder", "row_images"]

#: Row events whose images :func:`row_images` hands to compiled code (v1 and v2 share the image format).
_PLAIN_ROW_EVENTS = frozenset(
    {
        WRITE_ROWS_EVENT_V1,
        WRITE_ROWS_EVENT_V2,
        UPDATE_ROWS_EVENT_V1,
        UPDATE_ROWS_EVENT_V2,
        DELETE_ROWS_EVENT_V1,
        DELETE_ROWS_EVENT_V2,
    }
)
_UPDATE_EVENTS = frozenset({UPDATE_ROWS_EVENT_V1, UPDATE_ROWS_EVENT_V2})
#: ``struct`` codes (signed, unsigned) of the types read with ``struct``: TINYINT to BIGINT, FLOAT, DOUBLE.
_STRUCT_CODES = {
    FIELD_TYPE.TINY: ("b", "B"),
    FIELD_TYPE.SHORT: ("h", "H"),
    FIELD_TYPE.LONG: ("i", "I"),
    FIELD_TYPE.LONGLONG: ("q", "Q"),
    FIELD_TYPE.FLOAT: ("f", "f"),
    FIELD_TYPE.DOUBLE: ("d", "d"),
}
#: DECIMALs up to this many digits are built with ``Decimal(int).scaleb()``, exact within the default
#: context's 28 digits; wider ones from text (exact at any precision).
_SCALEB_MAX_DIGITS = 28


@dataclass(frozen=True)
class CompiledRowDecoder:
    """``decode(data, start, end)`` -> (images, end position) for the row images in ``data[start:end]``."""

    decode: Callable[[bytes, int, int], tuple[list[tuple[Any, ...]], int]]
    #: The generated code, for error messages and debugging.
    source: str

    def images(self, data: bytes, start: int, end: int, where: str) -> list[tuple[Any, ...]]:
        """The converted images of one event; raise when they do not end exactly at ``end``."""
        try:
            images, position = self.decode(data, start, end)
        except (IndexError, struct.error, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise TerminalCdcError(f"{where}: cannot decode a row event's images: {type(exc).__name__}: {exc}") from exc
        if position != end:
            raise TerminalCdcError(
                f"{where}: a row event's images end at byte {position - start}, the event at {end - start}: "
                "the table map does not describe the rows"
            )
        return images


def row_images(event: Any) -> tuple[bytes, int, int] | None:
    """``(data, start, end)``: where a library row event's unread row images are, or None
    when the compiled decoder must not read them (see the module docstring)."""
    if event.event_type not in _PLAIN_ROW_EVENTS or not getattr(event, "complete", False):
        return None
    if event._RowsEvent__rows is not None:
        return None
    wrapper = event.packet
    if wrapper._BinLogPacketWrapper__data_buffer:
        return None  # bytes were pushed back: the raw packet's position is not the reading position
    count = int(event.number_of_columns)
    is_update = event.event_type in _UPDATE_EVENTS
    bitmaps = [event.columns_present_bitmap, *([event.columns_present_bitmap2] if is_update else [])]
    full = int.from_bytes(b"\xff" * ((count + 7) // 8), "little") >> (-count % 8)
    if any(int.from_bytes(bitmap, "little") & full != full for bitmap in bitmaps):
        return None
    raw = wrapper.packet
    data: bytes = raw._data
    start = int(raw._position)
    end = start + int(event.event_size) - int(wrapper.read_bytes)
    if end > len(data):
        return None
    return data, start, end


# -- code generation ------------------------------------------------------------------------------


class _Source:
    """The generated function's lines and the names they use."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "_IV": InvalidValue,
            "_DT": dt.datetime,
            "_DATE": dt.date,
            "_TD": dt.timedelta,
            "_EPOCH": EPOCH,
            "_DEC": Decimal,
            "_from_bytes": int.from_bytes,
            "_dt_invalid": datetime_or_invalid,
        }

    def name(self, prefix: str, value: Any) -> str:
        """A global of the generated code bound to ``value``."""
        for existing, bound in self.names.items():
            if bound is value and existing.startswith(prefix):
                return existing
        key = f"{prefix}{len(self.names)}"
        self.names[key] = value
        return key

    def add(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)


def _decimal_lines(source: _Source, column: Any, var: str) -> list[str]:
    precision, scale = int(column.precision), int(column.decimals)
    groups = decimal_groups(precision, scale)
    size = sum(bytes_ for bytes_, _ in groups)
    top = 1 << (8 * size - 1)
    flip = (1 << (8 * size)) - 1
    terms, shift, multiplier = [], 0, 1
    for bytes_, digits in reversed(groups):
        if bytes_:
            mask = (1 << (8 * bytes_)) - 1
            terms.append(f"((n >> {shift}) & {mask:#x}) * {multiplier}" if shift else f"(n & {mask:#x}) * {multiplier}")
        shift += 8 * bytes_
        multiplier *= 10**digits
    unscaled = " + ".join(reversed(terms)) or "0"
    lines = [
        f"n = _from_bytes(d[p:p + {size}], 'big'); p += {size}",
        f"if n & {top:#x}: n ^= {top:#x}; neg = False",
        f"else: n ^= {flip ^ top:#x}; neg = True",
        f"u = {unscaled}",
    ]
    if precision <= _SCALEB_MAX_DIGITS:
        negative_zero = source.name("_NZ", Decimal(f"-0e-{scale}"))
        lines += [
            f"{var} = _DEC(-u if neg else u).scaleb(-{scale}) if u or not neg else {negative_zero}",
        ]
    else:
        lines += [f"{var} = _DEC(('-' if neg else '') + str(u) + 'e-{scale}')"]
    if precision > DECIMAL128_MAX_PRECISION:
        lines += [f"{var} = format({var}, 'f')"]
    return lines


def _fraction_lines(fsp: int, at: str) -> tuple[int, str]:
    """(bytes, expression) of the microseconds of a DATETIME2/TIMESTAMP2 fraction at ``d[at]``."""
    size = (fsp + 1) // 2
    if not size:
        return 0, "0"
    multiplier = (10_000, 100, 1)[(fsp - 1) // 2]
    return size, f"_from_bytes(d[{at}:{at} + {size}], 'big') * {multiplier}"


def _struct_code(column: Any) -> str | None:
    """The column's ``struct`` code when it is read with ``struct``, else None."""
    codes = _STRUCT_CODES.get(column.type)
    if codes is None:
        return None
    return codes[1] if getattr(column, "unsigned", False) else codes[0]


def _column_lines(source: _Source, column: Any, spec: ColumnSpec, var: str) -> list[str] | None:
    """Inline lines reading one non-NULL value into ``var`` (and advancing ``p``), or None when the
    column's generic reader is used. Lines may end with an InvalidValue in ``var``."""
    type_ = column.type
    unsigned = bool(getattr(column, "unsigned", False))
    code = _struct_code(column)
    if code is not None:
        unpack = source.name("_U", struct.Struct("<" + code).unpack_from)
        return [f"{var} = {unpack}(d, p)[0]; p += {struct.calcsize(code)}"]
    if type_ == FIELD_TYPE.INT24:
        return [f"{var} = _from_bytes(d[p:p + 3], 'little', signed={not unsigned}); p += 3"]
    if type_ == FIELD_TYPE.YEAR:
        return [f"{var} = d[p]; p += 1", f"if {var}: {var} += 1900"]
    if type_ == FIELD_TYPE.NEWDECIMAL:
        return _decimal_lines(source, column, var)
    if type_ == FIELD_TYPE.DATE:
        return [
            "n = d[p] | d[p + 1] << 8 | d[p + 2] << 16; p += 3",
            f"try: {var} = _DATE(n >> 9, (n >> 5) & 15, n & 31)",
            "except ValueError:",
            f"    {var} = _IV(f'{{n >> 9:04d}}-{{(n >> 5) & 15:02d}}-{{n & 31:02d}}')",
            *_indented(_invalid_lines(spec, var)),
        ]
    if type_ == FIELD_TYPE.DATETIME2:
        fsp = int(column.fsp)
        size = (fsp + 1) // 2
        multiplier = (10_000, 100, 1)[(fsp - 1) // 2] if size else 0
        read = (  # 5 fixed bytes and the fraction's: 8 bytes (fsp 5, 6) are one struct read
            f"{source.name('_U', struct.Struct('>Q').unpack_from)}(d, p)[0]"
            if size == 3
            else f"_from_bytes(d[p:p + {5 + size}], 'big')"
        )
        return [
            f"n = {read}; p += {5 + size}",
            f"us = (n & {(1 << 8 * size) - 1:#x}) * {multiplier}; n = (n >> {8 * size}) - 0x8000000000"
            if size
            else "us = 0; n -= 0x8000000000",
            "ymd = n >> 17; hms = n & 0x1FFFF; ym = ymd >> 5",
            f"try: {var} = _DT(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, us)",
            "except ValueError:",
            f"    {var} = _dt_invalid("
            f"(ym // 13, ym % 13, ymd & 31), (hms >> 12, (hms >> 6) & 63, hms & 63), us, {fsp})",
            *_indented(_invalid_lines(spec, var)),
        ]
    if type_ == FIELD_TYPE.TIMESTAMP2:
        fsp = int(column.fsp)
        size, micros = _fraction_lines(fsp, "p + 4")
        zero = source.name("_ZTS", InvalidValue("0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")))
        seconds = source.name("_U", struct.Struct(">I").unpack_from)
        return [
            f"n = {seconds}(d, p)[0]; us = {micros}; p += {4 + size}",
            f"if n: {var} = _EPOCH + _TD(0, n, us)",
            "else:",
            f"    {var} = {zero}",
            *_indented(_invalid_lines(spec, var)),
        ]
    if type_ in (FIELD_TYPE.STRING, FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.BLOB):
        short_length = 2 if int(getattr(column, "max_length", 0) or 0) > 255 else 1
        length_size = int(column.length_size) if type_ == FIELD_TYPE.BLOB else short_length
        if length_size == 1:
            length = "d[p]"
        elif length_size == 2:  # without a slice
            length = "d[p] | d[p + 1] << 8"
        else:
            length = f"_from_bytes(d[p:p + {length_size}], 'little')"
        lines = [f"n = {length}; p += {length_size}", f"{var} = d[p:p + n]; p += n"]
        convert = value_converter(spec)
        if spec.charset in ("utf8mb4", "utf8mb3", "utf8"):
            lines[-1] = f"{var} = d[p:p + n].decode(); p += n"
        elif convert is not None:
            lines.append(f"{var} = {source.name('_C', convert)}({var})")
        return lines
    return None


def _generic_lines(source: _Source, column: Any, spec: ColumnSpec, var: str) -> list[str]:
    """Lines reading one value with the binlog path's reader and converter for the column."""
    reader = VALUE_READERS.get(column.type)
    if reader is None:
        raise TerminalCdcError(f"{spec.name}: MySQL column type {column.type} has no compiled reader")
    lines = [f"{var}, p = {source.name('_R', _GenericReader(reader, column))}(d, p)"]
    convert = value_converter(spec)
    if convert is not None:
        lines.append(f"if {var}.__class__ is not _IV: {var} = {source.name('_C', convert)}({var})")
    return lines


class _GenericReader:
    """One column's binlog value reader applied at a position: ``(value, next position)``."""

    __slots__ = ("_column", "_data", "_position", "_reader")

    def __init__(self, reader: Callable[[Any, Any], Any], column: Any) -> None:
        self._reader = reader
        self._column = column
        self._data = b""
        self._position = 0

    def read(self, size: int) -> bytes:
        start = self._position
        self._position = start + int(size)
        if self._position > len(self._data):
            raise IndexError(f"value needs {size} bytes, {len(self._data) - start} left")
        return self._data[start : self._position]

    def __call__(self, data: bytes, position: int) -> tuple[Any, int]:
        self._data, self._position = data, position
        value = self._reader(self, self._column)
        return value, self._position


def compile_row_decoder(columns: Sequence[Any], specs: Sequence[ColumnSpec]) -> CompiledRowDecoder:
    """The decoder of one table version: ``columns`` from the library's table map, ``specs`` from
    :func:`~airflow_provider_mysql_cdc.decoding.table_map.column_specs_from_table_map` of the same
    table map."""
    if len(columns) != len(specs):
        raise TerminalCdcError(f"table map has {len(columns)} columns, the specs {len(specs)}")
    source = _Source()
    null_bytes = (len(columns) + 7) // 8
    nulls = "d[p]" if null_bytes == 1 else f"_from_bytes(d[p:p + {null_bytes}], 'little')"
    source.add(0, "def decode(d, p, end):", "    images = []", "    out = images.append", "    while p < end:")
    source.add(2, f"nulls = {nulls}; p += {null_bytes}", "inv = None")
    names = [f"v{index}" for index in range(len(columns))]
    source.add(2, "if not nulls:")
    for group in _struct_runs(columns):
        if len(group) > 1:  # consecutive struct-read columns: one unpack_from for all of them
            codes = "".join(str(_struct_code(columns[index])) for index in group)
            unpack = source.name("_U", struct.Struct("<" + codes).unpack_from)
            targets = ", ".join(names[index] for index in group)
            source.add(3, f"{targets} = {unpack}(d, p); p += {struct.calcsize('<' + codes)}")
        else:
            source.add(3, *_value_lines(source, columns[group[0]], specs[group[0]], names[group[0]]))
    source.add(2, "else:")
    for index, (column, spec) in enumerate(zip(columns, specs, strict=True)):
        source.add(3, f"if nulls & {1 << index:#x}: {names[index]} = None", "else:")
        source.add(4, *_value_lines(source, column, spec, names[index]))
    source.add(2, f"out(({', '.join(names)}, inv))")
    source.add(1, "return images, p")
    text = "\n".join(source.lines) + "\n"
    namespace = dict(source.names)
    exec(compile(text, f"<row decoder {len(columns)} columns>", "exec"), namespace)  # the code generated above
    return CompiledRowDecoder(namespace["decode"], text)


def _value_lines(source: _Source, column: Any, spec: ColumnSpec, var: str) -> list[str]:
    """Lines reading one non-NULL value into ``var``; an invalid date ends up in the image's map (the
    inline readers record it where they make one, a generic reader's value is checked)."""
    lines = _column_lines(source, column, spec, var)
    if lines is not None:
        return lines
    return [*_generic_lines(source, column, spec, var), *_invalid_lines(spec, var)]


def _invalid_lines(spec: ColumnSpec, var: str) -> list[str]:
    """Lines moving an :class:`InvalidValue` in ``var`` to the image's ``_cdc_invalid_values`` map."""
    return [
        f"if {var}.__class__ is _IV:",
        f"    inv = inv or {{}}; inv[{spec.name!r}] = str({var}); {var} = None",
    ]


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _struct_runs(columns: Sequence[Any]) -> list[list[int]]:
    """Column positions grouped into runs of consecutive struct-read columns (other columns alone)."""
    runs: list[list[int]] = []
    for index, column in enumerate(columns):
        struct_read = _struct_code(column) is not None
        if struct_read and runs and _struct_code(columns[runs[-1][-1]]) is not None:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs
