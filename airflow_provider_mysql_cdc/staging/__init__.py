"""The one owner of staging: paths under ``{staging_uri}/{pipeline}/``, manifests, atomic publish, reads.

Capture, snapshot, apply and verify ask a :class:`Staging` for every path and every read or write;
the manifest format itself is :mod:`airflow_provider_mysql_cdc.core.staging`.
"""

from __future__ import annotations

from airflow_provider_mysql_cdc.staging.area import Staging, new_attempt_token, read_text_from_uri, write_text_to_uri
from airflow_provider_mysql_cdc.staging.writer import (
    DEFAULT_ROW_GROUP_BYTES,
    DEFAULT_ROW_GROUP_ROWS,
    SnapshotChunkWriter,
    StagingWriter,
    WindowStagingWriter,
)

__all__ = [
    "DEFAULT_ROW_GROUP_BYTES",
    "DEFAULT_ROW_GROUP_ROWS",
    "SnapshotChunkWriter",
    "Staging",
    "StagingWriter",
    "WindowStagingWriter",
    "new_attempt_token",
    "read_text_from_uri",
    "write_text_to_uri",
]
