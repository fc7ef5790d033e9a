"""Compressed binlog transactions (``Transaction_payload_event``) read by :mod:`transaction_payload`.

The two fixtures are payload event bodies (after the 19-byte header, without the CRC32) copied from
a binlog written by the local MySQL 9.7.4 test server for a session with
``binlog_transaction_compression=ON``, table ``ex.t (id INT PRIMARY KEY, v VARCHAR(20), j JSON)``.
The expected values are what ``SHOW BINLOG EVENTS`` printed for them: the payload's
``decompressed_size`` and the inner events' types and Xids. Variants (other compression levels,
several frames, no compression, damaged bodies) are built from the fixtures' own inner events.
"""

from __future__ import annotations

import itertools
import struct
import tracemalloc

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_mysql_cdc.capture.transaction_payload import (
    EVENT_HEADER_LENGTH,
    CompressionType,
    PayloadHeader,
    inner_events,
    read_payload_header,
)
from airflow_provider_mysql_cdc.errors import TerminalCdcError, TransactionPayloadError

# MySQL 9.7.4, "INSERT INTO ex.t VALUES (1, 'one', '{"a": 1}')" (autocommit):
# compression='ZSTD', decompressed_size=217 bytes; Query BEGIN, Table_map, Write_rows, Xid (xid=21).
SINGLE_INSERT_BODY = bytes.fromhex(
    "0201000301d90101a100"  # compression 0 (ZSTD), uncompressed size 217, payload size 161, end mark
    "28b52ffd20d9c5040012081d29706bd201f00240a8aaaaea0200745dfef27b39857065087f16f37adce7629dcf5d3f70a3"
    "46c8263205ffff0131905c78979e6e00b35cf2ef317713188a4ea71b519ae935718077fca4bb85de91f40832d7ba0673b7"
    "f29521831b057938acea63e1f82e0d9390c579d1134b47377e63b90c6e540f00a004c4e52a92a082057d602c45300d9a03"
    "178cb02ab79c656920302864005e"
)
# MySQL 9.7.4, "BEGIN; INSERT (2, 'two', NULL); UPDATE ... id = 1; DELETE ... id = 2; COMMIT":
# compression='ZSTD', decompressed_size=456 bytes (a 3-byte length-encoded value: fc c8 01);
# Query BEGIN, then Table_map + Write_rows, Table_map + Update_rows, Table_map + Delete_rows, Xid (xid=23).
MULTI_STATEMENT_BODY = bytes.fromhex(
    "0201000303fcc8010101c200"
    "28b52ffd60c800c50500e2c81f29806b1a0350631ed1044d4024154d393ed4124748165ea140b42303ad27631ab8eff5e3"
    "fe646fb9650affff0131a8a88ebb4856b92e3dad018debf4195974196f7f18e70e27548a8e4e6b44518c66130888cfcfc2"
    "55a138643d82dd3d5da3c1b5f29761939ff57034b0eb67e11933cfb210c699d2134b47337e83c14d7e561800a004821b58"
    "47803fb0783206b5608e9e98841a718335e00f2c76da8056d0027653042ba03970c108ab72cb59960602834206e005"
)
QUERY, TABLE_MAP, WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS, XID = 2, 19, 30, 31, 32, 16


def lenenc(value: int) -> bytes:
    """MySQL's length-encoded integer (``net_store_length``)."""
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def field(field_type: int, value: int) -> bytes:
    encoded = lenenc(value)
    return lenenc(field_type) + lenenc(len(encoded)) + encoded


def payload_body(
    payload: bytes, *, compression: int = 0, uncompressed_size: int | None = None, extra: bytes = b""
) -> bytes:
    """A payload event body in the field order MySQL writes (compression, uncompressed size, payload size)."""
    header = field(2, compression)
    if uncompressed_size is not None:
        header += field(3, uncompressed_size)
    return header + extra + field(1, len(payload)) + b"\x00" + payload


def real_events(body: bytes) -> list[bytes]:
    return list(inner_events(body))


def event_type(event: bytes) -> int:
    return event[4]


def with_size(event: bytes, size: int) -> bytes:
    return event[:9] + struct.pack("<I", size) + event[13:]


def test_header_fields_of_real_payloads() -> None:
    assert read_payload_header(SINGLE_INSERT_BODY) == PayloadHeader(CompressionType.ZSTD, 161, 217, 10)
    assert read_payload_header(MULTI_STATEMENT_BODY) == PayloadHeader(CompressionType.ZSTD, 194, 456, 12)


def test_inner_events_of_a_real_single_insert() -> None:
    events = real_events(SINGLE_INSERT_BODY)
    assert [event_type(e) for e in events] == [QUERY, TABLE_MAP, WRITE_ROWS, XID]
    assert events[0].endswith(b"BEGIN")
    # No checksum: the Xid event is its header plus the 8-byte xid, and the sizes add up.
    assert len(events[-1]) == EVENT_HEADER_LENGTH + 8
    assert int.from_bytes(events[-1][EVENT_HEADER_LENGTH:], "little") == 21
    assert sum(len(e) for e in events) == 217
    assert all(int.from_bytes(e[9:13], "little") == len(e) for e in events)


def test_inner_events_of_a_real_multi_statement_transaction() -> None:
    events = real_events(MULTI_STATEMENT_BODY)
    assert [event_type(e) for e in events] == [
        QUERY,
        TABLE_MAP,
        WRITE_ROWS,
        TABLE_MAP,
        UPDATE_ROWS,
        TABLE_MAP,
        DELETE_ROWS,
        XID,
    ]
    assert int.from_bytes(events[-1][EVENT_HEADER_LENGTH:], "little") == 23
    assert sum(len(e) for e in events) == 456


