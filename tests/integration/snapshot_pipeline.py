"""A test pipeline that snapshots and captures against the real server, and replays what it staged."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, CaptureResult, capture_window
from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.snapshot.engine import (
    ChunkResult,
    SnapshotPlan,
    SnapshotRequest,
    plan_snapshot,
    snapshot_chunk,
)
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.mysql_servers import MySqlTestServer

Row = dict[str, Any]


class SnapshotPipeline:
    """One pipeline of a test: its store, staging directory and request defaults."""

    def __init__(
        self, server: MySqlTestServer, tmp_path: Path, name: str, tables: TableSelection, **snapshot: Any
    ) -> None:
        self.server = server
        self.name = name
        self.staging = tmp_path / "staging"
        self.store = FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
        self.tables = tables
        self.snapshot_settings = snapshot

    def request(self, run_id: str, **overrides: Any) -> SnapshotRequest:
        settings = {"tables": self.tables, **self.snapshot_settings, **overrides}
        return SnapshotRequest(pipeline=self.name, run_id=run_id, staging_uri=str(self.staging), **settings)

    def plan(self, run_id: str, **overrides: Any) -> SnapshotPlan:
        return plan_snapshot(self.request(run_id, **overrides), self.server.cdc, self.store)

    def run_chunk(self, run_id: str, argument: dict[str, Any], **overrides: Any) -> ChunkResult:
        return snapshot_chunk(
            self.request(run_id, **overrides),
            argument["snapshot_id"],
            SnapshotChunk.from_json(argument["chunk"]),
            self.server.cdc,
            self.store,
        )

    def snapshot(self, run_id: str, **overrides: Any) -> list[ChunkResult]:
        """Plan and run every chunk, one after the other."""
        plan = self.plan(run_id, **overrides)
        return [self.run_chunk(run_id, argument, **overrides) for argument in plan.mapped_arguments()]

    def capture(self, run_id: str, **overrides: Any) -> CaptureResult:
        settings: dict[str, Any] = {
            "cutoff": CutoffRule.CATCH_UP,
            "tables": self.tables,
            "replica_server_id": 4_400_001,
        }
        settings.update(overrides)
        request = CaptureRequest(pipeline=self.name, run_id=run_id, staging_uri=str(self.staging), **settings)
        return capture_window(request, self.server.cdc, self.store)

    # -- reading staging back -----------------------------------------------------------------------

    def table_manifest(self, snapshot_id: str, table_name: str) -> dict[str, Any]:
        path = self.staging / self.name / "snapshots" / snapshot_id / table_name / "_manifest.json"
        return dict(json.loads(path.read_text()))

    def snapshot_rows(self, snapshot_id: str, table_name: str) -> list[Row]:
        """The staged rows of a table's finished snapshot, chunk by chunk (via the table manifest)."""
        rows: list[Row] = []
        for chunk in self.table_manifest(snapshot_id, table_name)["chunks"]:
            chunk_dir = self.staging / Path(chunk["manifest"]).parent
            manifest = json.loads((chunk_dir / "_manifest.json").read_text())
            for staged in manifest["files"]:
                rows += pq.read_table(chunk_dir / staged["path"]).to_pylist()
        return rows

    def window_rows(self, window_id: int, table_name: str) -> list[Row]:
        manifest = Staging(str(self.staging), self.name).read_window_manifest(window_id)
        assert manifest is not None, f"window {window_id} has no manifest"
        rows: list[Row] = []
        for staged in manifest.files:
            if f"{staged.database}.{staged.table}" == table_name:
                path = self.staging / self.name / "windows" / f"{window_id:08d}" / staged.path
                rows += pq.read_table(path).to_pylist()
        return sorted(rows, key=lambda row: row["_cdc_seq"])


def replay(
    snapshot: list[Row], windows: Sequence[list[Row]], key: Sequence[str], columns: Sequence[str]
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Snapshot rows, then each window's changes in order, with strict checks that catch a gap or a
    duplicate: a snapshot key appears once, ``c`` inserts an absent key, ``u`` and ``d`` hit a present one."""
    state: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for row in snapshot:
        assert row["_cdc_op"] == "r"
        identity = tuple(row[c] for c in key)
        assert identity not in state, f"snapshot holds key {identity} twice"
        state[identity] = tuple(row[c] for c in columns)
    for rows in windows:
        for row in rows:
            identity = tuple(row[c] for c in key)
            if row["_cdc_op"] == "c":
                assert identity not in state, f"insert of a key the target already has (duplicate): {row}"
                state[identity] = tuple(row[c] for c in columns)
            elif row["_cdc_op"] == "u":
                assert identity in state, f"update of a key the target lacks (gap): {row}"
                state[identity] = tuple(row[c] for c in columns)
            else:
                assert row["_cdc_op"] == "d", row
                assert identity in state, f"delete of a key the target lacks (gap): {row}"
                del state[identity]
    return state


def source_state(
    server: MySqlTestServer, table_name: str, key: Sequence[str], columns: Sequence[str]
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The table as SELECT shows it, in :func:`replay`'s shape."""
    rows = server.execute(f"SELECT {', '.join(columns)} FROM {table_name}")
    positions = [list(columns).index(c) for c in key]
    return {tuple(row[p] for p in positions): tuple(row) for row in rows}
