"""Capture engine failures against real servers: purged binlogs, corrupt or partial staging, a killed
binlog connection, a SIGKILLed capture process and wrong server settings. Each failure must name what
is wrong and what to do, and must never lose or change a published window."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.errors import (
    BinlogConnectionLostError,
    BinlogPurgedError,
    CorruptStagingError,
    PreflightFailedError,
    TerminalCdcError,
    TransientCdcError,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from airflow_provider_mysql_cdc.mysql.introspection import run_preflight
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowStatus
from tests.child_process import send_request
from tests.conftest import INSTANCE_PREFIX, REPO_ROOT
from tests.mysql_servers import MySqlTestServer, running_local

pytestmark = pytest.mark.mysql

#: Small row groups, so that a big window writes Parquet while it is being read.
ROW_GROUP_ROWS = 10_000
BIG_TRANSACTIONS = 120
BIG_ROWS_PER_TRANSACTION = 1_000
#: The big window's binlog (~75 MB) must be far larger than what the socket buffers on both ends of
#: the dump connection hold (several MB; Linux autotunes them): otherwise a killed dump thread has
#: already sent the whole window and the reader rightly completes it from the buffers (seen with
#: 150,000 rows of 30 bytes).
BIG_PAYLOAD_CHARS = 600


# -- helpers -------------------------------------------------------------------------------------


def executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0] or ""))


def store_in(tmp_path: Path) -> FrontierStore:
    return FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")


def request(
    pipeline: str,
    run_id: str,
    staging: Path,
    *,
    tables: str,
    server_id: int,
    initial: GtidSet | None = None,
) -> CaptureRequest:
    return CaptureRequest(
        pipeline=pipeline,
        run_id=run_id,
        staging_uri=str(staging),
        cutoff=CutoffRule.CATCH_UP,
        tables=TableSelection.of(tables),
        initial_frontier=initial,
        replica_server_id=server_id,
        row_group_rows=ROW_GROUP_ROWS,
    )


def window_path(staging: Path, pipeline: str, window_id: int) -> Path:
    return staging / pipeline / "windows" / f"{window_id:08d}"


def attempts(staging: Path, pipeline: str, window_id: int) -> list[Path]:
    """Temporary directories of (unfinished) attempts at a window."""
    return sorted((staging / pipeline / "windows" / "_tmp").glob(f"{window_id:08d}-*"))


def staged_table(staging: Path, pipeline: str, window_id: int) -> Any:
    """Every staged row of a published window, in ``_cdc_seq`` order (a pyarrow Table)."""
    manifest = Staging(str(staging), pipeline).read_window_manifest(window_id)
    assert manifest is not None
    base = window_path(staging, pipeline, window_id)
    return pa.concat_tables([pq.read_table(base / staged.path) for staged in manifest.files]).sort_by("_cdc_seq")


def tree(directory: Path) -> dict[str, bytes]:
    """Every file below ``directory`` with its bytes."""
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()}


# -- 1. binlogs purged past the frontier ---------------------------------------------------------


@pytest.fixture(scope="module")
def purge_server() -> Iterator[MySqlTestServer]:
    """A server of this module's own: purging its binlogs disturbs no other test."""
    with running_local(f"{INSTANCE_PREFIX}-purge") as server:
        yield server


