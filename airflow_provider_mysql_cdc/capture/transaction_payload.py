"""The events inside a compressed binlog transaction (``Transaction_payload_event``, type 40).

With ``binlog_transaction_compression=ON`` (global or per session) MySQL logs each row-based
transaction as its GTID event followed by one ``Transaction_payload_event`` whose payload is the
transaction's other events (Query ``BEGIN``, Table_map, row events, Xid or Query ``COMMIT``) one after
the other, compressed with zstd. :func:`inner_events` yields those events' bytes one at a time while
it decompresses, so memory holds, besides the compressed payload (one event: at most MySQL's 1 GiB
event limit, and replicas refuse it above their ``replica_max_allowed_packet``), zstd's window (set
by the compression level; at most 128 MiB, zstd's default decoder limit, which MySQL's own reader
also has), 64 KiB read ahead and one inner event (row events are split at
``binlog_row_event_max_size`` unless a single row is larger): never the whole decompressed
transaction.

Byte format (MySQL source, ``mysql/mysql-server``):

* Event body (post-header length 0), ``libs/mysql/binlog/event/codecs/binary.cpp``
  ``Transaction_payload::decode``/``encode``: header fields, each ``type length value`` written as
  length-encoded integers (``net_store_length``: one byte below 251, else 252/253/254 followed by
  2/3/8 bytes little-endian), where ``length`` is the byte count of the encoded ``value``; then type 0
  (``OTW_PAYLOAD_HEADER_END_MARK``, no length or value); then the payload. Types: 1 payload size,
  2 compression type, 3 uncompressed size (written only when compressed; it defaults to the payload
  size). Unknown types are skipped by their length, as MySQL does.
* Compression types, ``libs/mysql/binlog/event/compression/base.h``: 0 ZSTD, 255 NONE.
* Payload, ``compression/payload_event_buffer_istream.cpp`` ``read_event`` and ``zstd_dec.cpp``: the
  events back to back, each starting with the usual 19-byte header whose ``event_size`` (bytes 9-12,
  little-endian) counts header and body. The zstd stream may hold several frames (MySQL's decoder
  continues across frame boundaries); it must end exactly after an event. An inner event shorter
  than its header, or itself a ``Transaction_payload_event``, is corruption.
* Inner events never carry a checksum, whatever ``binlog_checksum`` says; only the payload event has
  one (``sql/binlog/decompressing_event_object_istream.cc`` ``decode_from_buffer``). Their header's
  ``log_pos`` is 0 in the file; MySQL's reader reports the payload event's position instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Protocol

import zstandard

from airflow_provider_mysql_cdc.errors import TransactionPayloadError

__all__ = [
    "EVENT_HEADER_LENGTH",
    "MAX_INNER_EVENT_SIZE",
    "TRANSACTION_PAYLOAD_EVENT",
    "CompressionType",
    "PayloadHeader",
    "inner_events",
    "read_payload_header",
]

TRANSACTION_PAYLOAD_EVENT: Final = 0x28
EVENT_HEADER_LENGTH: Final = 19
#: MySQL's ``max_log_event_size`` (1 GiB): the largest event, inside a payload too.
MAX_INNER_EVENT_SIZE: Final = 1 << 30
_EVENT_TYPE_OFFSET: Final = 4
_EVENT_SIZE_OFFSET: Final = 9

_HEADER_END_MARK: Final = 0
_PAYLOAD_SIZE_FIELD: Final = 1
_COMPRESSION_TYPE_FIELD: Final = 2
_UNCOMPRESSED_SIZE_FIELD: Final = 3


class CompressionType(IntEnum):
    """How a payload is stored (``mysql::binlog::event::compression::type``)."""

    ZSTD = 0
    NONE = 255


@dataclass(frozen=True)
class PayloadHeader:
    """The fields before a payload."""

    compression: CompressionType
    #: Bytes of the (compressed) payload.
    payload_size: int
    #: Bytes of the inner events once decompressed.
    uncompressed_size: int
    #: Where the payload starts in the event body.
    payload_offset: int


def _read_length_encoded(body: memoryview, pos: int) -> tuple[int, int]:
    """``(value, next_pos)`` of the length-encoded integer at ``pos`` (``net_field_length_ll``)."""
    if pos >= len(body):
        raise TransactionPayloadError(f"payload header ends inside a field at byte {pos}")
    first = body[pos]
    if first < 251:
        return first, pos + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or pos + 1 + width > len(body):
        raise TransactionPayloadError(f"payload header has an invalid length-encoded integer at byte {pos}")
    return int.from_bytes(body[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def read_payload_header(body: bytes | memoryview) -> PayloadHeader:
    """Parse the fields of a ``Transaction_payload_event`` body (after the 19-byte event header,
    without the checksum); check that the payload fills the rest of the body exactly."""
    view = memoryview(body)
    fields: dict[int, int] = {}
    pos = 0
    while True:
        field_type, pos = _read_length_encoded(view, pos)
        if field_type == _HEADER_END_MARK:
            break
        length, pos = _read_length_encoded(view, pos)
        if field_type in (_PAYLOAD_SIZE_FIELD, _COMPRESSION_TYPE_FIELD, _UNCOMPRESSED_SIZE_FIELD):
            value, end = _read_length_encoded(view, pos)
            if end - pos != length:
                raise TransactionPayloadError(
                    f"payload header field {field_type} says {length} bytes but its value takes {end - pos}"
                )
            fields[field_type] = value
        pos += length
    if _PAYLOAD_SIZE_FIELD not in fields or _COMPRESSION_TYPE_FIELD not in fields:
        raise TransactionPayloadError(
            f"payload header without payload size or compression type: {bytes(view[:pos]).hex()}"
        )
    try:
        compression = CompressionType(fields[_COMPRESSION_TYPE_FIELD])
    except ValueError:
        raise TransactionPayloadError(
            f"unknown payload compression type {fields[_COMPRESSION_TYPE_FIELD]} (known: 0 ZSTD, 255 NONE)"
        ) from None
    payload_size = fields[_PAYLOAD_SIZE_FIELD]
    if pos + payload_size != len(view):
        raise TransactionPayloadError(
            f"payload of {payload_size} bytes after a {pos}-byte header does not fill the {len(view)}-byte event body"
        )
    uncompressed_size = fields.get(_UNCOMPRESSED_SIZE_FIELD) or payload_size
    return PayloadHeader(compression, payload_size, uncompressed_size, pos)


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _StoredPayload:
    """A payload stored without compression, read like a decompressing stream."""

    def __init__(self, payload: memoryview) -> None:
        self._payload = payload
        self._pos = 0

    def read(self, size: int = -1, /) -> bytes:
        chunk = self._payload[self._pos : self._pos + size]
        self._pos += len(chunk)
        return bytes(chunk)


def _open_payload(header: PayloadHeader, payload: memoryview) -> _Readable:
    if header.compression is CompressionType.NONE:
        return _StoredPayload(payload)
    reader: _Readable = zstandard.ZstdDecompressor().stream_reader(payload, read_across_frames=True)
    return reader


class _DecompressedBuffer:
    """Decompressed bytes read ahead in chunks of ``chunk_size`` (fewer calls into zstd than one
    per event); holds at most one chunk plus the event being cut out."""

    def __init__(self, source: _Readable, chunk_size: int) -> None:
        self._source = source
        self._chunk_size = chunk_size
        self._data = b""
        self._pos = 0

    def ensure(self, size: int) -> int:
        """Read ahead until ``size`` bytes are buffered or the stream ends; return how many are."""
        available = len(self._data) - self._pos
        if available >= size:
            return size
        parts = [self._data[self._pos :]]
        while available < size:
            try:
                chunk = self._source.read(max(size - available, self._chunk_size))
            except zstandard.ZstdError as exc:
                raise TransactionPayloadError(f"the compressed payload is corrupt: {exc}") from None
            if not chunk:
                break
            parts.append(chunk)
            available += len(chunk)
        self._data, self._pos = b"".join(parts), 0
        return min(size, available)

    def peek(self, size: int) -> bytes:
        """The next ``size`` bytes (already ensured), not consumed."""
        return self._data[self._pos : self._pos + size]

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes (already ensured), consumed."""
        data = self._data[self._pos : self._pos + size]
        self._pos += size
        return data


