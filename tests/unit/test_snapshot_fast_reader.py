"""The fast snapshot reader on synthetic result streams (pure logic; the real server's results are
compared with the PyMySQL path in ``tests/integration/test_snapshot_fast_reader.py``).

* Framing: row packets split at arbitrary read boundaries, rows of 16 MiB and more split over
  several packets, the EOF packet, an error packet after some rows, a wrong sequence number, a
  connection that ends mid-row, a reader closed early; batches respect their row and byte limits.
* Decoding: length-encoded values of every header size (1 byte, 0xFC, 0xFD, 0xFE) and NULLs give
  the values PyMySQL's own row parser and ``SnapshotRowConverter`` give for the same packets.
"""

from __future__ import annotations

import random
import struct
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pymysql
import pytest
from pymysql.connections import MySQLResult
from pymysql.protocol import MysqlPacket

from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.decoding.text_arrow import ArrowBatchDecoder, RawBatch
from airflow_provider_mysql_cdc.decoding.text_rows import SnapshotRowConverter
from airflow_provider_mysql_cdc.errors import RowPacketError
from airflow_provider_mysql_cdc.snapshot.fast_reader import read_raw_batches

MAX = 0xFFFFFF
EOF = b"\xfe\x02\x00\x22\x00"  # 2 warnings, status 0x22


def lenenc(value: bytes | None) -> bytes:
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


def packets(payload: bytes, seq: int) -> tuple[bytes, int]:
    """The packets of one payload (split at 16 MiB - 1, an empty last packet when needed); next seq."""
    out = []
    while True:
        part, payload = payload[:MAX], payload[MAX:]
        out.append(len(part).to_bytes(3, "little") + bytes([seq]) + part)
        seq = (seq + 1) % 256
        if len(part) < MAX:
            return b"".join(out), seq


def stream(payloads: list[bytes], terminal: bytes = EOF, first_seq: int = 5) -> bytes:
    data = b""
    seq = first_seq
    for payload in payloads:
        chunk, seq = packets(payload, seq)
        data += chunk
    return data + packets(terminal, seq)[0]


class FakeFile:
    """``read1`` returning the stream in pieces of the given sizes (then the rest), b'' at the end."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data = data
        self.sizes = sizes
        self.offset = 0
        self.calls = 0

    def read1(self, size: int) -> bytes:
        self.calls += 1
        want = min(size, self.sizes[(self.calls - 1) % len(self.sizes)] if self.sizes else size)
        piece = self.data[self.offset : self.offset + want]
        self.offset += len(piece)
        return piece


class FakeConnection:
    def __init__(self, data: bytes, sizes: list[int], first_seq: int = 5) -> None:
        self._rfile: FakeFile | None = FakeFile(data, sizes)
        self._next_seq_id = first_seq
        self.force_closed = False

    def _force_close(self) -> None:
        self.force_closed = True
        self._rfile = None


def cursor_over(data: bytes, sizes: list[int] | None = None, first_seq: int = 5) -> Any:
    connection = FakeConnection(data, sizes or [], first_seq)
    result = SimpleNamespace(unbuffered_active=True, warning_count=0, has_next=None, connection=connection, rows=None)
    return SimpleNamespace(connection=connection, _result=result)


def rows_of(batches: list[RawBatch]) -> list[bytes]:
    """Each row's payload (joined rows included), in order."""
    out = []
    for batch in batches:
        heads = batch.heads.to_pylist()
        ends = [*heads[1:], len(batch.data)]
        out += [bytes(batch.data[head + 4 : end]) for head, end in zip(heads, ends, strict=True)]
    return out


def random_payloads(rng: random.Random, count: int) -> list[bytes]:
    lengths = [0, 1, 250, 251, 252, 300] * 6 + [65535, 65536, 70000]  # mostly short rows
    payloads = []
    for _ in range(count):
        values = [None if rng.random() < 0.2 else bytes([rng.randrange(256)]) * rng.choice(lengths) for _ in range(3)]
        payloads.append(b"".join(lenenc(value) for value in values))
    return payloads