def test_purged_binlog_reuses_published_windows_and_refuses_new_ones(
    purge_server: MySqlTestServer, tmp_path: Path
) -> None:
    server = purge_server
    server.execute(
        "CREATE DATABASE faults_purge", "CREATE TABLE faults_purge.t (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)"
    )
    initial = executed(server)
    store = store_in(tmp_path)
    staging = tmp_path / "staging"

    def run(run_id: str) -> CaptureRequest:
        return request("purge", run_id, staging, tables="faults_purge.*", server_id=5101, initial=initial)

    server.execute("INSERT INTO faults_purge.t VALUES (1, 'a'), (2, 'b')", "UPDATE faults_purge.t SET v = 'c'")
    first = capture_window(run("run-1"), server.cdc, store)
    server.execute("INSERT INTO faults_purge.t VALUES (3, 'd')", "DELETE FROM faults_purge.t WHERE id = 1")
    second = capture_window(run("run-2"), server.cdc, store)
    assert (first.window_id, second.window_id) == (1, 2)
    assert second.op_counts == {"r": 0, "c": 1, "u": 0, "d": 1}
    published = {window_id: tree(window_path(staging, "purge", window_id)) for window_id in (1, 2)}

    # Transactions after window 2 go into binlog files that are then purged.
    server.execute("INSERT INTO faults_purge.t VALUES (4, 'e')", "UPDATE faults_purge.t SET v = 'f' WHERE id = 4")
    server.execute("FLUSH BINARY LOGS")
    current = str(server.execute("SHOW BINARY LOG STATUS")[0][0])
    server.execute(f"PURGE BINARY LOGS TO '{current}'")
    purged = GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_purged")[0][0]))
    missing = purged - second.upper
    assert len(missing) == 2, "gtid_purged must reach past window 2's upper bound"

    # (a) Re-running window 2's run: its binlog is gone, its published staging is reused unchanged.
    again = capture_window(run("run-2"), server.cdc, store)
    assert again.reused_published is True
    assert {**again.as_xcom(), "reused_published": False} == second.as_xcom()

    # (b) A new window cannot be read: terminal, names exactly the missing GTIDs and the way out.
    with pytest.raises(BinlogPurgedError) as raised:
        capture_window(run("run-3"), server.cdc, store)
    assert isinstance(raised.value, TerminalCdcError)
    message = str(raised.value)
    assert f"the server has purged {missing} (gtid_purged minus the window's lower bound {second.upper})" in message
    assert "run the snapshot with resnapshot=['faults_purge.t']), then re-run this capture" in message
    assert server.cdc.password not in message

    # (c) The failed run's window stays planned, without manifest or leftover files.
    failed = store.window_for_run("purge", "run-3")
    assert failed is not None
    assert (failed.window_id, failed.lower, failed.upper) == (3, second.upper, None)
    assert failed.status == WindowStatus.PLANNED
    assert Staging(str(staging), "purge").read_window_manifest(3) is None
    assert not window_path(staging, "purge", 3).exists()
    assert attempts(staging, "purge", 3) == []
    pipeline = store.get_pipeline("purge")
    assert pipeline is not None and pipeline.capture_frontier == second.upper
    # Nothing published was touched.
    for window_id, files in published.items():
        assert tree(window_path(staging, "purge", window_id)) == files
        manifest = Staging(str(staging), "purge").read_window_manifest(window_id)
        assert manifest is not None
        Staging(str(staging), "purge").verify_files(manifest)


# -- 2. corrupt or partial staging left by an earlier crash --------------------------------------


@pytest.fixture(scope="module")
def staging_source(mysql_server: MySqlTestServer) -> GtidSet:
    """Table ``faults_stage.t`` with a few changes; returns the frontier before them."""
    mysql_server.execute(
        "DROP DATABASE IF EXISTS faults_stage",
        "CREATE DATABASE faults_stage",
        "CREATE TABLE faults_stage.t (id INT PRIMARY KEY, v VARCHAR(40), amount DECIMAL(10, 2), doc JSON)",
    )
    before = executed(mysql_server)
    mysql_server.execute(
        "INSERT INTO faults_stage.t VALUES (1, 'one', 1.50, '{\"a\": 1}'), (2, 'two', NULL, NULL), "
        "(3, 'three', 3.00, '[1, 2]')",
        "UPDATE faults_stage.t SET v = 'uno', doc = JSON_SET(doc, '$.b', 2) WHERE id = 1",
        "UPDATE faults_stage.t SET id = 20 WHERE id = 2",
        "DELETE FROM faults_stage.t WHERE id = 3",
    )
    return before


def stage_request(pipeline: str, staging: Path, initial: GtidSet, server_id: int) -> CaptureRequest:
    return request(pipeline, "run-1", staging, tables="faults_stage.*", server_id=server_id, initial=initial)


EXPECTED_STAGE_OPS = [("c", 1), ("c", 2), ("c", 3), ("u", 1), ("d", 2), ("c", 20), ("d", 3)]


