"""The values the apply's MERGE gives target columns (apply.merge_sql): a partial row image keeps the
target's value where it lacks a column, except for a column the window added, which takes the value
MySQL gave the rows that existed then (found by the randomized differential, seed 2: MINIMAL images
after ``ADD COLUMN ... DEFAULT`` left NULL where MySQL had the default)."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysql_cdc.apply.merge_sql import backfill_expressions, merge_statement, merge_update_value
from airflow_provider_mysql_cdc.apply.schema_alignment import ColumnBackfill, plan_window_changes, version_renames
from airflow_provider_mysql_cdc.core.schema_events import SchemaEvent, encode_value

G = "3e11fa47-71ca-11e1-9e33-c80aa9429562:7"
ABSENT = "s._cdc_partial IS NOT NULL AND map_contains_key(s._cdc_partial, 'Tier')"


def test_complete_images_set_every_column_from_the_staged_row() -> None:
    assert merge_update_value("Tier", partial=False) == "s.`Tier`"
    assert merge_update_value("Tier", partial=False, backfill="CAST(:cdc_backfill_0 AS string)") == "s.`Tier`"


def test_a_column_absent_from_a_partial_image_keeps_the_target_value() -> None:
    assert merge_update_value("Tier", partial=True) == f"CASE WHEN {ABSENT} THEN t.`Tier` ELSE s.`Tier` END"


def test_a_column_the_window_added_and_absent_from_a_partial_image_takes_its_backfill() -> None:
    backfill = "CAST(:cdc_backfill_0 AS string)"
    assert merge_update_value("Tier", partial=True, backfill=backfill) == (
        f"CASE WHEN {ABSENT} THEN {backfill} ELSE s.`Tier` END"
    )


def test_backfills_are_typed_parameters_by_lower_case_column_name() -> None:
    args: dict[str, Any] = {"keys": [1]}
    backfills = [
        ColumnBackfill("Tier", 4, "std"),
        ColumnBackfill("At", 9, "2020-01-02 03:04:05"),
        ColumnBackfill("n", 9, 7),
    ]
    values = backfill_expressions(backfills, {"tier": "string", "at": "timestamp"}, args)
    assert values == {
        "tier": "CAST(:cdc_backfill_0 AS string)",
        "at": "CAST(:cdc_backfill_1 AS timestamp)",
        "n": "CAST(:cdc_backfill_2 AS string)",  # a type the target does not name: its text
    }
    assert args == {"keys": [1], "cdc_backfill_0": "std", "cdc_backfill_1": "2020-01-02 03:04:05", "cdc_backfill_2": 7}


def test_a_window_that_adds_a_column_gives_the_merge_its_backfill_under_the_final_name() -> None:
    """ADD COLUMN x, then a rename of x to y in the same window: the MERGE sets y (the identity's final
    name), and a version staged before the rename reads its x under y too."""
    events = [
        SchemaEvent("db", "t", 3, G, "column_added", column_id=4, name="x", backfill=encode_value("std")),
        SchemaEvent("db", "t", 5, G, "column_renamed", column_id=4, old_name="x", name="y"),
    ]
    changes = plan_window_changes(["id", "v"], events, {1: "id", 2: "v", 4: "y"})
    values = backfill_expressions(changes.backfills, {"y": "string"}, {})
    assert set(values) == {"y"}
    assert "THEN CAST(:cdc_backfill_0 AS string)" in merge_update_value("y", partial=True, backfill=values["y"])
    staged_before_rename = [
        {"name": "id", "column_id": 1},
        {"name": "v", "column_id": 2},
        {"name": "x", "column_id": 4},
    ]
    assert version_renames(staged_before_rename, {1: "id", 2: "v", 4: "y"}) == {"id": "id", "v": "v", "x": "y"}


def test_the_merge_statement_deletes_updates_and_inserts_by_the_staged_op() -> None:
    statement = merge_statement(
        "lake.db.t", "v", "t.`id` = s.`id`", ["id", "Tier"], "t.`Tier` = s.`Tier`", " AND s._cdc_partial IS NULL"
    )
    assert statement == (
        "MERGE INTO lake.db.t t USING v s ON t.`id` = s.`id` "
        "WHEN MATCHED AND s._cdc_op = 'd' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.`Tier` = s.`Tier` "
        "WHEN NOT MATCHED AND s._cdc_op <> 'd' AND s._cdc_partial IS NULL "
        "THEN INSERT (`id`, `Tier`) VALUES (s.`id`, s.`Tier`)"
    )
    untouched = " WHEN NOT MATCHED BY SOURCE THEN DELETE"
    assert merge_statement("t2", "v", "on", ["a"], "u", untouched=untouched).endswith("VALUES (s.`a`)" + untouched)
