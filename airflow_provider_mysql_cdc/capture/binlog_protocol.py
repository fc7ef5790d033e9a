"""The binlog's byte formats that python-mysql-replication gets wrong or lacks: GTID events (tagged
and untagged, with their commit timestamps), ``mysql::serialization`` variable-length integers and the
binary GTID-set encoding of ``COM_BINLOG_DUMP_GTID``. Pure: no library or network import.

Byte formats (MySQL source, ``mysql/mysql-server``):

* ``Gtid_log_event`` (33), ``libs/mysql/binlog/event/control_events.cpp`` ``Gtid_event::Gtid_event``:
  flags(1) uuid(16) gno(int64 LE) lt_type(1, =2) last_committed(8) sequence_number(8)
  immediate_commit_timestamp(7 bytes LE, microseconds; bit 55 set means original_commit_timestamp
  (7 bytes) follows, else original == immediate), transaction_length (packed int), then
  immediate_server_version (4 bytes LE; bit 31 set means original_server_version (4 bytes) follows,
  else original == immediate; both absent before MySQL 8.0.14).
* ``Gtid_tagged_log_event`` (42), same file (``read_gtid_tagged_log_event``) and
  ``control_events.h`` (``Gtid_event::define_fields``), in the ``mysql::serialization`` format
  (``libs/mysql/serialization/readme.md``, ``serializer_default_impl.hpp``,
  ``variable_length_integers.h``): varlen format version, varlen message size (counted from the
  message's first byte), varlen last non-ignorable field id, then ``field_id data`` pairs:
  0 flags, 1 uuid (16 varlen bytes), 2 gno (signed varlen), 3 tag (varlen length + ASCII),
  4 last_committed and 5 sequence_number (signed), 6 immediate_commit_timestamp,
  7 original_commit_timestamp (omitted when equal), 8 transaction_length, 9 immediate_server_version,
  10 original_server_version (omitted when equal),
  11 commit_group_ticket.
* ``Query_log_event`` (2), ``libs/mysql/binlog/event/statement_events.cpp``: post-header (13 bytes:
  thread id(4) exec time(4) schema length(1) error code(2) status variables length(2)), the status
  variables, the schema name and a NUL, then the statement's bytes to the end of the event, in the
  session's ``character_set_client`` (the status variable ``Q_CHARSET_CODE``).
* Binary GTID set, ``sql/rpl_gtid_set.cc`` ``Gtid_set::encode`` and ``libs/mysql/gtid/tsid.cpp``,
  ``tag.cpp``: n_sids as 8 bytes LE (tagged format: ``1 << 56 | n_sids << 8 | 1``), then per
  (uuid, tag): uuid(16), [tagged format only: tag as varlen length + ASCII, ``00`` for no tag],
  n_intervals(8), and per interval start(8) and end(8), end exclusive.
"""

from __future__ import annotations

import struct
import uuid as uuid_module
from dataclasses import dataclass
from typing import Any

from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.errors import BinlogStreamError

GTID_LOG_EVENT = 0x21


GTID_TAGGED_LOG_EVENT = 0x2A


ANONYMOUS_GTID_LOG_EVENT = 0x22


_COMMIT_TS_HAS_ORIGINAL = 1 << 55


_LOGICAL_TIMESTAMP_TYPECODE = 2


