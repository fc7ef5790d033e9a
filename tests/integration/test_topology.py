"""Which server, which history: the topology guards against real servers started by the test suite.

A source and a replica with GTID auto-position replication (``tests/reliability/replica.py``), and a
third server restored from a dump. The pipeline runs at engine level (``tests/exactness/harness.py``:
snapshot, capture with ``cutoff=catch_up``, Spark apply into the Iceberg catalog ``lake``, then every
table compared value by value with the server it reads). In each case the run either continues
exactly, or stops with its named error before anything is staged: the Iceberg tables (their current
metadata file), the pipeline's frontier, its windows, its staging and its recorded server
observations are then exactly as they were.

* a replica stopped behind the frontier: ``ServerChangedError`` naming the missing GTIDs, from capture,
  from a snapshot, and (through the example DAG) from the purge-headroom sensor as ``history_mismatch``;
* the same replica after its ``server_uuid`` changed (``auto.cnf`` removed, restart), still behind:
  ``ServerChangedError``;
* that replica caught up and promoted, the source stopped, writes on it: exact;
* the promoted server's ``server_uuid`` changed again, holding the frontier: exact;
* a server restored from a dump of an older state (another ``server_uuid``, none of the frontier):
  ``ServerChangedError``;
* ``RESET BINARY LOGS AND GTIDS`` on the source, then a few writes, then more writes than it had
  before: ``ServerHistoryResetError`` both times.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.headroom import HeadroomStatus
from airflow_provider_mysql_cdc.errors import (
    FrontierNotOnServerError,
    ServerChangedError,
    ServerHistoryError,
    ServerHistoryResetError,
)
from airflow_provider_mysql_cdc.mysql.binlog_files import check_headroom
from tests.conftest import INSTANCE_PREFIX
from tests.exactness.harness import ExactnessPipeline
from tests.exactness.iceberg_reader import current_metadata_file
from tests.mysql_servers import MySqlTestServer, running_local
from tests.reliability.replica import Replica, running_replica

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

SCHEMA = (
    "CREATE TABLE {db}.accounts (id INT PRIMARY KEY, owner VARCHAR(30) NOT NULL, balance INT NOT NULL)",
    "CREATE TABLE {db}.events (id BIGINT AUTO_INCREMENT PRIMARY KEY, account INT NOT NULL, kind VARCHAR(10))",
)


def executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0] or ""))


def server_uuid(server: MySqlTestServer) -> str:
    return str(server.execute("SELECT @@GLOBAL.server_uuid")[0][0]).lower()


def create(server: MySqlTestServer, database: str, rows: int = 20) -> None:
    server.execute(
        f"CREATE DATABASE {database}",
        *(statement.format(db=database) for statement in SCHEMA),
        f"INSERT INTO {database}.accounts VALUES "
        + ", ".join(f"({i}, 'owner{i}', {i * 10})" for i in range(1, rows + 1)),
    )


@dataclass
class Writer:
    """Transactions on ``database``, each one changing rows (a statement that changes nothing writes no
    GTID): an insert, an update, a multi-statement transaction and a delete of an inserted row in turn;
    keys from one counter, so the workload continues on another server."""

    database: str
    next_id: int = 1_000
    step: int = 0
    inserted: list[int] = field(default_factory=list)

    def write(self, server: MySqlTestServer, transactions: int) -> None:
        db = self.database
        statements: list[str] = []
        for _ in range(transactions):
            self.step += 1
            kind, some = self.step % 4, self.step % 20 + 1
            if kind == 1:
                self.next_id += 1
                self.inserted.append(self.next_id)
                statements.append(f"INSERT INTO {db}.accounts VALUES ({self.next_id}, 'owner{self.next_id}', 5)")
            elif kind == 2:
                statements.append(f"UPDATE {db}.accounts SET balance = balance + 1 WHERE id = {some}")
            elif kind == 3:
                statements += [
                    "BEGIN",
                    f"INSERT INTO {db}.events (account, kind) VALUES ({some}, 'debit')",
                    f"UPDATE {db}.accounts SET owner = 'step{self.step}' WHERE id = {some}",
                    "COMMIT",
                ]
            else:
                statements.append(f"DELETE FROM {db}.accounts WHERE id = {self.inserted.pop(0)}")
        server.execute(*statements)


@dataclass(frozen=True)
class PipelineTrace:
    """Everything a stopped run must leave as it was."""

    iceberg: dict[str, str | None]
    frontier: GtidSet
    windows: list[tuple[int, str | None]]
    staging: list[str]
    observations: int
    snapshots: int


def trace(pipeline: ExactnessPipeline) -> PipelineTrace:
    store, name = pipeline.engine.store, pipeline.name
    record = store.get_pipeline(name)
    assert record is not None
    iceberg = {}
    for database in pipeline.databases:
        for table in ("accounts", "events"):
            found = current_metadata_file(pipeline.warehouse / database / table)
            iceberg[f"{database}.{table}"] = None if found is None else str(found)
    staging_root = pipeline.engine.staging / name
    return PipelineTrace(
        iceberg=iceberg,
        frontier=record.capture_frontier,
        windows=[(w.window_id, None if w.upper is None else str(w.upper)) for w in store.list_windows(name)],
        staging=sorted(str(path.relative_to(staging_root)) for path in staging_root.rglob("*")),
        observations=len(store.server_observations(name)),
        snapshots=len(store.list_snapshots(name)),
    )


def switch(pipeline: ExactnessPipeline, server: MySqlTestServer) -> None:
    """Point the pipeline's connection (and the comparison) at another server."""
    pipeline.server = server
    pipeline.engine.server = server
    pipeline.oracle = server


