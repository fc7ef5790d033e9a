"""Compressed binlog transactions (``binlog_transaction_compression=ON``) against the real server.

A session with ``binlog_transaction_compression=ON`` logs each of its DML transactions as its GTID
event plus one ``Transaction_payload_event``; every test checks with ``SHOW BINLOG EVENTS`` that
the transactions it relies on really were logged that way (and that DDL never is). The same
workload is written once compressed and once uncompressed, into two databases with the same
tables: the reader must yield the same items and capture must stage the same rows (except GTIDs,
commit timestamps and ``_cdc_seq``). Staged changes are also replayed and compared with ``SELECT``.
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pyarrow.parquet as pq
import pytest
from pymysqlreplication import row_event as library_rows

from airflow_provider_mysql_cdc.capture.binlog_reader import (
    BinlogItem,
    QueryStatement,
    RowsEvent,
    TransactionStart,
)
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection, WindowCaps
from airflow_provider_mysql_cdc.decoding.compiled_rows import row_images
from airflow_provider_mysql_cdc.staging import Staging
from tests.child_process import run_module
from tests.integration.test_binlog_reader import read_until_idle, transactions
from tests.integration.test_capture_windows import Pipeline, executed, replay
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(4_600_001)
PAYLOAD = "Transaction_payload"
CDC_COLUMNS = ("_cdc_gtid", "_cdc_seq", "_cdc_commit_ts")
A_COLUMNS = ["id", "v", "j", "d", "amount"]
B_COLUMNS = ["id", "w", "note"]


def session(*, compressed: bool, level: int = 3) -> list[str]:
    """Statements that make the rest of an ``execute`` call log compressed (or uncompressed)."""
    return [
        f"SET SESSION binlog_transaction_compression = {'ON' if compressed else 'OFF'}",
        f"SET SESSION binlog_transaction_compression_level_zstd = {level}",
    ]


def create_tables(server: MySqlTestServer, db: str) -> None:
    server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v VARCHAR(40), j JSON, d DATETIME(6), amount DECIMAL(12, 2))",
        f"CREATE TABLE {db}.b (id INT PRIMARY KEY, w BLOB, note TEXT)",
    )


#: Transactions of :func:`workload`, in order, and whether each is DML (DDL is never compressed).
WORKLOAD_IS_DML = [True, True, True, True, False, True, True, True]


def workload(db: str) -> list[str]:
    """Single-row and multi-table transactions, updates, deletes, a key change, DDL, a statement of
    300 rows (several row events) and an update of a third of them."""
    return [
        f"""INSERT INTO {db}.a VALUES (1, 'one', '{{"k": 1}}', '2024-01-02 03:04:05.123456', 10.50)""",
        "BEGIN",
        f"INSERT INTO {db}.a VALUES (2, 'two', NULL, NULL, -3.25), (3, 'three', '[1, 2]', '1999-12-31 23:59:59', 0)",
        f"INSERT INTO {db}.b VALUES (1, x'00ff10', 'note one')",
        f"UPDATE {db}.a SET v = 'uno', j = JSON_SET(j, '$.k', 2) WHERE id = 1",
        f"DELETE FROM {db}.b WHERE id = 1",
        "COMMIT",
        f"UPDATE {db}.a SET id = 12 WHERE id = 2",
        f"DELETE FROM {db}.a WHERE id = 3",
        f"ALTER TABLE {db}.a ADD COLUMN extra INT",
        f"INSERT INTO {db}.a VALUES (20, 'twenty', NULL, NULL, 1.00, 5)",
        f"INSERT INTO {db}.b WITH RECURSIVE s (i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM s WHERE i < 399) "
        "SELECT i, REPEAT(CHAR(65 + i % 26), i), CONCAT('n', i) FROM s",
        f"UPDATE {db}.b SET note = CONCAT(note, '!') WHERE id % 3 = 0",
    ]


def logged_as(server: MySqlTestServer, start: TransactionStart) -> str:
    """The type of the event after a transaction's GTID event (``Transaction_payload`` when compressed)."""
    rows = server.execute(f"SHOW BINLOG EVENTS IN '{start.binlog_file}' FROM {start.binlog_position} LIMIT 1, 1")
    return str(rows[0][2])


