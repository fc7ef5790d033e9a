"""The binlog reader's pure protocol code against byte layouts from MySQL's source and a real server.

Fixtures marked "MySQL 9.7.4" are event bodies copied from a binlog written by the local test server
(after the 19-byte header, without the CRC32); the expected values are what ``mysqlbinlog -v`` printed.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysqlreplication import binlogstream
from pymysqlreplication.gtid import GtidSet as LibraryGtidSet

from airflow_provider_mysql_cdc.capture.binlog_library import DumpGtidSet, install_stream_hooks
from airflow_provider_mysql_cdc.capture.binlog_protocol import (
    ANONYMOUS_GTID_LOG_EVENT,
    EXECUTE_LOAD_QUERY_POST_HEADER_LENGTH,
    GTID_LOG_EVENT,
    GTID_TAGGED_LOG_EVENT,
    INCIDENT_EVENT,
    decode_gtid_event,
    encode_gtid_set,
    encode_varlen_uint,
    query_event_parts,
    read_varlen_int,
    read_varlen_uint,
    server_version_text,
)
from airflow_provider_mysql_cdc.capture.binlog_reader import BinlogReader, _anonymous_transaction_error, _SeenGtids
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.errors import BinlogStreamError

SERVER_UUID = "08a9112c-e638-11f1-8cf2-02fc00000001"
OTHER_UUID = "aaaaaaaa-0000-0000-0000-000000000001"

# MySQL 9.7.4: '08a9112c-...:3', last_committed=2 sequence_number=3, immediate=original=1795326383644803.
UNTAGGED_BODY = bytes.fromhex(
    "0008a9112ce63811f18cf202fc000000010300000000000000020200000000000000030000000000000083605affd66006fc200150620100"
)
# MySQL 9.7.4: '08a9112c-...:5' with original_commit_timestamp=1500000000123456 set by the session.
UNTAGGED_BODY_WITH_ORIGINAL = bytes.fromhex(
    "00"
    "08a9112ce63811f18cf202fc00000001"
    "0500000000000000"
    "02"
    "0200000000000000"
    "0600000000000000"
    "88b5cc11d76086"
    "40a22bf73d5405"
    "fc2701"
    "50620100"
)
# MySQL 9.7.4: '08a9112c-...:etl:1', immediate=original=1795326383646416, transaction_length=287.
TAGGED_BODY = bytes.fromhex(
    "02"
    "6e"
    "00"  # format version 1, message size 55, last non-ignorable field 0
    "0000"  # field 0: flags 0
    "02"
    "10a502225899037022c5033102c90304f103000000"
    "02"  # field 1: uuid, 16 varlen bytes
    "0404"
    "0606"
    "65746c"
    "0808"
    "0a10"  # gno 1, tag "etl", last_committed 2, sequence_number 4
    "0c"
    "7fd0665affd66006"  # field 6: immediate_commit_timestamp (8-byte varlen)
    "107d04"
    "1283120b"  # transaction_length 287, immediate_server_version 90704
)
# MySQL 9.7.4: 'aaaaaaaa-0000-0000-0000-000000000001:etl:7' with original_commit_timestamp=1500000000654321.
TAGGED_BODY_WITH_ORIGINAL = bytes.fromhex(
    "02"
    "7c"
    "00"
    "0000"
    "02"
    "a902a902a902a902"
    "0000000000000000000000"
    "02"
    "041c"
    "0606"
    "65746c"
    "0808"
    "0a20"  # gno 7, tag "etl", last_committed 2, sequence_number 8
    "0c"
    "7f18bfcc11d76006"
    "0e"
    "7ff1bb33f73d5405"  # fields 6 and 7: immediate, original timestamp
    "109904"
    "1283120b"
)


def uint_fields(*values: int) -> bytes:
    return b"".join(encode_varlen_uint(value) for value in values)


def sint(value: int) -> int:
    """The unsigned form of a signed varlen integer (``write_varlen_bytes_signed``)."""
    return (value << 1) if value >= 0 else ((-(value + 1)) << 1) | 1


def tagged_body(fields: list[tuple[int, bytes]]) -> bytes:
    """A ``Gtid_tagged_log_event`` body: format version 1, size, last non-ignorable id 0, fields."""
    payload = b"".join(encode_varlen_uint(field_id) + data for field_id, data in fields)
    for size in range(len(payload) + 3, len(payload) + 20):
        head = encode_varlen_uint(1) + encode_varlen_uint(size) + encode_varlen_uint(0)
        if len(head) + len(payload) == size:
            return head + payload
    raise AssertionError("unreachable")


def uuid_field(text: str) -> bytes:
    return uint_fields(*bytes.fromhex(text.replace("-", "")))


# -- variable-length integers (libs/mysql/serialization/readme.md) ------------------------------


def test_varlen_examples_from_the_serialization_readme() -> None:
    # "00000111 11111111 11111011" (big-endian display): 65535 unsigned in 3 bytes.
    assert encode_varlen_uint(65535) == bytes([0b11111011, 0b11111111, 0b00000111])
    assert read_varlen_uint(bytes([0b11111011, 0b11111111, 0b00000111]), 0) == (65535, 3)
    # Signed: 65535, -65535, -65536.
    assert read_varlen_int(bytes([0b11110011, 0b11111111, 0b00001111]), 0) == (65535, 3)
    assert read_varlen_int(bytes([0b11101011, 0b11111111, 0b00001111]), 0) == (-65535, 3)
    assert read_varlen_int(bytes([0b11111011, 0b11111111, 0b00001111]), 0) == (-65536, 3)


@pytest.mark.parametrize(
    ("value", "size"),
    [(0, 1), (127, 1), (128, 2), (2**14 - 1, 2), (2**14, 3), (2**56 - 1, 8), (2**56, 9), (2**64 - 1, 9)],
)
def test_varlen_sizes(value: int, size: int) -> None:
    encoded = encode_varlen_uint(value)
    assert len(encoded) == size
    assert read_varlen_uint(b"\xee" + encoded + b"\xee", 1) == (value, size + 1)


@given(st.integers(0, 2**64 - 1))
def test_varlen_round_trip(value: int) -> None:
    encoded = encode_varlen_uint(value)
    assert read_varlen_uint(encoded, 0) == (value, len(encoded))


@given(st.integers(-(2**63), 2**63 - 1))
def test_signed_varlen_round_trip(value: int) -> None:
    encoded = encode_varlen_uint(sint(value))
    assert read_varlen_int(encoded, 0) == (value, len(encoded))


def test_varlen_truncated_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="needs 3 bytes"):
        read_varlen_uint(bytes([0b11111011, 0xFF]), 0)
    with pytest.raises(ValueError, match="no data"):
        read_varlen_uint(b"", 0)
    with pytest.raises(ValueError):
        encode_varlen_uint(2**64)


# -- Gtid_log_event (type 33) -------------------------------------------------------------------


def test_untagged_gtid_event_from_the_server() -> None:
    data = decode_gtid_event(GTID_LOG_EVENT, UNTAGGED_BODY)
    assert data.gtid == Gtid(SERVER_UUID, "", 3)
    assert data.immediate_commit_ts_us == data.original_commit_ts_us == 1795326383644803


def test_untagged_gtid_event_with_original_commit_timestamp() -> None:
    data = decode_gtid_event(GTID_LOG_EVENT, UNTAGGED_BODY_WITH_ORIGINAL)
    assert data.gtid == Gtid(SERVER_UUID, "", 5)
    assert data.original_commit_ts_us == 1500000000123456
    assert data.immediate_commit_ts_us == 1795326693127560


def test_untagged_gtid_event_hand_built() -> None:
    immediate, original = 1_700_000_000_000_001, 1_600_000_000_000_002
    head = b"\x01" + bytes.fromhex(OTHER_UUID.replace("-", "")) + struct.pack("<q", 2**62) + b"\x02"
    logical = struct.pack("<QQ", 7, 8)
    both = (immediate | 1 << 55).to_bytes(7, "little") + original.to_bytes(7, "little")
    data = decode_gtid_event(GTID_LOG_EVENT, head + logical + both + b"\x05")
    assert (data.gtid, data.immediate_commit_ts_us, data.original_commit_ts_us) == (
        Gtid(OTHER_UUID, "", 2**62),
        immediate,
        original,
    )
    only = decode_gtid_event(GTID_LOG_EVENT, head + logical + immediate.to_bytes(7, "little"))
    assert only.immediate_commit_ts_us == only.original_commit_ts_us == immediate


def test_untagged_gtid_event_without_timestamps_is_rejected() -> None:
    with pytest.raises(BinlogStreamError, match="no commit timestamps"):
        decode_gtid_event(GTID_LOG_EVENT, UNTAGGED_BODY[:42])


# -- Gtid_tagged_log_event (type 42) ------------------------------------------------------------


def test_tagged_gtid_event_from_the_server() -> None:
    data = decode_gtid_event(GTID_TAGGED_LOG_EVENT, TAGGED_BODY)
    assert data.gtid == Gtid(SERVER_UUID, "etl", 1)
    assert data.immediate_commit_ts_us == data.original_commit_ts_us == 1795326383646416


def test_tagged_gtid_event_with_original_commit_timestamp() -> None:
    data = decode_gtid_event(GTID_TAGGED_LOG_EVENT, TAGGED_BODY_WITH_ORIGINAL)
    assert data.gtid == Gtid(OTHER_UUID, "etl", 7)
    assert data.original_commit_ts_us == 1500000000654321
    assert data.immediate_commit_ts_us == 1795326693130008


def test_tagged_gtid_event_hand_built() -> None:
    body = tagged_body(
        [
            (0, uint_fields(1)),  # flags
            (1, uuid_field(OTHER_UUID)),
            (2, uint_fields(sint(2**63 - 2))),  # gno
            (3, encode_varlen_uint(6) + b"Backup"),
            (4, uint_fields(sint(41))),
            (5, uint_fields(sint(42))),
            (6, uint_fields(1_700_000_000_000_001)),
            (7, uint_fields(1_600_000_000_000_002)),
            (8, uint_fields(300)),  # transaction_length and later fields are skipped
            (9, uint_fields(90704)),
            (10, uint_fields(80036)),
            (11, uint_fields(5)),
        ]
    )
    data = decode_gtid_event(GTID_TAGGED_LOG_EVENT, body)
    assert data.gtid == Gtid(OTHER_UUID, "backup", 2**63 - 2)
    assert (data.immediate_commit_ts_us, data.original_commit_ts_us) == (1_700_000_000_000_001, 1_600_000_000_000_002)
    assert data.original_server_version == 80036


def test_the_server_version_a_transaction_originated_on() -> None:
    """MySQL 9.7.4's events carry 90704 (immediate and original alike); a replicated transaction carries
    its origin's version after the immediate one's (bit 31 set); before 8.0.14 there is none (0), and
    MySQL's "undefined" 999999 is none too."""
    for body in (UNTAGGED_BODY, UNTAGGED_BODY_WITH_ORIGINAL):
        assert decode_gtid_event(GTID_LOG_EVENT, body).original_server_version == 90704
    for body in (TAGGED_BODY, TAGGED_BODY_WITH_ORIGINAL):
        assert decode_gtid_event(GTID_TAGGED_LOG_EVENT, body).original_server_version == 90704
    head = UNTAGGED_BODY[:49]
    replicated = head + b"\xfc\x20\x01" + (90704 | 1 << 31).to_bytes(4, "little") + (80403).to_bytes(4, "little")
    assert decode_gtid_event(GTID_LOG_EVENT, replicated).original_server_version == 80403
    long_transaction = head + b"\xfe" + (2**40).to_bytes(8, "little") + (80036).to_bytes(4, "little")
    assert decode_gtid_event(GTID_LOG_EVENT, long_transaction).original_server_version == 80036
    assert decode_gtid_event(GTID_LOG_EVENT, head + b"\x05").original_server_version == 0
    undefined = head + b"\x05" + (999999).to_bytes(4, "little")
    assert decode_gtid_event(GTID_LOG_EVENT, undefined).original_server_version == 0
    tagged = tagged_body(
        [(1, uuid_field(OTHER_UUID)), (2, uint_fields(sint(3))), (6, uint_fields(1)), (9, uint_fields(80403))]
    )
    assert decode_gtid_event(GTID_TAGGED_LOG_EVENT, tagged).original_server_version == 80403
    assert server_version_text(80403) == "8.4.3" and server_version_text(90704) == "9.7.4"
    with pytest.raises(BinlogStreamError, match="malformed GTID event"):
        decode_gtid_event(GTID_LOG_EVENT, head + b"\x05" + (1 << 31 | 90704).to_bytes(4, "little") + b"\x01")


