"""Server faults against a real local mysqld of this module's own (it is restarted and its binlogs are
purged): mysqld restarted in the middle of a capture and between two windows, the binlog dump
connection killed from the server side (``KILL <id>``) and the retried window applied to Iceberg, and
binlogs purged past a pipeline's frontier, recovered end to end through the example DAG as the
docs/operations.md "Operating it" says. Every fault must end in a window equal to an undisturbed capture of the
same range, and in targets equal to MySQL."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.errors import (
    BinlogConnectionLostError,
    BinlogPurgedError,
    MySqlQueryError,
    TransientCdcError,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowStatus
from tests.conftest import INSTANCE_PREFIX
from tests.integration.snapshot_pipeline import SnapshotPipeline, replay, source_state
from tests.integration.test_capture_faults import (
    DUMP_THREADS,
    attempts,
    executed,
    staged_table,
    staging_rows,
    store_in,
    window_path,
)
from tests.mysql_servers import MySqlTestServer, running_local

pytestmark = pytest.mark.mysql

#: The big window: TRANSACTIONS inserts of ROWS_PER_TRANSACTION rows, ~72 MB of row events. That is
#: far more than the socket buffers of the dump connection hold, so a fault while the capture has
#: staged its first rows really is mid-stream (see BIG_PAYLOAD_CHARS in test_capture_faults).
TRANSACTIONS = 60
ROWS_PER_TRANSACTION = 1_000
PAYLOAD_CHARS = 1_200
ROW_GROUP_ROWS = 10_000
BIG_TABLE = "srv_big.t"
BIG_COLUMNS = ["id", "batch", "payload"]


@pytest.fixture(scope="module")
def faults_server() -> Iterator[MySqlTestServer]:
    """A server of this module's own: it is restarted and its binlogs are purged."""
    with running_local(f"{INSTANCE_PREFIX}-server-faults") as server:
        yield server
        if server.local is not None and server.local.is_running():
            end_dump_threads(server)


def end_dump_threads(server: MySqlTestServer) -> None:
    """KILL the dump threads of finished captures. Such a thread notices that its reader is gone only
    when it next writes (a heartbeat), and a shutdown waits for it: this keeps restarts short."""
    for thread in dump_threads(server):
        with contextlib.suppress(MySqlQueryError):
            server.execute(f"KILL {thread}")


@dataclass(frozen=True)
class BigWindow:
    """``srv_big.t`` loaded by one big window after two pipelines snapshotted it empty."""

    lower: GtidSet
    upper: GtidSet
    #: The staged rows of an undisturbed capture of ``lower``..``upper`` (a pyarrow Table).
    rows: Any
    #: Pipelines whose first window is exactly ``lower``..``upper`` (crashed, shutdown, killed).
    pipelines: dict[str, SnapshotPipeline]


@pytest.fixture(scope="module")
def big_window(faults_server: MySqlTestServer, tmp_path_factory: pytest.TempPathFactory) -> BigWindow:
    server = faults_server
    server.execute(
        "CREATE DATABASE srv_big",
        "CREATE TABLE srv_big.t (id INT PRIMARY KEY, batch INT NOT NULL, payload VARCHAR(2000) NOT NULL)",
    )
    pipelines = {
        name: SnapshotPipeline(server, tmp_path_factory.mktemp(name), name, TableSelection.of("srv_big.*"))
        for name in ("crashed", "shutdown", "killed")
    }
    for pipeline in pipelines.values():
        pipeline.snapshot("run-1")  # the empty table; the snapshot's hand-off is window 1
    lower = executed(server)
    for pipeline in pipelines.values():
        registered = pipeline.store.get_pipeline(pipeline.name)
        assert registered is not None and registered.initial_frontier == lower
    inserts = [
        f"INSERT INTO srv_big.t SELECT {batch * ROWS_PER_TRANSACTION} + n, {batch}, "
        f"CONCAT('payload-{batch}-', n, '-', REPEAT('x', {PAYLOAD_CHARS})) FROM "
        f"(WITH RECURSIVE numbers(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM numbers "
        f"WHERE n < {ROWS_PER_TRANSACTION - 1}) SELECT n FROM numbers) AS numbered"
        for batch in range(TRANSACTIONS)
    ]
    server.execute(
        *inserts,
        "UPDATE srv_big.t SET payload = 'changed' WHERE id < 100",
        "DELETE FROM srv_big.t WHERE batch = 3",
    )
    upper = executed(server)
    reference = tmp_path_factory.mktemp("reference")
    clean = capture_window(big_request("reference", reference, lower), server.cdc, store_in(reference))
    assert (clean.lower, clean.upper, clean.transactions) == (lower, upper, TRANSACTIONS + 2)
    rows = staged_table(reference / "staging", "reference", 1)
    assert rows.num_rows == TRANSACTIONS * ROWS_PER_TRANSACTION + 100 + ROWS_PER_TRANSACTION
    return BigWindow(lower, upper, rows, pipelines)


