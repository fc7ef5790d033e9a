"""A chunk's ``SELECT`` read as raw row packets and turned into Arrow arrays without per-value Python.

PyMySQL parses every row of a result in pure Python (a packet object per row, a slice, a decode and
a converter call per value) and :class:`~airflow_provider_mysql_cdc.snapshot.row_reading.SnapshotRowConverter`
then converts every value again: most of a snapshot chunk's time. This module stages the very same
values (the Arrow arrays are equal, type by type: ``tests/integration/test_snapshot_fast_reader.py``)
at a fraction of the cost:

1. :func:`read_raw_batches` takes over an unbuffered result (``SSCursor.execute`` has read the column
   definitions) and reads its row packets straight from the connection's socket in large reads; a
   short Python loop finds the packet boundaries (one step per row), rows of 16 MiB and more (split
   over several packets) are joined, sequence numbers are checked, and the result's end (EOF
   packet) or error packet is handled as PyMySQL would (an error packet raises PyMySQL's exception,
   a lost connection ``OperationalError`` 2013). It yields batches of whole rows.
2. :class:`ArrowBatchDecoder` parses a batch with Arrow compute, a column at a time across all rows:
   the length-encoded header of column ``c`` of every row is read with one ``take`` from the
   positions after column ``c - 1``, so the Python work per batch does not grow with its rows. The
   values are cut out of the packets with one ``take`` per column (a ``large_binary`` array laid
   over the packets) and converted by Arrow's casts: integers, YEAR, FLOAT, DOUBLE and DECIMAL
   from their text, DATE/DATETIME/TIMESTAMP from their text (``time_zone`` UTC), text, ENUM, SET
   and JSON in UTF-8 (validated) or ASCII, binary strings, BIT, geometry (SRID dropped) and VECTOR
   from their bytes.
3. What Arrow cannot parse exactly like the old path is converted per value by the old path's own
   functions (PyMySQL's converter of the result field, then
   :func:`~airflow_provider_mysql_cdc.snapshot.row_reading._value_converter`): TIME, text in other
   character sets, and a batch's DATE/DATETIME/TIMESTAMP column that holds a zero or partial date
   (NULL, text in ``_cdc_invalid_values``) or year 0.

:func:`staged_record_batches` is what the snapshot engine stages: record batches of
:func:`~airflow_provider_mysql_cdc.core.types.arrow_schema` read with this reader, or (``fast=False``)
with PyMySQL's ``fetchmany`` and ``SnapshotRowConverter`` as before (kept for the comparison test).

No Airflow import.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pymysql
import pymysql.cursors
from pymysql.constants import CR

from airflow_provider_mysql_cdc.capture.row_decoding import InvalidValue
from airflow_provider_mysql_cdc.core.staging import cdc_seq
from airflow_provider_mysql_cdc.core.types import (
    BINARY_TYPES,
    INTEGER_TYPES,
    TEXT_TYPES,
    ColumnSpec,
    arrow_schema,
    arrow_type,
)
from airflow_provider_mysql_cdc.errors import TerminalCdcError
from airflow_provider_mysql_cdc.snapshot.row_reading import SnapshotRowConverter, _value_converter

#: Most bytes of row packets one batch holds (besides ``fetch_rows``): bounds memory with wide rows
#: and keeps every column of a batch well below Arrow's 2 GiB ``binary`` limit.
FETCH_BYTES = 64 << 20
#: Bytes asked of the socket per read (a TLS read returns one record, at most 16 KiB, anyway).
_READ_SIZE = 1 << 16
#: Payload length of a packet that another packet of the same row follows.
_MAX_PACKET = 0xFFFFFF
_NULL = 0xFB
_SERVER_MORE_RESULTS_EXISTS = 8
_UTF8_CHARSETS = frozenset({"utf8mb4", "utf8mb3", "utf8"})

#: (encoding, converter) of a result field, as PyMySQL's ``MySQLResult.converters`` holds them.
FieldConverter = tuple[str | None, Callable[[Any], Any] | None]


class RowPacketError(TerminalCdcError):
    """Raised when a result's row packets do not have the shape the column definitions announce."""


# -- raw row packets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawBatch:
    """Whole rows of a result: ``data`` holds them back to back, each a 4-byte packet header (only its
    sequence number byte is meaningful: rows of several packets are joined) and the row's payload;
    ``heads`` (int64) are the offsets of the headers, a row ending where the next one's header begins."""

    data: bytes | bytearray
    heads: pa.Array

    @property
    def rows(self) -> int:
        return len(self.heads)


