"""One pass over the binlog for one window: row events staged by table version, DDL recorded, the
snapshot hand-off applied (no Airflow import)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_provider_mysql_cdc.capture.binlog_protocol import server_version_text
from airflow_provider_mysql_cdc.capture.binlog_reader import (
    BinlogReader,
    CascadesNotLogged,
    Idle,
    QueryStatement,
    Rotate,
    RowsEvent,
    TransactionCommit,
    TransactionStart,
    XaOutcome,
    XaPrepared,
)
from airflow_provider_mysql_cdc.capture.handoff import HandoffRules, TableHandoff, load_handoffs
from airflow_provider_mysql_cdc.capture.request import CaptureRequest
from airflow_provider_mysql_cdc.capture.schema_tracking import SchemaTracker
from airflow_provider_mysql_cdc.capture.table_versions import (
    Image,
    TableVersion,
    complete_update,
    differ,
    fill_defaults,
)
from airflow_provider_mysql_cdc.capture.xa_transactions import XaTransactions, XaWait
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.ddl_statements import TableRef
from airflow_provider_mysql_cdc.core.foreign_keys import (
    CASCADES_NOT_LOGGED_REASON,
    UNLOGGED_CASCADE_REASON,
    cascades_not_logged_reason,
    cascading_child_reason,
)
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.core.schema_events import (
    COLUMN_ADDED,
    COLUMN_DROPPED,
    COLUMN_RENAMED,
    COLUMN_RETYPED,
    RESET,
    SchemaEvent,
)
from airflow_provider_mysql_cdc.core.staging import (
    DdlStatement,
    SchemaVersionInfo,
    TruncateMarker,
    cdc_seq,
)
from airflow_provider_mysql_cdc.core.storage_engines import CREATED_ENGINE_REASONS, created_engine_problem
from airflow_provider_mysql_cdc.core.types import (
    ColumnSpec,
    arrow_schema,
    require_unreserved_column_names,
    schema_fingerprint,
)
from airflow_provider_mysql_cdc.core.windows import (
    WindowBound,
)
from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter, decoded_rows
from airflow_provider_mysql_cdc.decoding.compiled_rows import compile_row_decoder, row_images
from airflow_provider_mysql_cdc.decoding.table_map import column_specs_from_table_map
from airflow_provider_mysql_cdc.errors import (
    BinlogPurgedError,
    BinlogStreamError,
    TerminalCdcError,
    WindowIncompleteError,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from airflow_provider_mysql_cdc.mysql.introspection import (
    cascading_foreign_keys,
    selected_tables,
    table_engine,
)
from airflow_provider_mysql_cdc.mysql.server_state import ServerState
from airflow_provider_mysql_cdc.staging import WindowStagingWriter
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowRecord
from airflow_provider_mysql_cdc.store.schema_tracking import RebuildRequest

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 5.0
#: The binlog heartbeat period: a ``data_interval`` window that cannot tell from the server's state when
#: the task started that it holds every transaction (``gtid_owned`` unreadable, or a transaction then in
#: flight that has not arrived) ends at the first heartbeat that finds the reader at the end of the
#: binlog (the server's default, 5 s, made every such capture wait about 5 s), so this is how long such
#: a window waits at most.
HEARTBEAT_SECONDS = 1.0
#: How long a window waits for transactions it knows exist (they are in its bound) before failing.
MISSING_TRANSACTIONS_TIMEOUT_SECONDS = 60.0


class WindowReader:
    """State of one pass over the binlog for one window."""

    def __init__(
        self,
        request: CaptureRequest,
        store: FrontierStore,
        window: WindowRecord,
        bound: WindowBound,
        writer: WindowStagingWriter,
        handoffs: HandoffRules,
        database_defaults: Mapping[str, tuple[str | None, str | None]] | None = None,
        created_engine_problem: Callable[[TableRef, int], str | None] = lambda ref, seq: None,
        cascade_problem: Callable[[TableRef, int], str | None] = lambda ref, seq: None,
        cascade_watch: CascadeWatch | None = None,
        *,
        lower_case_names: bool = False,
    ) -> None:
        self.request = request
        self.store = store
        self.window = window
        self.bound = bound
        self.writer = writer
        self.handoffs = handoffs
        self.tracker = SchemaTracker(
            store,
            request.pipeline,
            window.window_id,
            request.tables,
            record=not window.is_published,
            database_defaults=database_defaults,
            created_engine_problem=created_engine_problem,
            cascade_problem=cascade_problem,
            lower_case_names=lower_case_names,
        )
        #: Children of the parent tables whose deletes and updates are logged without cascades (or the
        #: waits a published window's first read found): see :class:`CascadeWatch`.
        self.cascade_watch = cascade_watch or CascadeWatch()
        self._handoff_positions: dict[tuple[str, str, int], tuple[int, ...]] = {}
        self.position = 0
        self.rows = 0
        #: Row events of tables whose governing snapshot already holds them, not staged.
        self.skipped_events = 0
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
        self.schema_events: list[SchemaEvent] = []
        #: (db, table, table_id, tracker epoch) -> the version its row events are staged under; None:
        #: the table's rows are not staged (it waits for a rebuild).
        self.versions: dict[tuple[str, str, int, int], TableVersion | None] = {}
        self.schemas: dict[tuple[str, str, int], SchemaVersionInfo] = {}
        self.current: TransactionStart | None = None
        self._current_gtid_text = ""
        #: Two-phase XA transactions prepared in the window; it ends only once each has its outcome.
        self.xa = XaTransactions()
        #: Binlog bytes per row image of the row event being staged (what the writer's byte budget counts).
        self._image_bytes = 0
        self._last_progress = time.monotonic()
        self._started = time.monotonic()

    # -- per event ------------------------------------------------------------------------------

    def wait_from_the_start(self, waits: Sequence[tuple[TableRef, str, str]]) -> None:
        """Leave each table (the table, a GTID text, why) waiting for a fresh snapshot from the window's
        first change on: none of its changes in the window is staged."""
        seq = cdc_seq(self.window.window_id, 0)
        for ref, gtid, why in waits:
            self.schema_events.append(self.tracker.rebuild(ref, seq, gtid, why))

    def on_cascades_not_logged(self, item: CascadesNotLogged) -> None:
        """A delete or update of a parent table was logged without its cascades: each followed child waits
        for a fresh snapshot from here on."""
        assert self.current is not None
        origin = server_version_text(self.current.original_server_version)
        seq, gtid = self._peek_seq(), self._current_gtid_text
        for child in self.cascade_watch.children.get((item.database, item.table), ()):
            if str(child) not in self.tracker.pending:
                reason = cascades_not_logged_reason(str(child), f"{item.database}.{item.table}", origin)
                self.schema_events.append(self.tracker.rebuild(child, seq, gtid, reason))

    def replay_cascade_waits(self, *, to_the_end: bool = False) -> None:
        """A published window read again: the waits its first read found, at the changes they were found at."""
        recorded = self.cascade_watch.recorded
        while recorded and (to_the_end or recorded[0][0] <= self._peek_seq()):
            seq, ref, gtid, reason = recorded.pop(0)
            self.schema_events.append(self.tracker.rebuild(ref, seq, gtid, reason))

    def _next_seq(self) -> int:
        seq = cdc_seq(self.window.window_id, self.position)
        self.position += 1
        return seq

    def _peek_seq(self) -> int:
        """The ``_cdc_seq`` the next staged change gets."""
        return cdc_seq(self.window.window_id, self.position)

    def _register(self, database: str, table: str, specs: tuple[ColumnSpec, ...], ids: tuple[int, ...]) -> int:
        """The version number of a table schema under its column ids (recorded on first sight)."""
        require_unreserved_column_names(f"{database}.{table}", specs)
        fingerprint = schema_fingerprint(specs, ids)
        columns = [{**spec.describe(), "column_id": column_id} for spec, column_id in zip(specs, ids, strict=True)]
        number = self.store.schema_version(
            self.request.pipeline, f"{database}.{table}", fingerprint, columns, self._current_gtid_text or None
        )
        primary_key = tuple(spec.name for spec in specs if spec.primary_key)
        info = SchemaVersionInfo(database, table, number, fingerprint, tuple(columns), primary_key)
        self.schemas.setdefault((database, table, number), info)
        return number

    def _table_version(self, item: RowsEvent) -> TableVersion | None:
        """The version a row event is staged under, or None when the table's rows are not staged."""
        table_id = int(getattr(item.event, "table_id", 0))
        key = (item.database, item.table, table_id, self.tracker.epoch(item.database, item.table))
        if key in self.versions:
            return self.versions[key]
        try:
            specs = column_specs_from_table_map(item.event)
        except TerminalCdcError as exc:  # e.g. a character set Python cannot decode: this table alone stops
            self._undecodable(item, key, exc)
            return None
        ids, event = self.tracker.column_ids(
            item.database, item.table, specs, self._peek_seq(), self._current_gtid_text
        )
        if event is not None:
            self.schema_events.append(event)
        version = None
        if ids is not None:
            number = self._register(item.database, item.table, specs, ids)
            table_map = item.event.table_map[item.event.table_id]
            try:
                converter, decoder = RowConverter(specs), compile_row_decoder(table_map.columns, specs)
            except TerminalCdcError as exc:
                self._undecodable(item, key, exc)
                return None
            version = TableVersion(
                specs=specs,
                column_ids=ids,
                converter=converter,
                decoder=decoder,
                schema=arrow_schema(specs),
                schema_version=number,
                names=tuple(spec.name for spec in specs),
                key_positions=tuple(index for index, spec in enumerate(specs) if spec.primary_key),
                info=self.schemas[(item.database, item.table, number)],
            )
        self.versions[(*key[:3], self.tracker.epoch(item.database, item.table))] = version
        return version

    def _undecodable(self, item: RowsEvent, key: tuple[str, str, int, int], exc: TerminalCdcError) -> None:
        """The table's rows cannot be decoded: it alone waits for a rebuild, its later row events are skipped."""
        if f"{item.database}.{item.table}" not in self.tracker.rebuilds_pending():
            self._rebuild(item, f"its rows cannot be decoded ({type(exc).__name__}: {exc})")
        self.versions[key] = None

    def on_rotate(self) -> None:
        """A new binlog file (a server restart may reuse table ids): table versions are looked up again."""
        self.versions.clear()

    def _stage(
        self, item: RowsEvent, version: TableVersion, op: str, converted: tuple[Any, ...], partial: Any = None
    ) -> None:
        assert self.current is not None
        seq = self._next_seq()
        row = (*converted, partial, op, self._current_gtid_text, seq, self.current.commit_ts_us)
        self.writer.add(
            item.database,
            item.table,
            version.schema_version,
            version.schema,
            row,
            op,
            seq,
            approx_bytes=self._image_bytes,
            partial=partial is not None,
        )
        self.rows += 1

    def _handoff_key_positions(self, version: TableVersion, handoff: TableHandoff) -> tuple[int, ...]:
        """Positions of the snapshot's key columns in this table version."""
        cache_key = (handoff.database, handoff.table, version.schema_version)
        positions = self._handoff_positions.get(cache_key)
        if positions is None:
            missing = [column for column in handoff.key_columns if column not in version.names]
            if missing:
                raise TerminalCdcError(
                    f"{handoff.database}.{handoff.table}: snapshot {handoff.snapshot_id} was keyed on {missing}, "
                    "which the table no longer has while the hand-off still applies; re-snapshot the table"
                )
            positions = tuple(version.names.index(column) for column in handoff.key_columns)
            self._handoff_positions[cache_key] = positions
        return positions

    def on_rows(self, item: RowsEvent) -> None:
        """Stage the rows of one row event of a selected table (minus what a snapshot already holds)."""
        assert self.current is not None
        self.replay_cascade_waits()
        handoff = self.handoffs.get(item.database, item.table) if self.handoffs else None
        decision = False if handoff is None else handoff.by_gtid(self.current.gtid)
        if decision is True:  # every chunk's snapshot already holds this transaction
            self.skipped_events += 1
            self.xa.held(item.database, item.table)
            return
        version = self._table_version(item)
        if version is None:
            return  # the table waits for a rebuild
        if decision is None:
            self.xa.held(item.database, item.table)
        self.xa.staged(item.database, item.table, self._peek_seq())
        # Binlog bytes of the staged row events: what the max_bytes cap and progress lines count.
        self.approx_bytes += int(getattr(item.event, "event_size", 0))
        try:
            key_at = self._handoff_key_positions(version, handoff) if handoff is not None and decision is None else None
            found = row_images(item.event)
            if found is not None and version.decoder is not None:
                images = version.decoder.images(*found, f"{item.database}.{item.table}")
                self._share_event_bytes(item, len(images))
                self._stage_complete(item, version, images, handoff, key_at)
            else:
                self._stage_decoded(item, version, handoff, key_at)
        except TerminalCdcError as exc:  # this table's rows cannot be staged exactly: it alone stops
            self._rebuild(item, f"its rows could not be staged ({type(exc).__name__}: {exc})")

    def _share_event_bytes(self, item: RowsEvent, images: int) -> None:
        """Each of the ``images`` row images of ``item`` counts for an equal share of the event's binlog
        bytes (an update's before and after images are two): what the staging writer's byte budget and
        ``max_row_bytes`` count."""
        self._image_bytes = int(getattr(item.event, "event_size", 0)) // max(images, 1)

    def _stage_complete(
        self,
        item: RowsEvent,
        version: TableVersion,
        images: list[tuple[Any, ...]],
        handoff: TableHandoff | None,
        key_at: tuple[int, ...] | None,
    ) -> None:
        """Stage complete row images (every column: the common case)."""
        if item.kind != "update":
            op = "c" if item.kind == "insert" else "d"
            if key_at is None:
                self._stage_many(item, version, op, images)
            else:
                for image in images:
                    self._stage_unless_snapshotted(item, version, op, image, handoff, key_at)
            return
        befores, afters = images[0::2], images[1::2]
        if not version.key_positions:  # a multiset: one copy of the before image goes, the after image comes
            for before, after in zip(befores, afters, strict=True):
                self._stage_unless_snapshotted(item, version, "d", before, handoff, key_at)
                self._stage_unless_snapshotted(item, version, "c", after, handoff, key_at)
            return
        compared = version.key_positions if key_at is None else tuple(sorted({*version.key_positions, *key_at}))
        moved = [differ(before, after, compared, version.names) for before, after in zip(befores, afters, strict=True)]
        if key_at is None and not any(moved):
            self._stage_many(item, version, "u", afters)
            return
        for before, after, key_moved in zip(befores, afters, moved, strict=True):
            if key_moved:
                self._stage_unless_snapshotted(item, version, "d", before, handoff, key_at)
                self._stage_unless_snapshotted(item, version, "c", after, handoff, key_at)
            else:
                self._stage_unless_snapshotted(item, version, "u", after, handoff, key_at)

    def _stage_decoded(
        self, item: RowsEvent, version: TableVersion, handoff: TableHandoff | None, key_at: tuple[int, ...] | None
    ) -> None:
        """Stage row images the library decodes: images without every column (``binlog_row_image``
        MINIMAL or NOBLOB) and partial JSON updates, completed where the binlog allows (see
        :mod:`.table_versions`); a change that cannot be staged exactly leaves the table waiting for a
        rebuild."""
        where = f"{item.database}.{item.table}"
        convert = version.converter.convert_partial
        rows = decoded_rows(item.event)
        self._share_event_bytes(item, len(rows) * (2 if item.kind == "update" else 1))
        if item.kind == "insert":
            for row in rows:
                image = convert(row["values"])
                values = fill_defaults(version, image, self._defaults(item, version, image))
                if values is None:
                    missing = sorted((image[1] or {}).keys())
                    self._rebuild(item, f"an insert logged without columns {missing} whose default is not known")
                    return
                self._stage_unless_snapshotted(item, version, "c", values, handoff, key_at)
            return
        if item.kind == "delete":
            for row in rows:
                values, partial = convert(row["values"])
                if partial is not None and not version.key_positions:
                    self._rebuild(item, "a delete from a table without a key logged without every column")
                    return
                self._stage_unless_snapshotted(item, version, "d", values, handoff, key_at, partial)
            return
        compared = version.key_positions if key_at is None else tuple(sorted({*version.key_positions, *key_at}))
        for row in rows:
            before = convert(row["before_values"])
            after = complete_update(version, before, convert(row["after_values"]), where)
            if not version.key_positions:  # a multiset row: both images whole, or the table waits
                if before[1] is not None or after[1] is not None:
                    self._rebuild(item, "an update of a table without a key logged without every column")
                    return
                self._stage_unless_snapshotted(item, version, "d", before[0], handoff, key_at)
                self._stage_unless_snapshotted(item, version, "c", after[0], handoff, key_at)
                continue
            missing_keys = [p for p in compared if version.names[p] in (before[1] or {})]
            if missing_keys:
                self._rebuild(item, "an update logged without its key columns")
                return
            if differ(before[0], after[0], compared, version.names):
                if after[1] is not None:
                    self._rebuild(item, "a key change logged without every column of the new row")
                    return
                self._stage_unless_snapshotted(item, version, "d", before[0], handoff, key_at, before[1])
                self._stage_unless_snapshotted(item, version, "c", after[0], handoff, key_at)
            else:
                self._stage_unless_snapshotted(item, version, "u", after[0], handoff, key_at, after[1])

    def _defaults(self, item: RowsEvent, version: TableVersion, image: Image) -> dict[str, Any]:
        """The known defaults of the columns an insert's image lacks."""
        defaults: dict[str, Any] = {}
        for name in image[1] or {}:
            known = self.tracker.default_value(item.database, item.table, name)
            if known is not None:
                defaults[name] = known.value
        return defaults

    def _rebuild(self, item: RowsEvent, reason: str) -> None:
        """Stop staging the table in this window: it waits for a fresh snapshot."""
        self._wait(TableRef(item.database, item.table), self._peek_seq(), self._current_gtid_text, reason)

    def _wait(self, ref: TableRef, seq: int, gtid: str, reason: str) -> None:
        """``ref`` waits for a fresh snapshot from ``seq`` on (the apply leaves out its rows from there;
        its later row events are not staged)."""
        self.schema_events.append(self.tracker.rebuild(ref, seq, gtid, reason))
        self.versions = {key: value for key, value in self.versions.items() if key[:2] != (ref.database, ref.table)}

    def on_item(self, item: RowsEvent | CascadesNotLogged | QueryStatement | XaPrepared | XaOutcome) -> None:
        """One item inside the current transaction."""
        if isinstance(item, RowsEvent):
            self.on_rows(item)
        elif isinstance(item, CascadesNotLogged):
            self.on_cascades_not_logged(item)
        elif isinstance(item, QueryStatement):
            self.on_statement(item)
        elif isinstance(item, XaPrepared):
            self.on_xa_prepared(item)
        else:
            self.on_xa_outcome(item)

    def on_xa_prepared(self, item: XaPrepared) -> None:
        """The current transaction ends in a two-phase ``XA PREPARE``: its rows count once it is committed."""
        self.xa.prepare(item.xid, self._current_gtid_text)

    def on_xa_outcome(self, item: XaOutcome) -> None:
        """The current transaction commits or rolls back an XA transaction prepared earlier."""
        assert self.current is not None
        gtid = self.current.gtid
        if not item.committed:
            waits = self.xa.rollback(item.xid, self._current_gtid_text)
        else:
            found = self.xa.commit(
                item.xid,
                self._current_gtid_text,
                self._peek_seq(),
                lambda ref: gtid in self.handoffs.covered.get(str(ref), GtidSet()),
            )
            if found is None and not self.handoffs.governing:
                raise BinlogStreamError(_XA_PREPARED_BEFORE_THE_PIPELINE.format(xid=item.xid, gtid=gtid))
            waits = found or []
        for wait in waits:
            self._xa_wait(wait)

    def _xa_wait(self, wait: XaWait) -> None:
        if wait.seq >= self._peek_seq() and str(wait.table) in self.tracker.pending:
            return  # already waiting from an earlier change
        self._wait(wait.table, wait.seq, wait.gtid, wait.reason)

    def _stage_many(self, item: RowsEvent, version: TableVersion, op: str, images: list[tuple[Any, ...]]) -> None:
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
            approx_bytes=self._image_bytes * len(images),
        )
        self.rows += len(images)

    def _stage_unless_snapshotted(
        self,
        item: RowsEvent,
        version: TableVersion,
        op: str,
        converted: tuple[Any, ...],
        handoff: TableHandoff | None,
        key_at: tuple[int, ...] | None,
        partial: dict[str, str] | None = None,
    ) -> None:
        assert self.current is not None
        if handoff is not None and key_at is not None:
            key = tuple(converted[i] for i in key_at)
            if self.handoffs.skips(handoff, self.current.gtid, key):
                self.skipped_events += 1
                return
        self._stage(item, version, op, converted, partial)

    def on_statement(self, item: QueryStatement) -> None:
        """Apply a statement to the tracked schemas; record TRUNCATE markers, schema events and the DDL
        that concerns selected tables, in binlog order."""
        assert self.current is not None
        self.replay_cascade_waits()
        gtid = self._current_gtid_text
        seq = self._peek_seq()
        outcome = self.tracker.on_statement(
            item.sql,
            item.database,
            seq,
            gtid,
            item.sql_mode,
            self._in_snapshot,
            explicit_timestamp_defaults=item.explicit_defaults_for_timestamp,
            text_problem=item.text_problem,
        )
        if not outcome.relevant:
            return
        self.position += 1
        for table_name in outcome.truncated:
            database, table = table_name.split(".", 1)
            self.truncates.append(TruncateMarker(database, table, seq, gtid))
        self.schema_events += [self._with_version(event) for event in outcome.events]
        statement = item.sql.strip()
        self.ddl.append(DdlStatement(item.database, statement, seq, gtid))
        self.store.record_ddl(self.request.pipeline, gtid, item.database, statement, self.window.window_id)

    def _in_snapshot(self, table_name: str, gtid: str) -> bool | None:
        """Whether the governing snapshot of a table holds the current transaction: in every chunk
        (True), in some (None) or in none (False)."""
        assert self.current is not None
        database, table = table_name.split(".", 1)
        handoff = self.handoffs.get(database, table) if self.handoffs else None
        return False if handoff is None else handoff.by_gtid(self.current.gtid)

    def _with_version(self, event: SchemaEvent) -> SchemaEvent:
        """A schema event with the table's version after it; the version gets a staged file (with no
        rows when none follow), so the apply reads its columns' types from Parquet."""
        if event.kind not in (COLUMN_ADDED, COLUMN_DROPPED, COLUMN_RENAMED, COLUMN_RETYPED, RESET):
            return event
        tracked = self.tracker.specs(event.database, event.table)
        if tracked is None:
            return event  # the table is gone (or waits for a rebuild)
        specs, ids = tracked
        number = self._register(event.database, event.table, specs, ids)
        self.writer.ensure_file(event.database, event.table, number, arrow_schema(specs))
        return dataclasses.replace(event, schema_version=number)

    def start_transaction(self, item: TransactionStart) -> None:
        """A transaction of the window begins."""
        self.current = item
        self._current_gtid_text = str(item.gtid)
        self.xa.start()
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
                "window %s: %s rows (%.0f rows/s), %s row events already in snapshots, %s transactions, "
                "%.1f MB of row events, last GTID %s",
                self.window.window_id,
                self.rows,
                self.rows / elapsed,
                self.skipped_events,
                self.transactions,
                self.approx_bytes / 1e6,
                self._seen_gtids[-1] if self._seen_gtids else "-",
            )
            self._last_progress = now


