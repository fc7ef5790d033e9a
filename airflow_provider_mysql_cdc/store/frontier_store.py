"""The metadata tables: pipelines, windows, snapshot chunks and schema history (SQLAlchemy Core).

They are the source of truth between runs; XComs only carry copies of small facts. What a target
table holds (its applied window and GTID set) is not here: it lives in the table's own Iceberg
commits (:class:`~airflow_provider_mysql_cdc.apply.plan.AppliedState`), written in the same commit
as the data. Any SQLAlchemy
URL works (SQLite for the embedded demo, PostgreSQL or MySQL in production). The schema is created
on first use and versioned in ``cdc_store_version``. Every change that moves progress forward is
compare-and-set: a writer that lost a race gets :class:`FrontierConflictError`, never a silent
overwrite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from airflow_provider_mysql_cdc.core.connection import MYSQL_SESSION_START
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.errors import (
    FrontierConflictError,
    FrontierStoreError,
    MySqlCdcError,
    UnknownPipelineError,
)
from airflow_provider_mysql_cdc.store.schema_tracking import SchemaRecords
from airflow_provider_mysql_cdc.store.server_history import ServerObservations
from airflow_provider_mysql_cdc.store.tables import (
    STORE_SCHEMA_VERSION,
    metadata,
    pipelines_table,
    snapshot_chunks_table,
    snapshots_table,
    store_version_table,
    windows_table,
)


@dataclass(frozen=True)
class SnapshotChunkRecord:
    """One snapshot chunk: planned once, finished once (with its GTID frontier) and never redone."""

    pipeline: str
    snapshot_id: str
    table_name: str
    chunk_no: int
    #: The chunk's JSON description (database, table, key columns, key range).
    chunk: str
    status: str
    frontier: GtidSet | None = None
    manifest_uri: str | None = None
    rows: int | None = None

    @property
    def is_finished(self) -> bool:
        """True once the chunk's rows and manifest are published and its frontier is recorded."""
        return self.status == WindowStatus.PUBLISHED


@dataclass(frozen=True)
class SnapshotRecord:
    """One snapshot: the tables an Airflow run decided to read, and the first window its hand-off governs."""

    pipeline: str
    snapshot_id: str
    run_id: str
    tables: tuple[str, ...]
    handoff_window: int


class WindowStatus:
    """Lifecycle of a window record."""

    PLANNED = "planned"
    PUBLISHED = "published"


@dataclass(frozen=True)
class PipelineRecord:
    """One pipeline's identity and capture progress."""

    pipeline: str
    initial_frontier: GtidSet
    capture_frontier: GtidSet
    revision: int
    #: When the pipeline was registered (its initial frontier is ``@@gtid_executed`` of that moment).
    registered_at: datetime | None = None

    def identity(self) -> dict[str, str]:
        """This registration, as the pipeline's staging root records it (see ``Staging.require_registration``)."""
        return {
            "pipeline": self.pipeline,
            "initial_frontier": str(self.initial_frontier),
            "registered_at": self.registered_at.isoformat() if self.registered_at else "",
        }


@dataclass(frozen=True)
class WindowRecord:
    """One window: written once when planned, completed once when its manifest is published."""

    pipeline: str
    window_id: int
    run_id: str
    lower: GtidSet
    upper: GtidSet | None
    cutoff_rule: str
    cutoff_value: str
    status: str
    manifest_uri: str | None = None
    counts: Mapping[str, Any] = field(default_factory=dict)
    #: When the window was planned (a ``catch_up`` window's cut-off was read then).
    planned_at: datetime | None = None

    @property
    def is_published(self) -> bool:
        """True once the manifest is published and ``upper`` is final."""
        return self.status == WindowStatus.PUBLISHED


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(moment: datetime | None) -> datetime | None:
    """A stored timestamp as an aware UTC datetime (SQLite returns naive ones)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _parse_stored(text: str | None, what: str, column: str, restore_from: str) -> GtidSet:
    """A GTID set read from ``column`` (``table.column``) of the metadata tables; a value that is not a
    valid GTID set (edited by hand, damaged) raises :class:`FrontierStoreError` saying where the right
    value is found."""
    try:
        return GtidSet.parse(text or "")
    except MySqlCdcError as exc:
        raise FrontierStoreError(
            f"metadata table column {column} of {what} is not a valid GTID set ({exc}). "
            f"Restore it in the metadata database: the right value is {restore_from}"
        ) from None


def _start_mysql_session(dbapi_connection: Any, _record: Any) -> None:
    """A metadata store on MySQL reads every row whatever the server's session defaults."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(MYSQL_SESSION_START)
    finally:
        cursor.close()


