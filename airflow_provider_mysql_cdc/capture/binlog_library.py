"""What :class:`~airflow_provider_mysql_cdc.capture.binlog_reader.BinlogReader` changes in, and adds
to, python-mysql-replication (``pymysqlreplication``, 1.0.x), which it keeps for the protocol:
connecting, the dump command's framing, table maps and row decoding.

* **GTID events.** Its ``GtidEvent`` stops parsing after ``sequence_number`` (the commit
  timestamps follow), and it has no class for ``Gtid_tagged_log_event`` (type 42), so a tagged
  transaction's rows would look like the previous transaction's. The reader decodes both event types
  from the raw event body (:func:`~airflow_provider_mysql_cdc.capture.binlog_protocol.decode_gtid_event`).
  For type 33 the library's own ``GtidEvent`` is left in place and its packet is read again; for
  type 42 :class:`TaggedGtidEvent` is registered in the library's private event map
  (:func:`install_stream_hooks`; type 42 was unknown to the library, so no other stream's behaviour
  changes).
* **The dump request.** The library encodes the auto-position set with its own ``GtidSet``, which
  rejects tags, and treats an empty set as "no auto-position" (it would then start at the end of
  the binlog). :func:`install_stream_hooks` replaces the name ``GtidSet`` inside
  ``pymysqlreplication.binlogstream`` (used there only to encode the dump request) with a function
  that returns our encoding (``encode_gtid_set``) for a :class:`DumpGtidSet` and the library's own
  class otherwise.
* **Reconnects.** After a lost connection the library silently reconnects with the original
  auto-position and replays transactions. :class:`SingleConnectionStreamReader` refuses a second
  connect (:class:`~airflow_provider_mysql_cdc.errors.BinlogReconnectRefusedError`), which the reader
  reports as a lost connection.
* **Query events' status variables.** The library raises ``StatusVariableMismatch`` for a status
  variable it does not know, and MySQL 9.7 writes one (key 0x15) in the ``Query`` event of a DML
  statement logged as text (a session's ``binlog_format = 'STATEMENT'`` or ``'MIXED'``), so the
  stream stopped with the library's exception there. :func:`install_stream_hooks` makes the library
  skip the rest of the status variables from an unknown key on (their length is in the event's
  header; the keys are written in increasing order, so the ones the reader uses, ``sql_mode`` among
  them, come before).
* **Compressed transactions.** The library has no class for ``Transaction_payload_event``
  (type 40, written for ``binlog_transaction_compression=ON``); it arrives as a
  ``NotImplementedEvent``. :meth:`SingleConnectionStreamReader.payload_events` decompresses its body
  as a stream (:mod:`transaction_payload`) and builds the library's own event for each inner event
  from a packet, as ``fetchone`` does (table maps included), so a compressed transaction yields
  exactly the items of an uncompressed one. Inner events have no checksum: the library reads them
  with ``use_checksum=False``, and four filler bytes end each packet where the library's readers
  that run to the end of an event (``read_available``, the table map's optional metadata) expect a
  checksum.

* **Checksums.** The library decides once, from ``binlog_checksum`` when it connects, whether every
  event ends with a 4-byte CRC32, but each binlog file is written with the setting in force when it
  was opened (changing ``binlog_checksum`` rotates the binlog). A window reading a file written with
  the other setting misread its events (the capture stopped with "WriteRowsEvent outside a
  transaction"). The reader asks for each file's ``Format_description`` event and
  :meth:`SingleConnectionStreamReader.follow_file_checksum` reads that file's events by its own
  setting.

Every change to the library (the hooks above and the table-map parsing repairs of
:mod:`~airflow_provider_mysql_cdc.decoding.library_fixes`) is made by :func:`install_library_fixes`,
which ``BinlogReader.open`` calls; nothing is patched at import time. Code that reads table maps
with the library directly (tests, benchmarks) calls it first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pymysql.protocol import MysqlPacket
from pymysqlreplication import binlogstream
from pymysqlreplication.binlogstream import BinLogStreamReader
from pymysqlreplication.event import (
    BinLogEvent,
    ExecuteLoadQueryEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatLogEvent,
    NotImplementedEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.exceptions import StatusVariableMismatch
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from airflow_provider_mysql_cdc.capture.binlog_protocol import GTID_TAGGED_LOG_EVENT, encode_gtid_set
from airflow_provider_mysql_cdc.capture.transaction_payload import inner_events
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.decoding.library_fixes import install_table_map_fixes
from airflow_provider_mysql_cdc.errors import BinlogReconnectRefusedError, BinlogStreamError


class TaggedGtidEvent(BinLogEvent):  # type: ignore[misc]
    """``Gtid_tagged_log_event`` (type 42); :class:`BinlogReader` decodes it from the raw packet."""

    def __init__(self, from_packet: Any, event_size: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(from_packet, event_size, *args, **kwargs)
        self.packet.advance(event_size)


class DumpGtidSet:
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


def install_stream_hooks() -> None:
    """Register type 42 in the library's event map and route its dump-request encoding through
    :class:`DumpGtidSet` (idempotent; see the module docstring)."""
    global _hooks_installed
    if _hooks_installed:
        return
    event_map = getattr(BinLogPacketWrapper, "_BinLogPacketWrapper__event_map", None)
    library_gtid_set = getattr(binlogstream, "GtidSet", None)
    if not isinstance(event_map, dict) or library_gtid_set is None:
        raise BinlogStreamError("this python-mysql-replication version is not supported (install 1.0.x)")

    def gtid_set_for_dump(value: Any) -> Any:
        return value if isinstance(value, DumpGtidSet) else library_gtid_set(value)

    event_map[GTID_TAGGED_LOG_EVENT] = TaggedGtidEvent
    binlogstream.GtidSet = gtid_set_for_dump
    QueryEvent._read_status_vars_value_for_key = _status_variable_reader(QueryEvent._read_status_vars_value_for_key)
    _hooks_installed = True


def _status_variable_reader(library_reader: Any) -> Any:
    """The library's reader of one status variable, which skips the remaining status variables on a
    key it does not know instead of raising (see the module docstring)."""

    def read_status_variable(event: Any, key: int) -> None:
        packet = event.packet
        if not hasattr(event, "_status_variables_end"):  # the first key's byte was just read
            event._status_variables_end = packet.read_bytes - 1 + int(event.status_vars_length)
        try:
            library_reader(event, key)
        except StatusVariableMismatch:
            packet.advance(event._status_variables_end - packet.read_bytes)

    return read_status_variable


def install_library_fixes() -> None:
    """Make every change this project needs in python-mysql-replication (idempotent): the table-map
    parsing repairs (:func:`~airflow_provider_mysql_cdc.decoding.library_fixes.install_table_map_fixes`),
    the tagged GTID event's class and the dump request's GTID-set encoding (see the module docstring).

    ``BinlogReader.open`` calls it; anything else that reads table maps with the library (a
    ``BinLogStreamReader`` of its own) must call it before its stream starts."""
    install_table_map_fixes()
    install_stream_hooks()


class SingleConnectionStreamReader(BinLogStreamReader):  # type: ignore[misc]
    """The library's stream reader, without its silent reconnect (it would replay from ``after``)."""

    _connected_once = False

    def _BinLogStreamReader__connect_to_stream(self) -> None:
        if self._connected_once:
            raise BinlogReconnectRefusedError("the binlog stream was lost and the library tried to reconnect")
        self._connected_once = True
        super()._BinLogStreamReader__connect_to_stream()

    def follow_file_checksum(self, event: FormatDescriptionEvent) -> None:
        """Read the events after ``event`` (the ``Format_description`` event that starts each binlog
        file) with or without the 4-byte checksum as that file was written (see the module docstring)."""
        self._BinLogStreamReader__use_checksum = event.checksum_algorithm == _CRC32

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


def release_event(event: Any) -> None:
    """Break the reference cycle between a handled library event and its packet wrapper. Left alone,
    every event's bytes stay until Python's cyclic garbage collector runs, which a few events of many
    MiB (a transaction of big rows) do not trigger, so memory grew with the transaction."""
    wrapper = getattr(event, "packet", None)
    if wrapper is not None and getattr(wrapper, "event", None) is event:
        wrapper.event = None


#: The ``Format_description`` event's checksum algorithm byte for CRC32 (0 is none).
_CRC32 = 1
#: Stands in for the checksum the library's readers expect at the end of an event (see the module docstring).
_CHECKSUM_FILLER = b"\x00" * 4


#: The library's event classes the reader's stream asks for.
STREAM_EVENTS = (
    GtidEvent,
    TaggedGtidEvent,
    QueryEvent,
    ExecuteLoadQueryEvent,  # a session's LOAD DATA logged as a statement: its file's rows are not readable
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
    FormatDescriptionEvent,  # each binlog file's own checksum setting
)


def event_body(event: Any) -> bytes:
    """The event's bytes after the 19-byte header, without checksum (the packet starts with 0x00)."""
    raw: bytes = event.packet.packet.get_all_data()
    return raw[20 : 20 + int(event.event_size)]