def described(body: list[BinlogItem], db: str) -> list[tuple[Any, ...]]:
    """A transaction's items with the library's decoded rows, and whether compiled code can read them."""
    result: list[tuple[Any, ...]] = []
    for item in body:
        if isinstance(item, RowsEvent):
            assert item.database == db
            compiled = row_images(item.event) is not None  # before .rows, which consumes the images
            result.append((item.table, item.kind, compiled, item.event.rows))
        elif isinstance(item, QueryStatement):
            result.append(("statement", item.sql.replace(db, "DB")))
    return result


@pytest.mark.parametrize("level", [1, 22])
def test_compressed_transactions_yield_the_items_of_uncompressed_ones(
    mysql_server: MySqlTestServer, level: int
) -> None:
    zdb, udb = f"cz{level}", f"cu{level}"
    create_tables(mysql_server, zdb)
    create_tables(mysql_server, udb)
    before = executed(mysql_server)
    mysql_server.execute(*session(compressed=True, level=level), *workload(zdb))
    compressed_gtids = executed(mysql_server) - before
    mysql_server.execute(*session(compressed=False), *workload(udb))

    txs = transactions(read_until_idle(mysql_server.cdc, before))
    compressed = [tx for tx in txs if tx[0].gtid in compressed_gtids]
    uncompressed = [tx for tx in txs if tx[0].gtid not in compressed_gtids]

    assert GtidSet.of(start.gtid for start, _ in compressed) == compressed_gtids
    assert [logged_as(mysql_server, start) == PAYLOAD for start, _ in compressed] == WORKLOAD_IS_DML
    assert not any(logged_as(mysql_server, start) == PAYLOAD for start, _ in uncompressed)
    from_payloads = [described(body, zdb) for _, body in compressed]
    assert from_payloads == [described(body, udb) for _, body in uncompressed]
    row_entries = [entry for tx in from_payloads for entry in tx if entry[0] != "statement"]
    assert len(row_entries) > len(compressed)  # the 300-row statement spans several row events
    assert all(compiled for _, _, compiled, _ in row_entries)  # inner row events take the compiled path
    assert from_payloads[1][0][3] == [
        {"values": {"id": 2, "v": "two", "j": None, "d": None, "amount": Decimal("-3.25")}, "none_sources": ANY},
        {
            "values": {
                "id": 3,
                "v": "three",
                "j": [1, 2],
                "d": datetime(1999, 12, 31, 23, 59, 59),
                "amount": Decimal("0.00"),
            },
            "none_sources": ANY,
        },
    ]


def test_unselected_tables_inside_a_payload_are_skipped_without_decoding_rows(
    mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_tables(mysql_server, "cf")
    before = executed(mysql_server)
    mysql_server.execute(
        *session(compressed=True),
        "BEGIN",
        "INSERT INTO cf.a (id, v) VALUES (1, 'a1')",
        "INSERT INTO cf.b (id, note) VALUES (1, 'b1'), (2, 'b2')",
        "UPDATE cf.b SET note = 'b!'",
        "INSERT INTO cf.a (id, v) VALUES (2, 'a2')",
        "COMMIT",
    )
    decoded: list[str] = []
    fetch_rows = library_rows.RowsEvent._fetch_rows

    def recording_fetch_rows(event: Any) -> Any:
        decoded.append(f"{event.schema}.{event.table}")
        return fetch_rows(event)

    monkeypatch.setattr(library_rows.RowsEvent, "_fetch_rows", recording_fetch_rows)
    [(start, body)] = transactions(read_until_idle(mysql_server.cdc, before, only_tables=lambda d, t: t == "a"))

    assert logged_as(mysql_server, start) == PAYLOAD
    assert [(item.table, item.kind) for item in body if isinstance(item, RowsEvent)] == [
        ("a", "insert"),
        ("a", "insert"),
    ]
    assert [item.event.rows[0]["values"]["v"] for item in body if isinstance(item, RowsEvent)] == ["a1", "a2"]
    assert decoded == ["cf.a", "cf.a"]


def stripped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in CDC_COLUMNS} for row in rows]


def source_rows(server: MySqlTestServer, table: str, columns: list[str]) -> dict[Any, tuple[Any, ...]]:
    rows = server.execute(f"SELECT {', '.join(columns)} FROM {table}")
    return {row[0]: normalized(tuple(row), columns) for row in rows}


