"""Failover: a pipeline that captured from a primary continues from its promoted replica.

A second local mysqld replicates from the first with GTID auto-position (``tests/reliability/replica.py``).
A workload writes to the primary while the pipeline snapshots it and captures windows; the pipeline is
left behind the primary on purpose. Then the workload stops, the replica catches up and is promoted,
the primary is stopped by PID, the pipeline's connection is switched to the promoted server and the
workload continues there. The windows that follow hold the rest of the primary's transactions (from
the promoted server's own binlog, ``log_replica_updates``) and the new primary's, under its own server
UUID. The last window runs through the example DAG with ``AIRFLOW_CONN_MYSQL_CDC_DEFAULT`` pointed at
the promoted server, as docs/operations.md "Switch to a promoted replica" says. Strict replay of every staged
change (no gap, no duplicate) and the Iceberg tables must equal the promoted server."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.headroom import HeadroomStatus
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.mysql.binlog_files import check_headroom
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from tests.conftest import INSTANCE_PREFIX
from tests.integration.snapshot_pipeline import SnapshotPipeline, replay, source_state
from tests.mysql_servers import MySqlTestServer, running_local
from tests.reliability.replica import Replica, running_replica

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.airflow]

PIPELINE = "failover"
#: table -> (key columns, every column)
TABLES: dict[str, tuple[list[str], list[str]]] = {
    "fo.accounts": (["id"], ["id", "owner", "balance"]),
    "fo.events": (["id"], ["id", "account", "kind"]),
    "fo.daily": (["account", "day"], ["account", "day", "amount"]),
}


def executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0] or ""))


def server_uuid(server: MySqlTestServer) -> str:
    return str(server.execute("SELECT @@GLOBAL.server_uuid")[0][0]).lower()


def uuids(gtids: GtidSet) -> set[str]:
    return {source_uuid for source_uuid, _tag in gtids.sources}


@dataclass
class Workload:
    """Inserts, updates, deletes, key changes and multi-statement transactions on ``fo.*``, in a
    thread, until stopped. Account ids come from one counter, so the workload continues on another
    server (after a failover) without reusing a key."""

    next_id: int = 1_000
    seed: int = 7
    transactions: int = 0
    failures: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, server: MySqlTestServer) -> None:
        assert self._thread is None
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(server,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        assert self._thread is not None
        self._stop.set()
        self._thread.join(timeout=60)
        assert not self._thread.is_alive()
        self._thread = None
        assert self.failures == []

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _run(self, server: MySqlTestServer) -> None:
        rng = random.Random(self.seed + self.next_id)
        try:
            with connection_to(server.admin) as connection:

                def run(*statements: str) -> None:
                    for statement in statements:
                        query(connection, server.admin, statement)

                while not self._stop.is_set():
                    some = rng.randrange(1, self.next_id + 1)
                    choice = rng.random()
                    if choice < 0.3:
                        new = self._new_id()
                        run(f"INSERT INTO fo.accounts VALUES ({new}, 'owner{new}', {rng.randrange(1000)})")
                    elif choice < 0.55:
                        run(f"UPDATE fo.accounts SET balance = balance + {rng.randrange(1, 50)} WHERE id = {some}")
                    elif choice < 0.65:
                        run(f"DELETE FROM fo.accounts WHERE id = {some}")
                    elif choice < 0.7:
                        run(f"UPDATE fo.accounts SET id = {self._new_id()} WHERE id = {some}")
                    elif choice < 0.9:
                        run(
                            "BEGIN",
                            f"INSERT INTO fo.events (account, kind) VALUES ({some}, 'debit')",
                            f"UPDATE fo.accounts SET balance = balance - 1 WHERE id = {some}",
                            f"INSERT INTO fo.daily VALUES ({some % 50}, {rng.randrange(5)}, 1.25) "
                            "ON DUPLICATE KEY UPDATE amount = amount + 1.25",
                            "COMMIT",
                        )
                    else:
                        run(f"DELETE FROM fo.events WHERE account = {some} ORDER BY id LIMIT 2")
                    self.transactions += 1
                    time.sleep(0.004)
        except BaseException as exc:
            self.failures.append(exc)


@pytest.fixture
def primary() -> Iterator[MySqlTestServer]:
    with running_local(f"{INSTANCE_PREFIX}-failover-primary") as server:
        yield server


@pytest.fixture
def replica(primary: MySqlTestServer) -> Iterator[Replica]:
    with running_replica(primary, f"{INSTANCE_PREFIX}-failover-replica") as running:
        yield running


def run_the_dag_against(
    server: MySqlTestServer, pipeline: SnapshotPipeline, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """One run of the example DAG for the pipeline with its connection on ``server``; the capture's XCom."""
    from tests.integration.test_airflow_dag import _forget_earlier_runs, _run_example, _states, _xcom

    _forget_earlier_runs()
    run = _run_example(
        monkeypatch,
        server.airflow_conn_json(),
        ["fo.*"],
        pipeline=PIPELINE,
        staging_uri=str(pipeline.staging),
        warehouse=spark.conf.get("spark.sql.catalog.lake.warehouse"),
        cutoff="catch_up",
    )
    states = _states(run)
    assert run.state == "success", states
    assert states[("preflight", -1)] == "success"
    assert states[("snapshot", -1)] == "skipped"  # every table has its snapshot already
    assert _xcom(run, "purge_headroom")["status"] == "ok"
    applied = _xcom(run, "apply")
    assert applied["first_window"] == applied["last_window"] == _xcom(run, "capture")["window_id"]
    return dict(_xcom(run, "capture"))


