"""The purge headroom sensor and trigger against a real MySQL (real binlog files) and real Airflow."""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.headroom import HeadroomStatus, assess_headroom
from airflow_provider_mysql_cdc.errors import MissingReplicationPrivilegeError
from airflow_provider_mysql_cdc.mysql.binlog_files import check_headroom, read_binlog_state
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

PIPELINE = "headroom"
META_CONN_ID = "headroom_meta"
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@dataclass(frozen=True)
class Layout:
    """Four binlog files; the pipeline's frontier needs the third one."""

    files: list[str]
    frontier: GtidSet
    store: FrontierStore
    started_at: float


def _binlog_names(server: MySqlTestServer) -> list[str]:
    return [str(row[0]) for row in server.execute("SHOW BINARY LOGS")]


def _previous_gtids(server: MySqlTestServer, name: str) -> GtidSet:
    rows = server.execute(f"SHOW BINLOG EVENTS IN '{name}' LIMIT 3")
    return GtidSet.parse(next(str(row[5]) for row in rows if row[2] == "Previous_gtids"))


@pytest.fixture
def expire_seconds(scratch_mysql: MySqlTestServer) -> Iterator[None]:
    """Restores the server's binlog_expire_logs_seconds after the test."""
    original = scratch_mysql.execute("SELECT @@GLOBAL.binlog_expire_logs_seconds")[0][0]
    yield
    scratch_mysql.execute(f"SET GLOBAL binlog_expire_logs_seconds = {int(original)}")


@pytest.fixture
def layout(scratch_mysql: MySqlTestServer, tmp_path: Path, expire_seconds: None) -> Layout:
    """Fresh binlogs: 000001 (schema + 1 row), 000002 (2 rows), 000003 (2 rows), 000004 (active, 1 row);
    a pipeline registered with the frontier that ends where 000003 starts; expiry one hour."""
    started_at = time.time()
    scratch_mysql.execute(
        "RESET BINARY LOGS AND GTIDS",
        "DROP DATABASE IF EXISTS headroom",
        "CREATE DATABASE headroom",
        "CREATE TABLE headroom.t (id INT PRIMARY KEY)",
        "INSERT INTO headroom.t VALUES (1)",
        "FLUSH BINARY LOGS",
        "INSERT INTO headroom.t VALUES (2)",
        "INSERT INTO headroom.t VALUES (3)",
        "FLUSH BINARY LOGS",
        "INSERT INTO headroom.t VALUES (4)",
        "INSERT INTO headroom.t VALUES (5)",
        "FLUSH BINARY LOGS",
        "INSERT INTO headroom.t VALUES (6)",
        "SET GLOBAL binlog_expire_logs_seconds = 3600",
    )
    files = _binlog_names(scratch_mysql)
    assert len(files) == 4, files
    frontier = _previous_gtids(scratch_mysql, files[2])
    store = FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
    store.register_pipeline(PIPELINE, frontier)
    return Layout(files, frontier, store, started_at)