def stops(pipeline: ExactnessPipeline, expected: type[ServerHistoryError], run_id: str) -> ServerHistoryError:
    """Capture, and a re-snapshot of one table, both stop with ``expected`` and change nothing."""
    before = trace(pipeline)
    with pytest.raises(expected) as capture:
        pipeline.engine.capture(run_id)
    assert type(capture.value) is expected
    with pytest.raises(expected) as snapshot:
        pipeline.engine.snapshot(f"{run_id}-resnapshot", resnapshot=(f"{pipeline.databases[0]}.accounts",))
    assert type(snapshot.value) is expected
    assert trace(pipeline) == before
    message = str(capture.value)
    assert f"pipeline {pipeline.name!r} window {len(before.windows) + 1} (run {run_id!r})" in message
    address = f"{pipeline.server.cdc.host}:{pipeline.server.cdc.port}"
    assert address in message and pipeline.server.cdc.password not in message
    assert "nothing was staged or recorded and the frontier is unchanged" in message
    return capture.value


@pytest.fixture
def source() -> Iterator[MySqlTestServer]:
    with running_local(f"{INSTANCE_PREFIX}-topology-source") as server:
        yield server


@pytest.fixture
def replica(source: MySqlTestServer) -> Iterator[Replica]:
    with running_replica(source, f"{INSTANCE_PREFIX}-topology-replica") as running:
        yield running


def change_server_uuid(server: MySqlTestServer) -> str:
    """Stop the server, remove ``auto.cnf`` and start it again: it makes itself a new ``server_uuid``."""
    assert server.local is not None
    before = server_uuid(server)
    server.local.stop()
    (server.local.datadir / "auto.cnf").unlink()
    server.local.start()
    after = server_uuid(server)
    assert after != before
    return after


def run_the_dag(
    server: MySqlTestServer, pipeline: ExactnessPipeline, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, dict[tuple[str, int], str | None], Any]:
    """One run of the example DAG for the pipeline with its connection on ``server``: the run, its task
    states and the purge-headroom report the sensor pushed before failing (None when it did not)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from airflow_provider_mysql_cdc.core.headroom import HEADROOM_XCOM_KEY
    from tests.integration.test_airflow_dag import _forget_earlier_runs, _run_example, _states

    _forget_earlier_runs()
    try:
        run = _run_example(
            monkeypatch,
            server.airflow_conn_json(),
            [f"{pipeline.databases[0]}.*"],
            pipeline=pipeline.name,
            staging_uri=str(pipeline.engine.staging),
            warehouse=str(pipeline.warehouse),
            cutoff="catch_up",
        )
        with create_session() as session:
            rows = list(
                session.scalars(XComModel.get_many(run_id=run.run_id, task_ids="purge_headroom", key=HEADROOM_XCOM_KEY))
            )
            report = XComModel.deserialize_value(rows[0]) if rows else None
        return run, _states(run), report
    finally:
        _forget_earlier_runs()  # the next test starts the example DAG without this failed run


def assert_headroom_mismatch(
    pipeline: ExactnessPipeline, server: MySqlTestServer, lacking: GtidSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The purge-headroom check on ``server`` reports ``history_mismatch``; a run of the example DAG fails
    at its sensor, before snapshot and capture, and changes nothing."""
    headroom = check_headroom(pipeline.name, server.cdc, pipeline.engine.store, 0)
    assert headroom.status is HeadroomStatus.HISTORY_MISMATCH
    assert headroom.lag_seconds is None and headroom.missing_gtids == lacking
    assert headroom.message.startswith("ServerChangedError: ")
    before = trace(pipeline)
    run, states, report = run_the_dag(server, pipeline, monkeypatch)
    assert run.state == "failed", states
    assert states[("preflight", -1)] == "success"
    assert states[("purge_headroom", -1)] == "failed"
    assert states[("capture", -1)] == "upstream_failed" and states[("apply", -1)] == "upstream_failed"
    assert report is not None and report["status"] == "history_mismatch" and report["lag_seconds"] is None
    assert report["missing_gtids"] == str(lacking)
    assert trace(pipeline) == before