def test_tagged_gtid_event_missing_fields_or_truncated() -> None:
    no_timestamp = tagged_body([(1, uuid_field(OTHER_UUID)), (2, uint_fields(sint(3)))])
    with pytest.raises(BinlogStreamError, match="without uuid, gno or commit timestamp"):
        decode_gtid_event(GTID_TAGGED_LOG_EVENT, no_timestamp)
    with pytest.raises(BinlogStreamError, match="malformed GTID event"):
        decode_gtid_event(GTID_TAGGED_LOG_EVENT, TAGGED_BODY[:20])
    with pytest.raises(BinlogStreamError, match="not a GTID event"):
        decode_gtid_event(2, UNTAGGED_BODY)


# -- Gtid_set::encode (sql/rpl_gtid_set.cc) -----------------------------------------------------

UUID_BYTES = bytes.fromhex(SERVER_UUID.replace("-", ""))
OTHER_BYTES = bytes.fromhex(OTHER_UUID.replace("-", ""))


def test_encode_empty_set() -> None:
    assert encode_gtid_set(GtidSet()) == bytes(8)


def test_encode_untagged_set() -> None:
    encoded = encode_gtid_set(GtidSet.parse(f"{SERVER_UUID}:1-5:7,{OTHER_UUID}:3"))
    assert encoded == (
        struct.pack("<Q", 2)
        + UUID_BYTES
        + struct.pack("<Q", 2)
        + struct.pack("<QQ", 1, 6)  # intervals are half-open: 1-5 is [1, 6)
        + struct.pack("<QQ", 7, 8)
        + OTHER_BYTES
        + struct.pack("<Q", 1)
        + struct.pack("<QQ", 3, 4)
    )


