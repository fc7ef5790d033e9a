"""A chunk's ``SELECT`` read as raw row packets and staged as Arrow record batches.

PyMySQL parses every row of a result in pure Python (a packet object per row, a slice, a decode and
a converter call per value) and :class:`~airflow_provider_mysql_cdc.decoding.text_rows.SnapshotRowConverter`
then converts every value again: most of a snapshot chunk's time. This module stages the very same
values (the Arrow arrays are equal, type by type: ``tests/integration/test_snapshot_fast_reader.py``)
at a fraction of the cost:

1. :func:`read_raw_batches` takes over an unbuffered result (``SSCursor.execute``, or
   :func:`_execute_prepared` for a prepared statement's binary-protocol rows, has read the column
   definitions) and reads its row packets straight from the connection's socket in large reads; a
   short Python loop finds the packet boundaries (one step per row), rows of 16 MiB and more (split
   over several packets) are joined, sequence numbers are checked, and the result's end (EOF
   packet) or error packet is handled as PyMySQL would (an error packet raises PyMySQL's exception,
   a lost connection ``OperationalError`` 2013). It yields batches of whole rows
   (:class:`~airflow_provider_mysql_cdc.decoding.text_arrow.RawBatch`).
2. :class:`~airflow_provider_mysql_cdc.decoding.text_arrow.ArrowBatchDecoder` turns each batch into
   the staged arrays with Arrow compute (every conversion of a value lives in
   :mod:`airflow_provider_mysql_cdc.decoding`).

:func:`staged_record_batches` is what the snapshot engine stages: record batches of
:func:`~airflow_provider_mysql_cdc.core.types.arrow_schema` read with this reader, or (``fast=False``)
with PyMySQL's ``fetchmany`` and ``SnapshotRowConverter`` as before (kept for the comparison test).
The chunk's ``SELECT`` runs as a prepared statement: binary-protocol rows cost the server about a
quarter less CPU than text rows (``benchmarks/snapshot.py --protocol-rounds``).

No Airflow import.
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pymysql
import pymysql.cursors
from pymysql.constants import COMMAND, CR, FLAG
from pymysql.protocol import FieldDescriptorPacket

from airflow_provider_mysql_cdc.core.staging import cdc_seq
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.decoding.text_arrow import BINARY_TEMPORAL_TYPES, ArrowBatchDecoder, RawBatch
from airflow_provider_mysql_cdc.decoding.text_rows import SnapshotRowConverter
from airflow_provider_mysql_cdc.errors import TerminalCdcError

#: Most bytes of row packets one batch holds (besides ``fetch_rows``): bounds memory with wide rows
#: and keeps every column of a batch well below Arrow's 2 GiB ``binary`` limit.
FETCH_BYTES = 64 << 20
#: Bytes asked of the socket per read (a TLS read returns one record, at most 16 KiB, anyway).
_READ_SIZE = 1 << 16
#: Payload length of a packet that another packet of the same row follows.
_MAX_PACKET = 0xFFFFFF
_SERVER_MORE_RESULTS_EXISTS = 8
_UNSIGNED = FLAG.UNSIGNED

_INT64 = pa.int64()


def _u8(data: bytes | bytearray) -> pa.Array:
    """The bytes as a ``uint8`` array (no copy)."""
    return pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])


# -- raw row packets ------------------------------------------------------------------------------


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
    last packet has not arrived yet. The payloads are moved down over the headers between them inside
    ``buf``: a row of many MiB is never copied whole."""
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
    end = pos + 4
    with memoryview(buf) as view:
        for payload, length in packets:
            if payload != end:  # overlapping ranges move as memmove does
                view[end : end + length] = view[payload : payload + length]
            end += length
    del buf[end:cursor]
    buf[pos : pos + 4] = bytes((0, 0, 0, (seq + len(packets) - 1) % 256))
    return end


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
        if base == 0:  # the batch keeps the buffer itself and the rest moves to a new one: one copy less
            data, self.buf = self.buf, self.buf[end:]
            del data[end:]
        else:
            data = self.buf[base:end]
            del self.buf[:end]
        batch = RawBatch(data, rows)
        joined = {head - base for head in self.joined if head < end}
        self.batch_seq = _check_sequence(self.stream.connection, batch.data, rows, self.batch_seq, joined)
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


# -- what the snapshot stages ----------------------------------------------------------------------


_PARTIAL_TYPE = pa.map_(pa.string(), pa.string())


