"""The apply on a real Spark cluster: a standalone master and two workers of the installed pyspark
(:mod:`testbed.spark_cluster`), reached through the Spark provider's connection as a deployment does.

Client deploy mode: a snapshot and two binlog windows of a table with a few types are applied by
``SparkApplyOperator``, whose driver runs here and whose executors run on the workers (the master lists
the finished application by name; the workers' work directories hold its executors' logs, with the
tasks they ran); Iceberg then equals MySQL. The operator is given ``env_vars`` and the worker holds a
connection with a password as ``AIRFLOW_CONN_*``: the environments of spark-submit and its driver (read
from ``/proc`` while they run) hold the former and neither the connection nor its password.

Cluster deploy mode: spark-submit of this Spark refuses Python applications on a standalone master, and
the operator stops before submitting with a ``ConfigurationError`` that says to use client mode.

Staging and warehouse are local directories: the workers run on this machine, so they see the same
paths a real cluster would see on shared storage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.operators.apply import (
    APPLY_APPLICATION,
    STANDALONE_PYTHON_CLUSTER_MODE_REFUSAL,
    SparkApplyOperator,
)
from testbed.spark_cluster import StandaloneCluster, running_cluster
from tests.conftest import SHORT_LIVED_JVM
from tests.exactness.comparison import compare_table, describe_differences
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.process_watch import ProcessWatch, watching
from tests.spark_session import iceberg_jars

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

SPARK_BIN = str(Path(sys.executable).parent)
#: Small executors (one core each, two at most): other tests share this machine. 1 GiB each is what the
#: operator's memory sizing asks of a cluster's executors for windows of ordinary rows (apply.memory), and
#: what a worker offers.
EXECUTOR_CONF = {
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    # Short-lived JVMs on a busy machine: the quick compiler only, and one GC thread.
    "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
    "spark.executor.extraJavaOptions": SHORT_LIVED_JVM,
}


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A standalone master with two workers (1 core, 1 GiB each) for the module; stopped by PID."""
    with running_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


def use_spark_connection(monkeypatch: pytest.MonkeyPatch, cluster: StandaloneCluster, deploy_mode: str) -> None:
    """``spark_default`` as the Spark provider's connection to the cluster (``deploy-mode`` in its extra);
    spark-submit of this venv on the PATH and this Python for the driver and the executors, as an Airflow
    worker of a deployment has them."""
    connection = {"conn_type": "spark", "host": cluster.master_url, "extra": {"deploy-mode": deploy_mode}}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("PATH", SPARK_BIN + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)


def apply_operator(tmp_path: Path, pipeline: str, windows: str, **kwargs: Any) -> SparkApplyOperator:
    """The apply of ``windows`` through ``spark_default``, named after the pipeline (the master lists it so)."""
    return SparkApplyOperator(
        task_id="apply",
        pipeline=pipeline,
        staging_uri=str(tmp_path / "staging"),
        windows=windows,
        warehouse=str(tmp_path / "warehouse"),
        jars=",".join(str(jar) for jar in iceberg_jars()),
        name=f"mysql-cdc-apply-{pipeline}",
        asset_alias=None,
        mysql_cdc_conn_id=None,
        openlineage_inject_parent_job_info=False,
        conf={**EXECUTOR_CONF, "spark.local.dir": str(tmp_path / "spark-local")},
        **kwargs,
    )


def completed_application(cluster: StandaloneCluster, name: str) -> dict[str, Any]:
    """The one finished application of the master named ``name``."""
    found = [app for app in cluster.status()["completedapps"] if app["name"] == name]
    assert len(found) == 1, cluster.status()["completedapps"]
    return dict(found[0])


def executor_logs(cluster: StandaloneCluster, app_id: str) -> dict[str, str]:
    """``worker-n/executor-id`` -> the executor's stderr, for every executor the workers ran for ``app_id``."""
    return {
        f"{worker.name}/{executor.name}": (executor / "stderr").read_text(errors="replace")
        for worker in cluster.worker_dirs()
        for executor in sorted((worker / app_id).glob("*"))
        if (executor / "stderr").is_file()
    }


def assert_iceberg_equals_mysql(server: MySqlTestServer, warehouse: Path, db: str, tables: list[str]) -> None:
    comparisons = [compare_table(server, warehouse, db, table) for table in tables]
    assert all(c.equal for c in comparisons), describe_differences(comparisons)
    assert all(c.mysql_rows for c in comparisons)


