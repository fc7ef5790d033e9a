"""The rows one apply step merges: staged Parquet read as Spark DataFrames (no Airflow import).

* :func:`read_versions` reads a step's staged files, each schema version under the names its column
  identities have at the end of the window (:func:`~.schema_alignment.version_renames`), unioned by
  name (a column missing from a version is NULL there).
* :func:`window_rows` keeps the rows a window's schema events leave (none before a TRUNCATE or a
  reset, none from a pending rebuild on) and gives back-filled columns the value MySQL gave the rows
  that existed when the column was added.
* :func:`last_change_per_key` keeps each key's last change, and :func:`key_match` is the MERGE's
  ``ON`` clause. Keys are compared as MySQL compares them: a zero or invalid date in a key column is
  staged as NULL with its text in ``_cdc_invalid_values``, so for temporal key columns the text is
  part of the key (two different invalid dates stay two rows; a NULL never matches by accident).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.apply.schema_alignment import WindowTableChanges
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Spark types of key columns that may hold zero or invalid dates (staged NULL + text).
TEMPORAL_TYPES = frozenset({"date", "timestamp", "timestamp_ntz"})
SEQ_COLUMN = "_cdc_seq"


def read_staged(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Staged Parquet as Spark reads it. pyarrow writes dates and times in the proleptic Gregorian
    calendar, so values before 1582 (MySQL's DATE range starts at 1000-01-01) are read as they are."""
    return spark.read.option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED").parquet(*paths)


def read_versions(
    spark: SparkSession,
    paths_by_version: Mapping[int, Sequence[str]],
    renames_by_version: Mapping[int, Mapping[str, str]] | None = None,
) -> DataFrame | None:
    """The rows of staged files of any schema versions, unioned by name; None when there are no files.

    ``renames_by_version[v]`` maps version ``v``'s table columns to the names they are read under;
    columns it leaves out are dropped (their identity does not exist any more). A version without an
    entry keeps its names. Staging columns (``_cdc_*``) are always kept."""
    frame: DataFrame | None = None
    for version in sorted(paths_by_version):
        rows = read_staged(spark, paths_by_version[version])
        renames = (renames_by_version or {}).get(version)
        if renames is not None:
            from pyspark.sql import functions as F

            kept = [F.col(quote(name)).alias(renames[name]) for name in rows.columns if name in renames]
            staging = [F.col(quote(name)) for name in rows.columns if name.startswith("_cdc_") and name not in renames]
            rows = rows.select(*kept, *staging)
        frame = rows if frame is None else frame.unionByName(rows, allowMissingColumns=True)
    return frame


def window_rows(frame: DataFrame, changes: WindowTableChanges) -> DataFrame:
    """The rows of a window that count after its schema events, with back-filled columns."""
    from pyspark.sql import functions as F

    first_kept = changes.first_kept_seq
    if first_kept is not None:
        frame = frame.where(F.col(SEQ_COLUMN) > F.lit(first_kept))
    excluded = changes.first_excluded_seq
    if excluded is not None:
        frame = frame.where(F.col(SEQ_COLUMN) < F.lit(excluded))
    columns = {name.lower(): name for name in frame.columns}
    for backfill in changes.backfills:
        name = columns.get(backfill.column.lower())
        if name is None:
            continue  # no staged row has the column: only the target's untouched rows get the value
        column_type = frame.schema[name].dataType
        filled = F.when(F.col(SEQ_COLUMN) < F.lit(backfill.seq), F.lit(backfill.value).cast(column_type))
        frame = frame.withColumn(name, filled.otherwise(F.col(quote(name))))
    return frame


def temporal_keys(frame: DataFrame, keys: Sequence[str]) -> list[str]:
    """The key columns that may hold invalid dates (DATE, DATETIME, TIMESTAMP)."""
    types = {f.name.lower(): f.dataType.simpleString() for f in frame.schema.fields}
    return [key for key in keys if types.get(key.lower()) in TEMPORAL_TYPES]


def _invalid_text(alias: str | None, key: str) -> Column:
    from pyspark.sql import functions as F

    prefix = f"{alias}." if alias else ""
    return F.expr(f"try_element_at({prefix}{quote(INVALID_VALUES_COLUMN)}, '{key.replace(chr(39), chr(39) * 2)}')")


def last_change_per_key(frame: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Each key's last change (highest ``_cdc_seq``); an invalid date's text is part of its key."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    partition = [F.col(quote(k)) for k in keys]
    if INVALID_VALUES_COLUMN in frame.columns:
        partition += [_invalid_text(None, k) for k in temporal_keys(frame, keys)]
    latest = Window.partitionBy(*partition).orderBy(F.col(SEQ_COLUMN).desc())
    return frame.withColumn("__cdc_rank", F.row_number().over(latest)).where("__cdc_rank = 1").drop("__cdc_rank")


def key_match(keys: Sequence[str], temporal: Sequence[str], target: str = "t", source: str = "s") -> str:
    """The MERGE's ``ON`` condition: equal keys, where for temporal keys NULL (an invalid date) equals
    NULL exactly when the two invalid dates' texts are equal."""
    parts = []
    for key in keys:
        column = quote(key)
        if key in temporal:
            text = f"'{key.replace(chr(39), chr(39) * 2)}'"
            parts.append(
                f"{target}.{column} <=> {source}.{column} AND "
                f"try_element_at({target}.{quote(INVALID_VALUES_COLUMN)}, {text}) <=> "
                f"try_element_at({source}.{quote(INVALID_VALUES_COLUMN)}, {text})"
            )
        else:
            parts.append(f"{target}.{column} = {source}.{column}")
    return " AND ".join(parts)
