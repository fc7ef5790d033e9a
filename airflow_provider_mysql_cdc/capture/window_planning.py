"""Which window a capture run reads: found again for re-runs and clears, or planned once, and where it
ends (no Airflow import)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_provider_mysql_cdc.capture.request import CaptureRequest
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, WindowBound, to_epoch_us
from airflow_provider_mysql_cdc.errors import FrontierNotOnServerError, WindowNotClosedError, WindowOrderError
from airflow_provider_mysql_cdc.mysql.client import connection_to
from airflow_provider_mysql_cdc.mysql.introspection import (
    require_named_tables,
)
from airflow_provider_mysql_cdc.mysql.server_state import ServerState
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowRecord

log = logging.getLogger(__name__)


def interval_already_covered(
    interval_end: datetime, registered_at: datetime | None, windows: Sequence[WindowRecord]
) -> str | None:
    """Why a ``data_interval`` run ending at ``interval_end`` has nothing left to capture, or None.

    Its transactions are then either older than the pipeline (its snapshots hold them) or already in a
    window whose cut-off is at or after ``interval_end`` (a backfill of a range that later runs
    captured). A ``catch_up`` window reaches the moment it was planned.
    """
    if registered_at is not None and interval_end <= registered_at:
        return (
            f"the interval ends at {interval_end.isoformat()}, before the pipeline was registered at "
            f"{registered_at.isoformat()}: its changes are older than the pipeline's initial frontier "
            "(the snapshots hold them), so there is nothing to capture"
        )
    for window in reversed(windows):
        if window.cutoff_rule == CutoffRule.DATA_INTERVAL.value:
            reach: datetime | None = datetime.fromisoformat(window.cutoff_value)
        else:
            reach = window.planned_at
        if reach is not None and interval_end <= reach:
            return (
                f"the interval ends at {interval_end.isoformat()}, but window {window.window_id} (run "
                f"{window.run_id!r}) already captured everything committed before {reach.isoformat()}: "
                "there is nothing left to capture"
            )
    return None


def covered_run(request: CaptureRequest, store: FrontierStore) -> dict[str, Any] | None:
    """The XCom of a ``data_interval`` run that has nothing to capture (see
    :func:`interval_already_covered`), or None when the run has or gets a window. A run that already
    owns a window (a clear) and a pipeline's first window (it carries the first snapshots' hand-off,
    even when empty) are never covered."""
    pipeline = store.get_pipeline(request.pipeline)
    if request.cutoff is not CutoffRule.DATA_INTERVAL or pipeline is None:
        return None
    if existing_window(request, store) is not None:
        return None
    windows = store.list_windows(request.pipeline)
    assert request.data_interval_end is not None
    reason = (
        interval_already_covered(request.data_interval_end.astimezone(UTC), pipeline.registered_at, windows)
        if windows
        else None
    )
    if reason is None:
        return None
    frontier = str(pipeline.capture_frontier)
    return {
        "pipeline": request.pipeline,
        "window_id": None,
        "covered": reason,
        "lower": frontier,
        "upper": frontier,
        "manifest_uri": None,
        "transactions": 0,
        "rows_by_op": {},
        "rows_by_table": {},
        "reused_published": False,
        "last_commit_ts_us": None,
    }


def existing_window(request: CaptureRequest, store: FrontierStore) -> WindowRecord | None:
    """The window this run already owns (a clear, a retry), or the one captured for the same data
    interval by another run (``airflow dags test`` of the same date again, a re-run backfill)."""
    owned = store.window_for_run(request.pipeline, request.run_id)
    if owned is not None or request.cutoff is not CutoffRule.DATA_INTERVAL:
        return owned
    assert request.data_interval_end is not None
    cutoff_value = request.data_interval_end.astimezone(UTC).isoformat()
    same_interval = store.window_for_cutoff(request.pipeline, request.cutoff.value, cutoff_value)
    if same_interval is not None:
        log.info(
            "run %s: window %s (first captured by run %s) holds the same interval, ending %s",
            request.run_id,
            same_interval.window_id,
            same_interval.run_id,
            cutoff_value,
        )
    return same_interval


def plan_window(
    request: CaptureRequest, store: FrontierStore, source: MySqlConnectionConfig, staging: Staging, server: ServerState
) -> WindowRecord:
    """Find the run's window (see :func:`existing_window`), or plan the next one (written once); ``server``
    is the server as the run found it (a ``catch_up`` window ends at its ``gtid_executed``)."""
    existing = existing_window(request, store)
    if existing is not None:
        return existing
    # Inputs that would make the new window useless are refused before anything is recorded.
    staging.require_writable(staging.window_attempts_dir())
    with connection_to(source) as connection:
        require_named_tables(connection, source, request.tables)
    pipeline = store.get_pipeline(request.pipeline)
    staging.require_registration(None if pipeline is None else pipeline.identity(), store.location)
    if pipeline is None:
        initial = request.initial_frontier
        if initial is None:
            initial = server.gtid_executed
        pipeline = store.register_pipeline(request.pipeline, initial)
        staging.require_registration(pipeline.identity(), store.location)
        log.info("pipeline %s registered with initial frontier %s", request.pipeline, pipeline.initial_frontier)
    last = store.last_window(request.pipeline)
    if last is not None and not last.is_published:
        raise WindowOrderError(
            f"pipeline {request.pipeline!r}: window {last.window_id} (run {last.run_id!r}) is not published yet; "
            "re-run that run's capture first (windows are captured in order)"
        )
    lower = last.upper if last is not None and last.upper is not None else pipeline.initial_frontier
    window_id = last.window_id + 1 if last is not None else 1
    if request.cutoff is CutoffRule.CATCH_UP:
        upper = server.gtid_executed if request.upper_bound is None else request.upper_bound
        if not upper <= server.gtid_executed:
            raise FrontierNotOnServerError(
                f"pipeline {request.pipeline!r}: the requested upper bound {upper} holds transactions the server "
                f"has not executed ({upper - server.gtid_executed}); point at the server the bound was read from",
                missing_gtids=str(upper - server.gtid_executed),
            )
        cutoff_value = str(upper | lower)
    else:
        assert request.data_interval_end is not None
        cutoff_value = request.data_interval_end.astimezone(UTC).isoformat()
    window = store.plan_window(request.pipeline, window_id, request.run_id, lower, request.cutoff.value, cutoff_value)
    log.info("pipeline %s: planned window %s for run %s from %s", request.pipeline, window_id, request.run_id, lower)
    return window


def window_bound(window: WindowRecord, server: ServerState) -> WindowBound:
    """Where the window ends: its published upper bound, its ``catch_up`` GTID set, or its interval's end
    (which the server's clock must have passed)."""
    if window.is_published:
        assert window.upper is not None
        return WindowBound(gtids=window.upper, exact=True)
    if window.cutoff_rule == CutoffRule.CATCH_UP.value:
        return WindowBound(gtids=GtidSet.parse(window.cutoff_value))
    end_us = to_epoch_us(datetime.fromisoformat(window.cutoff_value))
    server_now_us = server.now_us
    if server_now_us < end_us:
        raise WindowNotClosedError(
            f"window {window.window_id} ends at {window.cutoff_value} but the server's clock is at "
            f"{datetime.fromtimestamp(server_now_us / 1e6, UTC).isoformat()}: the interval has not ended yet; "
            "retry after it has (Airflow runs scheduled intervals only after their end)"
        )
    return WindowBound(before_us=end_us)
