"""The snapshot -> binlog hand-off: which row events a window must skip because a snapshot holds them.

A snapshot chunk read the rows of its key range as of its frontier ``S``. A window governed by that
snapshot (window id >= the snapshot's ``handoff_window``) skips the row events of the chunk's key
range whose GTID is in ``S``; every other event is staged. A row whose key moves from one chunk to
another is judged as a delete of the old key and an insert of the new one, each by its own chunk.

Most events are decided by the GTID alone: a GTID in every chunk's frontier is skipped, one in none
is staged. Only transactions committed while the snapshot ran need the key's chunk: Python finds it
for numbers, dates and bytes; for a string key that a boundary does not decide in Python (collations)
the server is asked, with the key column's own collation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pymysql.connections import Connection

from airflow_provider_mysql_cdc.core.chunks import (
    Key,
    KeyRange,
    SnapshotChunk,
    chunk_of,
    quote_identifier,
    range_predicate,
)
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.errors import SnapshotInProgressError
from airflow_provider_mysql_cdc.mysql.client import connect, query
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableHandoff:
    """One table's finished snapshot as a window sees it."""

    database: str
    table: str
    snapshot_id: str
    key_columns: tuple[str, ...]
    ranges: tuple[KeyRange, ...]
    frontiers: tuple[GtidSet, ...]
    #: GTIDs in every chunk's frontier (always skipped) and in at least one (maybe skipped).
    in_every_chunk: GtidSet
    in_some_chunk: GtidSet

    @classmethod
    def of(cls, snapshot_id: str, chunks: Sequence[SnapshotChunk], frontiers: Sequence[GtidSet]) -> TableHandoff:
        """The hand-off of a table's chunks (in chunk order) and their frontiers."""
        every, some = frontiers[0], frontiers[0]
        for frontier in frontiers[1:]:
            every, some = every & frontier, some | frontier
        first = chunks[0]
        return cls(
            first.database,
            first.table,
            snapshot_id,
            first.key_columns,
            tuple(chunk.key_range for chunk in chunks),
            tuple(frontiers),
            every,
            some,
        )

    def by_gtid(self, gtid: Gtid) -> bool | None:
        """True: skip the transaction's rows of this table; False: stage them; None: depends on each key."""
        if gtid in self.in_every_chunk:
            return True
        if gtid not in self.in_some_chunk:
            return False
        return None

    def chunk_in_python(self, key: Key) -> int | None:
        """The chunk holding ``key``, or None when only the server can tell (string collations)."""
        return 0 if len(self.ranges) == 1 else chunk_of(self.ranges, key)


