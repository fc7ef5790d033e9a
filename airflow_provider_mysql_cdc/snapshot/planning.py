"""Plan a run's snapshot: which tables it reads (never snapshotted, asked for again, or waiting for a
rebuild), their key columns and key-range chunks, recorded once in the metadata store after the
account's privileges are checked. No Airflow import."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

import pymysql

from airflow_provider_mysql_cdc.core.chunks import (
    Key,
    SnapshotChunk,
    even_boundaries,
    next_boundary_query,
    plan_snapshot_chunks,
    quote_identifier,
)
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.foreign_keys import cascading_child_reason
from airflow_provider_mysql_cdc.core.preflight import TableName, sql_account
from airflow_provider_mysql_cdc.core.schema_events import SCHEMA_CHANGE_REBUILD
from airflow_provider_mysql_cdc.core.staging import cdc_seq
from airflow_provider_mysql_cdc.core.storage_engines import merge_member_reason, unfollowable_engine_reason
from airflow_provider_mysql_cdc.core.types import DECIMAL128_MAX_PRECISION, INTEGER_TYPES, ColumnSpec
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    MissingPrivilegeError,
    MySqlQueryError,
    TerminalCdcError,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, error_code, query, query_value
from airflow_provider_mysql_cdc.mysql.introspection import (
    cascading_foreign_key_children,
    merge_members,
    read_server_facts,
    require_named_tables,
    selected_tables,
    tables_in_unfollowable_engines,
)
from airflow_provider_mysql_cdc.mysql.server_state import ServerState
from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
from airflow_provider_mysql_cdc.snapshot.request import (
    ER_ACCESS_DENIED_CODES,
    SnapshotPlan,
    SnapshotRequest,
    execute_statement,
    split_table_name,
    start_snapshot_session,
)
from airflow_provider_mysql_cdc.snapshot.server_guard import read_guarded_server, record_snapshot_server
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, SnapshotRecord

log = logging.getLogger(__name__)


#: Key column types whose values SELECT and binlog decoding give in the same Python type with
#: MySQL's order (or, for strings, an order the server is asked about): tables keyed otherwise are
#: snapshotted as one chunk.
_CHUNKABLE_TYPES = set(INTEGER_TYPES) | {"year", "char", "varchar", "binary", "varbinary", "date", "datetime"}


def find_unique_key(
    connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig, table_name: str
) -> tuple[str, ...]:
    """The table's primary key; else its shortest unique key whose columns are all NOT NULL; else ()."""
    database, table = split_table_name(table_name)
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
    return min(usable)[2] if usable else ()


def _named_key_columns(table_name: str, named: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    if table_name not in named:
        return ()
    columns = tuple(named[table_name])
    if not columns or isinstance(named[table_name], str):
        raise ConfigurationError(f"key_columns for {table_name} must be a non-empty list of column names")
    return columns


def find_key_columns(
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    table_name: str,
    named: Mapping[str, Sequence[str]],
) -> tuple[str, ...]:
    """The table's primary key; else its shortest unique key whose columns are all NOT NULL; else, for a
    table without a key, the columns the user named to cut it into chunks, or () (one chunk). A table
    without a key is replicated as a multiset of rows either way: named columns only cut chunks."""
    return find_unique_key(connection, source, table_name) or _named_key_columns(table_name, named)


def _chunkable(table_name: str, specs: Sequence[ColumnSpec], key_columns: Sequence[str]) -> bool:
    by_name = {spec.name: spec for spec in specs}
    for column in key_columns:
        spec = by_name.get(column)
        if spec is None:
            raise ConfigurationError(
                f"key_columns for {table_name} name {column!r}, which is not a column of the table "
                f"(columns: {', '.join(by_name)}); fix key_columns, or leave the table out of it"
            )
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
    unique_key: bool = False,
) -> tuple[SnapshotChunk, ...]:
    """Key ranges of about ``chunk_rows`` rows each: equal widths of a large table's unique integer key
    (``unique_key``: ``key_columns`` are its primary or unique NOT NULL key) when its keys are dense
    enough (:func:`~airflow_provider_mysql_cdc.core.chunks.even_boundaries`), else boundaries read off
    the key's index."""
    database, table = split_table_name(table_name)
    if not key_columns:
        log.info("%s has no primary key or unique NOT NULL key: it is read as one chunk", table_name)
        return plan_snapshot_chunks(database, table, (), [])
    specs = column_specs_from_information_schema(connection, source, database, table)
    if not _chunkable(table_name, specs, key_columns):
        log.info("%s: key %s has a type chunks cannot split on; the table is one chunk", table_name, key_columns)
        return plan_snapshot_chunks(database, table, key_columns, [])
    key_types = {spec.name: spec.mysql_type for spec in specs}
    if unique_key and len(key_columns) == 1 and key_types[key_columns[0]] in INTEGER_TYPES:
        even = _even_boundaries(connection, source, table_name, key_columns[0], chunk_rows)
        if even is not None:
            return plan_snapshot_chunks(database, table, key_columns, even)
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


