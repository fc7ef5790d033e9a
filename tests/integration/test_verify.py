"""The Iceberg-versus-MySQL check (:mod:`airflow_provider_mysql_cdc.apply.verify`) against a real MySQL
server and Spark + Iceberg: equal after an apply, and every kind of difference reported once MySQL moves on."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql, target_name
from airflow_provider_mysql_cdc.core.windows import TableSelection
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "verify_main"


def _create(server: MySqlTestServer) -> None:
    server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        # Types whose comparison needs care: a map (_cdc_invalid_values, from a zero date), floats,
        # bytes, unsigned 64-bit, JSON text, TIME, TIMESTAMP; and a composite key.
        f"CREATE TABLE {DB}.things (id INT PRIMARY KEY, name VARCHAR(40), d DATE, f FLOAT, b VARBINARY(8), "
        "u BIGINT UNSIGNED, j JSON, t TIME(6), ts TIMESTAMP(6) NULL)",
        f"CREATE TABLE {DB}.pairs (a INT, b VARCHAR(10), n INT, PRIMARY KEY (a, b))",
        "SET SESSION sql_mode = ''",
        "SET SESSION time_zone = '+00:00'",
        f"INSERT INTO {DB}.things VALUES "
        "(1, 'é 😀', '2024-01-15', 1.1, x'00ff', 18446744073709551615, '{\"a\": [1, 2]}', '-838:59:59', "
        "'2024-01-15 10:11:12.5'), "
        "(2, NULL, '0000-00-00', NULL, NULL, NULL, NULL, NULL, NULL), "
        "(3, 'three', '1000-01-01', -0.5, x'', 0, 'null', '00:00:00.000001', '1970-01-01 00:00:01')",
        f"INSERT INTO {DB}.pairs VALUES (1, 'x', 10), (1, 'y', 11), (2, 'x', 20)",
    )


def test_equal_after_an_apply_and_every_difference_reported_once_mysql_moves_on(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    _create(mysql_server)
    (tmp_path / "pipeline").mkdir()
    pipeline = SnapshotPipeline(mysql_server, tmp_path / "pipeline", "verify_main", TableSelection.of(f"{DB}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(f"UPDATE {DB}.pairs SET n = n + 1 WHERE a = 1", f"DELETE FROM {DB}.things WHERE id = 3")
    pipeline.capture("run-1")
    report = run_apply(spark, ApplySpec(pipeline.name, str(pipeline.staging), 1, 1, catalog=CATALOG))
    assert not report.failed, report

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    tables = [f"{DB}.things", f"{DB}.pairs"]
    results = compare_with_mysql(spark, mysql_server.cdc, tables, catalog=CATALOG, scratch_uri=str(scratch))
    assert [(r.table, r.equal, r.mysql_rows, r.iceberg_rows) for r in results] == [
        (f"{DB}.things", True, 2, 2),
        (f"{DB}.pairs", True, 3, 3),
    ], [r.describe() for r in results]
    assert results[0].describe() == f"{DB}.things: 2 rows, equal"
    assert list(scratch.iterdir()) == []  # the verification snapshot is deleted afterwards

    # MySQL moves on without an apply: a changed row, a new row, a deleted row, a changed invalid value.
    mysql_server.execute(
        "SET SESSION sql_mode = ''",
        f"UPDATE {DB}.things SET name = 'changed' WHERE id = 1",
        f"UPDATE {DB}.things SET d = '2024-02-00' WHERE id = 2",
        f"INSERT INTO {DB}.pairs VALUES (3, 'z', 30)",
        f"DELETE FROM {DB}.pairs WHERE a = 2",
    )
    things, pairs = compare_with_mysql(spark, mysql_server.cdc, tables, catalog=CATALOG, max_examples=5)
    assert not things.equal and not pairs.equal
    assert (things.mysql_rows, things.iceberg_rows, things.only_in_mysql, things.only_in_iceberg) == (2, 2, 2, 2)
    assert sorted(row["name"] or "" for row in things.examples_only_in_mysql) == ["", "changed"]
    assert sorted(row["name"] or "" for row in things.examples_only_in_iceberg) == ["", "é 😀"]
    assert (pairs.mysql_rows, pairs.iceberg_rows, pairs.only_in_mysql, pairs.only_in_iceberg) == (3, 3, 1, 1)
    assert [(row["a"], row["b"], row["n"]) for row in pairs.examples_only_in_mysql] == [(3, "z", 30)]
    assert [(row["a"], row["b"], row["n"]) for row in pairs.examples_only_in_iceberg] == [(2, "x", 20)]
    text = pairs.describe()
    assert text.startswith(f"{DB}.pairs: DIFFERENT: MySQL 3 rows, ") and "1 only in MySQL, 1 only in Iceberg" in text
    assert "only in MySQL  : a=3, b='z', n=30" in text

    # A table never applied, a table MySQL does not have, and a column the target lacks.
    mysql_server.execute(
        f"CREATE TABLE {DB}.fresh (id INT PRIMARY KEY)", f"ALTER TABLE {DB}.pairs ADD COLUMN extra INT DEFAULT 7"
    )
    fresh, absent, pairs = compare_with_mysql(
        spark, mysql_server.cdc, [f"{DB}.fresh", f"{DB}.absent", f"{DB}.pairs"], catalog=CATALOG
    )
    assert fresh.problem == f"{target_name(f'{DB}.fresh', CATALOG)} does not exist" and not fresh.equal
    assert absent.problem == "no such table in MySQL" and not absent.equal
    assert pairs.missing_columns == ("extra",) and not pairs.equal
