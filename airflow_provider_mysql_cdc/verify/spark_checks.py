"""The Spark side of a verification: the target brought to the source's GTID set in memory, range
checksums of both sides, and the row-by-row comparison of the ranges whose checksums differ. Nothing
here writes a table. No Airflow import."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.apply.staged_rows import OP_COLUMN, key_match, last_change_per_key, temporal_keys
from airflow_provider_mysql_cdc.verify.ranges import RangeChecksum
from airflow_provider_mysql_cdc.verify.report import CHANGED, EXTRA, MISSING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The hash range of a row's key (``0 .. ranges - 1``).
RANGE_COLUMN = "_verify_range"
_PRESENT = "_verify_present"
_KIND = "kind"
_COLUMNS = "columns"


def target_at(target: DataFrame, changes: DataFrame | None, keys: Sequence[str]) -> DataFrame:
    """``target`` (the compared columns) with each key's last staged change in ``changes`` applied: the
    key's row removed, then the new row added unless the change is a delete. Staged values are cast to
    the target's types; a column the changes lack is NULL."""
    if changes is None:
        return target
    from pyspark.sql import functions as F

    last = last_change_per_key(changes, keys)
    condition = F.expr(key_match(keys, temporal_keys(last, keys), "t", "s"))
    kept = target.alias("t").join(last.alias("s"), condition, "left_anti")
    upserts = last.where(F.col(OP_COLUMN) != F.lit("d")).select(
        *[
            (F.col(quote(f.name)) if f.name in last.columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in target.schema.fields
        ]
    )
    return kept.select(*[F.col(quote(name)) for name in target.columns]).unionByName(upserts)


def comparable_column(frame: DataFrame, name: str, alias: str | None = None) -> Column:
    """A column of ``frame`` (read through ``alias`` when given) as it is hashed and compared: a map
    becomes its entries sorted by key."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    column = F.col(f"{alias}.{quote(name)}" if alias else quote(name))
    if isinstance(frame.schema[name].dataType, MapType):
        return F.array_sort(F.map_entries(column))
    return column


def with_ranges(frame: DataFrame, keys: Sequence[str], ranges: int) -> DataFrame:
    """``frame`` with :data:`RANGE_COLUMN`: a hash of the key columns modulo ``ranges``."""
    from pyspark.sql import functions as F

    bucket = F.pmod(F.xxhash64(*[F.col(quote(k)) for k in keys]), F.lit(ranges)).cast("int")
    return frame.withColumn(RANGE_COLUMN, bucket)


#: The key and the count of the rows of a table without a key, compared as a multiset.
ROW_IDENTITY = "_verify_row"
COPIES = "_verify_copies"


def multiset_rows(frame: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of a table without a key, one per distinct row: its values, :data:`ROW_IDENTITY` (a
    SHA-256 of the values as text: FLOAT and DOUBLE by their text, so ``-0.0`` is not ``0.0``; a NULL
    never reads like a value) and :data:`COPIES`, how many rows have them."""
    from pyspark.sql import functions as F

    parts: list[Column] = []
    for name in columns:
        kind = frame.schema[name].dataType.simpleString()
        column = comparable_column(frame, name)
        if kind == "binary":
            text = F.hex(column)
        elif kind.startswith(("array", "map", "struct")):
            text = F.to_json(column)
        else:
            text = column.cast("string")
        parts.append(F.coalesce(F.concat(F.length(text).cast("string"), F.lit(":"), text), F.lit("N")))
    identity = F.sha2(F.concat_ws("|", *parts), 256).alias(ROW_IDENTITY)
    values = [F.first(F.col(quote(name))).alias(name) for name in columns]
    return frame.groupBy(identity).agg(*values, F.count(F.lit(1)).alias(COPIES))


def row_hash(frame: DataFrame, columns: Sequence[str]) -> Column:
    """A 64-bit hash of a row's values; each value is preceded by whether it is NULL, so a NULL in one
    column never hashes like a NULL in another."""
    from pyspark.sql import functions as F

    parts: list[Column] = []
    for name in columns:
        parts += [F.col(quote(name)).isNull(), comparable_column(frame, name)]
    return F.xxhash64(*parts)


def range_checksums(
    frame: DataFrame, columns: Sequence[str], checked: Sequence[int] | None
) -> dict[int, RangeChecksum]:
    """Each range's row count and sum of row hashes (of ``frame`` with :data:`RANGE_COLUMN`), for the
    ``checked`` ranges (None: all)."""
    from pyspark.sql import functions as F

    rows = frame if checked is None else frame.where(F.col(RANGE_COLUMN).isin(list(checked)))
    totals = (
        rows.select(F.col(RANGE_COLUMN), row_hash(frame, columns).cast("decimal(38,0)").alias("h"))
        .groupBy(RANGE_COLUMN)
        .agg(F.count(F.lit(1)).alias("rows"), F.sum("h").alias("digest"))
        .collect()
    )
    return {int(r[RANGE_COLUMN]): RangeChecksum(int(r[RANGE_COLUMN]), int(r["rows"]), int(r["digest"])) for r in totals}


@dataclass(frozen=True)
class RowDifferences:
    """The row-by-row comparison of some ranges: counts per kind and the first differing keys."""

    missing: int
    extra: int
    changed: int
    #: Rows with the key columns, ``kind`` and ``columns`` (the differing columns of a changed row).
    first: tuple[dict[str, Any], ...]


def row_differences(
    source: DataFrame,
    target: DataFrame,
    keys: Sequence[str],
    columns: Sequence[str],
    ranges: Sequence[int],
    max_keys: int,
) -> RowDifferences:
    """Compare, key by key, the rows of ``ranges`` (both frames with :data:`RANGE_COLUMN`)."""
    from pyspark.sql import functions as F

    def side(frame: DataFrame) -> DataFrame:
        return frame.where(F.col(RANGE_COLUMN).isin(list(ranges))).withColumn(_PRESENT, F.lit(True))

    s, t = side(source), side(target)
    joined = s.alias("s").join(t.alias("t"), F.expr(key_match(keys, temporal_keys(s, keys), "t", "s")), "full_outer")
    differing = F.filter(
        F.array(
            *[
                F.when(
                    ~comparable_column(s, name, "s").eqNullSafe(comparable_column(t, name, "t")),
                    F.lit(name),
                )
                for name in columns
                if name not in keys
            ]
            or [F.lit(None).cast("string")]
        ),
        lambda item: item.isNotNull(),
    )
    kind = (
        F.when(F.col(f"t.{_PRESENT}").isNull(), F.lit(MISSING))
        .when(F.col(f"s.{_PRESENT}").isNull(), F.lit(EXTRA))
        .when(F.size(differing) > 0, F.lit(CHANGED))
    )
    diffs = (
        joined.select(
            *[F.coalesce(F.col(f"s.{quote(k)}"), F.col(f"t.{quote(k)}")).alias(k) for k in keys],
            kind.alias(_KIND),
            F.when(kind == F.lit(CHANGED), differing).otherwise(F.array().cast("array<string>")).alias(_COLUMNS),
        )
        .where(F.col(_KIND).isNotNull())
        .cache()
    )
    try:
        counts = {str(r[_KIND]): int(r["count"]) for r in diffs.groupBy(_KIND).count().collect()}
        first = diffs.orderBy(*[F.col(quote(k)).asc_nulls_first() for k in keys]).limit(max_keys).collect()
    finally:
        diffs.unpersist()
    return RowDifferences(
        missing=counts.get(MISSING, 0),
        extra=counts.get(EXTRA, 0),
        changed=counts.get(CHANGED, 0),
        first=tuple(row.asDict(recursive=True) for row in first),
    )
