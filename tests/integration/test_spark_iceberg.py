"""Integration tests: Apache Iceberg 1.10.2 on a local Spark 3.5 session.

The session is the test run's shared ``spark`` fixture (``tests/spark_session.py``).

The tests cover what the CDC apply step relies on:

* ``MERGE INTO`` with delete / update / insert clauses driven by an ``op`` column;
* snapshot summary properties from a ``DataFrameWriterV2`` write option;
* snapshot summary properties on a SQL ``MERGE`` through
  ``org.apache.iceberg.spark.CommitMetadata.withCommitProperties`` called over py4j;
* a snapshot's summary and parent read in one call (its JSON) and whether a table exists.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_mysql_cdc.apply.iceberg_session import snapshot_summary, table_exists, with_commit_properties
from tests.spark_session import CATALOG

pytestmark = pytest.mark.spark


def _snapshots(spark: SparkSession, table: str) -> list[Any]:
    """Return the rows of ``<table>.snapshots`` in commit order."""
    return spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots ORDER BY committed_at, snapshot_id"
    ).collect()


def _changes(spark: SparkSession, rows: list[tuple[object, ...]]) -> DataFrame:
    """A change batch with the target's columns plus the CDC ``op`` column."""
    return spark.createDataFrame(rows, "id BIGINT, name STRING, city STRING, op STRING")


MERGE_SQL = """
    MERGE INTO {target} t
    USING {source} s
    ON t.id = s.id
    WHEN MATCHED AND s.op = 'd' THEN DELETE
    WHEN MATCHED THEN UPDATE SET *
    WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT *
"""


def test_merge_into_applies_deletes_updates_and_inserts(spark: SparkSession) -> None:
    """A real MERGE INTO applies one change per key with delete/update/insert."""
    table = f"{CATALOG}.db.customers"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, city STRING) USING iceberg")
    spark.sql(
        f"INSERT INTO {table} VALUES (1, 'ann', 'oslo'), (2, 'bob', 'rome'), (3, 'cid', 'lima'), (4, 'dee', 'kyiv')"
    )
    _changes(
        spark,
        [
            (1, "ann", "bergen", "u"),  # update
            (2, None, None, "d"),  # delete of an existing row
            (3, "cid", "lima", "r"),  # snapshot read of an unchanged row: rewritten as is
            (5, "eve", "baku", "c"),  # insert
            (9, None, None, "d"),  # delete of a row that was never there: ignored
        ],
    ).createOrReplaceTempView("customer_changes")

    spark.sql(MERGE_SQL.format(target=table, source="customer_changes"))

    rows = [tuple(r) for r in spark.sql(f"SELECT id, name, city FROM {table} ORDER BY id").collect()]
    assert rows == [
        (1, "ann", "bergen"),
        (3, "cid", "lima"),
        (4, "dee", "kyiv"),
        (5, "eve", "baku"),
    ]
    snapshots = _snapshots(spark, table)
    assert [s.operation for s in snapshots] == ["append", "overwrite"]
    assert snapshots[-1].parent_id == snapshots[0].snapshot_id


def test_writeto_snapshot_property_lands_in_summary(spark: SparkSession) -> None:
    """DataFrameWriterV2's ``snapshot-property.*`` option is stored in the snapshot summary."""
    table = f"{CATALOG}.db.events"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, city STRING) USING iceberg")
    df = spark.createDataFrame([(1, "ann", "oslo"), (2, "bob", "rome")], "id BIGINT, name STRING, city STRING")

    df.writeTo(table).option("snapshot-property.cdc.window_id", "7").append()

    snapshots = _snapshots(spark, table)
    assert len(snapshots) == 1
    summary = snapshots[0].summary
    assert snapshots[0].operation == "append"
    assert summary["cdc.window_id"] == "7"
    assert summary["added-records"] == "2"
    assert spark.sql(f"SELECT summary['cdc.window_id'] AS w FROM {table}.snapshots").collect()[0].w == "7"


