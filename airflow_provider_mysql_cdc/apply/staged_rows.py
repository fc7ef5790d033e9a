"""The rows one apply step merges: staged Parquet read as Spark DataFrames (no Airflow import).

* :func:`read_versions` reads a step's staged files, each schema version under the names its column
  identities have at the end of the window (:func:`~.schema_alignment.version_renames`), unioned by
  name (a column missing from a version is NULL there); a partial image's ``_cdc_partial`` names its
  absent columns the same way.
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
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.apply.schema_alignment import WindowTableChanges
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Spark types of key columns that may hold zero or invalid dates (staged NULL + text).
TEMPORAL_TYPES = frozenset({"date", "timestamp", "timestamp_ntz"})
SEQ_COLUMN = "_cdc_seq"


def sql_string(text: str) -> str:
    """A Spark SQL string literal of ``text``."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    entry keeps its names. Staging columns (``_cdc_*``) are always kept; the keys of ``_cdc_partial``
    (absent columns, by their staged names) are renamed alike."""
    frame: DataFrame | None = None
    for version in sorted(paths_by_version):
        rows = read_staged(spark, paths_by_version[version])
        renames = (renames_by_version or {}).get(version)
        if renames is not None:
            from pyspark.sql import functions as F

            kept = [F.col(quote(name)).alias(renames[name]) for name in rows.columns if name in renames]
            staging = [F.col(quote(name)) for name in rows.columns if name.startswith("_cdc_") and name not in renames]
            rows = rows.select(*kept, *staging)
            if PARTIAL_COLUMN in rows.columns:
                rows = rows.withColumn(PARTIAL_COLUMN, renamed_partial_keys(F.col(PARTIAL_COLUMN), renames))
        frame = rows if frame is None else frame.unionByName(rows, allowMissingColumns=True)
    return frame


def renamed_partial_keys(partial: Column, renames: Mapping[str, str]) -> Column:
    """A ``_cdc_partial`` map whose keys (a staged version's column names) are renamed by ``renames``.
    Keys of columns whose identity is gone are dropped, so a column added later under a dropped
    column's name is not taken for absent; a map left empty is NULL (the image is complete for every
    column that still exists)."""
    from pyspark.sql import functions as F

    if not renames:
        return F.lit(None).cast("map<string,string>")
    names = F.array(*[F.lit(name) for name in sorted(renames)])
    mapping = F.create_map(*[F.lit(part) for pair in sorted(renames.items()) for part in pair])
    kept = F.map_filter(partial, lambda key, _value: F.array_contains(names, key))
    renamed = F.transform_keys(kept, lambda key, _value: F.element_at(mapping, key))
    return F.when(F.size(renamed) > 0, renamed).otherwise(F.lit(None).cast("map<string,string>"))


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
    filled = {}
    for backfill in changes.backfills:
        name = columns.get(backfill.column.lower())
        if name is None:
            continue  # no staged row has the column: only the target's untouched rows get the value
        column_type = frame.schema[name].dataType
        value = F.when(F.col(SEQ_COLUMN) < F.lit(backfill.seq), F.lit(backfill.value).cast(column_type))
        filled[name] = value.otherwise(F.col(quote(name)))
    return frame.withColumns(filled) if filled else frame


def temporal_keys(frame: DataFrame, keys: Sequence[str]) -> list[str]:
    """The key columns that may hold invalid dates (DATE, DATETIME, TIMESTAMP)."""
    types = {f.name.lower(): f.dataType.simpleString() for f in frame.schema.fields}
    return [key for key in keys if types.get(key.lower()) in TEMPORAL_TYPES]


def _invalid_text(alias: str | None, key: str) -> Column:
    from pyspark.sql import functions as F

    prefix = f"{alias}." if alias else ""
    return F.expr(f"try_element_at({prefix}{quote(INVALID_VALUES_COLUMN)}, {sql_string(key)})")


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
            text = sql_string(key)
            parts.append(
                f"{target}.{column} <=> {source}.{column} AND "
                f"try_element_at({target}.{quote(INVALID_VALUES_COLUMN)}, {text}) <=> "
                f"try_element_at({source}.{quote(INVALID_VALUES_COLUMN)}, {text})"
            )
        else:
            parts.append(f"{target}.{column} = {source}.{column}")
    return " AND ".join(parts)


# -- partial row images ---------------------------------------------------------------------------

#: Staged map of a partial row image: column -> "" (absent: the previous value stays) or the JSON diff
#: list to apply to the previous value (see decoding.json_diff); NULL when the image is complete.
PARTIAL_COLUMN = "_cdc_partial"
OP_COLUMN = "_cdc_op"


def fold_partial_rows(frame: DataFrame, keys: Sequence[str], json_columns: Sequence[str] = ()) -> DataFrame:
    """One row per key, as :func:`last_change_per_key`, for a window whose rows include partial images
    (``binlog_row_image`` MINIMAL or NOBLOB, ``binlog_row_value_options=PARTIAL_JSON``).

    A key's last complete change (an insert, a delete, or an update with every column) is its base;
    each column takes its value from the last row since the base that has it; JSON diffs staged after
    that value are applied to it in order. A column that no row since the base has (and no base) stays
    marked in ``_cdc_partial``: the MERGE keeps the target's value (and applies the JSON diffs staged
    for it, see :func:`apply_pending_json_diffs`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    partition = [F.col(quote(k)) for k in keys]
    if INVALID_VALUES_COLUMN in frame.columns:
        partition += [_invalid_text(None, k) for k in temporal_keys(frame, keys)]
    partial = F.col(PARTIAL_COLUMN)
    is_base = F.col(OP_COLUMN).isin("c", "d") | partial.isNull()
    whole_key = Window.partitionBy(*partition)
    frame = frame.withColumn("__cdc_base", F.max(F.when(is_base, F.col(SEQ_COLUMN))).over(whole_key))
    frame = frame.where(F.col("__cdc_base").isNull() | (F.col(SEQ_COLUMN) >= F.col("__cdc_base")))
    ordered = whole_key.orderBy(F.col(SEQ_COLUMN)).rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    columns = [c for c in frame.columns if not c.startswith("_cdc_") and c != "__cdc_base"]
    # Each column's last value, then its folded value, each added in one projection: a withColumn per
    # column re-analyzes the whole growing plan, which cost a wide table's window seconds of planning.
    lasts = {}
    values = {}
    still_absent = []
    for column in columns:
        name = sql_string(column)
        present = partial.isNull() | ~F.expr(f"map_contains_key({PARTIAL_COLUMN}, {name})")
        seq_and_value = F.struct(F.col(SEQ_COLUMN).alias("seq"), F.col(quote(column)).alias("v"))
        lasts[f"__cdc_last_{column}"] = F.last(F.when(present, seq_and_value), ignorenulls=True).over(ordered)
        last = F.col(quote(f"__cdc_last_{column}"))
        value = last.getField("v")
        if column in json_columns:
            diffs = F.collect_list(
                F.when(
                    ~present & (F.expr(f"{PARTIAL_COLUMN}[{name}]") != F.lit("")),
                    F.struct(F.col(SEQ_COLUMN).alias("seq"), F.expr(f"{PARTIAL_COLUMN}[{name}]").alias("diffs")),
                )
            ).over(ordered)
            after = F.filter(diffs, _staged_after(last.getField("seq")))
            pending = F.transform(F.array_sort(after), lambda d: d["diffs"])
            has_value = last.isNotNull()
            value = F.when(has_value & (F.size(pending) > 0), _json_diff_udf()(value, pending)).otherwise(value)
            # No value since the base: the diffs apply to the target's value (apply_pending_json_diffs).
            kept = F.when(F.size(pending) > 0, F.to_json(pending)).otherwise(F.lit(""))
            still_absent.append(F.when(~has_value, F.struct(F.lit(column).alias("k"), kept.alias("v"))))
        else:
            still_absent.append(F.when(last.isNull(), F.struct(F.lit(column).alias("k"), F.lit("").alias("v"))))
        values[f"__cdc_value_{column}"] = value
    absent = F.filter(F.array(*still_absent), lambda entry: entry.isNotNull())
    values["__cdc_partial"] = F.when(F.size(absent) > 0, F.map_from_entries(absent)).otherwise(F.lit(None))
    frame = frame.withColumns(lasts).withColumns(values)
    frame = last_change_per_key(frame, keys)
    frame = frame.select(
        *[F.col(quote(f"__cdc_value_{c}")).alias(c) for c in columns],
        *[F.col(quote(c)) for c in frame.columns if c.startswith("_cdc_") and c != PARTIAL_COLUMN],
        F.col("__cdc_partial").cast("map<string,string>").alias(PARTIAL_COLUMN),
    )
    return frame


