"""A second local mysqld that replicates from a source with GTID auto-position: the oracle of the
reliability tests (stopped exactly at a window's upper GTID set, it *is* MySQL as of that set) and
the failover target (its own binlog, ``log_replica_updates=ON``, carries the source's GTIDs).

The replica starts from an empty GTID state (``RESET BINARY LOGS AND GTIDS``; the local accounts
are created with ``sql_log_bin=0``, so they leave no GTIDs), runs one applier worker
(``replica_parallel_workers=1``: ``SQL_AFTER_GTIDS`` then stops exactly after the last transaction
of the set) and is ``read_only``/``super_read_only`` until :meth:`Replica.promote`. The source gets a
replication account ``repl`` created with ``sql_log_bin=0`` (no GTID on the source, nothing to
replicate); the replica authenticates with ``GET_SOURCE_PUBLIC_KEY=1`` (caching_sha2_password).

``skip_existing=True`` sets the replica's ``gtid_purged`` to the source's ``gtid_executed`` before
replicating: the replica then applies only transactions committed after it started (use it on a
shared source whose history, written by other tests, may not replay cleanly, and when the data under
test is created afterwards). ``wild_do_tables`` (e.g. ``("rel\\_s%.%",)``) restricts what the applier
applies; filtered transactions are still recorded in the replica's ``gtid_executed`` (as empty
transactions), so GTID bookkeeping is unaffected.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pymysql.cursors

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.mysql.client import connection_to
from tests.mysql_servers import MySqlTestServer, start_local, stop_local

REPLICATION_USER = "repl"
#: Settings of the replica (on top of testbed.mysql's defaults: GTIDs, ROW binlog, FULL images);
#: ``super_read_only`` is set once the accounts exist.
REPLICA_SETTINGS = {
    "replica_parallel_workers": "1",
    "log_replica_updates": "ON",
    "skip_replica_start": "ON",
}
_POLL_S = 0.05


class ReplicationError(RuntimeError):
    """Replication stopped with an error, overshot a target, or did not get there in time."""


def _status(server: MySqlTestServer) -> dict[str, Any]:
    with (
        connection_to(server.admin, cursorclass=pymysql.cursors.DictCursor) as connection,
        connection.cursor() as cursor,
    ):
        cursor.execute("SHOW REPLICA STATUS")
        row = cursor.fetchone()
    return dict(row) if row else {}


def _gtid_executed(server: MySqlTestServer) -> GtidSet:
    rows = server.execute("SELECT @@GLOBAL.gtid_executed")
    return GtidSet.parse(str(rows[0][0] or ""))


@dataclass
class Replica:
    """A running replica of ``source``; ``server`` has the usual admin and ``cdc`` accounts."""

    server: MySqlTestServer
    source: MySqlTestServer
    server_uuid: str = field(default="")

    def executed(self) -> GtidSet:
        """The replica's ``gtid_executed``."""
        return _gtid_executed(self.server)

    def _source_part(self, gtids: GtidSet) -> GtidSet:
        """``gtids`` without the replica's own transactions (written on it directly, e.g. after promote)."""
        own = {key: intervals for key, intervals in gtids.sources.items() if key[0] == self.server_uuid}
        return gtids - GtidSet.from_intervals(own)

    def _raise_if_broken(self, status: dict[str, Any]) -> None:
        for prefix in ("Last_SQL", "Last_IO"):
            errno = int(status.get(f"{prefix}_Errno") or 0)
            if errno:
                raise ReplicationError(
                    f"replica {self.server.admin.port} broke: {prefix}_Errno={errno} {status.get(f'{prefix}_Error')!s}"
                )

    def apply_until(self, gtids: GtidSet, timeout_s: float = 600) -> None:
        """Apply exactly the source transactions in ``gtids`` (``START REPLICA SQL_THREAD UNTIL
        SQL_AFTER_GTIDS``) and leave the SQL thread stopped there; raise :class:`ReplicationError`
        with the replica's error if replication broke, if the replica already executed source
        transactions outside ``gtids``, or on timeout."""
        self.server.execute("STOP REPLICA SQL_THREAD")
        self._check_not_beyond(gtids)
        if gtids <= self.executed():
            return
        self.server.execute(f"START REPLICA SQL_THREAD UNTIL SQL_AFTER_GTIDS = '{gtids}'")
        deadline = time.monotonic() + timeout_s
        while True:
            status = _status(self.server)
            self._raise_if_broken(status)
            executed = self.executed()
            if gtids <= executed and status.get("Replica_SQL_Running") == "No":
                break
            if status.get("Replica_SQL_Running") == "No" and not gtids <= executed:
                raise ReplicationError(
                    f"replica SQL thread stopped before reaching {gtids} (executed {executed}); status: "
                    f"{status.get('Last_SQL_Error')!s}"
                )
            if time.monotonic() > deadline:
                raise ReplicationError(
                    f"replica did not apply {gtids} within {timeout_s:.0f}s (executed {executed}, "
                    f"received {status.get('Retrieved_Gtid_Set')!s})"
                )
            time.sleep(_POLL_S)
        self._check_not_beyond(gtids)

    def _check_not_beyond(self, gtids: GtidSet) -> None:
        extra = self._source_part(self.executed() - gtids)
        if extra:
            raise ReplicationError(f"replica executed source transactions beyond {gtids}: {extra}")

    def catch_up(self, timeout_s: float = 600) -> None:
        """``START REPLICA``; wait until the replica executed the source's current ``gtid_executed``."""
        target = _gtid_executed(self.source)
        self.server.execute("START REPLICA")
        deadline = time.monotonic() + timeout_s
        while True:
            status = _status(self.server)
            self._raise_if_broken(status)
            if target <= self.executed():
                return
            if time.monotonic() > deadline:
                raise ReplicationError(f"replica did not catch up to {target} within {timeout_s:.0f}s")
            time.sleep(_POLL_S)

    def promote(self) -> None:
        """``STOP REPLICA; RESET REPLICA ALL``; ``read_only``/``super_read_only`` OFF."""
        self.server.execute(
            "STOP REPLICA",
            "RESET REPLICA ALL",
            "SET GLOBAL super_read_only = OFF",
            "SET GLOBAL read_only = OFF",
        )


