"""One read of the server per run: what preflight checks, who the server is and its history.

Captures and snapshots read a :class:`ServerState` once, before anything else, and pass it on: the
preflight judges its :class:`~airflow_provider_mysql_cdc.core.preflight.ServerFacts`, the topology
guard (:mod:`airflow_provider_mysql_cdc.core.topology`) its
:class:`~airflow_provider_mysql_cdc.core.topology.ServerObservation`, and capture takes its
``gtid_executed``, ``gtid_purged``, GTIDs in flight and clock as the moment the task started.

The clock and ``@@GLOBAL.gtid_owned`` are read first, ``gtid_executed`` right after: a transaction
that had its commit timestamp by then (its GTID is owned from the binlog flush on, before the
timestamp is taken) is in one of the two, so a ``data_interval`` window ending at or before that
clock holds no transaction outside them (see :mod:`~airflow_provider_mysql_cdc.capture.window_reading`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet, parse_owned_gtids
from airflow_provider_mysql_cdc.core.preflight import ServerFacts
from airflow_provider_mysql_cdc.core.topology import ServerObservation
from airflow_provider_mysql_cdc.errors import (
    BinlogFileGoneError,
    InvalidGtidSetError,
    MySqlQueryError,
    PreflightFailedError,
)
from airflow_provider_mysql_cdc.mysql.binlog_files import read_created_at_us, read_previous_gtids
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from airflow_provider_mysql_cdc.mysql.introspection import read_binlog_inventory, read_server_facts

if TYPE_CHECKING:
    from pymysql.connections import Connection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerState:
    """The server as one run found it when it started."""

    facts: ServerFacts
    observation: ServerObservation
    #: The server's clock when it was read (UTC microseconds).
    now_us: int
    #: ``@@GLOBAL.gtid_owned`` read at ``now_us``, before ``gtid_executed``: transactions that had their
    #: GTID but had not committed; None when its text could not be read as GTIDs.
    gtid_in_flight: GtidSet | None = None

    @property
    def gtid_executed(self) -> GtidSet:
        """``@@GLOBAL.gtid_executed`` when the run started."""
        return self.observation.gtid_executed

    @property
    def gtid_purged(self) -> GtidSet:
        """``@@GLOBAL.gtid_purged`` when the run started."""
        return self.observation.gtid_purged


def _identity(
    connection: Connection[Any], config: MySqlConnectionConfig
) -> tuple[str, GtidSet, GtidSet, int, GtidSet | None]:
    """Server UUID, ``gtid_executed``, ``gtid_purged``, the clock and the GTIDs in flight, the last two
    read in a statement before the others (see the module docstring)."""
    now, owned = query(
        connection, config, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED), @@GLOBAL.gtid_owned"
    )[0]
    uuid, executed, purged = query(
        connection, config, "SELECT @@server_uuid, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_purged"
    )[0]
    try:
        in_flight: GtidSet | None = parse_owned_gtids(str(owned or ""))
    except InvalidGtidSetError as exc:
        log.info(
            "%s: gtid_owned not read (%s); data_interval windows end at the end of the binlog", config.address, exc
        )
        in_flight = None
    return str(uuid).lower(), GtidSet.parse(str(executed or "")), GtidSet.parse(str(purged or "")), int(now), in_flight


def _binlog_files(connection: Connection[Any], config: MySqlConnectionConfig) -> tuple[tuple[str, ...], GtidSet | None]:
    """The binlog file names and the first one's ``Previous_gtids``; nothing when they cannot be read
    (binary logging off, a missing privilege: the preflight names those)."""
    for _ in range(2):  # the first file may be purged between the listing and its header: list again once
        try:
            names = tuple(file.name for file in read_binlog_inventory(connection, config).files)
            previous = read_previous_gtids(connection, config, names[0]) if names else None
        except BinlogFileGoneError:
            continue
        except (MySqlQueryError, PreflightFailedError) as exc:
            log.info("binlog files of %s not read (%s); the history guard skips its binlog rules", config.address, exc)
            return (), None
        return names, previous
    return (), None


def _started(config: MySqlConnectionConfig, names: Iterable[str]) -> dict[str, int]:
    """When each file was started; files purged meanwhile are left out."""
    started: dict[str, int] = {}
    for name in dict.fromkeys(names):
        try:
            started[name] = read_created_at_us(config, name)
        except (BinlogFileGoneError, PreflightFailedError):  # purged meanwhile; no REPLICATION SLAVE
            continue
    return started


def read_server_state(config: MySqlConnectionConfig, *, known_binlogs: Iterable[str] = ()) -> ServerState:
    """Read the server's facts, identity and history in one connection (plus one short binlog dump per
    timed file: the first, the last, and those of ``known_binlogs`` still listed, typically the files
    the pipeline's last observation recorded)."""
    with connection_to(config) as connection:
        facts = read_server_facts(connection, config, with_tables=False)
        uuid, executed, purged, now_us, in_flight = _identity(connection, config)
        names, first_previous = _binlog_files(connection, config)
    timed = [name for name in (*names[:1], *names[-1:], *known_binlogs) if name in names]
    observation = ServerObservation(
        address=config.endpoint,
        server_uuid=uuid,
        gtid_executed=executed,
        gtid_purged=purged,
        binlog_files=names,
        first_binlog_previous_gtids=first_previous,
        binlog_created_us=_started(config, timed) if timed else {},
    )
    return ServerState(facts=facts, observation=observation, now_us=now_us, gtid_in_flight=in_flight)
