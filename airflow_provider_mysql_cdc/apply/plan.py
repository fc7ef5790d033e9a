"""What one apply does to one target table: pure decisions, no Spark.

The applied state of a target table lives in the table itself. Every commit the apply makes carries
Iceberg snapshot summary properties (see :class:`AppliedState`): the pipeline, the last window whose
changes of the table are in it, that window's upper GTID set and the snapshot the table was loaded
from. Before applying, the job reads them from the newest commit of the table's current history and
plans only what the table does not have yet, so re-running an apply changes nothing and an apply
never needs a lock outside the table.

A window's manifest names, for each table, the snapshot that governs it (the state its changes
apply to). When that differs from the snapshot the table was loaded from, the table is (re-)loaded
from the snapshot's chunks first, in batches of chunks, each its own commit; the table counts as
loaded once every chunk is in. Windows are applied in order: a window holding changes of a table
that the table does not have yet, before the first requested window, is a gap and is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from airflow_provider_mysql_cdc.apply.schema_alignment import rebuild_after_last_reset
from airflow_provider_mysql_cdc.core.schema_events import REBUILD, RESET, SchemaEvent
from airflow_provider_mysql_cdc.core.staging import SnapshotTableManifest, StagedFile, StagingManifest
from airflow_provider_mysql_cdc.errors import (
    AppliedStateExpiredError,
    ApplyGapError,
    ConfigurationError,
    CorruptStagingError,
    ForeignTableError,
    RebuildPendingError,
    SnapshotNotReadyError,
    TableWithoutKeyError,
    TerminalCdcError,
    UnsupportedSchemaChangeError,
)

#: Prefix of the snapshot summary properties the apply writes.
SUMMARY_PREFIX = "cdc."


@dataclass(frozen=True)
class AppliedState:
    """What a target table holds, as recorded in its newest CDC commit."""

    pipeline: str
    #: The last window whose changes of this table are in it (windows before the hand-off of the
    #: snapshot the table was loaded from count as in). 0: none.
    window_id: int = 0
    #: That window's upper GTID set ("" before any window, and after a snapshot load until a window
    #: with changes of the table is applied).
    upper: str = ""
    #: The snapshot the table was (or is being) loaded from; "" when it never was.
    snapshot_id: str = ""
    snapshot_chunks_loaded: int = 0
    snapshot_chunks: int = 0
    #: Set when a window held a change the table could not follow (a ``rebuild`` schema event): the
    #: table holds that window's changes before it and waits for a fresh snapshot. "window <id>
    #: (GTID <gtid>): <reason>"; "" otherwise.
    rebuild_pending: str = ""

    @property
    def loading(self) -> bool:
        """True while some chunks of the snapshot are not in the table yet."""
        return bool(self.snapshot_id) and self.snapshot_chunks_loaded < self.snapshot_chunks

    def to_summary(self) -> dict[str, str]:
        """The snapshot summary properties of a commit that leaves the table in this state."""
        pending = {f"{SUMMARY_PREFIX}rebuild-pending": self.rebuild_pending} if self.rebuild_pending else {}
        return {
            f"{SUMMARY_PREFIX}pipeline": self.pipeline,
            f"{SUMMARY_PREFIX}window-id": str(self.window_id),
            f"{SUMMARY_PREFIX}upper": self.upper,
            f"{SUMMARY_PREFIX}snapshot-id": self.snapshot_id,
            f"{SUMMARY_PREFIX}snapshot-chunks-loaded": str(self.snapshot_chunks_loaded),
            f"{SUMMARY_PREFIX}snapshot-chunks": str(self.snapshot_chunks),
            **pending,
        }

    @classmethod
    def from_summary(cls, summary: Mapping[str, str], where: str) -> AppliedState | None:
        """The state a commit's summary records, or None when the commit was not made by an apply."""
        if f"{SUMMARY_PREFIX}pipeline" not in summary:
            return None
        try:
            return cls(
                pipeline=summary[f"{SUMMARY_PREFIX}pipeline"],
                window_id=int(summary[f"{SUMMARY_PREFIX}window-id"]),
                upper=summary.get(f"{SUMMARY_PREFIX}upper", ""),
                snapshot_id=summary.get(f"{SUMMARY_PREFIX}snapshot-id", ""),
                snapshot_chunks_loaded=int(summary.get(f"{SUMMARY_PREFIX}snapshot-chunks-loaded", "0")),
                snapshot_chunks=int(summary.get(f"{SUMMARY_PREFIX}snapshot-chunks", "0")),
                rebuild_pending=summary.get(f"{SUMMARY_PREFIX}rebuild-pending", ""),
            )
        except (KeyError, ValueError) as exc:
            raise TerminalCdcError(
                f"{where}: the CDC properties of its newest apply commit are unreadable ({exc}); the table "
                "was changed by something else than the apply. Drop the table and re-apply from a snapshot"
            ) from None


