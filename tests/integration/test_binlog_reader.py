"""BinlogReader against a real MySQL server, read with the documented ``cdc`` account.

Every test starts its reader at the ``@@gtid_executed`` read before its own writes, so tests do not
see each other's transactions.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_provider_mysql_cdc.capture.binlog_protocol import GTID_LOG_EVENT, GTID_TAGGED_LOG_EVENT, decode_gtid_event
from airflow_provider_mysql_cdc.capture.binlog_reader import (
    BinlogItem,
    BinlogReader,
    Idle,
    QueryStatement,
    Rotate,
    RowsEvent,
    TransactionCommit,
    TransactionStart,
)
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.errors import BinlogConnectionLostError, BinlogPurgedError, BinlogStreamError
from testbed.mysql import tool_env
from tests.conftest import INSTANCE_PREFIX
from tests.mysql_servers import MySqlTestServer, running_local

pytestmark = pytest.mark.mysql

DB = "binlog_reader_test"
HEARTBEAT = 0.5
_server_ids = itertools.count(4100)

Transaction = tuple[TransactionStart, list[BinlogItem]]


@pytest.fixture(scope="module")
def server(mysql_server: MySqlTestServer) -> MySqlTestServer:
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.a (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE {DB}.b (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    return mysql_server


def executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))


def reader(config: MySqlConnectionConfig, after: GtidSet, **kwargs: Any) -> BinlogReader:
    return BinlogReader(config, after=after, replica_server_id=next(_server_ids), heartbeat_seconds=HEARTBEAT, **kwargs)


def read_until_idle(config: MySqlConnectionConfig, after: GtidSet, **kwargs: Any) -> list[BinlogItem]:
    items: list[BinlogItem] = []
    with reader(config, after, **kwargs) as binlog:
        for item in binlog:
            if isinstance(item, Idle):
                return items
            items.append(item)
    raise AssertionError("the stream ended without Idle")


def transactions(items: list[BinlogItem]) -> list[Transaction]:
    """Group items into transactions, asserting that they are well formed."""
    result: list[Transaction] = []
    current: Transaction | None = None
    for item in items:
        if isinstance(item, Rotate):
            assert current is None, f"rotate inside {current}"
        elif isinstance(item, TransactionStart):
            assert current is None, f"{item} inside {current}"
            current = (item, [])
        elif isinstance(item, TransactionCommit):
            assert current is not None, "commit without start"
            result.append(current)
            current = None
        else:
            assert current is not None, f"{item} outside a transaction"
            current[1].append(item)
    assert current is None, f"unfinished {current}"
    return result


def row_summary(body: list[BinlogItem]) -> list[tuple[str, str]]:
    return [(item.table, item.kind) for item in body if isinstance(item, RowsEvent)]


def test_tagged_and_untagged_transactions_interleaved(server: MySqlTestServer) -> None:
    before = executed(server)
    server.execute(
        f"INSERT INTO {DB}.a VALUES (1, 'one')",
        "SET gtid_next = 'AUTOMATIC:etl'",
        f"INSERT INTO {DB}.a VALUES (2, 'two')",
        "BEGIN",
        f"INSERT INTO {DB}.a VALUES (3, 'three')",
        f"UPDATE {DB}.a SET v = 'uno' WHERE id = 1",
        f"INSERT INTO {DB}.b VALUES (1, 'b1')",
        "COMMIT",
        "SET gtid_next = 'AUTOMATIC'",
        f"DELETE FROM {DB}.a WHERE id = 2",
        "SET gtid_next = 'AUTOMATIC:Backfill_2'",
        f"INSERT INTO {DB}.b VALUES (2, 'b2')",
        "SET gtid_next = 'AUTOMATIC'",
    )
    written = executed(server) - before

    txs = transactions(read_until_idle(server.cdc, before))

    assert [start.gtid.tag for start, _ in txs] == ["", "etl", "etl", "", "backfill_2"]
    assert GtidSet.of(start.gtid for start, _ in txs) == written
    assert [row_summary(body) for _, body in txs] == [
        [("a", "insert")],
        [("a", "insert")],
        [("a", "insert"), ("a", "update"), ("b", "insert")],
        [("a", "delete")],
        [("b", "insert")],
    ]
    tagged_rows = next(item for item in txs[1][1] if isinstance(item, RowsEvent))
    assert tagged_rows.database == DB
    assert tagged_rows.event.rows[0]["values"] == {"id": 2, "v": "two"}
    assert all(not isinstance(item, QueryStatement) for _, body in txs for item in body)


def mysqlbinlog_commit_timestamps(server: MySqlTestServer) -> dict[Gtid, tuple[int, int]]:
    """``{gtid: (immediate, original)}`` as ``mysqlbinlog`` prints them for the server's binlogs."""
    assert server.local is not None
    files = sorted(str(path) for path in server.local.datadir.glob("binlog.[0-9]*"))
    output = subprocess.run(
        [*server.local.mysqlbinlog_argv(), *files],
        env=tool_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[Gtid, tuple[int, int]] = {}
    pending: tuple[int, int] | None = None
    for line in output.splitlines():
        header = re.search(r"original_committed_timestamp=(\d+)\s+immediate_commit_timestamp=(\d+)", line)
        if header:
            pending = (int(header.group(2)), int(header.group(1)))
        gtid_next = re.match(r"SET @@SESSION.GTID_NEXT= '([^']+)'", line)
        if gtid_next and pending is not None:
            found[Gtid.parse(gtid_next.group(1))] = pending
            pending = None
    return found


def test_commit_timestamps_are_plausible_and_equal_mysqlbinlogs(server: MySqlTestServer) -> None:
    if server.local is None:
        pytest.skip("needs the local server's binlog files for mysqlbinlog")
    before = executed(server)
    started_us = int(time.time() * 1_000_000)
    server.execute(
        f"INSERT INTO {DB}.a VALUES (10, 'ts')",
        "SET gtid_next = 'AUTOMATIC:etl'",
        f"UPDATE {DB}.a SET v = 'ts2' WHERE id = 10",
        "SET gtid_next = 'AUTOMATIC'",
        # As a replica applier would: the transaction originated elsewhere, earlier.
        "SET @@SESSION.original_commit_timestamp = 1500000000123456",
        f"UPDATE {DB}.a SET v = 'ts3' WHERE id = 10",
        "SET gtid_next = 'AUTOMATIC:etl'",
        "SET @@SESSION.original_commit_timestamp = 1500000000654321",
        f"DELETE FROM {DB}.a WHERE id = 10",
        "SET gtid_next = 'AUTOMATIC'",
    )
    ended_us = int(time.time() * 1_000_000)

    starts = [start for start, _ in transactions(read_until_idle(server.cdc, before))]
    expected = mysqlbinlog_commit_timestamps(server)

    assert len(starts) == 4
    for start in starts:
        assert started_us - 1_000_000 <= start.commit_ts_us <= ended_us + 1_000_000
        assert expected[start.gtid] == (start.commit_ts_us, start.original_commit_ts_us)
    assert [start.original_commit_ts_us for start in starts[2:]] == [1500000000123456, 1500000000654321]
    assert starts[0].original_commit_ts_us == starts[0].commit_ts_us
    assert starts == sorted(starts, key=lambda start: start.commit_ts_us)
    # From the first start on: an earlier test's event before it may be larger than the server reads back.
    first = min(start.binlog_position for start in starts)
    events = server.execute(f"SHOW BINLOG EVENTS IN '{starts[0].binlog_file}' FROM {first}")
    gtid_positions = {int(row[1]) for row in events if str(row[2]).startswith("Gtid")}
    assert {start.binlog_position for start in starts} <= gtid_positions


def test_ddl_yields_a_statement_and_an_implicit_commit(server: MySqlTestServer) -> None:
    before = executed(server)
    server.execute(
        f"USE {DB}",
        "CREATE TABLE ddl_t (id INT PRIMARY KEY)",
        "ALTER TABLE ddl_t ADD COLUMN note VARCHAR(10)",
        "INSERT INTO ddl_t VALUES (1, 'x')",
        "TRUNCATE TABLE ddl_t",
        "DROP TABLE ddl_t",
    )
    txs = transactions(read_until_idle(server.cdc, before))

    statements = [[item for item in body if isinstance(item, QueryStatement)] for _, body in txs]
    assert [len(found) for found in statements] == [1, 1, 0, 1, 1]
    assert [found[0].sql.split()[0].upper() for found in statements if found] == ["CREATE", "ALTER", "TRUNCATE", "DROP"]
    assert all(found[0].database == DB for found in statements if found)
    assert row_summary(txs[2][1]) == [("ddl_t", "insert")]


def test_transactions_in_after_or_already_read_are_skipped(server: MySqlTestServer) -> None:
    before = executed(server)
    for number in range(6):
        server.execute(f"INSERT INTO {DB}.b VALUES ({100 + number}, 'dedupe')")
    gtids = [start.gtid for start, _ in transactions(read_until_idle(server.cdc, before))]
    assert len(gtids) == 6

    first_half = before | GtidSet.of(gtids[:3])
    assert [start.gtid for start, _ in transactions(read_until_idle(server.cdc, first_half))] == gtids[3:]

    holes = before | GtidSet.of([gtids[1], gtids[4]])
    assert [start.gtid for start, _ in transactions(read_until_idle(server.cdc, holes))] == [
        gtids[0],
        gtids[2],
        gtids[3],
        gtids[5],
    ]

    with reader(server.cdc, before) as binlog:
        list(itertools.takewhile(lambda item: not isinstance(item, Idle), binlog))
        assert binlog.reached() == before | GtidSet.of(gtids)
        assert binlog.last_gtid == gtids[-1]


def test_the_server_does_not_resend_tagged_gtids_of_after(server: MySqlTestServer, monkeypatch: Any) -> None:
    before = executed(server)
    server.execute(
        "SET gtid_next = 'AUTOMATIC:etl'",
        f"INSERT INTO {DB}.b VALUES (200, 'tag1')",
        f"INSERT INTO {DB}.b VALUES (201, 'tag2')",
        "SET gtid_next = 'AUTOMATIC'",
        f"INSERT INTO {DB}.b VALUES (202, 'untagged')",
        "SET gtid_next = 'AUTOMATIC:other'",
        f"INSERT INTO {DB}.b VALUES (203, 'other')",
        "SET gtid_next = 'AUTOMATIC'",
    )
    written = executed(server) - before
    tagged_etl = GtidSet.from_intervals({key: iv for key, iv in written.sources.items() if key[1] == "etl"})
    assert len(tagged_etl) == 2
    after = before | tagged_etl

    sent: list[Gtid] = []
    items: list[BinlogItem] = []
    with reader(server.cdc, after) as binlog:
        next_event: Callable[[], Any] = binlog._next_event

        def spy() -> Any:
            event = next_event()
            if event.event_type in (GTID_LOG_EVENT, GTID_TAGGED_LOG_EVENT):
                body = event.packet.packet.get_all_data()[20 : 20 + event.event_size]
                sent.append(decode_gtid_event(event.event_type, body).gtid)
            return event

        monkeypatch.setattr(binlog, "_next_event", spy)
        items = list(itertools.takewhile(lambda item: not isinstance(item, Idle), binlog))

    assert GtidSet.of(sent) == written - tagged_etl  # excluded by the server, not by the reader
    assert [start.gtid.tag for start, _ in transactions(items)] == ["", "other"]


def test_only_tables_filters_row_events(server: MySqlTestServer) -> None:
    before = executed(server)
    server.execute(
        f"INSERT INTO {DB}.a VALUES (300, 'kept')",
        f"INSERT INTO {DB}.b VALUES (300, 'dropped')",
        "BEGIN",
        f"INSERT INTO {DB}.a VALUES (301, 'kept')",
        f"INSERT INTO {DB}.b VALUES (301, 'dropped')",
        "COMMIT",
    )
    asked: list[tuple[str, str]] = []

    def only_a(database: str, table: str) -> bool:
        asked.append((database, table))
        return (database, table) == (DB, "a")

    txs = transactions(read_until_idle(server.cdc, before, only_tables=only_a))

    assert [row_summary(body) for _, body in txs] == [[("a", "insert")], [], [("a", "insert")]]
    assert sorted(set(asked)) == asked == [(DB, "a"), (DB, "b")]  # the predicate's answer is cached


def test_idle_when_caught_up_then_new_transactions_arrive(server: MySqlTestServer) -> None:
    before = executed(server)
    server.execute(f"INSERT INTO {DB}.a VALUES (400, 'before idle')")
    seen: list[tuple[float, BinlogItem]] = []
    started = time.monotonic()
    with reader(server.cdc, before) as binlog:
        for item in binlog:
            seen.append((time.monotonic() - started, item))
            if isinstance(item, Idle):
                if sum(isinstance(other, Idle) for _, other in seen) == 2:
                    break
                threading.Timer(0.2, server.execute, [f"INSERT INTO {DB}.a VALUES (401, 'after idle')"]).start()

    kinds = [type(item).__name__ for _, item in seen]
    assert kinds == [
        "Rotate",
        "TransactionStart",
        "RowsEvent",
        "TransactionCommit",
        "Idle",
        "TransactionStart",
        "RowsEvent",
        "TransactionCommit",
        "Idle",
    ]
    first_idle = next(at for at, item in seen if isinstance(item, Idle))
    assert first_idle < 3 * HEARTBEAT + 1


def test_lost_connection_raises_instead_of_replaying(server: MySqlTestServer) -> None:
    before = executed(server)
    server.execute(f"INSERT INTO {DB}.a VALUES (500, 'lost')")
    with reader(server.cdc, before) as binlog, pytest.raises(BinlogConnectionLostError) as raised:
        for item in binlog:
            if isinstance(item, Idle):
                dumps = server.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%' AND USER = 'cdc'"
                )
                assert len(dumps) == 1
                server.execute(f"KILL {dumps[0][0]}")
    last = (executed(server) - before).sources
    assert str(binlog.last_gtid) in str(raised.value)
    assert binlog.last_gtid is not None and (binlog.last_gtid.source_uuid, "") in last
    assert server.cdc.password not in str(raised.value)
    assert server.cdc.password not in repr(binlog)


