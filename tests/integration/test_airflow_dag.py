"""Real Airflow on SQLite: the provider is discovered, the example DAG loads and runs with dag.test()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.airflow

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_airflow_lists_the_provider(airflow_home: Path) -> None:
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow), "providers", "list", "--output", "json"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "airflow-provider-mysql-cdc" in result.stdout


def test_example_dags_import_without_errors(airflow_home: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    assert bag.import_errors == {}
    assert {"mysql_cdc_example", "mysql_cdc_orders_report", "mysql_cdc_maintained_example"} <= set(bag.dag_ids)


def _run_example(
    monkeypatch: pytest.MonkeyPatch, conn_json: str, tables: list[str], logical_date: Any = None, **conf: Any
) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    from tests.spark_session import iceberg_jars

    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", conn_json)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("MYSQL_CDC_ICEBERG_JARS", ",".join(str(jar) for jar in iceberg_jars()))
    dag = DagBag(dag_folder=str(REPO_ROOT / "dags")).get_dag("mysql_cdc_example")
    assert dag is not None
    if logical_date is None:
        return dag.test(run_conf={"tables": tables, **conf})
    return dag.test(logical_date=logical_date, run_conf={"tables": tables, **conf})


def _forget_earlier_runs() -> None:
    """Delete the example DAG's runs of earlier tests, so that a test's runs follow only its own (capture
    and apply look at the previous run by logical date)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    with create_session() as session:  # task instances and XComs go with their runs (ON DELETE CASCADE)
        session.execute(delete(DagRun).where(DagRun.dag_id == "mysql_cdc_example"))


def _xcom(run: Any, task_id: str) -> Any:
    """The return value a task pushed, read back from Airflow's metadata database."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, task_ids=task_id, key="return_value")).one()
        return XComModel.deserialize_value(row)


def _mapped_xcoms(run: Any, task_id: str) -> dict[int, Any]:
    """The return values of a mapped task's instances, by map index."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(XComModel).where(
        XComModel.run_id == run.run_id, XComModel.task_id == task_id, XComModel.key == "return_value"
    )
    with create_session() as session:
        return {row.map_index: XComModel.deserialize_value(row) for row in session.scalars(query)}


def _states(run: Any) -> dict[tuple[str, int], str | None]:
    """Each task instance's state, by task id and map index (-1: not mapped, or mapped over nothing)."""
    return {(ti.task_id, ti.map_index): ti.state for ti in run.get_task_instances()}


UNMAPPED_TASKS = ("preflight", "purge_headroom", "snapshot_plan", "capture", "apply", "verify")


