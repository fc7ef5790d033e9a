"""Replaying a window's schema events on a target table (apply.schema_alignment), and the encoding of
back-filled values (core.schema_events)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply.schema_alignment import (
    ColumnAlteration,
    ColumnBackfill,
    plan_window_changes,
    version_renames,
    window_version_renames,
)
from airflow_provider_mysql_cdc.core.schema_events import SchemaEvent, decode_value, encode_value

G = "3e11fa47-71ca-11e1-9e33-c80aa9429562:7"


def event(kind: str, seq: int, **details: Any) -> SchemaEvent:
    return SchemaEvent("db", "t", seq, G, kind, **details)


def renamed(seq: int, column_id: int, old: str, new: str) -> SchemaEvent:
    return event("column_renamed", seq, column_id=column_id, old_name=old, name=new)


def added(seq: int, column_id: int, name: str, value: Any = None) -> SchemaEvent:
    return event("column_added", seq, column_id=column_id, name=name, backfill=encode_value(value))


def test_swapping_two_names_through_a_temporary_one_renames_three_times() -> None:
    events = [renamed(1, 2, "f1", "tmp"), renamed(2, 3, "f2", "f1"), renamed(3, 2, "tmp", "f2")]
    changes = plan_window_changes(["id", "f1", "f2"], events, {1: "id", 2: "f2", 3: "f1"})
    assert changes.alterations == (
        ColumnAlteration("rename", "f1", "tmp"),
        ColumnAlteration("rename", "f2", "f1"),
        ColumnAlteration("rename", "tmp", "f2"),
    )


def test_a_rename_already_done_is_not_repeated() -> None:
    changes = plan_window_changes(["id", "b"], [renamed(1, 2, "a", "b")], {1: "id", 2: "b"})
    assert changes.alterations == ()


def test_a_rename_onto_a_stale_column_drops_the_stale_one_first() -> None:
    changes = plan_window_changes(["id", "a", "b"], [renamed(5, 2, "a", "b")], {1: "id", 2: "b"})
    assert changes.alterations == (ColumnAlteration("drop", "b"), ColumnAlteration("rename", "a", "b"))


def test_a_name_added_again_drops_the_old_column_and_backfills_the_new_one() -> None:
    events = [event("column_dropped", 3, column_id=2, name="c"), added(9, 7, "c", "std")]
    changes = plan_window_changes(["id", "c"], events, {1: "id", 7: "c"})
    assert changes.alterations == (ColumnAlteration("drop", "c"),)
    assert changes.backfills == (ColumnBackfill("c", 9, "std"),)


def test_dropped_columns_stay_unless_asked() -> None:
    dropped = [event("column_dropped", 3, column_id=2, name="c")]
    assert plan_window_changes(["id", "c"], dropped, {1: "id"}).alterations == ()
    changes = plan_window_changes(["id", "c"], dropped, {1: "id"}, drop_dropped_columns=True)
    assert changes.alterations == (ColumnAlteration("drop", "c"),)


def test_only_columns_that_exist_at_the_end_are_backfilled() -> None:
    events = [added(1, 5, "x", 1), event("column_dropped", 2, column_id=5, name="x"), added(3, 6, "x", 2)]
    changes = plan_window_changes(["id"], events, {1: "id", 6: "x"})
    assert changes.backfills == (ColumnBackfill("x", 3, 2),)


def test_null_backfills_are_left_out() -> None:
    assert plan_window_changes(["id"], [added(1, 5, "x", None)], {1: "id", 5: "x"}).backfills == ()


def test_a_reset_replaces_the_target_and_ignores_what_came_before() -> None:
    events = [added(1, 5, "x", 1), event("truncated", 2), event("reset", 4), added(6, 1, "y", "v")]
    changes = plan_window_changes(["id", "x"], events, {1: "y"})
    assert changes.reset_seq == 4 and changes.truncate_seq is None
    assert changes.alterations == ()
    assert changes.backfills == (ColumnBackfill("y", 6, "v"),)
    assert changes.first_kept_seq == 4 and changes.replaces_rows


def test_a_rebuild_cuts_the_window_at_its_event() -> None:
    events = [added(1, 5, "x", 1), event("rebuild", 3, reason="MODIFY f2 INT"), renamed(4, 5, "x", "z")]
    changes = plan_window_changes(["id"], events, {1: "id", 5: "x"})
    assert changes.rebuild is not None and changes.first_excluded_seq == 3
    assert changes.backfills == (ColumnBackfill("x", 1, 1),)
    assert [e.seq for e in changes.applied_events] == [1]


def test_the_last_truncate_counts() -> None:
    changes = plan_window_changes(["id"], [event("truncated", 2), event("truncated", 8)], {1: "id"})
    assert changes.truncate_seq == 8 and changes.first_kept_seq == 8


def test_version_columns_are_read_under_their_final_names() -> None:
    columns = [{"name": "id", "column_id": 1}, {"name": "f1", "column_id": 2}, {"name": "gone", "column_id": 4}]
    assert version_renames(columns, {1: "id", 2: "f2", 3: "f1"}) == {"id": "id", "f1": "f2"}
    assert version_renames([{"name": "a"}], {}) == {"a": "a"}  # staged before column ids existed


def test_versions_before_a_reset_keep_no_column_under_a_reused_id() -> None:
    """A table created anew numbers its columns from 1 again: the old versions' ids are not the new
    columns' ids. Rows staged before the reset keep only the staging columns; a version staged across
    or after it, or without rows here, is read by id."""
    old = SimpleNamespace(schema_version=1, columns=({"name": "id", "column_id": 1}, {"name": "x3", "column_id": 2}))
    new = SimpleNamespace(schema_version=2, columns=({"name": "id", "column_id": 1}, {"name": "name", "column_id": 2}))
    unread = SimpleNamespace(schema_version=3, columns=({"name": "id", "column_id": 1},))
    files = [SimpleNamespace(schema_version=1, last_seq=4), SimpleNamespace(schema_version=2, last_seq=9)]
    final = {1: "id", 2: "name"}
    renames = window_version_renames([old, new, unread], files, final, reset_seq=5)
    assert renames == {1: {}, 2: {"id": "id", "name": "name"}, 3: {"id": "id"}}
    # Without a reset, or without rows staged after it (the table dropped, or created anew and left
    # empty), every version is read by column id.
    assert window_version_renames([old], files, final, reset_seq=None) == {1: {"id": "id", "x3": "name"}}
    assert window_version_renames([old], files[:1], final, reset_seq=5) == {1: {"id": "id", "x3": "name"}}


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        "std",
        "",
        -(2**63),
        2**64 - 1,
        1.5,
        -0.0,
        Decimal("-12.50"),
        b"\x00\xff",
        dt.date(2024, 2, 29),
        dt.datetime(2024, 1, 1, 10, 0, 0, 123456),
        dt.datetime(2024, 1, 1, 10, 0, tzinfo=dt.timezone.utc),
        dt.timedelta(hours=-838, minutes=-59),
        [1.0, 2.5],
    ],
)
def test_staged_values_survive_their_encoding(value: Any) -> None:
    decoded = decode_value(encode_value(value))
    assert decoded == value and type(decoded) is type(value)
    if isinstance(value, float):
        assert str(decoded) == str(value)  # -0.0 keeps its sign


def test_renames_of_one_statement_happen_together() -> None:
    # ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a: both at one seq.
    events = [renamed(4, 2, "a", "b"), renamed(4, 3, "b", "a")]
    changes = plan_window_changes(["id", "a", "b"], events, {1: "id", 2: "b", 3: "a"})
    assert changes.alterations == (
        ColumnAlteration("rename", "a", "__cdc_rename_0_a"),
        ColumnAlteration("rename", "b", "__cdc_rename_1_b"),
        ColumnAlteration("rename", "__cdc_rename_0_a", "b"),
        ColumnAlteration("rename", "__cdc_rename_1_b", "a"),
    )


def test_a_change_of_case_only_is_one_rename() -> None:
    changes = plan_window_changes(["id", "name"], [renamed(2, 2, "name", "Name")], {1: "id", 2: "Name"})
    assert changes.alterations == (ColumnAlteration("rename", "name", "Name"),)
    assert changes.alterations[0].changes_case_only  # Spark refuses it; the applier asks Iceberg


def test_only_a_rename_within_letter_case_changes_case_only() -> None:
    assert not ColumnAlteration("rename", "name", "label").changes_case_only
    assert not ColumnAlteration("rename", "name", "name").changes_case_only
    assert not ColumnAlteration("drop", "Name").changes_case_only
    assert not ColumnAlteration("rename", "__cdc_rename_0_name", "Name").changes_case_only


def test_a_reset_after_a_rebuild_makes_the_rebuild_moot() -> None:
    # The table waited for a rebuild, then was dropped and created anew: the new table is followed.
    events = [event("rebuild", 2, reason="MODIFY"), event("reset", 5), added(7, 3, "x", "v")]
    changes = plan_window_changes(["id"], events, {1: "id", 3: "x"})
    assert changes.rebuild is None and changes.reset_seq == 5
    assert changes.backfills == (ColumnBackfill("x", 7, "v"),)


def test_a_table_renamed_onto_an_existing_name_waits_for_its_rebuild() -> None:
    # RENAME TABLE a TO b, b TO a: at one seq, the old a is gone and the new a must be re-read.
    changes = plan_window_changes(["id"], [event("reset", 4), event("rebuild", 4, reason="renamed")], {1: "id"})
    assert changes.reset_seq == 4 and changes.rebuild is not None and changes.first_excluded_seq == 4