def big_request(pipeline: str, tmp: Path, initial: GtidSet | None = None) -> CaptureRequest:
    return CaptureRequest(
        pipeline=pipeline,
        run_id="run-1",
        staging_uri=str(tmp / "staging"),
        cutoff=CutoffRule.CATCH_UP,
        tables=TableSelection.of("srv_big.*"),
        initial_frontier=initial,
        replica_server_id=6_100_000 + len(pipeline),
        row_group_rows=ROW_GROUP_ROWS,
    )


def capture_big(pipeline: SnapshotPipeline) -> Any:
    return pipeline.capture("run-1", row_group_rows=ROW_GROUP_ROWS, replica_server_id=6_200_000 + len(pipeline.name))


def dump_threads(server: MySqlTestServer) -> set[int]:
    return {int(row[0]) for row in server.execute(DUMP_THREADS)}


class MidStream:
    """Runs ``fault(dump_thread_id)`` once a capture of ``pipeline`` streams and has staged rows."""

    def __init__(self, server: MySqlTestServer, pipeline: SnapshotPipeline, fault: Callable[[int], None]) -> None:
        self.server = server
        self.pipeline = pipeline
        self.fault = fault
        self.stale = dump_threads(server)
        self.fired: list[int] = []
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _wait_for_the_stream(self) -> int | None:
        with connection_to(self.server.admin) as connection:
            while not self._stop.is_set():
                ours = [int(row[0]) for row in query(connection, self.server.admin, DUMP_THREADS)]
                ours = [thread for thread in ours if thread not in self.stale]
                if ours and staging_rows(self.pipeline.staging, self.pipeline.name, row_group_written=False):
                    return ours[0]
                time.sleep(0.02)
        return None

    def _run(self) -> None:
        try:
            thread = self._wait_for_the_stream()
            if thread is not None:
                self.fired.append(thread)
                self.fault(thread)
        except BaseException as exc:
            self.failures.append(exc)

    def __enter__(self) -> MidStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive()


def assert_nothing_published(pipeline: SnapshotPipeline, window_id: int) -> None:
    window = pipeline.store.window_for_run(pipeline.name, "run-1")
    assert window is not None and window.window_id == window_id and window.status == WindowStatus.PLANNED
    assert Staging(str(pipeline.staging), pipeline.name).read_window_manifest(window_id) is None
    assert not window_path(pipeline.staging, pipeline.name, window_id).exists()
    assert attempts(pipeline.staging, pipeline.name, window_id) == []