def test_after_with_transactions_the_server_never_had_is_refused(server: MySqlTestServer) -> None:
    server_uuid = str(server.execute("SELECT @@server_uuid")[0][0])
    with reader(server.cdc, GtidSet.parse(f"{server_uuid}:1-99999999")) as binlog, pytest.raises(BinlogStreamError):
        next(iter(binlog))


@pytest.fixture(scope="module")
def private_server() -> Iterator[MySqlTestServer]:
    """A server of this module's own, to purge binlogs on and to freeze."""
    with running_local(f"{INSTANCE_PREFIX}-reader-private") as private:
        yield private


def test_a_frozen_server_raises_instead_of_hanging(private_server: MySqlTestServer) -> None:
    assert private_server.local is not None
    pid = private_server.local.running_pid()
    assert pid is not None
    heartbeat = 1.0
    read_timeout = 10.0  # max(10, 3 * heartbeat)
    binlog = BinlogReader(
        private_server.cdc, after=executed(private_server), replica_server_id=4099, heartbeat_seconds=heartbeat
    )
    frozen_at = None
    try:
        with binlog, pytest.raises(BinlogConnectionLostError, match="last complete transaction read: none"):
            for item in binlog:
                assert isinstance(item, Rotate | Idle)
                if isinstance(item, Idle):
                    os.kill(pid, signal.SIGSTOP)
                    frozen_at = time.monotonic()
    finally:
        os.kill(pid, signal.SIGCONT)
    assert frozen_at is not None
    assert read_timeout - 1 < time.monotonic() - frozen_at < read_timeout + 5