@pytest.mark.parametrize("level", [1, 3, 19, 22])
def test_any_compression_level_gives_the_same_events(level: int) -> None:
    events = real_events(MULTI_STATEMENT_BODY)
    raw = b"".join(events)
    compressed = zstandard.ZstdCompressor(level=level).compress(raw)
    assert real_events(payload_body(compressed, uncompressed_size=len(raw))) == events


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=456), max_size=6), st.booleans())
def test_frames_may_split_the_stream_anywhere(cuts: list[int], frame_sizes: bool) -> None:
    events = real_events(MULTI_STATEMENT_BODY)
    raw = b"".join(events)
    bounds = [0, *sorted(cuts), len(raw)]
    compressor = zstandard.ZstdCompressor(write_content_size=frame_sizes)
    compressed = b"".join(compressor.compress(raw[a:b]) for a, b in itertools.pairwise(bounds))
    assert real_events(payload_body(compressed, uncompressed_size=len(raw))) == events


def test_uncompressed_payloads_are_read_as_stored() -> None:
    events = real_events(SINGLE_INSERT_BODY)
    body = payload_body(b"".join(events), compression=255)
    assert read_payload_header(body).compression is CompressionType.NONE
    assert read_payload_header(body).uncompressed_size == 217  # defaults to the payload size
    assert real_events(body) == events


def test_unknown_header_fields_are_skipped_by_their_length() -> None:
    events = real_events(SINGLE_INSERT_BODY)
    compressed = SINGLE_INSERT_BODY[10:]
    body = payload_body(compressed, uncompressed_size=217, extra=bytes([9, 3, 0xAA, 0xBB, 0xCC]))
    assert real_events(body) == events


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (payload_body(SINGLE_INSERT_BODY[10:], compression=1, uncompressed_size=217), "unknown payload compression"),
        (field(2, 0) + field(3, 217) + b"\x00" + SINGLE_INSERT_BODY[10:], "without payload size"),
        (SINGLE_INSERT_BODY[:-1], "does not fill"),
        (SINGLE_INSERT_BODY + b"\x00", "does not fill"),
        (bytes([2, 2, 0]) + SINGLE_INSERT_BODY[3:], "says 2 bytes but its value takes 1"),
        (bytes([2, 1, 0xFB]) + SINGLE_INSERT_BODY[3:], "invalid length-encoded integer"),
        (bytes([2, 1]), "ends inside a field"),
    ],
)
def test_malformed_headers_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(TransactionPayloadError, match=message):
        real_events(body)


def damaged(events: list[bytes], *, uncompressed_size: int | None = None, tail: bytes = b"") -> bytes:
    raw = b"".join(events)
    size = len(raw) if uncompressed_size is None else uncompressed_size
    return payload_body(zstandard.ZstdCompressor().compress(raw) + tail, uncompressed_size=size)


def test_damaged_payloads_are_refused() -> None:
    events = real_events(MULTI_STATEMENT_BODY)
    compressed = MULTI_STATEMENT_BODY[12:]
    cases = {
        "ends inside the event|add up|hold": payload_body(compressed[:-20], uncompressed_size=456),
        "corrupt": damaged(events, tail=b"garbage!"),
        "the payload header says 500": damaged(events, uncompressed_size=500),
        "ends past the uncompressed size 400": damaged(events, uncompressed_size=400),
        "inside a payload": damaged([events[0], events[1][:4] + b"\x28" + events[1][5:], *events[2:]]),
        "size 18 is outside": damaged([events[0], with_size(events[1], 18), *events[2:]]),
        "the payload ends inside the event header": damaged([*events, events[0][:10]]),
        "the payload ends inside the event$|ends past": damaged([*events, events[1][:-1]]),
    }
    for message, body in cases.items():
        with pytest.raises(TransactionPayloadError, match=message):
            real_events(body)
    assert issubclass(TransactionPayloadError, TerminalCdcError)


def test_an_inner_event_larger_than_the_limit_is_refused_before_it_is_read() -> None:
    with pytest.raises(TransactionPayloadError, match=r"#1 .*size 67 is outside 19\.\.66"):
        list(inner_events(MULTI_STATEMENT_BODY, max_event_size=66))


def test_events_are_decompressed_one_at_a_time() -> None:
    """A 24 MB transaction (3,000 Write_rows events of 1,000 rows, as MySQL splits big statements at
    ``binlog_row_event_max_size``, 8 KiB by default) is read with a Python heap that grows by far less
    than the transaction: the compressed payload, a read-ahead chunk and one event."""
    begin, table_map, write_rows, _, xid = (real_events(MULTI_STATEMENT_BODY)[i] for i in (0, 1, 2, 3, 7))
    row = write_rows[-9:]
    assert row == bytes.fromhex("0402000000") + b"\x03two"  # null bitmap (j NULL), id 2, v 'two'
    big_rows = write_rows[: -len(row)] + row * 1_000
    big_rows = with_size(big_rows, len(big_rows))
    events = 3_000
    raw = begin + table_map + big_rows * events + xid
    body = payload_body(zstandard.ZstdCompressor(level=3).compress(raw), uncompressed_size=len(raw))
    assert len(raw) > 24_000_000
    assert len(body) < 1_000_000
    del raw
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        counts: dict[int, int] = {}
        for event in inner_events(body):
            counts[event_type(event)] = counts.get(event_type(event), 0) + 1
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert counts == {QUERY: 1, TABLE_MAP: 1, WRITE_ROWS: events, XID: 1}
    assert peak < 500_000, f"peak Python heap grew by {peak} bytes"
