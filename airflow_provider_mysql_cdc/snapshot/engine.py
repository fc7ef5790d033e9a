"""Consistent, chunked, resumable snapshots of the selected tables (no Airflow import).

:func:`plan_snapshot` decides which tables a run snapshots (tables the pipeline has never
snapshotted, plus those asked for again), registers the pipeline's initial frontier before any chunk
starts, splits each table into key ranges planned from the data and records them once in the
metadata store. :func:`snapshot_chunk` reads one chunk at its own point in time:

1. ``LOCK TABLES t READ`` on one connection (short ``lock_wait_timeout``: a snapshot never queues
   writers behind it for long), ``@@GLOBAL.gtid_executed`` read as the chunk's frontier ``S``;
2. ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` on a second connection, which then opens the
   table (taking its metadata lock, so no ALTER can change it under the read);
3. ``UNLOCK TABLES`` (the lock lasted milliseconds: it is logged) and the chunk's rows are streamed
   in key order into Parquet (``_cdc_op = 'r'``), published with a manifest, and the chunk is marked
   finished with ``S`` (compare-and-set: a finished chunk is never redone).

Binlog capture then skips the row events of the chunk's key range whose GTID is in ``S``
(:mod:`airflow_provider_mysql_cdc.capture.handoff`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from airflow_provider_mysql_cdc.core.chunks import (
    Key,
    SnapshotChunk,
    next_boundary_query,
    plan_snapshot_chunks,
    quote_identifier,
)
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.preflight import TableName, sql_account
from airflow_provider_mysql_cdc.core.schema_events import SCHEMA_CHANGE_REBUILD, require_schema_change_policy
from airflow_provider_mysql_cdc.core.staging import SchemaVersionInfo, SnapshotTableManifest, StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.table_schema import table_from_create
from airflow_provider_mysql_cdc.core.types import (
    DECIMAL128_MAX_PRECISION,
    INTEGER_TYPES,
    ColumnSpec,
    arrow_schema,
    schema_fingerprint,
)
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.decoding.text_rows import SNAPSHOT_SESSION_STATEMENTS, select_expressions
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    CorruptStagingError,
    FrontierConflictError,
    MySqlQueryError,
    SchemaModelError,
    SnapshotLockTimeoutError,
    SnapshotNotPlannedError,
)
from airflow_provider_mysql_cdc.errors import MissingPrivilegeError as MissingPrivilegeError  # noqa: PLC0414  re-export: it was defined here
from airflow_provider_mysql_cdc.errors import TableWithoutKeyError as TableWithoutKeyError  # noqa: PLC0414  re-export: it was defined here
from airflow_provider_mysql_cdc.mysql.client import connect, connection_to, error_code, error_text, query
from airflow_provider_mysql_cdc.mysql.introspection import (
    read_gtid_executed,
    read_server_facts,
    require_named_tables,
    require_server_settings,
    selected_tables,
)
from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
from airflow_provider_mysql_cdc.snapshot.defaults import (
    DEFAULT_CHUNK_ROWS,
    DEFAULT_FETCH_ROWS,
    DEFAULT_LOCK_WAIT_TIMEOUT_SECONDS,
)
from airflow_provider_mysql_cdc.snapshot.fast_reader import FETCH_BYTES, staged_record_batches
from airflow_provider_mysql_cdc.staging import DEFAULT_ROW_GROUP_BYTES, SnapshotChunkWriter, Staging, StagingWriter
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, SnapshotChunkRecord, SnapshotRecord

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 5.0
DEFAULT_MAX_CHUNKS = 1024
LOCK_ATTEMPTS = 3

#: Key column types whose values SELECT and binlog decoding give in the same Python type with
#: MySQL's order (or, for strings, an order the server is asked about): tables keyed otherwise are
#: snapshotted as one chunk.
_CHUNKABLE_TYPES = set(INTEGER_TYPES) | {"year", "char", "varchar", "binary", "varbinary", "date", "datetime"}

_ER_NO_SUCH_TABLE = 1146
_ER_ACCESS_DENIED_CODES = (1044, 1142, 1227)
_ER_LOCK_WAIT_TIMEOUT = 1205


@dataclass(frozen=True)
class SnapshotRequest:
    """What to snapshot, where to stage it and how to split it."""

    pipeline: str
    run_id: str
    staging_uri: str
    tables: TableSelection = field(default_factory=TableSelection)
    #: ``db.table`` names (or ``fnmatch`` patterns) to snapshot again even though they were before.
    resnapshot: tuple[str, ...] = ()
    #: Key columns for tables without a primary key or unique NOT NULL key: ``{"db.table": ["a", "b"]}``.
    #: The named columns must identify rows (the apply merges on them).
    key_columns: Mapping[str, Sequence[str]] = field(default_factory=dict)
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    fetch_rows: int = DEFAULT_FETCH_ROWS
    #: Most bytes of row packets read per batch (a larger row is a batch of its own).
    fetch_bytes: int = FETCH_BYTES
    #: Bytes of rows the staging writer holds before writing them (and the most bytes of a row group).
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    lock_wait_timeout_seconds: int = DEFAULT_LOCK_WAIT_TIMEOUT_SECONDS
    #: Most chunks one snapshot may have (Airflow maps at most ``[core] max_map_length`` tasks);
    #: checked before the snapshot is recorded.
    max_chunks: int = DEFAULT_MAX_CHUNKS
    #: ``rebuild``: tables a window left waiting for a rebuild (a change their target could not follow)
    #: are snapshotted again in this run; ``stop``: only when named in ``resnapshot``.
    schema_change_policy: str = SCHEMA_CHANGE_REBUILD

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", self.pipeline):
            raise ConfigurationError(f"pipeline name {self.pipeline!r}: use letters, digits, '_', '.', '-'")
        for name, value in (
            ("chunk_rows", self.chunk_rows),
            ("fetch_rows", self.fetch_rows),
            ("fetch_bytes", self.fetch_bytes),
            ("row_group_bytes", self.row_group_bytes),
            ("max_chunks", self.max_chunks),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
        if not 1 <= self.lock_wait_timeout_seconds <= 3600:
            raise ConfigurationError("lock_wait_timeout_seconds must be between 1 and 3600")
        require_schema_change_policy(self.schema_change_policy)


@dataclass(frozen=True)
class SnapshotPlan:
    """The chunks a run's snapshot reads: the argument list of the mapped snapshot tasks."""

    pipeline: str
    snapshot_id: str | None
    tables: tuple[str, ...]
    chunks: tuple[SnapshotChunk, ...]

    def mapped_arguments(self) -> list[dict[str, Any]]:
        """One JSON-safe dict per chunk (``snapshot_id`` and the chunk), for ``.expand()``."""
        return [{"snapshot_id": self.snapshot_id, "chunk": chunk.to_json()} for chunk in self.chunks]


