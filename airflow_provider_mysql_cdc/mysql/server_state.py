"""One read of the server per run: what preflight checks, who the server is and its history.

Captures and snapshots read a :class:`ServerState` once, before anything else, and pass it on: the
preflight judges its :class:`~airflow_provider_mysql_cdc.core.preflight.ServerFacts`, the topology
guard (:mod:`airflow_provider_mysql_cdc.core.topology`) its
:class:`~airflow_provider_mysql_cdc.core.topology.ServerObservation`, and capture takes its
``gtid_executed``, ``gtid_purged`` and clock as the moment the task started.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.preflight import ServerFacts
from airflow_provider_mysql_cdc.core.topology import ServerObservation
from airflow_provider_mysql_cdc.errors import BinlogFileGoneError, MySqlQueryError, PreflightFailedError
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

    @property
    def gtid_executed(self) -> GtidSet:
        """``@@GLOBAL.gtid_executed`` when the run started."""
        return self.observation.gtid_executed

    @property
    def gtid_purged(self) -> GtidSet:
        """``@@GLOBAL.gtid_purged`` when the run started."""
        return self.observation.gtid_purged


def _identity(connection: Connection[Any], config: MySqlConnectionConfig) -> tuple[str, GtidSet, GtidSet, int]:
    uuid, executed, purged, now = query(
        connection,
        config,
        "SELECT @@server_uuid, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_purged, "
        "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)",
    )[0]
    return str(uuid).lower(), GtidSet.parse(str(executed or "")), GtidSet.parse(str(purged or "")), int(now)


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
        uuid, executed, purged, now_us = _identity(connection, config)
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
    return ServerState(facts=facts, observation=observation, now_us=now_us)
