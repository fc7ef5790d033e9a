"""The server side of the metadata tables: what each run saw of the server it read
(``cdc_server_observations``), and the guard that compares the next run with it
(:mod:`airflow_provider_mysql_cdc.core.topology`). Mixed into
:class:`~airflow_provider_mysql_cdc.store.frontier_store.FrontierStore`."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.topology import RecordedObservation, ServerObservation, history_problem
from airflow_provider_mysql_cdc.errors import ServerHistoryError
from airflow_provider_mysql_cdc.store.tables import server_observations_table

if TYPE_CHECKING:
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, PipelineRecord, SnapshotChunkRecord

#: ``cdc_server_observations.kind`` of a capture's observation (``ref`` is the window id).
WINDOW_OBSERVATION = "window"
#: ``cdc_server_observations.kind`` of a snapshot's planning or chunk (``ref`` names it).
SNAPSHOT_OBSERVATION = "snapshot"


def _unit(kind: str, ref: str) -> str:
    if kind == WINDOW_OBSERVATION:
        return f"window {ref}"
    snapshot_id, _, chunk = ref.partition(":")
    if not chunk:
        return f"snapshot {snapshot_id}"
    table, _, number = chunk.rpartition(":")
    return f"snapshot {snapshot_id} ({table} chunk {number})"


def _stored_set(text: str | None) -> GtidSet | None:
    """A stored GTID set; None for a missing or unreadable value (an observation is evidence, not progress:
    a damaged one is ignored rather than stopping the pipeline)."""
    if text is None:
        return None
    try:
        return GtidSet.parse(text)
    except ValueError:
        return None


def _observation_from_row(row: Any) -> RecordedObservation | None:
    executed, purged = _stored_set(row.gtid_executed), _stored_set(row.gtid_purged)
    if executed is None or purged is None:
        return None
    files = tuple(dict.fromkeys(name for name in (row.first_binlog, row.last_binlog) if name))
    marks = ((row.first_binlog, row.first_binlog_created_us), (row.last_binlog, row.last_binlog_created_us))
    created = {name: int(moment) for name, moment in marks if name and moment is not None}
    observed_at = row.observed_at if row.observed_at.tzinfo is not None else row.observed_at.replace(tzinfo=UTC)
    return RecordedObservation(
        unit=_unit(row.kind, row.ref),
        observed_at=observed_at,
        observation=ServerObservation(
            address=row.address,
            server_uuid=row.server_uuid,
            gtid_executed=executed,
            gtid_purged=purged,
            binlog_files=files,
            first_binlog_previous_gtids=_stored_set(row.first_binlog_previous_gtids),
            binlog_created_us=created,
        ),
    )


class ServerObservations:
    """What runs saw of their server (needs ``_transaction``)."""

    def _transaction(self) -> AbstractContextManager[Connection]:  # provided by FrontierStore
        raise NotImplementedError

    def get_pipeline(self, pipeline: str) -> PipelineRecord | None:  # provided by FrontierStore
        raise NotImplementedError

    def snapshot_chunks(self, pipeline: str, table_name: str | None = None) -> list[SnapshotChunkRecord]:
        raise NotImplementedError  # provided by FrontierStore

    def record_server_observation(self, pipeline: str, kind: str, ref: str, observation: ServerObservation) -> None:
        """Append what a run (``kind`` ``window`` or ``snapshot``, ``ref`` its id) saw of its server."""
        first, last = observation.first_binlog, observation.last_binlog
        previous = observation.first_binlog_previous_gtids
        with self._transaction() as connection:
            connection.execute(
                server_observations_table.insert().values(
                    pipeline=pipeline,
                    kind=kind,
                    ref=ref,
                    address=observation.address,
                    server_uuid=observation.server_uuid,
                    gtid_executed=str(observation.gtid_executed),
                    gtid_purged=str(observation.gtid_purged),
                    first_binlog=first,
                    first_binlog_previous_gtids=None if previous is None else str(previous),
                    first_binlog_created_us=None if first is None else observation.binlog_created_us.get(first),
                    last_binlog=last,
                    last_binlog_created_us=None if last is None else observation.binlog_created_us.get(last),
                    observed_at=datetime.now(UTC),
                )
            )

    def server_observations(self, pipeline: str) -> list[RecordedObservation]:
        """Every readable observation of the pipeline, oldest first."""
        columns = server_observations_table.c
        with self._transaction() as connection:
            rows = connection.execute(
                sa.select(server_observations_table).where(columns.pipeline == pipeline).order_by(columns.id)
            ).all()
        return [recorded for recorded in map(_observation_from_row, rows) if recorded is not None]

    def last_server_observation(self, pipeline: str, server_uuid: str | None = None) -> RecordedObservation | None:
        """The newest readable observation of the pipeline (of one ``server_uuid`` when given), or None."""
        columns = server_observations_table.c
        select = sa.select(server_observations_table).where(columns.pipeline == pipeline)
        if server_uuid is not None:
            select = select.where(columns.server_uuid == server_uuid)
        with self._transaction() as connection:
            rows = connection.execute(select.order_by(columns.id.desc()).limit(20)).all()
        return next((recorded for recorded in map(_observation_from_row, rows) if recorded is not None), None)

    def server_history_problem(self, pipeline: str, unit: str, server: ServerObservation) -> ServerHistoryError | None:
        """The guard of :mod:`~airflow_provider_mysql_cdc.core.topology` for ``pipeline`` on ``server``
        (``unit`` names the run in messages): its capture frontier, its snapshots' frontiers and its
        recorded observations; None when the server may continue it."""
        record = self.get_pipeline(pipeline)
        if record is None:
            return None  # nothing captured or snapshotted yet: any server may start it
        return history_problem(
            pipeline,
            unit,
            server,
            capture_frontier=record.capture_frontier,
            snapshot_frontiers=_current_snapshot_frontiers(self.snapshot_chunks(pipeline)),
            last=self.last_server_observation(pipeline),
            last_on_server=self.last_server_observation(pipeline, server.server_uuid),
        )


def _current_snapshot_frontiers(chunks: Iterable[SnapshotChunkRecord]) -> GtidSet:
    """The union of the finished chunks' frontiers of each table's newest snapshot that has any (an older
    snapshot of a table is superseded: its target is reloaded from the newer one)."""
    newest: dict[str, tuple[str, GtidSet]] = {}
    for chunk in chunks:
        if chunk.frontier is None:
            continue
        held = newest.get(chunk.table_name)
        if held is None or chunk.snapshot_id > held[0]:
            newest[chunk.table_name] = (chunk.snapshot_id, chunk.frontier)
        elif chunk.snapshot_id == held[0]:
            newest[chunk.table_name] = (held[0], held[1] | chunk.frontier)
    frontiers = GtidSet()
    for _, frontier in newest.values():
        frontiers = frontiers | frontier
    return frontiers


def require_server_continues(store: FrontierStore, pipeline: str, unit: str, server: ServerObservation) -> None:
    """Raise :meth:`ServerObservations.server_history_problem`'s error (a :class:`ServerHistoryError`), if
    there is one."""
    problem = store.server_history_problem(pipeline, unit, server)
    if problem is not None:
        raise problem