def read_window(
    request: CaptureRequest,
    source: MySqlConnectionConfig,
    store: FrontierStore,
    window: WindowRecord,
    bound: WindowBound,
    writer: WindowStagingWriter,
    server: ServerState,
    clock: Callable[[], float] = time.monotonic,
) -> WindowReader:
    """One pass over the binlog from the window's lower bound until the bound is reached (``server``: the
    server as the run found it)."""
    handoffs = load_handoffs(store, request.pipeline, window.window_id, window.lower, source)
    # A published window read again repeats the waits its first read recorded (the server may have changed).
    recorded = (
        [r for r in store.rebuild_requests(request.pipeline) if r.window_id == window.window_id]
        if window.is_published
        else None
    )
    engine_problem = _created_engine_problems(source, window, bound, server, recorded)
    lower_case_names = server.facts.variables.get("lower_case_table_names") == "1"
    cascade_watch = _cascade_watch(source, request, window, recorded)
    state = WindowReader(
        request,
        store,
        window,
        bound,
        writer,
        handoffs,
        _database_defaults(source),
        engine_problem,
        _cascade_problems(server, recorded),
        cascade_watch,
        lower_case_names=lower_case_names,
    )
    state.wait_from_the_start(_unlogged_cascade_waits(cascade_watch, window, server, state.tracker.pending))
    if not bound.exact:  # a re-read of a published window never skips: its binlog must be complete
        state.covered = _purged_but_in_snapshots(request, source, window, handoffs, server.gtid_purged)
    start = window.lower | state.covered
    # Transactions the window must contain before it may end: its bound (catch_up, re-read) or,
    # for data_interval, everything committed when the task started (unless the cut-off comes first).
    must_reach = bound.gtids if bound.gtids is not None else server.gtid_executed
    needed = must_reach - start
    awaited = _Awaited(needed, len(needed), _in_flight(bound, server, start))
    if awaited.remaining == 0 and not awaited.in_flight:
        return state  # nothing was committed past the lower bound: an empty window, no stream needed
    try:
        _stream(request, source, start, bound, state, awaited, clock)
    except BinlogStreamError as exc:
        if type(exc) is not BinlogStreamError:
            raise
        raise BinlogStreamError(f"pipeline {request.pipeline!r} window {window.window_id}: {exc}") from None
    finally:
        handoffs.close()
    state.replay_cascade_waits(to_the_end=True)
    state.log_progress(force=True)
    return state


