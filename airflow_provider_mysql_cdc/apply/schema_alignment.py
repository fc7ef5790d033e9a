"""How one window's schema events reshape one target table, and which staged rows count (pure).

The target's column names always equal MySQL's as of the last window applied to it. A window's
:class:`~airflow_provider_mysql_cdc.core.schema_events.SchemaEvent` records, replayed in order, say
what happened since: renames become Iceberg renames (Iceberg follows columns by field id, so a swap
through a temporary name works like in MySQL); a column added under a name the target still has (a
dropped column kept, or the name of another identity) first drops that stale column, so no old value
survives under the new column; a column added with a value MySQL gave the existing rows is
back-filled. Staged rows of every schema version are read under the names their column ids have at
the end of the window.

:func:`plan_window_changes` decides all this; ``table_applier`` carries it out. Columns missing from the
target after the renames and drops, and widened types, are added by
:func:`~airflow_provider_mysql_cdc.apply.plan.plan_schema_changes` from the staged types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysql_cdc.core.schema_events import (
    COLUMN_ADDED,
    COLUMN_DROPPED,
    COLUMN_RENAMED,
    REBUILD,
    RESET,
    TRUNCATED,
    SchemaEvent,
    decode_value,
)


@dataclass(frozen=True)
class ColumnAlteration:
    """An ``ALTER TABLE`` on the target: ``rename`` (to ``new_name``) or ``drop`` of ``column``."""

    action: str
    column: str
    new_name: str = ""

    @property
    def changes_case_only(self) -> bool:
        """A rename whose names differ only in letter case (``RENAME COLUMN v TO V``): Spark compares
        column names without case and refuses it ("`V` already exists"), so it goes to Iceberg itself."""
        return (
            self.action == "rename"
            and self.column != self.new_name
            and _fold_key(self.column) == _fold_key(self.new_name)
        )

    def sql(self, target: str) -> str:
        """The Spark SQL statement on ``target`` (a quoted table name)."""
        from airflow_provider_mysql_cdc.apply.plan import quote

        if self.action == "rename":
            return f"ALTER TABLE {target} RENAME COLUMN {quote(self.column)} TO {quote(self.new_name)}"
        return f"ALTER TABLE {target} DROP COLUMN {quote(self.column)}"


@dataclass(frozen=True)
class ColumnBackfill:
    """Rows existing at ``seq`` (staged before it, or not changed in the window) get ``value`` in ``column``."""

    column: str
    seq: int
    value: Any


@dataclass(frozen=True)
class WindowTableChanges:
    """What a window does to one target table besides merging its rows."""

    #: Renames and drops, in order, before the merge.
    alterations: tuple[ColumnAlteration, ...] = ()
    backfills: tuple[ColumnBackfill, ...] = ()
    #: Rows staged before this ``_cdc_seq`` are gone (TRUNCATE); the target's rows are deleted.
    truncate_seq: int | None = None
    #: The table was dropped or created anew at this ``_cdc_seq``: nothing before it survives and the
    #: target is replaced, schema included, by the rows staged after it.
    reset_seq: int | None = None
    #: The target cannot follow a change at this ``_cdc_seq``: rows from it on are not applied.
    rebuild: SchemaEvent | None = None
    #: Events that shaped the target (for the report).
    applied_events: tuple[SchemaEvent, ...] = field(default_factory=tuple)

    @property
    def first_excluded_seq(self) -> int | None:
        """Rows staged at or after this ``_cdc_seq`` are not applied (a pending rebuild)."""
        return None if self.rebuild is None else self.rebuild.seq

    @property
    def replaces_rows(self) -> bool:
        """Whether rows before some point are gone (TRUNCATE or reset), so untouched target rows are deleted."""
        return self.truncate_seq is not None or self.reset_seq is not None

    @property
    def first_kept_seq(self) -> int | None:
        """Rows staged before this ``_cdc_seq`` are gone (the last TRUNCATE or reset)."""
        points = [seq for seq in (self.truncate_seq, self.reset_seq) if seq is not None]
        return max(points) if points else None


def _fold_key(name: str) -> str:
    return name.lower()


class _TargetColumns:
    """The target's column names while a window's events are replayed, and the ALTERs that follow them."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.names = {_fold_key(name): name for name in columns}
        self.alterations: list[ColumnAlteration] = []

    def drop(self, name: str) -> None:
        existing = self.names.pop(_fold_key(name), None)
        if existing is not None:
            self.alterations.append(ColumnAlteration("drop", existing))

    def rename_together(self, group: Sequence[SchemaEvent]) -> None:
        """The renames of one statement happen at once (``RENAME COLUMN a TO b, RENAME COLUMN b TO a``):
        through temporary names when there are several. MySQL's names are unique at every step, so a
        target column under a new name that no rename frees is stale (dropped in MySQL, kept here) and
        goes first."""
        moves: list[tuple[str, str]] = []
        for event in group:
            assert event.old_name is not None and event.name is not None
            old = self.names.pop(_fold_key(event.old_name), None)
            if old is not None:  # None: already renamed (a re-run after a crash), or never in the target
                moves.append((old, event.name))
        if len(moves) > 1:
            temporaries = [f"__cdc_rename_{index}_{old}" for index, (old, _) in enumerate(moves)]
            self.alterations += [
                ColumnAlteration("rename", old, tmp) for (old, _), tmp in zip(moves, temporaries, strict=True)
            ]
            moves = [(tmp, new) for tmp, (_, new) in zip(temporaries, moves, strict=True)]
        for old, new in moves:
            if _fold_key(old) != _fold_key(new):
                self.drop(new)
            if old != new:
                self.alterations.append(ColumnAlteration("rename", old, new))
            self.names[_fold_key(new)] = new