@pytest.mark.mysql
@pytest.mark.spark
def test_example_dag_captures_and_applies_consecutive_windows(
    airflow_home: Path,
    mysql_server: MySqlTestServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    spark: Any,
    warm_spark: Path,
) -> None:
    _forget_earlier_runs()
    mysql_server.execute(
        "DROP DATABASE IF EXISTS dagcap",
        "CREATE DATABASE dagcap",
        "CREATE TABLE dagcap.t (id INT PRIMARY KEY, v VARCHAR(10))",
    )
    # The DAG's spark-submit writes the warehouse this process's Spark session reads (catalog lake).
    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    conf = {
        "pipeline": "dagcap",
        "staging_uri": str(tmp_path / "staging"),
        "cutoff": "catch_up",
        "warehouse": warehouse,
    }
    first = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["dagcap.*"], **conf)
    states = _states(first)
    # The empty table is snapshotted once (one chunk, no rows) before the first window.
    assert states == {**{(task, -1): "success" for task in UNMAPPED_TASKS}, ("snapshot", 0): "success"}, states
    assert _mapped_xcoms(first, "snapshot")[0]["rows"] == 0
    assert _xcom(first, "capture")["transactions"] == 0
    # The sampled verify after the apply: the target holds its one-chunk snapshot only, verified from
    # that chunk's GTID set (read from the pipeline's staging).
    (verified,) = _xcom(first, "verify")["tables"]
    assert verified["table"] == "dagcap.t" and verified["problem"] == "" and verified["ranges_differing"] == []

    mysql_server.execute("INSERT INTO dagcap.t VALUES (1, 'a'), (2, 'b')", "DELETE FROM dagcap.t WHERE id = 1")
    second = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["dagcap.*"], **conf)
    assert second.state == "success"
    pushed = _xcom(second, "capture")
    first_pushed = _xcom(first, "capture")
    assert pushed["window_id"] == first_pushed["window_id"] + 1
    assert pushed["lower"] == first_pushed["upper"]
    assert pushed["rows_by_table"] == {"dagcap.t": {"r": 0, "c": 2, "u": 0, "d": 1}}
    assert pushed["manifest_uri"].endswith(f"dagcap/windows/{pushed['window_id']:08d}/_manifest.json")
    assert Path(pushed["manifest_uri"]).is_file()
    assert mysql_server.cdc.password not in json.dumps(pushed)

    # The apply task merged the snapshot and both windows: the Iceberg table equals MySQL.
    applied = _xcom(second, "apply")
    assert applied["first_window"] == applied["last_window"] == pushed["window_id"]
    assert applied["tables"]["dagcap.t"]["status"] == "applied"
    assert applied["tables"]["dagcap.t"]["rows"] == {"c": 2, "d": 1}
    spark.sql("REFRESH TABLE lake.dagcap.t")
    assert [tuple(r) for r in spark.sql("SELECT id, v FROM lake.dagcap.t ORDER BY id").collect()] == [(2, "b")]
    # What the table holds is in its newest Iceberg commit (the one owner of the applied frontier).
    newest = spark.sql("SELECT summary FROM lake.dagcap.t.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    assert newest[0].summary["cdc.upper"] == pushed["upper"]
    assert newest[0].summary["cdc.window-id"] == str(pushed["window_id"])
    report = _xcom(second, "verify")
    assert report["mode"] == "sampled" and report["tables"][0]["target_frontier"] == pushed["upper"]
    assert report["tables"][0]["problem"] == "" and report["tables"][0]["ranges_differing"] == []

    # A run whose window changes no selected table: the apply reads the target's state from its Iceberg
    # metadata and reports it without starting Spark (no job spec is written), as the job would.
    third = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["dagcap.*"], **conf)
    assert third.state == "success"
    assert _xcom(third, "capture")["window_id"] == pushed["window_id"] + 1
    idle = _xcom(third, "apply")
    assert idle["tables"]["dagcap.t"]["status"] == "up_to_date" and idle["tables"]["dagcap.t"]["windows_applied"] == []
    from airflow_provider_mysql_cdc.staging import Staging

    staging = Staging(conf["staging_uri"], "dagcap")
    assert staging.read_text(staging.apply_spec_path(third.run_id, 1)) is None
    assert staging.read_text(staging.apply_report_path(third.run_id, 1)) is not None
    assert staging.read_text(staging.apply_spec_path(second.run_id, 1)) is not None
    assert _xcom(third, "verify")["tables"][0]["problem"] == ""