def _database_defaults(source: MySqlConnectionConfig) -> dict[str, tuple[str | None, str | None]]:
    """Each database's default character set and collation (what a CREATE TABLE without its own gets)."""
    with connection_to(source) as connection:
        rows = query(
            connection,
            source,
            "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA",
        )
    return {str(name): (charset, collation) for name, charset, collation in rows}


def _created_engine_problems(
    source: MySqlConnectionConfig,
    window: WindowRecord,
    bound: WindowBound,
    server: ServerState,
    recorded: Sequence[RebuildRequest] | None,
) -> Callable[[TableRef, int], str | None]:
    """Why a table a CREATE TABLE naming no engine made cannot be followed, or None
    (:func:`~airflow_provider_mysql_cdc.core.storage_engines.created_engine_problem`, from the table as
    the server has it now). A published window read again repeats what its first read found (its
    ``recorded`` rebuild requests), so a table given another engine since (the fix the reason suggests)
    reads the same."""
    if recorded is not None:
        return _recorded_problems(recorded, CREATED_ENGINE_REASONS)
    # A catch_up window holds what was committed when the server was read; a data_interval one stops there
    # too, or at its interval's end before it.
    window_end_us = min(server.now_us, bound.before_us or server.now_us)

    def problem(ref: TableRef, seq: int) -> str | None:
        with connection_to(source) as connection:
            now = table_engine(connection, source, ref.database, ref.table)
        return created_engine_problem(str(ref), now, window_end_us)

    return problem


