"""Consistent, chunked, resumable snapshots of the selected tables (no Airflow import).

:func:`plan_snapshot` decides which tables a run snapshots (tables the pipeline has never
snapshotted, plus those asked for again), registers the pipeline's initial frontier before any chunk
starts, splits each table into key ranges planned from the data and records them once in the
metadata store. :func:`snapshot_chunk` reads one chunk at its own point in time:

1. ``LOCK TABLES t READ`` on one connection (short ``lock_wait_timeout``: a snapshot never queues
   writers behind it for long), ``@@GLOBAL.gtid_executed`` read as the chunk's frontier ``S``;
2. ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` on a second connection, which then opens the
   table (taking its metadata lock, so no ALTER can change it under the read);
3. ``UNLOCK TABLES`` (the lock lasted milliseconds: it is logged) and the chunk's rows are streamed
   in key order into Parquet (``_cdc_op = 'r'``), published with a manifest, and the chunk is marked
   finished with ``S`` (compare-and-set: a finished chunk is never redone).

Binlog capture then skips the row events of the chunk's key range whose GTID is in ``S``
(:mod:`airflow_provider_mysql_cdc.capture.handoff`).

This module is the package's entry: the request and results are :mod:`.request`, the plan
:mod:`.planning`, one chunk :mod:`.chunk_reading`.
"""

from __future__ import annotations

from airflow_provider_mysql_cdc.snapshot.chunk_reading import snapshot_chunk, write_table_manifest_when_complete
from airflow_provider_mysql_cdc.snapshot.planning import (
    find_key_columns,
    plan_snapshot,
    plan_table_chunks,
    snapshots_to_approve,
)
from airflow_provider_mysql_cdc.snapshot.request import ChunkResult, SnapshotPlan, SnapshotRequest

__all__ = [
    "ChunkResult",
    "SnapshotPlan",
    "SnapshotRequest",
    "find_key_columns",
    "plan_snapshot",
    "plan_table_chunks",
    "snapshot_chunk",
    "snapshots_to_approve",
    "write_table_manifest_when_complete",
]
