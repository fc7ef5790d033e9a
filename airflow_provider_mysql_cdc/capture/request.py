"""What a capture run is asked to do and what it gives back (no Airflow import)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings
from airflow_provider_mysql_cdc.core.windows import (
    CutoffRule,
    TableSelection,
    WindowCaps,
)
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
)
from airflow_provider_mysql_cdc.staging.writer import DEFAULT_ROW_GROUP_BYTES, DEFAULT_ROW_GROUP_ROWS


@dataclass(frozen=True)
class CaptureRequest:
    """One capture run: which pipeline, which Airflow run, where the window ends, what to stage."""

    pipeline: str
    run_id: str
    staging_uri: str
    cutoff: CutoffRule = CutoffRule.DATA_INTERVAL
    data_interval_end: datetime | None = None
    tables: TableSelection = field(default_factory=TableSelection)
    caps: WindowCaps = field(default_factory=WindowCaps)
    #: Frontier of a brand-new pipeline; None means ``@@gtid_executed`` when it is registered.
    initial_frontier: GtidSet | None = None
    replica_server_id: int = 4_000_001
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    #: Bytes of staged rows held in memory before they are written (and the most bytes of a row group).
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    #: ``catch_up`` only: the window ends at exactly this GTID set (instead of ``@@gtid_executed``). The
    #: verify operator uses it to stage the changes between a target's frontier and the GTID set of its
    #: consistent read of the source; pipelines leave it None.
    upper_bound: GtidSet | None = None
    #: How to reach the object store ``staging_uri`` is in (None: pyarrow's defaults; holds a secret key,
    #: which its repr leaves out).
    object_store: ObjectStoreSettings | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", self.pipeline):
            raise ConfigurationError(f"pipeline name {self.pipeline!r}: use letters, digits, '_', '.', '-'")
        if self.cutoff is CutoffRule.DATA_INTERVAL and self.data_interval_end is None:
            raise ConfigurationError("cutoff 'data_interval' needs the run's data_interval_end")
        if self.upper_bound is not None and self.cutoff is not CutoffRule.CATCH_UP:
            raise ConfigurationError("an explicit upper_bound needs cutoff 'catch_up'")


@dataclass(frozen=True)
class CaptureResult:
    """What a capture run produced; small and JSON-safe via :meth:`as_xcom`."""

    pipeline: str
    window_id: int
    lower: GtidSet
    upper: GtidSet
    manifest_uri: str
    transactions: int
    op_counts: dict[str, int]
    table_counts: dict[str, dict[str, int]]
    reused_published: bool
    last_commit_ts_us: int | None

    def as_xcom(self) -> dict[str, Any]:
        """The facts Airflow passes on (no rows, no secrets)."""
        return {
            "pipeline": self.pipeline,
            "window_id": self.window_id,
            "covered": None,
            "lower": str(self.lower),
            "upper": str(self.upper),
            "manifest_uri": self.manifest_uri,
            "transactions": self.transactions,
            "rows_by_op": self.op_counts,
            "rows_by_table": self.table_counts,
            "reused_published": self.reused_published,
            "last_commit_ts_us": self.last_commit_ts_us,
        }