def _cascade_problems(
    server: ServerState, recorded: Sequence[RebuildRequest] | None
) -> Callable[[TableRef, int], str | None]:
    """Why a table a statement gives a foreign key whose ON DELETE/ON UPDATE changes its rows cannot be
    followed, or None (:func:`~airflow_provider_mysql_cdc.core.foreign_keys.cascading_child_reason`: the
    server does not log the rows cascades change). A published window read again repeats what its first
    read found (``recorded``), so a server restarted since with cascades logged (the fix the reason suggests)
    reads the same."""
    if recorded is not None:
        return _recorded_problems(recorded, (UNLOGGED_CASCADE_REASON,))
    unlogged = server.facts.unlogged_cascades
    if unlogged is None:
        return lambda ref, seq: None
    return lambda ref, seq: cascading_child_reason(str(ref), unlogged)


#: The start of the reason of a table found waiting when a window is captured (see below).
_FOUND_AT_CAPTURE = "found when the window was captured: "


def _unlogged_cascade_waits(
    watch: CascadeWatch, window: WindowRecord, server: ServerState, waiting: Mapping[str, str]
) -> list[tuple[TableRef, str, str]]:
    """The followed tables (``watch``'s children, not already ``waiting``) that wait from the window's
    start, each with a GTID text and the reason, on a server that does not log the rows cascades change:
    it changed since they were snapshotted or given their keys (restarted with
    ``innodb_native_foreign_keys=ON``, or a replica of an older MySQL promoted), so the window may lack
    cascaded changes. A published window read again repeats its first read's (``watch.from_start``)."""
    if window.is_published:
        return watch.from_start
    unlogged = server.facts.unlogged_cascades
    if unlogged is None:
        return []
    children = sorted({child for refs in watch.children.values() for child in refs}, key=str)
    return [
        (child, str(window.lower), _FOUND_AT_CAPTURE + cascading_child_reason(str(child), unlogged))
        for child in children
        if str(child) not in waiting
    ]


