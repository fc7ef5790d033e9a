"""The harness checks itself: the independent reader honours deletes, the comparison sees every type
the same on both sides, and it reports exactly the rows edited behind the pipeline's back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest

from tests.exactness.comparison import compare_table
from tests.exactness.harness import ExactnessPipeline, NotExact
from tests.exactness.iceberg_reader import read_iceberg_table
from tests.integration.test_type_roundtrip import (
    CASES,
    TEMPORAL,
    VECTOR,
    _version,
    create_table,
    insert_rows,
    write_session,
)
from tests.mysql_servers import MySqlTestServer

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

SHOP = (
    "CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(8,2), seen DATETIME(3))",
    "INSERT INTO {db}.items VALUES "
    + ", ".join(f"({i}, 'item{i}', {i}.25, '2024-01-{i:02d} 10:00:00.{i:03d}')" for i in range(1, 21)),
)


def _changed_shop(new_pipeline: Callable[..., ExactnessPipeline]) -> ExactnessPipeline:
    """A table through a snapshot and a window of updates, deletes, inserts and a key change."""
    pipeline = new_pipeline(*SHOP)
    db = pipeline.databases[0]
    pipeline.start()
    pipeline.sql(
        f"UPDATE {db}.items SET price = price * 2 WHERE id <= 8",
        f"DELETE FROM {db}.items WHERE id IN (3, 9, 15)",
        f"INSERT INTO {db}.items VALUES (21, 'new', 1.00, NULL)",
        f"UPDATE {db}.items SET id = 100 WHERE id = 20",
    )
    pipeline.window()
    return pipeline


def test_the_reader_honours_position_deletes(pipeline_for: Callable[..., ExactnessPipeline]) -> None:
    """The applied table is merge-on-read: its data files still hold the replaced and deleted rows, and
    pyiceberg returns only the live ones (the window's comparison above passed on them)."""
    pipeline = _changed_shop(pipeline_for)
    db = pipeline.databases[0]
    contents = read_iceberg_table(pipeline.warehouse, db, "items")
    assert contents is not None
    assert int(contents.summary["total-position-deletes"]) > 0, contents.summary
    assert int(contents.summary["total-delete-files"]) > 0, contents.summary

    from pyiceberg.table import StaticTable

    tasks = list(StaticTable.from_metadata(str(contents.metadata_file)).scan().plan_files())
    assert any(task.delete_files for task in tasks)
    raw_rows = sum(pq.read_metadata(urlparse(task.file.file_path).path).num_rows for task in tasks)
    live = pipeline.server.execute(f"SELECT COUNT(*) FROM {db}.items")[0][0]
    assert len(contents.rows) == live < raw_rows  # the deleted and replaced rows are in the files, not in the scan
    assert {row["id"] for row in contents.rows} == {
        row[0] for row in pipeline.server.execute(f"SELECT id FROM {db}.items")
    }


def test_the_comparison_reports_exactly_the_rows_edited_behind_the_pipelines_back(
    pipeline_for: Callable[..., ExactnessPipeline], spark: Any
) -> None:
    pipeline = _changed_shop(pipeline_for)
    db = pipeline.databases[0]
    target = f"lake.{db}.items"
    spark.sql(f"UPDATE {target} SET name = 'tampered' WHERE id = 5")
    (comparison,) = pipeline.compare([(db, "items")])
    assert not comparison.equal and not comparison.problems
    assert [(row[:2], n) for row, n in comparison.only_mysql] == [((("int", 5), ("text", "item5")), 1)]
    assert [(row[:2], n) for row, n in comparison.only_iceberg] == [((("int", 5), ("text", "tampered")), 1)]
    message = comparison.describe()
    assert "MySQL   (5, 'item5', '10.50', '2024-01-05 10:00:00.005')" in message, message
    assert "Iceberg (5, 'tampered', '10.50', '2024-01-05 10:00:00.005')" in message, message
    with pytest.raises(NotExact, match="tampered"):
        pipeline.assert_exact()

    # A row deleted, a row duplicated (a multiset: twice is not once), a column dropped.
    spark.sql(f"UPDATE {target} SET name = 'item5' WHERE id = 5")
    spark.sql(f"DELETE FROM {target} WHERE id = 6")
    spark.sql(f"INSERT INTO {target} SELECT * FROM {target} WHERE id = 7")
    (comparison,) = pipeline.compare([(db, "items")])
    assert [row[0] for row, _ in comparison.only_mysql] == [("int", 6)]
    assert [(row[0], n) for row, n in comparison.only_iceberg] == [(("int", 7), 1)]
    spark.sql(f"ALTER TABLE {target} DROP COLUMN seen")
    (comparison,) = pipeline.compare([(db, "items")])
    assert comparison.problems == ("MySQL column(s) missing in Iceberg: seen (compared without them)",)


def test_the_comparison_reads_every_type_of_the_type_map_alike(
    pipeline_for: Callable[..., ExactnessPipeline], mysql_server: MySqlTestServer
) -> None:
    """Every case of the type round trip (every MySQL type with its edge values, invalid dates and
    NULLs, as the staging is checked against SELECT there) through a snapshot and a window of updates,
    deletes and inserts: both sides of the comparison agree on every value."""
    pipeline = pipeline_for()
    db = pipeline.databases[0]
    cases = [case for case in CASES if case is not VECTOR or _version(mysql_server) >= (9, 0)]
    for case in cases:
        insert_rows(mysql_server, case, create_table(mysql_server, case, db))
    pipeline.start()
    for case in cases:
        table = f"`{db}`.`{case.name}`"
        names = ", ".join(f"`{col.name}`" for col in case.columns)
        pipeline.sql(
            *(f"UPDATE {table} SET {sets} WHERE id = {i}" for i, sets in case.updates),
            *(f"DELETE FROM {table} WHERE id = {i}" for i in case.deletes),
            *(
                f"INSERT INTO {table} (id, {names}) VALUES ({100 + i}, {values})"
                for i, values in enumerate(case.rows, 1)
            ),
            session=write_session(case),
        )
    record = pipeline.window()
    assert len(record.comparisons) == len(cases) and all(c.mysql_rows > 0 for c in record.comparisons)
    temporal = compare_table(mysql_server, pipeline.warehouse, db, TEMPORAL.name)
    assert temporal.equal and temporal.mysql_rows == 2 * len(TEMPORAL.rows) - len(TEMPORAL.deletes)
    contents = read_iceberg_table(pipeline.warehouse, db, TEMPORAL.name)
    assert contents is not None and any(row["_cdc_invalid_values"] for row in contents.rows)