#: A snapshot's summary properties and its parent's id (None for the first snapshot).
SnapshotLink = tuple[Mapping[str, str], int | None]


def newest_applied_state(
    current: int | None, snapshot: Callable[[int], SnapshotLink | None], name: str
) -> AppliedState | None:
    """The newest CDC state of table ``name``'s current history: from its current snapshot (None: no
    commit yet) back through the parents, past commits without the apply's properties (a compaction).
    ``snapshot(id)`` gives a snapshot's summary and parent, or None when it is gone: raises
    :class:`AppliedStateExpiredError` then. None when no commit of the history was made by an apply."""
    snapshot_id = current
    while snapshot_id is not None:
        found = snapshot(snapshot_id)
        if found is None:
            # Commits without CDC properties (a compaction) on top, and the apply's commit below them expired.
            raise AppliedStateExpiredError(
                f"{name}: its snapshot history ends at expired snapshot {snapshot_id} before any commit of the "
                "apply, so the windows it holds cannot be read. Expiring snapshots must keep the newest apply "
                "commit (IcebergMaintenanceOperator does); drop the table and re-snapshot it"
            )
        summary, parent = found
        state = AppliedState.from_summary(summary, name)
        if state is not None:
            return state
        snapshot_id = parent
    return None


@dataclass(frozen=True)
class LoadSnapshotChunks:
    """Merge chunks ``[first_chunk, end_chunk)`` of a snapshot into the table, as one commit."""

    table_name: str
    snapshot: SnapshotTableManifest
    first_chunk: int
    end_chunk: int
    #: First batch of a load: rows of the table absent from these chunks are deleted (a re-load
    #: starts from nothing; later batches add the other chunks' rows).
    replace: bool
    before: AppliedState
    after: AppliedState

    def describe(self) -> str:
        """A short description for logs and errors."""
        return (
            f"snapshot {self.snapshot.snapshot_id} chunks {self.first_chunk}..{self.end_chunk - 1} "
            f"of {len(self.snapshot.chunks)}"
        )


@dataclass(frozen=True)
class ApplyWindow:
    """Merge one window's changes of the table (the last change per key), as one commit."""

    table_name: str
    manifest: StagingManifest
    files: tuple[StagedFile, ...]
    #: ``_cdc_seq`` of the window's last TRUNCATE of the table: rows before it are gone, and the
    #: table is emptied before the later changes apply.
    truncate_seq: int | None
    before: AppliedState
    after: AppliedState
    #: What the window's DDL did to the table, in binlog order.
    events: tuple[SchemaEvent, ...] = ()

    def describe(self) -> str:
        """A short description for logs and errors."""
        return f"window {self.manifest.window_id}"


TableStep = LoadSnapshotChunks | ApplyWindow


def tables_in_windows(manifests: Sequence[StagingManifest]) -> list[str]:
    """Every ``db.table`` a run of windows changes, truncates, alters, governs by a snapshot or still
    waits to rebuild, sorted."""
    names: set[str] = set()
    for manifest in manifests:
        names.update(f"{f.database}.{f.table}" for f in manifest.files)
        names.update(f"{t.database}.{t.table}" for t in manifest.truncates)
        names.update(event.table_name for event in manifest.schema_events)
        names.update(manifest.snapshots)
        names.update(manifest.rebuilds_pending)
    return sorted(names)