def assert_lost_mid_window(error: BaseException, server: MySqlTestServer, big: BigWindow) -> None:
    """The exact transient class, a message that says to retry, names the position and holds no secret."""
    assert type(error) is BinlogConnectionLostError
    assert isinstance(error, TransientCdcError)
    message = str(error)
    assert f"lost the binlog stream from {server.cdc.address}" in message
    last = re.search(r"last complete transaction read: (\S+)\. Retry", message)
    assert last is not None, message
    if last.group(1) != "none":
        assert GtidSet.parse(last.group(1)) <= big.upper - big.lower
    assert server.cdc.password not in message
    assert server.admin.password not in message


# -- 1. mysqld restarted in the middle of a capture --------------------------------------------


def crash_mysqld(server: MySqlTestServer) -> None:
    """SIGKILL the server's mysqld by PID (a crash); its data dir stays for the restart."""
    assert server.local is not None
    pid = server.local.running_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while server.local.is_running():
        assert time.monotonic() < deadline, f"mysqld pid {pid} survived SIGKILL"
        time.sleep(0.05)


def test_mysqld_crash_mid_capture_is_transient_and_the_retry_is_the_exact_window(
    faults_server: MySqlTestServer, big_window: BigWindow
) -> None:
    server, pipeline = faults_server, big_window.pipelines["crashed"]
    assert server.local is not None
    pid_before = server.local.running_pid()

    with (
        MidStream(server, pipeline, lambda _thread: crash_mysqld(server)) as fault,
        pytest.raises(TransientCdcError) as raised,
    ):
        capture_big(pipeline)
    assert fault.failures == [] and len(fault.fired) == 1
    assert not server.local.is_running()
    assert_lost_mid_window(raised.value, server, big_window)
    assert_nothing_published(pipeline, 1)

    server.local.start()  # InnoDB crash recovery; every committed transaction is still there
    assert server.local.running_pid() not in (None, pid_before)
    assert executed(server) == big_window.upper

    again = capture_big(pipeline)
    assert (again.window_id, again.lower, again.upper) == (1, big_window.lower, big_window.upper)
    assert staged_table(pipeline.staging, pipeline.name, 1).equals(big_window.rows)
    state = replay(
        pipeline.snapshot_rows("000001", BIG_TABLE), [pipeline.window_rows(1, BIG_TABLE)], ["id"], BIG_COLUMNS
    )
    assert state == source_state(server, BIG_TABLE, ["id"], BIG_COLUMNS)


def test_mysqld_shutdown_mid_capture_ends_in_the_exact_window(
    faults_server: MySqlTestServer, big_window: BigWindow
) -> None:
    """A normal restart (SIGTERM) while a window streams. MySQL gives client threads a few seconds to
    end and lets a binlog dump thread send what its reader asks for meanwhile, so a window the
    capture can finish reading in that time completes while the server shuts down (seen here: the
    72 MB window in about 1.5 s); a longer one loses the stream and the retry after the restart
    captures it. Either way the published window is exactly the undisturbed one."""
    server, pipeline = faults_server, big_window.pipelines["shutdown"]
    assert server.local is not None
    published_at_fault: list[bool] = []

    def shut_down(_thread: int) -> None:
        assert server.local is not None
        published_at_fault.append(Staging(str(pipeline.staging), pipeline.name).read_window_manifest(1) is not None)
        assert server.local.stop() is True  # SIGTERM by PID: a normal shutdown, the data dir is kept

    lost: BaseException | None = None
    with MidStream(server, pipeline, shut_down) as fault:
        try:
            result = capture_big(pipeline)
        except TransientCdcError as exc:
            lost = exc
    assert fault.failures == [] and published_at_fault == [False]  # the shutdown began mid-window
    assert not server.local.is_running()
    if lost is not None:
        assert_lost_mid_window(lost, server, big_window)
        assert_nothing_published(pipeline, 1)
    server.local.start()
    assert executed(server) == big_window.upper
    print(f"shutdown mid-window: {'the stream was lost, the retry captured it' if lost else 'the capture completed'}")
    if lost is not None:
        result = capture_big(pipeline)
    assert (result.window_id, result.lower, result.upper) == (1, big_window.lower, big_window.upper)
    assert staged_table(pipeline.staging, pipeline.name, 1).equals(big_window.rows)
    assert capture_big(pipeline).as_xcom() == result.as_xcom()  # and a re-run finds it identical


