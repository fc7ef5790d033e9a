"""The apply job's tables side by side (``ApplySpec.parallel_tables``), against real MySQL, Spark and
Iceberg: a window of several tables is applied in threads of one session at the same time, each thread
in the caller's Spark job group (a warm service names each run's jobs by it), and every target equals
MySQL."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply.contract import TableReport
from airflow_provider_mysql_cdc.apply.spark_job import with_callers_local_properties
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


def test_each_table_thread_has_its_own_copy_of_the_callers_local_properties(spark: Any) -> None:
    """A thread's Spark local properties (where Spark keeps the running statement's execution ids) are its
    own: what one table's thread sets is not seen by another's, and both start with the caller's job
    group. Shared, two threads' statements cleared each other's ``spark.sql.execution.root.id``."""
    context = spark.sparkContext
    both_set = threading.Barrier(2, timeout=60)
    both_read = threading.Barrier(2, timeout=60)
    seen: dict[str, tuple[str | None, str | None]] = {}

    def probe(table_name: str) -> TableReport:
        context.setLocalProperty("mysql_cdc.test.probe", table_name)
        both_set.wait()
        spark.sql("SHOW NAMESPACES").collect()  # a statement of each thread, while the other's is set too
        seen[table_name] = (
            context.getLocalProperty("mysql_cdc.test.probe"),
            context.getLocalProperty("spark.jobGroup.id"),
        )
        both_read.wait()
        return TableReport(target=table_name)

    context.setJobGroup(JOB_GROUP, "local properties test")
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(with_callers_local_properties(spark, probe), ["db.a", "db.b"]))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    assert seen == {"db.a": ("db.a", JOB_GROUP), "db.b": ("db.b", JOB_GROUP)}
    assert context.getLocalProperty("mysql_cdc.test.probe") is None  # the caller's own are untouched