def _even_boundaries(
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    table_name: str,
    key_column: str,
    chunk_rows: int,
) -> tuple[tuple[int], ...] | None:
    """Equal-width boundaries from the key's lowest and highest value and the server's row estimate
    (InnoDB's statistics, read fresh: ``information_schema_stats_expiry = 0``), or None."""
    database, table = split_table_name(table_name)
    query(connection, source, "SET SESSION information_schema_stats_expiry = 0")
    try:
        estimate = query_value(
            connection,
            source,
            "SELECT TABLE_ROWS FROM information_schema.TABLES "
            f"WHERE TABLE_SCHEMA = {connection.escape(database)} AND TABLE_NAME = {connection.escape(table)}",
        )
    finally:  # live statistics cost a table open each: only for this one table
        query(connection, source, "SET SESSION information_schema_stats_expiry = DEFAULT")
    column = quote_identifier(key_column)
    lowest, highest = query(
        connection,
        source,
        f"SELECT MIN({column}), MAX({column}) FROM {quote_identifier(database)}.{quote_identifier(table)}",
    )[0]
    if lowest is None or highest is None:
        return None
    boundaries = even_boundaries(int(lowest), int(highest), None if estimate is None else int(estimate), chunk_rows)
    if boundaries is None:
        log.info(
            "%s: about %s rows with keys %s..%s: chunk boundaries are read off the key's index",
            table_name,
            estimate,
            lowest,
            highest,
        )
    else:
        log.info(
            "%s: about %s rows with keys %s..%s: %s chunks of equal key width, planned without reading the table",
            table_name,
            estimate,
            lowest,
            highest,
            len(boundaries) + 1,
        )
    return boundaries


def _snapshotted_tables(store: FrontierStore, pipeline: str) -> set[str]:
    return {table for record in store.list_snapshots(pipeline) for table in record.tables}


def _handoff_window(store: FrontierStore, pipeline: str) -> int:
    """The first window the hand-off of a snapshot planned now must govern: the next one, or the last
    one while it is still unpublished (it will be captured after the snapshot)."""
    last = store.last_window(pipeline)
    if last is None:
        return 1
    return last.window_id if not last.is_published else last.window_id + 1


@dataclass(frozen=True)
class SnapshotChoice:
    """Which selected tables a run snapshots, and why."""

    #: Every table the run snapshots, in the selection's order: first snapshots and approved ones again.
    tables: list[str]
    #: ``db.table`` -> why, for each table with a snapshot that the run snapshots again.
    again: dict[str, str]
    #: ``db.table`` -> why, for each table that would be snapshotted again but was not approved.
    held: dict[str, str]


def choose_snapshot_tables(
    existing: Sequence[str],
    snapshotted: Set[str],
    pending_rebuilds: Mapping[str, str],
    resnapshot: Sequence[str],
    approved: Sequence[str] | None,
) -> SnapshotChoice:
    """Choose a run's tables among the selected ones that exist (``existing``): those never snapshotted,
    those waiting for a rebuild (``pending_rebuilds``, why) and those ``resnapshot`` names. With an
    approval step (``approved`` not None) a table that already has a snapshot is taken again only when
    approved; a first snapshot never needs approval (it replaces nothing)."""
    again_patterns = TableSelection.of(resnapshot) if resnapshot else None
    tables: list[str] = []
    again: dict[str, str] = {}
    held: dict[str, str] = {}
    for name in existing:
        if name not in snapshotted:
            tables.append(name)
            continue
        if name in pending_rebuilds:
            why = pending_rebuilds[name]
        elif again_patterns is not None and again_patterns.matches(*split_table_name(name)):
            why = "named in resnapshot"
        else:
            continue
        if approved is not None and name not in approved:
            held[name] = why
        else:
            tables.append(name)
            again[name] = why
    return SnapshotChoice(tables, again, held)


def snapshots_to_approve(
    request: SnapshotRequest, source: MySqlConnectionConfig, store: FrontierStore
) -> dict[str, str]:
    """``db.table`` -> why, for each table that already has a snapshot and that this run's plan would
    snapshot again (its target re-built): what an approval step in front of the plan asks about. Empty
    when the run's snapshot is already planned (a cleared run plans nothing new) or the pipeline is new."""
    if store.get_pipeline(request.pipeline) is None or store.snapshot_for_run(request.pipeline, request.run_id):
        return {}
    with connection_to(source) as connection:
        start_snapshot_session(connection, source)
        existing = selected_tables(connection, source, request.tables)
    choice = choose_snapshot_tables(
        existing,
        _snapshotted_tables(store, request.pipeline),
        _pending_rebuilds(request, store, existing),
        request.resnapshot,
        None,
    )
    return choice.again


