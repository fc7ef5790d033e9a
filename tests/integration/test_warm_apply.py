"""The warm Spark service of the apply, against real parts: spark-submit starts the service's driver
(its own JVM, local master, the Iceberg jars), which applies windows captured from the real MySQL
server into a Hadoop catalog; the Iceberg tables, read by this process's own Spark session, are
compared with MySQL after every window. The service is reused, rehearses the apply's MERGE once in
its idle time, survives a bad request, is replaced after it was killed, and stops by itself and on
request (its pid, socket and files checked)."""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import ApplyReport
from airflow_provider_mysql_cdc.apply.rehearsal import REHEARSAL_ROWS_AFTER, rehearse_merge
from airflow_provider_mysql_cdc.apply.warm_service import (
    SERVICE_APPLICATION,
    WarmApplyClient,
    stop_services,
)
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.operators.apply import apply_spark_conf
from testbed.mysql.process import process_alive
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.integration.test_apply import CUSTOMER_COLUMNS, _check, _create_shop, config
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG, iceberg_jars

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "apply_warm"


def _command(spark: SparkSession) -> list[str]:
    warehouse = str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse"))
    argv = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]"]
    argv += ["--jars", ",".join(str(jar) for jar in iceberg_jars())]
    for key, value in apply_spark_conf(CATALOG, warehouse, None).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, SERVICE_APPLICATION]


def _environment() -> dict[str, str]:
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def _spec(pipeline: SnapshotPipeline, tmp_path: Path, window: int) -> tuple[str, Path]:
    report = tmp_path / f"report-{window}.json"
    path = tmp_path / f"spec-{window}.json"
    path.write_text(config(pipeline, window, report_uri=str(report)).to_json())
    return str(path), report


def _applied(report: Path, window: int) -> ApplyReport:
    found = ApplyReport.from_json(report.read_text(), str(report))
    assert not found.failed and found.last_window == window, found
    return found


def _pid(client: WarmApplyClient) -> int:
    return int(client.paths.pid.read_text())


def _compare(spark: SparkSession, server: MySqlTestServer) -> None:
    for table in ("customers", "lines"):
        spark.sql(f"REFRESH TABLE {CATALOG}.{DB}.{table}")
    _check(spark, server, DB, CUSTOMER_COLUMNS)


def _capture_and_apply(
    spark: SparkSession, client: WarmApplyClient, pipeline: SnapshotPipeline, tmp_path: Path, window: int
) -> tuple[list[str], ApplyReport]:
    """Capture the next window (it must be ``window``), apply it through the service, compare with MySQL;
    returns what the client said and the job's report."""
    assert pipeline.capture(f"run-{window}").window_id == window
    spec, report = _spec(pipeline, tmp_path, window)
    said: list[str] = []
    assert client.run(spec, said.append) == 0, said
    applied = _applied(report, window)
    _compare(spark, pipeline.server)
    return said, applied


def test_a_warm_service_applies_window_after_window_and_stops_cleanly(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, service_folder: Path
) -> None:
    _create_shop(mysql_server, DB)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_warm", TableSelection.of(f"{DB}.*"), chunk_rows=100)
    pipeline.snapshot("run-1")
    folder = service_folder
    client = WarmApplyClient(folder, _command(spark), _environment(), idle_seconds=600)

    # Window 1 (with the snapshot load) starts the service.
    mysql_server.execute(
        f"UPDATE {DB}.customers SET city = 'w1' WHERE id < 30", f"DELETE FROM {DB}.lines WHERE line = 2"
    )
    said, _ = _capture_and_apply(spark, client, pipeline, tmp_path, 1)
    assert any("starting" in line for line in said) and any("apply table=apply_warm.customers" in line for line in said)
    first_pid = _pid(client)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(client.paths.socket.stat().st_mode) & 0o077 == 0

    # Window 2 goes to the same driver.
    mysql_server.execute(f"INSERT INTO {DB}.customers VALUES (900, 'new', 'x', 1.00, NULL)")
    said, applied = _capture_and_apply(spark, client, pipeline, tmp_path, 2)
    assert any("reused" in line for line in said) and not any("starting" in line for line in said)
    assert _pid(client) == first_pid
    assert applied.tables[f"{DB}.customers"].windows_applied == [2]
    # Between the two, the service rehearsed a MERGE once, in a scratch folder it removed.
    assert client.paths.log.read_text().count("rehearsed the apply's MERGE") == 1
    assert [path.name for path in folder.iterdir() if "rehearsal" in path.name] == []

    # A spec that is not there is bad input (exit 2); the service goes on.
    assert client.run(str(tmp_path / "nowhere.json"), lambda _: None) == 2
    assert process_alive(first_pid) and _pid(client) == first_pid

    # A killed service is replaced by the next apply, which applies the window exactly.
    os.kill(first_pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while process_alive(first_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    mysql_server.execute(
        f"UPDATE {DB}.customers SET name = 'w3' WHERE id = 900", f"DELETE FROM {DB}.customers WHERE id = 1"
    )
    said, _ = _capture_and_apply(spark, client, pipeline, tmp_path, 3)
    assert any("starting" in line for line in said)
    second_pid = _pid(client)
    assert second_pid != first_pid

    # Stopped on request: the process exits and leaves neither socket nor pid file.
    assert stop_services(folder) == [second_pid]
    assert not process_alive(second_pid)
    assert not client.paths.socket.exists() and not client.paths.pid.exists()

    # Stopped by itself after its idle time (a re-run of window 3: up to date, nothing applied).
    idle = WarmApplyClient(folder, _command(spark), _environment(), idle_seconds=2)
    spec, report = _spec(pipeline, tmp_path, 3)
    assert idle.run(spec, said.append) == 0
    assert _applied(report, 3).tables[f"{DB}.customers"].status == "up_to_date"
    third_pid = _pid(idle)
    deadline = time.monotonic() + 120
    while process_alive(third_pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not process_alive(third_pid)
    assert not idle.paths.socket.exists() and not idle.paths.pid.exists()


def test_the_rehearsal_merges_a_scratch_table_and_leaves_nothing(spark: SparkSession, tmp_path: Path) -> None:
    """The rehearsal deletes, updates and inserts (the rows it ends with), in a catalog of its own
    whose warehouse it removes; the session's own catalog is not touched."""
    tables_before = spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()
    warehouse = tmp_path / "rehearsal"
    assert rehearse_merge(spark, warehouse) == REHEARSAL_ROWS_AFTER == 80
    assert not warehouse.exists()
    assert spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect() == tables_before
    assert rehearse_merge(spark, warehouse) == REHEARSAL_ROWS_AFTER  # again, in the same session