class FrontierStore(SchemaRecords, ServerObservations):
    """Access to the metadata tables through one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._schema_checked = False

    @classmethod
    def from_url(cls, url: str) -> FrontierStore:
        """A store on any SQLAlchemy URL (``sqlite:////path/cdc.db``, ``postgresql+psycopg2://...``)."""
        engine = sa.create_engine(url, future=True, pool_pre_ping=True)
        if engine.dialect.name == "mysql":
            sa.event.listen(engine, "connect", _start_mysql_session)
        return cls(engine)

    def __repr__(self) -> str:
        return f"FrontierStore({self.location!r})"

    @property
    def location(self) -> str:
        """The store's database URL without its password (for messages)."""
        return self.engine.url.render_as_string(hide_password=True)

    # -- schema ---------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the tables on first use; refuse a store written by a newer version of this code."""
        if self._schema_checked:
            return
        metadata.create_all(self.engine)
        with self.engine.begin() as connection:
            versions = [row.version for row in connection.execute(sa.select(store_version_table.c.version))]
            if not versions:
                connection.execute(
                    store_version_table.insert().values(version=STORE_SCHEMA_VERSION, installed_at=_now())
                )
            elif max(versions) > STORE_SCHEMA_VERSION:
                raise FrontierStoreError(
                    f"the metadata tables are at version {max(versions)}, newer than this provider "
                    f"understands ({STORE_SCHEMA_VERSION}); upgrade airflow-provider-mysql-cdc"
                )
            elif max(versions) < STORE_SCHEMA_VERSION:  # new tables only: create_all added them
                connection.execute(
                    store_version_table.insert().values(version=STORE_SCHEMA_VERSION, installed_at=_now())
                )
        self._schema_checked = True

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        self.ensure_schema()
        with self.engine.begin() as connection:
            yield connection

    # -- pipelines ------------------------------------------------------------------------------

    def get_pipeline(self, pipeline: str) -> PipelineRecord | None:
        """The pipeline's record, or None if it was never registered."""
        with self._transaction() as connection:
            row = connection.execute(sa.select(pipelines_table).where(pipelines_table.c.pipeline == pipeline)).first()
        if row is None:
            return None
        return PipelineRecord(
            pipeline=row.pipeline,
            initial_frontier=_parse_stored(
                row.initial_frontier,
                f"pipeline {pipeline!r}",
                "cdc_pipelines.initial_frontier",
                "the lower bound of its window 1 (cdc_windows.lower, and 'lower' in that window's _manifest.json)",
            ),
            capture_frontier=_parse_stored(
                row.capture_frontier,
                f"pipeline {pipeline!r}",
                "cdc_pipelines.capture_frontier",
                "the upper bound of its last published window (cdc_windows.upper, and 'upper' in that window's "
                "_manifest.json)",
            ),
            revision=row.revision,
            registered_at=_aware(row.created_at),
        )

    def register_pipeline(self, pipeline: str, initial_frontier: GtidSet) -> PipelineRecord:
        """Create the pipeline with its initial frontier, or return the existing record unchanged."""
        existing = self.get_pipeline(pipeline)
        if existing is not None:
            return existing
        now = _now()
        try:
            with self._transaction() as connection:
                connection.execute(
                    pipelines_table.insert().values(
                        pipeline=pipeline,
                        initial_frontier=str(initial_frontier),
                        capture_frontier=str(initial_frontier),
                        revision=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
        except sa.exc.IntegrityError:
            pass  # registered concurrently: the first registration wins
        record = self.get_pipeline(pipeline)
        assert record is not None
        return record

    def advance_capture_frontier(self, pipeline: str, expected: GtidSet, new: GtidSet) -> None:
        """Compare-and-set the capture frontier from ``expected`` to ``new`` (which must contain it)."""
        if not expected <= new:
            raise FrontierStoreError(
                f"pipeline {pipeline!r}: frontiers only grow, refusing to move from {expected} to {new}"
            )
        with self._transaction() as connection:
            result = connection.execute(
                pipelines_table.update()
                .where(pipelines_table.c.pipeline == pipeline)
                .where(pipelines_table.c.capture_frontier == str(expected))
                .values(capture_frontier=str(new), revision=pipelines_table.c.revision + 1, updated_at=_now())
            )
            if result.rowcount != 1:
                current = connection.execute(
                    sa.select(pipelines_table.c.capture_frontier).where(pipelines_table.c.pipeline == pipeline)
                ).scalar()
                if current is None:
                    raise UnknownPipelineError(f"pipeline {pipeline!r} is not registered")
                raise FrontierConflictError(
                    f"pipeline {pipeline!r}: capture frontier is {current!r}, expected {str(expected)!r}; "
                    "another capture advanced it first"
                )

    # -- windows --------------------------------------------------------------------------------

    @staticmethod
    def _window_from_row(row: Any) -> WindowRecord:
        what = f"pipeline {row.pipeline!r} window {row.window_id}"
        return WindowRecord(
            pipeline=row.pipeline,
            window_id=row.window_id,
            run_id=row.run_id,
            lower=_parse_stored(
                row.lower,
                what,
                "cdc_windows.lower",
                "the upper bound of the window before it (or the pipeline's initial_frontier for window 1), "
                "as 'lower' in this window's _manifest.json also records it once published",
            ),
            upper=None
            if row.upper is None
            else _parse_stored(row.upper, what, "cdc_windows.upper", "'upper' in this window's _manifest.json"),
            cutoff_rule=row.cutoff_rule,
            cutoff_value=row.cutoff_value,
            status=row.status,
            manifest_uri=row.manifest_uri,
            counts=json.loads(row.counts) if row.counts else {},
            planned_at=_aware(row.created_at),
        )

    def window_for_run(self, pipeline: str, run_id: str) -> WindowRecord | None:
        """The window an Airflow run owns (re-runs and clears find it again)."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(windows_table).where(windows_table.c.pipeline == pipeline, windows_table.c.run_id == run_id)
            ).first()
        return None if row is None else self._window_from_row(row)

    def window_for_cutoff(self, pipeline: str, cutoff_rule: str, cutoff_value: str) -> WindowRecord | None:
        """The first window planned with this cut-off (a data interval's end is one interval)."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(windows_table)
                .where(
                    windows_table.c.pipeline == pipeline,
                    windows_table.c.cutoff_rule == cutoff_rule,
                    windows_table.c.cutoff_value == cutoff_value,
                )
                .order_by(windows_table.c.window_id)
                .limit(1)
            ).first()
        return None if row is None else self._window_from_row(row)

    def get_window(self, pipeline: str, window_id: int) -> WindowRecord | None:
        """One window by id."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(windows_table).where(
                    windows_table.c.pipeline == pipeline, windows_table.c.window_id == window_id
                )
            ).first()
        return None if row is None else self._window_from_row(row)

    def last_window(self, pipeline: str) -> WindowRecord | None:
        """The window with the highest id."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(windows_table)
                .where(windows_table.c.pipeline == pipeline)
                .order_by(windows_table.c.window_id.desc())
                .limit(1)
            ).first()
        return None if row is None else self._window_from_row(row)

    def list_windows(self, pipeline: str) -> list[WindowRecord]:
        """Every window of the pipeline in id order."""
        with self._transaction() as connection:
            rows = connection.execute(
                sa.select(windows_table).where(windows_table.c.pipeline == pipeline).order_by(windows_table.c.window_id)
            ).all()
        return [self._window_from_row(row) for row in rows]

    def plan_window(
        self, pipeline: str, window_id: int, run_id: str, lower: GtidSet, cutoff_rule: str, cutoff_value: str
    ) -> WindowRecord:
        """Write a new window record once; a concurrent planner of the same id gets a conflict."""
        try:
            with self._transaction() as connection:
                connection.execute(
                    windows_table.insert().values(
                        pipeline=pipeline,
                        window_id=window_id,
                        run_id=run_id,
                        lower=str(lower),
                        upper=None,
                        cutoff_rule=cutoff_rule,
                        cutoff_value=cutoff_value,
                        status=WindowStatus.PLANNED,
                        created_at=_now(),
                    )
                )
        except sa.exc.IntegrityError:
            raise FrontierConflictError(
                f"pipeline {pipeline!r}: window {window_id} or run {run_id!r} was planned concurrently"
            ) from None
        record = self.get_window(pipeline, window_id)
        assert record is not None
        return record

    def publish_window(
        self, window: WindowRecord, upper: GtidSet, manifest_uri: str, counts: Mapping[str, Any]
    ) -> WindowRecord:
        """Mark a planned window published and advance the capture frontier, in one transaction."""
        with self._transaction() as connection:
            result = connection.execute(
                windows_table.update()
                .where(
                    windows_table.c.pipeline == window.pipeline,
                    windows_table.c.window_id == window.window_id,
                    windows_table.c.status == WindowStatus.PLANNED,
                )
                .values(
                    upper=str(upper),
                    status=WindowStatus.PUBLISHED,
                    manifest_uri=manifest_uri,
                    counts=json.dumps(dict(counts), sort_keys=True),
                    published_at=_now(),
                )
            )
            if result.rowcount != 1:
                raise FrontierConflictError(
                    f"pipeline {window.pipeline!r}: window {window.window_id} was published concurrently"
                )
            advanced = connection.execute(
                pipelines_table.update()
                .where(
                    pipelines_table.c.pipeline == window.pipeline,
                    pipelines_table.c.capture_frontier == str(window.lower),
                )
                .values(capture_frontier=str(upper), revision=pipelines_table.c.revision + 1, updated_at=_now())
            )
            if advanced.rowcount != 1:
                raise FrontierConflictError(
                    f"pipeline {window.pipeline!r}: the capture frontier moved away from window "
                    f"{window.window_id}'s lower bound {window.lower} while it was captured"
                )
        record = self.get_window(window.pipeline, window.window_id)
        assert record is not None
        return record

    # -- snapshots ------------------------------------------------------------------------------

    @staticmethod
    def _snapshot_from_row(row: Any) -> SnapshotRecord:
        return SnapshotRecord(
            pipeline=row.pipeline,
            snapshot_id=row.snapshot_id,
            run_id=row.run_id,
            tables=tuple(json.loads(row.tables)),
            handoff_window=row.handoff_window,
        )

    def list_snapshots(self, pipeline: str) -> list[SnapshotRecord]:
        """Every snapshot of the pipeline, oldest first."""
        with self._transaction() as connection:
            rows = connection.execute(
                sa.select(snapshots_table)
                .where(snapshots_table.c.pipeline == pipeline)
                .order_by(snapshots_table.c.snapshot_id)
            ).all()
        return [self._snapshot_from_row(row) for row in rows]

    def snapshot_for_run(self, pipeline: str, run_id: str) -> SnapshotRecord | None:
        """The snapshot an Airflow run planned (re-runs and clears find it again)."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(snapshots_table).where(
                    snapshots_table.c.pipeline == pipeline, snapshots_table.c.run_id == run_id
                )
            ).first()
        return None if row is None else self._snapshot_from_row(row)

    def plan_snapshot(self, pipeline: str, run_id: str, tables: list[str], handoff_window: int) -> SnapshotRecord:
        """Record a run's snapshot once (ids ``000001``, ``000002``, ...); a re-run gets the same record."""
        existing = self.snapshot_for_run(pipeline, run_id)
        if existing is not None:
            return existing
        try:
            with self._transaction() as connection:
                count = connection.execute(
                    sa.select(sa.func.count())
                    .select_from(snapshots_table)
                    .where(snapshots_table.c.pipeline == pipeline)
                ).scalar()
                connection.execute(
                    snapshots_table.insert().values(
                        pipeline=pipeline,
                        snapshot_id=f"{int(count or 0) + 1:06d}",
                        run_id=run_id,
                        tables=json.dumps(sorted(tables)),
                        handoff_window=handoff_window,
                        created_at=_now(),
                    )
                )
        except sa.exc.IntegrityError:
            raise FrontierConflictError(
                f"pipeline {pipeline!r}: a snapshot was planned concurrently (run {run_id!r}); retry"
            ) from None
        record = self.snapshot_for_run(pipeline, run_id)
        assert record is not None
        return record

    def plan_snapshot_table(
        self, pipeline: str, snapshot_id: str, table_name: str, chunks: list[str]
    ) -> list[SnapshotChunkRecord]:
        """Record all chunks of one table in one transaction, or return those recorded before."""
        columns = snapshot_chunks_table.c
        where = (columns.pipeline == pipeline, columns.snapshot_id == snapshot_id, columns.table_name == table_name)
        with self._transaction() as connection:
            if connection.execute(sa.select(columns.chunk_no).where(*where).limit(1)).first() is None:
                now = _now()
                try:
                    for chunk_no, chunk in enumerate(chunks):
                        connection.execute(
                            snapshot_chunks_table.insert().values(
                                pipeline=pipeline,
                                snapshot_id=snapshot_id,
                                table_name=table_name,
                                chunk_no=chunk_no,
                                chunk=chunk,
                                status=WindowStatus.PLANNED,
                                created_at=now,
                            )
                        )
                except sa.exc.IntegrityError:
                    raise FrontierConflictError(
                        f"pipeline {pipeline!r}: the chunks of {table_name} were planned concurrently; retry"
                    ) from None
            rows = connection.execute(sa.select(snapshot_chunks_table).where(*where).order_by(columns.chunk_no)).all()
        return [self._chunk_from_row(row) for row in rows]

    def get_snapshot_chunk(
        self, pipeline: str, snapshot_id: str, table_name: str, chunk_no: int
    ) -> SnapshotChunkRecord | None:
        """One chunk record."""
        with self._transaction() as connection:
            row = connection.execute(
                sa.select(snapshot_chunks_table).where(*self._chunk_where(pipeline, snapshot_id, table_name, chunk_no))
            ).first()
        return None if row is None else self._chunk_from_row(row)

    # -- snapshot chunks ------------------------------------------------------------------------

    @staticmethod
    def _chunk_from_row(row: Any) -> SnapshotChunkRecord:
        where = f"pipeline {row.pipeline!r} snapshot {row.snapshot_id!r} {row.table_name} chunk {row.chunk_no}"
        return SnapshotChunkRecord(
            pipeline=row.pipeline,
            snapshot_id=row.snapshot_id,
            table_name=row.table_name,
            chunk_no=row.chunk_no,
            chunk=row.chunk,
            status=row.status,
            frontier=None
            if row.frontier is None
            else _parse_stored(
                row.frontier, where, "cdc_snapshot_chunks.frontier", "'upper' in the chunk's _manifest.json"
            ),
            manifest_uri=row.manifest_uri,
            rows=row.rows,
        )

    def _chunk_where(self, pipeline: str, snapshot_id: str, table_name: str, chunk_no: int) -> tuple[Any, ...]:
        columns = snapshot_chunks_table.c
        return (
            columns.pipeline == pipeline,
            columns.snapshot_id == snapshot_id,
            columns.table_name == table_name,
            columns.chunk_no == chunk_no,
        )

    def finish_snapshot_chunk(
        self, record: SnapshotChunkRecord, frontier: GtidSet, manifest_uri: str, rows: int
    ) -> SnapshotChunkRecord:
        """Mark a planned chunk finished with its frontier (compare-and-set on the planned status)."""
        where = self._chunk_where(record.pipeline, record.snapshot_id, record.table_name, record.chunk_no)
        with self._transaction() as connection:
            result = connection.execute(
                snapshot_chunks_table.update()
                .where(*where, snapshot_chunks_table.c.status == WindowStatus.PLANNED)
                .values(
                    status=WindowStatus.PUBLISHED,
                    frontier=str(frontier),
                    manifest_uri=manifest_uri,
                    rows=rows,
                    finished_at=_now(),
                )
            )
            if result.rowcount != 1:
                raise FrontierConflictError(
                    f"pipeline {record.pipeline!r}: chunk {record.chunk_no} of {record.table_name} was finished "
                    "by another attempt first"
                )
            row = connection.execute(sa.select(snapshot_chunks_table).where(*where)).one()
        return self._chunk_from_row(row)

    def snapshot_chunks(self, pipeline: str, table_name: str | None = None) -> list[SnapshotChunkRecord]:
        """Every chunk of the pipeline's snapshots (optionally of one table), in planning order."""
        columns = snapshot_chunks_table.c
        select = sa.select(snapshot_chunks_table).where(columns.pipeline == pipeline)
        if table_name is not None:
            select = select.where(columns.table_name == table_name)
        with self._transaction() as connection:
            rows = connection.execute(select.order_by(columns.snapshot_id, columns.table_name, columns.chunk_no)).all()
        return [self._chunk_from_row(row) for row in rows]