@dataclass(frozen=True)
class ChunkResult:
    """What one chunk task produced (XCom-safe via :meth:`as_xcom`)."""

    pipeline: str
    snapshot_id: str
    table_name: str
    chunk_no: int
    rows: int
    frontier: GtidSet
    manifest_uri: str
    lock_ms: float | None
    reused: bool

    def as_xcom(self) -> dict[str, Any]:
        """Small facts only: no rows, no secrets."""
        return {
            "pipeline": self.pipeline,
            "snapshot_id": self.snapshot_id,
            "table": self.table_name,
            "chunk_no": self.chunk_no,
            "rows": self.rows,
            "frontier": str(self.frontier),
            "manifest_uri": self.manifest_uri,
            "lock_ms": self.lock_ms,
            "reused": self.reused,
        }


# -- planning --------------------------------------------------------------------------------------


def _session(connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig) -> None:
    for statement in SNAPSHOT_SESSION_STATEMENTS:
        query(connection, source, statement)


def _split_name(table_name: str) -> tuple[str, str]:
    database, _, table = table_name.partition(".")
    return database, table


def find_key_columns(
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    table_name: str,
    named: Mapping[str, Sequence[str]],
) -> tuple[str, ...]:
    """The table's primary key; else its shortest unique key whose columns are all NOT NULL; else the
    columns the user named for it. Raises :class:`TableWithoutKeyError` when there is none."""
    database, table = _split_name(table_name)
    rows = query(
        connection,
        source,
        "SELECT s.INDEX_NAME, s.COLUMN_NAME, c.IS_NULLABLE, s.SUB_PART FROM information_schema.STATISTICS AS s "
        "JOIN information_schema.COLUMNS AS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME "
        "AND c.COLUMN_NAME = s.COLUMN_NAME "
        f"WHERE s.TABLE_SCHEMA = {connection.escape(database)} AND s.TABLE_NAME = {connection.escape(table)} "
        "AND s.NON_UNIQUE = 0 ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX",
    )
    indexes: dict[str, list[tuple[str, bool, Any]]] = {}
    for index_name, column, nullable, sub_part in rows:
        indexes.setdefault(str(index_name), []).append((str(column), str(nullable).upper() == "YES", sub_part))
    if "PRIMARY" in indexes:
        return tuple(column for column, _, _ in indexes["PRIMARY"])
    usable = [
        (len(columns), name, tuple(column for column, _, _ in columns))
        for name, columns in indexes.items()
        if not any(nullable or sub_part is not None for _, nullable, sub_part in columns)
    ]
    if usable:
        return min(usable)[2]
    if table_name in named:
        columns = tuple(named[table_name])
        if not columns or isinstance(named[table_name], str):
            raise ConfigurationError(f"key_columns for {table_name} must be a non-empty list of column names")
        return columns
    raise TableWithoutKeyError(
        f"{table_name} has no primary key and no unique key on NOT NULL columns, so its rows cannot be "
        "identified: add a primary key (best), or name key columns that identify its rows with "
        f'key_columns={{"{table_name}": ["col_a", "col_b"]}}, or exclude the table from the pipeline'
    )