def _staged_after(last_seq: Column) -> Any:
    """A predicate on staged diff lists: staged after ``last_seq`` (all of them when it is NULL)."""
    from pyspark.sql import functions as F

    return lambda diff: F.coalesce(diff["seq"] > last_seq, F.lit(True))


def _apply_staged_diffs(document: str | None, staged: list[str] | None) -> str | None:
    """JSON text after the staged diff lists, in order (runs in Spark's Python workers, for every row a
    ``CASE`` around it may select: total, a NULL document stays NULL; MySQL logs no diff for one)."""
    from airflow_provider_mysql_cdc.decoding.json_diff import apply_json_diffs, diffs_from_text

    if not staged or document is None:
        return document
    return apply_json_diffs(document, [diff for text in staged for diff in diffs_from_text(text)])


def _apply_folded_diffs(document: str | None, folded: str | None) -> str | None:
    """:func:`_apply_staged_diffs` for the JSON array of diff lists :func:`fold_partial_rows` leaves."""
    import json

    return _apply_staged_diffs(document, json.loads(folded) if folded else None)


def _json_diff_udf() -> Any:
    """A Spark UDF: (JSON text, list of staged diff lists) -> the text after the diffs, in order."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    return F.udf(_apply_staged_diffs, StringType())


def apply_pending_json_diffs(
    frame: DataFrame, target: DataFrame, keys: Sequence[str], json_columns: Sequence[str]
) -> DataFrame:
    """Folded rows whose JSON columns still carry diffs for the target's value (an update logged with
    both a minimal row image and partial JSON: the before image lacks the document) get the target's
    value with the diffs applied; those columns are then no longer partial."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    if not json_columns:
        return frame
    temporal = temporal_keys(frame, keys)
    wanted = [*keys, *json_columns, *([INVALID_VALUES_COLUMN] if temporal else [])]
    base = target.select(*[F.col(quote(c)).alias(f"__cdc_t_{c}") for c in wanted])
    condition = " AND ".join(
        f"s.{quote(k)} <=> {quote(f'__cdc_t_{k}')}"
        + (
            f" AND try_element_at(s.{quote(INVALID_VALUES_COLUMN)}, {sql_string(k)}) <=> "
            f"try_element_at({quote(f'__cdc_t_{INVALID_VALUES_COLUMN}')}, {sql_string(k)})"
            if k in temporal
            else ""
        )
        for k in keys
    )
    joined = frame.alias("s").join(base, F.expr(condition), "left")
    apply = F.udf(_apply_folded_diffs, StringType())
    values = {}
    for column in json_columns:
        staged = F.expr(f"try_element_at(s.{PARTIAL_COLUMN}, {sql_string(column)})")
        pending = staged.isNotNull() & (staged != F.lit(""))
        values[column] = F.when(pending, apply(F.col(quote(f"__cdc_t_{column}")), staged)).otherwise(
            F.col(f"s.{quote(column)}")
        )
    names = ", ".join(sql_string(c) for c in json_columns)
    resolved = F.expr(f"map_filter(s.{PARTIAL_COLUMN}, (k, v) -> NOT (k IN ({names}) AND v <> ''))")
    partial = F.when(F.size(resolved) > 0, resolved).otherwise(F.lit(None).cast("map<string,string>"))
    return joined.select(
        *[
            values[c].alias(c) if c in values else partial.alias(c) if c == PARTIAL_COLUMN else F.col(f"s.{quote(c)}")
            for c in frame.columns
        ]
    )
