"""Text-protocol row packets -> Arrow arrays of the staged values, a column at a time, without
per-value Python.

:class:`ArrowBatchDecoder` parses a :class:`RawBatch` (whole row packets of a ``SELECT`` of
:func:`~airflow_provider_mysql_cdc.decoding.text_rows.select_expressions`, as
:func:`~airflow_provider_mysql_cdc.snapshot.fast_reader.read_raw_batches` reads them off the
connection) with Arrow compute, a column at a time across all rows: the length-encoded header of
column ``c`` of every row is read with one ``take`` from the positions after column ``c - 1``, so
the Python work per batch does not grow with its rows. The values are cut out of the packets with
one ``take`` per column (a ``large_binary`` array laid over the packets) and converted by Arrow's
casts: integers, YEAR, FLOAT, DOUBLE and DECIMAL from their text, DATE/DATETIME/TIMESTAMP from their
text (``time_zone`` UTC), text, ENUM, SET and JSON in UTF-8 (validated) or ASCII, binary strings,
BIT, geometry (SRID dropped) and VECTOR from their bytes.

Rows of the same ``SELECT`` run as a prepared statement (MySQL's binary protocol) decode alike: each
row starts with a NULL bitmap instead of a ``0xFB`` per NULL, integers, YEAR and DOUBLE (FLOAT is
selected as DOUBLE) come as their little-endian bytes, which :class:`ArrowBatchDecoder` lays over
Arrow arrays of the same width (``binary_fields``), and every other value of the ``SELECT`` (strings,
DECIMAL, and the casts to text and bytes) comes as the same length-encoded bytes as in a text row.
The server formats no number as text for such rows: less of its CPU per row.

What Arrow cannot parse exactly like the per-value path is converted per value by that path's own
functions (PyMySQL's converter of the result field, then
:func:`~airflow_provider_mysql_cdc.decoding.text_rows.text_value_converter`): TIME, text in other
character sets, and a batch's DATE/DATETIME/TIMESTAMP column that holds a zero or partial date
(NULL, text in ``_cdc_invalid_values``) or year 0. The arrays equal what
:class:`~airflow_provider_mysql_cdc.decoding.text_rows.SnapshotRowConverter` gives for the rows
PyMySQL reads from the same packets (``tests/integration/test_snapshot_fast_reader.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_mysql_cdc.core.types import (
    BINARY_TYPES,
    INTEGER_TYPES,
    TEXT_TYPES,
    ColumnSpec,
    arrow_schema,
    arrow_type,
)
from airflow_provider_mysql_cdc.decoding.text_rows import text_value_converter
from airflow_provider_mysql_cdc.decoding.values import InvalidValue
from airflow_provider_mysql_cdc.errors import RowPacketError

__all__ = [
    "BINARY_FIXED_WIDTH",
    "BINARY_TEMPORAL_TYPES",
    "ArrowBatchDecoder",
    "BinaryField",
    "FieldConverter",
    "RawBatch",
]

_NULL = 0xFB
_UTF8_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8"})
_INT64 = pa.int64()

#: (encoding, converter) of a result field, as PyMySQL's ``MySQLResult.converters`` holds them.
FieldConverter = tuple[str | None, Callable[[Any], Any] | None]
#: (MySQL field type code, UNSIGNED flag) of a result field whose rows come in the binary protocol.
BinaryField = tuple[int, bool]

#: Binary-protocol field types sent as fixed-width little-endian values: type code -> (width, Arrow
#: type of the signed value, of the unsigned one). MEDIUMINT (INT24) is sent in 4 bytes, YEAR in 2.
BINARY_FIXED_WIDTH: dict[int, tuple[int, pa.DataType, pa.DataType]] = {
    1: (1, pa.int8(), pa.uint8()),  # TINY
    2: (2, pa.int16(), pa.uint16()),  # SHORT
    3: (4, pa.int32(), pa.uint32()),  # LONG
    4: (4, pa.float32(), pa.float32()),  # FLOAT
    5: (8, pa.float64(), pa.float64()),  # DOUBLE
    8: (8, pa.int64(), pa.uint64()),  # LONGLONG
    9: (4, pa.int32(), pa.uint32()),  # INT24
    13: (2, pa.int16(), pa.uint16()),  # YEAR
}
#: Binary-protocol field types sent as a struct of date and time parts (the text path's casts to
#: text never return them): TIMESTAMP, DATE, TIME, DATETIME, NEWDATE, TIMESTAMP2, DATETIME2, TIME2.
BINARY_TEMPORAL_TYPES = frozenset({7, 10, 11, 12, 14, 17, 18, 19})


@dataclass(frozen=True)
class RawBatch:
    """Whole rows of a result: ``data`` holds them back to back, each a 4-byte packet header (only its
    sequence number byte is meaningful: rows of several packets are joined) and the row's payload;
    ``heads`` (int64) are the offsets of the headers, a row ending where the next one's header begins."""

    data: bytes | bytearray
    heads: pa.Array

    @property
    def rows(self) -> int:
        """How many rows the batch holds."""
        return len(self.heads)


