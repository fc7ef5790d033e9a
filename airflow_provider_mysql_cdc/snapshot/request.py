"""What a snapshot run is asked for (:class:`SnapshotRequest`) and what it produces (:class:`SnapshotPlan`,
:class:`ChunkResult`), with the helpers planning and chunk reading share. No Airflow import."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings
from airflow_provider_mysql_cdc.core.schema_events import SCHEMA_CHANGE_REBUILD, require_schema_change_policy
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.decoding.text_rows import SNAPSHOT_SESSION_STATEMENTS
from airflow_provider_mysql_cdc.errors import ConfigurationError, MySqlQueryError
from airflow_provider_mysql_cdc.mysql.client import error_code, error_text, query
from airflow_provider_mysql_cdc.snapshot.defaults import (
    DEFAULT_CHUNK_ROWS,
    DEFAULT_FETCH_ROWS,
    DEFAULT_LOCK_WAIT_TIMEOUT_SECONDS,
)
from airflow_provider_mysql_cdc.snapshot.fast_reader import FETCH_BYTES
from airflow_provider_mysql_cdc.staging import DEFAULT_ROW_GROUP_BYTES

#: Most chunks one snapshot may have by default (Airflow's ``[core] max_map_length``).
DEFAULT_MAX_CHUNKS = 1024


#: MySQL's errors for a privilege the account lacks.
ER_ACCESS_DENIED_CODES = (1044, 1142, 1227)


@dataclass(frozen=True)
class SnapshotRequest:
    """What to snapshot, where to stage it and how to split it."""

    pipeline: str
    run_id: str
    staging_uri: str
    tables: TableSelection = field(default_factory=TableSelection)
    #: ``db.table`` names (or ``fnmatch`` patterns) to snapshot again even though they were before.
    resnapshot: tuple[str, ...] = ()
    #: Columns that cut a table without a primary key or unique NOT NULL key into chunks:
    #: ``{"db.table": ["a", "b"]}``. They need not identify rows (such a table is a multiset of rows).
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
    #: Tables a human approved snapshotting again (an approval step in front of the plan): a table that
    #: already has a snapshot is snapshotted again only when named here; the others it would take (a
    #: pending rebuild, a ``resnapshot``) are held. None: no approval step, every one is taken.
    approved_rebuilds: tuple[str, ...] | None = None
    #: How to reach the object store ``staging_uri`` is in (None: pyarrow's defaults; holds a secret key,
    #: which its repr leaves out).
    object_store: ObjectStoreSettings | None = None

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


def start_snapshot_session(connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig) -> None:
    """Set the session variables every snapshot connection reads with (time zone, sql_mode, ...)."""
    for statement in SNAPSHOT_SESSION_STATEMENTS:
        query(connection, source, statement)


def split_table_name(table_name: str) -> tuple[str, str]:
    """``db.table`` -> (``db``, ``table``)."""
    database, _, table = table_name.partition(".")
    return database, table


def execute_statement(connection: pymysql.connections.Connection[Any], source: MySqlConnectionConfig, sql: str) -> None:
    """Run one statement; a server error becomes :class:`~airflow_provider_mysql_cdc.errors.MySqlQueryError`."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    except pymysql.err.MySQLError as exc:
        raise MySqlQueryError(
            f"{sql!r} failed on {source.address}: [{error_code(exc)}] {error_text(exc, source)}"
        ) from exc
