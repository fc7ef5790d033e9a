"""Real Airflow on SQLite: the provider is discovered, the example DAG loads and runs with dag.test()."""

from __future__ import annotations

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


def _run_example(monkeypatch: pytest.MonkeyPatch, conn_json: str, tables: list[str]) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", conn_json)
    dag = DagBag(dag_folder=str(REPO_ROOT / "dags")).get_dag("mysql_cdc_example")
    assert dag is not None
    return dag.test(run_conf={"tables": tables})


@pytest.mark.mysql
def test_example_dag_runs_preflight_and_inventory(
    airflow_home: Path, mysql_server: MySqlTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    mysql_server.execute(
        "CREATE DATABASE IF NOT EXISTS demo",
        "CREATE TABLE IF NOT EXISTS demo.dag_probe (id INT PRIMARY KEY)",
    )
    run = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["demo.*"])
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"preflight": "success", "binlog_inventory": "success"}, states
    assert run.state == "success"


@pytest.mark.mysql
def test_example_dag_fails_on_a_misconfigured_server(
    airflow_home: Path, misconfigured_mysql: MySqlTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _run_example(monkeypatch, misconfigured_mysql.airflow_conn_json(), [])
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed"
    assert states["binlog_inventory"] == "upstream_failed"
    assert run.state == "failed"