def _cdc_columns(count: int, staged_before: int) -> list[pa.Array]:
    """No ``_cdc_partial`` (a snapshot row is complete), ``_cdc_op`` ``'r'``, no GTID, ``_cdc_seq``
    counting on from ``staged_before``, no commit time."""
    return [
        pa.nulls(count, _PARTIAL_TYPE),
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
            partial, op, gtid, positions, commit_ts = _cdc_columns(count, 0)
            self.constant = [partial, op, gtid, commit_ts]
            self.positions = positions
        cdc_seq(0, staged_before + count - 1)  # in range, or ValueError as before
        partial, op, gtid, commit_ts = self.constant
        return [partial, op, gtid, pc.add(self.positions, cdc_seq(0, staged_before)), commit_ts]


def _execute_prepared(cursor: Any, sql: str, params: Sequence[Any] | None) -> int | None:
    """Run ``sql`` (``params`` interpolated as ``execute`` would) as a prepared statement, leaving its
    unbuffered result on ``cursor`` as ``SSCursor.execute`` does; returns the statement's id, or None
    when it ran as a plain query instead: the server refused to prepare it (``max_prepared_stmt_count``
    reached, a proxy without prepared statements; a wrong statement then fails as a plain query), or
    its result has a DATE, DATETIME, TIMESTAMP or TIME column, which binary rows hold as structs.

    Binary-protocol rows cost the server less CPU than text rows (no number printed as text); the
    rows' values are the same (:class:`~airflow_provider_mysql_cdc.decoding.text_arrow.ArrowBatchDecoder`)."""
    connection = cursor.connection
    text = cursor.mogrify(sql, params)
    try:
        connection._execute_command(COMMAND.COM_STMT_PREPARE, text)
        answer = connection._read_packet().get_all_data()
    except pymysql.err.MySQLError:
        if not connection.open:  # the connection is gone: its own error says so
            raise
        cursor.execute(sql, params)
        return None
    statement, columns, parameters = struct.unpack_from("<IHH", answer, 1)
    for _ in range(parameters + bool(parameters)):  # parameter definitions, then an EOF packet
        connection._read_packet()
    types = [_column_type(connection) for _ in range(columns)]
    if columns:
        connection._read_packet()  # the EOF packet after the column definitions
    if parameters or any(code in BINARY_TEMPORAL_TYPES for code in types):
        _close_statement(connection, statement)
        cursor.execute(sql, params)
        return None
    # no cursor (CURSOR_TYPE_NO_CURSOR), one iteration, no parameters: the rows follow as a result set
    connection._execute_command(COMMAND.COM_STMT_EXECUTE, struct.pack("<IBI", statement, 0, 1))
    connection._read_query_result(unbuffered=True)
    cursor._do_get_result()
    return int(statement)


def _column_type(connection: Any) -> int:
    """The MySQL type code of the column definition packet the connection reads next."""
    definition: Any = FieldDescriptorPacket(connection._read_packet().get_all_data(), connection.encoding)
    return int(definition.type_code)


def _close_statement(connection: Any, statement: int) -> None:
    """Deallocate a prepared statement (the server sends no answer)."""
    connection._execute_command(COMMAND.COM_STMT_CLOSE, struct.pack("<I", statement))


def staged_record_batches(
    connection: Any,
    specs: Sequence[ColumnSpec],
    sql: str,
    params: Sequence[Any] | None,
    fetch_rows: int,
    *,
    fast: bool = True,
    fetch_bytes: int = FETCH_BYTES,
    prepared: bool = True,
) -> Generator[pa.RecordBatch, None, None]:
    """The snapshot rows of ``sql`` (a ``SELECT`` of :func:`select_expressions` on a connection that ran
    :data:`SNAPSHOT_SESSION_STATEMENTS`) as record batches of ``arrow_schema(specs)`` of at most
    ``fetch_rows`` rows (and, read fast, ``fetch_bytes`` of row packets unless one row is
    larger): ``_cdc_op`` ``'r'``, ``_cdc_seq`` counting from 0, no GTID, no commit time.

    Read fast, the ``SELECT`` runs as a prepared statement (binary-protocol rows; ``prepared=False``:
    as a plain query, text-protocol rows, for comparisons). ``fast=False`` reads with PyMySQL
    (``fetchmany``) and converts with :class:`SnapshotRowConverter`, the reader before this module;
    all give equal batches. PyMySQL errors propagate."""
    schema = arrow_schema(specs)
    cursor = connection.cursor(pymysql.cursors.SSCursor)
    staged = 0
    try:
        if fast:
            statement = None
            if prepared:
                statement = _execute_prepared(cursor, sql, params)
            else:
                cursor.execute(sql, params)
            result = cursor._result
            binary_fields = (
                None if statement is None else [(f.type_code, bool(f.flags & _UNSIGNED)) for f in result.fields]
            )
            decoder = ArrowBatchDecoder(specs, result.converters, binary_fields)
            cdc_columns = _CdcColumns()
            batches = read_raw_batches(cursor, fetch_rows, fetch_bytes)
            try:
                for raw in batches:
                    arrays = decoder.decode(raw)
                    arrays += cdc_columns(raw.rows, staged)
                    staged += raw.rows
                    del raw  # the row packets are not kept while the batch is staged
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
                    del arrays
            finally:
                batches.close()  # rows left unread: the connection is closed, its statement with it
                if statement is not None and connection.open:
                    _close_statement(connection, statement)
        else:
            cursor.execute(sql, params)
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