def _table_changes(
    manifest: StagingManifest, table_name: str
) -> tuple[tuple[StagedFile, ...], int | None, tuple[SchemaEvent, ...]]:
    files = tuple(f for f in manifest.files if f"{f.database}.{f.table}" == table_name)
    truncates = [t.seq for t in manifest.truncates if f"{t.database}.{t.table}" == table_name]
    events = tuple(event for event in manifest.schema_events if event.table_name == table_name)
    return files, max(truncates) if truncates else None, events


def rebuild_note(window_id: int, event: SchemaEvent) -> str:
    """The ``rebuild_pending`` text of a ``rebuild`` event: where and why, after the named error it
    stops with when it has one (``TableWithoutKeyError: window 3 (GTID ...): ...``)."""
    note = f"window {window_id} (GTID {event.gtid}): {event.reason}"
    return f"{event.error_class}: {note}" if event.error_class else note


def _rebuild_note(manifest: StagingManifest, events: Sequence[SchemaEvent]) -> str:
    """The ``rebuild_pending`` text of the ``rebuild`` event that ends what the window applies of the
    table (:func:`~airflow_provider_mysql_cdc.apply.schema_alignment.rebuild_after_last_reset`: one
    before a reset is moot), or ""."""
    event = rebuild_after_last_reset(events)
    return "" if event is None else rebuild_note(manifest.window_id, event)


def _load_steps(
    table_name: str, snapshot: SnapshotTableManifest, state: AppliedState, first_chunk: int, chunks_per_commit: int
) -> tuple[list[TableStep], AppliedState]:
    """Steps loading ``snapshot`` from ``first_chunk`` on; returns them and the state after the last.

    A target that already holds data from an earlier load or window is re-loaded in one step (one
    commit that replaces it), so its readers never see it half-built."""
    if first_chunk == 0 and (state.window_id or state.snapshot_id):
        chunks_per_commit = max(1, len(snapshot.chunks))
    steps: list[TableStep] = []
    total = len(snapshot.chunks)
    if total == 0:
        raise CorruptStagingError(f"snapshot {snapshot.snapshot_id} of {table_name} lists no chunks; re-snapshot it")
    before = state
    if first_chunk == 0:
        # Windows before the hand-off are superseded by the snapshot; their upper bound is unknown here.
        state = AppliedState(state.pipeline, snapshot.handoff_window - 1, "", snapshot.snapshot_id, 0, total)
    for start in range(first_chunk, total, chunks_per_commit):
        end = min(start + chunks_per_commit, total)
        after = replace(state, snapshot_chunks_loaded=end)
        steps.append(LoadSnapshotChunks(table_name, snapshot, start, end, start == 0, before, after))
        before = state = after
    return steps, state


def _require_not_waiting(
    table_name: str, pipeline: str, current: AppliedState, window_id: int, events: Sequence[SchemaEvent]
) -> None:
    """Raise when the table waits for a rebuild that window ``window_id`` does not bring (no new snapshot
    governs it): :class:`TableWithoutKeyError` when it lost its key, :class:`RebuildPendingError` else.
    A ``reset`` among the window's ``events`` of the table makes the wait moot (dropped or renamed away
    before a snapshot could read it: the target is replaced by what follows the reset)."""
    if any(event.kind == RESET for event in events):
        return
    if current.rebuild_pending.startswith(f"{TableWithoutKeyError.__name__}: "):
        raise TableWithoutKeyError(
            f"{table_name} stops since {current.rebuild_pending.split(': ', 1)[1]}; window {window_id} of "
            f"pipeline {pipeline!r} is not governed by a new snapshot of it, so it stays stopped and the "
            "other tables go on"
        )
    if current.rebuild_pending:
        raise RebuildPendingError(
            f"{table_name} waits for a fresh snapshot since {current.rebuild_pending}; window {window_id} "
            f"of pipeline {pipeline!r} is not governed by one, so the table stops here and the other tables "
            f"go on. Re-snapshot it: trigger a run with resnapshot=[{table_name!r}] (a pipeline whose "
            "schema_change_policy is 'rebuild' does this by itself in its next run, once its approval step "
            "approves it when it has one)"
        )


def waits_without_target(
    pipeline: str, current: AppliedState, files: Sequence[StagedFile], events: Sequence[SchemaEvent]
) -> bool:
    """Whether a window only leaves a table that has no target waiting for a rebuild (a table created
    by a statement capture cannot follow): nothing is applied, the table's first snapshot creates it."""
    return current == AppliedState(pipeline) and not files and bool(events) and all(e.kind == REBUILD for e in events)


