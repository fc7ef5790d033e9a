"""Read a MySQL binlog as typed, well-formed transactions.

:class:`BinlogReader` opens a ``COM_BINLOG_DUMP_GTID`` stream with auto-position = ``after`` (the
server sends every transaction not in ``after``) and yields::

    TransactionStart(gtid, commit_ts_us, ...)   one per transaction
      RowsEvent(database, table, kind, event)   the library's row event, rows not decoded yet
      CascadesNotLogged(database, table)        a parent's delete or update logged without its cascades
      QueryStatement(database, sql)             DDL, TRUNCATE, ... (a DDL transaction is
    TransactionCommit()                         start + statement + commit)
    Rotate(binlog_file, position)               between transactions
    Idle()                                      the server has sent everything it has

python-mysql-replication (``pymysqlreplication``) is kept for the protocol: connecting, the dump
command's framing, table maps and row decoding. What the reader changes in it and adds to it (tagged
GTID events, the dump request's GTID set, no silent reconnect, compressed transactions) is
:mod:`.binlog_library`; the byte formats it decodes itself are :mod:`.binlog_protocol`. Table
filtering is the reader's own: the library's ``only_tables``/``only_schemas`` match names, not
``(database, table)`` predicates. Row values are decoded lazily (``RowsEvent.rows``), so a row event
of an unselected table costs its table-map and row-header parse and is never yielded.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import pymysql
from pymysqlreplication.event import (
    ExecuteLoadQueryEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatLogEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from airflow_provider_mysql_cdc.capture.binlog_library import (
    STREAM_EVENTS,
    DumpGtidSet,
    SingleConnectionStreamReader,
    TaggedGtidEvent,
    event_body,
    install_library_fixes,
    release_event,
)
from airflow_provider_mysql_cdc.capture.binlog_protocol import (
    ANONYMOUS_GTID_LOG_EVENT,
    EXECUTE_LOAD_QUERY_POST_HEADER_LENGTH,
    INCIDENT_EVENT,
    decode_gtid_event,
    query_event_parts,
)
from airflow_provider_mysql_cdc.capture.transaction_payload import TRANSACTION_PAYLOAD_EVENT
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import MAX_TRANSACTION_NUMBER, Gtid, GtidSet, Interval, SourceKey
from airflow_provider_mysql_cdc.core.preflight import ServerVersion
from airflow_provider_mysql_cdc.decoding.charsets import charset_of_collation_id, text_decoder
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
    "BinlogItem",
    "BinlogReader",
    "Idle",
    "QueryStatement",
    "Rotate",
    "RowsEvent",
    "TransactionCommit",
    "TransactionStart",
    "XaOutcome",
    "XaPrepared",
]

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
    #: The version of the server the transaction originated on (``80403``; 0: not in the event).
    original_server_version: int = 0


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
    #: The statement's session ``explicit_defaults_for_timestamp``, when the event carries it.
    explicit_defaults_for_timestamp: bool | None = None
    #: Why ``sql`` may not be the statement MySQL read (its bytes in the session's character set), or None.
    text_problem: str | None = None


@dataclass(frozen=True)
class CascadesNotLogged:
    """A delete or update of ``database.table``, a table foreign keys reference, whose row event lacks
    ``USE_SQL_FOREIGN_KEY_F``: the server that wrote it (MySQL before 9.6, or 9.6 and later with
    ``innodb_native_foreign_keys=ON``; a replica keeps its source's flag) ran the keys' cascades inside
    InnoDB, so the rows they changed are in no row event. Yielded before the table's :class:`RowsEvent`."""

    database: str
    table: str


#: The row event flag of a server that runs foreign keys itself and logs what their cascades change
#: (``Rows_log_event::USE_SQL_FOREIGN_KEY_F``, MySQL 9.6 and later; checked on 9.7.4: ``0x11`` with
#: ``STMT_END_F``).
USE_SQL_FOREIGN_KEY_F = 0x10


@dataclass(frozen=True)
class XaPrepared:
    """The transaction ends in a two-phase ``XA PREPARE`` of ``xid``: its rows count once a later
    transaction commits ``xid`` (:class:`XaOutcome`), and never if one rolls it back. Yielded just before
    its :class:`TransactionCommit`."""

    xid: str


@dataclass(frozen=True)
class XaOutcome:
    """The transaction is an ``XA COMMIT`` (``committed``) or ``XA ROLLBACK`` of ``xid``, prepared by an
    earlier transaction; it has no rows of its own."""

    xid: str
    committed: bool


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


BinlogItem = (
    TransactionStart
    | RowsEvent
    | CascadesNotLogged
    | QueryStatement
    | XaPrepared
    | XaOutcome
    | TransactionCommit
    | Idle
    | Rotate
)

# -- protocol: pure encoders and decoders ------------------------------------------------------


def xa_xid(gtrid: bytes, bqual: bytes, format_id: int) -> str:
    """An XA transaction's id as MySQL writes it in the binlog: ``X'6162',X'',1``."""
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


#: ``XA COMMIT``/``XA ROLLBACK`` as the binlog holds them (MySQL 8.0 and 9.x write the id in hex).
_XA_OUTCOME = re.compile(r"XA\s+(COMMIT|ROLLBACK)\s+X'([0-9a-f]*)'\s*,\s*X'([0-9a-f]*)'\s*,\s*(\d+)\s*$", re.I)


def xa_outcome(sql: str) -> XaOutcome | None:
    """The outcome an ``XA COMMIT``/``XA ROLLBACK`` statement of the binlog gives, or None for another text."""
    found = _XA_OUTCOME.match(sql.strip())
    if found is None:
        return None
    verb, gtrid, bqual, format_id = found.groups()
    xid = xa_xid(bytes.fromhex(gtrid), bytes.fromhex(bqual), int(format_id))
    return XaOutcome(xid, committed=verb.upper() == "COMMIT")


# -- python-mysql-replication glue -------------------------------------------------------------


_SKIPPED_STATEMENTS = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT")
#: A transaction logged without a GTID (``Anonymous_gtid``): MySQL writes one while ``gtid_mode`` is
#: below ``ON`` (``ON_PERMISSIVE`` lets a session ``SET gtid_next = 'ANONYMOUS'``; ``OFF_PERMISSIVE``
#: makes every new transaction one), and refuses to send it to a reader asking by GTID set
#: (ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION, error 1236), so no capture can pass it.
_ANONYMOUS_TRANSACTION = (
    "the binlog holds a transaction without a GTID{where}, after {after} (an anonymous transaction, "
    "written while gtid_mode was below ON): a GTID frontier cannot place it, so no capture can read past "
    "it, and which tables it changed cannot be told{server}. Set gtid_mode back to ON one step at a time "
    "(SET PERSIST gtid_mode = ON_PERMISSIVE, then ON; a replica of this server needs the same), run FLUSH "
    "BINARY LOGS so that the binlog goes on in a file after it, then start a new pipeline (its snapshot's "
    "frontier begins in that file; give it target tables of its own, or drop this pipeline's first): this "
    "one stops here every time. Nothing of the window was published"
)
_ANONYMOUS_AT = re.compile(r"at file (?P<file>\S+), position (?P<position>\d+)")


def _anonymous_transaction_error(after: Gtid | GtidSet | None, server_message: str = "") -> BinlogStreamError:
    """The stop for an anonymous transaction after ``after`` (the last transaction read, or the
    frontier); ``server_message`` is MySQL's refusal, which says where the transaction is."""
    found = _ANONYMOUS_AT.search(server_message)
    if found is not None:
        where, server = f" in {found['file'].rsplit('/', 1)[-1]} at position {found['position']}", ""
    else:
        where, server = "", f" (MySQL: {server_message})" if server_message else ""
    following = f"transaction {after}" if isinstance(after, Gtid) else f"the frontier {after or '(empty)'}"
    return BinlogStreamError(_ANONYMOUS_TRANSACTION.format(where=where, after=following, server=server))


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
    of tables for which ``only_tables(database, table)`` is false are not yielded. A delete or update
    of a table for which ``cascade_parents(database, table)`` is true, logged without its cascades, is
    preceded by :class:`CascadesNotLogged` (selected or not).
    ``replica_server_id`` must differ from every other replica's and reader's ``server_id`` on the
    source (the server drops the older of two streams with the same id). Compressed transactions
    (``binlog_transaction_compression``) yield the same items as uncompressed ones. A one-phase XA
    transaction (``XA COMMIT ... ONE PHASE``) is one like any other; a two-phase one ends with
    :class:`XaPrepared`, and the later transaction that commits or rolls it back is one
    :class:`XaOutcome`. Anonymous transactions raise :class:`BinlogStreamError` rather than being skipped.
    """

    def __init__(
        self,
        config: MySqlConnectionConfig,
        *,
        after: GtidSet,
        replica_server_id: int,
        only_tables: Callable[[str, str], bool] | None = None,
        cascade_parents: Callable[[str, str], bool] | None = None,
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
        #: Tables whose deletes and updates are checked for :class:`CascadesNotLogged` (None: none).
        self._cascade_parents = cascade_parents
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
        self._stream = SingleConnectionStreamReader(
            connection_settings=settings,
            server_id=self._server_id,
            blocking=True,
            auto_position=DumpGtidSet(self._after),
            only_events=STREAM_EVENTS,
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
            release_event(event)

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
            if code == _FATAL_ERROR_READING_BINLOG and "checksum" in text.lower():
                read_to = self._last_gtid or self._after
                raise BinlogStreamError(
                    f"the binlog stream from {self._config.address} failed after {read_to}: [{code}] {text}. The "
                    "binlog files still to read were written with binlog_checksum = CRC32, and a reader connected "
                    "while the server's binlog_checksum is NONE cannot ask for them. "
                    "Set it back (SET PERSIST binlog_checksum = 'CRC32') and run the capture again: it reads files "
                    "written under either setting"
                ) from None
            if code == _FATAL_ERROR_READING_BINLOG and "anonymous transaction" in text.lower():
                raise _anonymous_transaction_error(self._last_gtid or self._after, text) from None
            if code in _LOST_CONNECTION:
                raise self._lost(text) from None
            raise BinlogStreamError(f"the binlog stream from {self._config.address} failed: [{code}] {text}") from None
        except OSError as exc:
            raise self._lost(str(exc)) from None
        if event is None:
            raise self._lost("the server ended the stream")
        return event

    def _items_for(self, event: Any) -> Iterator[BinlogItem]:
        if isinstance(event, GtidEvent | TaggedGtidEvent):
            yield from self._start(event)
        elif isinstance(event, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
            self._require_transaction(event)
            if self._skipping:
                return
            if (
                self._cascade_parents is not None
                and not int(event.flags) & USE_SQL_FOREIGN_KEY_F
                and not isinstance(event, WriteRowsEvent)
                and self._cascade_parents(event.schema, event.table)
            ):
                yield CascadesNotLogged(event.schema, event.table)
            if self._selected(event.schema, event.table):
                yield RowsEvent(event.schema, event.table, _rows_kind(event), event)
        elif isinstance(event, XidEvent):
            self._require_transaction(event)
            yield from self._commit()
        elif isinstance(event, QueryEvent):
            yield from self._query(event)
        elif isinstance(event, ExecuteLoadQueryEvent):
            yield from self._load_data(event)
        elif isinstance(event, HeartbeatLogEvent):
            if self._open_gtid is None and self._caught_up(event):
                yield Idle()
        elif isinstance(event, RotateEvent):
            self._binlog_file = str(event.next_binlog)
            yield Rotate(self._binlog_file, int(event.position))
        elif isinstance(event, FormatDescriptionEvent):
            assert self._stream is not None
            self._stream.follow_file_checksum(event)
        elif isinstance(event, XAPrepareEvent):
            self._require_transaction(event)
            if not event.one_phase and not self._skipping:  # its rows count once an XA COMMIT commits it
                yield XaPrepared(xa_xid(bytes(event.xid_gtrid), bytes(event.xid_bqual), int(event.xid_format_id)))
            yield from self._commit()  # XA COMMIT ... ONE PHASE: committed here, like a COMMIT
        elif event.event_type == TRANSACTION_PAYLOAD_EVENT:
            yield from self._payload(event)
        elif event.event_type == INCIDENT_EVENT:
            raise BinlogStreamError(
                f"the source wrote an Incident event after transaction {self._last_gtid} (binlog "
                f"{self._binlog_file}, end position {event.packet.log_pos}): it may have lost changes it could "
                "not log (a replica stops there too), and which ones cannot be known. Look at the source's "
                "error log, then re-snapshot the pipeline's tables"
            )
        elif event.event_type == ANONYMOUS_GTID_LOG_EVENT:
            where = f"at file {self._binlog_file}, position {event.packet.log_pos}"  # the event's end
            raise _anonymous_transaction_error(self._last_gtid or self._after, where)

    def _start(self, event: Any) -> Iterator[BinlogItem]:
        if self._open_gtid is not None:
            raise BinlogStreamError(f"transaction {self._open_gtid} has no end before the next GTID event")
        data = decode_gtid_event(event.event_type, event_body(event))
        self._open_gtid = data.gtid
        self._in_begin = False
        self._skipping = data.gtid in self._after or data.gtid in self._seen
        if not self._skipping:
            packet = event.packet
            position = int(packet.log_pos) - int(packet.event_size)
            yield TransactionStart(
                data.gtid,
                data.immediate_commit_ts_us,
                data.original_commit_ts_us,
                self._binlog_file,
                position,
                data.original_server_version,
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
                release_event(inner)
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
        elif keyword.startswith(("XA START", "XA BEGIN")):
            self._in_begin = True  # its end: XA COMMIT ... ONE PHASE, or an XA PREPARE
        elif keyword.startswith("XA END"):
            pass
        elif keyword.startswith("XA "):  # XA COMMIT or XA ROLLBACK of one prepared earlier: a whole transaction
            if not self._skipping:
                outcome = xa_outcome(sql)
                if outcome is None:
                    raise BinlogStreamError(
                        f"transaction {self._open_gtid}: an XA statement that cannot be read: {sql[:80]!r}"
                    )
                yield outcome
            yield from self._commit()
        elif self._in_begin and keyword.startswith(_SKIPPED_STATEMENTS):
            pass
        else:
            if not self._skipping:
                database = bytes(event.schema).decode("utf-8", errors="replace")
                mode = getattr(event, "sql_mode", None)
                explicit = getattr(event, "explicit_defaults_ts", None)
                text, problem = self._statement_text(event)
                yield QueryStatement(
                    database,
                    text.strip(),
                    None if mode is None else int(mode),
                    None if explicit is None else bool(explicit),
                    problem,
                )
            if not self._in_begin:  # DDL commits itself
                yield from self._commit()

    def _load_data(self, event: Any) -> Iterator[BinlogItem]:
        """A ``LOAD DATA`` a session logged as a statement (``Execute_load_query``): the file's rows are
        not in the binlog as rows. Its text goes on as a statement (a data statement, which the schema
        tracker answers with a rebuild of every followed table)."""
        self._require_transaction(event)
        if self._skipping:
            return
        try:
            schema, statement = query_event_parts(event_body(event), EXECUTE_LOAD_QUERY_POST_HEADER_LENGTH)
        except ValueError as exc:
            raise BinlogStreamError(f"transaction {self._open_gtid}: a LOAD DATA event cannot be read: {exc}") from None
        text = statement.decode("utf-8", errors="replace").strip()
        if not text.upper().startswith("LOAD"):
            raise BinlogStreamError(f"transaction {self._open_gtid}: a LOAD DATA event holds {text[:60]!r}")
        yield QueryStatement(schema.decode("utf-8", errors="replace"), text)

    def _statement_text(self, event: Any) -> tuple[str, str | None]:
        """The statement as MySQL read it: its bytes decoded from the session's ``character_set_client``
        (the library decodes them as UTF-8), and why that text may not be exact (None: it is)."""
        library_text = str(event.query)
        client = getattr(event, "character_set_client", None)
        if client is None:
            return library_text, None
        try:
            _schema, raw = query_event_parts(event_body(event))
        except ValueError as exc:
            raise BinlogStreamError(f"transaction {self._open_gtid}: a Query event cannot be read: {exc}") from None
        if raw.decode("utf-8", errors="backslashreplace") != library_text:
            raise BinlogStreamError(
                f"transaction {self._open_gtid} (binlog {self._binlog_file}, end position {event.packet.log_pos}): "
                "a Query event's statement bytes are not where its header says"
            )
        client_charset = charset_of_collation_id(client)
        try:
            text = text_decoder(client_charset, "statement")(raw)
        except TerminalCdcError as exc:
            return library_text, f"its text cannot be read in the session's character set {client_charset}: {exc}"
        connection = getattr(event, "collation_connection", None)
        connection_charset = client_charset if connection is None else charset_of_collation_id(connection)
        keeps_text = connection_charset in (client_charset, "utf8mb4") or (
            connection_charset == "utf8mb3" and all(ord(char) <= 0xFFFF for char in text)
        )
        if not keeps_text and not text.isascii():
            return text, (
                f"its literals were converted from the session's character set {client_charset} to "
                f"character_set_connection {connection_charset}"
            )
        return text, None

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
