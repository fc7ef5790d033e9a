"""The apply's ``partitioning`` setting against real parts: MySQL windows, Spark's MERGE into Iceberg,
and pyiceberg (the independent reader) for the tables' rows and partition specs.

A configured target is created partitioned, evolved when the setting changes and re-created with the
setting's fields; a target the setting does not name keeps its own; a field the table cannot take
stops that table with a named error and the next apply with a correct setting takes the windows. A
column some partition spec of the target takes values from (which Iceberg cannot drop and still
merge into the table) stays in the target when MySQL drops it or a replace loses it; a window that
needs its name for another column, or would drop a column the sort order names, stops that table
with a named error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.core.windows import TableSelection
from tests.exactness.comparison import compare_table
from tests.exactness.iceberg_reader import current_metadata_file, table_directory
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.integration.test_apply import apply, config
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

DB = "apply_parts"


def _static(warehouse: Path, table: str, db: str = DB) -> Any:
    from pyiceberg.table import StaticTable

    metadata = current_metadata_file(table_directory(warehouse, db, table))
    assert metadata is not None, f"{db}.{table} has no Iceberg table"
    return StaticTable.from_metadata(str(metadata))


def spec_fields(warehouse: Path, table: str, db: str = DB) -> list[tuple[str, str]]:
    """The table's current partition fields, as pyiceberg reads them: (transform, source column)."""
    static = _static(warehouse, table, db)
    schema = static.schema()
    return [(str(f.transform), schema.find_column_name(f.source_id)) for f in static.spec().fields]


def newest_files_spec_ids(warehouse: Path, table: str) -> set[int]:
    """The partition spec ids of the data files the table's newest commit added."""
    static = _static(warehouse, table)
    snapshot = static.current_snapshot()
    assert snapshot is not None
    files = static.inspect.files().to_pylist()
    added = {  # status 1: ADDED
        entry["data_file"]["file_path"]
        for entry in static.inspect.entries().to_pylist()
        if entry["snapshot_id"] == snapshot.snapshot_id and entry["status"] == 1
    }
    assert added, "the newest commit added no file"
    return {int(f["spec_id"]) for f in files if f["file_path"] in added and f["content"] == 0}


def _equal(server: MySqlTestServer, warehouse: Path, *tables: str, db: str = DB) -> None:
    for table in tables:
        comparison = compare_table(server, warehouse, db, table)
        assert comparison.equal, comparison.describe()


def _a_scan_of_one_day_plans_only_its_files(server: MySqlTestServer, warehouse: Path) -> None:
    """What a reader gains: pyiceberg's scan of one day of ``events`` plans a tenth of its files or
    fewer, and reads that day's rows."""
    static = _static(warehouse, "events")
    one_day = "created >= '2026-11-05T00:00:00' AND created < '2026-11-06T00:00:00'"
    every_file = {task.file.file_path for task in static.scan().plan_files()}
    day_files = {task.file.file_path for task in static.scan(row_filter=one_day).plan_files()}
    assert day_files and len(day_files) * 10 < len(every_file), (len(day_files), len(every_file))
    day_rows = static.scan(row_filter=one_day).to_arrow().to_pylist()
    expected = server.execute(f"SELECT COUNT(*) FROM {DB}.events WHERE DATE(created) = '2026-11-05'")[0][0]
    assert len(day_rows) == expected > 0


