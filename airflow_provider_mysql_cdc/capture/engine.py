"""Capture one binlog window of a pipeline into Parquet staging (no Airflow import).

``capture_window`` finds or plans the run's window in the frontier store, reads the binlog from the
window's lower GTID set up to its bound, stages the row changes of the selected tables, publishes
the manifest and advances the capture frontier (compare-and-set). Re-running a window re-reads
exactly ``upper - lower`` and, when the result equals the published manifest, leaves the published
files untouched; when the binlog is gone it reuses the published staging.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from airflow_provider_mysql_cdc.capture.binlog_reader import (
    BinlogPurgedError,
    BinlogReader,
    Idle,
    QueryStatement,
    RowsEvent,
    TransactionCommit,
    TransactionStart,
)
from airflow_provider_mysql_cdc.capture.handoff import HandoffRules, TableHandoff, load_handoffs
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.ddl import ddl_targets
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.core.staging import (
    CorruptStagingError,
    DdlStatement,
    SchemaVersionInfo,
    StagingManifest,
    TruncateMarker,
    cdc_seq,
)
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema, schema_fingerprint
from airflow_provider_mysql_cdc.core.windows import (
    CutoffRule,
    TableSelection,
    WindowBound,
    WindowCaps,
    WindowNotClosedError,
    WindowOrderError,
    to_epoch_us,
)
from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter, decoded_rows
from airflow_provider_mysql_cdc.decoding.compiled_rows import CompiledRowDecoder, compile_row_decoder, row_images
from airflow_provider_mysql_cdc.decoding.table_map import column_specs_from_table_map
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    TerminalCdcError,
    TransientCdcError,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, query, query_value
from airflow_provider_mysql_cdc.mysql.introspection import (
    require_named_tables,
    require_server_settings,
    selected_tables,
)
from airflow_provider_mysql_cdc.staging import Staging, WindowStagingWriter
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowRecord

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 5.0
#: The binlog heartbeat period: a ``data_interval`` window whose transactions have all arrived ends at
#: the first heartbeat that finds the reader at the end of the binlog (the server's default, 5 s, made
#: every such capture wait about 5 s), so this is how long such a window waits at most.
HEARTBEAT_SECONDS = 1.0
#: How long a window waits for transactions it knows exist (they are in its bound) before failing.
MISSING_TRANSACTIONS_TIMEOUT_SECONDS = 60.0

_TRUNCATE = re.compile(r"^\s*TRUNCATE\s+(?:TABLE\s+)?(?:`?(?P<db>[^`.\s]+)`?\s*\.\s*)?`?(?P<table>[^`\s;]+)`?", re.I)
_DDL = re.compile(r"^\s*(ALTER|CREATE|DROP|RENAME|TRUNCATE)\b", re.I)


class CaptureDivergedError(TerminalCdcError):
    """Raised when re-capturing a published window gives different content than its manifest."""


class WindowIncompleteError(TransientCdcError):
    """Raised when transactions inside a window's bound did not arrive from the server in time."""


@dataclass(frozen=True)
class CaptureRequest:
    """One capture run: which pipeline, which Airflow run, where the window ends, what to stage."""

    pipeline: str
    run_id: str
    staging_uri: str
    cutoff: CutoffRule = CutoffRule.DATA_INTERVAL
    data_interval_end: datetime | None = None
    tables: TableSelection = field(default_factory=TableSelection)
    caps: WindowCaps = field(default_factory=WindowCaps)
    #: Frontier of a brand-new pipeline; None means ``@@gtid_executed`` when it is registered.
    initial_frontier: GtidSet | None = None
    replica_server_id: int = 4_000_001
    row_group_rows: int = 50_000

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", self.pipeline):
            raise ConfigurationError(f"pipeline name {self.pipeline!r}: use letters, digits, '_', '.', '-'")
        if self.cutoff is CutoffRule.DATA_INTERVAL and self.data_interval_end is None:
            raise ConfigurationError("cutoff 'data_interval' needs the run's data_interval_end")


