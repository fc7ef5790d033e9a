"""Snapshots and failures: a chunk task SIGKILLed while it streams rows is completed by the next
attempt (which deletes the dead attempt's files and stages exactly the chunk's rows), and purged
binlogs are recovered by re-snapshotting the selected tables."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import BinlogPurgedError
from airflow_provider_mysql_cdc.staging import Staging
from tests.child_process import send_request
from tests.conftest import INSTANCE_PREFIX, REPO_ROOT
from tests.integration.snapshot_pipeline import SnapshotPipeline, replay, source_state
from tests.mysql_servers import MySqlTestServer, running_local

pytestmark = pytest.mark.mysql

CHUNK_SCRIPT = """
import json, os, sys
from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, snapshot_chunk
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

spec = json.load(sys.stdin)
source = MySqlConnectionConfig(
    host=spec["host"], port=spec["port"], user=spec["user"], password=spec["password"]
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
        "password": mysql_server.cdc.password,  # sent on stdin, never in argv or the environment
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
            [sys.executable, "-c", CHUNK_SCRIPT],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            send_request(process, json.dumps(spec))
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

    # What a crash between publishing a chunk and recording it finished leaves behind.
    orphan = pipeline.staging / "killed" / "snapshots" / "000001" / "snap_kill.t" / "chunk-00000-0123456789ab"
    orphan.mkdir(parents=True)
    (orphan / "_manifest.json").write_text("{}")

    results = [pipeline.run_chunk("run-1", argument) for argument in plan.mapped_arguments()]
    assert [r.rows for r in results] == [100_000, 100_000]
    assert tmp_parts(pipeline.staging, "killed") == []  # the dead attempt's files are gone
    assert not orphan.exists()  # unreferenced once the table is complete
    rows = pipeline.snapshot_rows("000001", "snap_kill.t")
    assert [row["id"] for row in rows] == list(range(1, 200_001))
    assert all(row["payload"] == chr(65 + row["id"] % 26) * 150 for row in rows)


@pytest.fixture(scope="module")
def purge_server() -> Iterator[MySqlTestServer]:
    """A server of this module's own: its binlogs are purged."""
    with running_local(f"{INSTANCE_PREFIX}-snapshot-purge") as server:
        yield server


def test_purged_binlogs_are_recovered_by_re_snapshotting_every_selected_table(
    purge_server: MySqlTestServer, tmp_path: Path
) -> None:
    server = purge_server
    server.execute(
        "CREATE DATABASE snap_purge",
        "CREATE TABLE snap_purge.a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE snap_purge.b (name VARCHAR(10) PRIMARY KEY, v INT)",
        "INSERT INTO snap_purge.a VALUES " + ", ".join(f"({i}, {i})" for i in range(100)),
        "INSERT INTO snap_purge.b VALUES " + ", ".join(f"('n{i:03d}', {i})" for i in range(100)),
    )
    pipeline = SnapshotPipeline(server, tmp_path, "purged", TableSelection.of("snap_purge.*"), chunk_rows=30)
    pipeline.snapshot("run-1")
    server.execute("UPDATE snap_purge.a SET v = 0 WHERE id < 10", "DELETE FROM snap_purge.b WHERE v > 90")
    first = pipeline.capture("run-1")

    # Changes the pipeline never reads: their binlog is purged.
    server.execute(
        "INSERT INTO snap_purge.a VALUES (500, 5)",
        "UPDATE snap_purge.b SET v = -1 WHERE v < 5",
        "DELETE FROM snap_purge.a WHERE id BETWEEN 20 AND 30",
        "FLUSH BINARY LOGS",
    )
    current = str(server.execute("SHOW BINARY LOG STATUS")[0][0])
    server.execute(f"PURGE BINARY LOGS TO '{current}'")
    missing = GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_purged")[0][0])) - first.upper
    assert len(missing) == 3

    with pytest.raises(BinlogPurgedError, match=re.escape("resnapshot=['snap_purge.a', 'snap_purge.b']")):
        pipeline.capture("run-2")
    pipeline.snapshot("run-2", resnapshot=("snap_purge.a",))
    with pytest.raises(BinlogPurgedError, match=re.escape("resnapshot=['snap_purge.b']")):
        pipeline.capture("run-2")
    pipeline.snapshot("run-2-b", resnapshot=("snap_purge.b",))  # a new run: run-2's snapshot is decided
    server.execute("UPDATE snap_purge.a SET v = 7 WHERE id = 1", "INSERT INTO snap_purge.b VALUES ('zz', 1)")
    second = pipeline.capture("run-2")
    assert second.window_id == 2 and second.lower == first.upper
    assert missing <= second.upper
    manifest = Staging(str(pipeline.staging), "purged").read_window_manifest(2)
    assert manifest is not None and GtidSet.parse(manifest.covered_by_snapshots) == missing
    server.execute("DELETE FROM snap_purge.a WHERE id = 500", "UPDATE snap_purge.b SET name = 'a00' WHERE name = 'zz'")
    third = pipeline.capture("run-3")

    for table, snapshot_id, key, columns in (
        ("a", "000002", ["id"], ["id", "v"]),
        ("b", "000003", ["name"], ["name", "v"]),
    ):
        name = f"snap_purge.{table}"
        assert pipeline.table_manifest(snapshot_id, name)["handoff_window"] == 2
        state = replay(
            pipeline.snapshot_rows(snapshot_id, name),
            [pipeline.window_rows(w.window_id, name) for w in (second, third)],
            key,
            columns,
        )
        assert state == source_state(server, name, key, columns), name
