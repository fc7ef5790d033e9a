"""The start of every snapshot planning and chunk: read the server once, and refuse one that does not fit
CDC or cannot continue the pipeline's history (no Airflow import)."""

from __future__ import annotations

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.mysql.introspection import require_settings_fit
from airflow_provider_mysql_cdc.mysql.server_state import ServerState, read_server_state
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from airflow_provider_mysql_cdc.store.server_history import SNAPSHOT_OBSERVATION, require_server_continues


def read_guarded_server(
    pipeline: str, unit: str, source: MySqlConnectionConfig, store: FrontierStore, *, check_settings: bool
) -> ServerState:
    """The server as this snapshot task finds it, read once (``unit`` names the task in messages). Raises
    the preflight's :class:`~airflow_provider_mysql_cdc.errors.PreflightFailedError` (when
    ``check_settings``) and a :class:`~airflow_provider_mysql_cdc.errors.ServerHistoryError` for a server
    that cannot continue the pipeline (:mod:`airflow_provider_mysql_cdc.core.topology`): a snapshot of
    a server that lacks transactions the pipeline's capture frontier holds would hand off to a binlog
    that never sends them. Nothing is recorded then."""
    last = store.last_server_observation(pipeline)
    server = read_server_state(source, known_binlogs=() if last is None else last.observation.binlog_files)
    if check_settings:
        require_settings_fit(server.facts)
    require_server_continues(store, pipeline, unit, server.observation)
    return server


def record_snapshot_server(store: FrontierStore, pipeline: str, ref: str, server: ServerState) -> None:
    """Record what a snapshot's planning (``ref``: the snapshot id) or chunk (``<id>:<db.table>:<chunk no>``)
    saw of its server."""
    store.record_server_observation(pipeline, SNAPSHOT_OBSERVATION, ref, server.observation)