@dataclass(frozen=True)
class CaptureResult:
    """What a capture run produced; small and JSON-safe via :meth:`as_xcom`."""

    pipeline: str
    window_id: int
    lower: GtidSet
    upper: GtidSet
    manifest_uri: str
    transactions: int
    op_counts: dict[str, int]
    table_counts: dict[str, dict[str, int]]
    reused_published: bool
    last_commit_ts_us: int | None

    def as_xcom(self) -> dict[str, Any]:
        """The facts Airflow passes on (no rows, no secrets)."""
        return {
            "pipeline": self.pipeline,
            "window_id": self.window_id,
            "covered": None,
            "lower": str(self.lower),
            "upper": str(self.upper),
            "manifest_uri": self.manifest_uri,
            "transactions": self.transactions,
            "rows_by_op": self.op_counts,
            "rows_by_table": self.table_counts,
            "reused_published": self.reused_published,
            "last_commit_ts_us": self.last_commit_ts_us,
        }


_UPDATE_IMAGES = ("before_values", "after_values")


@dataclass
class _TableVersion:
    specs: tuple[ColumnSpec, ...]
    converter: RowConverter
    decoder: CompiledRowDecoder
    schema: pa.Schema
    schema_version: int
    #: Column names, and the positions of the primary key's columns, in table order.
    names: tuple[str, ...]
    key_positions: tuple[int, ...]
    info: SchemaVersionInfo


def _differ(
    before: tuple[Any, ...], after: tuple[Any, ...], positions: tuple[int, ...], names: tuple[str, ...]
) -> bool:
    """Whether two converted images differ in a column at ``positions`` (two invalid dates, both staged
    as NULL, differ when their texts in ``_cdc_invalid_values``, the images' last item, do)."""
    for position in positions:
        if before[position] != after[position]:
            return True
        if before[position] is None and (before[-1] or after[-1]):
            name = names[position]
            if (before[-1] or {}).get(name) != (after[-1] or {}).get(name):
                return True
    return False