def plan_table(
    table_name: str,
    pipeline: str,
    state: AppliedState | None,
    windows: Sequence[int],
    read_window: Callable[[int], StagingManifest | None],
    read_snapshot: Callable[[str, str], SnapshotTableManifest | None],
    chunks_per_commit: int = 8,
    load_snapshots: bool = True,
) -> list[TableStep]:
    """The steps that bring ``table_name`` from ``state`` to the end of ``windows`` (consecutive ids).

    ``read_window(id)`` returns a published window manifest or None; ``read_snapshot(snapshot_id,
    table_name)`` a snapshot's table manifest or None. With ``load_snapshots=False`` (the changelog
    of history mode) snapshots are not loaded and only window changes are planned.
    """
    if not windows or list(windows) != list(range(windows[0], windows[0] + len(windows))):
        raise ConfigurationError(f"windows to apply must be consecutive ids, got {list(windows)}")
    if chunks_per_commit < 1:
        raise ConfigurationError("chunks_per_commit must be at least 1")
    first, last = windows[0], windows[-1]
    current = state or AppliedState(pipeline=pipeline)
    if current.pipeline != pipeline:
        raise ForeignTableError(
            f"the target table of {table_name} was written by pipeline {current.pipeline!r}, not {pipeline!r}; "
            "give this pipeline its own target tables (the target name template) or drop the table"
        )

    manifests: dict[int, StagingManifest] = {}

    def window(window_id: int) -> StagingManifest:
        if window_id not in manifests:
            manifest = read_window(window_id)
            if manifest is None:
                raise ApplyGapError(
                    f"{table_name}: window {window_id} of pipeline {pipeline!r} is not published, so it cannot "
                    f"be applied{' before window ' + str(first) if window_id < first else ''}; run its capture first"
                )
            manifests[window_id] = manifest
        return manifests[window_id]

    def snapshot(snapshot_id: str) -> SnapshotTableManifest:
        found = read_snapshot(snapshot_id, table_name)
        if found is None:
            raise SnapshotNotReadyError(
                f"{table_name}: snapshot {snapshot_id} has no published table manifest yet; run (or re-run) "
                "that snapshot's chunk tasks, then retry the apply"
            )
        return found

    steps: list[TableStep] = []
    if current.window_id >= last and not current.loading:
        return steps
    if load_snapshots and current.loading and current.window_id >= last:
        # A re-run of a window the table already holds, while a newer snapshot is still being loaded:
        # finish the load (the requested windows are older than its hand-off).
        steps, current = _load_steps(
            table_name, snapshot(current.snapshot_id), current, current.snapshot_chunks_loaded, chunks_per_commit
        )
    elif load_snapshots:
        # The snapshot governing the first window the table still needs is its base.
        governing = window(min(max(first, current.window_id + 1), last)).snapshots.get(table_name)
        if governing and governing != current.snapshot_id:
            loaded = snapshot(governing)
            if loaded.handoff_window > current.window_id:
                steps, current = _load_steps(table_name, loaded, current, 0, chunks_per_commit)
        elif current.loading:
            steps, current = _load_steps(
                table_name, snapshot(current.snapshot_id), current, current.snapshot_chunks_loaded, chunks_per_commit
            )
    for window_id in range(current.window_id + 1, last + 1):
        manifest = window(window_id)
        governing = manifest.snapshots.get(table_name)
        if load_snapshots and governing and governing != current.snapshot_id:
            loaded = snapshot(governing)
            if loaded.handoff_window != window_id:
                raise ApplyGapError(
                    f"{table_name}: window {window_id} applies to snapshot {governing}, whose hand-off is window "
                    f"{loaded.handoff_window}, but the table holds windows up to {current.window_id} on top of "
                    f"snapshot {current.snapshot_id or '(none)'}; re-snapshot the table"
                )
            load, current = _load_steps(table_name, loaded, current, 0, chunks_per_commit)
            steps += load
        files, truncate_seq, events = _table_changes(manifest, table_name)
        _require_not_waiting(table_name, pipeline, current, window_id, events)
        # Nothing for this table (a TRUNCATE of a table that never held rows is nothing), or a rebuild of
        # a table without target that its own run reported (the metadata store holds the request).
        nothing = not files and not events and (truncate_seq is None or current == AppliedState(pipeline))
        if nothing or (window_id < first and waits_without_target(pipeline, current, files, events)):
            continue
        if window_id < first:
            raise ApplyGapError(
                f"{table_name}: window {window_id} holds changes the table does not have yet (it has windows up to "
                f"{current.window_id}), and the apply was asked for windows {first}..{last}; apply windows "
                f"{window_id}..{first - 1} first (window k+1 is never applied before window k)"
            )
        after = replace(
            current, window_id=window_id, upper=manifest.upper, rebuild_pending=_rebuild_note(manifest, events)
        )
        steps.append(ApplyWindow(table_name, manifest, files, truncate_seq, current, after, events))
        current = after
    return steps