def test_client_mode_applies_a_snapshot_and_two_windows_on_the_cluster_exactly(
    spark_cluster: StandaloneCluster, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = name = "spark_cluster_client"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, amount DECIMAL(12,2), "
        "ratio DOUBLE, placed DATETIME(6), due DATE, doc JSON, payload VARBINARY(64))",
        f"INSERT INTO {db}.orders VALUES "
        + ", ".join(
            f"({i}, 'c{i % 17}', {i}.{i % 100:02d}, {i / 7}, '2025-03-{1 + i % 28:02d} 08:00:00.{i:06d}', "
            f"'2025-04-{1 + i % 30:02d}', JSON_OBJECT('n', {i}, 'tags', JSON_ARRAY('a', {i % 3})), "
            f"UNHEX('{i:04x}00ff'))"
            for i in range(1, 121)
        ),
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, name, TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(  # window 1: the snapshot's hand-off, with inserts, updates, deletes, a key change
        f"INSERT INTO {db}.orders VALUES (500, 'new', NULL, NULL, NULL, NULL, NULL, NULL)",
        f"UPDATE {db}.orders SET amount = amount * 2, doc = JSON_SET(doc, '$.paid', true) WHERE id BETWEEN 10 AND 30",
        f"DELETE FROM {db}.orders WHERE id BETWEEN 40 AND 45",
        f"UPDATE {db}.orders SET id = 1001 WHERE id = 1",
    )
    assert pipeline.capture("run-1").window_id == 1
    mysql_server.execute(  # window 2: the same keys changed again, NULLs, a delete of a new row
        *(f"UPDATE {db}.orders SET ratio = {n} / 3, placed = NOW(6) WHERE id = 7" for n in range(5)),
        f"UPDATE {db}.orders SET customer = 'moved', due = NULL, payload = NULL WHERE id BETWEEN 60 AND 70",
        f"INSERT INTO {db}.orders VALUES (501, 'later', 1.50, -0.0, '2025-05-05 05:05:05', '2025-06-06', '[]', '')",
        f"DELETE FROM {db}.orders WHERE id = 500",
    )
    assert pipeline.capture("run-2").window_id == 2

    use_spark_connection(monkeypatch, spark_cluster, "client")
    # The worker also holds a connection with a password, as AIRFLOW_CONN_* (as deployments often do); the
    # operator's env_vars must reach the job, that connection must not.
    password = "cluster-env-secret-4711"
    monkeypatch.setenv("AIRFLOW_CONN_SOURCE_DB", f"mysql://cdc:{password}@db.internal:3306")
    operator = apply_operator(tmp_path, name, "1-2", env_vars={"MYSQL_CDC_CLUSTER_TEST": "given"})
    watch = ProcessWatch(script=APPLY_APPLICATION.encode(), marker=str(tmp_path).encode(), needles=(password.encode(),))
    with watching(watch):
        report = operator.execute({"run_id": "apply-1"})

    table = report["tables"][f"{db}.orders"]
    assert table["status"] == "applied" and table["windows_applied"] == [1, 2], report
    assert table["snapshot_chunks_loaded"] == 1, report
    assert_iceberg_equals_mysql(mysql_server, tmp_path / "warehouse", db, ["orders"])

    # It ran on the cluster: the master lists it finished; its executors ran tasks in the workers' dirs.
    app = completed_application(spark_cluster, f"mysql-cdc-apply-{name}")
    assert app["state"] == "FINISHED", app
    logs = executor_logs(spark_cluster, app["id"])
    assert {key.split("/")[0] for key in logs} == {"worker-1", "worker-2"}, sorted(logs)
    assert any("Finished task" in text for text in logs.values()), {k: v[-2000:] for k, v in logs.items()}

    # spark-submit and its driver got env_vars, and no AIRFLOW_CONN_* variable, the password in none.
    assert watch.argvs, "no process of the apply job was seen"
    assert "MYSQL_CDC_CLUSTER_TEST" in watch.environ_names, sorted(watch.environ_names)
    assert not [variable for variable in watch.environ_names if variable.startswith("AIRFLOW_CONN_")]
    assert watch.environ_hits == set()


def test_standalone_spark_submit_refuses_python_applications_in_cluster_mode(
    spark_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """What the operator's check stands for, asked of this Spark: spark-submit itself refuses."""
    before = spark_cluster.status()
    argv = [
        str(Path(SPARK_BIN) / "spark-submit"),
        *("--master", spark_cluster.master_url, "--deploy-mode", "cluster"),
        *("--name", "refused", APPLY_APPLICATION, "--spec", str(tmp_path / "spec.json")),
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode != 0
    assert STANDALONE_PYTHON_CLUSTER_MODE_REFUSAL in done.stderr, done.stderr[-3000:]
    after = spark_cluster.status()
    assert (after["activedrivers"], after["completeddrivers"]) == (before["activedrivers"], before["completeddrivers"])


@pytest.mark.parametrize("where", ["connection", "operator"])
def test_cluster_mode_on_a_standalone_master_stops_before_submitting(
    where: str,
    spark_cluster: StandaloneCluster,
    mysql_server: MySqlTestServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cluster deploy mode asked by the connection's extra, or by the operator's ``deploy_mode``: a
    terminal ConfigurationError naming the pipeline and the fix, before any spec is written or submitted."""
    name = f"spark_cluster_mode_{where}"
    use_spark_connection(monkeypatch, spark_cluster, "cluster" if where == "connection" else "client")
    operator = apply_operator(tmp_path, name, "1", **({"deploy_mode": "cluster"} if where == "operator" else {}))
    before = spark_cluster.status()

    with pytest.raises(ConfigurationError) as refused:
        operator.execute({"run_id": "apply-1"})

    message = str(refused.value)
    assert f"pipeline {name!r}" in message and spark_cluster.master_url in message
    assert '"deploy-mode" to "client"' in message and "YARN and Kubernetes" in message
    assert not (tmp_path / "staging").exists()  # no spec written, nothing submitted
    after = spark_cluster.status()
    assert len(after["completedapps"]) == len(before["completedapps"]) and not after["activeapps"]
    assert (after["activedrivers"], after["completeddrivers"]) == (before["activedrivers"], before["completeddrivers"])