# -- 2. KILL of the binlog dump connection, then the retried window applied to Iceberg ----------


@pytest.mark.spark
def test_killed_dump_connection_retry_equals_the_reference_and_applies_equal_to_mysql(
    faults_server: MySqlTestServer, big_window: BigWindow, spark: Any
) -> None:
    from airflow_provider_mysql_cdc.apply.contract import ApplySpec
    from airflow_provider_mysql_cdc.apply.spark_job import run_apply
    from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql

    server, pipeline = faults_server, big_window.pipelines["killed"]

    def kill(thread: int) -> None:
        server.execute(f"KILL {thread}")

    with MidStream(server, pipeline, kill) as fault, pytest.raises(TransientCdcError) as raised:
        capture_big(pipeline)
    assert fault.failures == [] and len(fault.fired) == 1
    assert_lost_mid_window(raised.value, server, big_window)
    assert_nothing_published(pipeline, 1)

    again = capture_big(pipeline)
    assert (again.window_id, again.lower, again.upper) == (1, big_window.lower, big_window.upper)
    assert staged_table(pipeline.staging, pipeline.name, 1).equals(big_window.rows)

    report = run_apply(spark, ApplySpec(pipeline.name, str(pipeline.staging), 1, 1, catalog="lake"))
    assert report.failed == [], report
    applied = report.tables[BIG_TABLE]
    assert applied.status == "applied" and applied.windows_applied == [1]
    (comparison,) = compare_with_mysql(spark, server.cdc, [BIG_TABLE])
    assert comparison.equal, comparison.describe()
    assert comparison.iceberg_rows == comparison.mysql_rows == (TRANSACTIONS - 1) * ROWS_PER_TRANSACTION


# -- 3. mysqld restarted between two windows ----------------------------------------------------


def test_mysqld_restart_between_windows_continues_with_no_gap(faults_server: MySqlTestServer, tmp_path: Path) -> None:
    server = faults_server
    assert server.local is not None
    server.execute(
        "CREATE DATABASE srv_gap",
        "CREATE TABLE srv_gap.t (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)",
        "INSERT INTO srv_gap.t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(1, 51)),
    )
    pipeline = SnapshotPipeline(server, tmp_path, "gap", TableSelection.of("srv_gap.*"), chunk_rows=20)
    pipeline.snapshot("run-1")
    server.execute("UPDATE srv_gap.t SET v = 'w1' WHERE id <= 10", "DELETE FROM srv_gap.t WHERE id = 50")
    first = pipeline.capture("run-1")

    # Written before the restart (the old binlog file) and after it (the file the restart opened).
    server.execute("INSERT INTO srv_gap.t VALUES (100, 'before restart')", "UPDATE srv_gap.t SET v = 'b' WHERE id = 1")
    before_restart = executed(server) - first.upper
    files_before = [str(row[0]) for row in server.execute("SHOW BINARY LOGS")]
    end_dump_threads(server)
    server.local.stop()
    server.local.start()
    files_after = [str(row[0]) for row in server.execute("SHOW BINARY LOGS")]
    assert files_after[: len(files_before)] == files_before and len(files_after) == len(files_before) + 1
    server.execute(
        "UPDATE srv_gap.t SET v = 'after restart' WHERE id = 100",
        "DELETE FROM srv_gap.t WHERE id BETWEEN 20 AND 25",
        "UPDATE srv_gap.t SET id = 200 WHERE id = 2",
    )
    after_restart = executed(server) - first.upper - before_restart
    assert (len(before_restart), len(after_restart)) == (2, 3)

    second = pipeline.capture("run-2")
    assert (second.window_id, second.lower, second.upper) == (2, first.upper, executed(server))
    assert second.transactions == 5
    # Every transaction on both sides of the restart is in the window, each with its rows.
    staged_gtids = GtidSet.of(row["_cdc_gtid"] for row in pipeline.window_rows(2, "srv_gap.t"))
    assert staged_gtids == before_restart | after_restart
    state = replay(
        pipeline.snapshot_rows("000001", "srv_gap.t"),
        [pipeline.window_rows(window, "srv_gap.t") for window in (1, 2)],
        ["id"],
        ["id", "v"],
    )
    assert state == source_state(server, "srv_gap.t", ["id"], ["id", "v"])


