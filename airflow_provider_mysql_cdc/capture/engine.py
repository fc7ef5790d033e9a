"""Capture one binlog window of a pipeline into Parquet staging (no Airflow import).

``capture_window`` first reads the server once and refuses one whose settings do not fit CDC or that
cannot continue the pipeline's history (:mod:`.server_guard`, nothing recorded then). It then finds
or plans the run's window in the frontier store, reads the binlog from the window's lower GTID set
up to its bound, stages the row changes of the selected tables, publishes
the manifest and advances the capture frontier (compare-and-set). Re-running a window re-reads
exactly ``upper - lower`` and, when the result equals the published manifest, leaves the published
files untouched; when the binlog is gone it reuses the published staging.
"""

from __future__ import annotations

import logging

from airflow_provider_mysql_cdc.capture.request import CaptureRequest, CaptureResult
from airflow_provider_mysql_cdc.capture.server_guard import read_guarded_server, record_window_server
from airflow_provider_mysql_cdc.capture.window_planning import (
    covered_run,
    interval_already_covered,
    plan_window,
    window_bound,
)
from airflow_provider_mysql_cdc.capture.window_reading import WindowReader, read_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.staging import MANIFEST_FORMAT_VERSION, StagedFile, StagingManifest
from airflow_provider_mysql_cdc.errors import (
    BinlogPurgedError,
    CaptureDivergedError,
    CorruptStagingError,
    WindowIncompleteError,
)
from airflow_provider_mysql_cdc.staging import Staging, WindowStagingWriter
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowRecord

__all__ = [
    "CaptureRequest",
    "CaptureResult",
    "capture_window",
    "covered_run",
    "interval_already_covered",
]

log = logging.getLogger(__name__)


def capture_window(request: CaptureRequest, source: MySqlConnectionConfig, store: FrontierStore) -> CaptureResult:
    """Capture (or re-capture) the request's window and publish it; see the module docstring."""
    server = read_guarded_server(request, source, store)
    staging = Staging(request.staging_uri, request.pipeline, request.object_store)
    window = plan_window(request, store, source, staging, server)
    record_window_server(store, window, server)
    bound = window_bound(window, server)
    published = None
    if window.is_published:
        try:
            published = staging.read_window_manifest(window.window_id)
        except CorruptStagingError as exc:
            log.warning("published manifest of window %s is unreadable (%s); rewriting it", window.window_id, exc)
    if published is not None and published.format_version < MANIFEST_FORMAT_VERSION:
        staging.verify_files(published)  # written by an older provider: kept as it is, never rewritten
        log.info("window %s was published in staging format %s; reused", window.window_id, published.format_version)
        return _result(published, staging, reused=True)
    writer = WindowStagingWriter(
        staging,
        window.window_id,
        row_group_rows=request.row_group_rows,
        row_group_bytes=request.row_group_bytes,
    )
    try:
        state = read_window(request, source, store, window, bound, writer, server)
    except BinlogPurgedError:
        writer.discard()
        if published is not None:
            try:
                staging.verify_files(published)
            except CorruptStagingError as exc:
                raise BinlogPurgedError(
                    f"{exc}. The window's binlog is purged too, so re-running cannot rewrite it: re-snapshot "
                    "the affected tables"
                ) from None
            log.warning("binlog of window %s is purged; its published staging is reused", window.window_id)
            return _result(published, staging, reused=True)
        raise
    except BaseException:
        writer.discard()
        raise
    upper = window.lower | state.covered | state.seen_set()
    manifest = _manifest(request, window, state, writer.finish(), upper)
    if window.is_published:
        return _republish(request, window, staging, writer, published, manifest)
    uri = writer.publish(manifest)
    store.publish_window(
        window,
        upper,
        uri,
        {"transactions": state.transactions, "last_commit_ts_us": state.last_commit_ts_us, **manifest.op_counts()},
    )
    log.info(
        "window %s published: %s transactions, rows by op %s, upper %s",
        window.window_id,
        state.transactions,
        manifest.op_counts(),
        upper,
    )
    return _result(manifest, staging, reused=False)


def _manifest(
    request: CaptureRequest, window: WindowRecord, state: WindowReader, files: list[StagedFile], upper: GtidSet
) -> StagingManifest:
    """The manifest of a window read to ``upper``."""
    return StagingManifest(
        pipeline=request.pipeline,
        window_id=window.window_id,
        lower=str(window.lower),
        upper=str(upper),
        cutoff_rule=window.cutoff_rule,
        cutoff_value=window.cutoff_value,
        transactions=state.transactions,
        first_commit_ts_us=state.first_commit_ts_us,
        last_commit_ts_us=state.last_commit_ts_us,
        files=tuple(files),
        schemas=tuple(state.schemas[key] for key in sorted(state.schemas)),
        truncates=tuple(state.truncates),
        ddl=tuple(state.ddl),
        covered_by_snapshots=str(state.covered),
        snapshots=dict(sorted(state.handoffs.governing.items())),
        schema_events=tuple(state.schema_events),
        rebuilds_pending=state.tracker.rebuilds_pending(),
    )


def _republish(
    request: CaptureRequest,
    window: WindowRecord,
    staging: Staging,
    writer: WindowStagingWriter,
    published: StagingManifest | None,
    manifest: StagingManifest,
) -> CaptureResult:
    """A published window read again: its files are left untouched when the re-read equals them,
    rewritten when they are missing or damaged; a different re-read is an error."""
    upper = GtidSet.parse(manifest.upper)
    if window.upper != upper:
        writer.discard()
        raise WindowIncompleteError(f"window {window.window_id}: re-read reached {upper}, expected {window.upper}")
    if published is not None and published.to_json() == _as_published(manifest, published).to_json():
        try:
            staging.verify_files(published)
        except CorruptStagingError as exc:
            log.warning("%s; rewriting the window's files", exc)
        else:
            writer.discard()
            log.info("window %s re-captured: identical to its published manifest", window.window_id)
            return _result(published, staging, reused=False)
    elif published is not None:
        writer.discard()
        raise CaptureDivergedError(
            f"re-capturing window {window.window_id} of pipeline {request.pipeline!r} gave different "
            "content than its published manifest; the published window is left untouched"
        )
    writer.publish(manifest)  # the published manifest or one of its files was missing or damaged: rewrite
    return _result(manifest, staging, reused=False)


def _as_published(manifest: StagingManifest, published: StagingManifest) -> StagingManifest:
    """A re-read window's manifest in the form ``published`` was written in: without ``max_row_bytes``
    when the published one was written before files recorded it (its files are then kept as they are)."""
    return manifest if published.records_max_row_bytes() else manifest.without_max_row_bytes()


def _result(manifest: StagingManifest, staging: Staging, *, reused: bool) -> CaptureResult:
    return CaptureResult(
        pipeline=manifest.pipeline,
        window_id=manifest.window_id,
        lower=GtidSet.parse(manifest.lower),
        upper=GtidSet.parse(manifest.upper),
        manifest_uri=staging.window_manifest_uri(manifest.window_id),
        transactions=manifest.transactions,
        op_counts=manifest.op_counts(),
        table_counts=manifest.table_counts(),
        reused_published=reused,
        last_commit_ts_us=manifest.last_commit_ts_us,
    )