def _lost(connection: Any, detail: str) -> pymysql.err.OperationalError:
    connection._force_close()
    return pymysql.err.OperationalError(CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query{detail}")


class _PacketStream:
    """The bytes of an active unbuffered result, read from the connection's buffered socket file."""

    def __init__(self, cursor: Any) -> None:
        self.connection = cursor.connection
        self.result = cursor._result
        if self.connection is None or self.result is None:
            raise TerminalCdcError("the cursor has no result to read (execute a SELECT first)")
        self.active = bool(self.result.unbuffered_active)
        self.rfile = self.connection._rfile
        #: Sequence number the next packet must carry.
        self.next_seq: int = self.connection._next_seq_id

    def read(self) -> bytes:
        """Some more bytes (blocks until the server sends some); a closed connection raises."""
        try:
            data: bytes = self.rfile.read1(_READ_SIZE)
        except OSError as exc:
            raise _lost(self.connection, f" ({exc})") from None
        except BaseException:
            self.connection._force_close()
            raise
        if not data:
            raise _lost(self.connection, "")
        return data

    def finish(self, payload: bytes | bytearray) -> None:
        """The result's last packet: an EOF packet ends it, an error packet raises PyMySQL's exception."""
        self.active = False
        self.result.unbuffered_active = False
        self.connection._next_seq_id = self.next_seq
        if payload[0] == 0xFF:
            pymysql.err.raise_mysql_exception(bytes(payload))
        warnings, status = struct.unpack_from("<HH", payload, 1)
        self.result.warning_count = warnings
        self.result.has_next = bool(status & _SERVER_MORE_RESULTS_EXISTS)
        self.result.connection = None
        self.result.rows = None

    def abandon(self) -> None:
        """Rows are left unread (an error, or the reader was closed): the connection is unusable."""
        if self.active:
            self.active = False
            self.result.unbuffered_active = False
            self.connection._force_close()


def _join_row(connection: Any, buf: bytearray, pos: int, seq: int) -> int | None:
    """Join the packets of the row at ``pos`` (its first packet, numbered ``seq``, has a full payload)
    into one packet in place, numbered as its last one; returns the offset after it, or None when its
    last packet has not arrived yet."""
    packets: list[tuple[int, int]] = []  # (payload offset, length)
    cursor = pos
    while True:
        if cursor + 4 > len(buf):
            return None
        length = buf[cursor] | buf[cursor + 1] << 8 | buf[cursor + 2] << 16
        if cursor + 4 + length > len(buf):
            return None
        packets.append((cursor + 4, length))
        cursor += 4 + length
        if length < _MAX_PACKET:
            break
    for number, (payload, _) in enumerate(packets):
        if buf[payload - 1] != (seq + number) % 256:
            connection._force_close()
            raise pymysql.err.InternalError(
                f"Packet sequence number wrong - got {buf[payload - 1]} expected {(seq + number) % 256}"
            )
    joined = b"".join(bytes(buf[payload : payload + length]) for payload, length in packets)
    buf[pos:cursor] = bytes((0, 0, 0, (seq + len(packets) - 1) % 256)) + joined
    return pos + 4 + len(joined)


def _check_sequence(connection: Any, data: bytes | bytearray, heads: pa.Array, first_seq: int, joined: set[int]) -> int:
    """Row ``i``'s packet must follow row ``i - 1``'s (the first row's: ``first_seq``); joined rows
    (their header offsets in ``joined``) were checked when joined. Returns the next row's number."""
    u8 = _u8(data)
    seqs = pc.take(u8, pc.add(heads, 3)).cast(_INT64)
    previous = pa.concat_arrays([pa.array([first_seq - 1], _INT64), seqs.slice(0, len(heads) - 1)])
    expected = pc.bit_wise_and(pc.add(previous, 1), 255)
    matches = pc.equal(seqs, expected)
    if not pc.all(matches).as_py():
        for row in pc.indices_nonzero(pc.invert(matches)).to_pylist():
            if heads[row].as_py() not in joined:
                connection._force_close()
                raise pymysql.err.InternalError(
                    f"Packet sequence number wrong - got {seqs[row].as_py()} expected {expected[row].as_py()}"
                )
    return (int(seqs[-1].as_py()) + 1) % 256


class _Framer:
    """Row packets of a result, framed as they arrive: ``buf`` holds the bytes not yet yielded,
    ``heads`` the header offsets of its complete rows, ``pos`` the first byte not framed yet."""

    def __init__(self, stream: _PacketStream, max_rows: int, max_bytes: int) -> None:
        self.stream = stream
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.heads: list[int] = []
        self.joined: set[int] = set()  # heads of rows joined from several packets
        self.pos = 0
        self.batch_seq = stream.next_seq  # the number of heads[0]'s packet

    def next_seq(self) -> int:
        """The number the next row's (first) packet must carry."""
        return (self.buf[self.heads[-1] + 3] + 1) % 256 if self.heads else self.batch_seq

    def frame(self) -> None:
        """Frame the complete rows received so far (the hot loop: one step per row packet)."""
        buf, heads, pos = self.buf, self.heads, self.pos
        end = len(buf)
        append = heads.append
        max_packet = _MAX_PACKET
        while pos + 4 <= end:
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            after = pos + 4 + length
            if after > end:
                break
            if length == max_packet:  # a row of 16 MiB or more: its packets are joined
                joined_end = _join_row(self.stream.connection, buf, pos, self.next_seq())
                if joined_end is None:
                    break
                self.joined.add(pos)
                after = joined_end
                end = len(buf)
            append(pos)
            pos = after
        self.pos = pos

    def terminal(self) -> bytes | None:
        """The result's last packet (EOF or error) when it has arrived, taken off the rows. The server
        sends nothing after it, so only the last packet framed can be it."""
        if not self.heads:
            return None
        last = self.heads[-1]
        first = self.buf[last + 4] if last + 4 < self.pos else None
        if last in self.joined or not (first == 0xFF or (first == 0xFE and self.pos - last - 4 < 9)):
            return None
        self.heads.pop()
        seq = self.next_seq()
        if self.buf[last + 3] != seq:
            self.stream.connection._force_close()
            raise pymysql.err.InternalError(f"Packet sequence number wrong - got {self.buf[last + 3]} expected {seq}")
        self.stream.next_seq = (seq + 1) % 256
        terminal = bytes(self.buf[last + 4 : self.pos])
        self.pos = last
        return terminal

    def batch(self) -> RawBatch:
        """The next batch of framed rows (at most ``max_rows`` rows and ``max_bytes`` bytes, at least
        one row); ``buf`` and ``heads`` drop them."""
        heads = self.heads
        stop = _batch_stop(heads, self.max_rows, self.max_bytes, self.pos)
        end = heads[stop] if stop < len(heads) else self.pos
        base = heads[0]
        rows = pc.subtract(pa.array(heads[:stop], _INT64), base)
        batch = RawBatch(self.buf[base:end], rows)
        joined = {head - base for head in self.joined if head < end}
        self.batch_seq = _check_sequence(self.stream.connection, batch.data, rows, self.batch_seq, joined)
        del self.buf[:end]
        self.heads = [head - end for head in heads[stop:]]
        self.joined = {head - end for head in self.joined if head >= end}
        self.pos -= end
        return batch

    def full(self) -> bool:
        """Whether the framed rows fill a batch (the next rows could still join one that is not full)."""
        return bool(self.heads) and (len(self.heads) >= self.max_rows or self.pos - self.heads[0] >= self.max_bytes)


def read_raw_batches(cursor: Any, max_rows: int, max_bytes: int = FETCH_BYTES) -> Generator[RawBatch, None, None]:
    """The rows of the unbuffered result ``cursor`` (a PyMySQL ``SSCursor`` right after ``execute``)
    in batches of at most ``max_rows`` rows and, unless one row is larger, ``max_bytes`` bytes.

    The result is read to its end; if the iteration stops before (an exception, ``close()``), the
    connection is closed without reading the rest (PyMySQL would read every remaining row)."""
    if max_rows < 1 or max_bytes < 1:
        raise ValueError("max_rows and max_bytes must be positive")
    stream = _PacketStream(cursor)
    framer = _Framer(stream, max_rows, max_bytes)
    try:
        while stream.active:
            framer.buf += stream.read()
            framer.frame()
            terminal = framer.terminal()
            while framer.full() or (terminal is not None and framer.heads):
                yield framer.batch()
            if terminal is not None:
                stream.finish(terminal)
    finally:
        stream.abandon()  # rows left unread (an exception, GeneratorExit): the connection is closed


def _batch_stop(heads: list[int], max_rows: int, max_bytes: int, end: int) -> int:
    """How many of the framed rows (the last ending at ``end``) the next batch takes: at most
    ``max_rows`` rows and ``max_bytes`` bytes, at least one row."""
    stop = min(len(heads), max_rows)
    limit = heads[0] + max_bytes
    if (heads[stop] if stop < len(heads) else end) <= limit:
        return stop
    low, high = 1, stop  # the most rows that end within the limit, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        if (heads[middle] if middle < len(heads) else end) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


# -- row packets -> Arrow -------------------------------------------------------------------------


_INT64 = pa.int64()


def _u8(data: bytes | bytearray) -> pa.Array:
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
    :func:`~airflow_provider_mysql_cdc.snapshot.row_reading.select_expressions` into the staged
    arrays: the table's columns and ``_cdc_invalid_values``, equal to what
    :class:`~airflow_provider_mysql_cdc.snapshot.row_reading.SnapshotRowConverter` gives for the
    rows PyMySQL reads from the same packets. ``fields`` are the result's PyMySQL converters (used
    by the per-value path)."""

    def __init__(self, specs: Sequence[ColumnSpec], fields: Sequence[FieldConverter]) -> None:
        self.specs = tuple(specs)
        if len(fields) != len(self.specs):
            raise RowPacketError(f"the result has {len(fields)} columns, the table {len(self.specs)}")
        self.fields = tuple(fields)
        self.types = [arrow_type(spec) for spec in self.specs]
        self.invalid_type = arrow_schema(self.specs).field(len(self.specs)).type
        self._converters = [_value_converter(spec) for spec in self.specs]
        self._offsets: _Offsets | None = None

    def decode(self, batch: RawBatch) -> list[pa.Array]:
        rows = batch.rows
        if rows == 0:
            return [pa.array([], t) for t in [*self.types, self.invalid_type]]
        data = batch.data
        try:
            u8 = _u8(data)
            heads = batch.heads
            ends = pa.concat_arrays([heads.slice(1), pa.array([len(data)], _INT64)])
            pos = pc.add(heads, 4)
            bounds: list[pa.Array] = []
            nulls: list[pa.Array | None] = []
            for index, spec in enumerate(self.specs):
                start, length, null = _lengths(data, u8, pos)
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
            array = self._fast(spec, self.types[index], raw)
            if array is None:
                array, invalid = self._slow(index, raw, invalid)
            out.append(array)
        if invalid is None:
            out.append(pa.nulls(rows, self.invalid_type))
        else:
            out.append(pa.array(invalid, type=self.invalid_type))
        return out

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


# -- what the snapshot stages ----------------------------------------------------------------------


def _cdc_columns(count: int, staged_before: int) -> list[pa.Array]:
    """``_cdc_op`` ``'r'``, no GTID, ``_cdc_seq`` counting on from ``staged_before``, no commit time."""
    return [
        pa.array(["r"] * count, pa.string()),
        pa.nulls(count, pa.string()),
        pa.array(range(cdc_seq(0, staged_before), cdc_seq(0, staged_before + count)), pa.int64()),
        pa.nulls(count, pa.timestamp("us", tz="UTC")),
    ]


class _CdcColumns:
    """:func:`_cdc_columns` for batches of one size over and over: the constant arrays are reused and
    the sequence numbers added in Arrow."""

    def __init__(self) -> None:
        self.count = -1
        self.constant: list[pa.Array] = []
        self.positions = pa.array([], pa.int64())

    def __call__(self, count: int, staged_before: int) -> list[pa.Array]:
        if count != self.count:
            self.count = count
            op, gtid, positions, commit_ts = _cdc_columns(count, 0)
            self.constant = [op, gtid, commit_ts]
            self.positions = positions
        cdc_seq(0, staged_before + count - 1)  # in range, or ValueError as before
        op, gtid, commit_ts = self.constant
        return [op, gtid, pc.add(self.positions, cdc_seq(0, staged_before)), commit_ts]


def staged_record_batches(
    connection: Any,
    specs: Sequence[ColumnSpec],
    sql: str,
    params: Sequence[Any] | None,
    fetch_rows: int,
    *,
    fast: bool = True,
) -> Generator[pa.RecordBatch, None, None]:
    """The snapshot rows of ``sql`` (a ``SELECT`` of :func:`select_expressions` on a connection that ran
    :data:`SNAPSHOT_SESSION_STATEMENTS`) as record batches of ``arrow_schema(specs)`` of at most
    ``fetch_rows`` rows (and, read fast, :data:`FETCH_BYTES` of row packets unless one row is
    larger): ``_cdc_op`` ``'r'``, ``_cdc_seq`` counting from 0, no GTID, no commit time.

    ``fast=False`` reads with PyMySQL (``fetchmany``) and converts with :class:`SnapshotRowConverter`,
    the reader before this module; both give equal batches. PyMySQL errors propagate."""
    schema = arrow_schema(specs)
    cursor = connection.cursor(pymysql.cursors.SSCursor)
    staged = 0
    try:
        cursor.execute(sql, params)
        if fast:
            decoder = ArrowBatchDecoder(specs, cursor._result.converters)
            cdc_columns = _CdcColumns()
            batches = read_raw_batches(cursor, fetch_rows, FETCH_BYTES)
            try:
                for raw in batches:
                    arrays = decoder.decode(raw)
                    arrays += cdc_columns(raw.rows, staged)
                    staged += raw.rows
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
            finally:
                batches.close()
        else:
            converter = SnapshotRowConverter(specs)
            fields = list(schema)[: len(specs) + 1]  # the table's columns and _cdc_invalid_values
            while batch := cursor.fetchmany(fetch_rows):
                columns = converter.convert_columns(batch)
                arrays = [pa.array(values, type=f.type) for values, f in zip(columns, fields, strict=True)]
                arrays += _cdc_columns(len(batch), staged)
                staged += len(batch)
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)
    finally:
        cursor.close()
