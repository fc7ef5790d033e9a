"""Read a MySQL binlog as typed, well-formed transactions.

:class:`BinlogReader` opens a ``COM_BINLOG_DUMP_GTID`` stream with auto-position = ``after`` (the
server sends every transaction not in ``after``) and yields::

    TransactionStart(gtid, commit_ts_us, ...)   one per transaction
      RowsEvent(database, table, kind, event)   the library's row event, rows not decoded yet
      QueryStatement(database, sql)             DDL, TRUNCATE, ... (a DDL transaction is
    TransactionCommit()                         start + statement + commit)
    Rotate(binlog_file, position)               between transactions
    Idle()                                      the server has sent everything it has

python-mysql-replication (``pymysqlreplication``) is kept for the protocol: connecting, the dump
command's framing, table maps and row decoding. Five things are ours, each for a reason found in
that library (1.0.x):

* **GTID events.** Its ``GtidEvent`` stops parsing after ``sequence_number`` (the commit
  timestamps follow), and it has no class for ``Gtid_tagged_log_event`` (type 42), so a tagged
  transaction's rows would look like the previous transaction's. :func:`decode_gtid_event` decodes
  both event types from the raw event body. For type 33 the library's own ``GtidEvent`` is left in
  place and its packet is read again; for type 42 :class:`_TaggedGtidEvent` is registered in the
  library's private event map (:func:`install_library_fixes`; type 42 was unknown to the library,
  so no other stream's behaviour changes).
* **The dump request.** The library encodes the auto-position set with its own ``GtidSet``, which
  rejects tags, and treats an empty set as "no auto-position" (it would then start at the end of
  the binlog). :func:`encode_gtid_set` writes MySQL's binary GTID-set encoding, tagged format
  included; :func:`install_library_fixes` replaces the name ``GtidSet`` inside
  ``pymysqlreplication.binlogstream`` (used there only to encode the dump request) with a function
  that returns our encoding for a :class:`_DumpGtidSet` and the library's own class otherwise.
* **Reconnects.** After a lost connection the library silently reconnects with the original
  auto-position and replays transactions. :class:`_StreamReader` turns a second connect into
  :class:`BinlogConnectionLostError`.
* **Table filtering.** The library's ``only_tables``/``only_schemas`` match names, not
  ``(database, table)`` predicates. Row values are decoded lazily (``RowsEvent.rows``), so a row
  event of an unselected table costs its table-map and row-header parse and is never yielded.
* **Compressed transactions.** The library has no class for ``Transaction_payload_event``
  (type 40, written for ``binlog_transaction_compression=ON``); it arrives as a
  ``NotImplementedEvent``. :meth:`_StreamReader.payload_events` decompresses its body as a stream
  (:mod:`transaction_payload`) and builds the library's own event for each inner event from a packet,
  as ``fetchone`` does (table maps included), so a compressed transaction yields exactly the items
  of an uncompressed one. Inner events have no checksum: the library reads them with
  ``use_checksum=False``, and four filler bytes end each packet where the library's readers that
  run to the end of an event (``read_available``, the table map's optional metadata) expect a
  checksum.

Every change to the library (the two hooks above and the table-map parsing repairs of
:mod:`~airflow_provider_mysql_cdc.decoding.library_fixes`) is made by :func:`install_library_fixes`,
which :meth:`BinlogReader.open` calls; nothing is patched at import time. Code that reads table maps
with the library directly (tests, benchmarks) calls it first.

Byte formats (MySQL source, ``mysql/mysql-server``):

* ``Gtid_log_event`` (33), ``libs/mysql/binlog/event/control_events.cpp`` ``Gtid_event::Gtid_event``:
  flags(1) uuid(16) gno(int64 LE) lt_type(1, =2) last_committed(8) sequence_number(8)
  immediate_commit_timestamp(7 bytes LE, microseconds; bit 55 set means original_commit_timestamp
  (7 bytes) follows, else original == immediate), transaction_length (packed int), server versions.
* ``Gtid_tagged_log_event`` (42), same file (``read_gtid_tagged_log_event``) and
  ``control_events.h`` (``Gtid_event::define_fields``), in the ``mysql::serialization`` format
  (``libs/mysql/serialization/readme.md``, ``serializer_default_impl.hpp``,
  ``variable_length_integers.h``): varlen format version, varlen message size (counted from the
  message's first byte), varlen last non-ignorable field id, then ``field_id data`` pairs:
  0 flags, 1 uuid (16 varlen bytes), 2 gno (signed varlen), 3 tag (varlen length + ASCII),
  4 last_committed and 5 sequence_number (signed), 6 immediate_commit_timestamp,
  7 original_commit_timestamp (omitted when equal), 8 transaction_length, 9/10 server versions,
  11 commit_group_ticket.
* Binary GTID set, ``sql/rpl_gtid_set.cc`` ``Gtid_set::encode`` and ``libs/mysql/gtid/tsid.cpp``,
  ``tag.cpp``: n_sids as 8 bytes LE (tagged format: ``1 << 56 | n_sids << 8 | 1``), then per
  (uuid, tag): uuid(16), [tagged format only: tag as varlen length + ASCII, ``00`` for no tag],
  n_intervals(8), and per interval start(8) and end(8), end exclusive.
"""