def plan_snapshot(request: SnapshotRequest, source: MySqlConnectionConfig, store: FrontierStore) -> SnapshotPlan:
    """Decide and record the run's snapshot (once: a re-run returns the same chunks)."""
    earlier = store.snapshot_for_run(request.pipeline, request.run_id)
    unit = f"snapshot {earlier.snapshot_id if earlier else 'planning'} (run {request.run_id!r})"
    server = read_guarded_server(request.pipeline, unit, source, store, check_settings=True)
    staging = Staging(request.staging_uri, request.pipeline, request.object_store)
    with connection_to(source) as connection:
        start_snapshot_session(connection, source)
        snapshot = store.snapshot_for_run(request.pipeline, request.run_id)
        if snapshot is None:  # refused before anything is recorded
            staging.require_writable(staging.snapshot_attempts_dir())
            require_named_tables(connection, source, request.tables)
        registered = store.get_pipeline(request.pipeline)
        staging.require_registration(None if registered is None else registered.identity(), store.location)
        if registered is None:
            record = store.register_pipeline(request.pipeline, server.gtid_executed)
            staging.require_registration(record.identity(), store.location)
            log.info("pipeline %s registered with initial frontier %s", request.pipeline, record.initial_frontier)
        fresh_plans: dict[str, tuple[SnapshotChunk, ...]] = {}
        if snapshot is None:
            decided = _new_snapshot(request, connection, source, store, server)
            if decided is None:
                return SnapshotPlan(request.pipeline, None, (), ())
            snapshot, fresh_plans = decided
        record_snapshot_server(store, request.pipeline, snapshot.snapshot_id, server)
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
    server: ServerState,
) -> tuple[SnapshotRecord, dict[str, tuple[SnapshotChunk, ...]]] | None:
    gtid_executed = str(server.gtid_executed)
    existing = selected_tables(connection, source, request.tables)
    for pattern in request.resnapshot:
        if not any(TableSelection.of([pattern]).matches(*split_table_name(name)) for name in existing):
            raise ConfigurationError(
                f"resnapshot names {pattern!r}, which matches no selected table on the server "
                f"(selected: {', '.join(existing) or 'none'})"
            )
    choice = choose_snapshot_tables(
        existing,
        _snapshotted_tables(store, request.pipeline),
        _pending_rebuilds(request, store, existing),
        request.resnapshot,
        request.approved_rebuilds,
    )
    for name, why in choice.again.items():
        log.info("pipeline %s: %s is snapshotted again (%s)", request.pipeline, name, why)
    for name, why in choice.held.items():
        log.warning(
            "pipeline %s: %s is not snapshotted again (%s): the approval step did not approve it; its "
            "target stays as it is until a run's approval step does",
            request.pipeline,
            name,
            why,
        )
    tables = choice.tables
    if not tables:
        log.info("pipeline %s: every selected table has a snapshot; nothing to snapshot", request.pipeline)
        return None
    # Missing privileges and plans too big for Airflow's mapping are refused before anything is recorded.
    _require_snapshot_privileges(connection, source, tables)
    unreadable = _unreadable_tables(connection, source, tables, server.facts.unlogged_cascades)
    tables = [name for name in tables if name not in unreadable]
    if not tables:
        _leave_waiting(request, store, unreadable, gtid_executed)
        return None
    plans = {name: _plan_table(request, connection, source, name) for name in tables}
    total = sum(len(chunks) for chunks in plans.values())
    if total > request.max_chunks:
        largest = max(plans, key=lambda name: len(plans[name]))
        raise ConfigurationError(
            f"pipeline {request.pipeline!r}: the snapshot of {len(tables)} tables needs {total} chunks of "
            f"{request.chunk_rows} rows ({largest}: {len(plans[largest])}), more than max_chunks "
            f"{request.max_chunks} (Airflow's [core] max_map_length); raise chunk_rows to at least "
            f"{request.chunk_rows * -(-total // request.max_chunks)}"
        )
    _leave_waiting(request, store, unreadable, gtid_executed)
    record = store.plan_snapshot(request.pipeline, request.run_id, tables, _handoff_window(store, request.pipeline))
    log.info(
        "pipeline %s: snapshot %s of %s (capture hands off from window %s)",
        request.pipeline,
        record.snapshot_id,
        ", ".join(record.tables),
        record.handoff_window,
    )
    return record, plans