def _replication_password() -> str:
    return "repl-" + secrets.token_hex(8)


@contextlib.contextmanager
def running_replica(
    source: MySqlTestServer,
    name: str,
    *,
    skip_existing: bool = False,
    wild_do_tables: Sequence[str] = (),
    settings: Mapping[str, str] | None = None,
) -> Iterator[Replica]:
    """A fresh local replica of ``source`` named ``name``, its IO thread running and its SQL thread
    stopped (call :meth:`Replica.apply_until` or :meth:`Replica.catch_up`); stopped by PID and
    deleted at exit. ``settings`` override :data:`REPLICA_SETTINGS`."""
    password = _replication_password()
    source.execute(
        "SET SESSION sql_log_bin = 0",
        f"CREATE USER IF NOT EXISTS '{REPLICATION_USER}'@'%' IDENTIFIED BY '{password}'",
        f"ALTER USER '{REPLICATION_USER}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT REPLICATION SLAVE ON *.* TO '{REPLICATION_USER}'@'%'",
    )
    server = start_local(name, {**REPLICA_SETTINGS, **(settings or {})})
    try:
        # read_only cannot be a start-up setting: testbed.mysql creates the accounts after start-up.
        statements = [
            "STOP REPLICA",
            "RESET REPLICA ALL",
            "RESET BINARY LOGS AND GTIDS",
            "SET GLOBAL super_read_only = ON",
        ]
        if skip_existing:
            statements.append(f"SET GLOBAL gtid_purged = '{_gtid_executed(source)}'")
        statements.append(
            f"CHANGE REPLICATION SOURCE TO SOURCE_HOST = '{source.admin.host}', SOURCE_PORT = {source.admin.port}, "
            f"SOURCE_USER = '{REPLICATION_USER}', SOURCE_PASSWORD = '{password}', SOURCE_AUTO_POSITION = 1, "
            "GET_SOURCE_PUBLIC_KEY = 1, SOURCE_CONNECT_RETRY = 1"
        )
        if wild_do_tables:
            patterns = ", ".join(f"'{pattern}'" for pattern in wild_do_tables)
            statements.append(f"CHANGE REPLICATION FILTER REPLICATE_WILD_DO_TABLE = ({patterns})")
        statements.append("START REPLICA IO_THREAD")
        server.execute(*statements)
        uuid = str(server.execute("SELECT @@GLOBAL.server_uuid")[0][0])
        yield Replica(server=server, source=source, server_uuid=uuid.lower())
    finally:
        with contextlib.suppress(pymysql.MySQLError, OSError, RuntimeError):
            server.execute("STOP REPLICA")
        stop_local([server])