# -- schema evolution ---------------------------------------------------------------------------

_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


@dataclass(frozen=True)
class SchemaChange:
    """One change to a target table's schema."""

    #: ``add``, ``widen`` or ``drop``.
    action: str
    column: str
    #: The new type (Spark SQL type text) for ``add`` and ``widen``.
    type_text: str = ""

    def sql(self, target: str) -> str:
        """The ``ALTER TABLE`` statement."""
        column = quote(self.column)
        if self.action == "add":
            return f"ALTER TABLE {target} ADD COLUMN {column} {self.type_text}"
        if self.action == "widen":
            return f"ALTER TABLE {target} ALTER COLUMN {column} TYPE {self.type_text}"
        return f"ALTER TABLE {target} DROP COLUMN {column}"


def quote(identifier: str) -> str:
    """A Spark SQL identifier in backquotes."""
    return "`" + identifier.replace("`", "``") + "`"


def target_table(catalog: str, target_template: str, table_name: str, suffix: str = "") -> str:
    """The Iceberg table (``catalog.namespace.table``, quoted) of a MySQL ``db.table``.

    The template's dots separate the namespace levels and the table; the MySQL names filled in keep
    theirs, so a MySQL table ``t.x`` is the Iceberg table ``t.x``, not a table ``x`` in a namespace ``t``
    (where ``db.t``'s table ``x`` could land too)."""
    database, table = table_name.split(".", 1)
    parts = [part.format(database=database, table=table) for part in target_template.split(".")]
    parts[-1] += suffix
    return ".".join(quote(part) for part in [catalog, *parts])


def _fits(source: str, target: str) -> str | None:
    """``""`` when a ``source``-typed value can be written to a ``target`` column as is, the widened
    target type when the target must be widened first, None when neither is safe."""
    if source == target:
        return ""
    if source in _INTEGERS and target in _INTEGERS:
        if _INTEGERS.index(source) <= _INTEGERS.index(target):
            return ""  # narrower values always fit (Iceberg keeps tinyint and smallint as int)
        return "bigint" if source == "bigint" else "int"
    if source == "float" and target == "double":
        return ""
    if source == "double" and target == "float":
        return "double"
    source_decimal, target_decimal = _DECIMAL.fullmatch(source), _DECIMAL.fullmatch(target)
    if source_decimal and target_decimal:
        source_precision, source_scale = map(int, source_decimal.groups())
        target_precision, target_scale = map(int, target_decimal.groups())
        if source_scale == target_scale:
            return "" if source_precision <= target_precision else source
        if source_scale < target_scale and source_precision - source_scale <= target_precision - target_scale:
            return ""  # fewer fraction digits and no more integer digits: the values fit exactly
    return None