def test_encode_tagged_set() -> None:
    encoded = encode_gtid_set(GtidSet.parse(f"{SERVER_UUID}:1-3:etl:2-4:x:9"))
    # n_sids = 3 in the tagged format: format byte 1 in the lowest and the highest byte.
    assert encoded[:8] == bytes([0x01, 0x03, 0, 0, 0, 0, 0, 0x01])
    assert encoded[8:] == (
        UUID_BYTES
        + b"\x00"  # no tag: length 0
        + struct.pack("<QQQ", 1, 1, 4)
        + UUID_BYTES
        + b"\x06etl"  # varlen length 3, then the tag
        + struct.pack("<QQQ", 1, 2, 5)
        + UUID_BYTES
        + b"\x02x"
        + struct.pack("<QQQ", 1, 9, 10)
    )


@given(
    st.lists(
        st.tuples(st.sampled_from([SERVER_UUID, OTHER_UUID]), st.integers(1, 10**6), st.integers(0, 50)),
        max_size=6,
    )
)
def test_untagged_encoding_equals_the_librarys(pieces: list[tuple[str, int, int]]) -> None:
    gtids = GtidSet.from_intervals({(uuid, ""): [(first, first + span)] for uuid, first, span in pieces})
    library = LibraryGtidSet(str(gtids) or None)
    assert encode_gtid_set(gtids) == library.encoded()