def _unreadable_tables(
    connection: pymysql.connections.Connection[Any],
    source: MySqlConnectionConfig,
    tables: Sequence[str],
    unlogged: str | None,
) -> dict[str, str]:
    """``db.table`` -> why, for each table whose columns cannot be staged (a column type or character set
    the provider has no conversion for), whose storage engine's rows its row events do not describe
    (``BLACKHOLE`` keeps none; a ``MERGE`` table shows its UNION's), or that is in a MERGE table's UNION
    (rows written through the MERGE table are logged as its own), or whose rows a foreign key's cascade
    changes on a server that does not log those changes (``unlogged``: why, or None). Those tables wait
    alone; the others are snapshotted."""
    engines = tables_in_unfollowable_engines(connection, source)
    members = merge_members(connection, source, engines)
    engine_of = {str(table): engine for table, engine in engines.items()}
    children = {str(table) for table in cascading_foreign_key_children(connection, source)} if unlogged else set()
    unreadable: dict[str, str] = {}
    for table_name in tables:
        if table_name in engine_of:
            unreadable[table_name] = unfollowable_engine_reason(table_name, engine_of[table_name])
        elif table_name in members:
            unreadable[table_name] = merge_member_reason(table_name, members[table_name])
        elif unlogged is not None and table_name in children:
            unreadable[table_name] = cascading_child_reason(table_name, unlogged)
    for table_name in [name for name in tables if name not in unreadable]:
        try:
            column_specs_from_information_schema(connection, source, *split_table_name(table_name))
        except (MySqlQueryError, ConfigurationError):
            raise
        except TerminalCdcError as exc:
            unreadable[table_name] = (
                f"{type(exc).__name__}: {exc}. Fix the table (for a character set: convert the column, for "
                "example to utf8mb4)"
            )
    return unreadable


def _leave_waiting(request: SnapshotRequest, store: FrontierStore, unreadable: Mapping[str, str], gtid: str) -> None:
    """Record each unreadable table as waiting for a rebuild from the hand-off window on. Capture does not
    stage its changes, the apply reports it, and a later snapshot takes it once it can be read."""
    handoff = _handoff_window(store, request.pipeline)
    for table_name, why in unreadable.items():
        retry = (
            "the next run's snapshot takes it"
            if request.schema_change_policy == SCHEMA_CHANGE_REBUILD
            else f"snapshot it again with resnapshot=[{table_name!r}]"
        )
        reason = (
            f"the snapshot of run {request.run_id!r} cannot read it ({why}). Its changes are not replicated "
            f"and the other tables go on. Once it can be read, {retry}"
        )
        log.warning("pipeline %s: %s is left out of the snapshot: %s", request.pipeline, table_name, reason)
        # Just before the hand-off window's first change: a later snapshot's tracked schema settles it.
        store.record_rebuild_request(request.pipeline, table_name, handoff - 1, cdc_seq(handoff, 0) - 1, gtid, reason)


def _pending_rebuilds(request: SnapshotRequest, store: FrontierStore, existing: Sequence[str]) -> dict[str, str]:
    """``db.table`` -> why, for the selected tables still on the server that a window left waiting for a
    rebuild (taken by this snapshot when the pipeline's policy is ``rebuild``)."""
    if request.schema_change_policy != SCHEMA_CHANGE_REBUILD:
        return {}
    pending = store.pending_rebuilds(request.pipeline, _handoff_window(store, request.pipeline))
    return {
        name: f"rebuild asked by window {r.window_id} (GTID {r.gtid}): {r.reason}"
        for name, r in pending.items()
        if name in existing
    }


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
        database, table = split_table_name(table_name)
        try:
            execute_statement(
                connection, source, f"SELECT 1 FROM {quote_identifier(database)}.{quote_identifier(table)} LIMIT 0"
            )
        except MySqlQueryError as exc:
            if exc.__cause__ is None or error_code(exc.__cause__) not in ER_ACCESS_DENIED_CODES:
                raise
            problems.append(f"SELECT on {table_name} (to read its rows)")
            fixes.append(f"GRANT SELECT ON {quote_identifier(database)}.{quote_identifier(table)} TO {account};")
    if not facts.grants.role_grants:
        databases = sorted(
            {
                table_name.partition(".")[0]
                for table_name in tables
                if not facts.grants.allows("LOCK TABLES", TableName(*split_table_name(table_name)))
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
    unique_key = find_unique_key(connection, source, table_name)
    key_columns = unique_key or _named_key_columns(table_name, request.key_columns)
    return plan_table_chunks(
        connection, source, table_name, key_columns, request.chunk_rows, unique_key=bool(unique_key)
    )