class _WindowReader:
    """State of one pass over the binlog for one window."""

    def __init__(
        self,
        request: CaptureRequest,
        store: FrontierStore,
        window: WindowRecord,
        bound: WindowBound,
        writer: WindowStagingWriter,
        handoffs: HandoffRules,
    ) -> None:
        self.request = request
        self.store = store
        self.window = window
        self.bound = bound
        self.writer = writer
        self.handoffs = handoffs
        self._handoff_positions: dict[tuple[str, str, int], tuple[int, ...]] = {}
        self.position = 0
        self.rows = 0
        self.skipped_rows = 0
        #: Purged GTIDs past the lower bound that the snapshots hold: the window starts after them.
        self.covered = GtidSet()
        self.approx_bytes = 0
        self.transactions = 0
        self.seen = GtidSet()
        self._seen_gtids: list[Gtid] = []
        self.first_commit_ts_us: int | None = None
        self.last_commit_ts_us: int | None = None
        self.truncates: list[TruncateMarker] = []
        self.ddl: list[DdlStatement] = []
        self.versions: dict[tuple[str, str, int], _TableVersion] = {}
        self.schemas: dict[tuple[str, str, int], SchemaVersionInfo] = {}
        self.current: TransactionStart | None = None
        self._current_gtid_text = ""
        self._last_progress = time.monotonic()
        self._started = time.monotonic()

    # -- per event ------------------------------------------------------------------------------

    def _next_seq(self) -> int:
        seq = cdc_seq(self.window.window_id, self.position)
        self.position += 1
        return seq

    def _table_version(self, item: RowsEvent) -> _TableVersion:
        key = (item.database, item.table, int(getattr(item.event, "table_id", 0)))
        version = self.versions.get(key)
        if version is not None:
            return version
        specs = column_specs_from_table_map(item.event)
        fingerprint = schema_fingerprint(specs)
        columns = [spec.describe() for spec in specs]
        table_name = f"{item.database}.{item.table}"
        number = self.store.schema_version(
            self.request.pipeline,
            table_name,
            fingerprint,
            columns,
            self._current_gtid_text or None,
        )
        primary_key = tuple(spec.name for spec in specs if spec.primary_key)
        info = SchemaVersionInfo(item.database, item.table, number, fingerprint, tuple(columns), primary_key)
        table_map = item.event.table_map[item.event.table_id]
        version = _TableVersion(
            specs=specs,
            converter=RowConverter(specs),
            decoder=compile_row_decoder(table_map.columns, specs),
            schema=arrow_schema(specs),
            schema_version=number,
            names=tuple(spec.name for spec in specs),
            key_positions=tuple(index for index, spec in enumerate(specs) if spec.primary_key),
            info=info,
        )
        self.versions[key] = version
        self.schemas[(item.database, item.table, number)] = info
        return version

    def _stage(self, item: RowsEvent, version: _TableVersion, op: str, converted: tuple[Any, ...]) -> None:
        assert self.current is not None
        seq = self._next_seq()
        row = (*converted, op, self._current_gtid_text, seq, self.current.commit_ts_us)
        self.writer.add(item.database, item.table, version.schema_version, version.schema, row, op, seq)
        self.rows += 1

    def _handoff_key_positions(self, version: _TableVersion, handoff: TableHandoff) -> tuple[int, ...]:
        """Positions of the snapshot's key columns in this table version."""
        cache_key = (handoff.database, handoff.table, version.schema_version)
        positions = self._handoff_positions.get(cache_key)
        if positions is None:
            names = [spec.name for spec in version.specs]
            missing = [column for column in handoff.key_columns if column not in names]
            if missing:
                raise TerminalCdcError(
                    f"{handoff.database}.{handoff.table}: snapshot {handoff.snapshot_id} was keyed on {missing}, "
                    "which the table no longer has while the hand-off still applies; re-snapshot the table"
                )
            positions = tuple(names.index(column) for column in handoff.key_columns)
            self._handoff_positions[cache_key] = positions
        return positions

    def _images(self, item: RowsEvent, version: _TableVersion) -> list[tuple[Any, ...]]:
        """The event's converted row images, in binlog order (an update's before image, then its after
        image): by the table version's compiled decoder, or by the library where it cannot read them."""
        found = row_images(item.event)
        if found is not None:
            return version.decoder.images(*found, f"{item.database}.{item.table}")
        convert = version.converter.convert
        if item.kind == "update":
            return [convert(row[image]) for row in decoded_rows(item.event) for image in _UPDATE_IMAGES]
        return [convert(row["values"]) for row in decoded_rows(item.event)]

    def on_rows(self, item: RowsEvent) -> None:
        """Stage the rows of one row event of a selected table (minus what a snapshot already holds)."""
        assert self.current is not None
        version = self._table_version(item)
        # Binlog bytes of the staged row events: what the max_bytes cap and progress lines count.
        self.approx_bytes += int(getattr(item.event, "event_size", 0))
        handoff = self.handoffs.get(item.database, item.table) if self.handoffs else None
        decision = False if handoff is None else handoff.by_gtid(self.current.gtid)
        images = self._images(item, version)
        if decision is True:  # every chunk's snapshot already holds this transaction
            self.skipped_rows += len(images)
            return
        key_at = self._handoff_key_positions(version, handoff) if handoff is not None and decision is None else None
        if item.kind != "update":
            op = "c" if item.kind == "insert" else "d"
            if key_at is None:
                self._stage_many(item, version, op, images)
            else:
                for image in images:
                    self._stage_unless_snapshotted(item, version, op, image, handoff, key_at)
            return
        compared = version.key_positions if key_at is None else tuple(sorted({*version.key_positions, *key_at}))
        befores, afters = images[0::2], images[1::2]
        moved = [_differ(before, after, compared, version.names) for before, after in zip(befores, afters, strict=True)]
        if key_at is None and not any(moved):
            self._stage_many(item, version, "u", afters)
            return
        for before, after, key_moved in zip(befores, afters, moved, strict=True):
            if key_moved:
                self._stage_unless_snapshotted(item, version, "d", before, handoff, key_at)
                self._stage_unless_snapshotted(item, version, "c", after, handoff, key_at)
            else:
                self._stage_unless_snapshotted(item, version, "u", after, handoff, key_at)

    def _stage_many(self, item: RowsEvent, version: _TableVersion, op: str, images: list[tuple[Any, ...]]) -> None:
        """Stage consecutive images of one op (the common case: no snapshot hand-off applies)."""
        if not images:
            return
        assert self.current is not None
        first_seq = cdc_seq(self.window.window_id, self.position)
        self.position += len(images)
        cdc_seq(self.window.window_id, self.position - 1)  # raises when the window holds too many changes
        self.writer.add_images(
            item.database,
            item.table,
            version.schema_version,
            version.schema,
            images,
            (op, self._current_gtid_text, first_seq, self.current.commit_ts_us),
        )
        self.rows += len(images)

    def _stage_unless_snapshotted(
        self,
        item: RowsEvent,
        version: _TableVersion,
        op: str,
        converted: tuple[Any, ...],
        handoff: TableHandoff | None,
        key_at: tuple[int, ...] | None,
    ) -> None:
        assert self.current is not None
        if handoff is not None and key_at is not None:
            key = tuple(converted[i] for i in key_at)
            if self.handoffs.skips(handoff, self.current.gtid, key):
                self.skipped_rows += 1
                return
        self._stage(item, version, op, converted)

    def on_statement(self, item: QueryStatement) -> None:
        """Record TRUNCATE markers and the DDL that concerns selected tables, in binlog order."""
        assert self.current is not None
        gtid = self._current_gtid_text
        truncate = _TRUNCATE.match(item.sql)
        if truncate:
            database = truncate.group("db") or item.database
            table = truncate.group("table")
            if self.request.tables.matches(database, table):
                self.truncates.append(TruncateMarker(database, table, self._next_seq(), gtid))
            return
        if _DDL.match(item.sql) and self.request.tables.matches_ddl(
            ddl_targets(item.sql, item.database), item.database
        ):
            self.ddl.append(DdlStatement(item.database, item.sql.strip(), self._next_seq(), gtid))
            self.store.record_ddl(self.request.pipeline, gtid, item.database, item.sql.strip(), self.window.window_id)

    def start_transaction(self, item: TransactionStart) -> None:
        """A transaction of the window begins."""
        self.current = item
        self._current_gtid_text = str(item.gtid)
        if self.first_commit_ts_us is None:
            self.first_commit_ts_us = item.commit_ts_us

    def commit(self) -> None:
        """The current transaction is complete: it now belongs to the window's upper bound."""
        assert self.current is not None
        self._seen_gtids.append(self.current.gtid)
        self.transactions += 1
        self.last_commit_ts_us = self.current.commit_ts_us
        self.current = None
        self._current_gtid_text = ""
        if len(self._seen_gtids) >= 10_000:
            self._fold_seen()
        self.log_progress()

    def _fold_seen(self) -> None:
        if self._seen_gtids:
            self.seen = self.seen | GtidSet.of(self._seen_gtids)
            self._seen_gtids = []

    def seen_set(self) -> GtidSet:
        """Every transaction read so far (complete ones only)."""
        self._fold_seen()
        return self.seen

    def log_progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_progress >= PROGRESS_EVERY_SECONDS:
            elapsed = max(now - self._started, 1e-6)
            log.info(
                "window %s: %s rows (%.0f rows/s), %s rows already in snapshots, %s transactions, "
                "%.1f MB of row events, last GTID %s",
                self.window.window_id,
                self.rows,
                self.rows / elapsed,
                self.skipped_rows,
                self.transactions,
                self.approx_bytes / 1e6,
                self._seen_gtids[-1] if self._seen_gtids else "-",
            )
            self._last_progress = now