def test_dump_encoding_hook_leaves_other_callers_with_the_librarys_class() -> None:
    install_stream_hooks()
    install_stream_hooks()  # idempotent
    text = f"{SERVER_UUID}:1-5"
    assert isinstance(binlogstream.GtidSet(text), LibraryGtidSet)
    ours = DumpGtidSet(GtidSet())
    assert binlogstream.GtidSet(ours) is ours
    assert bool(ours) and ours.encoded_length == 8 and ours.encoded() == bytes(8)


@given(st.lists(st.tuples(st.sampled_from(["", "etl"]), st.integers(1, 30)), max_size=40))
def test_seen_gtids_matches_a_set(numbers: list[tuple[str, int]]) -> None:
    seen = _SeenGtids()
    model: set[Gtid] = set()
    for tag, number in numbers:
        gtid = Gtid(SERVER_UUID, tag, number)
        assert (gtid in seen) == (gtid in model)
        seen.add(gtid)
        model.add(gtid)
    every = [Gtid(SERVER_UUID, tag, number) for tag in ("", "etl") for number in range(32)]
    assert {gtid for gtid in every if gtid in seen} == model
    assert seen.as_gtid_set() == GtidSet.of(model)


def test_query_statement_bytes_are_taken_after_the_status_variables_and_the_schema() -> None:
    status = b"\x00\x00\x00\x00\x00" + b"\x04\x08\x00\x08\x00\xff\x00" + b"\x15\x00"  # flags2, charset, key 0x15
    post_header = struct.pack("<IIBHH", 17, 0, len(b"shop"), 0, len(status))
    statement = "ALTER TABLE t ADD c VARCHAR(9) DEFAULT 'café'".encode("latin-1")
    body = post_header + status + b"shop\x00" + statement
    assert query_event_parts(body) == (b"shop", statement)
    assert query_event_parts(memoryview(body)) == (b"shop", statement)
    with pytest.raises(ValueError, match="shorter than its post-header"):
        query_event_parts(body[:10])
    with pytest.raises(ValueError, match="end past"):
        query_event_parts(post_header + status[:3])