@pytest.mark.mysql
def test_example_dag_fails_on_a_misconfigured_server(
    airflow_home: Path, misconfigured_mysql: MySqlTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run_example(monkeypatch, misconfigured_mysql.airflow_conn_json(), [])
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed"
    assert states["purge_headroom"] == "upstream_failed"
    assert states["snapshot_plan"] == "upstream_failed"
    assert states["snapshot"] == "upstream_failed"
    assert states["capture"] == "upstream_failed"  # none_failed: an upstream failure still stops capture
    assert states["apply"] == "upstream_failed"
    assert states["verify"] == "upstream_failed"
    assert run.state == "failed"


@pytest.mark.mysql
def test_example_dag_snapshots_existing_rows_in_mapped_chunks_then_only_what_is_asked(
    airflow_home: Path, mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, warm_spark: Path
) -> None:
    _forget_earlier_runs()
    mysql_server.execute(
        "DROP DATABASE IF EXISTS dagsnap",
        "CREATE DATABASE dagsnap",
        "CREATE TABLE dagsnap.big (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE dagsnap.small (code VARCHAR(8) PRIMARY KEY, n INT)",
        "INSERT INTO dagsnap.big VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(1, 26)),
        "INSERT INTO dagsnap.small VALUES ('a', 1), ('b', 2), ('c', 3)",
    )
    conf = {
        "pipeline": "dagsnap",
        "staging_uri": str(tmp_path / "staging"),
        "warehouse": str(tmp_path / "warehouse"),
        "cutoff": "catch_up",
        "chunk_rows": 10,
    }

    # First run of a fresh pipeline: every selected table is snapshotted, one mapped task per chunk.
    first = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["dagsnap.*"], **conf)
    assert first.state == "success"
    states = _states(first)
    chunk_states = {index: state for (task, index), state in states.items() if task == "snapshot"}
    assert len(chunk_states) >= 2 and set(chunk_states.values()) == {"success"}, states
    assert all(states[(task, -1)] == "success" for task in UNMAPPED_TASKS), states
    plan = _xcom(first, "snapshot_plan")
    chunks = _mapped_xcoms(first, "snapshot")
    assert sorted(chunks) == list(range(len(plan))) == sorted(chunk_states)
    assert len({chunk["snapshot_id"] for chunk in chunks.values()}) == 1
    first_snapshot = chunks[0]["snapshot_id"]
    rows = {"dagsnap.big": 0, "dagsnap.small": 0}
    for chunk in chunks.values():
        rows[chunk["table"]] += chunk["rows"]
    assert rows == {"dagsnap.big": 25, "dagsnap.small": 3}
    assert len([chunk for chunk in chunks.values() if chunk["table"] == "dagsnap.big"]) >= 3
    assert all(Path(chunk["manifest_uri"]).is_file() for chunk in chunks.values())
    labels = {ti.map_index: ti.rendered_map_index for ti in first.get_task_instances() if ti.task_id == "snapshot"}
    assert labels == {index: f"{chunk['table']} chunk {chunk['chunk_no']}" for index, chunk in chunks.items()}
    assert _xcom(first, "capture")["rows_by_table"] == {}

    # Nothing left to snapshot: the mapped task expands over nothing (skipped) and capture still runs.
    mysql_server.execute("INSERT INTO dagsnap.big VALUES (100, 'new')")
    second = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["dagsnap.*"], **conf)
    assert second.state == "success"
    states = _states(second)
    assert states[("snapshot", -1)] == "skipped"
    assert [key for key in states if key[0] == "snapshot"] == [("snapshot", -1)]
    assert _xcom(second, "snapshot_plan") == []
    assert _mapped_xcoms(second, "snapshot") == {}
    assert states[("capture", -1)] == "success"
    assert _xcom(second, "capture")["rows_by_table"] == {"dagsnap.big": {"r": 0, "c": 1, "u": 0, "d": 0}}

    # resnapshot of one table: a new snapshot of that table only.
    third = _run_example(
        monkeypatch, mysql_server.airflow_conn_json(), ["dagsnap.*"], **conf, resnapshot=["dagsnap.small"]
    )
    assert third.state == "success"
    again = _mapped_xcoms(third, "snapshot")
    assert {chunk["table"] for chunk in again.values()} == {"dagsnap.small"}
    assert {chunk["snapshot_id"] for chunk in again.values()} == {f"{int(first_snapshot) + 1:06d}"}
    assert sum(chunk["rows"] for chunk in again.values()) == 3
    assert _states(third)[("capture", -1)] == "success"


