"""The apply's row logic in real Spark (apply.staged_rows): partial row images folded per key, JSON diffs
applied, invalid-date keys kept apart, back-filled columns. End-to-end cases against MySQL are in
tests/exactness/."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_mysql_cdc.apply.schema_alignment import ColumnBackfill, WindowTableChanges
from airflow_provider_mysql_cdc.apply.staged_rows import (
    apply_pending_json_diffs,
    fold_partial_rows,
    key_match,
    last_change_per_key,
    read_versions,
    renamed_partial_keys,
    temporal_keys,
    window_rows,
)
from airflow_provider_mysql_cdc.decoding.json_diff import JsonDiff, diffs_to_text

pytestmark = pytest.mark.spark

SCHEMA = (
    "id INT, a INT, j STRING, _cdc_invalid_values MAP<STRING,STRING>, _cdc_partial MAP<STRING,STRING>, "
    "_cdc_op STRING, _cdc_seq BIGINT"
)


def frame(spark: SparkSession, rows: list[tuple[Any, ...]], schema: str = SCHEMA) -> DataFrame:
    return spark.createDataFrame(rows, schema)


def by_id(df: DataFrame) -> dict[Any, dict[str, Any]]:
    return {row["id"]: row.asDict() for row in df.collect()}


def test_partial_updates_fold_onto_the_last_complete_change(spark: SparkSession) -> None:
    diffs = diffs_to_text([JsonDiff("replace", "$.k", "2")])
    rows = [
        # key 1: inserted, then two minimal updates of different columns, then a JSON diff
        (1, 10, '{"k": 1}', None, None, "c", 1),
        (1, 11, None, None, {"j": ""}, "u", 2),
        (1, None, None, None, {"a": "", "j": diffs}, "u", 3),
        # key 2: only minimal updates (its other columns stay as the target has them)
        (2, 20, None, None, {"j": ""}, "u", 4),
        (2, 21, None, None, {"j": ""}, "u", 5),
        # key 3: a partial update, then deleted
        (3, 30, None, None, {"j": ""}, "u", 6),
        (3, None, None, None, {"a": "", "j": ""}, "d", 7),
        # key 4: complete update after partial ones
        (4, 40, None, None, {"j": ""}, "u", 8),
        (4, 41, '{"x": true}', None, None, "u", 9),
    ]
    folded = by_id(fold_partial_rows(frame(spark, rows), ["id"], ["j"]))
    assert folded[1]["a"] == 11 and folded[1]["j"] == '{"k": 2}' and folded[1]["_cdc_partial"] is None
    assert folded[1]["_cdc_op"] == "u" and folded[1]["_cdc_seq"] == 3
    assert folded[2]["a"] == 21 and folded[2]["_cdc_partial"] == {"j": ""}
    assert folded[3]["_cdc_op"] == "d"
    assert folded[4]["a"] == 41 and folded[4]["j"] == '{"x": true}' and folded[4]["_cdc_partial"] is None


def test_json_diffs_without_a_value_in_the_window_apply_to_the_target(spark: SparkSession) -> None:
    first = diffs_to_text([JsonDiff("insert", "$.new", '"x"')])
    second = diffs_to_text([JsonDiff("remove", "$.k")])
    rows = [(1, None, None, None, {"a": "", "j": first}, "u", 1), (1, None, None, None, {"a": "", "j": second}, "u", 2)]
    folded = fold_partial_rows(frame(spark, rows), ["id"], ["j"])
    target = frame(spark, [(1, 5, '{"k": 1}', None, None, "r", 0)]).drop("_cdc_partial", "_cdc_op")
    (row,) = apply_pending_json_diffs(folded, target, ["id"], ["j"]).collect()
    assert row["j"] == '{"new": "x"}' and row["_cdc_partial"] == {"a": ""}


def test_two_different_invalid_dates_in_a_key_stay_two_keys(spark: SparkSession) -> None:
    schema = "d DATE, v INT, _cdc_invalid_values MAP<STRING,STRING>, _cdc_op STRING, _cdc_seq BIGINT"
    rows = [
        (None, 1, {"d": "0000-00-00"}, "c", 1),
        (None, 2, {"d": "2024-00-15"}, "c", 2),
        (None, 3, {"d": "0000-00-00"}, "u", 3),
        (dt.date(2024, 1, 1), 4, None, "c", 4),
    ]
    changes = frame(spark, rows, schema)
    assert temporal_keys(changes, ["d"]) == ["d"]
    last = {
        (r["d"], (r["_cdc_invalid_values"] or {}).get("d")): r["v"]
        for r in last_change_per_key(changes, ["d"]).collect()
    }
    assert last == {(None, "0000-00-00"): 3, (None, "2024-00-15"): 2, (dt.date(2024, 1, 1), None): 4}
    target = frame(spark, [(None, 0, {"d": "2024-00-15"}, "r", 0)], schema)
    changes.createOrReplaceTempView("s_view")
    target.createOrReplaceTempView("t_view")
    on = key_match(["d"], ["d"])
    pairs = spark.sql(f"SELECT s.v FROM t_view t JOIN s_view s ON {on}").collect()
    assert sorted(r["v"] for r in pairs) == [2]


def test_rows_before_a_backfilled_column_existed_get_its_value(spark: SparkSession) -> None:
    rows = [(1, None, None, None, None, "c", 1), (2, None, None, None, None, "c", 5), (3, 7, None, None, None, "c", 9)]
    changes = WindowTableChanges(backfills=(ColumnBackfill("a", 6, 42),), truncate_seq=1)
    kept = by_id(window_rows(frame(spark, rows), changes))
    assert set(kept) == {2, 3}  # nothing at or before the TRUNCATE
    assert kept[2]["a"] == 42 and kept[3]["a"] == 7


def test_absent_columns_of_a_partial_image_follow_their_identity(spark: SparkSession) -> None:
    """A partial image names its absent columns as they were named when it was staged: after a swap of
    two names they are read under the other name; a column whose identity is gone is not absent any
    more (a column added later under its name is another one), and a map left empty is NULL."""
    rows = [
        (1, 0, None, None, {"a": "", "j": ""}, "u", 1),
        (2, 0, None, None, {"a": ""}, "u", 2),
        (3, 0, None, None, {"gone": ""}, "u", 3),
        (4, 0, None, None, None, "c", 4),
    ]
    renamed = frame(spark, rows).withColumn(
        "_cdc_partial", F.expr(renamed_partial_keys("_cdc_partial", {"a": "j", "j": "a", "id": "id"}))
    )
    assert {row["id"]: row["_cdc_partial"] for row in renamed.collect()} == {
        1: {"j": "", "a": ""},
        2: {"j": ""},
        3: None,
        4: None,
    }


def test_staged_versions_are_read_with_their_absent_columns_under_final_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two versions of a window: (id, a, j, gone) staged before a swap of ``a`` and ``j`` and a drop of
    ``gone``, and (id, a, j) after; version 1's MINIMAL images name their absent columns by the old
    names. Read together, every absent column is the same identity as in MySQL."""
    partial = pa.map_(pa.string(), pa.string())
    staging = [("_cdc_partial", partial), ("_cdc_op", pa.string()), ("_cdc_seq", pa.int64())]
    before = pa.table(
        {"id": [1, 2], "a": [10, None], "j": [None, "x"], "gone": [None, None]}
        | {"_cdc_partial": [[("j", ""), ("gone", "")], [("a", ""), ("gone", "")]], "_cdc_op": ["u", "u"]}
        | {"_cdc_seq": [1, 2]},
        schema=pa.schema([("id", pa.int32()), ("a", pa.int32()), ("j", pa.string()), ("gone", pa.int32()), *staging]),
    )
    after = pa.table(
        {"id": [3], "a": ["y"], "j": [None], "_cdc_partial": [[("j", "")]], "_cdc_op": ["u"], "_cdc_seq": [3]},
        schema=pa.schema([("id", pa.int32()), ("a", pa.string()), ("j", pa.int32()), *staging]),
    )
    pq.write_table(before, tmp_path / "v1.parquet")
    pq.write_table(after, tmp_path / "v2.parquet")
    read = read_versions(
        spark,
        {1: [str(tmp_path / "v1.parquet")], 2: [str(tmp_path / "v2.parquet")]},
        {1: {"id": "id", "a": "j", "j": "a"}, 2: {"id": "id", "a": "a", "j": "j"}},
    )
    assert read is not None
    rows = by_id(read)
    assert (rows[1]["j"], rows[1]["_cdc_partial"]) == (10, {"a": ""})  # a (now j) present; j (now a) absent
    assert (rows[2]["a"], rows[2]["_cdc_partial"]) == ("x", {"j": ""})
    assert (rows[3]["a"], rows[3]["_cdc_partial"]) == ("y", {"j": ""})
    assert "gone" not in read.columns
