"""The start of every capture: read the server once, and refuse one that does not fit CDC or cannot
continue the pipeline's history (no Airflow import)."""

from __future__ import annotations

from airflow_provider_mysql_cdc.capture.request import CaptureRequest
from airflow_provider_mysql_cdc.capture.window_planning import existing_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.mysql.introspection import require_settings_fit
from airflow_provider_mysql_cdc.mysql.server_state import ServerState, read_server_state
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowRecord
from airflow_provider_mysql_cdc.store.server_history import WINDOW_OBSERVATION, require_server_continues


def _window_unit(request: CaptureRequest, store: FrontierStore) -> str:
    """``window 7 (run 'scheduled__...')`` for messages, before the window is planned."""
    existing = existing_window(request, store)
    if existing is not None:
        return f"window {existing.window_id} (run {request.run_id!r})"
    last = store.last_window(request.pipeline)
    return f"window {1 if last is None else last.window_id + 1} (run {request.run_id!r})"


def read_guarded_server(request: CaptureRequest, source: MySqlConnectionConfig, store: FrontierStore) -> ServerState:
    """The server as this capture finds it, read once. Raises the preflight's
    :class:`~airflow_provider_mysql_cdc.errors.PreflightFailedError` for settings that do not fit CDC
    and a :class:`~airflow_provider_mysql_cdc.errors.ServerHistoryError` for a server that cannot
    continue the pipeline (:mod:`airflow_provider_mysql_cdc.core.topology`); nothing is recorded then."""
    last = store.last_server_observation(request.pipeline)
    server = read_server_state(source, known_binlogs=() if last is None else last.observation.binlog_files)
    require_settings_fit(server.facts)
    require_server_continues(store, request.pipeline, _window_unit(request, store), server.observation)
    return server


def record_window_server(store: FrontierStore, window: WindowRecord, server: ServerState) -> None:
    """Record what the window's capture saw of its server (the next run's guard compares with it)."""
    store.record_server_observation(window.pipeline, WINDOW_OBSERVATION, str(window.window_id), server.observation)
