"""Table ids re-assigned by a restart inside one window, and MEMORY tables a restart empties.

A row event names its table by the table id of the ``Table_map`` event before it. MySQL numbers the
tables it opens from a counter that starts again at every start-up, so after a restart the ids of the
previous server instance are handed to whichever tables are opened first: the same id can mean
another table, with other columns, in the next binlog file of the very same window. A capture that
kept an id's table (or its columns) from before the restart would stage rows under the wrong table or
decode them with the wrong columns.

Against a server of this module's own (it is restarted several times):

* four tables of different shapes: the server restarts, they are written in one order, it restarts,
  they are written in the reverse order and a column is added to one of them, it restarts and they
  are written in the first order again. The binlog must show at least one table id that named two
  different tables within the window (else the test proves nothing and says so); the window is then
  captured and applied, and every table compared with MySQL value by value.
* one table whose columns change with no trace in the binlog (``sql_log_bin=0``) between two
  restarts: the same table gets the same id before and after, with other columns. Only
  the table map of the current stream tells; the capture must notice the mismatch (the table is
  re-built from a fresh snapshot), not decode the new rows with the columns it saw before.
* MEMORY tables, which a restart empties: the server logs a ``TRUNCATE TABLE`` for each when a session
  first opens it after the start. Opened in the window (a write, or a read first), they are exact after
  it; not opened, the window holds no emptying and their targets keep the rows until the window after
  the first read. A verify in between opens them and reports them not verified (a TRUNCATE since the
  target's frontier), not different.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets
from tests.conftest import INSTANCE_PREFIX
from tests.exactness.harness import ExactnessPipeline
from tests.exactness.scenario import binlog_events, binlog_position
from tests.mysql_servers import MySqlTestServer, running_local

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "tid_reuse"
#: Tables of different shapes: a row decoded with another table's columns cannot pass for right.
TABLES = {
    "a": "id INT PRIMARY KEY, v VARCHAR(20)",
    "b": "id INT PRIMARY KEY, amount DECIMAL(10,2), at DATETIME(3), note TEXT",
    "c": "code VARCHAR(12) PRIMARY KEY, n BIGINT, doc JSON",
    "d": "id BIGINT UNSIGNED PRIMARY KEY, flag TINYINT, f DOUBLE, b VARBINARY(8)",
}
_TABLE_MAP = re.compile(r"table_id: (\d+) \(([^)]+)\)")


@pytest.fixture(scope="module")
def restarted_server() -> Iterator[MySqlTestServer]:
    """A server of this module's own: it is restarted."""
    with running_local(f"{INSTANCE_PREFIX}-table-ids") as server:
        yield server


def _restart(server: MySqlTestServer) -> None:
    assert server.local is not None
    assert server.local.stop() is True  # SIGTERM by PID: a normal shutdown, the data dir is kept
    server.local.start()


def _writes(table: str, round_no: int) -> list[str]:
    """An insert, an update and a delete of ``table`` (round ``round_no``)."""
    n = round_no * 10
    if table == "a":
        return [
            f"INSERT INTO {DB}.a (id, v) VALUES ({n + 1}, 'a{n}'), ({n + 2}, 'a{n}+')",
            f"UPDATE {DB}.a SET v = CONCAT(v, '!') WHERE id = 1",
            f"DELETE FROM {DB}.a WHERE id = {n + 2}",
        ]
    if table == "b":
        return [
            f"INSERT INTO {DB}.b (id, amount, at, note) VALUES ({n + 1}, {n}.25, '2024-05-0{round_no + 1} 10:00:00.5', "
            f"REPEAT('b', {n + 3}))",
            f"UPDATE {DB}.b SET amount = amount * 2, note = NULL WHERE id = 1",
        ]
    if table == "c":
        return [
            f"INSERT INTO {DB}.c (code, n, doc) VALUES ('c{n}', {n} * 1000000007, JSON_OBJECT('round', {round_no}))",
            f"UPDATE {DB}.c SET doc = JSON_SET(doc, '$.seen', {round_no}) WHERE code = 'c0'",
        ]
    return [
        f"INSERT INTO {DB}.d (id, flag, f, b) VALUES ({18446744073709551615 - n}, {round_no}, {n}.5, x'0{round_no}ff')",
        f"UPDATE {DB}.d SET f = -f WHERE id = 1",
    ]