def assert_replay_equals(pipeline: SnapshotPipeline, server: MySqlTestServer, window_count: int) -> None:
    for table, (key, columns) in TABLES.items():
        state = replay(
            pipeline.snapshot_rows("000001", table),
            [pipeline.window_rows(window_id, table) for window_id in range(1, window_count + 1)],
            key,
            columns,
        )
        assert state == source_state(server, table, key, columns), table


def test_windows_continue_on_the_promoted_replica_with_no_gap_and_no_duplicate(
    airflow_home: Path,
    primary: MySqlTestServer,
    replica: Replica,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from airflow_provider_mysql_cdc.apply.spark_job import run_apply
    from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql
    from airflow_provider_mysql_cdc.hooks.metadata import metadata_store

    primary.execute(
        "CREATE DATABASE fo",
        "CREATE TABLE fo.accounts (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, balance INT NOT NULL)",
        "CREATE TABLE fo.events (id BIGINT AUTO_INCREMENT PRIMARY KEY, account INT NOT NULL, kind VARCHAR(10))",
        "CREATE TABLE fo.daily (account INT, day INT, amount DECIMAL(12,2), PRIMARY KEY (account, day))",
        "INSERT INTO fo.accounts VALUES " + ", ".join(f"({i}, 'owner{i}', {i * 10})" for i in range(1, 1001)),
    )
    replica.catch_up()  # replicating from now on, continuously
    primary_uuid, replica_uuid = server_uuid(primary), replica.server_uuid
    assert primary_uuid != replica_uuid

    # The pipeline's metadata lives where the example DAG keeps it, so the DAG continues the pipeline.
    pipeline = SnapshotPipeline(primary, tmp_path, PIPELINE, TableSelection.of("fo.*"), chunk_rows=300)
    pipeline.store = metadata_store(None)
    workload = Workload()

    # On the primary, under load: the snapshot (in chunks) and two windows.
    workload.start(primary)
    pipeline.snapshot("run-1")
    time.sleep(0.5)
    windows = [pipeline.capture("run-1")]
    time.sleep(0.5)
    windows.append(pipeline.capture("run-2"))
    time.sleep(0.3)
    workload.stop()
    primary.execute("UPDATE fo.accounts SET owner = 'last on primary' WHERE id = 1")
    on_primary_only = executed(primary) - windows[-1].upper  # the pipeline is behind at the failover
    assert on_primary_only and uuids(on_primary_only) == {primary_uuid}

    # Failover: the replica catches up and is promoted; the primary is stopped by PID.
    replica.catch_up()
    assert executed(primary) <= replica.executed()
    replica.promote()
    assert primary.local is not None
    assert primary.local.stop() is True
    promoted = replica.server

    # The sensor against the new server: the binlog past the frontier is there, nothing is lost.
    headroom = check_headroom(PIPELINE, promoted.cdc, pipeline.store, 0)
    assert headroom.status is HeadroomStatus.OK and headroom.lost_gtids == GtidSet(), headroom.message
    assert headroom.backlog_files >= 1

    # The pipeline's connection is switched; the workload continues on the promoted server.
    pipeline.server = promoted
    workload.start(promoted)
    time.sleep(0.5)
    windows.append(pipeline.capture("run-3"))
    time.sleep(0.3)
    workload.stop()
    third = windows[-1]
    assert on_primary_only <= third.upper - third.lower  # the primary's last transactions, read from the replica
    assert replica_uuid in uuids(third.upper - third.lower)  # and the new primary's own
    assert all(replica_uuid not in uuids(window.upper) for window in windows[:2])

    # Windows 1-3 applied in this process; the next run goes through the example DAG, its connection
    # (AIRFLOW_CONN_MYSQL_CDC_DEFAULT) pointing at the promoted server: preflight checks it, the
    # purge-headroom sensor reads its binlogs, capture continues the frontier, the apply follows.
    report = run_apply(spark, ApplySpec(PIPELINE, str(pipeline.staging), 1, len(windows), catalog="lake"))
    assert report.failed == [], report
    promoted.execute("UPDATE fo.accounts SET owner = 'after the switch' WHERE id = 2")
    fourth = run_the_dag_against(promoted, pipeline, spark, monkeypatch)
    assert (fourth["window_id"], fourth["lower"]) == (4, str(third.upper))
    assert GtidSet.parse(fourth["upper"]) == executed(promoted)
    assert uuids(GtidSet.parse(fourth["upper"]) - third.upper) == {replica_uuid}

    # No gap, no duplicate: consecutive bounds, and a strict replay of every staged change per table
    # (updates and deletes hit present keys, inserts absent ones) equals the promoted server.
    assert [window.lower for window in windows[1:]] == [window.upper for window in windows[:2]]
    assert_replay_equals(pipeline, promoted, window_count=4)
    for comparison in compare_with_mysql(spark, promoted.cdc, list(TABLES)):
        assert comparison.equal, comparison.describe()
