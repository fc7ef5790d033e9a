"""Snapshot chunks that crash: a chunk task SIGKILLed while it streams rows is completed by the next
attempt, which deletes the dead attempt's files and stages exactly the chunk's rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_mysql_cdc.core.windows import TableSelection
from tests.conftest import REPO_ROOT
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

CHUNK_SCRIPT = """
import json, os, sys
from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, snapshot_chunk
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

spec = json.loads(sys.argv[1])
source = MySqlConnectionConfig(
    host=spec["host"], port=spec["port"], user=spec["user"], password=os.environ["SNAPSHOT_CDC_PASSWORD"]
)
request = SnapshotRequest(
    pipeline=spec["pipeline"],
    run_id=spec["run_id"],
    staging_uri=spec["staging_uri"],
    tables=TableSelection.of(spec["tables"]),
    fetch_rows=spec["fetch_rows"],
)
argument = spec["argument"]
chunk = SnapshotChunk.from_json(argument["chunk"])
snapshot_chunk(request, argument["snapshot_id"], chunk, source, FrontierStore.from_url(spec["store_url"]))
print("chunk finished")
"""


def tmp_parts(staging: Path, pipeline: str) -> list[Path]:
    return [p for p in (staging / pipeline / "snapshots" / "_tmp").rglob("*.parquet") if p.stat().st_size > 0]


def test_a_sigkilled_chunk_is_redone_by_the_next_attempt(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS snap_kill",
        "CREATE DATABASE snap_kill",
        "CREATE TABLE snap_kill.t (id INT PRIMARY KEY, payload VARCHAR(200))",
        "SET SESSION cte_max_recursion_depth = 1000000",
        "INSERT INTO snap_kill.t WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) "
        "SELECT i, REPEAT(CHAR(65 + i % 26), 150) FROM n",
    )
    pipeline = SnapshotPipeline(
        mysql_server, tmp_path, "killed", TableSelection.of("snap_kill.*"), chunk_rows=100_000, fetch_rows=2_000
    )
    plan = pipeline.plan("run-1")
    assert len(plan.chunks) == 2
    first = plan.mapped_arguments()[0]
    spec = {
        "host": mysql_server.cdc.host,
        "port": mysql_server.cdc.port,
        "user": mysql_server.cdc.user,
        "pipeline": "killed",
        "run_id": "run-1",
        "staging_uri": str(pipeline.staging),
        "tables": "snap_kill.*",
        "fetch_rows": 2_000,
        "argument": first,
        "store_url": f"sqlite:///{tmp_path / 'meta.db'}",
    }
    output = tmp_path / "chunk.log"
    with output.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", CHUNK_SCRIPT, json.dumps(spec)],
            cwd=REPO_ROOT,
            env={**os.environ, "SNAPSHOT_CDC_PASSWORD": mysql_server.cdc.password},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not tmp_parts(pipeline.staging, "killed"):
                assert process.poll() is None, f"the chunk ended before it was killed:\n{output.read_text()}"
                assert time.monotonic() < deadline, f"the chunk never started writing:\n{output.read_text()}"
                time.sleep(0.01)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert "chunk finished" not in output.read_text()
    record = pipeline.store.snapshot_chunks("killed")[0]
    assert not record.is_finished
    assert not (pipeline.staging / "killed" / "snapshots" / "000001" / "snap_kill.t" / "_manifest.json").exists()

    results = [pipeline.run_chunk("run-1", argument) for argument in plan.mapped_arguments()]
    assert [r.rows for r in results] == [100_000, 100_000]
    assert tmp_parts(pipeline.staging, "killed") == []  # the dead attempt's files are gone
    rows = pipeline.snapshot_rows("000001", "snap_kill.t")
    assert [row["id"] for row in rows] == list(range(1, 200_001))
    assert all(row["payload"] == chr(65 + row["id"] % 26) * 150 for row in rows)