def test_purged_binlogs_are_detected(private_server: MySqlTestServer) -> None:
    private_server.execute(
        "CREATE DATABASE p",
        "CREATE TABLE p.t (id INT PRIMARY KEY)",
        "INSERT INTO p.t VALUES (1)",
        "SET gtid_next = 'AUTOMATIC:etl'",
        "INSERT INTO p.t VALUES (2)",
        "SET gtid_next = 'AUTOMATIC'",
    )
    opened_before_purge = reader(private_server.cdc, GtidSet())
    opened_before_purge.open()
    private_server.execute("FLUSH BINARY LOGS")
    latest = str(private_server.execute("SHOW BINARY LOG STATUS")[0][0])
    private_server.execute(f"PURGE BINARY LOGS TO '{latest}'")
    purged = GtidSet.parse(str(private_server.execute("SELECT @@GLOBAL.gtid_purged")[0][0]))
    assert len(purged) == 4 and any(tag == "etl" for _, tag in purged.sources)

    # Checked before the dump starts: the message names what is missing and the way out.
    with pytest.raises(BinlogPurgedError) as raised:
        reader(private_server.cdc, GtidSet()).open()
    message = str(raised.value)
    assert str(purged) in message
    assert "re-snapshot the affected tables" in message
    assert "frontier" in message

    partial = purged - GtidSet.of([max(purged)])
    with pytest.raises(BinlogPurgedError, match=re.escape(str(GtidSet.of([max(purged)])))):
        reader(private_server.cdc, partial).open()

    # Purged after the check: the server's error 1236 during the dump is mapped the same way.
    with opened_before_purge, pytest.raises(BinlogPurgedError, match=re.escape(str(purged))):
        next(iter(opened_before_purge))

    # From the purged set on, nothing is missing.
    private_server.execute("INSERT INTO p.t VALUES (3)")
    txs = transactions(read_until_idle(private_server.cdc, purged))
    assert [row_summary(body) for _, body in txs] == [[("t", "insert")]]