def _server_state(config: MySqlConnectionConfig) -> tuple[GtidSet, int]:
    """``@@gtid_executed`` and the server's clock (UTC microseconds), read together."""
    with connection_to(config) as connection:
        executed, now = query(
            connection, config, "SELECT @@GLOBAL.gtid_executed, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)"
        )[0]
    return GtidSet.parse(str(executed or "")), int(now)


def interval_already_covered(
    interval_end: datetime, registered_at: datetime | None, windows: Sequence[WindowRecord]
) -> str | None:
    """Why a ``data_interval`` run ending at ``interval_end`` has nothing left to capture, or None.

    Its transactions are then either older than the pipeline (its snapshots hold them) or already in a
    window whose cut-off is at or after ``interval_end`` (a backfill of a range that later runs
    captured). A ``catch_up`` window reaches the moment it was planned.
    """
    if registered_at is not None and interval_end <= registered_at:
        return (
            f"the interval ends at {interval_end.isoformat()}, before the pipeline was registered at "
            f"{registered_at.isoformat()}: its changes are older than the pipeline's initial frontier "
            "(the snapshots hold them), so there is nothing to capture"
        )
    for window in reversed(windows):
        if window.cutoff_rule == CutoffRule.DATA_INTERVAL.value:
            reach: datetime | None = datetime.fromisoformat(window.cutoff_value)
        else:
            reach = window.planned_at
        if reach is not None and interval_end <= reach:
            return (
                f"the interval ends at {interval_end.isoformat()}, but window {window.window_id} (run "
                f"{window.run_id!r}) already captured everything committed before {reach.isoformat()}: "
                "there is nothing left to capture"
            )
    return None