def plan_schema_changes(
    target: Sequence[tuple[str, str]], source: Sequence[tuple[str, str]], drop_missing: bool
) -> list[SchemaChange]:
    """The ALTERs that let rows of the ``source`` schema be merged into the ``target`` table.

    Both are ``(column, Spark SQL type text)`` lists. Added columns are added; columns missing from the
    source stay (NULL from then on) unless ``drop_missing``; INT->BIGINT, FLOAT->DOUBLE and larger
    DECIMAL precision widen the target. Any other type change raises
    :class:`UnsupportedSchemaChangeError` (the caller adds the DDL, its GTID and the window).
    """
    target_types = {name.lower(): (name, type_text) for name, type_text in target}
    source_names = {name.lower() for name, _ in source}
    changes: list[SchemaChange] = []
    for name, type_text in source:
        existing = target_types.get(name.lower())
        if existing is None:
            changes.append(SchemaChange("add", name, type_text))
            continue
        fits = _fits(type_text, existing[1])
        if fits is None:
            raise UnsupportedSchemaChangeError(
                f"column {name!r} changed from {existing[1]} to {type_text}, which the target table cannot hold "
                "(only INT->BIGINT, FLOAT->DOUBLE and larger DECIMAL precision are widened in place)"
            )
        if fits:
            changes.append(SchemaChange("widen", existing[0], fits))
    if drop_missing:
        changes += [SchemaChange("drop", name) for key, (name, _) in target_types.items() if key not in source_names]
    return changes


#: Key column types (Spark SQL type text) of which equal values always hash equal: both sides of the
#: MERGE's ``t.k = s.k`` have the target's type, and for these it holds exactly when the values'
#: binary forms are equal. Not FLOAT/DOUBLE: ``0.0 = -0.0`` holds but the two hash differently.
KEY_FILTER_TYPES = frozenset(
    {"tinyint", "smallint", "int", "bigint", "string", "binary", "boolean", "date", "timestamp", "timestamp_ntz"}
)
#: Bits of a key filter per distinct key of the change set, up to :data:`KEY_FILTER_MAX_BITS` (one
#: hash function: about 1.6% of the target's other keys pass it, 1 - e^(-1/64)). Every target row that
#: passes is shuffled to the MERGE's join: into 10M rows, 16 bits a key let through about 4 times as
#: many rows as 64.
KEY_FILTER_BITS_PER_KEY = 64
#: Bits of a key filter per distinct key, at least (at most about 6% of the other keys pass it,
#: 1 - e^(-1/16)).
KEY_FILTER_MIN_BITS_PER_KEY = 16
#: The largest key filter, in bits (32,768 numbers in the statement's parameter).
KEY_FILTER_MAX_BITS = 1 << 21
#: Change sets with more distinct keys than this MERGE without a key filter.
KEY_FILTER_MAX_KEYS = KEY_FILTER_MAX_BITS // KEY_FILTER_MIN_BITS_PER_KEY
#: Steps with more staged rows than this MERGE without a key filter, without counting their keys (the
#: hashes of every staged row's keys reach the driver, to count the distinct ones there).
KEY_FILTER_MAX_ROWS = 2 * KEY_FILTER_MAX_KEYS
#: Targets with fewer rows than this MERGE without a key filter: shuffling all their keys costs about
#: what building the filter does (a Spark job over the staged keys).
KEY_FILTER_MIN_TARGET_ROWS = 100_000
#: ... and targets with fewer than this many rows per staged row (most of their keys would pass it).
KEY_FILTER_MIN_TARGET_RATIO = 4
_KEY_FILTER_MIN_BITS = 1 << 10


#: Key types of which the MERGE bounds the target's keys by the step's lowest and highest key: a single
#: integer key column (its bounds are exact integer literals; ``t.k = s.k`` implies them).
KEY_RANGE_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})


def key_range_applies(key_types: Sequence[str], target_rows: int) -> bool:
    """Whether a MERGE on keys of these (target) types into a target of ``target_rows`` rows takes a
    :func:`key_range_condition` (worth its Spark job over the staged keys where a key filter is)."""
    return len(key_types) == 1 and key_types[0] in KEY_RANGE_TYPES and target_rows >= KEY_FILTER_MIN_TARGET_ROWS


def key_range_condition(alias: str, key: str, lowest: int, highest: int) -> str:
    """The condition that ``alias``'s key lies between the step's lowest and highest key. Iceberg prunes
    the data files whose key bounds lie outside it: the files of the snapshot's earlier chunks while it
    loads the next ones, the old files of a table whose changes come in key order."""
    return f"{alias}.{quote(key)} BETWEEN {int(lowest)} AND {int(highest)}"


