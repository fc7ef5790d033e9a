"""Snapshots against the real server: chunking, resumability, the hand-off to binlog windows under a
concurrent writer, re-snapshots, tables without a key (read whole, or cut by ``key_columns``) and
missing privileges."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    MissingPrivilegeError,
    SnapshotInProgressError,
)
from tests.integration.snapshot_pipeline import SnapshotPipeline, replay, source_state
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql


def test_a_table_is_split_into_chunks_planned_from_its_keys_and_staged_in_key_order(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_basic",
        "CREATE DATABASE snap_basic",
        "CREATE TABLE snap_basic.sparse (id BIGINT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE snap_basic.composite (region VARCHAR(10), n INT, v INT, PRIMARY KEY (region, n))",
    )
    # Sparse keys: chunks follow the data, not the key space.
    values = ", ".join(f"({i * i * 1000}, 'v{i}')" for i in range(1, 1001))
    regions = ", ".join(f"('{r}', {n}, {n})" for r in ("Aa", "b", "Ç", "z") for n in range(250))
    mysql_server.execute(
        f"INSERT INTO snap_basic.sparse VALUES {values}", f"INSERT INTO snap_basic.composite VALUES {regions}"
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "basic", TableSelection.of("snap_basic.*"), chunk_rows=300)

    plan = pipeline.plan("run-1")
    assert plan.snapshot_id == "000001"
    assert plan.tables == ("snap_basic.composite", "snap_basic.sparse")
    assert [c.chunk_no for c in plan.chunks if c.table == "sparse"] == [0, 1, 2, 3]
    assert pipeline.store.get_pipeline("basic") is not None  # initial frontier recorded before any chunk

    results = [pipeline.run_chunk("run-1", argument) for argument in plan.mapped_arguments()]
    assert sum(r.rows for r in results if r.table_name == "snap_basic.sparse") == 1000
    assert [r.rows for r in results if r.table_name == "snap_basic.sparse"] == [300, 300, 300, 100]
    assert all(r.lock_ms is not None and r.lock_ms < 1000 for r in results)

    sparse = pipeline.snapshot_rows("000001", "snap_basic.sparse")
    assert [row["id"] for row in sparse] == [i * i * 1000 for i in range(1, 1001)]
    assert {row["_cdc_op"] for row in sparse} == {"r"}
    composite = pipeline.snapshot_rows("000001", "snap_basic.composite")
    assert sorted((row["region"], row["n"]) for row in composite) == sorted(
        (r, n) for r in ("Aa", "b", "Ç", "z") for n in range(250)
    )
    table_manifest = pipeline.table_manifest("000001", "snap_basic.composite")
    assert table_manifest["handoff_window"] == 1
    assert sum(chunk["rows"] for chunk in table_manifest["chunks"]) == 1000

    # A re-run of the plan and of every chunk redoes nothing.
    assert pipeline.plan("run-1") == plan
    again = [pipeline.run_chunk("run-1", argument) for argument in plan.mapped_arguments()]
    assert all(r.reused for r in again)
    assert [(r.rows, r.frontier, r.manifest_uri) for r in again] == [
        (r.rows, r.frontier, r.manifest_uri) for r in results
    ]
    # The next run has nothing left to snapshot.
    assert pipeline.plan("run-2").chunks == ()


def test_a_dense_integer_key_is_cut_into_equal_widths_and_a_sparse_one_off_its_index(
    mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large tables (here: the threshold lowered to 1,000 rows) with a dense unique integer key are
    planned from their lowest and highest key and the server's row estimate; keys too sparse for the
    estimate are read off the index. Rows changed between the chunks, on both sides of the boundaries
    and past the highest planned key, end up exactly as in MySQL after the window."""
    monkeypatch.setattr("airflow_provider_mysql_cdc.core.chunks.EVEN_SPLIT_MIN_ROWS", 1_000)
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_even",
        "CREATE DATABASE snap_even",
        "CREATE TABLE snap_even.dense (id INT UNSIGNED PRIMARY KEY, v INT)",
        "CREATE TABLE snap_even.sparse (id BIGINT PRIMARY KEY, v INT)",
        "SET SESSION cte_max_recursion_depth = 100000",
        "INSERT INTO snap_even.dense WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000) "
        "SELECT i + i * i DIV 6000, i FROM n",  # keys 1..12000, gaps widening: index boundaries are uneven
        "INSERT INTO snap_even.sparse WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
        "SELECT i * i * 1000, i FROM n",
        "ANALYZE TABLE snap_even.dense, snap_even.sparse",
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "even", TableSelection.of("snap_even.*"), chunk_rows=1_000)
    plan = pipeline.plan("run-1")
    dense = [c.key_range.lower for c in plan.chunks if c.table == "dense"]
    lowers = [key[0] for key in dense[1:] if key is not None and isinstance(key[0], int)]
    widths = {upper - lower for lower, upper in zip([1, *lowers], lowers, strict=False)}
    assert dense[0] is None and len(lowers) == len(dense) - 1, dense
    assert len(widths) == 1 and widths.pop() >= 1_000, dense  # equal widths of at least 1,000 keys
    assert 4 <= len(dense) <= 9, dense  # about 12,000 keys / (2 keys a row * 1,000 rows)

    arguments = plan.mapped_arguments()
    first = pipeline.run_chunk("run-1", arguments[0])
    boundary = lowers[0]
    keys = {i + i * i // 6000 for i in range(1, 6001)}
    below = [key for key in range(boundary - 20, boundary) if key not in keys]
    above = [key for key in range(boundary, boundary + 20) if key not in keys]
    moved = min(key for key in keys if key > boundary + 1)
    mysql_server.execute(
        f"UPDATE snap_even.dense SET v = -v WHERE id BETWEEN {boundary - 30} AND {boundary + 30}",
        f"DELETE FROM snap_even.dense WHERE id IN (1, {boundary}, 12000)",
        f"INSERT INTO snap_even.dense VALUES ({below[0]}, 1), ({above[0]}, 2), (12001, 3), (4000000000, 4)",
        f"UPDATE snap_even.dense SET id = {below[1]} WHERE id = {moved}",  # a key moved across the boundary
        "UPDATE snap_even.sparse SET v = -v WHERE id < 2000000",
    )
    results = [first, *(pipeline.run_chunk("run-1", argument) for argument in arguments[1:])]
    sparse_rows = [r.rows for r in results if r.table_name == "snap_even.sparse"]
    assert sparse_rows == [1_000, 1_000, 1_000]  # boundaries read off the index: exactly chunk_rows each
    window = pipeline.capture("run-1")
    for table in ("snap_even.dense", "snap_even.sparse"):
        state = replay(
            pipeline.snapshot_rows("000001", table),
            [pipeline.window_rows(window.window_id, table)],
            ["id"],
            ["id", "v"],
        )
        assert state == source_state(mysql_server, table, ["id"], ["id", "v"]), table


def test_capture_waits_for_an_unfinished_snapshot(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_wait",
        "CREATE DATABASE snap_wait",
        "CREATE TABLE snap_wait.t (id INT PRIMARY KEY)",
        "INSERT INTO snap_wait.t VALUES (1), (2), (3)",
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "wait", TableSelection.of("snap_wait.*"), chunk_rows=2)
    plan = pipeline.plan("run-1")
    pipeline.run_chunk("run-1", plan.mapped_arguments()[0])
    mysql_server.execute("INSERT INTO snap_wait.t VALUES (4)")
    with pytest.raises(SnapshotInProgressError, match=r"snapshot 000001 of snap_wait\.t is not finished"):
        pipeline.capture("run-1")
    pipeline.run_chunk("run-1", plan.mapped_arguments()[1])
    window = pipeline.capture("run-1")
    state = replay(
        pipeline.snapshot_rows("000001", "snap_wait.t"),
        [pipeline.window_rows(window.window_id, "snap_wait.t")],
        ["id"],
        ["id"],
    )
    assert state == source_state(mysql_server, "snap_wait.t", ["id"], ["id"])


class Writer(threading.Thread):
    """Random transactions on two tables while the snapshot runs: inserts, updates, deletes and key moves
    across chunk boundaries, single- and two-table transactions (seeded)."""

    def __init__(self, server: MySqlTestServer, seed: int, database: str) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.random = random.Random(seed)
        self.database = database
        self.stop = threading.Event()
        self.transactions = 0
        self.error: BaseException | None = None

    def statements(self) -> list[str]:
        db, rnd = self.database, self.random
        out: list[str] = []
        for _ in range(rnd.randint(1, 4)):
            n = rnd.randrange(3000)
            name = f"k{rnd.randrange(3000):05d}"
            choice = rnd.random()
            if choice < 0.25:
                out.append(f"INSERT IGNORE INTO {db}.nums VALUES ({n}, {rnd.randrange(10**6)})")
            elif choice < 0.45:
                out.append(f"UPDATE {db}.nums SET v = v + 1 WHERE id BETWEEN {n} AND {n + 20}")
            elif choice < 0.55:
                out.append(f"DELETE FROM {db}.nums WHERE id = {n}")
            elif choice < 0.65:  # move a key, often across a chunk boundary
                out.append(f"UPDATE IGNORE {db}.nums SET id = {rnd.randrange(3000)} WHERE id = {n}")
            elif choice < 0.75:
                out.append(f"INSERT IGNORE INTO {db}.names VALUES ('{name}', {rnd.randrange(100)})")
            elif choice < 0.85:
                out.append(f"UPDATE {db}.names SET v = v + 1 WHERE name >= '{name}' ORDER BY name LIMIT 5")
            elif choice < 0.92:
                out.append(f"DELETE FROM {db}.names WHERE name = '{name}'")
            else:
                out.append(f"UPDATE IGNORE {db}.names SET name = 'k{rnd.randrange(3000):05d}' WHERE name = '{name}'")
        return out

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.server.execute("START TRANSACTION", *self.statements(), "COMMIT")
                self.transactions += 1
        except BaseException as exc:  # reported by the test
            self.error = exc


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_snapshot_and_windows_under_a_concurrent_writer_equal_the_source(
    mysql_server: MySqlTestServer, tmp_path: Path, seed: int
) -> None:
    db = f"snap_live_{seed}"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.nums (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {db}.names (name VARCHAR(20) PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.nums VALUES " + ", ".join(f"({i}, {i})" for i in range(0, 3000, 2)),
        f"INSERT INTO {db}.names VALUES " + ", ".join(f"('k{i:05d}', {i % 100})" for i in range(0, 3000, 3)),
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, f"live-{seed}", TableSelection.of(f"{db}.*"), chunk_rows=150)
    writer = Writer(mysql_server, seed, db)
    writer.start()
    try:
        plan = pipeline.plan("run-1")
        arguments = plan.mapped_arguments()
        random.Random(seed).shuffle(arguments)  # chunks finish in any order, at different frontiers
        for argument in arguments:
            pipeline.run_chunk("run-1", argument)
        windows = [pipeline.capture("run-1")]
        windows.append(pipeline.capture("run-2"))
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, f"seed {seed}: writer failed: {writer.error}"
    windows.append(pipeline.capture("run-3"))
    assert writer.transactions > 50, f"seed {seed}: the writer ran only {writer.transactions} transactions"
    for table, key, columns in (("nums", ["id"], ["id", "v"]), ("names", ["name"], ["name", "v"])):
        name = f"{db}.{table}"
        state = replay(
            pipeline.snapshot_rows("000001", name),
            [pipeline.window_rows(w.window_id, name) for w in windows],
            key,
            columns,
        )
        assert state == source_state(mysql_server, name, key, columns), f"seed {seed}: {name} differs"


def test_a_table_without_a_key_is_one_chunk_unless_key_columns_cut_it(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """A table without a primary key or unique NOT NULL key is read whole, as one chunk without key
    columns, duplicate rows included; ``key_columns`` named for it only cut it into chunks (their values
    repeat: they need not identify rows). A nullable unique key is no key; a unique NOT NULL one is."""
    rows = [(n % 4, "xyz"[n % 3], None if n % 5 == 0 else n % 2) for n in range(24)]
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_nokey",
        "CREATE DATABASE snap_nokey",
        "CREATE TABLE snap_nokey.log (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT)",
        "CREATE TABLE snap_nokey.uniq (a INT NOT NULL, b INT NULL, UNIQUE KEY nullable_b (b), UNIQUE KEY ua (a))",
        "INSERT INTO snap_nokey.log VALUES "
        + ", ".join(f"({a}, '{b}', {'NULL' if c is None else c})" for a, b, c in rows),
        "INSERT INTO snap_nokey.uniq VALUES (1, NULL), (2, 2)",
    )
    expected = Counter(rows)
    assert max(expected.values()) > 1  # the table holds identical rows

    def staged(pipeline: SnapshotPipeline, snapshot_id: str) -> Counter[tuple[Any, ...]]:
        return Counter((r["a"], r["b"], r["c"]) for r in pipeline.snapshot_rows(snapshot_id, "snap_nokey.log"))

    for directory in ("whole", "cut"):
        (tmp_path / directory).mkdir()
    whole = SnapshotPipeline(mysql_server, tmp_path / "whole", "nokey", TableSelection.of("snap_nokey.*"), chunk_rows=5)
    plan = whole.plan("run-1")
    assert plan.snapshot_id == "000001"
    assert plan.tables == ("snap_nokey.log", "snap_nokey.uniq")
    log_chunks = [chunk for chunk in plan.chunks if chunk.table == "log"]
    assert [(c.chunk_no, c.key_columns) for c in log_chunks] == [(0, ())]  # the whole table, however many rows
    assert log_chunks[0].predicate() == ("TRUE", [])
    assert {c.key_columns for c in plan.chunks if c.table == "uniq"} == {("a",)}  # not the nullable key
    results = [whole.run_chunk("run-1", argument) for argument in plan.mapped_arguments()]
    assert sum(r.rows for r in results if r.table_name == "snap_nokey.log") == len(rows)
    assert staged(whole, "000001") == expected
    assert {r["_cdc_op"] for r in whole.snapshot_rows("000001", "snap_nokey.log")} == {"r"}

    named = {"snap_nokey.log": ["a", "b"]}
    cut = SnapshotPipeline(
        mysql_server, tmp_path / "cut", "nokey", TableSelection.of("snap_nokey.*"), chunk_rows=5, key_columns=named
    )
    plan = cut.plan("run-1")
    assert plan.snapshot_id == "000001"
    log_chunks = [chunk for chunk in plan.chunks if chunk.table == "log"]
    assert len(log_chunks) > 1 and {c.key_columns for c in log_chunks} == {("a", "b")}
    results = [cut.run_chunk("run-1", argument) for argument in plan.mapped_arguments()]
    log_rows = [r.rows for r in results if r.table_name == "snap_nokey.log"]
    assert len(log_rows) == len(log_chunks) and sum(log_rows) == len(rows)  # no row read twice or missed
    assert staged(cut, "000001") == expected


def test_a_missing_lock_tables_grant_is_named(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_grant",
        "CREATE DATABASE snap_grant",
        "CREATE TABLE snap_grant.t (id INT PRIMARY KEY)",
        "DROP USER IF EXISTS 'nolock'@'%'",
        "CREATE USER 'nolock'@'%' IDENTIFIED BY 'nolock-secret-1'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'nolock'@'%'",
        "GRANT SELECT ON snap_grant.* TO 'nolock'@'%'",
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "grant", TableSelection.of("snap_grant.*"))
    plan = pipeline.plan("run-1")
    restricted = SnapshotPipeline(
        mysql_server.__class__(admin=mysql_server.admin, cdc=mysql_server.account("nolock", "nolock-secret-1")),
        tmp_path,
        "grant",
        TableSelection.of("snap_grant.*"),
    )
    with pytest.raises(MissingPrivilegeError, match=r"GRANT LOCK TABLES, SELECT ON `snap_grant`\.\*") as raised:
        restricted.run_chunk("run-1", plan.mapped_arguments()[0])
    assert "nolock-secret-1" not in str(raised.value)
    assert not pipeline.store.snapshot_chunks("grant")[0].is_finished


def test_a_resnapshot_of_one_table_leaves_the_other_tables_and_past_windows_alone(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    db = "snap_again"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.nums (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {db}.names (name VARCHAR(20) PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.nums VALUES " + ", ".join(f"({i}, {i})" for i in range(0, 3000, 2)),
        f"INSERT INTO {db}.names VALUES " + ", ".join(f"('k{i:05d}', {i % 100})" for i in range(0, 3000, 3)),
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "again", TableSelection.of(f"{db}.*"), chunk_rows=400)
    pipeline.snapshot("run-1")
    mysql_server.execute(f"UPDATE {db}.nums SET v = -v WHERE id < 100", f"DELETE FROM {db}.names WHERE v = 7")
    windows = [pipeline.capture("run-1")]
    mysql_server.execute(f"INSERT INTO {db}.nums VALUES (5001, 1)", f"UPDATE {db}.names SET v = 0 WHERE v = 8")
    windows.append(pipeline.capture("run-2"))
    names_manifest = (
        pipeline.staging / "again" / "snapshots" / "000001" / f"{db}.names" / "_manifest.json"
    ).read_bytes()

    with pytest.raises(ConfigurationError, match=r"resnapshot names 'snap_again\.nope'"):
        pipeline.plan("run-3", resnapshot=(f"{db}.nope",))
    writer = Writer(mysql_server, 21, db)
    writer.start()
    try:
        plan = pipeline.plan("run-3", resnapshot=(f"{db}.nums",))
        assert (plan.snapshot_id, plan.tables) == ("000002", (f"{db}.nums",))
        for argument in plan.mapped_arguments():
            pipeline.run_chunk("run-3", argument)
        windows.append(pipeline.capture("run-3"))
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, writer.error
    windows.append(pipeline.capture("run-4"))

    assert pipeline.table_manifest("000002", f"{db}.nums")["handoff_window"] == 3
    nums = replay(
        pipeline.snapshot_rows("000002", f"{db}.nums"),
        [pipeline.window_rows(w.window_id, f"{db}.nums") for w in windows[2:]],
        ["id"],
        ["id", "v"],
    )
    assert nums == source_state(mysql_server, f"{db}.nums", ["id"], ["id", "v"])
    names = replay(
        pipeline.snapshot_rows("000001", f"{db}.names"),
        [pipeline.window_rows(w.window_id, f"{db}.names") for w in windows],
        ["name"],
        ["name", "v"],
    )
    assert names == source_state(mysql_server, f"{db}.names", ["name"], ["name", "v"])
    assert (
        pipeline.staging / "again" / "snapshots" / "000001" / f"{db}.names" / "_manifest.json"
    ).read_bytes() == names_manifest
    # A clear of a window from before the re-snapshot re-reads it identically.
    assert pipeline.capture("run-2").as_xcom() == windows[1].as_xcom()


def test_a_table_that_starts_matching_later_is_snapshotted_alone(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_later",
        "CREATE DATABASE snap_later",
        "CREATE TABLE snap_later.a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE snap_later.b (id INT PRIMARY KEY, v INT)",
        "INSERT INTO snap_later.a VALUES (1, 1), (2, 2)",
        "INSERT INTO snap_later.b VALUES (1, 1), (2, 2)",
    )
    only_a = SnapshotPipeline(mysql_server, tmp_path, "later", TableSelection.of("snap_later.a"))
    assert only_a.plan("run-1").tables == ("snap_later.a",)
    only_a.snapshot("run-1")
    mysql_server.execute("UPDATE snap_later.b SET v = 9", "INSERT INTO snap_later.a VALUES (3, 3)")
    first = only_a.capture("run-1")
    assert set(first.table_counts) == {"snap_later.a"}

    both = SnapshotPipeline(mysql_server, tmp_path, "later", TableSelection.of("snap_later.*"))
    plan = both.plan("run-2")
    assert (plan.snapshot_id, plan.tables) == ("000002", ("snap_later.b",))
    both.snapshot("run-2")
    mysql_server.execute("DELETE FROM snap_later.b WHERE id = 1", "INSERT INTO snap_later.b VALUES (3, 3)")
    second = both.capture("run-2")
    for name, snapshot_id, windows in (
        ("snap_later.a", "000001", [first, second]),
        ("snap_later.b", "000002", [second]),
    ):
        state = replay(
            both.snapshot_rows(snapshot_id, name),
            [both.window_rows(w.window_id, name) for w in windows],
            ["id"],
            ["id", "v"],
        )
        assert state == source_state(mysql_server, name, ["id"], ["id", "v"]), name


def test_a_plan_with_more_chunks_than_airflow_can_map_is_refused_before_it_is_recorded(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_many",
        "CREATE DATABASE snap_many",
        "CREATE TABLE snap_many.t (id INT PRIMARY KEY)",
        "INSERT INTO snap_many.t VALUES " + ", ".join(f"({i})" for i in range(10)),
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "many", TableSelection.of("snap_many.*"), max_chunks=3)
    with pytest.raises(ConfigurationError, match=r"needs 5 chunks of 2 rows .* raise chunk_rows to at least 4"):
        pipeline.plan("run-1", chunk_rows=2)
    assert pipeline.store.list_snapshots("many") == []
    assert len(pipeline.plan("run-1", chunk_rows=4).chunks) == 3


def test_an_approval_step_decides_which_tables_are_snapshotted_again(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """With an approval step, a table that already has a snapshot is snapshotted again (its target re-built)
    only when approved; the others keep their wait; first snapshots never wait for approval."""
    from airflow_provider_mysql_cdc.snapshot.engine import snapshots_to_approve

    db = "snap_approve"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.keyed (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE {db}.plain (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.keyed VALUES (1, 'a'), (2, 'b')",
        f"INSERT INTO {db}.plain VALUES (1, 1)",
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "approve", TableSelection.of(f"{db}.*"))

    def asked(run_id: str, **overrides: Any) -> dict[str, str]:
        return snapshots_to_approve(pipeline.request(run_id, **overrides), mysql_server.cdc, pipeline.store)

    assert asked("run-1") == {}  # a new pipeline: every snapshot is a first one
    pipeline.snapshot("run-1")
    mysql_server.execute(f"ALTER TABLE {db}.keyed DROP PRIMARY KEY, ADD PRIMARY KEY (v, id)")
    window = pipeline.capture("run-1")
    # The key change leaves the table waiting for a rebuild.
    assert set(pipeline.store.pending_rebuilds("approve", window.window_id + 1)) == {f"{db}.keyed"}

    questions = asked("run-2", resnapshot=(f"{db}.plain",))
    assert set(questions) == {f"{db}.keyed", f"{db}.plain"}
    assert questions[f"{db}.keyed"].startswith(f"rebuild asked by window {window.window_id} (GTID ")
    assert questions[f"{db}.plain"] == "named in resnapshot"

    # Only the re-snapshot of plain is approved: keyed keeps its wait, and the next run asks again.
    mysql_server.execute(f"CREATE TABLE {db}.fresh (id INT PRIMARY KEY)", f"INSERT INTO {db}.fresh VALUES (7)")
    plan = pipeline.plan("run-2", resnapshot=(f"{db}.plain",), approved_rebuilds=(f"{db}.plain",))
    assert plan.tables == (f"{db}.fresh", f"{db}.plain")  # a first snapshot needs no approval
    pipeline.snapshot("run-2", resnapshot=(f"{db}.plain",), approved_rebuilds=(f"{db}.plain",))
    assert set(pipeline.store.pending_rebuilds("approve", window.window_id + 1)) == {f"{db}.keyed"}
    assert asked("run-2") == {}  # the run's snapshot is planned: a clear asks nothing new
    assert set(asked("run-3")) == {f"{db}.keyed"}

    # Rejected (nothing approved): nothing is snapshotted, the wait stays.
    assert pipeline.plan("run-3", approved_rebuilds=()).snapshot_id is None
    assert set(pipeline.store.pending_rebuilds("approve", window.window_id + 1)) == {f"{db}.keyed"}

    # Approved: keyed is snapshotted again, as without an approval step.
    plan = pipeline.plan("run-4", approved_rebuilds=(f"{db}.keyed",))
    assert plan.tables == (f"{db}.keyed",)
