"""Integration tests: Apache Iceberg 1.10.2 on a local Spark 3.5 session.

The Iceberg runtime jar comes from ``scripts/iceberg_jars.py`` (cached in
``<repo>/.cache/jars``) and is handed to Spark through ``spark.jars`` before the
JVM starts: jars given to a later SparkContext of the same Python process, or to
an already running session, do not reach the driver's class loader.

The tests cover what the CDC apply step relies on:

* ``MERGE INTO`` with delete / update / insert clauses driven by an ``op`` column;
* snapshot summary properties from a ``DataFrameWriterV2`` write option;
* snapshot summary properties on a SQL ``MERGE`` through
  ``org.apache.iceberg.spark.CommitMetadata.withCommitProperties`` called over py4j.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

REPO_ROOT = Path(__file__).resolve().parents[2]
CATALOG = "lake"


def _load_iceberg_jars() -> ModuleType:
    """Import ``scripts/iceberg_jars.py`` without putting ``scripts`` on sys.path."""
    path = REPO_ROOT / "scripts" / "iceberg_jars.py"
    spec = importlib.util.spec_from_file_location("iceberg_jars", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _java_available() -> bool:
    """Tell whether a java launcher can be found for Spark."""
    java_home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java")) or bool(java_home and (Path(java_home) / "bin" / "java").is_file())


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A local SparkSession with Iceberg's extensions and a Hadoop catalog ``lake``."""
    from pyspark import SparkContext

    if not _java_available():
        pytest.fail("no java runtime found: Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    if SparkContext._active_spark_context is not None:
        pytest.fail(
            "a SparkContext is already running in this process, so the Iceberg jars and "
            "extensions cannot be configured; run the spark-marked tests in their own "
            "pytest process (e.g. `pytest -m spark`)."
        )
    if SparkContext._gateway is not None:
        pytest.fail(
            "the Spark JVM of this process was started earlier without the Iceberg jars "
            "(spark.jars only takes effect when the JVM starts); run the spark-marked "
            "tests in their own pytest process."
        )

    iceberg_jars = _load_iceberg_jars()
    try:
        jars = iceberg_jars.ensure_jars(python=sys.executable)
    except iceberg_jars.JarAssemblyError as exc:
        pytest.fail(f"could not assemble the Iceberg jars: {exc}")

    warehouse = tmp_path_factory.mktemp("iceberg-warehouse")
    session_warehouse = tmp_path_factory.mktemp("spark-warehouse")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        session = (
            SparkSession.builder.master("local[2]")
            .appName("test_spark_iceberg")
            .config("spark.jars", ",".join(str(jar) for jar in jars))
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.warehouse.dir", str(session_warehouse))
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
            .config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
            .config(f"spark.sql.catalog.{CATALOG}.warehouse", str(warehouse))
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
        # pytest has closed the captured streams.
        logging.getLogger("py4j").setLevel(logging.WARNING)
        try:
            yield session
        finally:
            session.stop()


def _snapshots(spark: SparkSession, table: str) -> list[Any]:
    """Return the rows of ``<table>.snapshots`` in commit order."""
    return spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots ORDER BY committed_at, snapshot_id"
    ).collect()


def _with_commit_properties(spark: SparkSession, properties: dict[str, str], action: Callable[[], object]) -> None:
    """Run *action* inside ``CommitMetadata.withCommitProperties`` through py4j.

    Iceberg keeps the properties in a JVM thread-local. PySpark's pinned-thread
    py4j mode runs the Python ``Callable`` on the JVM thread that called
    ``withCommitProperties``, and the SQL issued from it stays on that thread, so
    every Iceberg commit made by *action* carries the properties.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    gateway = sc._gateway
    jvm = sc._jvm
    assert gateway is not None and jvm is not None
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]

    class _PyCallable:
        """A Python implementation of ``java.util.concurrent.Callable``."""

        def call(self) -> None:
            action()

        class Java:
            implements = ["java.util.concurrent.Callable"]

    jprops = jvm.java.util.HashMap()
    for key, value in properties.items():
        jprops.put(key, value)
    runtime_exception = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(jprops, _PyCallable(), runtime_exception)


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

    _with_commit_properties(
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


def test_commit_metadata_failure_propagates_and_commits_nothing(spark: SparkSession) -> None:
    """An error inside the callable reaches Python and leaves the table unchanged."""
    table = f"{CATALOG}.db.payments"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, city STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ann', 'oslo')")

    with pytest.raises(Exception, match="no_such_view"):
        _with_commit_properties(
            spark,
            {"cdc.window_id": "9"},
            lambda: spark.sql(MERGE_SQL.format(target=table, source="no_such_view")),
        )
    spark.sql(f"INSERT INTO {table} VALUES (2, 'bob', 'rome')")

    snapshots = _snapshots(spark, table)
    assert [s.operation for s in snapshots] == ["append", "append"]
    assert all("cdc.window_id" not in s.summary for s in snapshots)