def key_filter_pays_off(target_rows: int, changed_rows: int) -> bool:
    """Whether a MERGE of ``changed_rows`` staged rows into a target of ``target_rows`` rows (data file
    records, deleted ones included) is worth a :class:`KeyFilter`: the target is large, several times
    larger than the change set, and the change set is small enough to count its keys."""
    return (
        target_rows >= KEY_FILTER_MIN_TARGET_ROWS
        and target_rows >= KEY_FILTER_MIN_TARGET_RATIO * changed_rows
        and changed_rows <= KEY_FILTER_MAX_ROWS
    )


def key_filter_applies(key_types: Sequence[str]) -> bool:
    """Whether a MERGE on keys of these (target) types can take a :class:`KeyFilter`."""
    return bool(key_types) and all(t in KEY_FILTER_TYPES or _DECIMAL.fullmatch(t) for t in key_types)


@dataclass(frozen=True)
class KeyFilter:
    """A condition on the target's keys that every key of the change set satisfies.

    A MERGE with ``WHEN NOT MATCHED ... INSERT`` joins the target to the change set by an outer join that
    keeps every change, so Spark cannot broadcast the change set: it shuffles every key of the target to
    find the few that match. Added to the MERGE's ON clause, this condition changes nothing (``t.k =
    s.k`` implies it), but it refers to the target alone, so Spark applies it while it scans the target
    and shuffles only the rows that pass it: the matching ones and about 1 in 64 of the others (1 in 16
    at most, for the largest change sets).

    It is a Bloom filter with one hash function in plain Spark SQL: bit ``xxhash64(keys) & (bits - 1)``
    of an array of BIGINTs, set for the hash of every key of the change set. Spark computes those hashes
    over the change set's keys cast to the target's types, so both sides hash the same values of the
    same types. The array reaches the statement as a named parameter (a JSON text that Spark turns into
    an array literal once), not as text that Spark's parser would have to read.
    """

    #: Size of the filter in bits: a power of two, at least 64.
    bits: int
    #: The bits, 64 a number (bit ``i`` is bit ``i % 64`` of ``words[i // 64]``), as signed BIGINTs.
    words: tuple[int, ...]

    #: Name of the statement parameter that carries :meth:`parameter`.
    PARAMETER = "cdc_key_filter"

    @classmethod
    def of_hashes(cls, hashes: Collection[int]) -> KeyFilter | None:
        """The filter of a change set's distinct key hashes (Spark's ``xxhash64`` of the key columns);
        None when there are none, or more than :data:`KEY_FILTER_MAX_KEYS`."""
        if not hashes or len(hashes) > KEY_FILTER_MAX_KEYS:
            return None
        bits = _KEY_FILTER_MIN_BITS
        while bits < len(hashes) * KEY_FILTER_BITS_PER_KEY and bits < KEY_FILTER_MAX_BITS:
            bits *= 2
        words = [0] * (bits // 64)
        for value in hashes:
            bit = value & (bits - 1)  # Python's & of a negative int is the two's complement, as Spark's
            words[bit >> 6] |= 1 << (bit & 63)
        return cls(bits, tuple(word - (1 << 64) if word >> 63 else word for word in words))

    def condition(self, alias: str, keys: Sequence[str]) -> str:
        """The Spark SQL condition on ``alias``'s key columns (needs :meth:`parameter` as
        :attr:`PARAMETER`)."""
        hashed = f"xxhash64({', '.join(f'{alias}.{quote(k)}' for k in keys)})"
        words = f"from_json(:{self.PARAMETER}, 'array<bigint>')"
        word = f"element_at({words}, CAST(shiftright({hashed} & {self.bits - 1}, 6) AS INT) + 1)"
        return f"shiftright({word}, CAST({hashed} & 63 AS INT)) & 1 = 1"

    def parameter(self) -> str:
        """The value of the statement parameter :attr:`PARAMETER`: the words as a JSON array."""
        return json.dumps(self.words, separators=(",", ":"))

    def might_contain(self, hash_value: int) -> bool:
        """Whether a key of this ``xxhash64`` passes the filter (what :meth:`condition` computes)."""
        bit = hash_value & (self.bits - 1)
        return bool((self.words[bit >> 6] >> (bit & 63)) & 1)
