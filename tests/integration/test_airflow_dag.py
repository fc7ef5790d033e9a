"""Real Airflow on SQLite: the provider is discovered, the example DAG loads and runs with dag.test()."""

from __future__ import annotations

import json
import subprocess
import sys
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
    assert "mysql_cdc_example" in bag.dag_ids


def _run_example(monkeypatch: pytest.MonkeyPatch, conn_json: str, tables: list[str], **conf: Any) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    from tests.spark_session import iceberg_jars

    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", conn_json)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("MYSQL_CDC_ICEBERG_JARS", ",".join(str(jar) for jar in iceberg_jars()))
    dag = DagBag(dag_folder=str(REPO_ROOT / "dags")).get_dag("mysql_cdc_example")
    assert dag is not None
    return dag.test(run_conf={"tables": tables, **conf})


def _forget_earlier_runs() -> None:
    """Delete the example DAG's runs of earlier tests. Its capture task has ``depends_on_past``: after a
    run whose capture did not succeed (the misconfigured-server test), ``dag.test()`` would wait forever."""
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


UNMAPPED_TASKS = ("preflight", "binlog_inventory", "snapshot_plan", "capture", "apply")


@pytest.mark.mysql
@pytest.mark.spark
def test_example_dag_captures_and_applies_consecutive_windows(
    airflow_home: Path, mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spark: Any
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
    from airflow_provider_mysql_cdc.hooks.metadata import metadata_store

    assert str(metadata_store(None).get_table_frontier("dagcap", "dagcap.t", "applied")) == pushed["upper"]


@pytest.mark.mysql
def test_example_dag_fails_on_a_misconfigured_server(
    airflow_home: Path, misconfigured_mysql: MySqlTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run_example(monkeypatch, misconfigured_mysql.airflow_conn_json(), [])
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed"
    assert states["binlog_inventory"] == "upstream_failed"
    assert states["snapshot_plan"] == "upstream_failed"
    assert states["snapshot"] == "upstream_failed"
    assert states["capture"] == "upstream_failed"  # none_failed: an upstream failure still stops capture
    assert states["apply"] == "upstream_failed"
    assert run.state == "failed"


@pytest.mark.mysql
def test_example_dag_snapshots_existing_rows_in_mapped_chunks_then_only_what_is_asked(
    airflow_home: Path, mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
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