def covered_run(request: CaptureRequest, store: FrontierStore) -> dict[str, Any] | None:
    """The XCom of a ``data_interval`` run that has nothing to capture (see
    :func:`interval_already_covered`), or None when the run has or gets a window. A run that already
    owns a window (a clear) and a pipeline's first window (it carries the first snapshots' hand-off,
    even when empty) are never covered."""
    pipeline = store.get_pipeline(request.pipeline)
    if request.cutoff is not CutoffRule.DATA_INTERVAL or pipeline is None:
        return None
    if _existing_window(request, store) is not None:
        return None
    windows = store.list_windows(request.pipeline)
    assert request.data_interval_end is not None
    reason = (
        interval_already_covered(request.data_interval_end.astimezone(UTC), pipeline.registered_at, windows)
        if windows
        else None
    )
    if reason is None:
        return None
    frontier = str(pipeline.capture_frontier)
    return {
        "pipeline": request.pipeline,
        "window_id": None,
        "covered": reason,
        "lower": frontier,
        "upper": frontier,
        "manifest_uri": None,
        "transactions": 0,
        "rows_by_op": {},
        "rows_by_table": {},
        "reused_published": False,
        "last_commit_ts_us": None,
    }


def _existing_window(request: CaptureRequest, store: FrontierStore) -> WindowRecord | None:
    """The window this run already owns (a clear, a retry), or the one captured for the same data
    interval by another run (``airflow dags test`` of the same date again, a re-run backfill)."""
    owned = store.window_for_run(request.pipeline, request.run_id)
    if owned is not None or request.cutoff is not CutoffRule.DATA_INTERVAL:
        return owned
    assert request.data_interval_end is not None
    cutoff_value = request.data_interval_end.astimezone(UTC).isoformat()
    same_interval = store.window_for_cutoff(request.pipeline, request.cutoff.value, cutoff_value)
    if same_interval is not None:
        log.info(
            "run %s: window %s (first captured by run %s) holds the same interval, ending %s",
            request.run_id,
            same_interval.window_id,
            same_interval.run_id,
            cutoff_value,
        )
    return same_interval