def test_abandoned_attempt_files_are_deleted_and_never_published(
    mysql_server: MySqlTestServer, staging_source: GtidSet, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    debris = staging / "stage-a" / "windows" / "_tmp" / "00000001-0123456789ab"
    junk = debris / "faults_stage.t" / "v1" / "part-00000.parquet"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"PAR1 not really parquet")
    (debris / "_manifest.json").write_text('{"junk": true}')

    result = capture_window(
        stage_request("stage-a", staging, staging_source, 5201), mysql_server.cdc, store_in(tmp_path)
    )

    assert not debris.exists()
    assert attempts(staging, "stage-a", 1) == []
    manifest = Staging(str(staging), "stage-a").read_window_manifest(1)
    assert manifest is not None
    Staging(str(staging), "stage-a").verify_files(manifest)
    assert set(tree(window_path(staging, "stage-a", 1))) == {"_manifest.json", *(f.path for f in manifest.files)}
    rows = staged_table(staging, "stage-a", 1).to_pylist()
    assert [(row["_cdc_op"], row["id"]) for row in rows] == EXPECTED_STAGE_OPS
    assert result.op_counts == {"r": 0, "c": 4, "u": 1, "d": 2}


def test_truncated_manifest_is_reported_and_rewritten_byte_identical(
    mysql_server: MySqlTestServer, staging_source: GtidSet, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    store = store_in(tmp_path)
    first = capture_window(stage_request("stage-b", staging, staging_source, 5202), mysql_server.cdc, store)
    manifest_path = window_path(staging, "stage-b", 1) / "_manifest.json"
    original = tree(window_path(staging, "stage-b", 1))
    manifest_bytes = manifest_path.read_bytes()
    manifest_path.write_bytes(manifest_bytes[: len(manifest_bytes) // 2])

    # (d) Readers get a clear error naming the file and the fix.
    with pytest.raises(CorruptStagingError) as raised:
        Staging(str(staging), "stage-b").read_window_manifest(1)
    message = str(raised.value)
    assert str(manifest_path) in message
    assert "is corrupt or was edited" in message
    assert "re-run its capture task to rewrite it" in message

    # Re-running the window's run re-reads its exact range and rewrites the manifest.
    again = capture_window(stage_request("stage-b", staging, staging_source, 5202), mysql_server.cdc, store)
    assert manifest_path.read_bytes() == manifest_bytes
    assert tree(window_path(staging, "stage-b", 1)) == original
    assert again.as_xcom() == first.as_xcom()
    assert attempts(staging, "stage-b", 1) == []


def test_a_window_published_before_max_row_bytes_existed_is_recaptured_identical_and_kept(
    mysql_server: MySqlTestServer, staging_source: GtidSet, tmp_path: Path
) -> None:
    """Files record their largest row (``max_row_bytes``) since format 2 gained that optional field: a
    window a provider without it published is re-captured as identical, and nothing is rewritten."""
    staging = tmp_path / "staging"
    store = store_in(tmp_path)
    first = capture_window(stage_request("stage-m", staging, staging_source, 5205), mysql_server.cdc, store)
    manifest_path = window_path(staging, "stage-m", 1) / "_manifest.json"
    data = json.loads(manifest_path.read_text())
    assert all(staged["max_row_bytes"] > 0 for staged in data["files"])
    del data["manifest_sha256"]
    for staged in data["files"]:
        del staged["max_row_bytes"]
    canonical = json.dumps(data, sort_keys=True, indent=2) + "\n"
    sealed = {**data, "manifest_sha256": hashlib.sha256(canonical.encode()).hexdigest()}
    manifest_path.write_text(json.dumps(sealed, sort_keys=True, indent=2) + "\n")
    older = tree(window_path(staging, "stage-m", 1))

    again = capture_window(stage_request("stage-m", staging, staging_source, 5205), mysql_server.cdc, store)
    assert tree(window_path(staging, "stage-m", 1)) == older
    assert again.as_xcom() == first.as_xcom()
    assert attempts(staging, "stage-m", 1) == []


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_damaged_data_file_is_detected_and_rewritten(
    mysql_server: MySqlTestServer, staging_source: GtidSet, tmp_path: Path, damage: str
) -> None:
    staging = tmp_path / "staging"
    store = store_in(tmp_path)
    pipeline = f"stage-c-{damage}"
    first = capture_window(stage_request(pipeline, staging, staging_source, 5203), mysql_server.cdc, store)
    manifest = Staging(str(staging), pipeline).read_window_manifest(1)
    assert manifest is not None
    (staged,) = manifest.files
    data_path = window_path(staging, pipeline, 1) / staged.path
    original = tree(window_path(staging, pipeline, 1))
    rows = staged_table(staging, pipeline, 1)
    data = data_path.read_bytes()
    if damage == "flipped":
        middle = len(data) // 2
        data_path.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 16]) + data[middle + 16 :])
        assert data_path.stat().st_size == staged.bytes  # same size: only the checksum can tell
    else:
        data_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptStagingError, match=re.escape(f"staged file {data_path} of window 1")):
        Staging(str(staging), pipeline).verify_files(manifest)

    again = capture_window(stage_request(pipeline, staging, staging_source, 5203), mysql_server.cdc, store)

    Staging(str(staging), pipeline).verify_files(manifest)
    assert tree(window_path(staging, pipeline, 1)) == original
    assert staged_table(staging, pipeline, 1).equals(rows)
    assert [(row["_cdc_op"], row["id"]) for row in rows.to_pylist()] == EXPECTED_STAGE_OPS
    assert again.as_xcom() == first.as_xcom()
    assert attempts(staging, pipeline, 1) == []