def normalized(values: tuple[Any, ...], columns: list[str]) -> tuple[Any, ...]:
    """JSON as parsed values, so MySQL's and the staging's text forms compare by content."""
    return tuple(
        json.loads(v) if c == "j" and isinstance(v, str) else bytes(v) if isinstance(v, bytearray) else v
        for c, v in zip(columns, values, strict=True)
    )


def replayed(rows: list[dict[str, Any]], columns: list[str]) -> dict[Any, tuple[Any, ...]]:
    return {key: normalized(values, columns) for key, values in replay(rows, "id", columns).items()}


@pytest.mark.parametrize("level", [1, 22])
def test_capture_stages_the_same_rows_as_for_the_workload_uncompressed(
    mysql_server: MySqlTestServer, tmp_path: Path, level: int
) -> None:
    zdb, udb = f"wz{level}", f"wu{level}"
    pipelines = {}
    for db in (zdb, udb):
        create_tables(mysql_server, db)
        (tmp_path / db).mkdir()
        pipelines[db] = Pipeline(mysql_server, tmp_path / db, db, TableSelection.of(f"{db}.*"))
        pipelines[db].capture("start", replica_server_id=next(_server_ids))
    mysql_server.execute(*session(compressed=True, level=level), *workload(zdb))
    mysql_server.execute(*session(compressed=False), *workload(udb))
    windows = {db: pipelines[db].capture("work", replica_server_id=next(_server_ids)) for db in (zdb, udb)}

    for table in ("a", "b"):
        staged = {db: pipelines[db].rows(windows[db].window_id, f"{db}.{table}") for db in (zdb, udb)}
        assert stripped(staged[zdb]) == stripped(staged[udb])
        assert len({row["_cdc_gtid"] for row in staged[zdb]}) > 1
    files = {
        db: sorted(
            (f.table, f.schema_version, f.rows, sorted(f.op_counts.items()))
            for f in pipelines[db].manifest(windows[db].window_id).files
        )
        for db in (zdb, udb)
    }
    assert files[zdb] == files[udb]
    assert {f[:2] for f in files[zdb]} == {("a", 1), ("a", 2), ("b", 1)}
    assert windows[zdb].op_counts == windows[udb].op_counts
    # Rows staged before ADD COLUMN extra (schema version 1) have no extra: NULL in MySQL.
    a_rows = [{"extra": None, **row} for row in pipelines[zdb].rows(windows[zdb].window_id, f"{zdb}.a")]
    assert replayed(a_rows, [*A_COLUMNS, "extra"]) == source_rows(mysql_server, f"{zdb}.a", [*A_COLUMNS, "extra"])
    b_rows = pipelines[zdb].rows(windows[zdb].window_id, f"{zdb}.b")
    assert replayed(b_rows, B_COLUMNS) == source_rows(mysql_server, f"{zdb}.b", B_COLUMNS)