def test_configured_targets_are_created_evolved_and_recreated_partitioned_and_stay_equal(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    warehouse = Path(str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")))
    events = (
        "CREATE TABLE {db}.events "
        "(id BIGINT PRIMARY KEY, created DATETIME(6) NOT NULL, kind VARCHAR(10), amount DECIMAL(10,2))"
    )
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        events.format(db=DB),
        f"CREATE TABLE {DB}.plain (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {DB}.events VALUES "
        + ", ".join(
            f"({i}, '2026-11-{1 + i % 20:02d} 0{i % 10}:00:00.{i:06d}', 'k{i % 6}', {i}.5)" for i in range(1, 201)
        ),
        f"INSERT INTO {DB}.plain VALUES " + ", ".join(f"({i}, {i * 3})" for i in range(1, 21)),
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "parts", TableSelection.of(f"{DB}.*"), chunk_rows=80)
    pipeline.snapshot("run-1")

    # Window 1: the targets are created: events as the pattern says, plain unpartitioned.
    mysql_server.execute(
        f"INSERT INTO {DB}.events VALUES (500, '2026-12-01 10:00:00', 'new', 1.00), "
        "(501, '2025-01-01 00:00:00', NULL, NULL)",
        f"UPDATE {DB}.events SET amount = amount * 2, created = '2026-10-10 10:10:10' WHERE id BETWEEN 10 AND 40",
        f"DELETE FROM {DB}.events WHERE id BETWEEN 100 AND 120",
        f"UPDATE {DB}.plain SET v = -v WHERE id < 5",
    )
    assert pipeline.capture("run-1").window_id == 1
    first = {"apply_parts.ev*": ["bucket(4, id)", "days(created)"]}
    apply(spark, pipeline, 1, partitioning=first)
    assert spec_fields(warehouse, "events") == [("bucket[4]", "id"), ("day", "created")]
    assert spec_fields(warehouse, "plain") == []
    _equal(mysql_server, warehouse, "events", "plain")
    _a_scan_of_one_day_plans_only_its_files(mysql_server, warehouse)

    # Window 2, the setting changed: the target is evolved, and the window's files have the new spec.
    mysql_server.execute(
        f"UPDATE {DB}.events SET kind = 'moved' WHERE id % 9 = 0",
        f"INSERT INTO {DB}.events VALUES (600, '2026-12-02 12:00:00', 'k1', 6.00)",
        f"DELETE FROM {DB}.events WHERE id = 500",
    )
    assert pipeline.capture("run-2").window_id == 2
    report = apply(spark, pipeline, 2, partitioning={"apply_parts.events": ["truncate(2, kind)"]})
    changes = report.tables[f"{DB}.events"].schema_changes
    assert any("DROP PARTITION FIELD bucket(4, `id`)" in s for s in changes), changes
    assert any("ADD PARTITION FIELD truncate(2, `kind`)" in s for s in changes), changes
    assert spec_fields(warehouse, "events") == [("truncate[2]", "kind")]
    current_spec = _static(warehouse, "events").spec().spec_id
    assert newest_files_spec_ids(warehouse, "events") == {current_spec}
    _equal(mysql_server, warehouse, "events", "plain")

    # Window 3: both tables dropped and re-created in MySQL, so both targets are replaced in one commit.
    # events takes the setting's fields; plain, which the setting does not name, keeps the field given
    # to it by hand.
    spark.sql(f"ALTER TABLE {CATALOG}.{DB}.plain ADD PARTITION FIELD bucket(2, id)")
    mysql_server.execute(
        f"DROP TABLE {DB}.events",
        events.format(db=DB),
        f"INSERT INTO {DB}.events VALUES (1, '2026-01-01 00:00:00', 'again', 1.00), "
        "(2, '2026-01-02 00:00:00', 'a', NULL)",
        f"DROP TABLE {DB}.plain",
        f"CREATE TABLE {DB}.plain (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {DB}.plain VALUES (7, 70)",
    )
    assert pipeline.capture("run-3").window_id == 3
    report = apply(spark, pipeline, 3, partitioning={"apply_parts.events": ["truncate(2, kind)"]})
    assert any("replaced" in s for s in report.tables[f"{DB}.events"].schema_changes), report.tables
    assert spec_fields(warehouse, "events") == [("truncate[2]", "kind")]
    assert spec_fields(warehouse, "plain") == [("bucket[2]", "id")]
    _equal(mysql_server, warehouse, "events", "plain")

    # Window 4 with a field the table cannot take: events stops with the named error, plain is applied.
    mysql_server.execute(f"INSERT INTO {DB}.events VALUES (3, '2026-01-03 00:00:00', 'b', 3.00)")
    mysql_server.execute(f"UPDATE {DB}.plain SET v = 71")
    assert pipeline.capture("run-4").window_id == 4
    wrong = run_apply(spark, config(pipeline, 4, partitioning={"apply_parts.events": ["days(kind)"]}))
    assert wrong.failed == [f"{DB}.events"], wrong.tables
    error = wrong.tables[f"{DB}.events"]
    assert error.error_class == "ConfigurationError"
    assert "pipeline 'parts'" in error.error and "days(`kind`)" in error.error and "string" in error.error
    _equal(mysql_server, warehouse, "plain")
    assert compare_table(mysql_server, warehouse, DB, "events").only_mysql  # the window is not in it yet

    # The setting corrected: the next apply takes the window, nothing was lost.
    apply(spark, pipeline, 4, partitioning={"apply_parts.events": ["months(created)", "kind"]})
    assert spec_fields(warehouse, "events") == [("month", "created"), ("identity", "kind")]
    _equal(mysql_server, warehouse, "events", "plain")


def _create_part_drops(mysql_server: MySqlTestServer, db: str) -> None:
    """The tables of the drop test."""
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.logs (id INT PRIMARY KEY, created DATE NOT NULL, v INT)",
        f"CREATE TABLE {db}.marks (id INT PRIMARY KEY, tag VARCHAR(8), v INT)",
        f"CREATE TABLE {db}.plain (id INT PRIMARY KEY, a INT, b INT)",
        f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, placed DATE, v INT)",
        f"CREATE TABLE {db}.zones (id INT PRIMARY KEY, region VARCHAR(8), v INT)",
        f"CREATE TABLE {db}.kinds (id INT PRIMARY KEY, k INT)",
        f"INSERT INTO {db}.orders VALUES " + ", ".join(f"({i}, '2026-10-{i:02d}', {i})" for i in range(1, 21)),
        f"INSERT INTO {db}.logs VALUES " + ", ".join(f"({i}, '2026-11-{1 + i % 6:02d}', {i})" for i in range(1, 41)),
        f"INSERT INTO {db}.marks VALUES " + ", ".join(f"({i}, 't{i % 4}x', {i})" for i in range(1, 21)),
        f"INSERT INTO {db}.plain VALUES " + ", ".join(f"({i}, {i}, {-i})" for i in range(1, 11)),
        f"INSERT INTO {db}.zones VALUES " + ", ".join(f"({i}, 'r{i % 3}', {i})" for i in range(1, 16)),
        f"INSERT INTO {db}.kinds VALUES (1, 1), (2, 2)",
    )