def _plan(
    request: CaptureRequest, store: FrontierStore, source: MySqlConnectionConfig, staging: Staging
) -> WindowRecord:
    """Find the run's window (see :func:`_existing_window`), or plan the next one (written once)."""
    existing = _existing_window(request, store)
    if existing is not None:
        return existing
    # Inputs that would make the new window useless are refused before anything is recorded.
    staging.require_writable(staging.window_attempts_dir())
    with connection_to(source) as connection:
        require_named_tables(connection, source, request.tables)
    pipeline = store.get_pipeline(request.pipeline)
    if pipeline is None:
        initial = request.initial_frontier
        if initial is None:
            initial, _ = _server_state(source)
        pipeline = store.register_pipeline(request.pipeline, initial)
        log.info("pipeline %s registered with initial frontier %s", request.pipeline, pipeline.initial_frontier)
    last = store.last_window(request.pipeline)
    if last is not None and not last.is_published:
        raise WindowOrderError(
            f"pipeline {request.pipeline!r}: window {last.window_id} (run {last.run_id!r}) is not published yet; "
            "re-run that run's capture first (windows are captured in order)"
        )
    lower = last.upper if last is not None and last.upper is not None else pipeline.initial_frontier
    window_id = last.window_id + 1 if last is not None else 1
    if request.cutoff is CutoffRule.CATCH_UP:
        executed, _ = _server_state(source)
        cutoff_value = str(executed | lower)
    else:
        assert request.data_interval_end is not None
        cutoff_value = request.data_interval_end.astimezone(UTC).isoformat()
    window = store.plan_window(request.pipeline, window_id, request.run_id, lower, request.cutoff.value, cutoff_value)
    log.info("pipeline %s: planned window %s for run %s from %s", request.pipeline, window_id, request.run_id, lower)
    return window


def _bound(window: WindowRecord, source: MySqlConnectionConfig) -> WindowBound:
    if window.is_published:
        assert window.upper is not None
        return WindowBound(gtids=window.upper, exact=True)
    if window.cutoff_rule == CutoffRule.CATCH_UP.value:
        return WindowBound(gtids=GtidSet.parse(window.cutoff_value))
    end_us = to_epoch_us(datetime.fromisoformat(window.cutoff_value))
    _, server_now_us = _server_state(source)
    if server_now_us < end_us:
        raise WindowNotClosedError(
            f"window {window.window_id} ends at {window.cutoff_value} but the server's clock is at "
            f"{datetime.fromtimestamp(server_now_us / 1e6, UTC).isoformat()}: the interval has not ended yet; "
            "retry after it has (Airflow runs scheduled intervals only after their end)"
        )
    return WindowBound(before_us=end_us)


def _read(
    request: CaptureRequest,
    source: MySqlConnectionConfig,
    store: FrontierStore,
    window: WindowRecord,
    bound: WindowBound,
    writer: WindowStagingWriter,
    clock: Callable[[], float] = time.monotonic,
) -> _WindowReader:
    """One pass over the binlog from the window's lower bound until the bound is reached."""
    handoffs = load_handoffs(store, request.pipeline, window.window_id, window.lower, source)
    state = _WindowReader(request, store, window, bound, writer, handoffs)
    if not bound.exact:  # a re-read of a published window never skips: its binlog must be complete
        state.covered = _purged_but_in_snapshots(request, source, window, handoffs)
    start = window.lower | state.covered
    # Transactions the window must contain before it may end: its bound (catch_up, re-read) or,
    # for data_interval, everything committed when the task started (unless the cut-off comes first).
    must_reach = bound.gtids if bound.gtids is not None else _server_state(source)[0]
    needed = must_reach - start
    remaining = len(needed)
    if remaining == 0:
        return state  # nothing was committed past the lower bound: an empty window, no stream needed
    try:
        _stream(request, source, start, bound, state, needed, remaining, clock)
    finally:
        handoffs.close()
    state.log_progress(force=True)
    return state