@pytest.mark.parametrize("seed", range(4))
def test_rows_split_anywhere_come_out_whole_in_bounded_batches(seed: int) -> None:
    rng = random.Random(seed)
    payloads = random_payloads(rng, 120)
    cursor = cursor_over(stream(payloads), [rng.choice([1, 3, 7, 100, 4096, 65536]) for _ in range(50)])
    batches = list(read_raw_batches(cursor, max_rows=7, max_bytes=100_000))
    assert rows_of(batches) == payloads
    assert all(1 <= batch.rows <= 7 for batch in batches)
    assert all(len(batch.data) <= 100_000 or batch.rows == 1 for batch in batches)
    # each batch is as large as the limits allow: the next row would not have fitted
    sizes = [4 + len(payload) for payload in payloads]
    first = 0
    for batch in batches[:-1]:
        first += batch.rows
        assert batch.rows == 7 or len(batch.data) + sizes[first] > 100_000
    counts = {batch.rows for batch in batches[:-1]}
    assert 7 in counts and min(counts) < 7  # both limits were reached
    result, connection = cursor._result, cursor.connection
    assert result.unbuffered_active is False and result.warning_count == 2 and result.has_next is False
    assert connection._next_seq_id == (5 + 121) % 256 and not connection.force_closed


def test_rows_of_16_mib_and_more_are_joined_from_their_packets() -> None:
    big = [
        lenenc(b"a" * (MAX - 4)),  # exactly 16 MiB - 1 payload: an empty packet follows
        b"\x01x" + lenenc(b"c" * (2 * MAX + 10)),  # three packets, a 0xFE header inside
        lenenc(b"d" * (1 << 24)),  # 0xFE header first: a full first packet that starts with 0xFE
    ]
    assert len(big[0]) == MAX
    payloads = [b"\x01s", big[0], b"\x01t", big[1], big[2], b"\x01u"]
    for max_rows in (1, 100):
        cursor = cursor_over(stream(payloads, first_seq=250), [65536], first_seq=250)
        batches = list(read_raw_batches(cursor, max_rows=max_rows, max_bytes=1 << 20))
        assert rows_of(batches) == payloads
        packets_sent = sum(len(p) // MAX + 1 for p in payloads) + 1
        assert cursor.connection._next_seq_id == (250 + packets_sent) % 256
        assert not cursor.connection.force_closed


def test_an_error_packet_after_rows_raises_pymysqls_error_and_keeps_the_connection() -> None:
    error = b"\xff" + struct.pack("<H", 1242) + b"#21000Subquery returns more than 1 row"
    payloads = [b"\x011", b"\x012", b"\x013"]
    cursor = cursor_over(stream(payloads, terminal=error), [5])
    seen: list[RawBatch] = []
    with pytest.raises(pymysql.err.OperationalError) as raised:
        for batch in read_raw_batches(cursor, max_rows=2):
            seen.append(batch)
    assert raised.value.args[0] == 1242
    assert rows_of(seen) == payloads  # the rows before the error, as PyMySQL would return them
    assert cursor._result.unbuffered_active is False and not cursor.connection.force_closed


def test_a_wrong_sequence_number_closes_the_connection() -> None:
    data = bytearray(stream([b"\x011", b"\x012", b"\x013"]))
    data[6 + 3] = 99  # the second row's packet number
    cursor = cursor_over(bytes(data))
    with pytest.raises(pymysql.err.InternalError, match="sequence number wrong - got 99 expected 6"):
        list(read_raw_batches(cursor, max_rows=10))
    assert cursor.connection.force_closed


def test_a_connection_lost_mid_row_raises_2013() -> None:
    data = stream([b"\x011", b"\x02ab"])
    cursor = cursor_over(data[: len(data) - len(EOF) - 6])  # ends inside the second row
    with pytest.raises(pymysql.err.OperationalError) as raised:
        list(read_raw_batches(cursor, max_rows=10))
    assert raised.value.args[0] == 2013 and cursor.connection.force_closed


def test_a_reader_closed_early_closes_the_connection_instead_of_reading_the_rest() -> None:
    cursor = cursor_over(stream([b"\x011"] * 50), [20])
    batches = read_raw_batches(cursor, max_rows=2)
    assert next(batches).rows == 2
    batches.close()
    assert cursor.connection.force_closed and cursor._result.unbuffered_active is False


def test_an_empty_result_has_no_batches() -> None:
    cursor = cursor_over(stream([]))
    assert list(read_raw_batches(cursor, max_rows=10)) == []
    assert cursor._result.unbuffered_active is False and cursor.connection._next_seq_id == 6


# -- decoding ---------------------------------------------------------------------------------------

SPECS = (
    ColumnSpec("id", "bigint", primary_key=True),
    ColumnSpec("u", "int", unsigned=True),
    ColumnSpec("t", "mediumtext", charset="utf8mb4"),
    ColumnSpec("b", "longblob", charset="binary"),
    ColumnSpec("d", "decimal", precision=12, scale=2),
    ColumnSpec("f", "double"),
    ColumnSpec("dt", "datetime", fsp=6),
    ColumnSpec("l", "varchar", charset="latin1", max_length=300),
)
#: What PyMySQL's result holds for these columns' SELECT expressions: (encoding, converter).
FIELDS: list[tuple[str | None, Any]] = [
    ("ascii", int),
    ("ascii", int),
    (None, None),  # CAST(t AS BINARY)
    (None, None),
    ("ascii", Decimal),
    ("ascii", float),
    ("utf8", None),  # CAST(dt AS CHAR)
    (None, None),
]


read_row: Any = MySQLResult._read_row_from_packet  # type: ignore[attr-defined]


def old_path(payloads: list[bytes]) -> pa.Table:
    """PyMySQL's row parser and the snapshot converter, as the engine ran them before."""
    rows = [read_row(SimpleNamespace(converters=FIELDS), MysqlPacket(p, "utf8")) for p in payloads]
    columns = SnapshotRowConverter(SPECS).convert_columns(rows)
    schema = arrow_schema(SPECS)
    return pa.Table.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(columns, schema, strict=False)],
        schema=pa.schema(list(schema)[: len(SPECS) + 1]),
    )