def _u8(data: bytes | bytearray) -> pa.Array:
    """The bytes as a ``uint8`` array (no copy)."""
    return pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])


@dataclass
class _Offsets:
    """Index arrays that depend only on the batch's row count (reused while it stays the same)."""

    rows: int
    interleave: pa.Array  # column-major bounds -> row-major
    value_index: list[pa.Array]  # per column: index of its values in the row-major pieces


def _arange(count: int) -> pa.Array:
    """0, 1, ..., count - 1 as int64, computed in Arrow (the indices of ``count`` true values)."""
    every = pa.Array.from_buffers(pa.bool_(), count, [None, pa.py_buffer(b"\xff" * ((count + 7) // 8))])
    return pc.indices_nonzero(every).cast(_INT64)


def _offsets(rows: int, columns: int) -> _Offsets:
    width = 2 * columns
    index = _arange(rows * width)
    row = pc.divide(index, width)  # integer division
    interleave = pc.add(pc.multiply(pc.subtract(index, pc.multiply(row, width)), rows), row)
    base = pc.multiply(_arange(rows), width)
    return _Offsets(rows, interleave, [pc.add(base, 2 * c + 1) for c in range(columns)])


def _lengths(data: bytes | bytearray, u8: pa.Array, pos: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array | None]:
    """(value start, value length, NULL mask or None) of the length-encoded values at ``pos``."""
    first = pc.take(u8, pos).cast(_INT64)
    largest = pc.max(first).as_py()
    if largest < _NULL:
        return pc.add(pos, 1), first, None
    null = pc.equal(first, _NULL)
    length = pc.if_else(null, 0, first)
    start = pc.add(pos, 1)
    if largest > _NULL:  # 0xFC: 2-byte length, 0xFD: 3 bytes, 0xFE: 8 bytes
        long = pc.greater(first, _NULL)
        which = pc.indices_nonzero(long)
        at = pc.take(pos, which)
        kind = pc.take(first, which)
        three = pc.greater_equal(kind, 0xFD)
        low = pc.take(u8, pc.add(at, 1)).cast(_INT64)
        middle = pc.take(u8, pc.add(at, 2)).cast(_INT64)
        high = pc.take(u8, pc.if_else(three, pc.add(at, 3), at)).cast(_INT64)
        sizes = pc.add(pc.add(low, pc.shift_left(middle, 8)), pc.if_else(three, pc.shift_left(high, 16), 0))
        header = pc.if_else(three, 4, 3)
        if pc.max(kind).as_py() >= 0xFE:  # values of 16 MiB and more: few, done in Python
            sizes_list, header_list = sizes.to_pylist(), header.to_pylist()
            for index, (offset, code) in enumerate(zip(at.to_pylist(), kind.to_pylist(), strict=True)):
                if code == 0xFE:
                    sizes_list[index] = int.from_bytes(data[offset + 1 : offset + 9], "little")
                    header_list[index] = 9
                elif code == 0xFF:
                    raise RowPacketError(f"byte 0xff at offset {offset} cannot start a value")
            sizes, header = pa.array(sizes_list, _INT64), pa.array(header_list, _INT64)
        length = pc.replace_with_mask(length, long, sizes)
        start = pc.replace_with_mask(start, long, pc.add(at, header))
    return start, length, null


def _with_nulls(values: pa.Array, null: pa.Array | None) -> pa.Array:
    if null is None:
        return values
    buffers = values.buffers()
    return pa.Array.from_buffers(values.type, len(values), [pc.invert(null).buffers()[1], *buffers[1:]])


class ArrowBatchDecoder:
    """Turns :class:`RawBatch` es of a ``SELECT`` of
    :func:`~airflow_provider_mysql_cdc.decoding.text_rows.select_expressions` into the staged
    arrays: the table's columns and ``_cdc_invalid_values``, equal to what
    :class:`~airflow_provider_mysql_cdc.decoding.text_rows.SnapshotRowConverter` gives for the
    rows PyMySQL reads from the same packets. ``fields`` are the result's PyMySQL converters (used
    by the per-value path)."""

    def __init__(
        self,
        specs: Sequence[ColumnSpec],
        fields: Sequence[FieldConverter],
        binary_fields: Sequence[BinaryField] | None = None,
    ) -> None:
        self.specs = tuple(specs)
        if len(fields) != len(self.specs) or (binary_fields is not None and len(binary_fields) != len(self.specs)):
            raise RowPacketError(f"the result has {len(fields)} columns, the table {len(self.specs)}")
        self.fields = tuple(fields)
        #: Binary-protocol rows: per column, (width, Arrow type) of a fixed-width value, or None.
        self.fixed: tuple[tuple[int, pa.DataType] | None, ...] | None = None
        if binary_fields is not None:
            if any(code in BINARY_TEMPORAL_TYPES for code, _ in binary_fields):
                raise RowPacketError("binary-protocol rows with date and time structs are not decoded")
            self.fixed = tuple(_fixed_width(code, unsigned) for code, unsigned in binary_fields)
        self.types = [arrow_type(spec) for spec in self.specs]
        self.invalid_type = arrow_schema(self.specs).field(len(self.specs)).type
        self._converters = [text_value_converter(spec) for spec in self.specs]
        self._offsets: _Offsets | None = None

    def decode(self, batch: RawBatch) -> list[pa.Array]:
        """The staged arrays of one batch: the table's columns, then ``_cdc_invalid_values``."""
        rows = batch.rows
        if rows == 0:
            return [pa.array([], t) for t in [*self.types, self.invalid_type]]
        data = batch.data
        try:
            u8 = _u8(data)
            heads = batch.heads
            ends = pa.concat_arrays([heads.slice(1), pa.array([len(data)], _INT64)])
            bounds: list[pa.Array] = []
            nulls: list[pa.Array | None] = []
            # a text row's values follow its packet header; a binary row's, a 0x00 and the NULL bitmap
            pos = pc.add(heads, 4 if self.fixed is None else 5 + (len(self.specs) + 9) // 8)
            for index, spec in enumerate(self.specs):
                if self.fixed is None:
                    start, length, null = _lengths(data, u8, pos)
                else:
                    start, length, null = self._binary_lengths(data, u8, heads, pos, index)
                end = pc.add(start, length)
                # geometry: MySQL's value is a 4-byte SRID, then the WKB staged (pc.binary_slice
                # would do, but fails on some arrays in pyarrow 26)
                value_start = pc.min_element_wise(pc.add(start, 4), end) if spec.mysql_type == "geometry" else start
                bounds += [heads if index == 0 else pos, value_start]
                nulls.append(null)
                pos = end
            if not pc.all(pc.equal(pos, ends)).as_py():
                row = pc.index(pc.equal(pos, ends), False).as_py()
                raise RowPacketError(f"row {row} of the batch does not hold {len(self.specs)} values")
        except (pa.ArrowIndexError, IndexError) as exc:
            raise RowPacketError(f"a row packet ends inside a value: {exc}") from None
        if self._offsets is None or self._offsets.rows != rows:
            self._offsets = _offsets(rows, len(self.specs))
        offsets = pa.concat_arrays([pc.take(pa.concat_arrays(bounds), self._offsets.interleave), ends.slice(rows - 1)])
        pieces = pa.Array.from_buffers(
            pa.large_binary(), len(offsets) - 1, [None, offsets.buffers()[1], pa.py_buffer(data)]
        )
        out: list[pa.Array] = []
        invalid: list[dict[str, str] | None] | None = None
        for index, spec in enumerate(self.specs):
            raw = _with_nulls(pc.take(pieces, self._offsets.value_index[index]), nulls[index])
            fixed = self.fixed[index] if self.fixed is not None else None
            array = (
                _fixed_values(raw, *fixed).cast(self.types[index])
                if fixed
                else self._fast(spec, self.types[index], raw)
            )
            if array is None:
                array, invalid = self._slow(index, raw, invalid)
            out.append(array)
        if invalid is None:
            out.append(pa.nulls(rows, self.invalid_type))
        else:
            out.append(pa.array(invalid, type=self.invalid_type))
        return out

    def _binary_lengths(
        self, data: bytes | bytearray, u8: pa.Array, heads: pa.Array, pos: pa.Array, index: int
    ) -> tuple[pa.Array, pa.Array, pa.Array | None]:
        """(value start, length, NULL mask or None) of column ``index`` of binary-protocol rows whose
        values before it end at ``pos``: a NULL (its bit in the row's bitmap, after an offset of 2)
        takes no bytes, a fixed-width value its width, any other a length-encoded string."""
        assert self.fixed is not None
        bit = index + 2
        flags = pc.take(u8, pc.add(heads, 5 + bit // 8))
        null = pc.not_equal(pc.bit_wise_and(flags, 1 << (bit % 8)), 0)
        if not pc.any(null).as_py():
            null = None
        fixed = self.fixed[index]
        if fixed is not None:
            width = pa.scalar(fixed[0], _INT64)
            return pos, (width if null is None else pc.if_else(null, 0, width)), null
        # a NULL has no length header: read the row's 0x00 instead, a length of 0 at pos
        start, length, marked = _lengths(data, u8, pos if null is None else pc.if_else(null, pc.add(heads, 4), pos))
        if marked is not None and pc.any(marked).as_py():
            raise RowPacketError("a binary-protocol row holds 0xfb where a value's length begins")
        if null is None:
            return start, length, None
        return pc.if_else(null, pos, start), length, null

    def _fast(self, spec: ColumnSpec, target: pa.DataType, raw: pa.Array) -> pa.Array | None:
        """The column converted by Arrow, or None when only the per-value path gives the old values."""
        kind = spec.mysql_type
        if kind in INTEGER_TYPES or kind in ("year", "double") or (kind == "decimal" and pa.types.is_decimal(target)):
            return raw.cast(target)  # parsed from the text as a string would be
        if kind == "float":  # fetched as DOUBLE (exact), staged as float32
            return raw.cast(pa.float64()).cast(target)
        if kind in ("date", "datetime", "timestamp"):
            text = raw.cast(pa.large_string())
            if pc.any(pc.starts_with(text, "0000")).as_py():  # year 0: Arrow takes it, Python does not
                return None
            try:
                if kind == "date":
                    return text.cast(target)
                naive = text.cast(pa.timestamp("us"))
            except pa.ArrowInvalid:  # a zero or partial date: NULL and its text, per value
                return None
            return naive if kind == "datetime" else naive.cast(target)  # TIMESTAMP text is UTC
        if kind in TEXT_TYPES or kind in ("enum", "set", "json") or kind == "decimal":
            charset = "utf8mb4" if kind in ("json", "decimal") else spec.charset or "utf8mb4"
            if charset in _UTF8_CHARSETS:
                return raw.cast(target)  # validates UTF-8, like bytes.decode("utf-8")
            if charset == "ascii":
                text = raw.cast(pa.large_string())
                if pc.all(pc.string_is_ascii(text)).as_py() is not False:
                    return text.cast(target)
            return None
        if kind in BINARY_TYPES:
            return raw.cast(target)
        if kind == "geometry":  # the SRID is cut off in decode()
            return raw.cast(target)
        if kind == "bit":
            if spec.bits == 1:
                return pc.not_equal(raw, pa.scalar(b"\0", pa.large_binary()))
            return raw.cast(target)
        if kind == "vector":
            return _vector(raw, target)
        return None

    def _slow(
        self, index: int, raw: pa.Array, invalid: list[dict[str, str] | None] | None
    ) -> tuple[pa.Array, list[dict[str, str] | None] | None]:
        """The old path for one column: PyMySQL's field conversion, then the snapshot converter."""
        spec = self.specs[index]
        encoding, field_converter = self.fields[index]
        convert = self._converters[index]
        staged: list[Any] = []
        for fetched in raw.to_pylist():
            value = fetched
            if value is not None:
                if encoding is not None:
                    value = value.decode(encoding)
                if field_converter is not None:
                    value = field_converter(value)
                if convert is not None:
                    value = convert(value)
                if type(value) is InvalidValue:  # zero/partial date: NULL, its text in the map
                    if invalid is None:
                        invalid = [None] * len(raw)
                    invalid[len(staged)] = {**(invalid[len(staged)] or {}), spec.name: str(value)}
                    value = None
            staged.append(value)
        return pa.array(staged, type=self.types[index]), invalid


def _fixed_width(code: int, unsigned: bool) -> tuple[int, pa.DataType] | None:
    """(width, Arrow type) of a binary-protocol value of field type ``code``, or None (length-encoded)."""
    if code not in BINARY_FIXED_WIDTH:
        return None
    width, signed_type, unsigned_type = BINARY_FIXED_WIDTH[code]
    return width, unsigned_type if unsigned else signed_type


def _fixed_values(raw: pa.Array, width: int, wire_type: pa.DataType) -> pa.Array:
    """Values of ``width`` little-endian bytes each (NULLs: none) as an array of ``wire_type``."""
    if sys.byteorder != "little":
        raise RowPacketError("binary-protocol rows are decoded on little-endian machines only")
    packed = raw.cast(pa.binary(width))  # each value exactly its width; NULL slots zero-filled
    validity, values = packed.buffers()[:2]
    return pa.Array.from_buffers(wire_type, len(packed), [validity, values], offset=packed.offset)


def _vector(raw: pa.Array, target: pa.DataType) -> pa.Array | None:
    """VECTOR bytes (little-endian float32s) as ``list<float32>``, the bytes taken as they are."""
    values = raw.cast(pa.binary())
    if pc.any(pc.not_equal(pc.bit_wise_and(pc.binary_length(values), 3), 0)).as_py():
        return None  # not whole floats: the per-value path fails as the old one did
    validity, offsets, data = values.buffers()
    count = len(values)
    positions = pa.Array.from_buffers(pa.int32(), count + 1, [None, offsets], offset=values.offset)
    if values.offset or positions[0].as_py() % 4:
        return None
    floats = pa.Array.from_buffers(pa.float32(), (data.size if data is not None else 0) // 4, [None, data])
    list_offsets = pc.divide(positions, 4).cast(pa.int32())
    return pa.ListArray.from_buffers(target, count, [validity, list_offsets.buffers()[1]], children=[floats])