@dataclasses.dataclass
class CascadeWatch:
    """``children``: (database, parent table) -> the selected tables whose foreign keys to it cascade: a
    delete or update of the parent logged without its cascades (:class:`CascadesNotLogged`) leaves them
    waiting (and, on a server that does not log cascades, all of them wait from the window's start).
    For a published window read again, the waits its first read found, repeated as they were (the keys
    and the server may have changed since): ``recorded``, by an unlogged cascade (seq, table, GTID text,
    reason), at the same changes; ``from_start`` (table, GTID text, reason), from the window's start."""

    children: Mapping[tuple[str, str], tuple[TableRef, ...]] = dataclasses.field(default_factory=dict)
    recorded: list[tuple[int, TableRef, str, str]] = dataclasses.field(default_factory=list)
    from_start: list[tuple[TableRef, str, str]] = dataclasses.field(default_factory=list)

    def watches(self, database: str, table: str) -> bool:
        """Whether ``database.table`` is a parent whose logged deletes and updates are checked."""
        return (database, table) in self.children


def _cascade_watch(
    source: MySqlConnectionConfig,
    request: CaptureRequest,
    window: WindowRecord,
    recorded: Sequence[RebuildRequest] | None,
) -> CascadeWatch:
    """The parents of the selected tables whose foreign keys cascade, read from the server (a first read),
    or the waits a published window's first read ``recorded``: by an unlogged cascade, or from its start."""
    if recorded is not None:
        return CascadeWatch(
            recorded=sorted(
                (r.seq, TableRef(*r.table_name.split(".", 1)), r.gtid, r.reason)
                for r in recorded
                if r.reason.startswith(CASCADES_NOT_LOGGED_REASON)
            ),
            from_start=[
                (TableRef(*r.table_name.split(".", 1)), r.gtid, r.reason)
                for r in recorded
                if r.seq == cdc_seq(window.window_id, 0) and r.reason.startswith(_FOUND_AT_CAPTURE)
            ],
        )
    with connection_to(source) as connection:
        keys = cascading_foreign_keys(connection, source)
    children = {
        (parent.database, parent.table): tuple(
            TableRef(child.database, child.table)
            for child in sorted(children, key=str)
            if request.tables.matches(child.database, child.table)
        )
        for parent, children in keys.items()
    }
    return CascadeWatch(children={parent: refs for parent, refs in children.items() if refs})