#: Decompressed bytes read from zstd at a time.
_READ_AHEAD = 1 << 16


def _inner_error(number: int, position: int, problem: str) -> TransactionPayloadError:
    return TransactionPayloadError(f"inner event #{number} at uncompressed byte {position}: {problem}")


def inner_events(body: bytes | memoryview, *, max_event_size: int = MAX_INNER_EVENT_SIZE) -> Iterator[bytes]:
    """Each event inside a ``Transaction_payload_event`` body, header included (no checksum: inner
    events have none), decompressed as it is read; raise :class:`TransactionPayloadError` unless the
    events fill the payload exactly and add up to the header's uncompressed size."""
    header = read_payload_header(body)
    stream = _DecompressedBuffer(_open_payload(header, memoryview(body)[header.payload_offset :]), _READ_AHEAD)
    decompressed = 0
    number = 0
    while available := stream.ensure(EVENT_HEADER_LENGTH):
        number += 1
        if available < EVENT_HEADER_LENGTH:
            raise _inner_error(number, decompressed, "the payload ends inside the event header")
        event_header = stream.peek(EVENT_HEADER_LENGTH)
        event_type = event_header[_EVENT_TYPE_OFFSET]
        size = int.from_bytes(event_header[_EVENT_SIZE_OFFSET : _EVENT_SIZE_OFFSET + 4], "little")
        if event_type == TRANSACTION_PAYLOAD_EVENT:
            raise _inner_error(number, decompressed, "a Transaction_payload_event inside a payload")
        if not EVENT_HEADER_LENGTH <= size <= max_event_size:
            raise _inner_error(
                number,
                decompressed,
                f"type {event_type}, size {size} is outside {EVENT_HEADER_LENGTH}..{max_event_size}",
            )
        if decompressed + size > header.uncompressed_size:
            raise _inner_error(
                number,
                decompressed,
                f"type {event_type}, {size} bytes, ends past the uncompressed size {header.uncompressed_size}",
            )
        if stream.ensure(size) < size:
            raise _inner_error(number, decompressed, f"type {event_type}, the payload ends inside the event")
        decompressed += size
        yield stream.take(size)
    if decompressed != header.uncompressed_size:
        raise TransactionPayloadError(
            f"the inner events hold {decompressed} bytes, the payload header says {header.uncompressed_size}"
        )
