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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.apply.schema_alignment import WindowTableChanges
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
            kept = [f"{quote(name)} AS {quote(renames[name])}" for name in rows.columns if name in renames]
            staging = [quote(name) for name in rows.columns if name.startswith("_cdc_") and name not in renames]
            if PARTIAL_COLUMN in rows.columns:
                staging = [c for c in staging if c != quote(PARTIAL_COLUMN)]
                staging.append(f"{renamed_partial_keys(PARTIAL_COLUMN, renames)} AS {PARTIAL_COLUMN}")
            rows = rows.selectExpr(*kept, *staging)
        frame = rows if frame is None else frame.unionByName(rows, allowMissingColumns=True)
    return frame


def renamed_partial_keys(partial: str, renames: Mapping[str, str]) -> str:
    """SQL of a ``_cdc_partial`` map (``partial``: its SQL) whose keys (a staged version's column names)
    are renamed by ``renames``. Keys of columns whose identity is gone are dropped, so a column added
    later under a dropped column's name is not taken for absent; a map left empty is NULL (the image is
    complete for every column that still exists)."""
    if not renames:
        return "CAST(NULL AS map<string,string>)"
    names = ", ".join(sql_string(name) for name in sorted(renames))
    mapping = ", ".join(f"{sql_string(old)}, {sql_string(new)}" for old, new in sorted(renames.items()))
    kept = f"map_filter({partial}, (k, v) -> array_contains(array({names}), k))"
    renamed = f"transform_keys({kept}, (k, v) -> element_at(map({mapping}), k))"
    return f"CASE WHEN size({renamed}) > 0 THEN {renamed} ELSE CAST(NULL AS map<string,string>) END"


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


def _invalid_text_sql(alias: str | None, key: str) -> str:
    """SQL of the staged text of an invalid date in key column ``key`` (NULL when it holds none)."""
    prefix = f"{alias}." if alias else ""
    return f"try_element_at({prefix}{quote(INVALID_VALUES_COLUMN)}, {sql_string(key)})"


def _key_partition(frame: DataFrame, keys: Sequence[str]) -> str:
    """The SQL ``PARTITION BY`` list of one key: its columns and, for a temporal key column, the text
    of an invalid date in it (two different invalid dates are two keys)."""
    parts = [quote(k) for k in keys]
    if INVALID_VALUES_COLUMN in frame.columns:
        parts += [_invalid_text_sql(None, k) for k in temporal_keys(frame, keys)]
    return ", ".join(parts)


