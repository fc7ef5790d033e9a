"""The warm verify service against real parts: the verification's own process (its JVM, local master,
the Iceberg jars) stays up between verifications of targets applied from the real MySQL server into a
Hadoop catalog. It is reused, finds a row changed behind the pipeline's back exactly as a one-shot
verification process does, answers a bad request with the named error and goes on, keeps the password
off its command line and environment, and stops on request (its pid, socket and files checked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.apply.warm_service import stop_services
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.operators.apply import apply_spark_conf
from airflow_provider_mysql_cdc.verify.child import SparkSettings, WarmVerifyClient, run_verify_child
from airflow_provider_mysql_cdc.verify.report import VerifyReport
from testbed.mysql.process import process_alive
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG, iceberg_jars

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "verify_warm"
SPARK_CONF = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}


def _settings(spark: SparkSession) -> SparkSettings:
    warehouse = str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse"))
    conf = {**apply_spark_conf(CATALOG, warehouse, None), **SPARK_CONF}
    return SparkSettings("local[1]", conf, [str(jar) for jar in iceberg_jars()])


def _outcome(report: VerifyReport) -> list[tuple[str, bool, str, int]]:
    """Per table: name, whether it differs, why it could not be verified, MySQL rows checked."""
    return [(t.table, t.differs, t.problem, t.source_rows_checked) for t in report.tables]


def test_a_warm_verify_service_verifies_run_after_run_and_stops_cleanly(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, service_folder: Path
) -> None:
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2))",
        f"INSERT INTO {DB}.items VALUES " + ", ".join(f"({i}, 'item-{i}', {i}.25)" for i in range(1, 201)),
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, DB, TableSelection.of(f"{DB}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(
        f"UPDATE {DB}.items SET name = 'changed' WHERE id <= 10", f"DELETE FROM {DB}.items WHERE id = 20"
    )
    pipeline.capture("run-1")
    applied = run_apply(spark, ApplySpec(DB, str(pipeline.staging), 1, 1, catalog=CATALOG))
    assert not applied.failed, applied

    client = WarmVerifyClient(service_folder, _settings(spark), idle_seconds=600)
    request = {"pipeline": DB, "tables": [f"{DB}.*"], "staging_uri": str(pipeline.staging)}
    password = mysql_server.cdc.password.encode()

    # The first verification starts the service; the target equals MySQL.
    said: list[str] = []
    first = client.verify(mysql_server.cdc, request, said.append)
    assert any("starting" in line for line in said), said
    assert _outcome(first) == [(f"{DB}.items", False, "", 199)], first.describe()
    pid = int(client.paths.pid.read_text())

    # MySQL moves on without an apply: the next verification, in the same process, catches the target
    # up in memory (it re-reads the table's current commit) and still finds it equal.
    mysql_server.execute(f"INSERT INTO {DB}.items VALUES (500, 'late', 1.00)", f"DELETE FROM {DB}.items WHERE id = 1")
    said = []
    second = client.verify(mysql_server.cdc, request, said.append)
    assert any("reused" in line for line in said) and not any("starting" in line for line in said), said
    assert int(client.paths.pid.read_text()) == pid
    assert _outcome(second) == [(f"{DB}.items", False, "", 199)], second.describe()

    # A row changed in Iceberg behind the pipeline's back: the warm service reports it, as a one-shot
    # verification process (a JVM of its own) does for the same request.
    spark.sql(f"UPDATE {CATALOG}.{DB}.items SET price = 0 WHERE id = 5")
    warm = client.verify(mysql_server.cdc, request, lambda _: None)
    cold = run_verify_child(mysql_server.cdc, request, _settings(spark))
    assert [t.table for t in warm.differing] == [f"{DB}.items"], warm.describe()
    assert warm.as_xcom()["tables"] == cold.as_xcom()["tables"], (warm.describe(), cold.describe())
    differences = [(d.key, d.kind, d.columns) for d in warm.differing[0].differences]
    assert differences == [({"id": 5}, "changed", ("price",))], warm.describe()

    # A bad request is answered with its named error; the service goes on.
    with pytest.raises(ConfigurationError, match="sample"):
        client.verify(mysql_server.cdc, {**request, "sample_fraction": 2.0}, lambda _: None)
    assert process_alive(pid) and int(client.paths.pid.read_text()) == pid

    # The password reached the service over its socket only.
    assert password not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert password not in Path(f"/proc/{pid}/environ").read_bytes()

    # Stopped on request: the process exits and leaves neither socket nor pid file.
    assert stop_services(service_folder) == [pid]
    assert not process_alive(pid)
    assert not client.paths.socket.exists() and not client.paths.pid.exists()
