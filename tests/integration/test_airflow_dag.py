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

    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", conn_json)
    dag = DagBag(dag_folder=str(REPO_ROOT / "dags")).get_dag("mysql_cdc_example")
    assert dag is not None
    return dag.test(run_conf={"tables": tables, **conf})


def _xcom(run: Any, task_id: str) -> Any:
    """The return value a task pushed, read back from Airflow's metadata database."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(XComModel.get_many(run_id=run.run_id, task_ids=task_id, key="return_value")).one()
        return XComModel.deserialize_value(row)


@pytest.mark.mysql
def test_example_dag_captures_consecutive_windows(
    airflow_home: Path, mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS dagcap",
        "CREATE DATABASE dagcap",
        "CREATE TABLE dagcap.t (id INT PRIMARY KEY, v VARCHAR(10))",
    )
    conf = {"pipeline": "dagcap", "staging_uri": str(tmp_path / "staging"), "cutoff": "catch_up"}
    first = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["dagcap.*"], **conf)
    states = {ti.task_id: ti.state for ti in first.get_task_instances()}
    assert states == {"preflight": "success", "binlog_inventory": "success", "capture": "success"}, states
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


@pytest.mark.mysql
def test_example_dag_fails_on_a_misconfigured_server(
    airflow_home: Path, misconfigured_mysql: MySqlTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run_example(monkeypatch, misconfigured_mysql.airflow_conn_json(), [])
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed"
    assert states["binlog_inventory"] == "upstream_failed"
    assert states["capture"] == "upstream_failed"
    assert run.state == "failed"