def _asset_events(uri: str) -> list[Any]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id).where(AssetModel.uri == uri)
    with create_session() as session:
        return [(event.source_run_id, dict(event.extra or {})) for event in session.scalars(query)]


def _task_instance(run_id: str, task_id: str, map_index: int) -> tuple[Any, ...]:
    from airflow.models.taskinstance import TaskInstance

    return (
        TaskInstance.dag_id == "mysql_cdc_example",
        TaskInstance.run_id == run_id,
        TaskInstance.task_id == task_id,
        TaskInstance.map_index == map_index,
    )


def _task_state(run_id: str, task_id: str, map_index: int) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalar(select(TaskInstance.state).where(*_task_instance(run_id, task_id, map_index)))


def _set_task_state(run_id: str, task_id: str, map_index: int, state: str | None) -> None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        changed: Any = session.execute(
            update(TaskInstance).where(*_task_instance(run_id, task_id, map_index)).values(state=state)
        )
        assert changed.rowcount == 1


def _unpause(dag_id: str) -> None:
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        changed: Any = session.execute(update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=False))
        assert changed.rowcount == 1


def _queued_asset_runs(dag_id: str) -> int:
    """Asset-triggered runs the scheduler would create for ``dag_id`` (its AssetDagRunQueue rows)."""
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        return int(
            session.scalar(
                select(func.count()).select_from(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id)
            )
            or 0
        )


def _assert_observability_metadata(
    table_events: list[tuple[str, dict[str, Any]]], runs: list[Any], captured: list[dict[str, Any]]
) -> None:
    """The Asset events of the runs that applied ``captured`` windows carry what docs/operators.md
    "Observability: the pipeline's Asset is its dashboard" says."""
    # The table's events: its frontier, the freshness of what it holds and the run's purge headroom.
    for (_, extra), run, window in zip(table_events, runs, captured, strict=True):
        assert extra["pipeline"] == "dagint" and extra["frontier"] == window["upper"]
        committed = datetime.fromisoformat(extra["last_commit_time"])
        assert committed.timestamp() * 1e6 == pytest.approx(window["last_commit_ts_us"], abs=1)
        assert 0 <= extra["lag_seconds"] < 600
        assert extra["headroom_seconds"] == _xcom(run, "purge_headroom")["headroom_seconds"]
    # The pipeline's own Asset: one event per applied run (its page in the UI is the pipeline's dashboard).
    pipeline_events = _asset_events("mysql-cdc://pipeline/dagint")
    assert [extra["windows"] for _, extra in pipeline_events] == [[1, 1], [2, 2], [3, 3], [4, 4]]
    assert [extra["frontier"] for _, extra in pipeline_events[1:]] == [c["upper"] for c in captured]
    assert pipeline_events[0][1]["last_commit_time"] is None  # window 1 held no transaction
    assert [extra["rows_by_op"] for _, extra in pipeline_events[1:]] == [{"c": 1}, {"c": 1, "u": 1}, {"d": 1}]
    assert pipeline_events[-1][1]["tables"] == {"demo.orders": "applied"}


