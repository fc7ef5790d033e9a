"""A rehearsal of the apply's MERGE, for a warm Spark service to run in its idle time.

The first MERGE a JVM runs is slow: Spark's and Iceberg's classes load and their code runs interpreted
until the JIT compiles it. A warm service's first request is often the load of a snapshot, which does not
MERGE, so the next window's apply paid that cost (about 1 s of a 1,000-change window's 2 s here). After
its first request the service rehearses once: the apply's steps (staged Parquet read back, each key's last
change, a MERGE with a key filter that deletes, updates and inserts, and its commit) on a few rows of a
scratch table. The table lives in a Hadoop catalog of its own on the service's private folder, never in
the user's catalog, and is removed afterwards. Only on a local master: the executors of a cluster could not
read the driver's folder.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.apply.merge_sql import OP_COLUMN, TARGET_PROPERTIES, merge_statement, merge_update_value
from airflow_provider_mysql_cdc.apply.plan import KeyFilter, quote
from airflow_provider_mysql_cdc.apply.staged_rows import SEQ_COLUMN, key_match, last_change_per_key, sql_string

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("airflow_provider_mysql_cdc.apply")

#: The Spark catalog of the rehearsal's scratch table (registered by :func:`rehearse_merge`).
REHEARSAL_CATALOG = "mysql_cdc_rehearsal"
_COLUMNS = (
    ("id", "BIGINT"),
    ("n", "INT"),
    ("s", "STRING"),
    ("amount", "DECIMAL(12,2)"),
    ("at", "TIMESTAMP_NTZ"),
    ("seen", "TIMESTAMP"),
)
_ROWS = 64
#: The scratch table's rows after the MERGE: the 32 keys it does not touch, and of the 32 it updates and
#: the 32 it inserts, the three in four it does not delete.
REHEARSAL_ROWS_AFTER = _ROWS // 2 + 2 * (_ROWS // 2 * 3 // 4)


def rehearse_merge(spark: SparkSession, warehouse: Path) -> int:
    """Run the apply's kind of MERGE once on a scratch table under ``warehouse`` (created, then removed
    with everything in it); return the rows the table held after it (:data:`REHEARSAL_ROWS_AFTER`)."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    prefix = f"spark.sql.catalog.{REHEARSAL_CATALOG}"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "hadoop")
    spark.conf.set(f"{prefix}.warehouse", warehouse.resolve().as_uri())
    table = f"{REHEARSAL_CATALOG}.rehearsal.scratch"
    properties = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in TARGET_PROPERTIES.items())
    rows = (
        "SELECT id, CAST(id AS INT) AS n, CAST(id AS STRING) AS s, CAST(id / 4 AS DECIMAL(12,2)) AS amount, "
        "TIMESTAMP_NTZ'2024-01-01 00:00:00' AS at, TIMESTAMP'2024-01-01 00:00:00' AS seen FROM range({})"
    )
    try:
        definition = ", ".join(f"{name} {type_text}" for name, type_text in _COLUMNS)
        spark.sql(f"CREATE TABLE {table} ({definition}) USING iceberg TBLPROPERTIES ({properties})")
        spark.sql(f"INSERT INTO {table} {rows.format(_ROWS)}")
        staged = (warehouse / "staged").resolve().as_uri()  # this machine's disk, whatever the default file system
        # Every key changed twice (the later change wins), a quarter deleted, new keys past the end.
        changes = spark.sql(rows.format(f"{_ROWS // 2}, {_ROWS * 3 // 2}"))
        op = F.when(F.col("id") % 4 == 0, "d").when(F.col("id") < _ROWS, "u").otherwise("c")
        first = changes.withColumn(OP_COLUMN, F.lit("u")).withColumn(SEQ_COLUMN, F.col("id") * 2)
        second = changes.withColumn(OP_COLUMN, op).withColumn(SEQ_COLUMN, F.col("id") * 2 + 1)
        first.unionByName(second).write.parquet(staged)
        source = last_change_per_key(spark.read.parquet(staged), ["id"])
        hashes = {int(row[0]) for row in source.select(F.xxhash64("id")).collect()}
        key_filter = KeyFilter.of_hashes(hashes)
        if key_filter is None:  # 64 keys: far below the most a filter takes
            raise RuntimeError(f"no key filter of {len(hashes)} keys")
        source.createOrReplaceTempView("mysql_cdc_rehearsal_changes")
        names = [name for name, _ in _COLUMNS]
        updates = ", ".join(f"t.{quote(c)} = {merge_update_value(c, False)}" for c in names)
        on = f"{key_match(['id'], [])} AND ({key_filter.condition('t', ['id'])})"
        spark.sql(
            merge_statement(table, "mysql_cdc_rehearsal_changes", on, names, updates),
            args={KeyFilter.PARAMETER: key_filter.parameter()},
        )
        rows_after = int(spark.table(table).count())
    finally:
        spark.catalog.dropTempView("mysql_cdc_rehearsal_changes")
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        shutil.rmtree(warehouse, ignore_errors=True)
    log.info("rehearsed the apply's MERGE in %.1f s", time.monotonic() - started)
    return rows_after