def _kept(report: Any, db: str, table: str, column: str) -> bool:
    """Whether the apply reported ``column`` of ``db.table`` kept in its target (not dropped)."""
    return any(c.startswith(f"kept `{column}`") for c in report.tables[f"{db}.{table}"].schema_changes)


def test_a_column_a_partition_spec_takes_values_from_stays_in_the_target(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """Iceberg refuses to drop a source column of the current partition spec, and once a source column
    of an earlier spec is dropped (also by a replace), every later MERGE into the table fails. Such a
    column is kept in the target, NULL from then on, and the windows go on; where the window needs its
    name for a new column, or the table's sort order names a column, the table stops with the named
    error, its target left as it was, while the other tables go on."""
    db = "apply_part_drops"
    warehouse = Path(str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")))
    _create_part_drops(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "part_drops", TableSelection.of(f"{db}.*"), chunk_rows=100)
    pipeline.snapshot("run-1")
    by_day = {f"{db}.logs": ["days(created)"], f"{db}.marks": ["truncate(2, tag)"]}
    by_bucket = {f"{db}.logs": ["bucket(2, id)"], f"{db}.marks": ["truncate(2, tag)"]}

    # Window 1 creates the targets (logs and marks partitioned by the setting; zones and kinds and the
    # sort order of orders by hand afterwards); window 2 moves logs to bucket(2, id), so days(created)
    # stays the spec of the files written before.
    mysql_server.execute(f"UPDATE {db}.logs SET v = v + 100 WHERE id < 10", f"UPDATE {db}.marks SET v = 0")
    assert pipeline.capture("run-1").window_id == 1
    apply(spark, pipeline, 1, partitioning=by_day)
    assert spec_fields(warehouse, "logs", db) == [("day", "created")]
    spark.sql(f"ALTER TABLE {CATALOG}.{db}.orders WRITE ORDERED BY placed")
    spark.sql(f"ALTER TABLE {CATALOG}.{db}.zones ADD PARTITION FIELD region")
    spark.sql(f"ALTER TABLE {CATALOG}.{db}.kinds ADD PARTITION FIELD bucket(2, k)")
    mysql_server.execute(f"INSERT INTO {db}.logs VALUES (41, '2026-12-01', 41)", f"UPDATE {db}.zones SET v = -v")
    assert pipeline.capture("run-2").window_id == 2
    apply(spark, pipeline, 2, partitioning=by_bucket)
    assert spec_fields(warehouse, "logs", db) == [("bucket[2]", "id")]
    _equal(mysql_server, warehouse, "logs", "marks", "plain", "orders", "zones", db=db)
    stopped = ("marks", "orders", "kinds")
    before = {t: _static(warehouse, t, db).current_snapshot().snapshot_id for t in stopped}

    # Window 3: MySQL drops logs.created (an earlier spec's source), replaces marks.tag (the current
    # spec's source) by a new column of that name, drops orders.placed (its sort order's column) and
    # plain.b (nothing's), re-creates zones without region (its spec's source) and kinds with k a string.
    mysql_server.execute(
        f"ALTER TABLE {db}.logs DROP COLUMN created",
        f"UPDATE {db}.logs SET v = -v WHERE id % 3 = 0",
        f"DELETE FROM {db}.logs WHERE id IN (5, 41)",
        f"ALTER TABLE {db}.marks DROP COLUMN tag",
        f"ALTER TABLE {db}.marks ADD COLUMN tag INT",
        f"UPDATE {db}.marks SET tag = id, v = id WHERE id < 8",
        f"ALTER TABLE {db}.orders DROP COLUMN placed",
        f"UPDATE {db}.orders SET v = v * 2 WHERE id > 15",
        f"ALTER TABLE {db}.plain DROP COLUMN b",
        f"UPDATE {db}.plain SET a = a * 10",
        f"DROP TABLE {db}.zones",
        f"CREATE TABLE {db}.zones (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.zones VALUES " + ", ".join(f"({i}, {i * 7})" for i in range(1, 11)),
        f"DROP TABLE {db}.kinds",
        f"CREATE TABLE {db}.kinds (id INT PRIMARY KEY, k VARCHAR(5))",
        f"INSERT INTO {db}.kinds VALUES (1, 'one')",
    )
    assert pipeline.capture("run-3").window_id == 3
    third = run_apply(spark, config(pipeline, 3, partitioning=by_bucket, drop_dropped_columns=True))
    assert sorted(third.failed) == sorted(f"{db}.{t}" for t in stopped), third.tables
    _assert_stopped(third, warehouse, db, before)
    assert _kept(third, db, "logs", "created") and _kept(third, db, "zones", "region"), third.tables
    assert not _kept(third, db, "plain", "b")
    _equal(mysql_server, warehouse, "logs", "plain", "zones", db=db)
    assert "created" in _static(warehouse, "logs", db).schema().column_names
    regions = _static(warehouse, "zones", db).scan().to_arrow().column("region")
    assert len(regions) == 10 and regions.null_count == 10  # the re-created table's rows, none with a region
    assert "b" not in _static(warehouse, "plain", db).schema().column_names

    # The fix the sort order's message names: the next run drops the column and applies the window.
    spark.sql(f"ALTER TABLE {CATALOG}.{db}.orders WRITE UNORDERED")
    unsorted = run_apply(spark, config(pipeline, 3, partitioning=by_bucket, drop_dropped_columns=True))
    assert sorted(unsorted.failed) == [f"{db}.kinds", f"{db}.marks"], unsorted.tables
    _equal(mysql_server, warehouse, "orders", db=db)
    assert "placed" not in _static(warehouse, "orders", db).schema().column_names

    # Window 4: the kept columns' tables keep taking updates and deletes (files of the earlier specs too).
    mysql_server.execute(
        f"UPDATE {db}.zones SET v = v + 1000",
        f"DELETE FROM {db}.zones WHERE id = 7",
        f"UPDATE {db}.logs SET v = 0 WHERE id < 20",
        f"DELETE FROM {db}.logs WHERE id = 30",
    )
    assert pipeline.capture("run-4").window_id == 4
    later = run_apply(spark, config(pipeline, 4, partitioning=by_bucket, drop_dropped_columns=True))
    assert sorted(later.failed) == [f"{db}.kinds", f"{db}.marks"], later.tables
    _equal(mysql_server, warehouse, "logs", "zones", "plain", "orders", db=db)


def _assert_stopped(report: Any, warehouse: Path, db: str, before: dict[str, int]) -> None:
    """The named errors of the tables the window cannot change, and their targets as they were."""
    marks, orders, kinds = (report.tables[f"{db}.{t}"] for t in ("marks", "orders", "kinds"))
    assert {r.error_class for r in (marks, orders, kinds)} == {"UnsupportedSchemaChangeError"}
    assert "column 'tag' cannot be dropped" in marks.error and "truncate(2, `tag`)" in marks.error, marks.error
    assert "needs its name for another column" in marks.error and "re-snapshot" in marks.error
    assert "DROP COLUMN tag" in marks.error and "window 3 of pipeline 'part_drops'" in marks.error
    assert "column 'placed' cannot be dropped" in orders.error and "sort order names it" in orders.error
    assert "WRITE UNORDERED" in orders.error, orders.error
    assert "column 'k'" in kinds.error and "bucket(2, `k`)" in kinds.error, kinds.error
    assert "comes back as string instead of int" in kinds.error and "resnapshot=" in kinds.error
    for table, snapshot_id in before.items():  # left as they were: no commit, the column still there
        assert _static(warehouse, table, db).current_snapshot().snapshot_id == snapshot_id
    assert "tag" in _static(warehouse, "marks", db).schema().column_names
    assert "placed" in _static(warehouse, "orders", db).schema().column_names