@pytest.mark.mysql
@pytest.mark.spark
@pytest.mark.long
def test_data_interval_runs_backfill_clear_assets_and_intervals_before_the_pipeline(
    airflow_home: Path,
    mysql_server: MySqlTestServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    spark: Any,
    own_warm_spark: Path,
) -> None:
    """Runs over consecutive past intervals (a backfill, in order) each hold exactly the transactions
    committed in their interval; running a past run again (a clear) re-captures its identical window and
    applies nothing; an interval from before the pipeline existed succeeds empty and says so; each
    changed table's Asset event queues the downstream DAG scheduled on it. The runs' apply and verify
    use warm Spark services (one of each for all the runs); the other tests here run them cold."""
    import time

    from airflow_provider_mysql_cdc.hooks.metadata import metadata_store

    _forget_earlier_runs()
    mysql_server.execute(
        "DROP DATABASE IF EXISTS demo",
        "CREATE DATABASE demo",
        "CREATE TABLE demo.orders (id INT PRIMARY KEY, status VARCHAR(10))",
        "INSERT INTO demo.orders VALUES (100, 'old')",
    )
    conf = {
        "pipeline": "dagint",
        "staging_uri": str(tmp_path / "staging"),
        "warehouse": spark.conf.get("spark.sql.catalog.lake.warehouse"),
    }
    conn = mysql_server.airflow_conn_json()
    orders_uri = "iceberg://lake/demo/orders"
    events_before = len(_asset_events(orders_uri))

    # Run 0: the pipeline is registered and snapshotted; its interval ended before that, so its window
    # (the first, which carries the snapshot's hand-off) is empty.
    start = mysql_server.utc_now()
    first = _run_example(monkeypatch, conn, ["demo.*"], logical_date=start, **conf)
    assert first.state == "success", _states(first)
    assert _xcom(first, "capture")["window_id"] == 1
    assert _xcom(first, "capture")["transactions"] == 0
    headroom = _xcom(first, "purge_headroom")
    assert headroom["status"] == "ok" and headroom["pipeline"] == "dagint"

    _unpause("mysql_cdc_orders_report")  # new DAGs start paused; a paused DAG is not queued by Asset events

    # Three intervals, each with its own transactions; then the runs for them, in order.
    marks = []
    for statements in (
        ["INSERT INTO demo.orders VALUES (1, 'new')"],
        ["UPDATE demo.orders SET status = 'paid' WHERE id = 1", "INSERT INTO demo.orders VALUES (2, 'new')"],
        ["DELETE FROM demo.orders WHERE id = 100"],
    ):
        time.sleep(0.3)
        mysql_server.execute(*statements)
        time.sleep(0.3)
        marks.append(mysql_server.utc_now())
    runs = [_run_example(monkeypatch, conn, ["demo.*"], logical_date=mark, **conf) for mark in marks]
    assert [run.state for run in runs] == ["success"] * 3
    captured = [_xcom(run, "capture") for run in runs]
    assert [c["window_id"] for c in captured] == [2, 3, 4]
    assert [c["rows_by_table"]["demo.orders"] for c in captured] == [
        {"r": 0, "c": 1, "u": 0, "d": 0},
        {"r": 0, "c": 1, "u": 1, "d": 0},
        {"r": 0, "c": 0, "u": 0, "d": 1},
    ]
    assert [c["lower"] for c in captured[1:]] == [c["upper"] for c in captured[:-1]]
    assert [_xcom(run, "apply")["tables"]["demo.orders"]["status"] for run in runs] == ["applied"] * 3
    spark.sql("REFRESH TABLE lake.demo.orders")
    assert sorted(tuple(r) for r in spark.sql("SELECT id, status FROM lake.demo.orders").collect()) == [
        (1, "paid"),
        (2, "new"),
    ]

    # Asset events: one per run that changed the table (the snapshot load of run 0 included); those
    # after the downstream DAG was unpaused queued its run (what the scheduler turns into a DAG run).
    events = _asset_events(orders_uri)[events_before:]
    assert [(extra["windows"], extra["snapshot_chunks_loaded"]) for _, extra in events] == [
        ([], 1),  # run 0 loaded the snapshot (its window 1 held no change of the table)
        ([2], 0),
        ([3], 0),
        ([4], 0),
    ]
    assert _queued_asset_runs("mysql_cdc_orders_report") >= 1
    _assert_observability_metadata(events[1:], runs, captured)

    # The middle interval again (dags test replaces the run, under a new run id; a clear keeps the run):
    # the same window, re-read from the binlog, identical; the apply is a no-op.
    again = _run_example(monkeypatch, conn, ["demo.*"], logical_date=marks[1], **conf)
    assert again.state == "success"
    recaptured = _xcom(again, "capture")
    assert {k: recaptured[k] for k in ("window_id", "lower", "upper", "rows_by_table")} == {
        k: captured[1][k] for k in ("window_id", "lower", "upper", "rows_by_table")
    }
    assert _xcom(again, "apply")["tables"]["demo.orders"]["status"] == "up_to_date"
    assert len(_asset_events(orders_uri)) == events_before + 4

    # An interval from before the pipeline existed, and one inside what window 4 already captured.
    windows_before = len(metadata_store(None).list_windows("dagint"))
    for logical_date, reason in (
        (start - timedelta(days=1), "before the pipeline was registered"),
        (marks[1] - timedelta(milliseconds=100), "window 4 (run"),
    ):
        early = _run_example(monkeypatch, conn, ["demo.*"], logical_date=logical_date, **conf)
        assert early.state == "success", _states(early)
        pushed = _xcom(early, "capture")
        assert pushed["window_id"] is None and pushed["transactions"] == 0
        assert reason in pushed["covered"], pushed["covered"]
        assert _xcom(early, "apply")["tables"] == {}
    assert len(metadata_store(None).list_windows("dagint")) == windows_before
    # One warm service of the apply and one of the verify served every run.
    assert len(list(own_warm_spark.glob("*.sock"))) == 2, sorted(path.name for path in own_warm_spark.iterdir())