# -- 3./4. a big window interrupted: lost connection, killed process -----------------------------


@dataclass(frozen=True)
class BigWindow:
    """``faults_big.t``: BIG_TRANSACTIONS inserts of BIG_ROWS_PER_TRANSACTION wide rows and a few changes."""

    lower: GtidSet
    upper: GtidSet
    #: The rows of a clean, uninterrupted capture of ``lower``..``upper`` (pyarrow Table).
    rows: Any


@pytest.fixture(scope="module")
def big_window(mysql_server: MySqlTestServer, tmp_path_factory: pytest.TempPathFactory) -> BigWindow:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS faults_big",
        "CREATE DATABASE faults_big",
        "CREATE TABLE faults_big.t (id INT PRIMARY KEY, batch INT NOT NULL, payload VARCHAR(1000) NOT NULL)",
    )
    lower = executed(mysql_server)
    inserts = [
        f"INSERT INTO faults_big.t SELECT {batch * BIG_ROWS_PER_TRANSACTION} + n, {batch}, "
        f"CONCAT('payload-{batch}-', n, '-', REPEAT('x', {BIG_PAYLOAD_CHARS})) FROM "
        f"(WITH RECURSIVE numbers(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM numbers "
        f"WHERE n < {BIG_ROWS_PER_TRANSACTION - 1}) SELECT n FROM numbers) AS numbered"
        for batch in range(BIG_TRANSACTIONS)
    ]
    mysql_server.execute(
        *inserts,
        "UPDATE faults_big.t SET payload = 'changed' WHERE id < 100",
        "DELETE FROM faults_big.t WHERE batch = 3",
    )
    upper = executed(mysql_server)
    tmp_path = tmp_path_factory.mktemp("big-clean")
    staging = tmp_path / "staging"
    clean = capture_window(
        request("big-clean", "run-1", staging, tables="faults_big.*", server_id=5300, initial=lower),
        mysql_server.cdc,
        store_in(tmp_path),
    )
    assert clean.upper == upper
    assert clean.transactions == len(upper - lower) == BIG_TRANSACTIONS + 2
    rows = staged_table(staging, "big-clean", 1)
    assert rows.num_rows == BIG_TRANSACTIONS * BIG_ROWS_PER_TRANSACTION + 100 + BIG_ROWS_PER_TRANSACTION
    return BigWindow(lower, upper, rows)


def big_request(pipeline: str, staging: Path, big: BigWindow, server_id: int) -> CaptureRequest:
    return request(pipeline, "run-1", staging, tables="faults_big.*", server_id=server_id, initial=big.lower)


def staging_rows(staging: Path, pipeline: str, *, row_group_written: bool) -> bool:
    """True once an attempt at window 1 has staged a row (its Parquet file exists) or, with
    ``row_group_written``, written a whole row group."""
    for attempt in attempts(staging, pipeline, 1):
        for path in attempt.rglob("*.parquet"):
            try:
                if path.stat().st_size > 4 or not row_group_written:
                    return True
            except FileNotFoundError:  # the attempt ended meanwhile
                pass
    return False


