"""Read one snapshot chunk at its own point in time (``LOCK TABLES ... READ``, the frontier, a consistent
snapshot transaction, ``UNLOCK TABLES``), stream its rows into staging and finish it once; publish a
table's manifest once all its chunks are finished. No Airflow import."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import pymysql

from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk, quote_identifier
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.staging import SchemaVersionInfo, SnapshotTableManifest, StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.table_schema import table_from_create
from airflow_provider_mysql_cdc.core.types import arrow_schema, require_unreserved_column_names, schema_fingerprint
from airflow_provider_mysql_cdc.decoding.text_rows import select_expressions
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    CorruptStagingError,
    FrontierConflictError,
    MissingPrivilegeError,
    MySqlQueryError,
    SchemaModelError,
    SnapshotLockTimeoutError,
    SnapshotNotPlannedError,
    UnmappableTextError,
)
from airflow_provider_mysql_cdc.mysql.client import connect, connection_to, error_code, error_text, query
from airflow_provider_mysql_cdc.mysql.introspection import read_gtid_executed
from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
from airflow_provider_mysql_cdc.snapshot.fast_reader import staged_record_batches
from airflow_provider_mysql_cdc.snapshot.request import (
    ER_ACCESS_DENIED_CODES,
    ChunkResult,
    SnapshotRequest,
    execute_statement,
    split_table_name,
    start_snapshot_session,
)
from airflow_provider_mysql_cdc.snapshot.server_guard import read_guarded_server, record_snapshot_server
from airflow_provider_mysql_cdc.staging import SnapshotChunkWriter, Staging, StagingWriter
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, SnapshotChunkRecord, SnapshotRecord

log = logging.getLogger(__name__)


PROGRESS_EVERY_SECONDS = 5.0


LOCK_ATTEMPTS = 3


_ER_NO_SUCH_TABLE = 1146


_ER_LOCK_WAIT_TIMEOUT = 1205


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
    execute_statement(lock_connection, source, f"SET SESSION lock_wait_timeout = {int(lock_wait_timeout)}")
    execute_statement(read_connection, source, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        try:
            execute_statement(lock_connection, source, f"LOCK TABLES {table} READ")
            break
        except MySqlQueryError as exc:
            code = error_code(exc.__cause__) if exc.__cause__ else None
            if code == _ER_NO_SUCH_TABLE:
                frontier = read_gtid_executed(lock_connection, source)
                return _PointInTime(frontier, 0.0, table_exists=False)
            if code in ER_ACCESS_DENIED_CODES:
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
        execute_statement(read_connection, source, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        # Opening the table takes its metadata lock for the transaction: no ALTER until the read ends.
        execute_statement(read_connection, source, f"SELECT 1 FROM {table} LIMIT 0")
    finally:
        execute_statement(lock_connection, source, "UNLOCK TABLES")
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
    staging = Staging(request.staging_uri, request.pipeline, request.object_store)
    if record.is_finished:
        log.info("chunk %s of %s is already finished; nothing to redo", chunk.chunk_no, record.table_name)
        result = _finished_result(staging, record)
        write_table_manifest_when_complete(staging, store, snapshot, record.table_name)
        return result
    ref = f"{snapshot_id}:{record.table_name}:{chunk.chunk_no}"
    unit = f"snapshot {snapshot_id} ({record.table_name} chunk {chunk.chunk_no})"
    record_snapshot_server(
        store, request.pipeline, ref, read_guarded_server(request.pipeline, unit, source, store, check_settings=False)
    )
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
                start_snapshot_session(read_connection, source)
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
                execute_statement(read_connection, source, "COMMIT")
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
        execute_statement(connection, source, "SET SESSION show_gipk_in_create_table_and_information_schema = ON")
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
    require_unreserved_column_names(table_name, specs)
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
    except UnmappableTextError as exc:
        raise UnmappableTextError(
            f"pipeline {request.pipeline!r}, run {request.run_id!r}: snapshot of {table_name} (chunk "
            f"{chunk.chunk_no}), column {exc}"
        ) from None
    if rows == 0:
        writer.ensure_file(chunk.database, chunk.table, version, schema)
    return info, rows


def write_table_manifest_when_complete(
    staging: Staging, store: FrontierStore, snapshot: SnapshotRecord, table_name: str
) -> str | None:
    """Once every chunk of the table is finished, publish the table manifest (idempotent); returns its URI.

    Chunk directories no finished record points at (a crash between publish and finish, a lost race)
    are deleted then: nothing can refer to them any more."""
    records = [r for r in store.snapshot_chunks(snapshot.pipeline, table_name) if r.snapshot_id == snapshot.snapshot_id]
    if not records or not all(r.is_finished for r in records):
        return None
    database, table = split_table_name(table_name)
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