def _recorded_problems(
    recorded: Sequence[RebuildRequest], reasons: tuple[str, ...]
) -> Callable[[TableRef, int], str | None]:
    """(table, seq) -> the reason the first read of a published window ``recorded`` for that table at that
    statement, among the rebuild requests whose reason starts with one of ``reasons``."""
    found = {
        (request.table_name, request.seq): request.reason.split(" (by: ", 1)[0]
        for request in recorded
        if request.reason.startswith(reasons)
    }
    return lambda ref, seq: found.get((str(ref), seq))


def _purged_but_in_snapshots(
    request: CaptureRequest,
    source: MySqlConnectionConfig,
    window: WindowRecord,
    handoffs: HandoffRules,
    purged: GtidSet,
) -> GtidSet:
    """The purged GTIDs (``purged``: ``gtid_purged`` when the run started) past the window's lower bound,
    when every selected table was re-snapshotted past them (the window then starts after them); empty
    when nothing is purged past the bound.

    Raises :class:`BinlogPurgedError` naming the tables still to re-snapshot otherwise."""
    missing = purged - window.lower
    if not missing:
        return GtidSet()
    with connection_to(source) as connection:
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


#: The commit of an XA transaction prepared before a pipeline's first frontier, in a pipeline no snapshot
#: governs (one that captures from @@gtid_executed): its rows are in no window and no snapshot.
_XA_PREPARED_BEFORE_THE_PIPELINE = (
    "transaction {gtid} commits XA transaction {xid}, prepared before this pipeline's first frontier: its "
    "rows were logged when it was prepared, so no window holds them, and the pipeline has no snapshot that "
    "could (a snapshot waits for the commit of what it reads). Start a new pipeline now that the transaction "
    "is committed (its first frontier holds the commit; give it target tables of its own, or drop this "
    "pipeline's first), with a snapshot if its tables must hold the rows written before it. Nothing of the "
    "window was published"
)


