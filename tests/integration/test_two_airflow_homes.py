"""One pipeline's runs in two Airflow homes, alternately: what two workers of a distributed executor do
(each has its own AIRFLOW_HOME). With the default metadata store each home has its own SQLite file:
the home that did not register the pipeline stops by name, records and stages nothing, and the pipeline
goes on exactly in the other. With one store both homes reach (``metadata_conn_id``), runs alternate
freely and stay exact. Real Airflow (``airflow dags test``), MySQL, Spark and Iceberg read by pyiceberg."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.exactness.comparison import compare_table
from tests.mysql_servers import MySqlTestServer

pytestmark = [pytest.mark.airflow, pytest.mark.mysql, pytest.mark.spark, pytest.mark.long]

DAG_FILE = """
import os
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

for name, metadata_conn_id in (("own_stores", None), ("shared_store", "shared_metadata")):
    with DAG(name, schedule=None, start_date=datetime(2026, 1, 1), render_template_as_native_obj=True,
             params=mysql_cdc_params(pipeline=name, tables=[name + ".*"], staging_uri={staging!r} + "/" + name,
                                     warehouse={warehouse!r}, cutoff="catch_up")):
        mysql_cdc_pipeline(metadata_conn_id=metadata_conn_id, verify_sample_fraction=None,
                           retry_args={{"retries": 0}}, jars=os.environ["MYSQL_CDC_ICEBERG_JARS"])
"""


class AirflowHome:
    """One worker's Airflow home: its own SQLite metadata database and default CDC metadata store."""

    def __init__(self, home: Path, dag_file: str, connections: dict[str, str]) -> None:
        from tests.spark_session import iceberg_jars

        self.home = home
        (home / "dags").mkdir(parents=True)
        (home / "dags" / "two_homes.py").write_text(dag_file)
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
        self.env = {
            **inherited,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__OPENLINEAGE__DISABLED": "True",
            "MYSQL_CDC_ICEBERG_JARS": ",".join(str(jar) for jar in iceberg_jars()),
            **{f"AIRFLOW_CONN_{conn_id.upper()}": conn for conn_id, conn in connections.items()},
        }
        migrated = self.airflow("db", "migrate")
        assert migrated.returncode == 0, migrated.stderr[-3000:]

    def airflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(Path(sys.executable).with_name("airflow")), *args]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=900, check=False)

    def last_run_state(self, dag_id: str) -> str:
        """The state of the newest run of ``dag_id`` in this home's Airflow database."""
        with contextlib.closing(sqlite3.connect(self.home / "airflow.db")) as db:
            query = "SELECT state FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1"
            return str(db.execute(query, (dag_id,)).fetchone()[0])


def _homes(tmp_path: Path, mysql_server: MySqlTestServer) -> tuple[AirflowHome, AirflowHome]:
    dag_file = textwrap.dedent(
        DAG_FILE.format(staging=str(tmp_path / "staging"), warehouse=str(tmp_path / "warehouse"))
    )
    connections = {
        "mysql_cdc_default": mysql_server.airflow_conn_json(),
        "spark_default": json.dumps({"conn_type": "spark", "host": "local[1]"}),
        "shared_metadata": json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "shared-metadata.db")}),
    }
    return AirflowHome(tmp_path / "worker-a", dag_file, connections), AirflowHome(
        tmp_path / "worker-b", dag_file, connections
    )


def _run(home: AirflowHome, dag_id: str) -> tuple[bool, str]:
    """Run the DAG once in ``home``; (whether the run succeeded, its output)."""
    result = home.airflow("dags", "test", dag_id)
    return home.last_run_state(dag_id) == "success", result.stdout + result.stderr


def _assert_exact(server: MySqlTestServer, warehouse: Path, database: str) -> None:
    comparison = compare_table(server, warehouse, database, "t")
    assert comparison.equal, comparison.describe()


def test_own_stores_stop_the_other_home_by_name_and_a_shared_store_lets_runs_alternate(
    tmp_path: Path, mysql_server: MySqlTestServer
) -> None:
    for database in ("own_stores", "shared_store"):
        mysql_server.execute(
            f"DROP DATABASE IF EXISTS {database}",
            f"CREATE DATABASE {database}",
            f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(10))",
            f"INSERT INTO {database}.t VALUES (1, 'a')",
        )
    worker_a, worker_b = _homes(tmp_path, mysql_server)
    warehouse = tmp_path / "warehouse"

    # Each home its own default store: the pipeline lives in worker A's.
    ok, output = _run(worker_a, "own_stores")
    assert ok, output[-4000:]
    mysql_server.execute("INSERT INTO own_stores.t VALUES (2, 'b')", "UPDATE own_stores.t SET v = 'z' WHERE id = 1")
    windows = sorted(p.name for p in (tmp_path / "staging" / "own_stores" / "own_stores" / "windows").iterdir())
    ok, output = _run(worker_b, "own_stores")
    assert not ok
    assert "MetadataStoreMismatchError" in output and "has no record of it" in output, output[-4000:]
    assert sorted(p.name for p in (tmp_path / "staging" / "own_stores" / "own_stores" / "windows").iterdir()) == windows
    ok, output = _run(worker_a, "own_stores")  # the changes written meanwhile arrive through worker A
    assert ok, output[-4000:]
    _assert_exact(mysql_server, warehouse, "own_stores")

    # One store both reach: runs alternate and stay exact.
    for step, worker in enumerate((worker_a, worker_b, worker_a, worker_b)):
        mysql_server.execute(f"INSERT INTO shared_store.t VALUES ({step + 10}, 'w{step}')")
        ok, output = _run(worker, "shared_store")
        assert ok, output[-4000:]
        _assert_exact(mysql_server, warehouse, "shared_store")