@pytest.mark.mysql
@pytest.mark.spark
def test_airflow_tasks_test_runs_every_task_of_the_example(
    airflow_home: Path, mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spark: Any
) -> None:
    """The documented development loop: ``airflow tasks test mysql_cdc_example <task> <date>`` for
    every task of a run (the mapped snapshot with ``--map-index``); re-running capture and apply for a
    run that already captured and applied its window changes nothing."""
    from tests.spark_session import iceberg_jars

    _forget_earlier_runs()
    mysql_server.execute(
        "DROP DATABASE IF EXISTS dagtasks",
        "CREATE DATABASE dagtasks",
        "CREATE TABLE dagtasks.t (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO dagtasks.t VALUES (1, 'a')",
    )
    conf = {
        "tables": ["dagtasks.*"],
        "pipeline": "dagtasks",
        "staging_uri": str(tmp_path / "staging"),
        "warehouse": spark.conf.get("spark.sql.catalog.lake.warehouse"),
        "cutoff": "catch_up",
    }
    logical_date = mysql_server.utc_now()
    run = _run_example(monkeypatch, mysql_server.airflow_conn_json(), **conf, logical_date=logical_date)
    assert run.state == "success", _states(run)
    window = _xcom(run, "capture")["window_id"]

    env = {
        **os.environ,
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": mysql_server.airflow_conn_json(),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "MYSQL_CDC_ICEBERG_JARS": ",".join(str(jar) for jar in iceberg_jars()),
    }
    airflow = Path(sys.executable).with_name("airflow")
    outputs = {}
    for task, extra in (
        ("preflight", []),
        ("purge_headroom", []),
        ("snapshot_plan", []),
        ("snapshot", ["--map-index", "0"]),
        ("capture", []),
        ("apply", []),
    ):
        argv = [str(airflow), "tasks", "test", "mysql_cdc_example", task, logical_date.isoformat(), *extra]
        argv += ["--task-params", json.dumps(conf)]
        map_index = int(extra[1]) if extra else -1
        _set_task_state(run.run_id, task, map_index, None)
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{task}: {output[-4000:]}"
        # It exits 0 even when the task fails; the task instance of the run records how it ended.
        assert _task_state(run.run_id, task, map_index) == "success", f"{task}: {output[-4000:]}"
        assert mysql_server.cdc.password not in output
        outputs[task] = output
    assert f"window {window} re-captured: identical to its published manifest" in outputs["capture"]
    # The re-run apply finds the table holding the window in its Iceberg metadata: no Spark job.
    assert "Spark is not started" in outputs["apply"] and "'dagtasks.t': 'up_to_date windows=[]" in outputs["apply"]