def _xa_not_resolved(request: CaptureRequest, window_id: int, state: WindowReader) -> str:
    return (
        f"pipeline {request.pipeline!r} window {window_id}: the window reached its end, but XA transaction "
        f"{state.xa.describe_pending()} is still neither committed nor rolled back "
        f"{MISSING_TRANSACTIONS_TIMEOUT_SECONDS:.0f} s later, and its rows count only once it is committed, so "
        "the window cannot end before that. Retry the task; if the transaction stays prepared (XA RECOVER on "
        "the server lists it; its coordinator may be gone), commit or roll it back there. Nothing of the window "
        "was published"
    )


def _in_flight(bound: WindowBound, server: ServerState, start: GtidSet) -> set[Gtid] | None:
    """For a ``data_interval`` window: the transactions that had their GTID but had not committed when
    the task read the server (past ``start``), which the window must see before it can end without
    waiting for the end of the binlog; None when it must wait for that (another bound, or
    ``gtid_owned`` unknown).

    Why that suffices: a transaction committed before the window's end got its GTID before its commit
    timestamp, and the server's clock had passed the end when ``gtid_owned`` was read, before
    ``gtid_executed`` (see :mod:`~airflow_provider_mysql_cdc.mysql.server_state`). So it is in
    ``gtid_executed`` (the window's ``needed``) or in flight."""
    if bound.before_us is None or server.gtid_in_flight is None:
        return None
    return set(server.gtid_in_flight - start)