def _cut_points(events: Sequence[SchemaEvent]) -> tuple[list[SchemaEvent], SchemaEvent | None, int | None, int | None]:
    """The events that shape the target, the ``rebuild`` that ends what is applied, and the last reset
    and TRUNCATE. Nothing before the last reset counts (the table was dropped, renamed away or created
    anew: a rebuild it was waiting for is moot); nothing after the first rebuild that follows counts."""
    ordered = sorted(events, key=lambda event: event.seq)  # stable: a statement's events keep their order
    resets = [index for index, event in enumerate(ordered) if event.kind == RESET]
    reset_seq = None
    if resets:
        reset_seq = ordered[resets[-1]].seq
        ordered = ordered[resets[-1] + 1 :]
    rebuild = next((event for event in ordered if event.kind == REBUILD), None)
    if rebuild is not None:
        ordered = ordered[: ordered.index(rebuild)]
    truncate_seq = max((event.seq for event in ordered if event.kind == TRUNCATED), default=None)
    return ordered, rebuild, reset_seq, truncate_seq


def rebuild_after_last_reset(events: Sequence[SchemaEvent]) -> SchemaEvent | None:
    """The ``rebuild`` event that ends what a window applies of a table (the first after the last
    reset), or None: the rule :func:`plan_window_changes` applies, for the planner's pending note."""
    return _cut_points(events)[1]


def plan_window_changes(
    target_columns: Sequence[str] | None,
    events: Sequence[SchemaEvent],
    final_column_ids: Mapping[int, str],
    *,
    drop_dropped_columns: bool = False,
) -> WindowTableChanges:
    """The target changes of one table's ``events`` for a target with ``target_columns`` (None: no
    target yet). ``final_column_ids`` maps the column ids of the table's last schema version in the
    window to their names (only columns that exist at the end are back-filled)."""
    ordered, rebuild, reset_seq, truncate_seq = _cut_points(events)
    target = _TargetColumns(target_columns or ())
    reshape = reset_seq is None and target_columns is not None  # else the target is created or replaced
    backfills: list[ColumnBackfill] = []
    position = 0
    while position < len(ordered):
        event = ordered[position]
        if event.kind == COLUMN_RENAMED:
            group = [e for e in ordered[position:] if e.seq == event.seq and e.kind == COLUMN_RENAMED]
            position += len(group)
            if reshape:
                target.rename_together(group)
            continue
        position += 1
        if event.kind == COLUMN_ADDED:
            assert event.name is not None
            if reshape:
                target.drop(event.name)  # old values under this name belong to another column identity
            final_name = final_column_ids.get(event.column_id) if event.column_id is not None else None
            value = None if final_name is None or event.backfill is None else decode_value(event.backfill)
            if final_name is not None and value is not None:
                backfills.append(ColumnBackfill(final_name, event.seq, value))
        elif event.kind == COLUMN_DROPPED and drop_dropped_columns and reshape:
            assert event.name is not None
            target.drop(event.name)
    return WindowTableChanges(
        alterations=tuple(target.alterations),
        backfills=tuple(backfills),
        truncate_seq=truncate_seq,
        reset_seq=reset_seq,
        rebuild=rebuild,
        applied_events=tuple(ordered),
    )


def version_renames(
    version_columns: Sequence[Mapping[str, Any]], final_column_ids: Mapping[int, str]
) -> dict[str, str]:
    """For one staged schema version (its columns' descriptions, with ``column_id``), the staged
    column name -> the name it is applied under; columns whose identity does not exist at the end of
    the window are left out. Versions staged without column ids keep their names."""
    renames: dict[str, str] = {}
    for column in version_columns:
        name = str(column["name"])
        column_id = column.get("column_id")
        if column_id is None:
            renames[name] = name
        elif int(column_id) in final_column_ids:
            renames[name] = final_column_ids[int(column_id)]
    return renames


def window_version_renames(
    table_schemas: Sequence[Any],
    staged_files: Sequence[Any],
    final_column_ids: Mapping[int, str],
    reset_seq: int | None,
) -> dict[int, dict[str, str]]:
    """:func:`version_renames` of each staged schema version of one table in a window (``table_schemas``:
    its ``SchemaVersionInfo``; ``staged_files``: its ``StagedFile``).

    When rows were staged after the window's last reset (``reset_seq``: the table dropped or created
    anew), a version whose staged rows all precede it keeps none of its table columns: its rows do
    not count, and its column ids number the columns of a table that no longer exists (a table created
    anew numbers its columns from 1 again), so they must not be read as the final columns' ids; the
    rows staged after the reset give the columns their types. Without such rows the versions are read
    by id as usual (only their schema is used: none of their rows counts)."""
    last_seq: dict[int, int] = {}
    for staged in staged_files:
        last_seq[staged.schema_version] = max(last_seq.get(staged.schema_version, staged.last_seq), staged.last_seq)
    rows_after_reset = reset_seq is not None and any(seq > reset_seq for seq in last_seq.values())
    renames: dict[int, dict[str, str]] = {}
    for info in table_schemas:
        version = info.schema_version
        before_reset = rows_after_reset and version in last_seq and last_seq[version] < (reset_seq or 0)
        renames[version] = {} if before_reset else version_renames(info.columns, final_column_ids)
    return renames