DUMP_THREADS = "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%' AND user = 'cdc'"


def test_connection_lost_mid_window_is_transient_and_the_rerun_is_complete(
    mysql_server: MySqlTestServer, big_window: BigWindow, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    store = store_in(tmp_path)
    stale = {row[0] for row in mysql_server.execute(DUMP_THREADS)}
    killed: list[int] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def kill_the_dump_thread_mid_window() -> None:
        try:
            with connection_to(mysql_server.admin) as connection:
                while not stop.is_set():
                    dumps = [row[0] for row in query(connection, mysql_server.admin, DUMP_THREADS)]
                    ours = [thread for thread in dumps if thread not in stale]
                    if ours and staging_rows(staging, "big-lost", row_group_written=False):
                        query(connection, mysql_server.admin, f"KILL {ours[0]}")
                        killed.append(int(ours[0]))
                        return
                    time.sleep(0.02)
        except BaseException as exc:
            failures.append(exc)

    killer = threading.Thread(target=kill_the_dump_thread_mid_window, daemon=True)
    killer.start()
    try:
        with pytest.raises(BinlogConnectionLostError) as raised:
            capture_window(big_request("big-lost", staging, big_window, 5301), mysql_server.cdc, store)
    finally:
        stop.set()
        killer.join(timeout=30)
    assert failures == []
    assert len(killed) == 1
    assert isinstance(raised.value, TransientCdcError)
    message = str(raised.value)
    assert f"lost the binlog stream from {mysql_server.cdc.address}" in message
    assert "Retry" in message
    last = re.search(r"last complete transaction read: (\S+)\. Retry", message)
    assert last is not None, message
    assert GtidSet.parse(last.group(1)) <= big_window.upper - big_window.lower  # it was mid-window
    assert mysql_server.cdc.password not in message

    # The failed attempt published nothing and left no temporary files.
    window = store.window_for_run("big-lost", "run-1")
    assert window is not None and window.status == WindowStatus.PLANNED
    assert Staging(str(staging), "big-lost").read_window_manifest(1) is None
    assert not window_path(staging, "big-lost", 1).exists()
    assert attempts(staging, "big-lost", 1) == []

    again = capture_window(big_request("big-lost", staging, big_window, 5301), mysql_server.cdc, store)
    assert (again.window_id, again.lower, again.upper) == (1, big_window.lower, big_window.upper)
    assert staged_table(staging, "big-lost", 1).equals(big_window.rows)


CAPTURE_SCRIPT = """
import json, os, sys
from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

spec = json.load(sys.stdin)
source = MySqlConnectionConfig(
    host=spec["host"], port=spec["port"], user=spec["user"], password=spec["password"]
)
request = CaptureRequest(
    pipeline=spec["pipeline"],
    run_id=spec["run_id"],
    staging_uri=spec["staging_uri"],
    cutoff=CutoffRule.CATCH_UP,
    tables=TableSelection.of(spec["tables"]),
    initial_frontier=GtidSet.parse(spec["initial_frontier"]),
    replica_server_id=spec["server_id"],
    row_group_rows=spec["row_group_rows"],
)
capture_window(request, source, FrontierStore.from_url(spec["store_url"]))
print("capture finished")
"""


def test_sigkilled_capture_is_completed_by_the_next_attempt(
    mysql_server: MySqlTestServer, big_window: BigWindow, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    store = store_in(tmp_path)
    capture = big_request("big-killed", staging, big_window, 5401)
    spec = {
        "host": mysql_server.cdc.host,
        "port": mysql_server.cdc.port,
        "user": mysql_server.cdc.user,
        "password": mysql_server.cdc.password,  # sent on stdin, never in argv or the environment
        "pipeline": capture.pipeline,
        "run_id": capture.run_id,
        "staging_uri": capture.staging_uri,
        "tables": "faults_big.*",
        "initial_frontier": str(big_window.lower),
        "server_id": capture.replica_server_id,
        "row_group_rows": capture.row_group_rows,
        "store_url": f"sqlite:///{tmp_path / 'meta.db'}",
    }
    output = tmp_path / "capture.log"
    with output.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", CAPTURE_SCRIPT],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            send_request(process, json.dumps(spec))
            deadline = time.monotonic() + 120
            while not staging_rows(staging, "big-killed", row_group_written=True):
                assert process.poll() is None, f"the capture ended before it was killed:\n{output.read_text()}"
                assert time.monotonic() < deadline, f"the capture never started writing:\n{output.read_text()}"
                time.sleep(0.02)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.kill()  # no-op once it is dead; never leave it running
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert "capture finished" not in output.read_text()

    # The crash left a planned window and debris, nothing published.
    window = store.window_for_run("big-killed", "run-1")
    assert window is not None and window.status == WindowStatus.PLANNED
    assert Staging(str(staging), "big-killed").read_window_manifest(1) is None
    assert len(attempts(staging, "big-killed", 1)) == 1

    again = capture_window(capture, mysql_server.cdc, store)
    assert (again.window_id, again.lower, again.upper) == (1, big_window.lower, big_window.upper)
    assert attempts(staging, "big-killed", 1) == []
    manifest = Staging(str(staging), "big-killed").read_window_manifest(1)
    assert manifest is not None
    Staging(str(staging), "big-killed").verify_files(manifest)
    assert staged_table(staging, "big-killed", 1).equals(big_window.rows)


# -- 5. wrong server settings --------------------------------------------------------------------


def test_wrong_server_settings_fail_before_any_window_is_planned(
    misconfigured_mysql: MySqlTestServer, tmp_path: Path
) -> None:
    store = store_in(tmp_path)
    staging = tmp_path / "staging"
    with pytest.raises(PreflightFailedError) as raised:
        capture_window(
            request("misconfigured", "run-1", staging, tables="*.*", server_id=5501),
            misconfigured_mysql.cdc,
            store,
        )
    message = str(raised.value)
    assert message == run_preflight(misconfigured_mysql.cdc).format()
    for fix in (
        "SET PERSIST gtid_mode = ON;",
        "SET PERSIST enforce_gtid_consistency = ON;",
        "log_bin = binlog",
        "SET PERSIST binlog_format = 'ROW';",
        "SET PERSIST binlog_row_image = 'FULL';",
        "SET PERSIST binlog_row_metadata = 'FULL';",
    ):
        assert fix in message
    assert misconfigured_mysql.cdc.password not in message
    assert store.get_pipeline("misconfigured") is None
    assert store.list_windows("misconfigured") == []
    assert not staging.exists()


def test_server_level_partial_json_is_captured_exactly(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    """With ``binlog_row_value_options=PARTIAL_JSON`` for every session, JSON updates are logged as diffs:
    preflight accepts it, and capture applies every diff to the before image's document."""
    store = store_in(tmp_path)
    staging = tmp_path / "staging"
    mysql_server.execute(
        "DROP DATABASE IF EXISTS pjson",
        "CREATE DATABASE pjson",
        "CREATE TABLE pjson.t (id INT PRIMARY KEY, j JSON)",
        """INSERT INTO pjson.t VALUES (1, '{"a": 1, "b": [1, 2, 3], "c": "xxxxxxxxxxxxxxxxxxxxxxxxx"}')""",
    )
    frontier = GtidSet.parse(str(mysql_server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))
    mysql_server.execute("SET GLOBAL binlog_row_value_options = 'PARTIAL_JSON'")
    try:
        mysql_server.execute("UPDATE pjson.t SET j = JSON_SET(j, '$.a', 2, '$.d', 'new') WHERE id = 1")
        mysql_server.execute("UPDATE pjson.t SET j = JSON_REMOVE(j, '$.b[1]') WHERE id = 1")
        result = capture_window(
            request("partial-json", "run-1", staging, tables="pjson.*", server_id=5502, initial=frontier),
            mysql_server.cdc,
            store,
        )
    finally:
        mysql_server.execute("SET GLOBAL binlog_row_value_options = ''")
    (stored,) = mysql_server.execute("SELECT CAST(j AS CHAR) FROM pjson.t WHERE id = 1")[0]
    rows = []
    for path in sorted(window_path(staging, "partial-json", result.window_id).rglob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    assert [(row["_cdc_op"], row["_cdc_partial"]) for row in rows] == [("u", None), ("u", None)]
    assert rows[-1]["j"] == stored