def _chunkable(specs: Sequence[ColumnSpec], key_columns: Sequence[str]) -> bool:
    by_name = {spec.name: spec for spec in specs}
    for column in key_columns:
        spec = by_name.get(column)
        if spec is None:
            raise ConfigurationError(f"key column {column!r} is not a column of the table")
        chunkable = spec.mysql_type in _CHUNKABLE_TYPES or (
            spec.mysql_type == "decimal" and (spec.precision or 0) <= DECIMAL128_MAX_PRECISION
        )
        if not chunkable:
            return False
    return True


def plan_table_chunks(
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    table_name: str,
    key_columns: Sequence[str],
    chunk_rows: int,
) -> tuple[SnapshotChunk, ...]:
    """Key ranges of about ``chunk_rows`` rows each, from boundaries read off the key's index."""
    database, table = _split_name(table_name)
    specs = column_specs_from_information_schema(connection, source, database, table)
    if not _chunkable(specs, key_columns):
        log.info("%s: key %s has a type chunks cannot split on; the table is one chunk", table_name, key_columns)
        return plan_snapshot_chunks(database, table, key_columns, [])
    boundaries: list[Key] = []
    after: Key | None = None
    while True:
        sql, params = next_boundary_query(database, table, key_columns, chunk_rows, after)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            break
        after = tuple(row)
        if not boundaries or boundaries[-1] != after:  # user-named keys may repeat a value
            boundaries.append(after)
    return plan_snapshot_chunks(database, table, key_columns, boundaries)


def _snapshotted_tables(store: FrontierStore, pipeline: str) -> set[str]:
    return {table for record in store.list_snapshots(pipeline) for table in record.tables}


def _handoff_window(store: FrontierStore, pipeline: str) -> int:
    """The first window the hand-off of a snapshot planned now must govern: the next one, or the last
    one while it is still unpublished (it will be captured after the snapshot)."""
    last = store.last_window(pipeline)
    if last is None:
        return 1
    return last.window_id if not last.is_published else last.window_id + 1


