"""The schema side of the metadata tables: schema versions, DDL history, each table's tracked schema
(columns with identities) and the tables waiting for a rebuild. Mixed into
:class:`~airflow_provider_mysql_cdc.store.frontier_store.FrontierStore`."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from airflow_provider_mysql_cdc.errors import FrontierConflictError
from airflow_provider_mysql_cdc.store.tables import (
    ddl_history_table,
    rebuild_requests_table,
    schema_history_table,
    tracked_schemas_table,
)


@dataclass(frozen=True)
class TrackedSchemaRecord:
    """A table's tracked schema from ``(window_id, seq)`` on (``schema`` None: the table was dropped)."""

    table_name: str
    window_id: int
    seq: int
    source: str
    schema: str | None


@dataclass(frozen=True)
class RebuildRequest:
    """A table that window ``window_id`` left waiting for a fresh snapshot, and why."""

    table_name: str
    window_id: int
    seq: int
    gtid: str
    reason: str


def _now() -> datetime:
    return datetime.now(UTC)


class SchemaRecords:
    """Schema versions, DDL history, tracked schemas and rebuild requests (needs ``_transaction``)."""

    def _transaction(self) -> AbstractContextManager[Connection]:  # provided by FrontierStore
        raise NotImplementedError

    def schema_version(
        self, pipeline: str, table_name: str, fingerprint: str, columns: list[dict[str, Any]], gtid: str | None
    ) -> int:
        """The version number of a table schema (by fingerprint), assigning the next one on first sight.

        Parallel snapshot chunks of a new table meet the same schema at once: when another writer
        recorded it first, its number is returned; only a different schema taking the same number
        concurrently raises :class:`FrontierConflictError` (retry).
        """
        select = sa.select(schema_history_table.c.schema_version).where(
            schema_history_table.c.pipeline == pipeline,
            schema_history_table.c.table_name == table_name,
            schema_history_table.c.fingerprint == fingerprint,
        )
        try:
            with self._transaction() as connection:
                version = connection.execute(select).scalar()
                if version is not None:
                    return int(version)
                latest = connection.execute(
                    sa.select(sa.func.max(schema_history_table.c.schema_version)).where(
                        schema_history_table.c.pipeline == pipeline, schema_history_table.c.table_name == table_name
                    )
                ).scalar()
                new_version = int(latest or 0) + 1
                connection.execute(
                    schema_history_table.insert().values(
                        pipeline=pipeline,
                        table_name=table_name,
                        schema_version=new_version,
                        fingerprint=fingerprint,
                        columns=json.dumps(columns, sort_keys=True),
                        gtid=gtid,
                        recorded_at=_now(),
                    )
                )
        except (sa.exc.IntegrityError, sa.exc.OperationalError) as exc:
            with self._transaction() as connection:
                version = connection.execute(select).scalar()
            if version is not None:
                return int(version)
            raise FrontierConflictError(
                f"pipeline {pipeline!r}: another schema of {table_name} was recorded concurrently "
                f"({type(exc).__name__}); retry"
            ) from None
        return new_version

    def record_ddl(self, pipeline: str, gtid: str, database: str, statement: str, window_id: int) -> None:
        """Record a DDL statement seen in the binlog (once per GTID)."""
        with self._transaction() as connection:
            exists = connection.execute(
                sa.select(ddl_history_table.c.gtid).where(
                    ddl_history_table.c.pipeline == pipeline, ddl_history_table.c.gtid == gtid
                )
            ).first()
            if exists is None:
                connection.execute(
                    ddl_history_table.insert().values(
                        pipeline=pipeline,
                        gtid=gtid,
                        database_name=database,
                        statement=statement,
                        window_id=window_id,
                        recorded_at=_now(),
                    )
                )

    def ddl_history(self, pipeline: str) -> list[dict[str, Any]]:
        """DDL statements recorded for the pipeline, in recording order."""
        with self._transaction() as connection:
            rows = connection.execute(
                sa.select(ddl_history_table)
                .where(ddl_history_table.c.pipeline == pipeline)
                .order_by(ddl_history_table.c.window_id, ddl_history_table.c.recorded_at)
            ).all()
        return [dict(row._mapping) for row in rows]

    # -- tracked schemas ------------------------------------------------------------------------

    def tracked_schemas_before(self, pipeline: str, window_id: int) -> dict[str, TrackedSchemaRecord]:
        """Each table's tracked schema at the start of window ``window_id``: the last record before
        ``(window_id, 0)`` (a snapshot whose hand-off is this window recorded at ``(window_id, -1)``)."""
        columns = tracked_schemas_table.c
        with self._transaction() as connection:
            rows = connection.execute(
                sa.select(tracked_schemas_table).where(
                    columns.pipeline == pipeline,
                    sa.or_(columns.window_id < window_id, sa.and_(columns.window_id == window_id, columns.seq < 0)),
                )
            ).all()
        latest: dict[str, TrackedSchemaRecord] = {}
        for row in sorted(rows, key=lambda row: (row.window_id, row.seq)):
            latest[row.table_name] = TrackedSchemaRecord(row.table_name, row.window_id, row.seq, row.source, row.schema)
        return latest

    def record_tracked_schema(
        self, pipeline: str, table_name: str, window_id: int, seq: int, source: str, schema: str | None
    ) -> None:
        """Record a table's tracked schema from ``(window_id, seq)`` on (replacing a record of that point)."""
        columns = tracked_schemas_table.c
        where = (
            columns.pipeline == pipeline,
            columns.table_name == table_name,
            columns.window_id == window_id,
            columns.seq == seq,
        )
        with self._transaction() as connection:
            connection.execute(tracked_schemas_table.delete().where(*where))
            connection.execute(
                tracked_schemas_table.insert().values(
                    pipeline=pipeline,
                    table_name=table_name,
                    window_id=window_id,
                    seq=seq,
                    source=source,
                    schema=schema,
                    recorded_at=_now(),
                )
            )

    def forget_captured_schemas(self, pipeline: str, from_window: int) -> None:
        """Delete what captures of windows from ``from_window`` on recorded (tracked schemas and rebuild
        requests): an unpublished window is re-read from its start. Snapshot records stay."""
        with self._transaction() as connection:
            connection.execute(
                tracked_schemas_table.delete().where(
                    tracked_schemas_table.c.pipeline == pipeline,
                    tracked_schemas_table.c.window_id >= from_window,
                    tracked_schemas_table.c.seq >= 0,
                )
            )
            connection.execute(
                rebuild_requests_table.delete().where(
                    rebuild_requests_table.c.pipeline == pipeline, rebuild_requests_table.c.window_id >= from_window
                )
            )

    # -- rebuild requests -----------------------------------------------------------------------

    def record_rebuild_request(
        self, pipeline: str, table_name: str, window_id: int, seq: int, gtid: str, reason: str
    ) -> None:
        """Record that window ``window_id`` left ``table_name`` waiting for a fresh snapshot (once per window)."""
        columns = rebuild_requests_table.c
        with self._transaction() as connection:
            exists = connection.execute(
                sa.select(columns.seq).where(
                    columns.pipeline == pipeline, columns.table_name == table_name, columns.window_id == window_id
                )
            ).first()
            if exists is None:
                connection.execute(
                    rebuild_requests_table.insert().values(
                        pipeline=pipeline,
                        table_name=table_name,
                        window_id=window_id,
                        seq=seq,
                        gtid=gtid,
                        reason=reason,
                        recorded_at=_now(),
                    )
                )

    def pending_rebuilds(self, pipeline: str, window_id: int) -> dict[str, RebuildRequest]:
        """``db.table`` -> the request of each table still waiting for a rebuild when window
        ``window_id`` starts. A request is settled by anything that gave the table a new tracked schema
        after it: a snapshot whose hand-off comes later, a CREATE of a new table under the name, its DROP."""
        latest = self.tracked_schemas_before(pipeline, window_id)
        pending: dict[str, RebuildRequest] = {}
        for request in self.rebuild_requests(pipeline):
            if request.window_id >= window_id:
                continue
            last = latest.get(request.table_name)
            if last is None or (last.window_id, last.seq) <= (request.window_id, request.seq):
                pending[request.table_name] = request
        return pending

    def forget_rebuild_request(self, pipeline: str, table_name: str, window_id: int) -> None:
        """Delete window ``window_id``'s rebuild request of a table (a later statement of the same window
        made it moot: the table was dropped, renamed away or created anew)."""
        columns = rebuild_requests_table.c
        with self._transaction() as connection:
            connection.execute(
                rebuild_requests_table.delete().where(
                    columns.pipeline == pipeline, columns.table_name == table_name, columns.window_id == window_id
                )
            )

    def rebuild_requests(self, pipeline: str) -> list[RebuildRequest]:
        """Every rebuild request of the pipeline, oldest window first."""
        columns = rebuild_requests_table.c
        with self._transaction() as connection:
            rows = connection.execute(
                sa.select(rebuild_requests_table)
                .where(columns.pipeline == pipeline)
                .order_by(columns.window_id, columns.table_name)
            ).all()
        return [RebuildRequest(row.table_name, row.window_id, row.seq, row.gtid, row.reason) for row in rows]