def _write(server: MySqlTestServer, order: Sequence[str], round_no: int) -> None:
    """One transaction per table, in ``order`` (the first statement opens the table: its id now)."""
    for table in order:
        server.execute("START TRANSACTION", *_writes(table, round_no), "COMMIT")


def table_ids(server: MySqlTestServer, since: tuple[str, int]) -> list[tuple[int, str]]:
    """(table id, ``db.table``) of every ``Table_map`` event since ``since``, across binlog files."""
    maps = (_TABLE_MAP.search(info) for kind, info in binlog_events(server, since) if kind == "Table_map")
    return [(int(match.group(1)), match.group(2)) for match in maps if match]


def test_a_window_across_restarts_that_reassign_table_ids_is_exact(
    restarted_server: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    server = restarted_server
    server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        *(f"CREATE TABLE {DB}.{name} ({columns})" for name, columns in TABLES.items()),
        f"INSERT INTO {DB}.a VALUES (1, 'one'), (2, 'two')",
        f"INSERT INTO {DB}.b VALUES (1, 1.50, '2024-01-01 00:00:00.125', 'bee')",
        f"INSERT INTO {DB}.c VALUES ('c0', 7, '{{\"k\": 1}}')",
        f"INSERT INTO {DB}.d VALUES (1, 1, 2.5, x'01')",
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, "table-ids", [DB])
    pipeline.start()  # snapshot, window 1
    since = binlog_position(server)

    _restart(server)
    _write(server, "abcd", 1)
    _restart(server)
    _write(server, "dcba", 2)
    server.execute(f"ALTER TABLE {DB}.c ADD COLUMN extra VARCHAR(5) NOT NULL DEFAULT 'x' AFTER code")
    _restart(server)
    _write(server, "abcd", 3)

    tables_by_id: dict[int, set[str]] = {}
    for table_id, name in table_ids(server, since):
        tables_by_id.setdefault(table_id, set()).add(name)
    reused = {table_id: names for table_id, names in tables_by_id.items() if len(names) > 1}
    assert reused, f"no table id named two tables in the window, the test proves nothing: {tables_by_id}"

    record = pipeline.window()  # window 2: across the restarts
    assert record.capture["transactions"] == 3 * 4 + 1
    assert sorted(c.table for c in record.comparisons) == sorted(TABLES)
    assert all(c.mysql_rows > 0 for c in record.comparisons)
    pipeline.finish()


UNLOGGED = "tid_unlogged"