def plan_snapshot(request: SnapshotRequest, source: MySqlConnectionConfig, store: FrontierStore) -> SnapshotPlan:
    """Decide and record the run's snapshot (once: a re-run returns the same chunks)."""
    require_server_settings(source)
    with connection_to(source) as connection:
        _session(connection, source)
        snapshot = store.snapshot_for_run(request.pipeline, request.run_id)
        if snapshot is None:  # refused before anything is recorded
            staging = Staging(request.staging_uri, request.pipeline)
            staging.require_writable(staging.snapshot_attempts_dir())
            require_named_tables(connection, source, request.tables)
        if store.get_pipeline(request.pipeline) is None:
            initial = read_gtid_executed(connection, source)
            record = store.register_pipeline(request.pipeline, initial)
            log.info("pipeline %s registered with initial frontier %s", request.pipeline, record.initial_frontier)
        fresh_plans: dict[str, tuple[SnapshotChunk, ...]] = {}
        if snapshot is None:
            decided = _new_snapshot(request, connection, source, store)
            if decided is None:
                return SnapshotPlan(request.pipeline, None, (), ())
            snapshot, fresh_plans = decided
        chunks: list[SnapshotChunk] = []
        for table_name in snapshot.tables:
            records = store.snapshot_chunks(request.pipeline, table_name)
            planned = [r for r in records if r.snapshot_id == snapshot.snapshot_id]
            if not planned:
                table_chunks = fresh_plans.get(table_name) or _plan_table(request, connection, source, table_name)
                planned = store.plan_snapshot_table(
                    request.pipeline,
                    snapshot.snapshot_id,
                    table_name,
                    [json.dumps(chunk.to_json(), sort_keys=True) for chunk in table_chunks],
                )
                log.info("%s: %s chunks of about %s rows", table_name, len(planned), request.chunk_rows)
            chunks.extend(SnapshotChunk.from_json(json.loads(record.chunk)) for record in planned)
    return SnapshotPlan(request.pipeline, snapshot.snapshot_id, snapshot.tables, tuple(chunks))


def _new_snapshot(
    request: SnapshotRequest,
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    store: FrontierStore,
) -> tuple[SnapshotRecord, dict[str, tuple[SnapshotChunk, ...]]] | None:
    existing = selected_tables(connection, source, request.tables)
    again = TableSelection.of(request.resnapshot) if request.resnapshot else None
    for pattern in request.resnapshot:
        if not any(TableSelection.of([pattern]).matches(*_split_name(name)) for name in existing):
            raise ConfigurationError(
                f"resnapshot names {pattern!r}, which matches no selected table on the server "
                f"(selected: {', '.join(existing) or 'none'})"
            )
    done = _snapshotted_tables(store, request.pipeline)
    rebuilds = _pending_rebuilds(request, store, existing)
    tables = [
        name
        for name in existing
        if name not in done or name in rebuilds or (again is not None and again.matches(*_split_name(name)))
    ]
    if not tables:
        log.info("pipeline %s: every selected table has a snapshot; nothing to snapshot", request.pipeline)
        return None
    # Missing privileges, keyless tables and plans too big for Airflow's mapping are refused before
    # anything is recorded.
    _require_snapshot_privileges(connection, source, tables)
    plans: dict[str, tuple[SnapshotChunk, ...]] = {}
    for name in tables:
        try:
            plans[name] = _plan_table(request, connection, source, name)
        except TableWithoutKeyError as exc:
            if name not in rebuilds or name not in done or (again is not None and again.matches(*_split_name(name))):
                raise
            # A rebuild the table cannot have (it lost its key): it stays waiting, the others go on.
            log.warning("%s waits for a rebuild since %s, but cannot be snapshotted: %s", name, rebuilds[name], exc)
    tables = [name for name in tables if name in plans]
    if not tables:
        return None
    total = sum(len(chunks) for chunks in plans.values())
    if total > request.max_chunks:
        largest = max(plans, key=lambda name: len(plans[name]))
        raise ConfigurationError(
            f"pipeline {request.pipeline!r}: the snapshot of {len(tables)} tables needs {total} chunks of "
            f"{request.chunk_rows} rows ({largest}: {len(plans[largest])}), more than max_chunks "
            f"{request.max_chunks} (Airflow's [core] max_map_length); raise chunk_rows to at least "
            f"{request.chunk_rows * -(-total // request.max_chunks)}"
        )
    record = store.plan_snapshot(request.pipeline, request.run_id, tables, _handoff_window(store, request.pipeline))
    log.info(
        "pipeline %s: snapshot %s of %s (capture hands off from window %s)",
        request.pipeline,
        record.snapshot_id,
        ", ".join(record.tables),
        record.handoff_window,
    )
    return record, plans