def test_mixed_windows_boundaries_after_compressed_transactions_and_row_caps(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    mysql_server.execute("DROP DATABASE IF EXISTS mx", "CREATE DATABASE mx", "CREATE TABLE mx.t (id INT PRIMARY KEY)")
    pipeline = Pipeline(mysql_server, tmp_path, "mx", TableSelection.of("mx.*"))
    server_id = next(_server_ids)
    pipeline.capture("start", replica_server_id=server_id)

    def ids(window_id: int) -> list[int]:
        return [row["id"] for row in pipeline.rows(window_id) if row["_cdc_op"] != "d"]

    # One window of compressed and uncompressed transactions, interleaved.
    before = executed(mysql_server)
    for i in range(6):
        mysql_server.execute(
            *session(compressed=i % 2 == 0),
            f"INSERT INTO mx.t VALUES ({10 * i}), ({10 * i + 1}), ({10 * i + 2})",
            f"UPDATE mx.t SET id = id + 5 WHERE id = {10 * i + 1}",
            f"DELETE FROM mx.t WHERE id = {10 * i + 2}",
        )
    written = executed(mysql_server) - before
    starts = [start for start, _ in transactions(read_until_idle(mysql_server.cdc, before))]
    assert [logged_as(mysql_server, s) == PAYLOAD for s in starts] == [(j // 3) % 2 == 0 for j in range(18)]
    mixed = pipeline.capture("mixed", replica_server_id=server_id)
    rows = pipeline.rows(mixed.window_id)
    assert {row["_cdc_gtid"] for row in rows} == {str(s.gtid) for s in starts}
    assert GtidSet.of(s.gtid for s in starts) == written
    assert replayed(rows, ["id"]) == source_rows(mysql_server, "mx.t", ["id"])

    # A catch-up window that ends right after a compressed transaction, then one after it.
    later = executed(mysql_server)
    mysql_server.execute(*session(compressed=True), "INSERT INTO mx.t VALUES (100)")
    ends_after = pipeline.capture("after-compressed", replica_server_id=server_id)
    mysql_server.execute(
        *session(compressed=True),
        "SET gtid_next = 'AUTOMATIC:zipped'",
        "INSERT INTO mx.t VALUES (101)",
        "SET gtid_next = 'AUTOMATIC'",
    )
    mysql_server.execute(*session(compressed=False), "INSERT INTO mx.t VALUES (102)")
    following = pipeline.capture("following", replica_server_id=server_id)
    assert (ids(ends_after.window_id), ids(following.window_id)) == ([100], [101, 102])
    assert following.lower == ends_after.upper
    tagged = pipeline.rows(following.window_id)[0]["_cdc_gtid"]
    assert tagged.split(":")[1] == "zipped"  # a tagged GTID event before a payload

    # A data-interval window whose end falls between two compressed transactions.
    mysql_server.execute(*session(compressed=True), "INSERT INTO mx.t VALUES (200)")
    time.sleep(0.01)
    interval_end = mysql_server.utc_now()
    time.sleep(0.01)
    mysql_server.execute(*session(compressed=True), "INSERT INTO mx.t VALUES (201)")
    interval = pipeline.capture(
        "interval", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=interval_end, replica_server_id=server_id
    )
    rest = pipeline.capture("after-interval", replica_server_id=server_id)
    assert (ids(interval.window_id), ids(rest.window_id)) == ([200], [201])

    # max_rows is checked between transactions: a compressed transaction is taken whole.
    mysql_server.execute(
        *session(compressed=True),
        *(f"INSERT INTO mx.t VALUES {', '.join(f'({1000 + 10 * k + r})' for r in range(5))}" for k in range(3)),
    )
    capped = pipeline.capture("capped", caps=WindowCaps(max_rows=3), replica_server_id=server_id)
    after_cap = pipeline.capture("after-cap", caps=WindowCaps(max_rows=7), replica_server_id=server_id)
    assert ids(capped.window_id) == [1000, 1001, 1002, 1003, 1004]
    assert ids(after_cap.window_id) == [*range(1010, 1015), *range(1020, 1025)]
    assert (capped.transactions, after_cap.transactions) == (1, 2)
    # Each transaction since the mixed window was logged as its session asked (only 102 uncompressed).
    later_starts = [start for start, _ in transactions(read_until_idle(mysql_server.cdc, later))]
    assert [logged_as(mysql_server, s) == PAYLOAD for s in later_starts] == [True, True, False, *[True] * 5]


# -- a large transaction ------------------------------------------------------------------------

LARGE_ROWS = 400_000


def binlog_position(server: MySqlTestServer) -> tuple[str, int]:
    file, position = server.execute("SHOW BINARY LOG STATUS")[0][:2]
    return str(file), int(position)


def insert_large_transaction(server: MySqlTestServer, table: str, *, compressed: bool) -> tuple[str, int, int]:
    """Insert ``LARGE_ROWS`` rows in one statement; return (event type after the GTID event, its size
    in the binlog, and for a payload its decompressed size from ``SHOW BINLOG EVENTS``)."""
    file, position = binlog_position(server)
    server.execute(
        *session(compressed=compressed, level=3),
        "SET SESSION cte_max_recursion_depth = 1000000",
        f"INSERT INTO {table} WITH RECURSIVE s (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {LARGE_ROWS}) "
        "SELECT i, CONCAT(LEFT(SHA2(i, 256), 8), '-', REPEAT('abc', 20)), i * 7 FROM s",
    )
    gtid_event, second = server.execute(f"SHOW BINLOG EVENTS IN '{file}' FROM {position} LIMIT 2")
    assert gtid_event[2] == "Gtid"
    decompressed = int(str(second[5]).split("decompressed_size=")[1].split()[0]) if second[2] == PAYLOAD else 0
    return str(second[2]), int(second[4]) - int(second[1]), decompressed


def probe(server: MySqlTestServer, request: dict[str, Any]) -> dict[str, Any]:
    """Run :mod:`tests.integration.binlog_memory_probe` in a fresh interpreter (password on stdin)."""
    config = server.cdc
    full = {"host": config.host, "port": config.port, "user": config.user, "password": config.password, **request}
    result = run_module("tests.integration.binlog_memory_probe", full, timeout=600)
    result["rss_growth_bytes"] = (result["peak_rss_after_kib"] - result["peak_rss_before_kib"]) * 1024
    return result


def measure(server: MySqlTestServer, tmp_path: Path, table: str, after: GtidSet) -> dict[str, dict[str, Any]]:
    tmp_path.mkdir()
    common = {"after": str(after), "server_id": next(_server_ids)}
    capture = {
        "mode": "capture",
        "pipeline": table.replace(".", "-"),
        "staging": str(tmp_path / "staging"),
        "store_url": f"sqlite:///{tmp_path / 'meta.db'}",
        "tables": table,
    }
    return {
        "read": probe(server, {**common, "mode": "read"}),
        "traced": probe(server, {**common, "mode": "read", "trace": True}),
        "capture": probe(server, {**common, **capture}),
    }


def test_a_large_compressed_transaction_is_captured_exactly_in_bounded_memory(
    mysql_server: MySqlTestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """400,000 rows in one transaction, read and captured in a process of its own, next to the same
    transaction uncompressed: the compressed one costs about its compressed size plus zstd's
    window more, far less than its decompressed size."""
    mysql_server.execute(
        "DROP DATABASE IF EXISTS big",
        "CREATE DATABASE big",
        "CREATE TABLE big.z (id INT PRIMARY KEY, label VARCHAR(100), n BIGINT)",
        "CREATE TABLE big.u (id INT PRIMARY KEY, label VARCHAR(100), n BIGINT)",
    )
    before = executed(mysql_server)
    kind, payload_size, decompressed_size = insert_large_transaction(mysql_server, "big.z", compressed=True)
    assert kind == PAYLOAD
    assert 1_000_000 < payload_size < decompressed_size / 5
    zipped = measure(mysql_server, tmp_path / "z", "big.z", before)
    middle = executed(mysql_server)
    assert insert_large_transaction(mysql_server, "big.u", compressed=False)[0] == "Query"
    plain = measure(mysql_server, tmp_path / "u", "big.u", middle)

    with capsys.disabled():
        print(f"\nlarge transaction: {LARGE_ROWS} rows, payload {payload_size} bytes, decompressed {decompressed_size}")
        for name, figures in (("compressed", zipped), ("uncompressed", plain)):
            print(
                f"  {name}: read RSS growth {figures['read']['rss_growth_bytes']}, read traced peak "
                f"{figures['traced']['traced_peak_bytes']}, capture RSS growth {figures['capture']['rss_growth_bytes']}"
            )

    for figures in (zipped, plain):
        read = figures["read"]
        assert read["row_events"] == read["compiled_row_events"] == plain["read"]["row_events"] > 100
        assert figures["capture"]["staged_rows"] == LARGE_ROWS
    slack = 16 << 20  # zstd's window (2 MiB at level 3), read-ahead, one event, allocator noise
    assert zipped["read"]["rss_growth_bytes"] < plain["read"]["rss_growth_bytes"] + payload_size + slack
    assert zipped["read"]["rss_growth_bytes"] < decompressed_size / 2
    assert zipped["traced"]["traced_peak_bytes"] < plain["traced"]["traced_peak_bytes"] + 2 * payload_size + (1 << 20)
    assert zipped["capture"]["rss_growth_bytes"] < plain["capture"]["rss_growth_bytes"] + payload_size + slack

    staging = tmp_path / "z" / "staging"
    manifest = Staging(str(staging), "big-z").read_window_manifest(1)
    assert manifest is not None
    staged: list[tuple[Any, ...]] = []
    for staged_file in manifest.files:
        table = pq.read_table(staging / "big-z" / "windows" / "00000001" / staged_file.path)
        staged += [tuple(row.values()) for row in table.select(["id", "label", "n", "_cdc_op"]).to_pylist()]
    source = [(*row, "c") for row in mysql_server.execute("SELECT id, label, n FROM big.z ORDER BY id")]
    assert sorted(staged) == source