def fast_path(payloads: list[bytes]) -> pa.Table:
    data = b""
    heads = []
    for payload in payloads:
        heads.append(len(data))
        data += b"\0\0\0\0" + payload
    arrays = ArrowBatchDecoder(SPECS, FIELDS).decode(RawBatch(data, pa.array(heads, pa.int64())))
    return pa.Table.from_arrays(arrays, schema=pa.schema(list(arrow_schema(SPECS))[: len(SPECS) + 1]))


def row(*values: bytes | None) -> bytes:
    return b"".join(lenenc(value) for value in values)


def test_values_of_every_length_header_decode_like_pymysql() -> None:
    rng = random.Random(7)
    payloads = []
    for n in range(300):
        text = "é😀x".encode() * rng.choice([0, 1, 83, 84, 100, 21845, 21846, 30000])
        blob = bytes([rng.randrange(256)]) * rng.choice([0, 250, 251, 252, 65535, 65536, 70000])
        payloads.append(
            row(
                str(n - 150).encode(),
                None if n % 5 == 0 else str(4294967295 - n).encode(),
                None if n % 7 == 0 else text,
                None if n % 3 == 0 else blob,
                f"{n * 13 - 2000}.{n % 100:02d}".encode(),
                None if n % 4 == 0 else repr(n / 7 - 20).encode(),
                f"2024-02-{n % 28 + 1:02d} 10:11:12.{n:06d}".encode(),
                None if n % 6 == 0 else bytes(range(128, 256))[: n % 128] + b"\x81",
            )
        )
    payloads.append(row(b"0", b"0", b"", b"", b"0.00", b"-0", b"0000-00-00 00:00:00", b""))  # zero date: slow path
    fast, old = fast_path(payloads), old_path(payloads)
    assert fast.equals(old)
    assert fast.column("_cdc_invalid_values")[len(payloads) - 1].as_py() == [("dt", "0000-00-00 00:00:00")]
    assert str(fast.column("f")[len(payloads) - 1]) == "-0.0"
    assert fast.column("l")[1].as_py() == bytes(range(128, 129)).decode("cp1252") + "\x81"


def test_a_value_of_16_mib_and_more_has_an_eight_byte_length() -> None:
    huge = b"z" * ((1 << 24) + 3)
    payloads = [row(b"1", b"2", huge, huge, b"1.00", b"1", b"2024-01-01 00:00:00", None), row(b"2", *[None] * 7)]
    fast = fast_path(payloads)
    assert fast.equals(old_path(payloads))
    assert len(fast.column("b")[0].as_py()) == (1 << 24) + 3


def test_a_row_with_too_few_or_too_many_values_is_refused() -> None:
    short = row(b"1", b"2", b"t")
    long = row(b"1", b"2", b"t", b"b", b"1.00", b"1", b"2024-01-01 00:00:00", b"l", b"extra")
    good = row(b"1", b"2", b"t", b"b", b"1.00", b"1", b"2024-01-01 00:00:00", b"l")
    for payloads in ([good, long], [good, short, good], [short]):
        with pytest.raises(RowPacketError):
            fast_path(payloads)