def _pending_rebuilds(request: SnapshotRequest, store: FrontierStore, existing: Sequence[str]) -> dict[str, str]:
    """``db.table`` -> why, for the selected tables still on the server that a window left waiting for a
    rebuild (taken by this snapshot when the pipeline's policy is ``rebuild``)."""
    if request.schema_change_policy != SCHEMA_CHANGE_REBUILD:
        return {}
    pending = store.pending_rebuilds(request.pipeline, _handoff_window(store, request.pipeline))
    rebuilds = {
        name: f"window {r.window_id} (GTID {r.gtid}): {r.reason}" for name, r in pending.items() if name in existing
    }
    for name, why in rebuilds.items():
        log.info("pipeline %s: %s is snapshotted again to rebuild its target (%s)", request.pipeline, name, why)
    return rebuilds


def _require_snapshot_privileges(
    connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig, tables: Sequence[str]
) -> None:
    """Raise :class:`MissingPrivilegeError` with the GRANT statements when the account cannot read
    (``SELECT``, tried on each table) or lock (``LOCK TABLES``, from ``SHOW GRANTS``; not judged when
    privileges come through roles) the tables to snapshot."""
    facts = read_server_facts(connection, source, with_tables=False)
    account = sql_account(facts.current_user)
    problems: list[str] = []
    fixes: list[str] = []
    for table_name in tables:
        database, table = _split_name(table_name)
        try:
            _execute(
                connection, source, f"SELECT 1 FROM {quote_identifier(database)}.{quote_identifier(table)} LIMIT 0"
            )
        except MySqlQueryError as exc:
            if exc.__cause__ is None or error_code(exc.__cause__) not in _ER_ACCESS_DENIED_CODES:
                raise
            problems.append(f"SELECT on {table_name} (to read its rows)")
            fixes.append(f"GRANT SELECT ON {quote_identifier(database)}.{quote_identifier(table)} TO {account};")
    if not facts.grants.role_grants:
        databases = sorted(
            {
                table_name.partition(".")[0]
                for table_name in tables
                if not facts.grants.allows("LOCK TABLES", TableName(*_split_name(table_name)))
            }
        )
        for database in databases:
            problems.append(f"LOCK TABLES on {database} (for the snapshot's millisecond table lock)")
            fixes.append(f"GRANT LOCK TABLES ON {quote_identifier(database)}.* TO {account};")
    if problems:
        raise MissingPrivilegeError(
            f"{account} lacks {'; '.join(problems)}; no snapshot was recorded. Grant it: {' '.join(fixes)}"
        )


def _plan_table(
    request: SnapshotRequest,
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    table_name: str,
) -> tuple[SnapshotChunk, ...]:
    key_columns = find_key_columns(connection, source, table_name, request.key_columns)
    return plan_table_chunks(connection, source, table_name, key_columns, request.chunk_rows)


# -- one chunk -------------------------------------------------------------------------------------


def _execute(connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig, sql: str) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    except pymysql.err.MySQLError as exc:
        raise MySqlQueryError(
            f"{sql!r} failed on {source.address}: [{error_code(exc)}] {error_text(exc, source)}"
        ) from exc


@dataclass
class _PointInTime:
    frontier: GtidSet
    lock_ms: float
    table_exists: bool