class HandoffRules:
    """The hand-offs a window applies, with a lazily opened connection for the server's comparisons."""

    def __init__(
        self,
        handoffs: dict[tuple[str, str], TableHandoff],
        source: MySqlConnectionConfig,
        covered: dict[str, GtidSet] | None = None,
        governing: dict[str, str] | None = None,
    ) -> None:
        self.handoffs = handoffs
        self.source = source
        #: For every ``db.table`` a snapshot governs: the GTIDs all of its chunks hold.
        self.covered = covered or {}
        #: For every ``db.table`` a snapshot governs: that snapshot's id (recorded in the manifest).
        self.governing = governing or {}
        self._connection: Connection[Any] | None = None
        self._collations: dict[tuple[str, str], list[tuple[str | None, str | None]]] = {}
        self.server_lookups = 0

    def __bool__(self) -> bool:
        return bool(self.handoffs)

    def get(self, database: str, table: str) -> TableHandoff | None:
        """The table's hand-off, if a snapshot governs it in this window."""
        return self.handoffs.get((database, table))

    def skips(self, handoff: TableHandoff, gtid: Gtid, key: Key) -> bool:
        """Whether the change of ``key`` in transaction ``gtid`` is already in the snapshot."""
        chunk = handoff.chunk_in_python(key)
        if chunk is None:
            chunk = self._chunk_on_server(handoff, key)
        return gtid in handoff.frontiers[chunk]

    def _chunk_on_server(self, handoff: TableHandoff, key: Key) -> int:
        if self._connection is None:
            self._connection = connect(self.source)
        table = (handoff.database, handoff.table)
        if table not in self._collations:
            self._collations[table] = self._key_collations(handoff)
        values = []
        params: list[Any] = []
        for column, value, (charset, collation) in zip(handoff.key_columns, key, self._collations[table], strict=True):
            alias = quote_identifier(column).replace("%", "%%")
            if isinstance(value, str) and charset and collation:
                values.append(f"CONVERT(%s USING {charset}) COLLATE {collation} AS {alias}")
            else:
                values.append(f"%s AS {alias}")
            params.append(value)
        checks = []
        check_params: list[Any] = []
        for key_range in handoff.ranges[1:]:
            predicate, predicate_params = range_predicate(handoff.key_columns, KeyRange(lower=key_range.lower))
            checks.append(f"({predicate})")
            check_params.extend(predicate_params)
        # The number of lower bounds at or below the key is the key's chunk.
        sql = f"SELECT {' + '.join(checks)} FROM (SELECT {', '.join(values)}) AS `_cdc_key`"
        with self._connection.cursor() as cursor:
            cursor.execute(sql, check_params + params)
            row = cursor.fetchone()
        self.server_lookups += 1
        return int(row[0]) if row else 0

    def _key_collations(self, handoff: TableHandoff) -> list[tuple[str | None, str | None]]:
        assert self._connection is not None
        rows = query(
            self._connection,
            self.source,
            "SELECT COLUMN_NAME, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
            f"WHERE TABLE_SCHEMA = {self._connection.escape(handoff.database)} "
            f"AND TABLE_NAME = {self._connection.escape(handoff.table)}",
        )
        by_name = {str(name): (charset, collation) for name, charset, collation in rows}
        return [by_name.get(column, (None, None)) for column in handoff.key_columns]

    def close(self) -> None:
        """Close the comparison connection, if one was opened."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def load_handoffs(
    store: FrontierStore, pipeline: str, window_id: int, lower: GtidSet, source: MySqlConnectionConfig
) -> HandoffRules:
    """The hand-offs governing window ``window_id`` (lower bound ``lower``) of a pipeline.

    For each table, the latest snapshot whose ``handoff_window`` is at most ``window_id`` governs;
    tables whose chunk frontiers are all inside ``lower`` need no skipping and are left out.
    Raises :class:`SnapshotInProgressError` when a governing snapshot is not finished.
    """
    governing: dict[str, str] = {}
    for snapshot in store.list_snapshots(pipeline):
        if snapshot.handoff_window <= window_id:
            for table_name in snapshot.tables:
                governing[table_name] = snapshot.snapshot_id
    handoffs: dict[tuple[str, str], TableHandoff] = {}
    covered: dict[str, GtidSet] = {}
    for table_name, snapshot_id in sorted(governing.items()):
        records = [r for r in store.snapshot_chunks(pipeline, table_name) if r.snapshot_id == snapshot_id]
        unfinished = [r.chunk_no for r in records if not r.is_finished]
        if not records or unfinished:
            raise SnapshotInProgressError(
                f"pipeline {pipeline!r}: snapshot {snapshot_id} of {table_name} is not finished "
                f"({len(unfinished) if records else 'no'} chunks left{'' if records else ' planned'}); window "
                f"{window_id} needs it to know which changes the snapshot already holds. Run (or re-run) the "
                "snapshot tasks of that run first, then retry the capture"
            )
        frontiers = [r.frontier for r in records]
        assert all(f is not None for f in frontiers)
        handoff = TableHandoff.of(
            snapshot_id,
            [SnapshotChunk.from_json(json.loads(r.chunk)) for r in records],
            [f for f in frontiers if f is not None],
        )
        covered[table_name] = handoff.in_every_chunk
        if handoff.in_some_chunk <= lower:
            continue  # the window starts after every chunk's frontier: nothing of it can be skipped
        handoffs[(handoff.database, handoff.table)] = handoff
        log.info("window %s skips what snapshot %s of %s holds", window_id, snapshot_id, table_name)
    return HandoffRules(handoffs, source, covered, governing)