def read_varlen_uint(data: bytes, pos: int) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length unsigned integer; return ``(value, next_pos)``.

    The first byte's trailing one bits + 1 give the length (1-9 bytes, little-endian); the value
    follows the length marker (``variable_length_integers.h``).
    """
    if pos >= len(data):
        raise ValueError("variable-length integer: no data")
    first = data[pos]
    size = (first ^ (first + 1)).bit_length()
    if pos + size > len(data):
        raise ValueError(f"variable-length integer: needs {size} bytes, {len(data) - pos} left")
    if size == 1:
        return first >> 1, pos + 1
    rest = int.from_bytes(data[pos + 1 : pos + size], "little")
    if size == 9:
        return rest, pos + 9
    return (first >> size) | (rest << (8 - size)), pos + size


def read_varlen_int(data: bytes, pos: int) -> tuple[int, int]:
    """Read a signed variable-length integer (sign in the lowest bit of the unsigned form)."""
    raw, pos = read_varlen_uint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varlen_uint(value: int) -> bytes:
    """Encode an unsigned integer (``< 2**64``) as ``write_varlen_bytes_unsigned`` does."""
    if not 0 <= value < 2**64:
        raise ValueError(f"{value} is not an unsigned 64-bit integer")
    size = ((value.bit_length() * 575) >> 12) + 1
    if size == 1:
        return bytes([value << 1])
    first = ((1 << (size - 1)) - 1) | ((value << size) & 0xFF)
    rest = value >> (8 - size + ((size + 7) >> 4))
    return bytes([first]) + rest.to_bytes(size - 1, "little")


@dataclass(frozen=True)
class GtidEventData:
    """What a GTID event says about its transaction."""

    gtid: Gtid
    immediate_commit_ts_us: int
    original_commit_ts_us: int
    #: ``original_server_version`` (``80403`` for 8.4.3) of the server the transaction originated on; 0
    #: when the event carries none (written before MySQL 8.0.14, or MySQL's "undefined" 999999).
    original_server_version: int = 0


def server_version_text(version: int) -> str:
    """``80403`` -> ``8.4.3``; 0 (unknown) -> ``an unknown version``."""
    if version <= 0:
        return "an unknown version"
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"


#: ``UNDEFINED_SERVER_VERSION`` of MySQL's ``Gtid_event``.
_UNDEFINED_SERVER_VERSION = 999999


def _known_version(version: int) -> int:
    return 0 if version == _UNDEFINED_SERVER_VERSION else version


def _packed_length(body: bytes, pos: int) -> int:
    """The position after a ``net_field_length_ll`` packed integer starting at ``pos``."""
    first = body[pos]
    return pos + {252: 3, 253: 4, 254: 9}.get(first, 1)


def _untagged_server_version(body: bytes, pos: int) -> int:
    """``original_server_version`` of an untagged GTID event whose ``transaction_length`` starts at
    ``pos``: 4 bytes of ``immediate_server_version``, whose top bit says that 4 bytes of the original's
    follow (else the original is the immediate one); 0 when the event ends before them."""
    if pos >= len(body):
        return 0
    pos = _packed_length(body, pos)
    if pos + 4 > len(body):
        return 0
    immediate = int.from_bytes(body[pos : pos + 4], "little")
    if not immediate & (1 << 31):
        return _known_version(immediate)
    if pos + 8 > len(body):
        raise ValueError("the original server version is cut off")
    return _known_version(int.from_bytes(body[pos + 4 : pos + 8], "little"))


def _uuid_text(raw: bytes) -> str:
    return str(uuid_module.UUID(bytes=bytes(raw)))


def _decode_untagged(body: bytes) -> GtidEventData:
    if len(body) < 49 or body[25] != _LOGICAL_TIMESTAMP_TYPECODE:
        raise BinlogStreamError(
            f"GTID event of {len(body)} bytes carries no commit timestamps (written by MySQL before 8.0.1?)"
        )
    gno = int.from_bytes(body[17:25], "little", signed=True)
    immediate = int.from_bytes(body[42:49], "little")
    original = immediate
    end = 49
    if immediate & _COMMIT_TS_HAS_ORIGINAL:
        immediate &= ~_COMMIT_TS_HAS_ORIGINAL
        original = int.from_bytes(body[49:56], "little")
        end = 56
    version = _untagged_server_version(body, end)
    return GtidEventData(Gtid(_uuid_text(body[1:17]), "", gno), immediate, original, version)


def _decode_tagged(body: bytes) -> GtidEventData:
    _format_version, pos = read_varlen_uint(body, 0)
    size, pos = read_varlen_uint(body, pos)
    _last_non_ignorable_field, pos = read_varlen_uint(body, pos)
    end = min(size, len(body))
    values: dict[int, Any] = {}
    while pos < end:
        field_id, pos = read_varlen_uint(body, pos)
        if field_id == 1:  # uuid: 16 bytes, each a varlen integer
            raw = bytearray()
            for _ in range(16):
                byte, pos = read_varlen_uint(body, pos)
                raw.append(byte)
            values[1] = bytes(raw)
        elif field_id == 3:  # tag: varlen length + characters
            length, pos = read_varlen_uint(body, pos)
            values[3] = body[pos : pos + length].decode("ascii")
            pos += length
        elif field_id in (2, 4, 5):  # gno, last_committed, sequence_number: signed
            values[field_id], pos = read_varlen_int(body, pos)
        elif field_id in (0, 6, 7, 8, 9, 10):  # flags, commit timestamps, transaction_length, server versions
            values[field_id], pos = read_varlen_uint(body, pos)
        else:  # the commit group ticket and later fields are not needed
            break
    if not {1, 2, 6} <= values.keys():
        raise BinlogStreamError(f"Gtid_tagged_log_event without uuid, gno or commit timestamp: {body.hex()}")
    immediate = int(values[6])
    gtid = Gtid(_uuid_text(values[1]), str(values.get(3, "")).lower(), int(values[2]))
    version = _known_version(int(values.get(10, values.get(9, 0))))
    return GtidEventData(gtid, immediate, int(values.get(7, immediate)), version)


def decode_gtid_event(event_type: int, body: bytes) -> GtidEventData:
    """Decode a ``Gtid_log_event`` (33) or ``Gtid_tagged_log_event`` (42) body (after the 19-byte
    header, without the checksum); raise :class:`BinlogStreamError` if it is malformed."""
    try:
        if event_type == GTID_LOG_EVENT:
            return _decode_untagged(body)
        if event_type == GTID_TAGGED_LOG_EVENT:
            return _decode_tagged(body)
    except (ValueError, IndexError) as exc:
        raise BinlogStreamError(f"malformed GTID event (type {event_type}): {exc}; body {body.hex()}") from None
    raise BinlogStreamError(f"event type {event_type} is not a GTID event")


#: A ``Query_log_event``'s post-header length (binlog format 4).
QUERY_POST_HEADER_LENGTH = 13
#: ``Execute_load_query_log_event`` (18): a Query event whose post-header has 13 more bytes (file id,
#: the file name's start and end in the statement, duplicate handling).
EXECUTE_LOAD_QUERY_POST_HEADER_LENGTH = 26
#: ``Incident_log_event`` (26): the source may have lost changes it could not log.
INCIDENT_EVENT = 0x1A


def query_event_parts(
    body: bytes | memoryview, post_header_length: int = QUERY_POST_HEADER_LENGTH
) -> tuple[bytes, bytes]:
    """(schema name, statement) bytes of a ``Query_log_event`` (or ``Execute_load_query``) body (after
    the common header, without the checksum): the statement as the session sent it."""
    if len(body) < post_header_length:
        raise ValueError(f"a Query event of {len(body)} bytes is shorter than its post-header")
    schema_length = body[8]
    (status_length,) = struct.unpack_from("<H", body, 11)
    schema_start = post_header_length + status_length
    start = schema_start + schema_length + 1
    if start > len(body):
        raise ValueError(f"a Query event's status variables and schema end past its {len(body)} bytes")
    return bytes(body[schema_start : schema_start + schema_length]), bytes(body[start:])


def encode_gtid_set(gtids: GtidSet) -> bytes:
    """MySQL's binary GTID-set encoding (``Gtid_set::encode``), as ``COM_BINLOG_DUMP_GTID`` sends it.

    The tagged format (MySQL 8.3+) is used only when the set holds a tagged GTID, so untagged sets
    stay readable by MySQL 8.0.
    """
    sources = gtids.sources
    tagged = any(tag for _, tag in sources)
    parts: list[bytes] = []
    for (source_uuid, tag), intervals in sources.items():
        parts.append(uuid_module.UUID(source_uuid).bytes)
        if tagged:
            name = tag.encode("ascii")
            parts.append(encode_varlen_uint(len(name)) + name)
        parts.append(struct.pack("<Q", len(intervals)))
        parts.extend(struct.pack("<QQ", first, last + 1) for first, last in intervals)
    n_sids = len(sources)
    header = (1 << 56) | (n_sids << 8) | 1 if tagged else n_sids
    return struct.pack("<Q", header) + b"".join(parts)
