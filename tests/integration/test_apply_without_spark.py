"""A run without anything to apply is planned without Spark, against real parts: MySQL (snapshot and
binlog windows), Iceberg tables written by the apply job in pyspark local mode, and their Hadoop
catalog metadata files read by :mod:`airflow_provider_mysql_cdc.apply.without_spark`.

Differential: after every step, the state read from the metadata files equals the state the apply job
reads through Iceberg's Java API, and for every run the planner without Spark either declines (the job
has work) or gives the very report the job gives; the Iceberg tables equal MySQL throughout.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import ApplyReport
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.apply.table_applier import read_applied_state
from airflow_provider_mysql_cdc.apply.without_spark import TargetTable, read_hadoop_table, report_without_spark
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.staging import Staging
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.integration.test_apply import CUSTOMER_COLUMNS, _check, _create_shop, config
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "apply_idle"
TABLES = (f"{DB}.customers", f"{DB}.lines")
HISTORY = (f"{DB}.lines",)


def _reader(spark: SparkSession) -> tuple[pafs.FileSystem, str]:
    return pafs.LocalFileSystem(), str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse"))


def _read(spark: SparkSession, target: str) -> TargetTable:
    filesystem, root = _reader(spark)
    return read_hadoop_table(filesystem, root, target)


def _without_spark(spark: SparkSession, pipeline: SnapshotPipeline, first: int, last: int) -> ApplyReport | None:
    spec = config(pipeline, first, last, history=HISTORY)
    return report_without_spark(spec, Staging(str(pipeline.staging), pipeline.name), lambda t: _read(spark, t))


def _assert_states_agree(spark: SparkSession, pipeline: SnapshotPipeline) -> None:
    spec = config(pipeline, 1, history=HISTORY)
    targets = [spec.target(name) for name in TABLES] + [spec.target(name, spec.history_suffix) for name in HISTORY]
    for target in targets:
        from_metadata = _read(spark, target)
        assert from_metadata.exists, target
        assert from_metadata.state == read_applied_state(spark, target)[1], target


def _assert_same_report(without: ApplyReport, job: ApplyReport) -> None:
    assert (without.first_window, without.last_window, without.upper) == (job.first_window, job.last_window, job.upper)
    assert set(without.tables) == set(job.tables)
    for name, table in job.tables.items():
        assert table.status == "up_to_date", (name, table)
        expected = {**asdict(table), "seconds": 0.0}
        assert asdict(without.tables[name]) == expected, name


def test_runs_without_anything_to_apply_are_reported_from_the_metadata_as_the_job_reports_them(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    _create_shop(mysql_server, DB)
    mysql_server.execute(f"CREATE TABLE {DB}.not_selected (id INT PRIMARY KEY, v INT)")
    selection = TableSelection.of(list(TABLES))
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_idle", selection, chunk_rows=100)
    pipeline.snapshot("run-1")

    # Window 1 loads the snapshot and applies changes: the targets do not exist yet, so Spark runs.
    mysql_server.execute(
        f"UPDATE {DB}.customers SET city = 'w1' WHERE id < 20", f"DELETE FROM {DB}.lines WHERE order_id = 3"
    )
    assert pipeline.capture("run-1").window_id == 1
    assert not _read(spark, config(pipeline, 1).target(TABLES[0])).exists
    assert _without_spark(spark, pipeline, 1, 1) is None
    job = run_apply(spark, config(pipeline, 1, history=HISTORY))
    assert not job.failed and job.tables[TABLES[0]].status == "applied", job.tables
    assert job.tables[TABLES[1]].status == "applied", job.tables
    _check(spark, mysql_server, DB, CUSTOMER_COLUMNS)
    _assert_states_agree(spark, pipeline)

    # Re-running window 1 (a clear in the UI): the tables hold it, nothing to apply.
    without = _without_spark(spark, pipeline, 1, 1)
    assert without is not None
    _assert_same_report(without, run_apply(spark, config(pipeline, 1, history=HISTORY)))

    # Window 2 holds only a change of a table the pipeline does not select.
    mysql_server.execute(f"INSERT INTO {DB}.not_selected VALUES (1, 1)")
    assert pipeline.capture("run-2").window_id == 2
    without = _without_spark(spark, pipeline, 2, 2)
    assert without is not None
    _assert_same_report(without, run_apply(spark, config(pipeline, 2, history=HISTORY)))
    _check(spark, mysql_server, DB, CUSTOMER_COLUMNS)

    # Window 3 changes a selected table: the job has work, the planner declines.
    mysql_server.execute(f"UPDATE {DB}.customers SET name = 'w3' WHERE id = 7")
    assert pipeline.capture("run-3").window_id == 3
    assert _without_spark(spark, pipeline, 3, 3) is None
    assert _without_spark(spark, pipeline, 2, 3) is None
    job = run_apply(spark, config(pipeline, 3, history=HISTORY))
    assert job.tables[TABLES[0]].status == "applied" and job.tables[TABLES[1]].status == "up_to_date"
    _check(spark, mysql_server, DB, CUSTOMER_COLUMNS)
    _assert_states_agree(spark, pipeline)

    # A compaction commits on top without CDC properties: the state is read from the commit below it.
    spark.sql(
        f"CALL {CATALOG}.system.rewrite_data_files(table => '{DB}.customers', options => map('min-input-files','1'))"
    )
    newest = spark.sql(f"SELECT summary FROM {CATALOG}.{DB}.customers.snapshots ORDER BY committed_at DESC LIMIT 1")
    assert "cdc.pipeline" not in newest.collect()[0].summary
    _assert_states_agree(spark, pipeline)
    assert pipeline.capture("run-4").window_id == 4
    without = _without_spark(spark, pipeline, 2, 4)
    assert without is not None
    _assert_same_report(without, run_apply(spark, config(pipeline, 2, 4, history=HISTORY)))

    # A schema change is work for the job, even without a row.
    mysql_server.execute(f"ALTER TABLE {DB}.lines ADD COLUMN extra INT NULL")
    assert pipeline.capture("run-5").window_id == 5
    assert _without_spark(spark, pipeline, 5, 5) is None
    job = run_apply(spark, config(pipeline, 5, history=HISTORY))
    assert job.tables[TABLES[1]].status == "applied", job.tables[TABLES[1]]
    _assert_states_agree(spark, pipeline)
    _check(spark, mysql_server, DB, CUSTOMER_COLUMNS)


def test_a_window_ahead_of_a_table_that_misses_earlier_changes_is_left_to_the_job(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """A gap (window 2 asked for while window 1's changes are not in the table) is the job's to report."""
    db = "apply_idle_gap"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_idle_gap", TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    assert pipeline.capture("run-1").window_id == 1
    run_apply(spark, config(pipeline, 1))
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'w2' WHERE id = 1")
    assert pipeline.capture("run-2").window_id == 2
    assert pipeline.capture("run-3").window_id == 3
    staging = Staging(str(pipeline.staging), pipeline.name)
    assert report_without_spark(config(pipeline, 3, 3), staging, lambda t: _read(spark, t)) is None
    job = run_apply(spark, config(pipeline, 3, 3))
    assert job.failed == [f"{db}.customers"] and job.tables[f"{db}.customers"].error_class == "ApplyGapError"
