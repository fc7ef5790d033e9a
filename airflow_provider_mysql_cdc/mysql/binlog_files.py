"""Read the server facts the purge-headroom check needs: binlog files with their headers, GTID state,
expiry settings and the server clock; :func:`check_headroom` combines them with a pipeline's frontier.

A file's header is two events: ``Format_description`` (its timestamp is when the file was started)
and ``Previous_gtids``. The GTID set is read as text from ``SHOW BINLOG EVENTS IN 'file' LIMIT 3``
(python-mysql-replication misreads the binary form). The timestamp is not in that output, so a
``COM_BINLOG_DUMP`` is opened at position 4 of the file with the non-blocking flag and server id 0:
the server sends a fake ``Rotate`` and then the file's ``Format_description`` event, and the
connection is closed. Server id 0 matters: a dump with the id of a running replica or capture
would make the server drop that other stream.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql
from pymysql.constants.COMMAND import COM_BINLOG_DUMP

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.headroom import (
    BinlogFileHeader,
    HeadroomReport,
    assess_headroom,
    history_mismatch_report,
)
from airflow_provider_mysql_cdc.core.topology import ServerObservation
from airflow_provider_mysql_cdc.errors import (
    BinlogFileGoneError,
    MissingReplicationPrivilegeError,
    MySqlQueryError,
    MySqlUnreachableError,
)
from airflow_provider_mysql_cdc.mysql.client import connect, connection_to, error_code, error_text, query

if TYPE_CHECKING:
    from pymysql.connections import Connection

    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

_ACCESS_DENIED = 1227  # ER_SPECIFIC_ACCESS_DENIED_ERROR
_FATAL_ERROR_READING_BINLOG = 1236  # the dump's "could not find first log file name"
_ERROR_IN_SHOW_BINLOG_EVENTS = 1220  # "could not find target log"
_LOST_CONNECTION = {2006, 2013, 2055}  # server gone, lost during query, lost over TLS
_FORMAT_DESCRIPTION_EVENT = 15
_BINLOG_DUMP_NON_BLOCK = 1
_HEADER_EVENTS = 3  # fake Rotate, Format_description, then the file's first real event


@dataclass(frozen=True)
class BinlogServerState:
    """What the server says about its binlogs, read in one go."""

    files: tuple[BinlogFileHeader, ...]
    gtid_purged: GtidSet
    gtid_executed: GtidSet
    expire_seconds: int
    auto_purge: bool
    now_us: int
    server_uuid: str = ""

    def observation(self, address: str) -> ServerObservation:
        """What the topology guard (:mod:`airflow_provider_mysql_cdc.core.topology`) needs of this read."""
        return ServerObservation(
            address=address,
            server_uuid=self.server_uuid,
            gtid_executed=self.gtid_executed,
            gtid_purged=self.gtid_purged,
            binlog_files=tuple(file.name for file in self.files),
            first_binlog_previous_gtids=self.files[0].previous_gtids if self.files else None,
            binlog_created_us={file.name: file.created_at_us for file in self.files},
        )


def _missing_privilege(
    connection: Connection[Any], config: MySqlConnectionConfig, privilege: str, purpose: str
) -> MissingReplicationPrivilegeError:
    user = str(query(connection, config, "SELECT CURRENT_USER()")[0][0])
    name, _, host = user.rpartition("@")
    account = f"'{name}'@'{host}'" if name else f"'{user}'"
    return MissingReplicationPrivilegeError(
        f"{account} on {config.address} lacks {privilege} (needed to {purpose}). "
        f"Run as an administrator: GRANT {privilege} ON *.* TO {account};"
    )


def _query(
    connection: Connection[Any], config: MySqlConnectionConfig, sql: str, privilege: str, purpose: str
) -> list[tuple[Any, ...]]:
    """:func:`client.query`, with a missing privilege turned into the GRANT that fixes it."""
    try:
        return query(connection, config, sql)
    except MySqlQueryError as exc:
        if f"[{_ACCESS_DENIED}]" in str(exc):
            raise _missing_privilege(connection, config, privilege, purpose) from None
        if f"[{_ERROR_IN_SHOW_BINLOG_EVENTS}]" in str(exc):
            raise BinlogFileGoneError(f"{sql!r} on {config.address}: the file was purged meanwhile; retry") from None
        raise


def read_previous_gtids(connection: Connection[Any], config: MySqlConnectionConfig, name: str) -> GtidSet:
    """The ``Previous_gtids`` set written at the start of binlog ``name``."""
    quoted = name.replace("\\", "\\\\").replace("'", "\\'")
    rows = _query(
        connection,
        config,
        f"SHOW BINLOG EVENTS IN '{quoted}' LIMIT {_HEADER_EVENTS}",
        "REPLICATION SLAVE",
        "read binlog file headers",
    )
    for row in rows:
        if str(row[2]) == "Previous_gtids":
            return GtidSet.parse(str(row[5] or ""))
    raise MySqlQueryError(f"binlog {name} on {config.address} has no Previous_gtids event in its header: {rows!r}")


@contextmanager
def _dump_connection(config: MySqlConnectionConfig) -> Iterator[Connection[Any]]:
    connection = connect(config, read_timeout=60)
    try:
        query(
            connection,
            config,
            "SET @source_binlog_checksum = @@GLOBAL.binlog_checksum, "
            "@master_binlog_checksum = @@GLOBAL.binlog_checksum",
        )
        yield connection
    finally:
        connection.close()


def read_created_at_us(config: MySqlConnectionConfig, name: str) -> int:
    """When binlog ``name`` was started (its ``Format_description`` event's timestamp), in µs."""
    with _dump_connection(config) as connection:
        raw: Any = connection  # the same private pymysql calls python-mysql-replication makes
        try:
            # COM_BINLOG_DUMP: position (4), flags (2), server id (4), file name; pymysql frames it.
            raw._execute_command(
                COM_BINLOG_DUMP, struct.pack("<IHI", 4, _BINLOG_DUMP_NON_BLOCK, 0) + name.encode("utf-8")
            )
            for _ in range(_HEADER_EVENTS):
                data = raw._read_packet().get_all_data()
                if data[:1] != b"\x00":  # EOF: the file ended before its header
                    break
                timestamp, event_type = struct.unpack_from("<IB", data, 1)
                if event_type == _FORMAT_DESCRIPTION_EVENT:
                    return int(timestamp) * 1_000_000
        except pymysql.err.MySQLError as exc:
            code = error_code(exc)
            if code == _ACCESS_DENIED:
                with connection_to(config) as control:
                    raise _missing_privilege(control, config, "REPLICATION SLAVE", "read binlog file headers") from None
            if code in _LOST_CONNECTION:
                raise MySqlUnreachableError(
                    f"lost MySQL at {config.address} reading binlog {name}: {error_text(exc, config)}"
                ) from None
            if code == _FATAL_ERROR_READING_BINLOG:
                raise BinlogFileGoneError(f"binlog {name} on {config.address} was purged meanwhile; retry") from None
            raise MySqlQueryError(
                f"reading the header of binlog {name} on {config.address} failed: [{code}] {error_text(exc, config)}"
            ) from None
    raise MySqlQueryError(f"binlog {name} on {config.address} has no Format_description event at its start")


def _variables(connection: Connection[Any], config: MySqlConnectionConfig) -> dict[str, str]:
    rows = query(
        connection,
        config,
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
        "('binlog_expire_logs_seconds', 'binlog_expire_logs_auto_purge', 'expire_logs_days')",
    )
    return {str(name).lower(): str(value) for name, value in rows}


def expire_settings(variables: dict[str, str]) -> tuple[int, bool]:
    """``(expire_seconds, auto_purge)``; ``expire_logs_days`` (MySQL 8.0) counts when the seconds are 0,
    and a server without ``binlog_expire_logs_auto_purge`` (before 8.0.29) purges automatically."""
    seconds = int(float(variables.get("binlog_expire_logs_seconds") or 0))
    if seconds == 0:
        seconds = int(float(variables.get("expire_logs_days") or 0)) * 86400
    auto_purge = variables.get("binlog_expire_logs_auto_purge", "ON").upper() not in ("OFF", "0")
    return seconds, auto_purge


def _read_headers(connection: Connection[Any], config: MySqlConnectionConfig) -> tuple[BinlogFileHeader, ...]:
    listed = _query(connection, config, "SHOW BINARY LOGS", "REPLICATION CLIENT", "list the binlog files")
    return tuple(
        BinlogFileHeader(
            str(name),
            int(size),
            read_created_at_us(config, str(name)),
            read_previous_gtids(connection, config, str(name)),
        )
        for name, size, *_ in listed
    )


def read_binlog_state(config: MySqlConnectionConfig) -> BinlogServerState:
    """Binlog files (oldest first) with headers, ``gtid_purged``/``gtid_executed`` (read after the
    headers, so a purge meanwhile shows), expiry settings and the server's clock."""
    with connection_to(config) as connection:
        try:
            files = _read_headers(connection, config)
        except BinlogFileGoneError:  # purged between SHOW BINARY LOGS and its header: list again once
            files = _read_headers(connection, config)
        variables = _variables(connection, config)
        purged, executed, now, uuid = query(
            connection,
            config,
            "SELECT @@GLOBAL.gtid_purged, @@GLOBAL.gtid_executed, UNIX_TIMESTAMP(NOW(6)), @@server_uuid",
        )[0]
    expire_seconds, auto_purge = expire_settings(variables)
    return BinlogServerState(
        files=files,
        gtid_purged=GtidSet.parse(str(purged or "")),
        gtid_executed=GtidSet.parse(str(executed or "")),
        expire_seconds=expire_seconds,
        auto_purge=auto_purge,
        now_us=int(now * 1_000_000),
        server_uuid=str(uuid).lower(),
    )


def last_commit_ts_us(store: FrontierStore, pipeline: str) -> int | None:
    """Commit time of the last captured transaction: the newest published window that recorded one."""
    for window in reversed(store.list_windows(pipeline)):
        value = window.counts.get("last_commit_ts_us") if window.is_published else None
        if value is not None:
            return int(value)
    return None


def check_headroom(
    pipeline: str, source: MySqlConnectionConfig, store: FrontierStore, min_headroom_seconds: int
) -> HeadroomReport:
    """Assess ``pipeline``'s purge headroom on ``source`` (no server read for an unregistered pipeline); a
    server the topology guard refuses is reported as ``history_mismatch``, whatever its binlogs."""
    record = store.get_pipeline(pipeline)
    if record is None:
        return assess_headroom(
            (), None, GtidSet(), GtidSet(), 0, True, 0, None, min_headroom_seconds, pipeline=pipeline
        )
    state = read_binlog_state(source)
    problem = store.server_history_problem(pipeline, "purge-headroom check", state.observation(source.endpoint))
    if problem is not None:
        return history_mismatch_report(pipeline, problem, min_headroom_seconds)
    frontier = record.capture_frontier
    last_commit = None if frontier >= state.gtid_executed else last_commit_ts_us(store, pipeline)
    return assess_headroom(
        state.files,
        frontier,
        state.gtid_purged,
        state.gtid_executed,
        state.expire_seconds,
        state.auto_purge,
        state.now_us,
        last_commit,
        min_headroom_seconds,
        pipeline=pipeline,
    )
