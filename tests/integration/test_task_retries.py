"""Errors drive Airflow, run by real Airflow (SQLite metadata database, ``dag.test()``):

* a terminal error (wrong password) fails its task on the first try although retries are left;
* a transient one (nothing listens on the MySQL port) is retried, then fails when retries run out;
* a run after a failed run goes on and ends (``depends_on_past`` made the example DAG's later runs wait
  forever, silently, behind a failed capture or apply; ``airflow dags test`` never returned).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_airflow_dag import _forget_earlier_runs, _run_example, _states, _xcom
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.airflow

DAG_FILE = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

with DAG("retries_by_type", schedule=None, start_date=datetime(2026, 1, 1), render_template_as_native_obj=True,
         params=mysql_cdc_params(pipeline="retries_by_type", tables=["nothing.*"], staging_uri={staging!r},
                                 warehouse={warehouse!r})):
    mysql_cdc_pipeline(retry_args={{"retries": 2, "retry_delay": timedelta(seconds=1)}})
"""


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _airflow(home: Path, conn_json: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``airflow`` command on its own Airflow home whose DAG folder holds only the test DAG (the
    example DAG retries for minutes with its default backoff)."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": conn_json,
    }
    airflow = Path(sys.executable).with_name("airflow")
    return subprocess.run([str(airflow), *args], env=env, capture_output=True, text=True, timeout=600, check=False)


def _preflight_tries(home: Path) -> list[tuple[str, int]]:
    """(state, try number) of the preflight task of each run, oldest first."""
    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as db:
        query = "SELECT state, try_number FROM task_instance WHERE task_id = 'preflight' ORDER BY start_date"
        return [(str(state), int(tries)) for state, tries in db.execute(query)]


@pytest.mark.mysql
def test_terminal_errors_fail_at_once_and_transient_ones_are_retried(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    home = tmp_path / "airflow-home"
    (home / "dags").mkdir(parents=True)
    text = DAG_FILE.format(staging=str(tmp_path / "staging"), warehouse=str(tmp_path / "warehouse"))
    (home / "dags" / "retries_by_type.py").write_text(textwrap.dedent(text))
    migrated = _airflow(home, "{}", "db", "migrate")
    assert migrated.returncode == 0, migrated.stderr[-3000:]

    wrong_password = mysql_server.airflow_conn_json(mysql_server.account(mysql_server.cdc.user, "not-the-password"))
    refused = _airflow(home, wrong_password, "dags", "test", "retries_by_type")
    assert "MySqlAuthenticationError" in refused.stdout + refused.stderr
    assert _preflight_tries(home) == [("failed", 1)]  # retries were left: a terminal error uses none

    unreachable = {**json.loads(mysql_server.airflow_conn_json()), "port": _closed_port()}
    retried = _airflow(home, json.dumps(unreachable), "dags", "test", "retries_by_type")
    assert "MySqlUnreachableError" in retried.stdout + retried.stderr
    assert _preflight_tries(home) == [("failed", 1), ("failed", 3)]  # the first try and 2 retries


@pytest.mark.mysql
@pytest.mark.spark
def test_a_run_after_a_failed_run_goes_on_and_ends(
    airflow_home: Path,
    mysql_server: MySqlTestServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    spark: Any,
    warm_spark: Path,
) -> None:
    _forget_earlier_runs()
    mysql_server.execute(
        "DROP DATABASE IF EXISTS afterfail",
        "CREATE DATABASE afterfail",
        "CREATE TABLE afterfail.t (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO afterfail.t VALUES (1, 'a')",
    )
    conf = {
        "pipeline": "afterfail",
        "staging_uri": str(tmp_path / "staging"),
        "warehouse": spark.conf.get("spark.sql.catalog.lake.warehouse"),
        "cutoff": "catch_up",
    }
    wrong = mysql_server.airflow_conn_json(mysql_server.account(mysql_server.cdc.user, "not-the-password"))
    failed = _run_example(monkeypatch, wrong, ["afterfail.*"], **conf)
    assert failed.state == "failed" and _states(failed)[("capture", -1)] == "upstream_failed"

    mysql_server.execute("INSERT INTO afterfail.t VALUES (2, 'b')")
    after = _run_example(monkeypatch, mysql_server.airflow_conn_json(), ["afterfail.*"], **conf)
    assert after.state == "success", _states(after)
    assert _xcom(after, "apply")["tables"]["afterfail.t"]["status"] == "applied"
    spark.sql("REFRESH TABLE lake.afterfail.t")
    assert [tuple(r) for r in spark.sql("SELECT id, v FROM lake.afterfail.t ORDER BY id").collect()] == [
        (1, "a"),
        (2, "b"),
    ]
