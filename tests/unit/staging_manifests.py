"""The manifest a unit test publishes for a window staging writer's files (a catch-up window with no
transactions: only the files matter to the tests that use it)."""

from __future__ import annotations

from airflow_provider_mysql_cdc.core.staging import StagingManifest
from airflow_provider_mysql_cdc.staging import WindowStagingWriter


def finished_manifest(writer: WindowStagingWriter) -> StagingManifest:
    """The manifest of ``writer``'s window after :meth:`~WindowStagingWriter.finish` (not yet published)."""
    return StagingManifest(
        pipeline="p",
        window_id=writer.window_id,
        lower="",
        upper="",
        cutoff_rule="catch_up",
        cutoff_value="",
        transactions=0,
        first_commit_ts_us=None,
        last_commit_ts_us=None,
        files=tuple(writer.finish()),
    )