@pytest.fixture
def airflow_env(
    airflow_home: Path, scratch_mysql: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MySQL and metadata connections as environment variables."""
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", scratch_mysql.airflow_conn_json())
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{META_CONN_ID.upper()}", json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "meta.db")})
    )


def _purge_past_the_frontier(server: MySqlTestServer, layout: Layout) -> GtidSet:
    """Purge 000001..000003 (the pipeline needs 000003); return the GTIDs the pipeline lost."""
    server.execute(f"PURGE BINARY LOGS TO '{layout.files[3]}'")
    purged = GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_purged")[0][0]))
    lost = purged - layout.frontier
    assert lost
    return lost


# -- reading the server ------------------------------------------------------------------------


def test_binlog_state_reads_every_files_header(scratch_mysql: MySqlTestServer, layout: Layout) -> None:
    state = read_binlog_state(scratch_mysql.cdc)
    assert [f.name for f in state.files] == layout.files
    for header in state.files:
        assert header.previous_gtids == _previous_gtids(scratch_mysql, header.name)
        # Format_description timestamps have whole seconds; the files were made by the fixture.
        assert layout.started_at - 1 <= header.created_at_us / 1e6 <= time.time() + 1
    assert [f.created_at_us for f in state.files] == sorted(f.created_at_us for f in state.files)
    sizes = {str(row[0]): int(row[1]) for row in scratch_mysql.execute("SHOW BINARY LOGS")}
    assert {f.name: f.size for f in state.files} == sizes
    assert state.gtid_executed == GtidSet.parse(str(scratch_mysql.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))
    assert state.gtid_purged == GtidSet()
    assert (state.expire_seconds, state.auto_purge) == (3600, True)
    assert abs(state.now_us / 1e6 - time.time()) < 5


def test_missing_replication_privileges_name_the_grant(scratch_mysql: MySqlTestServer, layout: Layout) -> None:
    scratch_mysql.execute(
        "DROP USER IF EXISTS 'hr_client'@'%'",
        "CREATE USER 'hr_client'@'%' IDENTIFIED BY 'hr-secret-pw'",
        "GRANT REPLICATION CLIENT ON *.* TO 'hr_client'@'%'",
    )
    with pytest.raises(MissingReplicationPrivilegeError) as raised:
        read_binlog_state(scratch_mysql.account("hr_client", "hr-secret-pw"))
    assert "GRANT REPLICATION SLAVE ON *.* TO 'hr_client'@'%';" in str(raised.value)
    assert "hr-secret-pw" not in str(raised.value)
    scratch_mysql.execute("REVOKE REPLICATION CLIENT ON *.* FROM 'hr_client'@'%'")
    with pytest.raises(
        MissingReplicationPrivilegeError, match=r"GRANT REPLICATION CLIENT ON \*\.\* TO 'hr_client'@'%';"
    ):
        read_binlog_state(scratch_mysql.account("hr_client", "hr-secret-pw"))


def test_check_finds_the_needed_file_and_its_forecast(scratch_mysql: MySqlTestServer, layout: Layout) -> None:
    report = check_headroom(PIPELINE, scratch_mysql.cdc, layout.store, 1800)
    assert report.status is HeadroomStatus.OK
    assert report.oldest_needed_file == layout.files[2]
    assert (report.headroom_files, report.backlog_files) == (2, 2)
    state = read_binlog_state(scratch_mysql.cdc)
    assert report.purge_forecast_us == state.files[3].created_at_us + 3600 * 1_000_000
    assert report.headroom_seconds is not None
    assert 3600 - 60 < report.headroom_seconds <= 3600
    assert report.lag_seconds is None  # behind gtid_executed and no window recorded a commit time yet

    assert check_headroom(PIPELINE, scratch_mysql.cdc, layout.store, 7200).status is HeadroomStatus.BELOW_MINIMUM
    scratch_mysql.execute("SET GLOBAL binlog_expire_logs_seconds = 0")
    assert check_headroom(PIPELINE, scratch_mysql.cdc, layout.store, 7200).headroom_seconds is None
    unknown = check_headroom("never_registered", scratch_mysql.cdc, layout.store, 7200)
    assert (unknown.status, unknown.oldest_needed_file) == (HeadroomStatus.OK, None)


def test_check_after_a_purge_past_the_frontier_names_the_lost_gtids(
    scratch_mysql: MySqlTestServer, layout: Layout
) -> None:
    lost = _purge_past_the_frontier(scratch_mysql, layout)
    report = check_headroom(PIPELINE, scratch_mysql.cdc, layout.store, 0)
    assert report.status is HeadroomStatus.PURGED
    assert report.lost_gtids == lost
    assert str(lost) in report.message


# -- the sensor in Airflow ---------------------------------------------------------------------


@pytest.fixture
def run_sensor(airflow_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``run_sensor(dag_id, **sensor_kwargs)`` runs a one-task DAG with the sensor through
    ``dag.test()`` and returns its task instance.

    ``dag.test()`` only runs DAGs it finds in a DAG bundle, so the DAG is written to a file of an
    extra bundle next to the repository's ``dags`` folder.
    """
    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    folder = tmp_path / "dags"
    folder.mkdir()
    bundles = [
        {"name": "dags-folder", "classpath": local, "kwargs": {}},
        {"name": "headroom-tests", "classpath": local, "kwargs": {"path": str(folder)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))

    def run(dag_id: str, **sensor_kwargs: Any) -> Any:
        from airflow.dag_processing.dagbag import DagBag

        kwargs = {"pipeline": PIPELINE, "metadata_conn_id": META_CONN_ID, **sensor_kwargs}
        (folder / f"{dag_id}.py").write_text(
            "import datetime\n"
            "from airflow.sdk import DAG\n"
            "from airflow_provider_mysql_cdc.sensors.purge_headroom import MySqlBinlogPurgeHeadroomSensor\n"
            f"with DAG({dag_id!r}, schedule=None):\n"
            f"    MySqlBinlogPurgeHeadroomSensor(task_id='headroom', **{kwargs!r})\n"
        )
        bag = DagBag(dag_folder=str(folder))
        assert bag.import_errors == {}
        dag = bag.get_dag(dag_id)
        assert dag is not None
        (ti,) = dag.test().get_task_instances()
        return ti

    return run


def _xcom(ti: Any, key: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=ti.run_id, dag_ids=ti.dag_id, task_ids=ti.task_id, key=key))
        values = [XComModel.deserialize_value(row) for row in rows]
    return values[0] if values else None


@pytest.mark.airflow
@pytest.mark.parametrize("deferrable", [False, True])
def test_sensor_succeeds_with_enough_headroom_and_returns_the_report(
    scratch_mysql: MySqlTestServer, layout: Layout, run_sensor: Callable[..., Any], deferrable: bool
) -> None:
    ti = run_sensor(f"headroom_ok_{deferrable}", min_headroom_seconds="{{ 30 * 60 }}", deferrable=deferrable)
    assert ti.state == "success"
    report = _xcom(ti, "return_value")
    assert report["status"] == "ok"
    assert report["oldest_needed_file"] == layout.files[2]
    assert report["min_headroom_seconds"] == 1800
    assert scratch_mysql.cdc.password not in json.dumps(report)


@pytest.mark.airflow
@pytest.mark.parametrize(("soft_fail", "state"), [(False, "failed"), (True, "skipped")])
def test_sensor_below_the_minimum_fails_or_skips_at_once_with_timeout_0(
    scratch_mysql: MySqlTestServer, layout: Layout, run_sensor: Callable[..., Any], soft_fail: bool, state: str
) -> None:
    ti = run_sensor(f"headroom_below_{soft_fail}", min_headroom_seconds=7200, soft_fail=soft_fail, retries=2, timeout=0)
    assert ti.state == state
    assert ti.try_number == 1
    report = _xcom(ti, "headroom")
    assert report["status"] == "below_minimum"
    assert report["oldest_needed_file"] == layout.files[2]
    assert "SET PERSIST binlog_expire_logs_seconds" in report["message"]
    assert _xcom(ti, "return_value") is None


@pytest.mark.airflow
@pytest.mark.parametrize(
    ("deferrable", "soft_fail", "state"),
    [(False, False, "failed"), (False, True, "skipped"), (True, False, "failed"), (True, True, "skipped")],
)
def test_sensor_waits_until_its_timeout_for_headroom_to_recover(
    scratch_mysql: MySqlTestServer,
    layout: Layout,
    run_sensor: Callable[..., Any],
    deferrable: bool,
    soft_fail: bool,
    state: str,
) -> None:
    started = time.monotonic()
    ti = run_sensor(
        f"headroom_wait_{deferrable}_{soft_fail}",
        min_headroom_seconds=7200,
        timeout=3,
        poke_interval=1,
        deferrable=deferrable,
        soft_fail=soft_fail,
    )
    # It waited out its 3 s timeout, and the deferred wait ended at that deadline, not at the sensor's
    # default wait of 5 minutes (a bound far from both, so a busy machine does not decide the result).
    assert 3 <= time.monotonic() - started < 150
    assert ti.state == state
    assert _xcom(ti, "headroom")["status"] == "below_minimum"


@pytest.mark.airflow
@pytest.mark.parametrize("deferrable", [False, True])
def test_sensor_succeeds_when_the_retention_is_raised_within_its_timeout(
    scratch_mysql: MySqlTestServer, layout: Layout, run_sensor: Callable[..., Any], deferrable: bool
) -> None:
    """Below the minimum at the first check; the retention is raised while the sensor waits."""
    raise_retention = threading.Timer(2, scratch_mysql.execute, ["SET GLOBAL binlog_expire_logs_seconds = 86400"])
    started = time.monotonic()
    raise_retention.start()
    try:
        ti = run_sensor(
            f"headroom_recovers_{deferrable}",
            min_headroom_seconds=7200,
            timeout=60,
            poke_interval=1,
            deferrable=deferrable,
            soft_fail=True,
        )
    finally:
        raise_retention.join()
    assert ti.state == "success"
    assert 2 <= time.monotonic() - started < 60
    report = _xcom(ti, "return_value")
    assert report["status"] == "ok" and report["headroom_seconds"] > 7200
    assert _xcom(ti, "headroom") is None


@pytest.fixture
def default_deferrable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``[operators] default_deferrable = True`` while the sensor's module is imported again (its
    ``deferrable`` default is read at import, as in Airflow's providers); imported again without it after."""
    from airflow_provider_mysql_cdc.sensors import purge_headroom

    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    importlib.reload(purge_headroom)
    yield
    monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE")
    importlib.reload(purge_headroom)


@pytest.mark.airflow
def test_sensor_defers_when_airflow_defaults_to_deferrable(
    scratch_mysql: MySqlTestServer, layout: Layout, run_sensor: Callable[..., Any], default_deferrable: None
) -> None:
    """No ``deferrable`` argument: the config decides; the wait runs in the trigger until the timeout."""
    from airflow_provider_mysql_cdc.triggers import purge_headroom as trigger_module

    checks: list[str] = []
    check = trigger_module.check_pipeline_headroom

    def counted(*args: Any) -> Any:
        checks.append("trigger")
        return check(*args)

    started = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:  # counts the trigger's checks; each one is real
        patch.setattr(trigger_module, "check_pipeline_headroom", counted)
        ti = run_sensor("headroom_default_deferrable", min_headroom_seconds=7200, timeout=3, poke_interval=1)
    assert 3 <= time.monotonic() - started < 150  # its 3 s timeout, not the default wait of 5 minutes
    assert ti.state == "failed"
    assert len(checks) >= 2  # the trigger checked again until the deadline
    assert _xcom(ti, "headroom")["status"] == "below_minimum"


@pytest.mark.airflow
@pytest.mark.parametrize("deferrable", [False, True])
def test_sensor_fails_hard_when_the_binlog_is_purged_even_with_soft_fail_and_retries(
    scratch_mysql: MySqlTestServer, layout: Layout, run_sensor: Callable[..., Any], deferrable: bool
) -> None:
    lost = _purge_past_the_frontier(scratch_mysql, layout)
    started = time.monotonic()
    ti = run_sensor(
        f"headroom_purged_{deferrable}",
        soft_fail=True,
        retries=3,
        retry_delay=timedelta(seconds=1),
        timeout=60,
        deferrable=deferrable,
    )
    assert ti.state == "failed"
    assert ti.try_number == 1
    assert time.monotonic() - started < 60  # no waiting for the 60 s timeout, no retry
    report = _xcom(ti, "headroom")
    assert report["status"] == "purged"
    assert report["lost_gtids"] == str(lost)
    assert "resnapshot" in report["message"]


@pytest.mark.airflow
@pytest.mark.parametrize("deferrable", [False, True])
def test_a_purge_while_the_sensor_waits_fails_it_hard_under_soft_fail(
    scratch_mysql: MySqlTestServer, layout: Layout, run_sensor: Callable[..., Any], deferrable: bool
) -> None:
    """Below the minimum at the first check; the needed binlog is purged during the wait (deferred: the
    trigger's event goes through Airflow's BaseSensorOperator.resume_execution)."""
    purge = threading.Timer(2, scratch_mysql.execute, [f"PURGE BINARY LOGS TO '{layout.files[3]}'"])
    started = time.monotonic()
    purge.start()
    try:
        ti = run_sensor(
            f"headroom_purged_while_waiting_{deferrable}",
            min_headroom_seconds=7200,
            timeout=60,
            poke_interval=1,
            deferrable=deferrable,
            soft_fail=True,
            retries=2,
        )
    finally:
        purge.join()
    assert ti.state == "failed"
    assert ti.try_number == 1
    assert 2 <= time.monotonic() - started < 60
    report = _xcom(ti, "headroom")
    assert report["status"] == "purged"
    assert report["lost_gtids"]


@pytest.mark.airflow
def test_a_purged_event_from_the_trigger_fails_hard_under_soft_fail() -> None:
    """The deferred path through Airflow's own BaseSensorOperator.resume_execution (the sensor does not
    override it): under soft_fail it would turn any failure into a generic skip, were soft_fail its."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from airflow_provider_mysql_cdc.sensors.purge_headroom import MySqlBinlogPurgeHeadroomSensor

    class _TaskInstance:
        def __init__(self) -> None:
            self.pushed: dict[str, Any] = {}

        def xcom_push(self, key: str, value: Any) -> None:
            self.pushed[key] = value

    sensor = MySqlBinlogPurgeHeadroomSensor(task_id="headroom", pipeline=PIPELINE, soft_fail=True)
    ti = _TaskInstance()
    context: Any = {"ti": ti}
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    purged = assess_headroom(
        (), GtidSet(), GtidSet.parse(f"{uuid}:1-5"), GtidSet.parse(f"{uuid}:1-9"), 3600, True, 0, None, 0
    )
    report = purged.as_xcom()
    event = {"status": "purged", "report": report, "message": purged.message}
    with pytest.raises(AirflowFailException, match="re-snapshot"):
        sensor.resume_execution("execute_complete", {"event": event}, context)
    assert ti.pushed["headroom"] == report
    below = {**event, "status": "below_minimum", "report": {**report, "status": "below_minimum"}}
    with pytest.raises(AirflowSkipException, match="re-snapshot"):
        sensor.resume_execution("execute_complete", {"event": below}, context)


# -- the trigger -------------------------------------------------------------------------------


def _trigger(**overrides: Any) -> Any:
    from airflow_provider_mysql_cdc.triggers.purge_headroom import MySqlBinlogPurgeHeadroomTrigger

    kwargs: dict[str, Any] = {
        "pipeline": PIPELINE,
        "mysql_cdc_conn_id": "mysql_cdc_default",
        "metadata_conn_id": META_CONN_ID,
        "min_headroom_seconds": 1800,
        "poke_interval": 0.5,
        "deadline": time.time() + 30,
        **overrides,
    }
    return MySqlBinlogPurgeHeadroomTrigger(**kwargs)


def _first_event(trigger: Any) -> dict[str, Any]:
    async def first() -> Any:
        return await anext(trigger.run())

    payload: dict[str, Any] = asyncio.run(first()).payload
    return payload


def test_trigger_serializes_to_json_safe_secret_free_kwargs(scratch_mysql: MySqlTestServer) -> None:
    trigger = _trigger()
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_mysql_cdc.triggers.purge_headroom.MySqlBinlogPurgeHeadroomTrigger"
    text = json.dumps(kwargs)
    assert scratch_mysql.cdc.password not in text
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**json.loads(text))
    assert rebuilt.serialize() == (classpath, kwargs)


@pytest.mark.airflow
def test_trigger_fires_ok_below_minimum_at_its_deadline_and_purged(
    scratch_mysql: MySqlTestServer, layout: Layout, airflow_env: None
) -> None:
    ok = _first_event(_trigger())
    assert ok["status"] == "ok"
    assert ok["report"]["oldest_needed_file"] == layout.files[2]

    started = time.monotonic()
    below = _first_event(_trigger(min_headroom_seconds=7200, deadline=time.time() + 1.5))
    assert below["status"] == "below_minimum"
    assert time.monotonic() - started >= 1.4
    assert "SET PERSIST binlog_expire_logs_seconds" in below["message"]

    lost = _purge_past_the_frontier(scratch_mysql, layout)
    purged = _first_event(_trigger(min_headroom_seconds=7200))
    assert purged["status"] == "purged"
    assert purged["report"]["lost_gtids"] == str(lost)


@pytest.mark.airflow
def test_trigger_keeps_polling_until_headroom_recovers(
    scratch_mysql: MySqlTestServer, layout: Layout, airflow_env: None
) -> None:
    """Below the minimum at first; the retention is raised meanwhile; a later check succeeds."""
    raise_retention = threading.Timer(1.5, scratch_mysql.execute, ["SET GLOBAL binlog_expire_logs_seconds = 86400"])
    started = time.monotonic()
    raise_retention.start()
    try:
        event = _first_event(_trigger(min_headroom_seconds=7200))
    finally:
        raise_retention.join()
    assert event["status"] == "ok"
    assert time.monotonic() - started >= 1.4
    assert event["report"]["headroom_seconds"] > 7200


@pytest.mark.airflow
def test_trigger_reports_a_failed_check_as_an_error_event(airflow_env: None) -> None:
    event = _first_event(_trigger(mysql_cdc_conn_id="no_such_connection"))
    assert event["status"] == "error"
    assert event["report"] is None
    assert "no_such_connection" in event["message"]
