"""Iceberg table maintenance against real parts: MySQL (snapshot + binlog windows), local Spark, Iceberg.

Many small windows leave a target with many small data files and position delete files and one snapshot
per window. The maintenance job compacts them, expires snapshots and removes orphan files; the table
still equals MySQL (read by pyiceberg, independently of Spark), and the apply still knows which windows
the table holds: new windows apply exactly, old ones are skipped.

Found on the way (and why the job keeps snapshots back to the newest apply commit): Iceberg's
``rewrite_data_files`` commits a snapshot without the apply's CDC summary properties. The apply walks back
from the current snapshot to the newest commit that has them, so compaction alone is harmless, but an
expiration that keeps only the newest snapshot (``retain_last => 1``) removes that commit; the apply then
stops with ``AppliedStateExpiredError`` instead of reading the table as never applied.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import MaintenanceReport
from airflow_provider_mysql_cdc.apply.maintenance_sql import expire_snapshots
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.apply.table_applier import read_applied_state
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.operators.maintenance import IcebergMaintenanceOperator
from airflow_provider_mysql_cdc.staging import Staging
from tests.exactness.comparison import compare_table
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.integration.test_apply import apply, config
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

FOUR_DAYS = 4 * 24 * 3600


def _warehouse(spark: SparkSession) -> Path:
    return Path(str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")).removeprefix("file:"))


def _create_tables(server: MySqlTestServer, db: str) -> None:
    server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"CREATE TABLE {db}.events (k INT, note VARCHAR(20))",  # no key: its rows are a multiset
        f"INSERT INTO {db}.items VALUES " + ", ".join(f"({i}, 'v{i}', {i})" for i in range(1, 201)),
        f"INSERT INTO {db}.events VALUES " + ", ".join(f"({i % 10}, 'e{i}')" for i in range(1, 41)),
    )


def _change(server: MySqlTestServer, db: str, k: int) -> None:
    """Window ``k``'s changes: inserts, updates and deletes in both tables."""
    base = 1000 + 10 * k
    server.execute(
        f"INSERT INTO {db}.items VALUES " + ", ".join(f"({base + i}, 'new{k}', {i})" for i in range(5)),
        f"UPDATE {db}.items SET n = n + {k}, v = 'w{k}' WHERE id % 10 = {k % 10}",
        f"DELETE FROM {db}.items WHERE id IN ({3 * k}, {3 * k + 1})",
        f"INSERT INTO {db}.events VALUES ({k % 10}, 'w{k}'), ({k % 10}, 'w{k}')",
        f"DELETE FROM {db}.events WHERE k = {k % 10} LIMIT 1",
    )


def _windows(server: MySqlTestServer, pipeline: SnapshotPipeline, db: str, first: int, last: int) -> None:
    for k in range(first, last + 1):
        _change(server, db, k)
        assert pipeline.capture(f"run-{k}").window_id == k


def _assert_equal(server: MySqlTestServer, spark: SparkSession, db: str) -> None:
    for table in ("items", "events"):
        comparison = compare_table(server, _warehouse(spark), db, table)
        assert comparison.equal, comparison.describe()


def _summaries(spark: SparkSession, target: str) -> list[dict[str, str]]:
    rows = spark.sql(f"SELECT summary FROM {target}.snapshots ORDER BY committed_at").collect()
    return [dict(row.summary) for row in rows]


def _plant_orphan(spark: SparkSession, db: str) -> Path:
    """A data file no snapshot references (a crashed write leaves such files), four days old."""
    orphan = _warehouse(spark) / db / "items" / "data" / "00000-crashed-write.parquet"
    orphan.write_bytes(b"PAR1 left by a write that never committed")
    old = time.time() - FOUR_DAYS
    os.utime(orphan, (old, old))
    return orphan