from __future__ import annotations

import bisect
import struct
import uuid as uuid_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import pymysql
from pymysql.protocol import MysqlPacket
from pymysqlreplication import binlogstream
from pymysqlreplication.binlogstream import BinLogStreamReader
from pymysqlreplication.event import (
    BinLogEvent,
    GtidEvent,
    HeartbeatLogEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from airflow_provider_mysql_cdc.capture.transaction_payload import TRANSACTION_PAYLOAD_EVENT, inner_events
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import MAX_TRANSACTION_NUMBER, Gtid, GtidSet, Interval, SourceKey
from airflow_provider_mysql_cdc.core.preflight import ServerVersion
from airflow_provider_mysql_cdc.decoding.library_fixes import install_table_map_fixes
from airflow_provider_mysql_cdc.errors import (
    BinlogConnectionLostError,
    BinlogPurgedError,
    BinlogReconnectRefusedError,
    BinlogStreamError,
    ConfigurationError,
    TerminalCdcError,
    TransactionPayloadError,
    TransientCdcError,
)
from airflow_provider_mysql_cdc.mysql.client import connect, query, query_value

__all__ = [
    "GTID_LOG_EVENT",
    "GTID_TAGGED_LOG_EVENT",
    "BinlogItem",
    "BinlogReader",
    "GtidEventData",
    "Idle",
    "QueryStatement",
    "Rotate",
    "RowsEvent",
    "TransactionCommit",
    "TransactionStart",
    "decode_gtid_event",
    "encode_gtid_set",
    "encode_varlen_uint",
    "install_library_fixes",
    "read_varlen_int",
    "read_varlen_uint",
]

GTID_LOG_EVENT = 0x21
GTID_TAGGED_LOG_EVENT = 0x2A
ANONYMOUS_GTID_LOG_EVENT = 0x22
_COMMIT_TS_HAS_ORIGINAL = 1 << 55
_LOGICAL_TIMESTAMP_TYPECODE = 2
_FATAL_ERROR_READING_BINLOG = 1236  # ER_SOURCE_FATAL_ERROR_READING_BINLOG: purged binlogs and more
#: Server shutdown, connection killed; client: cannot connect, server gone, lost, lost over TLS.
_LOST_CONNECTION = {1053, 1927, 2002, 2003, 2006, 2013, 2055}

# -- errors ------------------------------------------------------------------------------------


# -- items -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransactionStart:
    """A transaction begins; every item until the next :class:`TransactionCommit` belongs to it."""

    gtid: Gtid
    #: ``immediate_commit_timestamp``: commit time on the server read, microseconds since the epoch (UTC).
    commit_ts_us: int
    #: ``original_commit_timestamp``: commit time on the server where the transaction originated.
    original_commit_ts_us: int
    binlog_file: str
    #: Offset of the transaction's GTID event in ``binlog_file`` (``Pos`` of ``SHOW BINLOG EVENTS``).
    binlog_position: int


RowsKind = Literal["insert", "update", "delete"]


@dataclass(frozen=True)
class RowsEvent:
    """One row event of a selected table; ``event`` is python-mysql-replication's, rows undecoded."""

    database: str
    table: str
    kind: RowsKind
    event: Any = field(repr=False, compare=False)


@dataclass(frozen=True)
class QueryStatement:
    """A statement logged as text inside the transaction (DDL, TRUNCATE, ...)."""

    database: str
    sql: str
    #: The statement's session ``sql_mode`` (a bit set), when the event carries it.
    sql_mode: int | None = None


@dataclass(frozen=True)
class TransactionCommit:
    """The transaction opened by the last :class:`TransactionStart` is complete."""


@dataclass(frozen=True)
class Idle:
    """The server has sent every transaction it has; more may come later."""


@dataclass(frozen=True)
class Rotate:
    """The stream continues in ``binlog_file`` at ``position``."""

    binlog_file: str
    position: int


BinlogItem = TransactionStart | RowsEvent | QueryStatement | TransactionCommit | Idle | Rotate

# -- protocol: pure encoders and decoders ------------------------------------------------------


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
    if immediate & _COMMIT_TS_HAS_ORIGINAL:
        immediate &= ~_COMMIT_TS_HAS_ORIGINAL
        original = int.from_bytes(body[49:56], "little")
    return GtidEventData(Gtid(_uuid_text(body[1:17]), "", gno), immediate, original)


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
        elif field_id in (0, 6, 7):  # flags, immediate / original commit timestamp
            values[field_id], pos = read_varlen_uint(body, pos)
        else:  # transaction_length and later fields are not needed
            break
    if not {1, 2, 6} <= values.keys():
        raise BinlogStreamError(f"Gtid_tagged_log_event without uuid, gno or commit timestamp: {body.hex()}")
    immediate = int(values[6])
    gtid = Gtid(_uuid_text(values[1]), str(values.get(3, "")).lower(), int(values[2]))
    return GtidEventData(gtid, immediate, int(values.get(7, immediate)))


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


# -- python-mysql-replication glue -------------------------------------------------------------


class _TaggedGtidEvent(BinLogEvent):  # type: ignore[misc]
    """``Gtid_tagged_log_event`` (type 42); :class:`BinlogReader` decodes it from the raw packet."""

    def __init__(self, from_packet: Any, event_size: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(from_packet, event_size, *args, **kwargs)
        self.packet.advance(event_size)


class _DumpGtidSet:
    """The auto-position set as the library's dump code uses it: ``encoded_length``, ``encoded()``.

    Always truthy, so that an empty set still means "auto-position, from the first transaction".
    """

    def __init__(self, gtids: GtidSet) -> None:
        self._payload = encode_gtid_set(gtids)

    @property
    def encoded_length(self) -> int:
        return len(self._payload)

    def encoded(self) -> bytes:
        return self._payload


_hooks_installed = False


def _install_library_hooks() -> None:
    """Register type 42 in the library's event map and route its dump-request encoding through
    :class:`_DumpGtidSet` (idempotent; see the module docstring)."""
    global _hooks_installed
    if _hooks_installed:
        return
    event_map = getattr(BinLogPacketWrapper, "_BinLogPacketWrapper__event_map", None)
    library_gtid_set = getattr(binlogstream, "GtidSet", None)
    if not isinstance(event_map, dict) or library_gtid_set is None:
        raise BinlogStreamError("this python-mysql-replication version is not supported (install 1.0.x)")

    def gtid_set_for_dump(value: Any) -> Any:
        return value if isinstance(value, _DumpGtidSet) else library_gtid_set(value)

    event_map[GTID_TAGGED_LOG_EVENT] = _TaggedGtidEvent
    binlogstream.GtidSet = gtid_set_for_dump
    _hooks_installed = True


def install_library_fixes() -> None:
    """Make every change this project needs in python-mysql-replication (idempotent): the table-map
    parsing repairs (:func:`~airflow_provider_mysql_cdc.decoding.library_fixes.install_table_map_fixes`),
    the tagged GTID event's class and the dump request's GTID-set encoding (see the module docstring).

    :meth:`BinlogReader.open` calls it; anything else that reads table maps with the library (a
    ``BinLogStreamReader`` of its own) must call it before its stream starts."""
    install_table_map_fixes()
    _install_library_hooks()


class _StreamReader(BinLogStreamReader):  # type: ignore[misc]
    """The library's stream reader, without its silent reconnect (it would replay from ``after``)."""

    _connected_once = False

    def _BinLogStreamReader__connect_to_stream(self) -> None:
        if self._connected_once:
            raise BinlogReconnectRefusedError("the binlog stream was lost and the library tried to reconnect")
        self._connected_once = True
        super()._BinLogStreamReader__connect_to_stream()

    def payload_events(self, body: memoryview) -> Iterator[Any]:
        """The library's events for the events inside one ``Transaction_payload_event`` body, built
        from packets as ``fetchone`` builds the stream's (table maps go to ``table_map``; events
        outside the stream's ``only_events`` are dropped); decompressed one event at a time."""
        allowed = self._BinLogStreamReader__allowed_events
        for raw in inner_events(body):
            wrapper = BinLogPacketWrapper(
                MysqlPacket(b"\x00" + raw + _CHECKSUM_FILLER, "utf8"),
                self.table_map,
                self._ctl_connection,
                self.mysql_version,
                False,  # use_checksum: inner events have none
                self._BinLogStreamReader__allowed_events_in_packet,
                self._BinLogStreamReader__only_tables,
                self._BinLogStreamReader__ignored_tables,
                self._BinLogStreamReader__only_schemas,
                self._BinLogStreamReader__ignored_schemas,
                self._BinLogStreamReader__freeze_schema,
                self._BinLogStreamReader__ignore_decode_errors,
                False,  # verify_checksum
                self._BinLogStreamReader__optional_meta_data,
                self._BinLogStreamReader__enable_logging,
                self._BinLogStreamReader__use_column_name_cache,
                self._BinLogStreamReader__post_header_lengths,
            )
            event = wrapper.event
            if event is None:
                continue
            if isinstance(event, TableMapEvent):
                self.table_map[event.table_id] = event.get_table()
            if type(event) in allowed:
                yield event


def _release(event: Any) -> None:
    """Break the reference cycle between a handled library event and its packet wrapper. Left alone,
    every event's bytes stay until Python's cyclic garbage collector runs, which a few events of many
    MiB (a transaction of big rows) do not trigger, so memory grew with the transaction."""
    wrapper = getattr(event, "packet", None)
    if wrapper is not None and getattr(wrapper, "event", None) is event:
        wrapper.event = None


#: Stands in for the checksum the library's readers expect at the end of an event (see the module docstring).
_CHECKSUM_FILLER = b"\x00" * 4


_STREAM_EVENTS = (
    GtidEvent,
    _TaggedGtidEvent,
    QueryEvent,
    XidEvent,
    XAPrepareEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    # The library keeps only events whose class is listed (a subclass is not enough): without it, a
    # session's binlog_row_value_options=PARTIAL_JSON updates would be dropped without a word.
    PartialUpdateRowsEvent,
    DeleteRowsEvent,
    RotateEvent,
    HeartbeatLogEvent,
    NotImplementedEvent,  # compressed transactions, and anonymous ones to refuse instead of skipping them
)
_SKIPPED_STATEMENTS = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT")


def _event_body(event: Any) -> bytes:
    """The event's bytes after the 19-byte header, without checksum (the packet starts with 0x00)."""
    raw: bytes = event.packet.packet.get_all_data()
    return raw[20 : 20 + int(event.event_size)]


def _rows_kind(event: Any) -> RowsKind:
    if isinstance(event, WriteRowsEvent):
        return "insert"
    return "update" if isinstance(event, UpdateRowsEvent) else "delete"


def _error_code_and_text(exc: BaseException, config: MySqlConnectionConfig) -> tuple[int | None, str]:
    args: tuple[Any, ...] = getattr(exc, "args", ())
    code = args[0] if args and isinstance(args[0], int) else None
    text = str(args[1]) if len(args) > 1 else str(exc)
    if config.password:
        text = text.replace(config.password, "***")
    return code, text


class _SeenGtids:
    """GTIDs as sorted closed intervals per ``(uuid, tag)``; cheap when GTIDs arrive in order."""

    def __init__(self) -> None:
        self._runs: dict[SourceKey, list[Interval]] = {}

    def __contains__(self, gtid: Gtid) -> bool:
        runs = self._runs.get((gtid.source_uuid, gtid.tag), [])
        index = bisect.bisect_right(runs, (gtid.number, MAX_TRANSACTION_NUMBER + 1)) - 1
        return index >= 0 and runs[index][1] >= gtid.number

    def add(self, gtid: Gtid) -> None:
        key = (gtid.source_uuid, gtid.tag)
        runs = self._runs.setdefault(key, [])
        if runs and runs[-1][1] + 1 == gtid.number:
            runs[-1] = (runs[-1][0], gtid.number)
        elif gtid not in self:
            runs[:] = GtidSet({key: [*runs, (gtid.number, gtid.number)]}).intervals(*key)

    def as_gtid_set(self) -> GtidSet:
        return GtidSet(self._runs)


# -- the reader --------------------------------------------------------------------------------


class BinlogReader:
    """Iterate over the binlog transactions the server has that are not in ``after``.

    ``with BinlogReader(config, after=frontier, replica_server_id=4242) as reader:`` then
    ``for item in reader:``. Iteration blocks for new transactions; it yields :class:`Idle` when
    the server has sent everything (checked at each heartbeat, every ``heartbeat_seconds``), so the
    caller decides when to stop; a dead connection raises :class:`BinlogConnectionLostError` after
    at most ``max(10, 3 * heartbeat_seconds)`` seconds of silence.

    A transaction whose GTID is in ``after`` or was already yielded is skipped whole. Row events
    of tables for which ``only_tables(database, table)`` is false are not yielded.
    ``replica_server_id`` must differ from every other replica's and reader's ``server_id`` on the
    source (the server drops the older of two streams with the same id). Compressed transactions
    (``binlog_transaction_compression``) yield the same items as uncompressed ones. XA and
    anonymous transactions raise :class:`BinlogStreamError` rather than being skipped.
    """

    def __init__(
        self,
        config: MySqlConnectionConfig,
        *,
        after: GtidSet,
        replica_server_id: int,
        only_tables: Callable[[str, str], bool] | None = None,
        heartbeat_seconds: float = 5.0,
    ) -> None:
        if not 0 < int(replica_server_id) < 2**32:
            raise ConfigurationError(f"replica server id {replica_server_id} must be in 1..4294967295")
        if not heartbeat_seconds > 0:
            raise ConfigurationError(f"heartbeat_seconds must be positive, not {heartbeat_seconds}")
        self._config = config
        self._after = after
        self._server_id = int(replica_server_id)
        self._only_tables = only_tables
        self._table_selected: dict[tuple[str, str], bool] = {}
        self._heartbeat_seconds = float(heartbeat_seconds)
        self._control: Any = None
        self._status_statement = "SHOW BINARY LOG STATUS"
        self._stream: Any = None
        self._seen = _SeenGtids()
        self._last_gtid: Gtid | None = None
        self._binlog_file = ""
        self._open_gtid: Gtid | None = None  # transaction in progress (yielded or skipped)
        self._skipping = False
        self._in_begin = False

    def __repr__(self) -> str:
        return f"BinlogReader({self._config.address}, after={str(self._after)!r}, server_id={self._server_id})"

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> BinlogReader:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> None:
        """Install the library fixes (:func:`install_library_fixes`), check that the binlogs after
        ``after`` still exist, then prepare the stream (idempotent)."""
        if self._stream is not None:
            return
        install_library_fixes()
        self._control = connect(self._config)
        try:
            version, comment = query(self._control, self._config, "SELECT VERSION(), @@version_comment")[0]
            self._status_statement = ServerVersion.parse(str(version), str(comment or "")).binlog_status_statement
            self._check_not_purged()
        except BaseException:
            self.close()
            raise
        settings = {
            **self._config.pymysql_kwargs(),
            "read_timeout": max(10.0, 3 * self._heartbeat_seconds),
        }
        self._stream = _StreamReader(
            connection_settings=settings,
            server_id=self._server_id,
            blocking=True,
            auto_position=_DumpGtidSet(self._after),
            only_events=_STREAM_EVENTS,
            filter_non_implemented_events=False,
            slave_heartbeat=self._heartbeat_seconds,
            enable_logging=False,
        )

    def close(self) -> None:
        """Close the stream and the control connection."""
        stream, self._stream = self._stream, None
        control, self._control = self._control, None
        if stream is not None:
            stream.close()
        if control is not None:
            control.close()

    # -- progress -------------------------------------------------------------------------------

    @property
    def last_gtid(self) -> Gtid | None:
        """The GTID of the last transaction yielded up to its :class:`TransactionCommit`."""
        return self._last_gtid

    def reached(self) -> GtidSet:
        """``after`` plus every transaction yielded completely so far."""
        return self._after | self._seen.as_gtid_set()

    # -- iteration ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[BinlogItem]:
        self.open()
        while True:
            event = self._next_event()
            yield from self._items_for(event)
            _release(event)

    def _next_event(self) -> Any:
        if self._stream is None:
            raise BinlogStreamError("the binlog reader is closed")
        try:
            event = self._stream.fetchone()
        except BinlogReconnectRefusedError:
            raise self._lost("the connection was lost") from None
        except pymysql.err.MySQLError as exc:
            code, text = _error_code_and_text(exc, self._config)
            if code == _FATAL_ERROR_READING_BINLOG and "purged" in text.lower():
                raise self._purged_error(server_message=text) from None
            if code in _LOST_CONNECTION:
                raise self._lost(text) from None
            raise BinlogStreamError(f"the binlog stream from {self._config.address} failed: [{code}] {text}") from None
        except OSError as exc:
            raise self._lost(str(exc)) from None
        if event is None:
            raise self._lost("the server ended the stream")
        return event

    def _items_for(self, event: Any) -> Iterator[BinlogItem]:
        if isinstance(event, GtidEvent | _TaggedGtidEvent):
            yield from self._start(event)
        elif isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
            self._require_transaction(event)
            if not self._skipping and self._selected(event.schema, event.table):
                yield RowsEvent(event.schema, event.table, _rows_kind(event), event)
        elif isinstance(event, XidEvent):
            self._require_transaction(event)
            yield from self._commit()
        elif isinstance(event, QueryEvent):
            yield from self._query(event)
        elif isinstance(event, HeartbeatLogEvent):
            if self._open_gtid is None and self._caught_up(event):
                yield Idle()
        elif isinstance(event, RotateEvent):
            self._binlog_file = str(event.next_binlog)
            yield Rotate(self._binlog_file, int(event.position))
        elif isinstance(event, XAPrepareEvent):
            raise BinlogStreamError(
                f"XA transaction {self._open_gtid} found: XA PREPARE/COMMIT transactions are not supported"
            )
        elif event.event_type == TRANSACTION_PAYLOAD_EVENT:
            yield from self._payload(event)
        elif event.event_type == ANONYMOUS_GTID_LOG_EVENT:
            raise BinlogStreamError(
                "anonymous (GTID-less) transaction found in a binlog written before gtid_mode=ON; "
                "start from a frontier that covers the binlogs written since GTIDs were enabled"
            )

    def _start(self, event: Any) -> Iterator[BinlogItem]:
        if self._open_gtid is not None:
            raise BinlogStreamError(f"transaction {self._open_gtid} has no end before the next GTID event")
        data = decode_gtid_event(event.event_type, _event_body(event))
        self._open_gtid = data.gtid
        self._in_begin = False
        self._skipping = data.gtid in self._after or data.gtid in self._seen
        if not self._skipping:
            packet = event.packet
            position = int(packet.log_pos) - int(packet.event_size)
            yield TransactionStart(
                data.gtid, data.immediate_commit_ts_us, data.original_commit_ts_us, self._binlog_file, position
            )

    def _payload(self, event: Any) -> Iterator[BinlogItem]:
        """The items of a compressed transaction: those of the events inside its payload, which
        holds the whole transaction after its GTID event (``BEGIN`` to ``COMMIT``)."""
        self._require_transaction(event)
        gtid, where = self._open_gtid, f"binlog {self._binlog_file}, end position {event.packet.log_pos}"
        body = memoryview(event.packet.packet.get_all_data())[20 : 20 + int(event.event_size)]
        try:
            for inner in self._stream.payload_events(body):
                yield from self._items_for(inner)
                _release(inner)
        except TransactionPayloadError as exc:
            raise BinlogStreamError(
                f"compressed transaction {gtid} ({where}) cannot be read: {exc}; "
                "inspect it with mysqlbinlog --verbose on the source"
            ) from None
        if self._open_gtid is not None:
            raise BinlogStreamError(
                f"compressed transaction {gtid} ({where}): its payload ends before its commit; "
                "inspect it with mysqlbinlog --verbose on the source"
            )

    def _query(self, event: Any) -> Iterator[BinlogItem]:
        self._require_transaction(event)
        sql = str(event.query).strip()
        keyword = sql.upper()
        if keyword == "BEGIN":
            self._in_begin = True
        elif keyword in ("COMMIT", "ROLLBACK"):  # ROLLBACK: non-transactional changes stay
            yield from self._commit()
        elif keyword.startswith("XA "):
            raise BinlogStreamError(f"XA transaction {self._open_gtid} found: XA transactions are not supported")
        elif self._in_begin and keyword.startswith(_SKIPPED_STATEMENTS):
            pass
        else:
            if not self._skipping:
                database = bytes(event.schema).decode("utf-8", errors="replace")
                mode = getattr(event, "sql_mode", None)
                yield QueryStatement(database, sql, None if mode is None else int(mode))
            if not self._in_begin:  # DDL commits itself
                yield from self._commit()

    def _commit(self) -> Iterator[BinlogItem]:
        gtid, skipped = self._open_gtid, self._skipping
        self._open_gtid, self._skipping, self._in_begin = None, False, False
        if gtid is not None and not skipped:
            self._seen.add(gtid)
            self._last_gtid = gtid
            yield TransactionCommit()

    def _require_transaction(self, event: Any) -> None:
        if self._open_gtid is None:
            raise BinlogStreamError(
                f"{type(event).__name__} outside a transaction after {self._last_gtid} "
                f"(binlog {self._binlog_file}, end position {event.packet.log_pos})"
            )

    def _selected(self, database: str, table: str) -> bool:
        if self._only_tables is None:
            return True
        key = (database, table)
        selected = self._table_selected.get(key)
        if selected is None:
            selected = self._table_selected[key] = bool(self._only_tables(database, table))
        return selected

    # -- server state ---------------------------------------------------------------------------

    def _control_query(self, sql: str) -> list[tuple[Any, ...]]:
        if self._control is None:
            self._control = connect(self._config)
        try:
            return query(self._control, self._config, sql)
        except TransientCdcError:
            stale, self._control = self._control, None
            stale.close()
            self._control = connect(self._config)
            return query(self._control, self._config, sql)

    def _caught_up(self, heartbeat: Any) -> bool:
        """True when the heartbeat's position is the end of the server's binlog (the server also
        sends heartbeats while it skips transactions of ``after``)."""
        rows = self._control_query(self._status_statement)
        if not rows:
            return False
        end_file, end_position = str(rows[0][0]), int(rows[0][1])
        heartbeat_position = int(heartbeat.packet.log_pos)
        return str(heartbeat.ident) == end_file and heartbeat_position == end_position & 0xFFFFFFFF

    def _check_not_purged(self) -> None:
        purged = GtidSet.parse(str(query_value(self._control, self._config, "SELECT @@GLOBAL.gtid_purged") or ""))
        if not purged <= self._after:
            raise self._purged_error(missing=purged - self._after)

    def _purged_error(self, *, missing: GtidSet | None = None, server_message: str = "") -> BinlogPurgedError:
        if missing is None:
            try:
                purged = self._control_query("SELECT @@GLOBAL.gtid_purged")[0][0]
                missing = GtidSet.parse(str(purged or "")) - self._after
            except (TerminalCdcError, TransientCdcError):
                missing = None
        what = f"the server has purged {missing}" if missing else f"the server says: {server_message}"
        return BinlogPurgedError(
            f"cannot read the binlog of {self._config.address} after the pipeline's frontier "
            f"{str(self._after) or '(empty)'}: {what} (gtid_purged minus the frontier). Those transactions "
            "are gone from the binlog; re-snapshot the affected tables, which moves their frontier past "
            "the purged GTIDs, then resume capture."
        )

    def _lost(self, detail: str) -> BinlogConnectionLostError:
        return BinlogConnectionLostError(
            f"lost the binlog stream from {self._config.address} ({detail}); last complete transaction read: "
            f"{self._last_gtid or 'none'}. Retry: reading restarts from the frontier it was started with."
        )
