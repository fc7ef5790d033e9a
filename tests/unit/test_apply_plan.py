"""The apply's pure decisions: applied state, the steps of one table, and schema evolution."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import pytest

from airflow_provider_mysql_cdc.apply.plan import (
    AppliedState,
    ApplyWindow,
    LoadSnapshotChunks,
    SchemaChange,
    TableStep,
    plan_schema_changes,
    plan_table,
    tables_in_windows,
)
from airflow_provider_mysql_cdc.core.schema_events import SchemaEvent
from airflow_provider_mysql_cdc.core.staging import (
    SnapshotTableManifest,
    StagedFile,
    StagingManifest,
    TruncateMarker,
    cdc_seq,
)
from airflow_provider_mysql_cdc.errors import (
    ApplyGapError,
    ConfigurationError,
    ForeignTableError,
    RebuildPendingError,
    SnapshotNotReadyError,
    TerminalCdcError,
    UnsupportedSchemaChangeError,
)

P = "p"
T = "db.t"
U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def upper(window_id: int) -> str:
    return f"{U}:1-{window_id * 10}"


def staged(table: str = "t", window_id: int = 1, database: str = "db") -> StagedFile:
    return StagedFile(
        path=f"{database}.{table}/v1/part-00000.parquet",
        database=database,
        table=table,
        schema_version=1,
        rows=3,
        bytes=100,
        sha256="0" * 64,
        op_counts={"c": 3},
        first_seq=cdc_seq(window_id, 0),
        last_seq=cdc_seq(window_id, 2),
    )


def truncate(seq: int, table: str = "t") -> TruncateMarker:
    return TruncateMarker(database="db", table=table, seq=seq, gtid=f"{U}:{seq}")


def window(
    window_id: int,
    *tables: str,
    truncates: Sequence[TruncateMarker] = (),
    snapshots: dict[str, str] | None = None,
) -> StagingManifest:
    """Window ``window_id`` with one file for each of ``tables`` (``t``: ``db.t``)."""
    return StagingManifest(
        pipeline=P,
        window_id=window_id,
        lower=upper(window_id - 1) if window_id > 1 else "",
        upper=upper(window_id),
        cutoff_rule="gtid",
        cutoff_value="",
        transactions=1,
        first_commit_ts_us=None,
        last_commit_ts_us=None,
        files=tuple(staged(table, window_id) for table in tables),
        truncates=tuple(truncates),
        snapshots={T: "000001"} if snapshots is None else snapshots,
    )


def snapshot(snapshot_id: str = "000001", handoff: int = 1, chunks: int = 5) -> SnapshotTableManifest:
    return SnapshotTableManifest(
        pipeline=P,
        snapshot_id=snapshot_id,
        database="db",
        table="t",
        handoff_window=handoff,
        chunks=tuple(
            {
                "chunk": {"database": "db", "table": "t", "chunk_no": n, "key_columns": ["id"]},
                "frontier": f"{U}:1-5",
                "manifest": f"{P}/snapshots/{snapshot_id}/{T}/chunk-{n:05d}-abc/_manifest.json",
                "rows": 10,
            }
            for n in range(chunks)
        ),
    )


def plan(
    state: AppliedState | None,
    windows: Sequence[int],
    manifests: Sequence[StagingManifest],
    snapshots: Sequence[SnapshotTableManifest] = (),
    chunks_per_commit: int = 2,
    load_snapshots: bool = True,
    pipeline: str = P,
) -> list[TableStep]:
    by_window = {m.window_id: m for m in manifests}
    by_snapshot = {(s.snapshot_id, s.table_name): s for s in snapshots}
    return plan_table(
        T,
        pipeline,
        state,
        windows,
        by_window.get,
        lambda snapshot_id, table_name: by_snapshot.get((snapshot_id, table_name)),
        chunks_per_commit,
        load_snapshots,
    )


def shape(steps: Sequence[TableStep]) -> list[tuple[object, ...]]:
    """``("load", snapshot, first, end, replace)`` or ``("window", id, files, truncate_seq)`` per step."""
    return [
        ("load", s.snapshot.snapshot_id, s.first_chunk, s.end_chunk, s.replace)
        if isinstance(s, LoadSnapshotChunks)
        else ("window", s.manifest.window_id, len(s.files), s.truncate_seq)
        for s in steps
    ]


def assert_chained(steps: Sequence[TableStep], start: AppliedState) -> None:
    assert all(s.table_name == T for s in steps)
    assert [s.before for s in steps] == [start] + [s.after for s in steps[:-1]]


# -- AppliedState -------------------------------------------------------------------------------


def test_applied_state_round_trips_through_the_summary() -> None:
    state = AppliedState(P, 7, upper(7), "000002", 3, 5)
    summary = state.to_summary()
    assert summary == {
        "cdc.pipeline": P,
        "cdc.window-id": "7",
        "cdc.upper": upper(7),
        "cdc.snapshot-id": "000002",
        "cdc.snapshot-chunks-loaded": "3",
        "cdc.snapshot-chunks": "5",
    }
    assert AppliedState.from_summary({**summary, "spark.app.id": "x"}, "db.t") == state
    assert AppliedState.from_summary({"cdc.pipeline": P, "cdc.window-id": "4"}, "db.t") == AppliedState(P, 4)


def test_a_summary_without_pipeline_is_no_apply_commit() -> None:
    assert AppliedState.from_summary({"cdc.window-id": "4", "added-records": "3"}, "db.t") is None


@pytest.mark.parametrize(
    "summary",
    [
        {"cdc.pipeline": P},
        {"cdc.pipeline": P, "cdc.window-id": "four"},
        {"cdc.pipeline": P, "cdc.window-id": "4", "cdc.snapshot-chunks": "x"},
    ],
)
def test_unreadable_cdc_properties_are_terminal(summary: dict[str, str]) -> None:
    with pytest.raises(TerminalCdcError, match=r"^iceberg\.db\.t: the CDC properties .* are unreadable"):
        AppliedState.from_summary(summary, "iceberg.db.t")


def test_loading_while_chunks_are_missing() -> None:
    assert AppliedState(P, 0, "", "000001", 2, 5).loading
    assert not AppliedState(P, 0, "", "000001", 5, 5).loading
    assert not AppliedState(P, 3, upper(3)).loading
    assert not AppliedState(P).loading


# -- plan_table: snapshot loads and windows ------------------------------------------------------


def test_first_apply_loads_the_snapshot_in_batches_then_applies_the_window() -> None:
    steps = plan(None, [1], [window(1, "t", "other")], [snapshot(handoff=1, chunks=5)])
    assert shape(steps) == [
        ("load", "000001", 0, 2, True),
        ("load", "000001", 2, 4, False),
        ("load", "000001", 4, 5, False),
        ("window", 1, 1, None),
    ]
    assert_chained(steps, AppliedState(P))
    assert [s.after for s in steps] == [
        AppliedState(P, 0, "", "000001", 2, 5),
        AppliedState(P, 0, "", "000001", 4, 5),
        AppliedState(P, 0, "", "000001", 5, 5),
        AppliedState(P, 1, upper(1), "000001", 5, 5),
    ]
    last = steps[-1]
    assert isinstance(last, ApplyWindow)
    assert [f.table for f in last.files] == ["t"]
    assert steps[0].describe() == "snapshot 000001 chunks 0..1 of 5"
    assert last.describe() == "window 1"


def test_first_apply_without_changes_in_the_window_only_loads() -> None:
    steps = plan(None, [1], [window(1, "other")], [snapshot(handoff=1, chunks=5)])
    assert shape(steps) == [
        ("load", "000001", 0, 2, True),
        ("load", "000001", 2, 4, False),
        ("load", "000001", 4, 5, False),
    ]
    assert_chained(steps, AppliedState(P))
    assert steps[-1].after == AppliedState(P, 0, "", "000001", 5, 5)


def test_one_commit_per_chunk_and_one_commit_for_all() -> None:
    manifests, snapshots = [window(1, "t")], [snapshot(chunks=3)]
    assert shape(plan(None, [1], manifests, snapshots, chunks_per_commit=1)) == [
        ("load", "000001", 0, 1, True),
        ("load", "000001", 1, 2, False),
        ("load", "000001", 2, 3, False),
        ("window", 1, 1, None),
    ]
    assert shape(plan(None, [1], manifests, snapshots, chunks_per_commit=8)) == [
        ("load", "000001", 0, 3, True),
        ("window", 1, 1, None),
    ]


def test_an_applied_table_has_nothing_to_do() -> None:
    state = AppliedState(P, 3, upper(3), "000001", 5, 5)
    manifests = [window(i, "t") for i in (1, 2, 3)]
    assert plan(state, [3], manifests, [snapshot()]) == []
    assert plan(state, [1, 2], manifests, [snapshot()]) == []


def test_a_partly_loaded_table_resumes_at_its_next_chunk() -> None:
    state = AppliedState(P, 0, "", "000001", 2, 5)
    steps = plan(state, [1], [window(1, "t")], [snapshot(handoff=1, chunks=5)])
    assert shape(steps) == [
        ("load", "000001", 2, 4, False),
        ("load", "000001", 4, 5, False),
        ("window", 1, 1, None),
    ]
    assert_chained(steps, state)
    assert steps[-1].after == AppliedState(P, 1, upper(1), "000001", 5, 5)


def test_a_re_snapshot_reloads_every_chunk_in_one_step_before_its_hand_off_window() -> None:
    # The target already holds data: the re-load replaces it in one commit, so no reader sees it half-built.
    state = AppliedState(P, 3, upper(3), "000001", 5, 5)
    manifests = [window(4, "t", snapshots={T: "000002"})]
    snapshots = [snapshot("000001", 1, 5), snapshot("000002", handoff=4, chunks=3)]
    steps = plan(state, [4], manifests, snapshots)
    assert shape(steps) == [("load", "000002", 0, 3, True), ("window", 4, 1, None)]
    assert_chained(steps, state)
    assert [s.after for s in steps] == [
        AppliedState(P, 3, "", "000002", 3, 3),
        AppliedState(P, 4, upper(4), "000002", 3, 3),
    ]


def test_a_re_snapshot_inside_the_run_is_loaded_at_its_hand_off() -> None:
    state = AppliedState(P, 2, upper(2), "000001", 5, 5)
    manifests = [window(3, "t"), window(4, "t", snapshots={T: "000002"})]
    snapshots = [snapshot("000001", 1, 5), snapshot("000002", handoff=4, chunks=1)]
    steps = plan(state, [3, 4], manifests, snapshots)
    assert shape(steps) == [("window", 3, 1, None), ("load", "000002", 0, 1, True), ("window", 4, 1, None)]
    assert_chained(steps, state)
    assert steps[1].after == AppliedState(P, 3, "", "000002", 1, 1)


def test_a_snapshot_whose_hand_off_is_not_the_window_naming_it_is_refused() -> None:
    state = AppliedState(P, 3, upper(3), "000001", 5, 5)
    manifests = [window(4, "t"), window(5, "t", snapshots={T: "000002"})]
    snapshots = [snapshot("000001", 1, 5), snapshot("000002", handoff=4)]
    with pytest.raises(ApplyGapError, match=r"window 5 applies to snapshot 000002, whose hand-off is window 4"):
        plan(state, [4, 5], manifests, snapshots)


# -- plan_table: gaps ----------------------------------------------------------------------------


def test_a_skipped_window_with_changes_of_the_table_is_a_gap() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    with pytest.raises(ApplyGapError, match=r"window 2 holds changes .* apply windows 2\.\.2 first"):
        plan(state, [3], [window(2, "t"), window(3, "t")], [snapshot()])


def test_a_skipped_window_without_changes_of_the_table_is_no_gap() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    steps = plan(state, [3], [window(2, "other"), window(3, "t")], [snapshot()])
    assert shape(steps) == [("window", 3, 1, None)]
    assert_chained(steps, state)
    assert steps[0].after == AppliedState(P, 3, upper(3), "000001", 5, 5)


def test_an_unpublished_skipped_window_is_a_gap() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    with pytest.raises(
        ApplyGapError, match=r"window 2 of pipeline 'p' is not published, so it cannot be applied before"
    ):
        plan(state, [3], [window(3, "t")], [snapshot()])


def test_an_unpublished_requested_window_is_a_gap() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    with pytest.raises(ApplyGapError, match=r"window 3 of pipeline 'p' is not published, so it cannot be applied; run"):
        plan(state, [2, 3], [window(2, "t")], [snapshot()])


# -- plan_table: truncates -----------------------------------------------------------------------


def test_a_truncate_of_a_table_that_never_held_rows_is_nothing() -> None:
    manifests = [window(1, "other", truncates=[truncate(cdc_seq(1, 4))], snapshots={})]
    assert plan(None, [1], manifests) == []


def test_a_truncate_of_an_applied_table_is_applied_at_its_last_seq() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    marks = [truncate(cdc_seq(2, 9)), truncate(cdc_seq(2, 3), table="other"), truncate(cdc_seq(2, 4))]
    steps = plan(state, [2], [window(2, "other", truncates=marks)], [snapshot()])
    assert shape(steps) == [("window", 2, 0, cdc_seq(2, 9))]
    assert steps[0].after == AppliedState(P, 2, upper(2), "000001", 5, 5)


# -- plan_table: refusals ------------------------------------------------------------------------


def test_a_table_of_another_pipeline_is_refused() -> None:
    with pytest.raises(ForeignTableError, match=r"written by pipeline 'other', not 'p'"):
        plan(AppliedState("other", 1), [2], [window(2, "t")], [snapshot()])


@pytest.mark.parametrize("windows", [[], [1, 3], [2, 1], [1, 1]])
def test_windows_must_be_consecutive(windows: list[int]) -> None:
    with pytest.raises(ConfigurationError, match=r"windows to apply must be consecutive ids"):
        plan(None, windows, [window(i, "t") for i in (1, 2, 3)], [snapshot()])


def test_chunks_per_commit_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match=r"chunks_per_commit must be at least 1"):
        plan(None, [1], [window(1, "t")], [snapshot()], chunks_per_commit=0)


def test_a_governing_snapshot_without_table_manifest_is_not_ready() -> None:
    with pytest.raises(SnapshotNotReadyError, match=r"db\.t: snapshot 000001 has no published table manifest"):
        plan(None, [1], [window(1, "t")])


# -- plan_table: changelog mode ------------------------------------------------------------------


def test_changelog_mode_plans_windows_only() -> None:
    manifests = [window(1, "t"), window(2, "t", snapshots={T: "000002"})]
    steps = plan(None, [1, 2], manifests, load_snapshots=False)  # no snapshot manifest is even read
    assert shape(steps) == [("window", 1, 1, None), ("window", 2, 1, None)]
    assert_chained(steps, AppliedState(P))
    assert steps[-1].after == AppliedState(P, 2, upper(2))


# -- tables_in_windows ---------------------------------------------------------------------------


def test_tables_in_windows_are_the_changed_truncated_and_governed_tables() -> None:
    manifests = [
        window(1, "z", "t", snapshots={"db.s": "000001"}),
        window(2, "t", truncates=[truncate(cdc_seq(2, 0), table="a")], snapshots={}),
    ]
    assert tables_in_windows(manifests) == ["db.a", "db.s", "db.t", "db.z"]
    assert tables_in_windows([]) == []


# -- plan_schema_changes -------------------------------------------------------------------------

TARGET = [("id", "bigint"), ("name", "string")]


def test_an_added_column_is_added() -> None:
    assert plan_schema_changes(TARGET, [*TARGET, ("age", "int")], drop_missing=False) == [
        SchemaChange("add", "age", "int")
    ]


def test_a_missing_column_stays_unless_dropped() -> None:
    assert plan_schema_changes(TARGET, [("id", "bigint")], drop_missing=False) == []
    assert plan_schema_changes(TARGET, [("id", "bigint")], drop_missing=True) == [SchemaChange("drop", "name")]


@pytest.mark.parametrize(
    ("target", "source", "expected"),
    [
        ("int", "bigint", "bigint"),
        ("int", "tinyint", None),
        ("int", "smallint", None),
        ("bigint", "int", None),
        ("float", "double", "double"),
        ("double", "float", None),
        ("decimal(10,2)", "decimal(12,2)", "decimal(12,2)"),
        ("decimal(12,2)", "decimal(10,2)", None),
        ("decimal(12,4)", "decimal(10,2)", None),
        ("string", "string", None),
    ],
)
def test_type_changes_that_fit_or_widen(target: str, source: str, expected: str | None) -> None:
    changes = plan_schema_changes([("v", target)], [("v", source)], drop_missing=False)
    assert changes == ([] if expected is None else [SchemaChange("widen", "v", expected)])


@pytest.mark.parametrize(
    ("target", "source"),
    [
        ("decimal(10,2)", "decimal(10,4)"),
        ("decimal(10,2)", "decimal(12,4)"),
        ("int", "string"),
        ("bigint", "decimal(20,0)"),
        ("string", "int"),
        ("double", "decimal(10,2)"),
    ],
)
def test_other_type_changes_are_refused(target: str, source: str) -> None:
    with pytest.raises(UnsupportedSchemaChangeError, match=re.escape(f"column 'v' changed from {target} to {source},")):
        plan_schema_changes([("v", target)], [("v", source)], drop_missing=False)


def test_column_names_match_case_insensitively() -> None:
    target = [("ID", "int"), ("Name", "string"), ("Gone", "string")]
    changes = plan_schema_changes(target, [("id", "bigint"), ("NAME", "string")], drop_missing=True)
    assert changes == [SchemaChange("widen", "ID", "bigint"), SchemaChange("drop", "Gone")]


def test_schema_change_sql_backquotes_names() -> None:
    target = "iceberg.db.t"
    assert SchemaChange("add", "my col", "decimal(12,2)").sql(target) == (
        "ALTER TABLE iceberg.db.t ADD COLUMN `my col` decimal(12,2)"
    )
    assert SchemaChange("widen", "n", "bigint").sql(target) == "ALTER TABLE iceberg.db.t ALTER COLUMN `n` TYPE bigint"
    assert SchemaChange("drop", "a`b").sql(target) == "ALTER TABLE iceberg.db.t DROP COLUMN `a``b`"


def test_a_re_run_of_an_old_window_finishes_the_load_of_a_newer_snapshot() -> None:
    """Mid-way through re-loading from 000002 (hand-off 4), a re-run of window 3 (governed by
    000001, whose table manifest is gone) resumes the load instead of reading 000001."""
    state = AppliedState(P, 3, "", "000002", 2, 5)
    manifests = [window(3, "t")]
    snapshots = [snapshot("000002", handoff=4, chunks=5)]
    steps = plan(state, [3], manifests, snapshots)
    assert shape(steps) == [("load", "000002", 2, 4, False), ("load", "000002", 4, 5, False)]
    assert_chained(steps, state)


# -- plan_table: schema events and rebuilds ---------------------------------------------------------


def with_events(
    manifest: StagingManifest, *events: SchemaEvent, pending: dict[str, str] | None = None
) -> StagingManifest:
    return dataclasses.replace(manifest, schema_events=tuple(events), rebuilds_pending=pending or {})


def schema_event(kind: str, seq: int, table: str = "t", **details: object) -> SchemaEvent:
    return SchemaEvent("db", table, seq, f"{U}:{seq}", kind, **details)  # type: ignore[arg-type]


def test_a_window_with_only_a_schema_event_of_the_table_is_a_step() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    added = schema_event("column_added", cdc_seq(2, 0), column_id=3, name="tier", backfill='"std"')
    steps = plan(state, [2], [with_events(window(2, "other"), added)], [snapshot()])
    assert shape(steps) == [("window", 2, 0, None)]
    assert isinstance(steps[0], ApplyWindow) and steps[0].events == (added,)
    assert tables_in_windows([with_events(window(2), added)]) == [T]


def test_a_rebuild_event_leaves_the_table_waiting_for_a_snapshot() -> None:
    state = AppliedState(P, 1, upper(1), "000001", 5, 5)
    rebuild = schema_event("rebuild", cdc_seq(2, 3), reason="column f2 changed from varchar(10) to int")
    steps = plan(state, [2], [with_events(window(2, "t"), rebuild)], [snapshot()])
    assert (
        steps[-1].after.rebuild_pending
        == f"window 2 (GTID {U}:{cdc_seq(2, 3)}): column f2 changed from varchar(10) to int"
    )
    assert AppliedState.from_summary(steps[-1].after.to_summary(), T) == steps[-1].after


def test_a_table_waiting_for_its_rebuild_stops_until_a_snapshot_governs_it() -> None:
    state = AppliedState(P, 2, upper(2), "000001", 5, 5, rebuild_pending="window 2 (GTID x): MODIFY f2 INT")
    waiting = with_events(window(3, snapshots={T: "000001"}), pending={T: "window 2 (GTID x): MODIFY f2 INT"})
    assert tables_in_windows([waiting]) == [T]
    with pytest.raises(RebuildPendingError, match=r"resnapshot=\['db.t'\]"):
        plan(state, [3], [waiting], [snapshot()])
    rebuilt = window(3, "t", snapshots={T: "000002"})
    steps = plan(state, [3], [rebuilt], [snapshot(), snapshot("000002", handoff=3, chunks=3)])
    assert shape(steps) == [("load", "000002", 0, 3, True), ("window", 3, 1, None)]
    assert all(not step.after.rebuild_pending for step in steps)


def test_a_reset_of_a_table_waiting_for_its_rebuild_makes_the_wait_moot() -> None:
    """Renamed away or dropped before a snapshot could read it: the window applies (its reset empties
    the target) and the table no longer waits; a rebuild after the reset still counts."""
    state = AppliedState(P, 2, upper(2), "000001", 5, 5, rebuild_pending="window 2 (GTID x): renamed from db.s")
    reset = schema_event("reset", cdc_seq(3, 4), reason="renamed to db.s")
    (step,) = plan(state, [3], [with_events(window(3, "t"), reset)], [snapshot()])
    assert shape([step]) == [("window", 3, 1, None)] and not step.after.rebuild_pending
    rebuild = schema_event("rebuild", cdc_seq(3, 2), reason="renamed from db.s")
    (step,) = plan(
        AppliedState(P, 2, upper(2), "000001", 5, 5), [3], [with_events(window(3), rebuild, reset)], [snapshot()]
    )
    assert not step.after.rebuild_pending  # renamed onto the name, then away again in one window
    again = schema_event("rebuild", cdc_seq(3, 6), reason="renamed from db.u")
    (step,) = plan(state, [3], [with_events(window(3), rebuild, reset, again)], [snapshot()])
    assert step.after.rebuild_pending.endswith("renamed from db.u")
    with pytest.raises(RebuildPendingError):  # without a reset it still waits
        plan(state, [3], [with_events(window(3, "t"), schema_event("truncated", cdc_seq(3, 1)))], [snapshot()])


# -- plan_table: a table without target that waits for its first snapshot -------------------------


def _rebuild(window_id: int) -> SchemaEvent:
    return SchemaEvent("db", "t", cdc_seq(window_id, 0), f"{U}:{window_id}", "rebuild", reason="engine keeps no rows")


def test_a_rebuild_of_a_table_without_target_is_reported_by_its_own_run_and_skipped_by_later_ones() -> None:
    """A table created in a window by a statement capture cannot follow has no target and no rows: its
    run gets a step that only names the rebuild; later runs pass over that window (no ApplyGapError)."""
    waiting = dataclasses.replace(window(2, snapshots={}), schema_events=(_rebuild(2),))
    (step,) = plan(None, [2], [window(1, snapshots={}), waiting])
    assert shape([step]) == [("window", 2, 0, None)]
    assert step.after.rebuild_pending.endswith("engine keeps no rows")
    assert plan(None, [3], [window(1, snapshots={}), waiting, window(3, snapshots={})]) == []
    with pytest.raises(ApplyGapError, match="window 2 holds changes"):  # a table with a target still needs it
        plan(AppliedState(P, 1, upper(1), "000001", 5, 5), [3], [waiting, window(3, "t")], [snapshot()])
