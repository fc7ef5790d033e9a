"""Capture windows against the real server: cut-off rules, caps, a concurrent writer, tagged GTIDs,
DDL inside a window and table selection.

Each test uses its own database and pipeline; staged rows are read back from the published
manifests, and where a test claims equality with the source it replays the staged changes in
``_cdc_seq`` order and compares the result with ``SELECT``.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, CaptureResult, capture_window
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.staging import StagingManifest
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection, WindowCaps
from airflow_provider_mysql_cdc.errors import WindowNotClosedError
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql


class Pipeline:
    """One pipeline of a test: its store, staging directory and request defaults."""

    def __init__(self, server: MySqlTestServer, tmp_path: Path, name: str, tables: TableSelection) -> None:
        self.server = server
        self.name = name
        self.staging = tmp_path / "staging"
        self.store = FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
        self.tables = tables

    def capture(self, run_id: str, **overrides: Any) -> CaptureResult:
        settings: dict[str, Any] = {
            "cutoff": CutoffRule.CATCH_UP,
            "tables": self.tables,
            "replica_server_id": 4_300_001,
        }
        settings.update(overrides)
        return capture_window(
            CaptureRequest(pipeline=self.name, run_id=run_id, staging_uri=str(self.staging), **settings),
            self.server.cdc,
            self.store,
        )

    def manifest(self, window_id: int) -> StagingManifest:
        manifest = Staging(str(self.staging), self.name).read_window_manifest(window_id)
        assert manifest is not None, f"window {window_id} has no manifest"
        return manifest

    def rows(self, window_id: int, table: str | None = None) -> list[dict[str, Any]]:
        """Staged rows of a window (optionally of one ``db.table``), in ``_cdc_seq`` order."""
        rows: list[dict[str, Any]] = []
        for staged in self.manifest(window_id).files:
            if table is None or f"{staged.database}.{staged.table}" == table:
                path = self.staging / self.name / "windows" / f"{window_id:08d}" / staged.path
                rows += pq.read_table(path).to_pylist()
        return sorted(rows, key=lambda row: row["_cdc_seq"])


def executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))


def replay(rows: list[dict[str, Any]], key: str, columns: list[str]) -> dict[Any, tuple[Any, ...]]:
    """The table state after applying staged changes in order (the reference for the apply job)."""
    state: dict[Any, tuple[Any, ...]] = {}
    for row in rows:
        if row["_cdc_op"] == "d":
            assert row[key] in state, f"delete of a key that is not there: {row}"
            del state[row[key]]
        else:
            state[row[key]] = tuple(row[c] for c in columns)
    return state


def test_data_interval_windows_hold_exactly_the_transactions_committed_in_their_interval(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    mysql_server.execute("DROP DATABASE IF EXISTS di", "CREATE DATABASE di", "CREATE TABLE di.t (id INT PRIMARY KEY)")
    pipeline = Pipeline(mysql_server, tmp_path, "di", TableSelection.of("di.*"))
    start = mysql_server.utc_now()
    time.sleep(0.01)
    first = pipeline.capture("interval-0", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=start)
    assert first.transactions == 0

    mysql_server.execute("INSERT INTO di.t VALUES (1)", "INSERT INTO di.t VALUES (2)")
    time.sleep(0.01)
    middle = mysql_server.utc_now()
    time.sleep(0.01)
    mysql_server.execute("INSERT INTO di.t VALUES (3)", "INSERT INTO di.t VALUES (4)")
    time.sleep(0.01)
    end = mysql_server.utc_now()

    second = pipeline.capture("interval-1", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=middle)
    assert [r["id"] for r in pipeline.rows(second.window_id)] == [1, 2]
    assert second.lower == first.upper
    manifest = pipeline.manifest(second.window_id)
    assert manifest.cutoff_rule == "data_interval"
    assert manifest.last_commit_ts_us is not None
    assert manifest.last_commit_ts_us < middle.timestamp() * 1e6

    third = pipeline.capture("interval-2", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=end)
    assert [r["id"] for r in pipeline.rows(third.window_id)] == [3, 4]
    assert third.lower == second.upper
    assert all(middle <= r["_cdc_commit_ts"] < end for r in pipeline.rows(third.window_id))

    # A clear of the middle run re-reads exactly its window, although later transactions exist.
    published = (tmp_path / "staging" / "di" / "windows" / f"{second.window_id:08d}" / "_manifest.json").read_bytes()
    again = pipeline.capture("later", cutoff=CutoffRule.CATCH_UP)
    assert again.window_id == third.window_id + 1
    rerun = pipeline.capture("interval-1", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=middle)
    assert rerun.as_xcom() == second.as_xcom()
    assert pipeline.manifest(second.window_id).to_json().encode() == published


def test_a_data_interval_window_ends_once_it_holds_every_transaction_without_waiting_for_a_heartbeat(
    mysql_server: MySqlTestServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS dend", "CREATE DATABASE dend", "CREATE TABLE dend.t (id INT PRIMARY KEY)"
    )
    pipeline = Pipeline(mysql_server, tmp_path, "dend", TableSelection.of("dend.*"))
    pipeline.capture("interval-0", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=mysql_server.utc_now())
    mysql_server.execute("INSERT INTO dend.t VALUES (1)", "INSERT INTO dend.t VALUES (2)")
    end = mysql_server.utc_now()
    with caplog.at_level(logging.INFO, logger="airflow_provider_mysql_cdc.capture.window_reading"):
        window = pipeline.capture("interval-1", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=end)
    assert [r["id"] for r in pipeline.rows(window.window_id)] == [1, 2]
    endings = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"window {window.window_id} ends")]
    assert endings == [f"window {window.window_id} ends: every transaction committed before its end is read"]


def test_a_data_interval_window_waits_for_a_transaction_in_flight_when_the_task_started(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """A transaction has its GTID and commit timestamp but is not in gtid_executed yet (the binlog's group
    commit waits ``binlog_group_commit_sync_delay`` before committing it): a window whose end is past its
    commit timestamp holds it, although nothing else was committed in the window."""
    mysql_server.execute(
        "DROP DATABASE IF EXISTS dfly", "CREATE DATABASE dfly", "CREATE TABLE dfly.t (id INT PRIMARY KEY)"
    )
    pipeline = Pipeline(mysql_server, tmp_path, "dfly", TableSelection.of("dfly.*"))
    pipeline.capture("interval-0", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=mysql_server.utc_now())
    before = executed(mysql_server)
    mysql_server.execute("SET GLOBAL binlog_group_commit_sync_delay = 1000000")
    try:
        writer = threading.Thread(target=mysql_server.execute, args=("INSERT INTO dfly.t VALUES (1)",))
        writer.start()
        deadline = time.monotonic() + 5
        while not mysql_server.execute("SELECT @@GLOBAL.gtid_owned")[0][0]:
            assert time.monotonic() < deadline, "the insert never got its GTID"
            time.sleep(0.01)
        end = mysql_server.utc_now()
        assert executed(mysql_server) == before, "the insert committed before the window was read: no case"
        window = pipeline.capture("interval-1", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=end)
        writer.join()
    finally:
        mysql_server.execute("SET GLOBAL binlog_group_commit_sync_delay = 0")
    rows = pipeline.rows(window.window_id)
    assert [r["id"] for r in rows] == [1]
    assert rows[0]["_cdc_commit_ts"] < end
    assert window.upper == executed(mysql_server)


def test_a_data_interval_that_has_not_ended_is_refused_and_retried_later(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    pipeline = Pipeline(mysql_server, tmp_path, "future", TableSelection.of("future.*"))
    pipeline.capture("past", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=mysql_server.utc_now())
    soon = mysql_server.utc_now() + timedelta(seconds=2)
    with pytest.raises(WindowNotClosedError, match="has not ended yet; retry after it has"):
        pipeline.capture("soon", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=soon)
    time.sleep(2.1)
    retried = pipeline.capture("soon", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=soon)
    assert retried.window_id == 2


def test_caps_end_windows_early_on_transaction_boundaries(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS caps", "CREATE DATABASE caps", "CREATE TABLE caps.t (id INT PRIMARY KEY)"
    )
    pipeline = Pipeline(mysql_server, tmp_path, "caps", TableSelection.of("caps.*"))
    pipeline.capture("start")
    mysql_server.execute(*(f"INSERT INTO caps.t VALUES ({2 * i}), ({2 * i + 1})" for i in range(5)))
    target = executed(mysql_server)

    by_transactions = [pipeline.capture(f"tx-{n}", caps=WindowCaps(max_transactions=2)) for n in range(2)]
    assert [len(pipeline.rows(w.window_id)) for w in by_transactions] == [4, 4]
    # max_rows=3 takes the transaction that crosses the cap whole: windows never split a transaction.
    by_rows = pipeline.capture("rows", caps=WindowCaps(max_rows=3))
    assert [r["id"] for r in pipeline.rows(by_rows.window_id)] == [8, 9]
    assert by_rows.upper >= target
    for earlier, later in zip(by_transactions, [*by_transactions[1:], by_rows], strict=True):
        assert later.lower == earlier.upper
    gtids_by_window = [{r["_cdc_gtid"] for r in pipeline.rows(w.window_id)} for w in (*by_transactions, by_rows)]
    assert [len(g) for g in gtids_by_window] == [2, 2, 1]
    # Re-running a capped window gives the same window even though more transactions are there now.
    assert pipeline.capture("tx-0", caps=WindowCaps(max_transactions=2)).as_xcom() == by_transactions[0].as_xcom()


def random_transaction(rng: random.Random, next_id: dict[str, int]) -> list[str]:
    """1-4 statements over ``busy.a``/``busy.b``: inserts, updates, deletes and key changes."""
    statements = []
    for _ in range(rng.randint(1, 4)):
        table = rng.choice("ab")
        action = rng.random()
        if action < 0.45 or next_id[table] < 5:
            first = next_id[table]
            next_id[table] += 3
            values = ", ".join(f"({i}, {rng.randint(0, 99)}, 'x{i}')" for i in range(first, first + 3))
            statements.append(f"INSERT INTO busy.{table} VALUES {values}")
        elif action < 0.75:
            statements.append(
                f"UPDATE busy.{table} SET v = v + 1, s = 'u{rng.randint(0, 9)}' WHERE id % 7 = {rng.randint(0, 6)}"
            )
        elif action < 0.9:
            statements.append(f"DELETE FROM busy.{table} WHERE id = {rng.randrange(1, next_id[table])}")
        else:  # a key change: staged as a delete of the old key plus an insert of the new one
            statements.append(
                f"UPDATE busy.{table} SET id = {next_id[table]} WHERE id = {rng.randrange(1, next_id[table])}"
            )
            next_id[table] += 1
    return statements


class RandomWriter(threading.Thread):
    """Commits random transactions on the server until stopped; keeps the first failure."""

    def __init__(self, server: MySqlTestServer, seed: int) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.seed = seed
        self.stopped = threading.Event()
        self.failure: BaseException | None = None
        self.transactions = 0

    def run(self) -> None:
        rng = random.Random(self.seed)
        next_id = {"a": 1, "b": 1}
        try:
            with connection_to(self.server.admin) as connection:
                while not self.stopped.is_set():
                    query(connection, self.server.admin, "BEGIN")
                    for statement in random_transaction(rng, next_id):
                        query(connection, self.server.admin, statement)
                    query(connection, self.server.admin, "COMMIT")
                    self.transactions += 1
        except BaseException as exc:  # reported by the test
            self.failure = exc


def test_windows_under_a_concurrent_writer_are_contiguous_and_replay_to_the_source(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS busy",
        "CREATE DATABASE busy",
        "CREATE TABLE busy.a (id INT PRIMARY KEY, v INT, s VARCHAR(20))",
        "CREATE TABLE busy.b (id INT PRIMARY KEY, v INT, s VARCHAR(20))",
    )
    pipeline = Pipeline(mysql_server, tmp_path, "busy", TableSelection.of("busy.*"))
    windows = [pipeline.capture("w-0")]
    seed = random.randrange(1 << 30)
    writer = RandomWriter(mysql_server, seed)
    writer.start()
    try:
        for n in range(1, 7):
            time.sleep(0.3)
            windows.append(pipeline.capture(f"w-{n}"))
    finally:
        writer.stopped.set()
        writer.join(timeout=30)
    assert writer.failure is None, f"writer failed (seed {seed}): {writer.failure!r}"
    windows.append(pipeline.capture("w-final"))
    assert windows[-1].upper >= executed(mysql_server)

    for earlier, later in itertools.pairwise(windows):
        assert later.lower == earlier.upper, f"seed {seed}: windows {earlier.window_id} and {later.window_id}"
        assert later.window_id == earlier.window_id + 1
    seen_gtids: set[str] = set()
    for window in windows:
        gtids = {r["_cdc_gtid"] for r in pipeline.rows(window.window_id)}
        assert all(GtidSet.parse(g) <= window.upper - window.lower for g in gtids), f"seed {seed}"
        assert not gtids & seen_gtids, f"seed {seed}: a transaction staged in two windows"
        seen_gtids |= gtids
    assert sum(1 for w in windows if w.transactions) >= 3, "the writer should have spread over several windows"
    # Every transaction between the first and the last frontier is in exactly one window (a writer
    # transaction that changed no row has no GTID: MySQL does not binlog it).
    assert sum(w.transactions for w in windows[1:]) == len(windows[-1].upper - windows[0].upper)

    for table in ("a", "b"):
        staged = [row for w in windows for row in pipeline.rows(w.window_id, f"busy.{table}")]
        expected = {row[0]: tuple(row[1:]) for row in mysql_server.execute(f"SELECT id, v, s FROM busy.{table}")}
        assert replay(staged, "id", ["v", "s"]) == expected, f"seed {seed}: table {table} differs"


def test_tagged_gtids_are_captured_and_attributed(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS tags", "CREATE DATABASE tags", "CREATE TABLE tags.t (id INT PRIMARY KEY)"
    )
    pipeline = Pipeline(mysql_server, tmp_path, "tags", TableSelection.of("tags.*"))
    pipeline.capture("start")
    uuid = str(mysql_server.execute("SELECT @@server_uuid")[0][0])
    mysql_server.execute(
        "INSERT INTO tags.t VALUES (1)",
        "SET gtid_next = 'AUTOMATIC:etl_batch'",
        "INSERT INTO tags.t VALUES (2)",
        "INSERT INTO tags.t VALUES (3)",
        "SET gtid_next = 'AUTOMATIC'",
        "INSERT INTO tags.t VALUES (4)",
    )
    window = pipeline.capture("tagged")
    rows = pipeline.rows(window.window_id)
    gtids = [r["_cdc_gtid"] for r in rows]
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert gtids[1].startswith(f"{uuid}:etl_batch:") and gtids[2].startswith(f"{uuid}:etl_batch:")
    assert gtids[1] != gtids[2]
    assert ":etl_batch:" not in gtids[0] and ":etl_batch:" not in gtids[3]
    assert all(GtidSet.parse(g) <= window.upper - window.lower for g in gtids)
    assert "etl_batch" in str(window.upper)
    # The next window starts after the tagged transactions: none of them is read again.
    mysql_server.execute("INSERT INTO tags.t VALUES (5)")
    after = pipeline.capture("after")
    assert [r["id"] for r in pipeline.rows(after.window_id)] == [5]


def test_ddl_inside_a_window_stages_one_file_per_schema_version(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS ddl", "CREATE DATABASE ddl", "CREATE TABLE ddl.t (id INT PRIMARY KEY, a INT)"
    )
    pipeline = Pipeline(mysql_server, tmp_path, "ddl", TableSelection.of("ddl.*"))
    pipeline.capture("start")
    mysql_server.execute(
        "INSERT INTO ddl.t VALUES (1, 10)",
        "ALTER TABLE ddl.t ADD COLUMN b VARCHAR(10)",
        "INSERT INTO ddl.t VALUES (2, 20, 'two')",
        "UPDATE ddl.t SET b = 'one' WHERE id = 1",
        "ALTER TABLE ddl.t DROP COLUMN a",
        "INSERT INTO ddl.t VALUES (3, 'three')",
        "ALTER TABLE ddl.t MODIFY COLUMN id BIGINT",
        "INSERT INTO ddl.t VALUES (4, 'four')",
    )
    window = pipeline.capture("altered")
    manifest = pipeline.manifest(window.window_id)
    versions = sorted({f.schema_version for f in manifest.files if f.table == "t"})
    assert len(versions) == 4
    columns_by_version = {s.schema_version: [c["name"] for c in s.columns] for s in manifest.schemas if s.table == "t"}
    assert [columns_by_version[v] for v in versions] == [["id", "a"], ["id", "a", "b"], ["id", "b"], ["id", "b"]]
    id_types = {s.schema_version: s.columns[0]["arrow_type"] for s in manifest.schemas if s.table == "t"}
    assert [id_types[v] for v in versions] == ["int32", "int32", "int32", "int64"]
    rows = pipeline.rows(window.window_id)
    assert [(r["_cdc_op"], r["id"], r.get("a"), r.get("b")) for r in rows] == [
        ("c", 1, 10, None),
        ("c", 2, 20, "two"),
        ("u", 1, 10, "one"),
        ("c", 3, None, "three"),
        ("c", 4, None, "four"),
    ]
    # The DDL is in the manifest, ordered with the rows, and in the schema history with its GTID.
    statements = [d.statement for d in manifest.ddl]
    assert statements == [
        "ALTER TABLE ddl.t ADD COLUMN b VARCHAR(10)",
        "ALTER TABLE ddl.t DROP COLUMN a",
        "ALTER TABLE ddl.t MODIFY COLUMN id BIGINT",
    ]
    seqs = [r["_cdc_seq"] for r in rows]
    assert seqs[0] < manifest.ddl[0].seq < seqs[1] < seqs[2] < manifest.ddl[1].seq < seqs[3] < manifest.ddl[2].seq
    history = [h for h in pipeline.store.ddl_history("ddl") if h["statement"].startswith("ALTER TABLE ddl.t")]
    assert [h["statement"] for h in history] == statements
    assert [h["gtid"] for h in history] == [d.gtid for d in manifest.ddl]
    # A re-run decodes each row with the schema in force at its position again: same manifest.
    assert pipeline.capture("altered").as_xcom() == window.as_xcom()


def test_table_selection_picks_up_new_matching_tables_and_skips_the_rest(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS sel",
        "DROP DATABASE IF EXISTS sel_other",
        "CREATE DATABASE sel",
        "CREATE DATABASE sel_other",
        "CREATE TABLE sel.keep (id INT PRIMARY KEY)",
        "CREATE TABLE sel.audit_log (id INT PRIMARY KEY)",
        "CREATE TABLE sel_other.keep (id INT PRIMARY KEY)",
    )
    pipeline = Pipeline(mysql_server, tmp_path, "sel", TableSelection.of(["sel.*"], ["sel.audit_*"]))
    pipeline.capture("start")
    mysql_server.execute(
        "INSERT INTO sel.keep VALUES (1)",
        "INSERT INTO sel.audit_log VALUES (1)",
        "INSERT INTO sel_other.keep VALUES (1)",
        "CREATE TABLE sel.born_later (id INT PRIMARY KEY, v VARCHAR(5))",
        "INSERT INTO sel.born_later VALUES (7, 'new')",
        "CREATE TABLE sel.audit_later (id INT PRIMARY KEY)",
        "INSERT INTO sel.audit_later VALUES (1)",
        "CREATE TABLE sel_other.later (id INT PRIMARY KEY)",
    )
    window = pipeline.capture("selected")
    manifest = pipeline.manifest(window.window_id)
    assert sorted(f"{f.database}.{f.table}" for f in manifest.files) == ["sel.born_later", "sel.keep"]
    assert [(r["id"], r["v"]) for r in pipeline.rows(window.window_id, "sel.born_later")] == [(7, "new")]
    # Only DDL of selected tables is kept (not the excluded table's, not another database's).
    assert [d.statement for d in manifest.ddl] == ["CREATE TABLE sel.born_later (id INT PRIMARY KEY, v VARCHAR(5))"]
    assert window.transactions >= 7  # every transaction moves the frontier, staged or not
    assert window.upper >= executed(mysql_server)