def _open_point_in_time(
    lock_connection: pymysql.connections.Connection[Any],
    read_connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    chunk: SnapshotChunk,
    lock_wait_timeout: int,
) -> _PointInTime:
    """Steps 1-3 of the module docstring; ``read_connection`` is left inside its snapshot transaction."""
    table = f"{quote_identifier(chunk.database)}.{quote_identifier(chunk.table)}"
    _execute(lock_connection, source, f"SET SESSION lock_wait_timeout = {int(lock_wait_timeout)}")
    _execute(read_connection, source, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            _execute(lock_connection, source, f"LOCK TABLES {table} READ")
            break
        except MySqlQueryError as exc:
            code = error_code(exc.__cause__) if exc.__cause__ else None
            if code == _ER_NO_SUCH_TABLE:
                frontier = read_gtid_executed(lock_connection, source)
                return _PointInTime(frontier, 0.0, table_exists=False)
            if code in _ER_ACCESS_DENIED_CODES:
                raise MissingPrivilegeError(
                    f"{source.address} may not lock {chunk.database}.{chunk.table}: the snapshot takes a "
                    "short LOCK TABLES ... READ to read a consistent frontier. Grant it with: "
                    f"GRANT LOCK TABLES, SELECT ON {quote_identifier(chunk.database)}.* TO <the connection's user>"
                ) from None
            if code == _ER_LOCK_WAIT_TIMEOUT and attempt < LOCK_ATTEMPTS:
                log.warning("LOCK TABLES %s waited %ss (attempt %s); retrying", table, lock_wait_timeout, attempt)
                continue
            if code == _ER_LOCK_WAIT_TIMEOUT:
                raise SnapshotLockTimeoutError(
                    f"LOCK TABLES {table} READ waited {lock_wait_timeout}s {LOCK_ATTEMPTS} times behind running "
                    "transactions on the table; retry when they are done (see SHOW PROCESSLIST) or raise "
                    "lock_wait_timeout_seconds"
                ) from None
            raise
    locked_at = time.monotonic()
    try:
        frontier = read_gtid_executed(lock_connection, source)
        _execute(read_connection, source, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        # Opening the table takes its metadata lock for the transaction: no ALTER until the read ends.
        _execute(read_connection, source, f"SELECT 1 FROM {table} LIMIT 0")
    finally:
        _execute(lock_connection, source, "UNLOCK TABLES")
    lock_ms = (time.monotonic() - locked_at) * 1000.0
    return _PointInTime(frontier, lock_ms, table_exists=True)


def _record_for(
    store: FrontierStore, pipeline: str, snapshot_id: str, chunk: SnapshotChunk
) -> tuple[SnapshotRecord, SnapshotChunkRecord]:
    table_name = f"{chunk.database}.{chunk.table}"
    snapshot = next((s for s in store.list_snapshots(pipeline) if s.snapshot_id == snapshot_id), None)
    record = store.get_snapshot_chunk(pipeline, snapshot_id, table_name, chunk.chunk_no)
    if snapshot is None or record is None:
        raise SnapshotNotPlannedError(
            f"pipeline {pipeline!r} has no chunk {chunk.chunk_no} of {table_name} in snapshot {snapshot_id!r}; "
            "run the snapshot planning task first"
        )
    if json.loads(record.chunk) != chunk.to_json():
        raise SnapshotNotPlannedError(
            f"chunk {chunk.chunk_no} of {table_name} in snapshot {snapshot_id} was planned as {record.chunk}"
        )
    return snapshot, record


def _finished_result(staging: Staging, record: SnapshotChunkRecord) -> ChunkResult:
    assert record.frontier is not None and record.manifest_uri is not None
    unit_dir = staging.manifest_dir_of(record.manifest_uri)
    if unit_dir is None:
        raise ConfigurationError(
            f"chunk {record.chunk_no} of {record.table_name} (snapshot {record.snapshot_id}) was staged at "
            f"{record.manifest_uri}, outside staging_uri {staging.uri!r}; use the staging_uri it was planned with"
        )
    manifest = staging.read_manifest_in(unit_dir)
    if manifest is None:
        raise CorruptStagingError(
            f"chunk {record.chunk_no} of {record.table_name} (snapshot {record.snapshot_id}) is finished but "
            f"its manifest {record.manifest_uri} is gone; re-snapshot the table"
        )
    staging.verify_files(manifest)
    return ChunkResult(
        record.pipeline,
        record.snapshot_id,
        record.table_name,
        record.chunk_no,
        int(record.rows or 0),
        record.frontier,
        record.manifest_uri,
        None,
        reused=True,
    )


def snapshot_chunk(
    request: SnapshotRequest,
    snapshot_id: str,
    chunk: SnapshotChunk,
    source: MySqlConnectionConfig,
    store: FrontierStore,
) -> ChunkResult:
    """Read, stage and finish one planned chunk (a finished chunk is verified and returned as is)."""
    snapshot, record = _record_for(store, request.pipeline, snapshot_id, chunk)
    staging = Staging(request.staging_uri, request.pipeline)
    if record.is_finished:
        log.info("chunk %s of %s is already finished; nothing to redo", chunk.chunk_no, record.table_name)
        result = _finished_result(staging, record)
        write_table_manifest_when_complete(staging, store, snapshot, record.table_name)
        return result
    writer = SnapshotChunkWriter(
        staging,
        snapshot_id,
        chunk.database,
        chunk.table,
        chunk.chunk_no,
        label=f"chunk {chunk.chunk_no} of {record.table_name} (snapshot {snapshot_id})",
        row_group_bytes=request.row_group_bytes,
    )
    try:
        with connection_to(source) as lock_connection:
            read_connection = connect(source)
            try:
                _session(read_connection, source)
                point = _open_point_in_time(
                    lock_connection, read_connection, source, chunk, request.lock_wait_timeout_seconds
                )
                log.info(
                    "chunk %s of %s: frontier %s, table lock held %.1f ms",
                    chunk.chunk_no,
                    record.table_name,
                    point.frontier,
                    point.lock_ms,
                )
                schemas: tuple[SchemaVersionInfo, ...] = ()
                rows = 0
                create_statement = None
                if point.table_exists:
                    create_statement = _create_statement(read_connection, source, chunk)
                    info, rows = _stream_rows(request, store, read_connection, source, chunk, writer)
                    schemas = (info,)
                else:
                    log.warning("%s no longer exists: chunk %s is empty", record.table_name, chunk.chunk_no)
                _execute(read_connection, source, "COMMIT")
            finally:
                read_connection.close()
        files = writer.finish()
    except BaseException:
        writer.discard()
        raise
    manifest = StagingManifest(
        pipeline=request.pipeline,
        window_id=0,
        lower="",
        upper=str(point.frontier),
        cutoff_rule="snapshot",
        cutoff_value=snapshot_id,
        transactions=0,
        first_commit_ts_us=None,
        last_commit_ts_us=None,
        files=tuple(files),
        schemas=schemas,
        kind="snapshot",
        snapshot_id=snapshot_id,
        chunk=chunk.to_json(),
        attempt=writer.attempt,
        handoff_window=snapshot.handoff_window,
    )
    uri = writer.publish(manifest)
    try:
        store.finish_snapshot_chunk(record, point.frontier, uri, rows)
    except FrontierConflictError:
        staging.delete_published(manifest)
        winner = store.get_snapshot_chunk(request.pipeline, snapshot_id, record.table_name, chunk.chunk_no)
        assert winner is not None
        log.warning(
            "chunk %s of %s was finished by another attempt; keeping that one", chunk.chunk_no, winner.table_name
        )
        return _finished_result(staging, winner)
    log.info("chunk %s of %s finished: %s rows", chunk.chunk_no, record.table_name, rows)
    _record_tracked_schema(store, snapshot, chunk, create_statement)
    write_table_manifest_when_complete(staging, store, snapshot, record.table_name)
    return ChunkResult(
        request.pipeline,
        snapshot_id,
        record.table_name,
        chunk.chunk_no,
        rows,
        point.frontier,
        uri,
        point.lock_ms,
        False,
    )


def _create_statement(
    connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig, chunk: SnapshotChunk
) -> str:
    """``SHOW CREATE TABLE`` on the chunk's read connection: its transaction holds the table's metadata
    lock, so this is the schema of the chunk's rows (generated invisible primary keys shown)."""
    with contextlib.suppress(MySqlQueryError):  # MySQL before 8.0.30 has no such variable, nor such keys
        _execute(connection, source, "SET SESSION show_gipk_in_create_table_and_information_schema = ON")
    table = f"{quote_identifier(chunk.database)}.{quote_identifier(chunk.table)}"
    rows = query(connection, source, f"SHOW CREATE TABLE {table}")
    return str(rows[0][1])


def _record_tracked_schema(
    store: FrontierStore, snapshot: SnapshotRecord, chunk: SnapshotChunk, create_statement: str | None
) -> None:
    """Record the table's schema at the snapshot's hand-off (capture follows its columns from there).
    A statement the schema model cannot read is recorded as not known: capture then tracks the table
    from its first table map."""
    if create_statement is None:
        return
    try:
        tracked = json.dumps(table_from_create(create_statement, chunk.database).to_json(), sort_keys=True)
    except SchemaModelError as exc:
        log.warning("%s.%s: its schema is not tracked from the snapshot (%s)", chunk.database, chunk.table, exc)
        tracked = None
    store.record_tracked_schema(
        snapshot.pipeline,
        f"{chunk.database}.{chunk.table}",
        snapshot.handoff_window,
        -1,
        f"snapshot:{snapshot.snapshot_id}",
        tracked,
    )


def _stream_rows(
    request: SnapshotRequest,
    store: FrontierStore,
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    chunk: SnapshotChunk,
    writer: StagingWriter,
) -> tuple[SchemaVersionInfo, int]:
    """Stream the chunk's rows in key order into the writer; returns the schema version and row count."""
    table_name = f"{chunk.database}.{chunk.table}"
    specs = column_specs_from_information_schema(connection, source, chunk.database, chunk.table)
    fingerprint = schema_fingerprint(specs)
    columns = [spec.describe() for spec in specs]
    version = store.schema_version(request.pipeline, table_name, fingerprint, columns, None)
    primary_key = tuple(spec.name for spec in specs if spec.primary_key)
    info = SchemaVersionInfo(chunk.database, chunk.table, version, fingerprint, tuple(columns), primary_key)
    schema = arrow_schema(specs)
    sql, params = chunk.select_query(expressions=select_expressions(specs))
    rows = 0
    started = last_progress = time.monotonic()
    try:
        batches_read = staged_record_batches(
            connection, specs, sql, params, request.fetch_rows, fetch_bytes=request.fetch_bytes
        )
        with contextlib.closing(batches_read) as batches:
            for batch in batches:
                rows += batch.num_rows
                writer.add_batch(chunk.database, chunk.table, version, schema, batch, "r", cdc_seq(0, rows - 1))
                now = time.monotonic()
                if now - last_progress >= PROGRESS_EVERY_SECONDS:
                    rate = rows / (now - started)
                    log.info("chunk %s of %s: %s rows (%.0f rows/s)", chunk.chunk_no, table_name, rows, rate)
                    last_progress = now
    except pymysql.err.MySQLError as exc:
        raise MySqlQueryError(
            f"reading chunk {chunk.chunk_no} of {table_name} failed on {source.address}: "
            f"[{error_code(exc)}] {error_text(exc, source)}"
        ) from None
    if rows == 0:
        writer.ensure_file(chunk.database, chunk.table, version, schema)
    return info, rows


# -- the table manifest ----------------------------------------------------------------------------


def write_table_manifest_when_complete(
    staging: Staging, store: FrontierStore, snapshot: SnapshotRecord, table_name: str
) -> str | None:
    """Once every chunk of the table is finished, publish the table manifest (idempotent); returns its URI.

    Chunk directories no finished record points at (a crash between publish and finish, a lost race)
    are deleted then: nothing can refer to them any more."""
    records = [r for r in store.snapshot_chunks(snapshot.pipeline, table_name) if r.snapshot_id == snapshot.snapshot_id]
    if not records or not all(r.is_finished for r in records):
        return None
    database, table = _split_name(table_name)
    manifest = SnapshotTableManifest(
        pipeline=snapshot.pipeline,
        snapshot_id=snapshot.snapshot_id,
        database=database,
        table=table,
        handoff_window=snapshot.handoff_window,
        chunks=tuple(
            {
                "chunk": json.loads(r.chunk),
                "frontier": str(r.frontier),
                "manifest": staging.relative_path(r.manifest_uri or ""),
                "rows": r.rows,
            }
            for r in records
        ),
    )
    uri = staging.publish_snapshot_table_manifest(manifest)
    staging.delete_unreferenced_chunk_attempts(
        snapshot.snapshot_id, database, table, {str(chunk["manifest"]) for chunk in manifest.chunks}
    )
    return uri