def _purged_but_in_snapshots(
    request: CaptureRequest, source: MySqlConnectionConfig, window: WindowRecord, handoffs: HandoffRules
) -> GtidSet:
    """The purged GTIDs past the window's lower bound, when every selected table was re-snapshotted
    past them (the window then starts after them); empty when nothing is purged past the bound.

    Raises :class:`BinlogPurgedError` naming the tables still to re-snapshot otherwise."""
    with connection_to(source) as connection:
        purged = GtidSet.parse(str(query_value(connection, source, "SELECT @@GLOBAL.gtid_purged") or ""))
        missing = purged - window.lower
        if not missing:
            return GtidSet()
        tables = selected_tables(connection, source, request.tables)
    uncovered = [name for name in tables if not missing <= handoffs.covered.get(name, GtidSet())]
    if uncovered:
        raise BinlogPurgedError(
            f"pipeline {request.pipeline!r} window {window.window_id}: the server has purged {missing} "
            f"(gtid_purged minus the window's lower bound {str(window.lower) or '(empty)'}), which the pipeline "
            "never read. Re-snapshot the selected tables whose snapshot does not hold them yet (run the "
            f"snapshot with resnapshot={uncovered!r}), then re-run this capture: it continues after the "
            "purged transactions"
        )
    log.warning(
        "window %s: %s is purged but every selected table's snapshot holds it; reading from after it",
        window.window_id,
        missing,
    )
    return missing


def _stream(
    request: CaptureRequest,
    source: MySqlConnectionConfig,
    start: GtidSet,
    bound: WindowBound,
    state: _WindowReader,
    needed: GtidSet,
    remaining: int,
    clock: Callable[[], float],
) -> None:
    idle_since: float | None = None
    window_id = state.window.window_id
    with BinlogReader(
        source,
        after=start,
        replica_server_id=request.replica_server_id,
        only_tables=request.tables.matches,
        heartbeat_seconds=HEARTBEAT_SECONDS,
    ) as reader:
        for item in reader:
            if isinstance(item, TransactionStart):
                idle_since = None
                if state.current is not None:
                    raise TerminalCdcError(f"binlog stream opened {item.gtid} inside {state.current.gtid}")
                if bound.skips(item.gtid):
                    continue  # not part of this window: its events are ignored while current is None
                if bound.ends_before(item.gtid, item.commit_ts_us):
                    break
                if not bound.exact:
                    cap = request.caps.reached(state.rows, state.approx_bytes, state.transactions)
                    if cap is not None:
                        log.info("window %s ends early on a transaction boundary: %s reached", window_id, cap)
                        break
                state.start_transaction(item)
            elif isinstance(item, Idle):
                if remaining <= 0:
                    break
                idle_since = idle_since or clock()
                if clock() - idle_since > MISSING_TRANSACTIONS_TIMEOUT_SECONDS:
                    raise WindowIncompleteError(
                        f"window {window_id}: transactions {needed - state.seen_set()} did not arrive "
                        "from the server; retry the task"
                    )
            elif state.current is None:
                continue  # an event of a skipped transaction
            elif isinstance(item, RowsEvent):
                state.on_rows(item)
            elif isinstance(item, QueryStatement):
                state.on_statement(item)
            elif isinstance(item, TransactionCommit):
                gtid = state.current.gtid
                state.commit()
                if gtid in needed:
                    remaining -= 1
                    if remaining <= 0 and bound.before_us is None:
                        break