def test_columns_changed_without_a_binlog_trace_under_a_reused_table_id_are_noticed(
    restarted_server: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    server = restarted_server
    table = f"{UNLOGGED}.t"
    server.execute(
        f"DROP DATABASE IF EXISTS {UNLOGGED}",
        f"CREATE DATABASE {UNLOGGED}",
        f"CREATE TABLE {table} (id INT PRIMARY KEY, n BIGINT, note VARCHAR(20))",
        f"INSERT INTO {table} VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 30, 'three')",
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, "unlogged-columns", [UNLOGGED])
    pipeline.start()  # snapshot, window 1
    since = binlog_position(server)

    _restart(server)  # the first table opened after a start-up gets the same id every time
    server.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1", f"INSERT INTO {table} VALUES (4, 40, 'four')")
    _restart(server)
    server.execute(
        "SET SESSION sql_log_bin = 0",
        f"ALTER TABLE {table} ADD COLUMN tier VARCHAR(8) NOT NULL DEFAULT 'std' AFTER id, MODIFY n DOUBLE",
    )
    _restart(server)
    server.execute(
        f"UPDATE {table} SET n = n / 4, tier = 'gold' WHERE id = 2", f"INSERT INTO {table} VALUES (5, 'x', 5.5, 'five')"
    )

    ids = [table_id for table_id, name in table_ids(server, since) if name == table]
    assert len(ids) >= 2 and ids[0] == ids[-1], (
        f"{table} did not get the same table id before and after the unlogged change, the test proves nothing: {ids}"
    )

    pipeline.run_window()  # window 2: the table map after the last restart does not fit the tracked schema
    assert set(pipeline.rebuilding) == {table}, pipeline.rebuilding
    assert "table map" in pipeline.rebuilding[table], pipeline.rebuilding[table]
    pipeline.finish()  # window 3: its snapshot re-reads the table, which must then equal MySQL
    assert [c.equal for c in pipeline.windows[-1].comparisons] == [True]


MEMORY = "memory_restart"
MEMORY_TABLES = ["keyed", "keyless", "read_first"]
_GENERATED_TRUNCATE = "generated by server, implicitly emptying in-memory table"


def generated_truncates(server: MySqlTestServer, since: tuple[str, int]) -> list[str]:
    """The tables of the ``TRUNCATE`` statements the server logged for MEMORY tables it emptied since
    ``since`` (each ``TRUNCATE TABLE `db`.`table` /* generated by server, ... */``), in their order."""
    events = binlog_events(server, since)
    return [info.split("`")[3] for kind, info in events if kind == "Query" and _GENERATED_TRUNCATE in info]


def test_memory_tables_emptied_by_a_restart_are_emptied_by_the_window_of_the_truncate_the_server_logs(
    restarted_server: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    """A restart empties MEMORY tables; the server logs a ``TRUNCATE TABLE`` for each when a session
    first opens it (a write or a read), so a window holds the emptying only from then: until a table is
    opened, its target keeps the rows, as a replica of the server does."""
    server = restarted_server
    server.execute(
        f"DROP DATABASE IF EXISTS {MEMORY}",
        f"CREATE DATABASE {MEMORY}",
        f"CREATE TABLE {MEMORY}.keyed (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MEMORY",
        f"CREATE TABLE {MEMORY}.keyless (n INT, v VARCHAR(20)) ENGINE=MEMORY",
        f"CREATE TABLE {MEMORY}.read_first (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MEMORY",
        f"CREATE TABLE {MEMORY}.kept (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
        f"INSERT INTO {MEMORY}.keyless VALUES (1, 'one'), (2, 'two'), (2, 'two')",
        *(f"INSERT INTO {MEMORY}.{table} VALUES (1, 'one'), (2, 'two')" for table in ("keyed", "read_first", "kept")),
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, "memory-restart", [MEMORY])
    pipeline.start()  # snapshot, window 1
    since = binlog_position(server)

    _restart(server)
    server.execute(
        f"INSERT INTO {MEMORY}.keyed VALUES (3, 'three')",
        f"INSERT INTO {MEMORY}.keyless VALUES (3, 'three')",
        f"INSERT INTO {MEMORY}.kept VALUES (3, 'three')",
    )
    assert server.execute(f"SELECT COUNT(*) FROM {MEMORY}.read_first") == [(0,)]  # a read opens it too
    server.execute(f"INSERT INTO {MEMORY}.read_first VALUES (4, 'four')")
    assert generated_truncates(server, since) == MEMORY_TABLES
    record = pipeline.window()  # window 2: each MEMORY table emptied, then its new row
    assert {c.table: c.mysql_rows for c in record.comparisons} == {"keyed": 1, "keyless": 1, "read_first": 1, "kept": 3}

    since = binlog_position(server)
    _restart(server)
    server.execute(f"INSERT INTO {MEMORY}.kept VALUES (5, 'five')")
    pipeline.run_window()  # window 3: no MEMORY table opened since the restart, nothing logged for them
    assert generated_truncates(server, since) == []
    # A verify now opens them: MySQL has them empty and logs their TRUNCATEs before the verify's read,
    # after window 3, whose targets still hold the rows of before the restart. The verify does not
    # call that a difference: it names the TRUNCATE between the target and its read.
    request = VerifyRequest(pipeline.name, (f"{MEMORY}.*",), staging_uri=str(pipeline.engine.staging))
    verified = {t.table.split(".")[1]: t for t in verify_targets(spark, server.cdc, request).tables}
    assert sorted(generated_truncates(server, since)) == MEMORY_TABLES
    assert not verified["kept"].problem and not verified["kept"].differs, verified["kept"].describe()
    why_not = {"keyed": "TRUNCATE", "read_first": "TRUNCATE", "keyless": "no primary key and changed"}
    for table, reason in why_not.items():  # a table without a key: verified once the apply has its changes
        assert reason in verified[table].problem and not verified[table].differs, verified[table].describe()
    before = {c.table: (c.mysql_rows, c.iceberg_rows) for c in pipeline.compare()}
    assert before == {"keyed": (0, 1), "keyless": (0, 1), "read_first": (0, 1), "kept": (4, 4)}, before
    pipeline.window()  # window 4: the TRUNCATEs, so every table equals MySQL again
    pipeline.finish()