# -- 4. binlogs purged past the frontier: the documented message and recovery, through the DAG ----


def _headroom_report(run: Any) -> dict[str, Any]:
    """The report the purge_headroom sensor pushed (key ``headroom``) before it failed."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, task_ids="purge_headroom", key="headroom")).one()
        return dict(XComModel.deserialize_value(row))


PURGE_TABLES = ["srv_purge.a", "srv_purge.b"]


def purge_unread_changes(server: MySqlTestServer, frontier: GtidSet) -> GtidSet:
    """Changes the pipeline never reads, then ``PURGE BINARY LOGS`` past them; the GTIDs lost."""
    server.execute(
        "INSERT INTO srv_purge.a VALUES (100, 'lost insert')",
        "UPDATE srv_purge.b SET n = -1 WHERE n < 5",
        "DELETE FROM srv_purge.a WHERE id BETWEEN 30 AND 35",
        "UPDATE srv_purge.a SET id = 1000 WHERE id = 1",
        "FLUSH BINARY LOGS",
    )
    current = str(server.execute("SHOW BINARY LOG STATUS")[0][0])
    server.execute(f"PURGE BINARY LOGS TO '{current}'")
    lost = GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_purged")[0][0])) - frontier
    assert len(lost) == 4
    return lost


def assert_capture_refuses(server: MySqlTestServer, airflow_home: Path, tmp_path: Path, lost: GtidSet) -> None:
    """Capture, run against the pipeline's metadata (a copy, so that this probe plans no window in the
    real one), fails with BinlogPurgedError naming the purged GTIDs and the tables to re-snapshot."""
    from airflow_provider_mysql_cdc.hooks.metadata import DEFAULT_SQLITE_NAME

    probe_store = tmp_path / "metadata-copy.db"
    shutil.copyfile(airflow_home / DEFAULT_SQLITE_NAME, probe_store)
    probe = CaptureRequest(
        pipeline="srvpurge",
        run_id="probe",
        staging_uri=str(tmp_path / "probe-staging"),
        cutoff=CutoffRule.CATCH_UP,
        tables=TableSelection.of(["srv_purge.*"]),
        replica_server_id=6_300_001,
    )
    with pytest.raises(BinlogPurgedError) as raised:
        capture_window(probe, server.cdc, FrontierStore.from_url(f"sqlite:///{probe_store}"))
    message = str(raised.value)
    assert f"pipeline 'srvpurge' window 2: the server has purged {lost}" in message
    assert f"run the snapshot with resnapshot={PURGE_TABLES!r}" in message
    assert server.cdc.password not in message
    assert not (tmp_path / "probe-staging" / "srvpurge" / "windows" / "00000002").exists()


@pytest.mark.airflow
@pytest.mark.spark
def test_purged_binlog_fails_sensor_and_capture_and_the_documented_resnapshot_restores_equality(
    airflow_home: Path,
    faults_server: MySqlTestServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    spark: Any,
    warm_spark: Path,
) -> None:
    from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql
    from airflow_provider_mysql_cdc.core.headroom import RESNAPSHOT_EXAMPLE, HeadroomStatus
    from airflow_provider_mysql_cdc.hooks.metadata import metadata_store
    from airflow_provider_mysql_cdc.mysql.binlog_files import check_headroom
    from tests.integration.test_airflow_dag import (
        _forget_earlier_runs,
        _mapped_xcoms,
        _run_example,
        _states,
        _xcom,
    )

    server = faults_server
    _forget_earlier_runs()
    server.execute(
        "CREATE DATABASE srv_purge",
        "CREATE TABLE srv_purge.a (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)",
        "CREATE TABLE srv_purge.b (code VARCHAR(10) PRIMARY KEY, n INT)",
        "INSERT INTO srv_purge.a VALUES " + ", ".join(f"({i}, 'a{i}')" for i in range(1, 41)),
        "INSERT INTO srv_purge.b VALUES " + ", ".join(f"('c{i:03d}', {i})" for i in range(1, 31)),
    )
    conf: dict[str, Any] = {
        "pipeline": "srvpurge",
        "staging_uri": str(tmp_path / "staging"),
        "warehouse": spark.conf.get("spark.sql.catalog.lake.warehouse"),
        "cutoff": "catch_up",
    }
    conn = server.airflow_conn_json()

    def run(**extra: Any) -> Any:
        return _run_example(monkeypatch, conn, ["srv_purge.*"], **conf, **extra)

    def assert_lake_equals_mysql() -> None:
        for comparison in compare_with_mysql(spark, server.cdc, PURGE_TABLES):
            assert comparison.equal, comparison.describe()

    # The pipeline runs: snapshot, window 1, apply.
    first = run()
    assert first.state == "success", _states(first)
    assert _xcom(first, "capture")["window_id"] == 1
    frontier = GtidSet.parse(_xcom(first, "capture")["upper"])

    # Changes the pipeline never reads, then their binlog is purged.
    lost = purge_unread_changes(server, frontier)

    # The next run: purge_headroom fails at once with the documented message; nothing after it runs.
    failed = run()
    assert failed.state == "failed"
    states = _states(failed)
    assert states[("purge_headroom", -1)] == "failed", states
    assert {states[(task, -1)] for task in ("snapshot_plan", "snapshot", "capture", "apply")} == {"upstream_failed"}
    report = _headroom_report(failed)
    assert report["status"] == "purged" and GtidSet.parse(report["lost_gtids"]) == lost
    message = report["message"]
    assert f"pipeline 'srvpurge' can no longer be captured from the binlog: the server already purged {lost}" in message
    assert f"Recover by re-snapshotting the affected tables, e.g. {RESNAPSHOT_EXAMPLE}" in message
    assert server.cdc.password not in json.dumps(report)

    assert_capture_refuses(server, airflow_home, tmp_path, lost)

    # The documented recovery (docs/operations.md): a run with resnapshot of every selected table, right after
    # the failed run (nothing to mark: that run captured no window, so it holds nothing back).
    recovery = run(resnapshot=["srv_purge.*"])
    assert recovery.state == "success", _states(recovery)
    assert _xcom(recovery, "purge_headroom")["status"] == "purged"  # it let the re-snapshot run
    assert {chunk["table"] for chunk in _mapped_xcoms(recovery, "snapshot").values()} == set(PURGE_TABLES)
    captured = _xcom(recovery, "capture")
    assert (captured["window_id"], captured["lower"]) == (2, str(frontier))
    assert lost <= GtidSet.parse(captured["upper"])
    manifest = Staging(conf["staging_uri"], "srvpurge").read_window_manifest(2)
    assert manifest is not None and GtidSet.parse(manifest.covered_by_snapshots) == lost
    assert {name: table["status"] for name, table in _xcom(recovery, "apply")["tables"].items()} == {
        name: "applied" for name in PURGE_TABLES
    }
    assert_lake_equals_mysql()

    # The pipeline is whole again: the sensor finds nothing purged past its frontier.
    again = check_headroom("srvpurge", server.cdc, metadata_store(None), 0)
    assert again.status is HeadroomStatus.OK and again.lost_gtids == GtidSet(), again.message