def test_merge_carries_commit_properties_via_commit_metadata(spark: SparkSession) -> None:
    """A SQL MERGE run inside CommitMetadata.withCommitProperties stores the properties."""
    table = f"{CATALOG}.db.orders"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, city STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ann', 'oslo'), (2, 'bob', 'rome')")
    _changes(spark, [(1, "ann", "paris", "u"), (2, None, None, "d"), (3, "cid", "lima", "c")]).createOrReplaceTempView(
        "order_changes"
    )

    with_commit_properties(
        spark,
        {"cdc.window_id": "8", "snapshot-property.cdc.source": "mysql"},
        lambda: spark.sql(MERGE_SQL.format(target=table, source="order_changes")),
    )
    # The thread-local is cleared afterwards: a later commit carries nothing.
    spark.sql(f"INSERT INTO {table} VALUES (4, 'dee', 'kyiv')")

    rows = [tuple(r) for r in spark.sql(f"SELECT id, name, city FROM {table} ORDER BY id").collect()]
    assert rows == [(1, "ann", "paris"), (3, "cid", "lima"), (4, "dee", "kyiv")]
    snapshots = _snapshots(spark, table)
    assert [s.operation for s in snapshots] == ["append", "overwrite", "append"]
    assert "cdc.window_id" not in snapshots[0].summary
    merge_summary = snapshots[1].summary
    assert merge_summary["cdc.window_id"] == "8"
    # withCommitProperties strips the "snapshot-property." prefix.
    assert merge_summary["cdc.source"] == "mysql"
    assert "cdc.window_id" not in snapshots[2].summary


def test_snapshot_summary_from_json_equals_the_java_map(spark: SparkSession) -> None:
    """``snapshot_summary`` (the snapshot's JSON, one call into the JVM) gives every snapshot of a
    history exactly the entries of its Java summary map and its parent's id; ``table_exists`` tells a
    table from a missing one, also in a missing namespace and with quoted parts."""
    table = f"{CATALOG}.`db.dotted`.`summary``s`"
    assert not table_exists(spark, table)
    assert not table_exists(spark, f"{CATALOG}.no_such_namespace.t")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, city STRING) USING iceberg")
    assert table_exists(spark, table)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ann', 'oslo'), (2, 'bob', 'rome')")
    _changes(spark, [(1, "ann", "paris", "u"), (2, None, None, "d")]).createOrReplaceTempView("summary_changes")
    properties = {"cdc.window_id": "9", "cdc.upper": 'uuid:1-5 "quoted" \\ ünïcode'}
    with_commit_properties(
        spark, properties, lambda: spark.sql(MERGE_SQL.format(target=table, source="summary_changes"))
    )

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    iceberg = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    snapshot = iceberg.currentSnapshot()
    seen = []
    while snapshot is not None:
        summary, parent = snapshot_summary(jvm, snapshot)
        java_parent = snapshot.parentId()
        assert summary == {str(k): str(v) for k, v in dict(snapshot.summary()).items()}
        assert parent == (None if java_parent is None else int(java_parent))
        seen.append(summary)
        snapshot = None if parent is None else iceberg.snapshot(parent)
    assert len(seen) == 2
    assert seen[0]["cdc.upper"] == properties["cdc.upper"] and "cdc.window_id" not in seen[1]
    assert "operation" not in seen[0] and seen[0]["total-records"] == "1"


def test_commit_metadata_failure_propagates_and_commits_nothing(spark: SparkSession) -> None:
    """An error inside the callable reaches Python and leaves the table unchanged."""
    table = f"{CATALOG}.db.payments"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, city STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ann', 'oslo')")

    with pytest.raises(Exception, match="no_such_view"):
        with_commit_properties(
            spark,
            {"cdc.window_id": "9"},
            lambda: spark.sql(MERGE_SQL.format(target=table, source="no_such_view")),
        )
    spark.sql(f"INSERT INTO {table} VALUES (2, 'bob', 'rome')")

    snapshots = _snapshots(spark, table)
    assert [s.operation for s in snapshots] == ["append", "append"]
    assert all("cdc.window_id" not in s.summary for s in snapshots)