def test_a_load_data_events_schema_and_statement_follow_its_longer_post_header() -> None:
    status = b"\x00\x00\x00\x00\x00"
    post_header = struct.pack("<IIBHH", 17, 0, len(b"shop"), 0, len(status)) + struct.pack("<IIIB", 1, 21, 32, 2)
    statement = b"LOAD DATA LOCAL INFILE '/tmp/f.csv' REPLACE INTO TABLE t"
    body = post_header + status + b"shop\x00" + statement
    assert query_event_parts(body, EXECUTE_LOAD_QUERY_POST_HEADER_LENGTH) == (b"shop", statement)


def test_an_incident_event_stops_the_stream_by_name() -> None:
    """MySQL writes ``Incident_log_event`` when it may have lost changes it could not log; a replica
    stops there. A release server cannot be made to write one: the event is built by hand."""
    reader = BinlogReader(
        MySqlConnectionConfig(host="127.0.0.1", port=1, user="cdc"), after=GtidSet.parse(""), replica_server_id=7
    )
    incident = SimpleNamespace(event_type=INCIDENT_EVENT, packet=SimpleNamespace(log_pos=4242))
    with pytest.raises(BinlogStreamError, match=r"Incident event .* end position 4242\): it may have lost changes"):
        list(reader._items_for(incident))


def test_an_anonymous_transaction_stops_the_stream_with_where_it_is_and_the_fix() -> None:
    """A reader asking by GTID set gets MySQL's refusal (error 1236, tested against the server in
    ``test_an_anonymous_transaction_stops_every_capture_until_a_new_pipeline``); the event itself only
    reaches a reader asking by position. Both stops say where the transaction is and what to do."""
    frontier = GtidSet.parse(f"{SERVER_UUID}:1-6")
    reader = BinlogReader(
        MySqlConnectionConfig(host="127.0.0.1", port=1, user="cdc"), after=frontier, replica_server_id=7
    )
    reader._binlog_file = "binlog.000002"
    anonymous = SimpleNamespace(event_type=ANONYMOUS_GTID_LOG_EVENT, packet=SimpleNamespace(log_pos=277))
    with pytest.raises(BinlogStreamError) as stopped:
        list(reader._items_for(anonymous))
    message = str(stopped.value)
    where = "without a GTID in binlog.000002 at position 277"
    assert message.startswith(f"the binlog holds a transaction {where}, after the frontier {frontier} ("), message
    assert "SET PERSIST gtid_mode = ON_PERMISSIVE, then ON" in message and "FLUSH BINARY LOGS" in message
    refusal = (
        "Cannot replicate anonymous transaction when AUTO_POSITION = 1, at file /data/binlog.000009, position 198."
    )
    after_one = str(_anonymous_transaction_error(Gtid(SERVER_UUID, "", 8), refusal))
    assert "without a GTID in binlog.000009 at position 198, after transaction " + SERVER_UUID + ":8 (" in after_one
    assert "/data" not in after_one
    unplaced = str(_anonymous_transaction_error(GtidSet.parse(""), "Cannot replicate anonymous transaction"))
    assert "without a GTID, after the frontier (empty) (" in unplaced
    assert "(MySQL: Cannot replicate anonymous transaction)" in unplaced