def test_lagging_replica_stops_a_promoted_caught_up_replica_continues_exactly(
    airflow_home: Path,
    source: MySqlTestServer,
    replica: Replica,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from airflow_provider_mysql_cdc.hooks.metadata import metadata_store

    database = "topo_a"
    server_uuid_of_source = server_uuid(source)
    create(source, database)
    replica.catch_up()  # replicating from now on
    pipeline = ExactnessPipeline(source, spark, tmp_path, database, [database])
    pipeline.engine.store = metadata_store(None)  # where the example DAG keeps it, so the DAG run continues it
    writer = Writer(database)
    pipeline.start()
    writer.write(source, 4)
    replica.catch_up()
    replica.server.execute("STOP REPLICA")  # the replica lags from here
    writer.write(source, 3)
    pipeline.window()
    frontier = trace(pipeline).frontier
    lacking = frontier - replica.executed()
    assert len(lacking) == 3 and lacking <= executed(source)

    # A stopped replica lacking three frontier transactions: capture and snapshot stop, naming them.
    switch(pipeline, replica.server)
    error = stops(pipeline, ServerChangedError, "lagging-1")
    assert isinstance(error, FrontierNotOnServerError)
    assert error.missing_gtids == str(lacking)
    message = str(error)
    assert f"lacks 3 transaction(s) the pipeline already holds: {lacking}" in message
    assert f"(server_uuid {server_uuid(source)})" in message and f"(server_uuid {replica.server_uuid})" in message
    for choice in ("wait until it has applied them", "point the connection at a server", "re-snapshot"):
        assert choice in message

    # The purge-headroom check reports the same guard, not "lag 0.0 s", and through the example DAG
    # it fails the run before snapshot and capture.
    assert_headroom_mismatch(pipeline, replica.server, lacking, monkeypatch)

    # Its server_uuid changes (auto.cnf removed, restart) while it still lags: still no continuation.
    renamed = change_server_uuid(replica.server)
    error = stops(pipeline, ServerChangedError, "renamed-1")
    assert f"(server_uuid {renamed})" in str(error) and error.missing_gtids == str(lacking)

    # Caught up and promoted, the source stopped: the windows continue on it with no gap, no duplicate.
    replica.catch_up()
    replica.promote()
    assert source.local is not None and source.local.stop() is True
    promoted = replica.server
    writer.write(promoted, 5)
    record = pipeline.window()
    assert GtidSet.parse(record.capture["lower"]) == frontier
    new_part = GtidSet.parse(record.capture["upper"]) - frontier
    assert {uuid for uuid, _ in new_part.sources} == {renamed}
    assert check_headroom(database, promoted.cdc, pipeline.engine.store, 0).status is HeadroomStatus.OK

    # Its server_uuid changes again, now holding the frontier: it continues.
    again = change_server_uuid(promoted)
    writer.write(promoted, 4)
    record = pipeline.window()
    new_part = GtidSet.parse(record.capture["upper"]) - GtidSet.parse(record.capture["lower"])
    assert {uuid for uuid, _ in new_part.sources} == {again}
    windows_read = [
        recorded.observation.server_uuid
        for recorded in pipeline.engine.store.server_observations(database)
        if recorded.unit.startswith("window")
    ]
    assert windows_read == [server_uuid_of_source, server_uuid_of_source, renamed, again]


def test_a_restored_dump_and_a_reset_history_stop_the_pipeline(
    source: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    database = "topo_b"
    create(source, database)
    dump = [
        str(source.execute(f"SHOW CREATE TABLE {database}.{table}")[0][1]).replace(
            "CREATE TABLE `", f"CREATE TABLE `{database}`.`", 1
        )
        for table in ("accounts", "events")
    ]
    rows = source.execute(f"SELECT id, owner, balance FROM {database}.accounts")
    dump.append(f"INSERT INTO {database}.accounts VALUES " + ", ".join(f"({i}, '{o}', {b})" for i, o, b in rows))
    pipeline = ExactnessPipeline(source, spark, tmp_path, database, [database])
    writer = Writer(database)
    pipeline.start()
    writer.write(source, 6)
    pipeline.window()
    frontier = trace(pipeline).frontier

    # A server restored from a dump of the older state: its own GTIDs, none of the frontier.
    with running_local(f"{INSTANCE_PREFIX}-topology-restored") as restored:
        restored.execute(f"CREATE DATABASE {database}", *dump)
        assert not executed(restored) & frontier
        switch(pipeline, restored)
        error = stops(pipeline, ServerChangedError, "restored-1")
        assert error.missing_gtids == str(frontier)
    switch(pipeline, source)

    # RESET BINARY LOGS AND GTIDS on the source, then three writes: their GTIDs are inside the frontier.
    source_uuid = server_uuid(source)
    own_before = len(frontier.intersection(GtidSet.parse(f"{source_uuid}:1-{2**62}")))
    source.execute("RESET BINARY LOGS AND GTIDS")
    writer.write(source, 3)
    assert executed(source) <= frontier  # containment alone would see nothing wrong
    error = stops(pipeline, ServerHistoryResetError, "reset-1")
    assert "gtid_executed went backwards" in str(error)

    # More writes than the server had before the reset: found by its binlog files.
    writer.write(source, own_before + 2)
    assert frontier <= executed(source)
    error = stops(pipeline, ServerHistoryResetError, "reset-2")
    assert "gtid_executed went backwards" not in str(error) and "binlog" in str(error)
