"""The verify engine (:mod:`airflow_provider_mysql_cdc.verify`) against a real MySQL and Spark + Iceberg:
no difference on a clean pipeline while MySQL is written to, every planted difference found and named,
and a sampled verification checks only its sample."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import TargetDiffersError, TargetNotVerifiableError
from airflow_provider_mysql_cdc.operators.verify import check_report
from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "verify_exact"
TABLE = f"{DB}.orders"
ROWS = 400
#: A table no window changes: its target holds its snapshot only.
QUIET = f"{DB}.quiet"


class Writer:
    """A thread that keeps inserting, updating and deleting rows of the table until stopped."""

    def __init__(self, server: MySqlTestServer) -> None:
        self.server = server
        self.stop = threading.Event()
        self.statements = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        next_id = 100_000
        while not self.stop.is_set():
            self.server.execute(
                f"INSERT INTO {TABLE} VALUES ({next_id}, 'new', {next_id % 97}.25, NULL)",
                f"UPDATE {TABLE} SET total = total + 1, note = 'moved' WHERE id = {next_id % ROWS + 1}",
                f"DELETE FROM {TABLE} WHERE id = {(next_id * 7) % ROWS + 1}",
            )
            self.statements += 3
            next_id += 1


@pytest.fixture
def applied(spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path) -> Iterator[SnapshotPipeline]:
    """A pipeline snapshotted, captured and applied; MySQL then moved on (so the target lags)."""
    values = ", ".join(
        f"({i}, 'row {i}', {i}.50, {'NULL' if i % 5 else repr('n' + str(i))})" for i in range(1, ROWS + 1)
    )
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {TABLE} (id INT PRIMARY KEY, name VARCHAR(40), total DECIMAL(10,2), note VARCHAR(20))",
        f"INSERT INTO {TABLE} VALUES {values}",
        f"CREATE TABLE {QUIET} (id INT PRIMARY KEY, label VARCHAR(10))",
        f"INSERT INTO {QUIET} VALUES (1, 'a'), (2, 'b')",
    )
    for name in ("orders", "quiet"):
        spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{DB}.{name}")
    (tmp_path / "pipeline").mkdir()
    pipeline = SnapshotPipeline(mysql_server, tmp_path / "pipeline", "verify_exact", TableSelection.of(f"{DB}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(f"UPDATE {TABLE} SET name = 'first window' WHERE id <= 3")
    pipeline.capture("run-1")
    report = run_apply(spark, ApplySpec(pipeline.name, str(pipeline.staging), 1, 1, catalog=CATALOG))
    assert not report.failed, report
    mysql_server.execute(f"UPDATE {TABLE} SET note = 'after apply' WHERE id BETWEEN 10 AND 19")
    yield pipeline


def _request(**settings: object) -> VerifyRequest:
    values: dict[str, object] = {"tables": (TABLE,), **settings}
    return VerifyRequest(pipeline="verify_exact", catalog=CATALOG, rows_per_range=50, **values)  # type: ignore[arg-type]


def test_a_clean_pipeline_under_concurrent_writes_has_no_difference(
    spark: SparkSession, mysql_server: MySqlTestServer, applied: SnapshotPipeline
) -> None:
    writer = Writer(mysql_server)
    writer.thread.start()
    try:
        report = verify_targets(spark, mysql_server.cdc, _request())
    finally:
        writer.stop.set()
        writer.thread.join()
    (table,) = report.tables
    assert writer.statements > 0
    assert not table.problem, table.problem
    assert table.describe().endswith(": equal"), table.describe()
    # The target lagged the source's read: the changes after its frontier were applied in memory.
    assert table.changes_applied >= 10
    assert table.target_frontier != table.gtid_set
    assert table.source_rows_checked == table.target_rows_checked >= ROWS - 10
    assert table.ranges == math.ceil(table.source_rows_checked / 50)
    assert table.ranges_checked == tuple(range(table.ranges))
    assert report.differing == () and report.unverified == ()


def test_planted_differences_are_found_and_named(
    spark: SparkSession, mysql_server: MySqlTestServer, applied: SnapshotPipeline
) -> None:
    target = f"{CATALOG}.{DB}.orders"
    spark.sql(f"UPDATE {target} SET total = 999.99 WHERE id = 40")
    spark.sql(f"DELETE FROM {target} WHERE id = 41")
    spark.sql(
        f"INSERT INTO {target} SELECT 90001, 'planted', 1.00, NULL, _cdc_invalid_values, _cdc_gtid, _cdc_seq, "
        f"_cdc_commit_ts FROM {target} WHERE id = 42"
    )
    report = verify_targets(spark, mysql_server.cdc, _request())
    (table,) = report.tables
    assert (table.missing_rows, table.extra_rows, table.changed_rows) == (1, 1, 1)
    found = {(d.key["id"], d.kind, d.columns) for d in table.differences}
    assert found == {(40, "changed", ("total",)), (41, "missing", ()), (90001, "extra", ())}
    message = report.difference_message()
    assert "verify_exact" in message and TABLE in message and table.gtid_set in message
    assert "id=40 changed (total)" in message and "resnapshot" in message
    with pytest.raises(TargetDiffersError, match=r"id=40 changed \(total\)"):
        check_report(report.as_xcom(), fail_on_difference=True)
    assert check_report(report.as_xcom(), fail_on_difference=False)["tables"][0]["changed_rows"] == 1


def test_changes_a_session_kept_out_of_the_binlog_are_found_by_the_verification(
    spark: SparkSession, mysql_server: MySqlTestServer, applied: SnapshotPipeline
) -> None:
    """``SET SESSION sql_log_bin = 0`` (an account with SYSTEM_VARIABLES_ADMIN) writes without a binlog
    trace: no binlog reader, a replica included, can see it. The verification compares the tables
    themselves and names each such row."""
    mysql_server.execute(
        "SET SESSION sql_log_bin = 0",
        f"UPDATE {DB}.orders SET total = 1.23 WHERE id = 43",
        f"DELETE FROM {DB}.orders WHERE id = 44",
    )
    report = verify_targets(spark, mysql_server.cdc, _request())
    (table,) = report.tables
    found = {(d.key["id"], d.kind, d.columns) for d in table.differences}
    assert found == {(43, "changed", ("total",)), (44, "extra", ())}
    with pytest.raises(TargetDiffersError, match=r"id=43 changed \(total\)"):
        check_report(report.as_xcom(), fail_on_difference=True)


def test_a_sampled_verification_checks_only_its_sample(
    spark: SparkSession, mysql_server: MySqlTestServer, applied: SnapshotPipeline
) -> None:
    report = verify_targets(spark, mysql_server.cdc, _request(sample_fraction=0.25, seed=7))
    (table,) = report.tables
    assert report.mode == "sampled" and table.sampled
    assert len(table.ranges_checked) == 2 and table.ranges == 8
    assert 0 < table.source_rows_checked < ROWS
    again = verify_targets(spark, mysql_server.cdc, _request(sample_fraction=0.25, seed=7))
    assert again.tables[0].ranges_checked == table.ranges_checked
    assert not table.differs


def test_a_target_holding_only_its_snapshot_is_verified_from_the_pipeline_staging(
    spark: SparkSession, mysql_server: MySqlTestServer, applied: SnapshotPipeline
) -> None:
    mysql_server.execute(f"UPDATE {QUIET} SET label = 'moved' WHERE id = 2")  # after the snapshot's read
    without = verify_targets(spark, mysql_server.cdc, _request(tables=(f"{DB}.*",)))
    assert [t.table for t in without.tables] == [TABLE, QUIET]
    assert [t.table for t in without.unverified] == [QUIET] and "staging_uri" in without.tables[1].problem
    with pytest.raises(TargetNotVerifiableError, match="quiet"):
        check_report(without.as_xcom(), fail_on_difference=True)
    report = verify_targets(spark, mysql_server.cdc, _request(tables=(f"{DB}.*",), staging_uri=str(applied.staging)))
    assert report.unverified == () and report.differing == (), report.describe()
    quiet = report.tables[1]
    assert quiet.changes_applied == 1 and quiet.source_rows_checked == quiet.target_rows_checked == 2


def _run_cli(*args: str, conn_json: str, warehouse: str) -> subprocess.CompletedProcess[str]:
    from tests.spark_session import iceberg_jars

    env = {**os.environ, "AIRFLOW_CONN_MYSQL_CDC_VERIFY": conn_json, "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [sys.executable, "-m", "airflow_provider_mysql_cdc", "verify", "--conn-id", "mysql_cdc_verify"]
    command += ["--pipeline", "verify_exact", "--tables", TABLE, "--warehouse", warehouse, "--json"]
    command += ["--rows-per-range", "50", "--master", "local[1]", "--jars", *[str(jar) for jar in iceberg_jars()]]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, check=False, timeout=600)


def _json_report(stdout: str) -> Any:
    """The report the command printed (indented JSON starting on a line of its own; Spark may print
    lines of its own before and after it)."""
    lines = stdout.splitlines()
    text = "\n".join(lines[next(i for i, line in enumerate(lines) if line == "{") :])
    return json.JSONDecoder().raw_decode(text)[0]


def test_the_command_line_verifies_and_exits_by_outcome(
    spark: SparkSession, mysql_server: MySqlTestServer, applied: SnapshotPipeline, airflow_home: object
) -> None:
    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    assert warehouse
    equal = _run_cli(conn_json=mysql_server.airflow_conn_json(), warehouse=warehouse)
    assert equal.returncode == 0, equal.stderr[-3000:]
    report = _json_report(equal.stdout)
    assert report["tables"][0]["table"] == TABLE and report["tables"][0]["changes_applied"] >= 10
    assert mysql_server.cdc.password not in equal.stdout + equal.stderr

    spark.sql(f"DELETE FROM {CATALOG}.{DB}.orders WHERE id = 77")
    differs = _run_cli("--sample-fraction", "1", conn_json=mysql_server.airflow_conn_json(), warehouse=warehouse)
    assert differs.returncode == 1, differs.stderr[-3000:]
    (table,) = _json_report(differs.stdout)["tables"]
    assert table["differences"] == [{"key": {"id": 77}, "kind": "missing", "columns": []}]


def test_a_table_without_a_key_is_verified_as_a_multiset(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """Distinct rows and their copy counts are compared: equal after the apply; one copy planted away
    is one changed row (its count); a change MySQL made after the apply makes it not verified."""
    database = "verify_keyless"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {database}",
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.bag (v INT, d DOUBLE, b BLOB)",
        f"INSERT INTO {database}.bag VALUES (1, -0e0, NULL), (1, 0e0, NULL), (1, 0e0, NULL), (2, NULL, x'00')",
    )
    spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{database}.bag")
    (tmp_path / "pipeline").mkdir()
    pipeline = SnapshotPipeline(mysql_server, tmp_path / "pipeline", database, TableSelection.of(f"{database}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(f"DELETE FROM {database}.bag WHERE v = 2", f"INSERT INTO {database}.bag VALUES (3, 1, '')")
    pipeline.capture("run-1")
    assert not run_apply(spark, ApplySpec(pipeline.name, str(pipeline.staging), 1, 1, catalog=CATALOG)).failed
    request = VerifyRequest(pipeline=database, catalog=CATALOG, tables=(f"{database}.bag",))
    (table,) = verify_targets(spark, mysql_server.cdc, request).tables
    assert not table.problem and table.describe().endswith(": equal"), table.describe()
    assert table.source_rows_checked == table.target_rows_checked == 3  # distinct rows: -0.0 is not 0.0

    spark.sql(f"DELETE FROM {CATALOG}.{database}.bag WHERE v = 1 AND CAST(d AS STRING) = '0.0'")
    (table,) = verify_targets(spark, mysql_server.cdc, request).tables
    assert (table.missing_rows, table.extra_rows, table.changed_rows) == (1, 0, 0), table.describe()

    mysql_server.execute(f"INSERT INTO {database}.bag VALUES (4, 4, '')")
    (table,) = verify_targets(spark, mysql_server.cdc, request).tables
    assert "has no primary key and changed" in table.problem