def capture_window(request: CaptureRequest, source: MySqlConnectionConfig, store: FrontierStore) -> CaptureResult:
    """Capture (or re-capture) the request's window and publish it; see the module docstring."""
    require_server_settings(source)
    staging = Staging(request.staging_uri, request.pipeline)
    window = _plan(request, store, source, staging)
    bound = _bound(window, source)
    published = None
    if window.is_published:
        try:
            published = staging.read_window_manifest(window.window_id)
        except CorruptStagingError as exc:
            log.warning("published manifest of window %s is unreadable (%s); rewriting it", window.window_id, exc)
    writer = WindowStagingWriter(staging, window.window_id, row_group_rows=request.row_group_rows)
    try:
        state = _read(request, source, store, window, bound, writer)
    except BinlogPurgedError:
        writer.discard()
        if published is not None:
            try:
                staging.verify_files(published)
            except CorruptStagingError as exc:
                raise BinlogPurgedError(
                    f"{exc}. The window's binlog is purged too, so re-running cannot rewrite it: re-snapshot "
                    "the affected tables"
                ) from None
            log.warning("binlog of window %s is purged; its published staging is reused", window.window_id)
            return _result(published, staging, reused=True)
        raise
    except BaseException:
        writer.discard()
        raise
    files = writer.finish()
    upper = window.lower | state.covered | state.seen_set()
    manifest = StagingManifest(
        pipeline=request.pipeline,
        window_id=window.window_id,
        lower=str(window.lower),
        upper=str(upper),
        cutoff_rule=window.cutoff_rule,
        cutoff_value=window.cutoff_value,
        transactions=state.transactions,
        first_commit_ts_us=state.first_commit_ts_us,
        last_commit_ts_us=state.last_commit_ts_us,
        files=tuple(files),
        schemas=tuple(state.schemas[key] for key in sorted(state.schemas)),
        truncates=tuple(state.truncates),
        ddl=tuple(state.ddl),
        covered_by_snapshots=str(state.covered),
        snapshots=dict(sorted(state.handoffs.governing.items())),
    )
    if window.is_published:
        if window.upper != upper:
            writer.discard()
            raise WindowIncompleteError(f"window {window.window_id}: re-read reached {upper}, expected {window.upper}")
        if published is not None and published.to_json() == manifest.to_json():
            try:
                staging.verify_files(published)
            except CorruptStagingError as exc:
                log.warning("%s; rewriting the window's files", exc)
            else:
                writer.discard()
                log.info("window %s re-captured: identical to its published manifest", window.window_id)
                return _result(published, staging, reused=False)
        elif published is not None:
            writer.discard()
            raise CaptureDivergedError(
                f"re-capturing window {window.window_id} of pipeline {request.pipeline!r} gave different "
                "content than its published manifest; the published window is left untouched"
            )
        writer.publish(manifest)  # the published manifest or one of its files was missing or damaged: rewrite
        return _result(manifest, staging, reused=False)
    uri = writer.publish(manifest)
    store.publish_window(
        window,
        upper,
        uri,
        {"transactions": state.transactions, "last_commit_ts_us": state.last_commit_ts_us, **manifest.op_counts()},
    )
    log.info(
        "window %s published: %s transactions, rows by op %s, upper %s",
        window.window_id,
        state.transactions,
        manifest.op_counts(),
        upper,
    )
    return _result(manifest, staging, reused=False)


def _result(manifest: StagingManifest, staging: Staging, *, reused: bool) -> CaptureResult:
    return CaptureResult(
        pipeline=manifest.pipeline,
        window_id=manifest.window_id,
        lower=GtidSet.parse(manifest.lower),
        upper=GtidSet.parse(manifest.upper),
        manifest_uri=staging.window_manifest_uri(manifest.window_id),
        transactions=manifest.transactions,
        op_counts=manifest.op_counts(),
        table_counts=manifest.table_counts(),
        reused_published=reused,
        last_commit_ts_us=manifest.last_commit_ts_us,
    )