def maintenance_operator(spark: SparkSession, pipeline: SnapshotPipeline, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``IcebergMaintenanceOperator`` as the DAG factory makes it: spark-submit on a ``local[2]`` master, on
    the warehouse of the test session's catalog, expiring every snapshot it may."""
    from tests.spark_session import iceberg_jars

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return IcebergMaintenanceOperator(
        task_id="maintenance",
        pipeline=pipeline.name,
        staging_uri=str(pipeline.staging),
        warehouse=str(_warehouse(spark)),
        snapshot_retention=timedelta(0),
        jars=",".join(str(jar) for jar in iceberg_jars()),
        conf={
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
        },
    )


@pytest.mark.airflow
def test_maintenance_compacts_expires_and_the_apply_still_skips_what_it_has(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = "maint_main"
    _create_tables(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.*"), chunk_rows=50)
    pipeline.snapshot("run-0")
    _windows(mysql_server, pipeline, db, 1, 3)
    apply(spark, pipeline, 1, 3)  # one MERGE commit per window and table
    _assert_equal(mysql_server, spark, db)
    orphan = _plant_orphan(spark, db)

    # The operator as the DAG runs it: spec to staging, spark-submit of the job, report back.
    xcom = maintenance_operator(spark, pipeline, monkeypatch).execute({"run_id": "maint-1"})
    staging = Staging(str(pipeline.staging), db)
    found = staging.read_text(staging.maintenance_report_path("maint-1", 1))
    assert found is not None
    report = MaintenanceReport.from_json(*found)
    assert xcom["tables"][f"{db}.items"]["snapshots_expired"] == report.tables[f"{db}.items"].snapshots_expired

    # Only this pipeline's tables (other tests' tables share the warehouse).
    assert sorted(report.tables) == [f"{db}.events", f"{db}.items"] and not report.failed
    for name, table in report.tables.items():
        before = table.data_files_before + table.delete_files_before
        after = table.data_files_after + table.delete_files_after
        assert table.delete_files_before > 0 and table.data_files_before > 3, (name, table)
        assert after < before and table.data_files_after < table.data_files_before, (name, table)
        assert table.snapshots_expired > 0 and table.snapshots_after == table.snapshots_kept, (name, table)
        assert table.window_id == 3
    # Delete files do not pile up (Iceberg 1.10 folds a data file's earlier position deletes into the next
    # delete file it writes for it); those pointing at rewritten files can stay live: their sequence number
    # is not below the compaction's starting one, so remove-dangling-deletes keeps them.
    assert all(t.delete_files_after <= t.delete_files_before for t in report.tables.values()), report
    assert [Path(path.removeprefix("file:")) for path in report.tables[f"{db}.items"].orphan_files_removed] == [orphan]
    assert not orphan.exists()

    items = f"{CATALOG}.{db}.items"
    spark.sql(f"REFRESH TABLE {items}")  # the session's catalog caches tables; the job ran in another JVM
    # The compaction's commit carries no CDC properties; the apply commit of window 3 below it was kept.
    summaries = _summaries(spark, items)
    assert "cdc.pipeline" not in summaries[-1] and summaries[-1].get("added-data-files")
    assert [s["cdc.window-id"] for s in summaries if "cdc.pipeline" in s] == ["3"]
    state = read_applied_state(spark, items)[1]
    assert state is not None and state.window_id == 3
    _assert_equal(mysql_server, spark, db)

    # New windows after maintenance apply exactly; old ones are skipped.
    _windows(mysql_server, pipeline, db, 4, 4)
    assert apply(spark, pipeline, 4).tables[f"{db}.items"].windows_applied == [4]
    _assert_equal(mysql_server, spark, db)
    for window in (2, 4):
        again = run_apply(spark, config(pipeline, window))
        assert {t.status for t in again.tables.values()} == {"up_to_date"}, again
    _assert_equal(mysql_server, spark, db)

    # What the job's retention prevents: a compaction, then an expiration that keeps only the newest
    # snapshot (not the apply's commit below it). The next apply stops the table by name.
    spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{db}.items', options => map('rewrite-all', 'true'))")
    in_a_minute = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=1)
    expired: Any = spark.sql(expire_snapshots(CATALOG, f"{db}.items", in_a_minute, retain_last=1)).collect()
    assert expired and not [s for s in _summaries(spark, items) if "cdc.pipeline" in s]

    _windows(mysql_server, pipeline, db, 5, 5)
    stopped = run_apply(spark, config(pipeline, 5))
    failed = stopped.tables[f"{db}.items"]
    assert failed.status == "failed" and failed.error_class == "AppliedStateExpiredError", failed
    assert "re-snapshot" in failed.error and stopped.tables[f"{db}.events"].windows_applied == [5]
