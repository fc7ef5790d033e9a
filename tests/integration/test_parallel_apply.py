"""The apply job's tables side by side (``ApplySpec.parallel_tables``), against real MySQL, Spark and
Iceberg: a window of several tables is applied in threads of one session at the same time, each thread
in the caller's Spark job group (a warm service names each run's jobs by it), and every target equals
MySQL."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply.contract import TableReport
from airflow_provider_mysql_cdc.apply.table_applier import TableApplier
from tests.exactness.harness import ExactnessPipeline
from tests.mysql_servers import MySqlTestServer

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "apply_parallel"
TABLES = ("t1", "t2", "t3", "t4")
JOB_GROUP = "mysql-cdc-parallel-apply-test"


def test_a_windows_tables_are_applied_side_by_side_in_the_callers_job_group(
    spark: Any, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mysql_server.execute(f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}")
    for table in TABLES:
        mysql_server.execute(
            f"CREATE TABLE {DB}.{table} (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(10,2))",
            f"INSERT INTO {DB}.{table} VALUES (1, 'a', 1.50), (2, 'b', NULL), (3, 'c', -2.25)",
        )
    pipeline = ExactnessPipeline(mysql_server, spark, tmp_path, "parallel-apply", [DB])
    pipeline.start()  # the first window loads every snapshot

    calls: list[tuple[str, str, str | None, float, float]] = []
    lock = threading.Lock()
    apply = TableApplier.apply

    def recorded(self: TableApplier) -> TableReport:
        group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
        started = time.monotonic()
        report = apply(self)
        with lock:
            calls.append((self.table_name, threading.current_thread().name, group, started, time.monotonic()))
        return report

    monkeypatch.setattr(TableApplier, "apply", recorded)
    for number, table in enumerate(TABLES):
        mysql_server.execute(
            f"UPDATE {DB}.{table} SET v = 'changed', n = n + {number} WHERE id = 1",
            f"DELETE FROM {DB}.{table} WHERE id = 2",
            f"INSERT INTO {DB}.{table} VALUES ({10 + number}, 'new', 9.99)",
        )
    spark.sparkContext.setJobGroup(JOB_GROUP, "parallel apply test")
    try:
        record = pipeline.window()  # applies, then compares every table with MySQL (raises on a difference)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.sparkContext.setLocalProperty("spark.job.description", None)

    report = record.apply
    assert list(report.tables) == [f"{DB}.{table}" for table in TABLES]  # the report keeps the tables' order
    assert all(table.status == "applied" for table in report.tables.values()), report.tables
    assert sorted(call[0] for call in calls) == [f"{DB}.{table}" for table in TABLES]
    threads = {call[1] for call in calls}
    assert len(threads) > 1 and all(name.startswith("mysql-cdc-apply") for name in threads), threads
    assert {call[2] for call in calls} == {JOB_GROUP}
    assert max(call[3] for call in calls) < min(call[4] for call in calls), "no two tables ran at the same time"