@dataclasses.dataclass
class _Awaited:
    """The transactions a window reads before it may end: ``needed``, of which ``remaining`` have not
    been read, and for a ``data_interval`` window those ``in_flight`` when the task started that have
    not been read (None: not known, see :func:`_in_flight`)."""

    needed: GtidSet
    remaining: int
    in_flight: set[Gtid] | None
    #: Since when the server has had nothing more to send while ``needed`` is not all read.
    idle_since: float | None = None

    def waiting(self, now: float, window_id: int, seen: GtidSet) -> None:
        """The server has sent everything and ``needed`` is not all read: fail once that has lasted
        longer than it may."""
        self.idle_since = self.idle_since or now
        if now - self.idle_since > MISSING_TRANSACTIONS_TIMEOUT_SECONDS:
            raise WindowIncompleteError(
                f"window {window_id}: transactions {self.needed - seen} did not arrive from the server; retry the task"
            )

    def committed(self, gtid: Gtid) -> None:
        if gtid in self.needed:
            self.remaining -= 1
        if self.in_flight:
            self.in_flight.discard(gtid)

    def all_read(self, bound: WindowBound) -> bool:
        """Whether the window holds everything it must: a ``catch_up`` (or re-read) window its
        ``needed``; a ``data_interval`` window ``needed`` and the transactions in flight (else it ends at
        its first transaction committed at or after its end, or at the end of the binlog)."""
        return self.remaining <= 0 and (bound.before_us is None or self.in_flight == set())


def _stream(
    request: CaptureRequest,
    source: MySqlConnectionConfig,
    start: GtidSet,
    bound: WindowBound,
    state: WindowReader,
    awaited: _Awaited,
    clock: Callable[[], float],
) -> None:
    """Read the window's transactions from ``start`` until ``bound`` and ``awaited`` say it ends."""
    window_id = state.window.window_id
    past_end_since: float | None = None  # when the window reached its end with an XA transaction prepared

    def read_on() -> None:
        """The window has reached its end, but holds an XA transaction's prepare: it reads on to the
        outcome, for as long as a missing transaction is waited for."""
        nonlocal past_end_since
        past_end_since = past_end_since or clock()
        if clock() - past_end_since > MISSING_TRANSACTIONS_TIMEOUT_SECONDS:
            raise WindowIncompleteError(_xa_not_resolved(request, window_id, state))

    with BinlogReader(
        source,
        after=start,
        replica_server_id=request.replica_server_id,
        only_tables=request.tables.matches,
        cascade_parents=state.cascade_watch.watches if state.cascade_watch.children else None,
        heartbeat_seconds=HEARTBEAT_SECONDS,
    ) as reader:
        for item in reader:
            if isinstance(item, TransactionStart):
                awaited.idle_since = None
                if state.current is not None:
                    raise TerminalCdcError(f"binlog stream opened {item.gtid} inside {state.current.gtid}")
                if bound.skips(item.gtid):
                    continue  # not part of this window: its events are ignored while current is None
                ends = bound.ends_before(item.gtid, item.commit_ts_us)
                cap = (
                    None
                    if ends or bound.exact
                    else request.caps.reached(state.rows, state.approx_bytes, state.transactions)
                )
                if (ends or cap is not None) and state.xa.pending:
                    read_on()  # a window ends only once every XA transaction prepared in it has its outcome
                elif ends:
                    break
                elif cap is not None:
                    log.info("window %s ends early on a transaction boundary: %s reached", window_id, cap)
                    break
                state.start_transaction(item)
            elif isinstance(item, Idle):
                if awaited.remaining <= 0:
                    if not state.xa.pending:
                        log.info("window %s ends at the end of the binlog", window_id)
                        break
                    read_on()
                    continue
                awaited.waiting(clock(), window_id, state.seen_set())
            elif isinstance(item, Rotate):
                state.on_rotate()
            elif state.current is None:
                continue  # an event of a skipped transaction
            elif isinstance(item, TransactionCommit):
                awaited.committed(state.current.gtid)
                state.commit()
                if awaited.all_read(bound):
                    if not state.xa.pending:
                        if bound.before_us is not None:
                            log.info("window %s ends: every transaction committed before its end is read", window_id)
                        break
                    read_on()
            else:
                state.on_item(item)