def last_change_per_key(frame: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Each key's last change (highest ``_cdc_seq``); an invalid date's text is part of its key."""
    columns = [quote(c) for c in frame.columns]
    latest = f"row_number() OVER (PARTITION BY {_key_partition(frame, keys)} ORDER BY {SEQ_COLUMN} DESC)"
    return frame.selectExpr(*columns, f"{latest} AS __cdc_rank").where("__cdc_rank = 1").selectExpr(*columns)


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
    for it, see :func:`apply_pending_json_diffs`).

    The plan is built from SQL text (:func:`fold_sql`), a few calls for the whole table: built column by
    column through the DataFrame API, a 120-column table's fold took thousands of calls into the JVM and
    seconds before Spark ran anything."""
    if json_columns:
        from pyspark.sql.types import StringType

        frame.sparkSession.udf.register(JSON_DIFF_FUNCTION, _apply_staged_diffs, StringType())
    columns = [c for c in frame.columns if not c.startswith("_cdc_")]
    staging = [c for c in frame.columns if c.startswith("_cdc_") and c != PARTIAL_COLUMN]
    fold = fold_sql(columns, [c for c in json_columns if c in columns], _key_partition(frame, keys))
    everything = [quote(c) for c in frame.columns]
    since_base = frame.selectExpr(*everything, f"{fold.base} AS __cdc_base").where(
        f"__cdc_base IS NULL OR {SEQ_COLUMN} >= __cdc_base"
    )
    with_lasts = since_base.selectExpr(*everything, *fold.lasts)
    last_rows = with_lasts.selectExpr("*", f"{fold.rank} AS __cdc_rank").where("__cdc_rank = 1")
    return last_rows.selectExpr(
        *fold.values, *[quote(c) for c in staging], f"CAST({fold.partial} AS map<string,string>) AS {PARTIAL_COLUMN}"
    )


#: The Spark SQL function (a Python UDF, registered by :func:`fold_partial_rows`) that applies staged
#: JSON diff lists to a document: ``(text, array<string>) -> text``.
JSON_DIFF_FUNCTION = "cdc_apply_staged_json_diffs"


@dataclass(frozen=True)
class FoldSql:
    """The SQL expressions of :func:`fold_partial_rows`, in the order its projections use them."""

    #: The key's base: the ``_cdc_seq`` of its last complete change (NULL when it has none).
    base: str
    #: Per column, over the key's rows since the base: the last (seq, value) that has the column
    #: (``__cdc_last_<c>``) and, for a JSON column, every staged diff list (``__cdc_diffs_<c>``).
    lasts: list[str]
    #: The rank of a key's rows, last change first.
    rank: str
    #: Per column, its folded value under its own name.
    values: list[str]
    #: The folded ``_cdc_partial``: the columns no row since the base has, with the diffs still to apply.
    partial: str


def fold_sql(columns: Sequence[str], json_columns: Sequence[str], partition: str) -> FoldSql:
    """The expressions that fold partial row images of ``columns`` per key (``partition``: the key's SQL
    ``PARTITION BY`` list); ``json_columns`` hold JSON documents, whose staged diffs are applied."""
    by_key = f"PARTITION BY {partition}"
    ordered = f"({by_key} ORDER BY {SEQ_COLUMN} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
    is_base = f"{OP_COLUMN} IN ('c', 'd') OR {PARTIAL_COLUMN} IS NULL"
    lasts, values, still_absent = [], [], []
    for column in columns:
        name = sql_string(column)
        present = f"({PARTIAL_COLUMN} IS NULL OR NOT map_contains_key({PARTIAL_COLUMN}, {name}))"
        last = quote(f"__cdc_last_{column}")
        seq_and_value = f"named_struct('seq', {SEQ_COLUMN}, 'v', {quote(column)})"
        lasts.append(f"last(CASE WHEN {present} THEN {seq_and_value} END, true) OVER {ordered} AS {last}")
        value = f"{last}.v"
        if column in json_columns:
            staged = f"{PARTIAL_COLUMN}[{name}]"
            staged_diff = f"named_struct('seq', {SEQ_COLUMN}, 'diffs', {staged})"
            diff = f"CASE WHEN NOT {present} AND {staged} != '' THEN {staged_diff} END"
            diffs = quote(f"__cdc_diffs_{column}")
            lasts.append(f"collect_list({diff}) OVER {ordered} AS {diffs}")
            # The diffs staged after the column's last value (all of them when it has none), in order.
            after = f"filter({diffs}, d -> coalesce(d.seq > {last}.seq, true))"
            pending = f"transform(array_sort({after}), d -> d.diffs)"
            value = (
                f"CASE WHEN {last} IS NOT NULL AND size({pending}) > 0 "
                f"THEN {JSON_DIFF_FUNCTION}({value}, {pending}) ELSE {value} END"
            )
            # No value since the base: the diffs apply to the target's value (apply_pending_json_diffs).
            kept = f"CASE WHEN size({pending}) > 0 THEN to_json({pending}) ELSE '' END"
            still_absent.append(f"CASE WHEN {last} IS NULL THEN named_struct('k', {name}, 'v', {kept}) END")
        else:
            still_absent.append(f"CASE WHEN {last} IS NULL THEN named_struct('k', {name}, 'v', '') END")
        values.append(f"{value} AS {quote(column)}")
    absent = f"filter(array({', '.join(still_absent)}), entry -> entry IS NOT NULL)"
    return FoldSql(
        base=f"max(CASE WHEN {is_base} THEN {SEQ_COLUMN} END) OVER ({by_key})",
        lasts=lasts,
        rank=f"row_number() OVER ({by_key} ORDER BY {SEQ_COLUMN} DESC)",
        values=values,
        partial=f"CASE WHEN size({absent}) > 0 THEN map_from_entries({absent}) END",
    )


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
