"""Crash trials: SIGKILL the capture, the snapshot and the Spark apply at random points, re-run, compare.

Invariant 3 of the design ("a crash at any point loses nothing and duplicates nothing once the task is
re-run") and invariant 2 ("a re-run produces the same staged rows"), tried many times:

- **capture**: a child process runs ``capture_window`` of a window of tens of MB of binlog; it is
  SIGKILLed after a time drawn uniformly between 0 and the duration of an uninterrupted reference run
  of the same window (so kills land during imports, before the stream, mid-stream, mid-Parquet write,
  around publish and after it). The window is then re-run in this process and compared with the
  reference capture of the same GTID range into another pipeline: byte-identical data files, equal
  rows (pyarrow ``Table.equals``), equal manifest except ``pipeline``, exactly one published window
  in the store with the reference's bounds, no debris under ``windows/_tmp``.
- **snapshot**: a child runs ``snapshot_chunk`` of one big chunk, killed the same way, then the chunk
  is re-run (twice) in this process: the rows equal the reference chunk (which equals the source
  table; ``CHECKSUM TABLE`` shows it stayed quiescent), the files are byte-identical, a chunk found
  finished is returned as is (never redone), and no attempt directory but the finished one is left.
- **apply**: a real ``spark-submit`` of ``spark_apps/apply_changes.py`` (the arguments and Spark
  properties ``SparkApplyOperator`` builds) merging a snapshot and two windows into Iceberg, started
  in its own process group and SIGKILLed as a group (the driver JVM and its Python die together); the
  same apply is re-run to completion. Every target must then equal MySQL
  (:func:`~airflow_provider_mysql_cdc.apply.verify.compare_with_mysql`) and carry exactly the
  reference's sequence of CDC commits: each snapshot chunk batch and each window committed once.

``run_crash_trials`` is shared by ``test_crash.py`` (a few trials in ``make test``) and the long
reliability runner. Every outcome line and every failure names the seed; the kill points are drawn
from it, so ``trials`` and ``seed`` reproduce a run's kill points (relative to its reference runs).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql
from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.staging import StagingManifest
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, plan_snapshot, snapshot_chunk
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore, WindowStatus
from tests.child_process import send_request
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer

REPO_ROOT = Path(__file__).resolve().parents[2]
STAGES = ("capture", "snapshot", "apply")
#: Trials rotate over this order: spark-submit costs 15-25 s per start, so apply trials are fewer.
ROTATION = ("capture", "snapshot", "apply", "capture", "snapshot")
#: Replica server ids of this harness's binlog readers (unique among the source's readers).
SERVER_ID_BASE = 7_310_000
CHILD_TIMEOUT_SECONDS = 600.0

# -- capture: a window of about 35 MB of binlog, 171,020 staged rows ---------------------------------
CAPTURE_DB = "crash_capture"
CAPTURE_TRANSACTIONS = 160
CAPTURE_ROWS_PER_TRANSACTION = 1_000
#: Decoding costs per row more than per byte: many narrow rows make a long stream of a modest binlog.
CAPTURE_PAYLOAD_CHARS = 150
#: Small row groups: a Parquet row group is written every 10,000 staged rows, during the stream.
CAPTURE_ROW_GROUP_ROWS = 10_000

# -- snapshot: one chunk of 300,000 rows -----------------------------------------------------------
SNAPSHOT_DB = "crash_snapshot"
SNAPSHOT_ROWS = 300_000
SNAPSHOT_FETCH_ROWS = 2_000

# -- apply: a snapshot (4 chunks) and two windows of two tables: 7 MERGE commits -------------------
APPLY_DB = "crash_apply"
APPLY_TABLES = (f"{APPLY_DB}.customers", f"{APPLY_DB}.lines")
APPLY_CUSTOMERS = 3_000
APPLY_CHUNK_ROWS = 1_000
APPLY_WINDOWS = 2
#: Snapshot chunks per commit: the customers' 3 chunks take 2 commits, the lines' 1 chunk one.
APPLY_CHUNKS_PER_COMMIT = 2
CATALOG = "lake"

CAPTURE_CHILD = """
import json, os, sys
from datetime import datetime
from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

spec = json.load(sys.stdin)
password = spec["password"]
source = MySqlConnectionConfig(host=spec["host"], port=spec["port"], user=spec["user"], password=password)
request = CaptureRequest(
    pipeline=spec["pipeline"],
    run_id=spec["run_id"],
    staging_uri=spec["staging_uri"],
    cutoff=CutoffRule.DATA_INTERVAL,
    data_interval_end=datetime.fromisoformat(spec["data_interval_end"]),
    tables=TableSelection.of(spec["tables"]),
    initial_frontier=GtidSet.parse(spec["initial_frontier"]),
    replica_server_id=spec["server_id"],
    row_group_rows=spec["row_group_rows"],
)
result = capture_window(request, source, FrontierStore.from_url(spec["store_url"]))
print("capture finished: window", result.window_id, flush=True)
"""

CHUNK_CHILD = """
import json, os, sys
from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, snapshot_chunk
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

spec = json.load(sys.stdin)
password = spec["password"]
source = MySqlConnectionConfig(host=spec["host"], port=spec["port"], user=spec["user"], password=password)
request = SnapshotRequest(
    pipeline=spec["pipeline"],
    run_id=spec["run_id"],
    staging_uri=spec["staging_uri"],
    tables=TableSelection.of(spec["tables"]),
    chunk_rows=spec["chunk_rows"],
    fetch_rows=spec["fetch_rows"],
)
chunk = SnapshotChunk.from_json(spec["chunk"])
result = snapshot_chunk(request, spec["snapshot_id"], chunk, source, FrontierStore.from_url(spec["store_url"]))
print("chunk finished:", result.rows, "rows", flush=True)
"""


# -- report ------------------------------------------------------------------------------------------


@dataclass
class CrashReport:
    """What the trials did; ``differences`` must be 0."""

    #: Kill-and-rerun trials performed.
    trials: int = 0
    #: Trials whose outcome differed from the uninterrupted reference (must be 0).
    differences: int = 0
    #: One human-readable line per trial (stage, seed, kill point, outcome), after one line per reference.
    lines: list[str] = field(default_factory=list)
    seed: int = 0
    trials_by_stage: dict[str, int] = field(default_factory=dict)
    #: Kills that hit a running process (the others came after it had finished on its own).
    mid_run_by_stage: dict[str, int] = field(default_factory=dict)
    #: Wall time per stage, its setup and reference run included.
    seconds_by_stage: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: trials, differences and mid-run kills per stage."""
        stages = ", ".join(
            f"{stage} {self.trials_by_stage[stage]} trials/{self.mid_run_by_stage.get(stage, 0)} mid-run/"
            f"{self.seconds_by_stage.get(stage, 0.0):.0f}s"
            for stage in STAGES
            if stage in self.trials_by_stage
        )
        return f"crash trials seed={self.seed}: {self.trials} trials, {self.differences} differences ({stages})"

    def describe(self) -> str:
        """The summary and every line."""
        return "\n".join([self.summary(), *self.lines])


def stage_schedule(trials: int, stages: Sequence[str] = STAGES) -> list[str]:
    """The stage of each trial: :data:`ROTATION` restricted to ``stages``."""
    unknown = set(stages) - set(STAGES)
    if unknown or not stages:
        raise ValueError(f"stages must be a non-empty subset of {STAGES}, got {tuple(stages)}")
    rotation = [stage for stage in ROTATION if stage in stages]
    return [rotation[index % len(rotation)] for index in range(trials)]


# -- killing a child process group -------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    """How one child run ended."""

    #: Seconds after the start when the SIGKILL was due (None: run to completion).
    planned_at: float | None
    #: Seconds the child ran (until it was killed or ended).
    ran: float
    returncode: int
    log: Path

    @property
    def mid_run(self) -> bool:
        """True when the SIGKILL hit the running child."""
        return self.returncode == -signal.SIGKILL

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _wait_group_gone(pgid: int, timeout: float = 30.0) -> bool:
    """True once no process of the group is left (zombies of other parents would keep it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def run_child(argv: Sequence[str], env: dict[str, str], log: Path, kill_at: float | None, stdin_text: str = "") -> Kill:
    """Run ``argv`` in a process group of its own, ``stdin_text`` on its standard input (a request with
    a password goes there, never into argv or the environment); SIGKILL the whole group ``kill_at``
    seconds after the start unless it ended before. Nothing of the group survives this function."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as output:
        started = time.monotonic()
        process = subprocess.Popen(
            list(argv),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            send_request(process, stdin_text)
            try:
                process.wait(timeout=CHILD_TIMEOUT_SECONDS if kill_at is None else kill_at)
            except subprocess.TimeoutExpired:
                _kill_group(process.pid)
            returncode = process.wait(timeout=60)
            ran = time.monotonic() - started
        finally:
            _kill_group(process.pid)  # also what a finished leader left behind
            if process.poll() is None:
                process.wait(timeout=60)
            if not _wait_group_gone(process.pid):
                raise RuntimeError(f"process group {process.pid} ({argv[0]}) survived SIGKILL")
    return Kill(kill_at, ran, returncode, log)


def _connection_spec(server: MySqlTestServer) -> dict[str, Any]:
    cdc = server.cdc
    return {"host": cdc.host, "port": cdc.port, "user": cdc.user, "password": cdc.password}


# -- small helpers -----------------------------------------------------------------------------------


def _executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0] or ""))


def _digests(directory: Path, *, skip: Sequence[str] = ()) -> dict[str, str]:
    """SHA-256 of every file below ``directory`` by relative path."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name not in skip
    }


def _file_identities(directory: Path) -> dict[str, tuple[int, int]]:
    """Inode and modification time of every file below ``directory``: unchanged means untouched."""
    return {
        str(path.relative_to(directory)): (path.stat().st_ino, path.stat().st_mtime_ns)
        for path in directory.rglob("*")
        if path.is_file()
    }


def _bytes_below(directory: Path, pattern: str = "*.parquet") -> int:
    total = 0
    for path in directory.rglob(pattern) if directory.exists() else ():
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def _manifest_problems(directory: Path, expected: StagingManifest) -> list[str]:
    """The published ``_manifest.json`` must be byte for byte ``expected`` (the reference's manifest
    with the fields that legitimately differ taken from this run); otherwise name the fields."""
    published = (directory / "_manifest.json").read_text()
    if published == expected.to_json():
        return []
    actual: dict[str, Any] = json.loads(published)
    wanted: dict[str, Any] = json.loads(expected.to_json())
    fields = sorted(k for k in set(actual) | set(wanted) if actual.get(k) != wanted.get(k) and k != "manifest_sha256")
    return [f"manifest differs from the reference in {fields or 'its bytes'}"]


def _rows(directory: Path, manifest: StagingManifest) -> pa.Table:
    tables = [pq.read_table(directory / staged.path) for staged in manifest.files]
    return pa.concat_tables(tables).sort_by("_cdc_seq")


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


@dataclass
class TrialOutcome:
    kill: Kill
    #: What the crash left, as seen right after the kill (before the re-run).
    left: str
    problems: list[str] = field(default_factory=list)
    note: str = ""


class _Bench:
    """One stage: its source data, its reference run and its trials."""

    stage = ""

    def __init__(self, server: MySqlTestServer, root: Path, seed: int) -> None:
        self.server = server
        self.root = root
        self.seed = seed
        self.reference_seconds = 0.0
        self.reference_line = ""
        #: The current trial's killed run, kept for the report when the rest of the trial raises.
        self.last_kill: Kill | None = None

    def trial(self, number: int, kill_at: float) -> TrialOutcome:
        raise NotImplementedError

    def _password_leaks(self, *logs: Path) -> list[str]:
        secret = self.server.cdc.password
        leaked = [log for log in logs if log.exists() and secret in log.read_text("utf-8", "replace")]
        return [f"the password appears in {log}" for log in leaked]


# -- capture -----------------------------------------------------------------------------------------


class _CaptureBench(_Bench):
    stage = "capture"

    def __init__(self, server: MySqlTestServer, root: Path, seed: int) -> None:
        super().__init__(server, root, seed)
        server.execute(
            f"DROP DATABASE IF EXISTS {CAPTURE_DB}",
            f"CREATE DATABASE {CAPTURE_DB}",
            f"CREATE TABLE {CAPTURE_DB}.t (id INT PRIMARY KEY, batch INT NOT NULL, payload VARCHAR(1000) NOT NULL)",
            f"CREATE TABLE {CAPTURE_DB}.marker (id INT PRIMARY KEY)",
        )
        self.lower = _executed(server)
        binlog_before = self._binlog_bytes()
        inserts = [
            f"INSERT INTO {CAPTURE_DB}.t SELECT {batch * CAPTURE_ROWS_PER_TRANSACTION} + n, {batch}, "
            f"CONCAT('payload-{batch}-', n, '-', REPEAT('x', {CAPTURE_PAYLOAD_CHARS})) FROM "
            f"(WITH RECURSIVE numbers(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM numbers "
            f"WHERE n < {CAPTURE_ROWS_PER_TRANSACTION - 1}) SELECT n FROM numbers) AS numbered"
            for batch in range(CAPTURE_TRANSACTIONS)
        ]
        server.execute(
            *inserts,
            f"UPDATE {CAPTURE_DB}.t SET payload = CONCAT('changed-', id) WHERE id % 16 = 0",
            f"DELETE FROM {CAPTURE_DB}.t WHERE batch = 3",
            f"UPDATE {CAPTURE_DB}.t SET id = id + 1000000 WHERE id BETWEEN 10 AND 19",
        )
        # The window is a data interval ending now; a later transaction (not captured) closes it, so
        # every run reads exactly the same GTID range whatever else the server commits later.
        time.sleep(0.005)
        self.end = server.utc_now()
        time.sleep(0.005)
        server.execute(f"INSERT INTO {CAPTURE_DB}.marker VALUES (1)")
        binlog = self._binlog_bytes() - binlog_before

        directory = root / "reference"
        kill = self._run_child(directory, "ref", None)
        if kill.returncode != 0:
            raise RuntimeError(f"the reference capture failed (exit {kill.returncode}):\n{kill.tail()}")
        self.reference_seconds = kill.ran
        manifest = Staging(str(directory / "staging"), "ref").read_window_manifest(1)
        assert manifest is not None, "the reference capture published no window"
        Staging(str(directory / "staging"), "ref").verify_files(manifest)
        self.upper = GtidSet.parse(manifest.upper)
        self.manifest = manifest
        window = directory / "staging" / "ref" / "windows" / "00000001"
        self.digests = _digests(window, skip=["_manifest.json"])
        self.rows = _rows(window, manifest)
        expected_rows = (
            CAPTURE_TRANSACTIONS * CAPTURE_ROWS_PER_TRANSACTION
            + (CAPTURE_TRANSACTIONS * CAPTURE_ROWS_PER_TRANSACTION) // 16  # the update
            + CAPTURE_ROWS_PER_TRANSACTION
            + 2 * 10
        )
        if self.rows.num_rows != expected_rows or len(self.upper - self.lower) < CAPTURE_TRANSACTIONS + 3:
            raise RuntimeError(
                f"the reference window holds {self.rows.num_rows} rows and {len(self.upper - self.lower)} "
                f"transactions; expected {expected_rows} rows and at least {CAPTURE_TRANSACTIONS + 3} transactions"
            )
        self.reference_line = (
            f"capture reference seed={seed}: {self.rows.num_rows} rows, {manifest.transactions} transactions "
            f"in {_mb(binlog)} of binlog, staged as {len(manifest.files)} file(s) of "
            f"{_mb(sum(f.bytes for f in manifest.files))}, child ran {kill.ran:.2f}s"
        )

    def _binlog_bytes(self) -> int:
        return sum(int(row[1]) for row in self.server.execute("SHOW BINARY LOGS"))

    def _request(self, directory: Path, pipeline: str) -> CaptureRequest:
        return CaptureRequest(
            pipeline=pipeline,
            run_id="crash-run",
            staging_uri=str(directory / "staging"),
            cutoff=CutoffRule.DATA_INTERVAL,
            data_interval_end=self.end,
            tables=TableSelection.of(f"{CAPTURE_DB}.t"),
            initial_frontier=self.lower,
            replica_server_id=SERVER_ID_BASE + 1,
            row_group_rows=CAPTURE_ROW_GROUP_ROWS,
        )

    def _run_child(self, directory: Path, pipeline: str, kill_at: float | None) -> Kill:
        request = self._request(directory, pipeline)
        spec = {
            **_connection_spec(self.server),
            "pipeline": pipeline,
            "run_id": request.run_id,
            "staging_uri": request.staging_uri,
            "data_interval_end": self.end.isoformat(),
            "tables": f"{CAPTURE_DB}.t",
            "initial_frontier": str(self.lower),
            "server_id": request.replica_server_id,
            "row_group_rows": request.row_group_rows,
            "store_url": f"sqlite:///{directory / 'meta.db'}",
        }
        argv = [sys.executable, "-c", CAPTURE_CHILD]
        return run_child(argv, dict(os.environ), directory / "capture.log", kill_at, json.dumps(spec))

    def trial(self, number: int, kill_at: float) -> TrialOutcome:
        directory = self.root / f"trial-{number:03d}"
        pipeline = f"crash-capture-{number}"
        kill = self.last_kill = self._run_child(directory, pipeline, kill_at)
        store = FrontierStore.from_url(f"sqlite:///{directory / 'meta.db'}")
        staging = directory / "staging"
        windows = staging / pipeline / "windows"
        outcome = TrialOutcome(kill, self._left(store, pipeline, windows))
        problems = outcome.problems
        if kill.returncode not in (0, -signal.SIGKILL):
            problems.append(f"the child failed on its own (exit {kill.returncode}): {kill.tail(1500)}")
        before = store.window_for_run(pipeline, "crash-run")
        published = before is not None and before.is_published
        if kill.returncode == 0 and not published:
            problems.append("the child finished but its window is not recorded published")
        files_before = _file_identities(windows / "00000001") if published else {}
        result = capture_window(self._request(directory, pipeline), self.server.cdc, store)
        outcome.note = "re-run re-read the published window" if published else "re-run completed it"
        if published and _file_identities(windows / "00000001") != files_before:
            problems.append("re-running the published window rewrote its files (they must be left untouched)")
        if (result.window_id, result.lower, result.upper) != (1, self.lower, self.upper):
            problems.append(f"re-run gave window {result.window_id} {result.lower} .. {result.upper}")
        records = store.list_windows(pipeline)
        if [(r.window_id, r.status, r.lower, r.upper) for r in records] != [
            (1, WindowStatus.PUBLISHED, self.lower, self.upper)
        ]:
            problems.append(f"the store holds {[(r.window_id, r.status, str(r.upper)) for r in records]}")
        record = store.get_pipeline(pipeline)
        if record is None or record.capture_frontier != self.upper:
            problems.append(f"capture frontier {record and record.capture_frontier} is not the window's upper bound")
        manifest = Staging(str(staging), pipeline).read_window_manifest(1)
        if manifest is None:
            problems.append("no published manifest after the re-run")
            return outcome
        Staging(str(staging), pipeline).verify_files(manifest)
        window = windows / "00000001"
        # Only the pipeline name may differ (and the manifest's checksum, which covers it).
        problems += _manifest_problems(window, replace(self.manifest, pipeline=pipeline))
        digests = _digests(window, skip=["_manifest.json"])
        if digests != self.digests:
            changed = sorted(k for k in set(digests) | set(self.digests) if digests.get(k) != self.digests.get(k))
            problems.append(f"staged files differ from the reference (bytes): {changed}")
        if not _rows(window, manifest).equals(self.rows):
            problems.append("staged rows differ from the reference rows")
        entries = sorted(path.name for path in windows.iterdir())
        debris = (
            sorted(str(path.relative_to(windows)) for path in (windows / "_tmp").rglob("*"))
            if (windows / "_tmp").exists()
            else []
        )
        if [e for e in entries if e != "_tmp"] != ["00000001"] or debris:
            problems.append(f"windows/ holds {entries}, debris under _tmp: {debris}")
        problems += self._password_leaks(kill.log)
        return outcome

    @staticmethod
    def _left(store: FrontierStore, pipeline: str, windows: Path) -> str:
        record = store.window_for_run(pipeline, "crash-run")
        if record is None:
            return "no window planned yet"
        if record.is_published:
            return "window published and recorded"
        if (windows / "00000001" / "_manifest.json").exists():
            return "manifest published, window not yet recorded in the store"
        staged = _bytes_below(windows / "_tmp")
        attempts = list((windows / "_tmp").glob("00000001-*")) if (windows / "_tmp").exists() else []
        if not attempts:
            return "window planned, no attempt directory yet"
        if staged <= 4 * len(attempts):
            return "window planned, attempt started, no row group written yet"
        return f"mid-stream: {_mb(staged)} of Parquet in the attempt directory"


# -- snapshot ----------------------------------------------------------------------------------------


class _SnapshotBench(_Bench):
    stage = "snapshot"

    def __init__(self, server: MySqlTestServer, root: Path, seed: int) -> None:
        super().__init__(server, root, seed)
        self.table = f"{SNAPSHOT_DB}.t"
        server.execute(
            f"DROP DATABASE IF EXISTS {SNAPSHOT_DB}",
            f"CREATE DATABASE {SNAPSHOT_DB}",
            f"CREATE TABLE {self.table} (id INT PRIMARY KEY, payload VARCHAR(200) NOT NULL, n BIGINT, "
            "amount DECIMAL(12, 2), created DATETIME(6))",
        )
        with_cte = (
            f"INSERT INTO {self.table} WITH RECURSIVE seq (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq "
            f"WHERE i < {SNAPSHOT_ROWS}) SELECT i, REPEAT(CHAR(65 + i % 26), 100), i * i, "
            "IF(i % 7 = 0, NULL, i / 100), TIMESTAMPADD(MICROSECOND, i * 1001, '2024-01-01 00:00:00') FROM seq"
        )
        server.execute("SET SESSION cte_max_recursion_depth = 10000000", with_cte)
        self.loaded = _executed(server)
        self.checksum = self._checksum()

        directory = root / "reference"
        argument = self._plan(directory, "ref")
        kill = self._run_child(directory, "ref", argument, None)
        if kill.returncode != 0:
            raise RuntimeError(f"the reference chunk failed (exit {kill.returncode}):\n{kill.tail()}")
        self.reference_seconds = kill.ran
        store = self._store(directory)
        (record,) = store.snapshot_chunks("ref")
        manifest, chunk_dir = self._chunk_manifest(directory, "ref", record.manifest_uri)
        self.manifest = manifest
        self.digests = _digests(chunk_dir, skip=["_manifest.json"])
        self.rows = _rows(chunk_dir, manifest)
        source = server.execute(f"SELECT id, payload, n, amount, created FROM {self.table} ORDER BY id")
        staged = self.rows.select(["id", "payload", "n", "amount", "created"]).to_pylist()
        if [tuple(row.values()) for row in staged] != [tuple(row) for row in source]:
            raise RuntimeError(f"seed={seed}: the reference snapshot chunk does not hold the source table's rows")
        self.reference_line = (
            f"snapshot reference seed={seed}: one chunk of {self.rows.num_rows} rows equal to the source table, "
            f"{_mb(sum(f.bytes for f in manifest.files))} of Parquet, child ran {kill.ran:.2f}s"
        )

    def _checksum(self) -> Any:
        return self.server.execute(f"CHECKSUM TABLE {self.table}")[0][1]

    @staticmethod
    def _store(directory: Path) -> FrontierStore:
        return FrontierStore.from_url(f"sqlite:///{directory / 'meta.db'}")

    def _request(self, directory: Path, pipeline: str) -> SnapshotRequest:
        return SnapshotRequest(
            pipeline=pipeline,
            run_id="crash-run",
            staging_uri=str(directory / "staging"),
            tables=TableSelection.of(self.table),
            chunk_rows=10 * SNAPSHOT_ROWS,
            fetch_rows=SNAPSHOT_FETCH_ROWS,
        )

    def _plan(self, directory: Path, pipeline: str) -> dict[str, Any]:
        directory.mkdir(parents=True, exist_ok=True)
        plan = plan_snapshot(self._request(directory, pipeline), self.server.cdc, self._store(directory))
        (argument,) = plan.mapped_arguments()
        return argument

    def _run_child(self, directory: Path, pipeline: str, argument: dict[str, Any], kill_at: float | None) -> Kill:
        request = self._request(directory, pipeline)
        spec = {
            **_connection_spec(self.server),
            "pipeline": pipeline,
            "run_id": request.run_id,
            "staging_uri": request.staging_uri,
            "tables": self.table,
            "chunk_rows": request.chunk_rows,
            "fetch_rows": request.fetch_rows,
            "snapshot_id": argument["snapshot_id"],
            "chunk": argument["chunk"],
            "store_url": f"sqlite:///{directory / 'meta.db'}",
        }
        argv = [sys.executable, "-c", CHUNK_CHILD]
        return run_child(argv, dict(os.environ), directory / "chunk.log", kill_at, json.dumps(spec))

    @staticmethod
    def _chunk_manifest(directory: Path, pipeline: str, manifest_uri: str | None) -> tuple[StagingManifest, Path]:
        assert manifest_uri is not None
        staging = str(directory / "staging")
        relative = manifest_uri.removeprefix(staging + "/").rsplit("/", 1)[0]
        manifest = Staging(staging, pipeline).read_manifest_in(relative)
        assert manifest is not None, f"no chunk manifest at {manifest_uri}"
        return manifest, directory / "staging" / relative

    def trial(self, number: int, kill_at: float) -> TrialOutcome:
        directory = self.root / f"trial-{number:03d}"
        pipeline = f"crash-snapshot-{number}"
        argument = self._plan(directory, pipeline)
        kill = self.last_kill = self._run_child(directory, pipeline, argument, kill_at)
        store = self._store(directory)
        staging = directory / "staging"
        snapshots = staging / pipeline / "snapshots"
        (before,) = store.snapshot_chunks(pipeline)
        outcome = TrialOutcome(kill, self._left(before.is_finished, snapshots))
        problems = outcome.problems
        if kill.returncode not in (0, -signal.SIGKILL):
            problems.append(f"the child failed on its own (exit {kill.returncode}): {kill.tail(1500)}")
        if kill.returncode == 0 and not before.is_finished:
            problems.append("the child finished but its chunk is not recorded finished")
        request = self._request(directory, pipeline)
        chunk = SnapshotChunk.from_json(argument["chunk"])
        first = snapshot_chunk(request, argument["snapshot_id"], chunk, self.server.cdc, store)
        again = snapshot_chunk(request, argument["snapshot_id"], chunk, self.server.cdc, store)
        outcome.note = "re-run found it finished" if first.reused else "re-run redid it"
        if before.is_finished and (not first.reused or first.manifest_uri != before.manifest_uri):
            problems.append(f"a finished chunk was redone: {before.manifest_uri} -> {first.manifest_uri}")
        if not again.reused or again.manifest_uri != first.manifest_uri or again.rows != first.rows:
            problems.append(f"the second re-run did not return the finished chunk: {again.as_xcom()}")
        (record,) = store.snapshot_chunks(pipeline)
        if not record.is_finished or record.rows != SNAPSHOT_ROWS or record.manifest_uri != first.manifest_uri:
            problems.append(f"chunk record {record.status} rows={record.rows} manifest={record.manifest_uri}")
        if record.frontier is None or not self.loaded <= record.frontier:
            problems.append(f"chunk frontier {record.frontier} does not hold the table's load {self.loaded}")
        problems += self._staging_problems(directory, pipeline, argument["snapshot_id"], record.manifest_uri)
        if self._checksum() != self.checksum:
            problems.append("the source table changed during the trial (it must stay quiescent)")
        problems += self._password_leaks(kill.log)
        return outcome

    def _staging_problems(self, directory: Path, pipeline: str, snapshot_id: str, uri: str | None) -> list[str]:
        """The finished chunk's staging against the reference; no other attempt's files are left."""
        problems: list[str] = []
        staging = directory / "staging"
        snapshots = staging / pipeline / "snapshots"
        manifest, chunk_dir = self._chunk_manifest(directory, pipeline, uri)
        Staging(str(staging), pipeline).verify_files(manifest)
        # Fields that legitimately differ: the pipeline, the attempt token (its directory) and the
        # frontier (``@@gtid_executed`` when the chunk's lock was taken; checked above).
        expected = replace(self.manifest, pipeline=pipeline, attempt=manifest.attempt, upper=manifest.upper)
        problems += _manifest_problems(chunk_dir, expected)
        if _digests(chunk_dir, skip=["_manifest.json"]) != self.digests:
            problems.append("staged files differ from the reference (bytes)")
        if not _rows(chunk_dir, manifest).equals(self.rows):
            problems.append("staged rows differ from the reference (= source) rows")
        table_dir = snapshots / snapshot_id / self.table
        entries = sorted(path.name for path in table_dir.iterdir()) if table_dir.exists() else []
        if entries != sorted(["_manifest.json", chunk_dir.name]):
            problems.append(f"the table's snapshot directory holds {entries} (orphan attempts?)")
        else:
            table_manifest = json.loads((table_dir / "_manifest.json").read_text())
            rows = [c["rows"] for c in table_manifest["chunks"]]
            if rows != [SNAPSHOT_ROWS]:
                problems.append(f"table manifest lists chunks of {rows} rows")
        debris = list((snapshots / "_tmp").iterdir()) if (snapshots / "_tmp").exists() else []
        if debris:
            problems.append(f"debris under snapshots/_tmp: {sorted(p.name for p in debris)}")
        return problems

    @staticmethod
    def _left(finished: bool, snapshots: Path) -> str:
        if finished:
            return "chunk finished and recorded"
        published = [p for p in snapshots.glob("*/*/chunk-*") if (p / "_manifest.json").exists()]
        if published:
            return "chunk published, not yet recorded finished"
        tmp = snapshots / "_tmp"
        attempts = list(tmp.iterdir()) if tmp.exists() else []
        if not attempts:
            return "chunk planned, no attempt directory yet"
        staged = _bytes_below(tmp)
        if staged <= 4 * len(attempts):
            return "attempt started, no row group written yet"
        return f"mid-stream: {_mb(staged)} of Parquet in the attempt directory"


# -- apply -------------------------------------------------------------------------------------------


def _cdc_commits(spark: Any, target: str) -> tuple[list[tuple[int, int]], int] | None:
    """The target's apply commits as (window id, snapshot chunks loaded), oldest first, and how many
    commits were made by something else; None when the table does not exist."""
    try:
        spark.sql(f"REFRESH TABLE {target}")
    except Exception as exc:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            return None
        raise
    rows = spark.sql(f"SELECT summary FROM {target}.snapshots ORDER BY committed_at").collect()
    summaries = [dict(row.summary) for row in rows]
    commits = [
        (int(s["cdc.window-id"]), int(s["cdc.snapshot-chunks-loaded"])) for s in summaries if "cdc.pipeline" in s
    ]
    return commits, len(summaries) - len(commits)


class _ApplyBench(_Bench):
    stage = "apply"

    def __init__(self, server: MySqlTestServer, root: Path, seed: int, spark: Any) -> None:
        super().__init__(server, root, seed)
        self.spark = spark
        warehouse = spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse", None)
        if not warehouse:
            raise RuntimeError(f"the Spark session has no Hadoop catalog {CATALOG!r} with a warehouse")
        self.warehouse = str(warehouse)
        #: Target namespaces are unique per bench: the warehouse may be shared with other tests.
        self.token = uuid.uuid4().hex[:8]
        (root / "source").mkdir(parents=True)
        self.pipeline = SnapshotPipeline(
            server, root / "source", "crash-apply", TableSelection.of(f"{APPLY_DB}.*"), chunk_rows=APPLY_CHUNK_ROWS
        )
        self._stage_source()
        from tests.spark_session import iceberg_jars

        self.jars = ",".join(str(jar) for jar in iceberg_jars())
        kill = self._submit("ref", 1, None)
        if kill.returncode != 0:
            raise RuntimeError(f"the reference apply failed (exit {kill.returncode}):\n{kill.tail()}")
        self.reference_seconds = kill.ran
        problems = self._compare("ref")
        if problems:
            raise RuntimeError(f"seed={seed}: the uninterrupted reference apply is wrong: {problems}")
        self.commits = {table: self._commits("ref", table) for table in APPLY_TABLES}
        for table, (commits, _) in self.commits.items():
            windows = Counter(window for window, _ in commits)
            if any(windows[w] != 1 for w in range(1, APPLY_WINDOWS + 1)):
                raise RuntimeError(f"seed={seed}: the reference apply committed {table}'s windows as {commits}")
        total = sum(len(commits) for commits, _ in self.commits.values())
        self.reference_line = (
            f"apply reference seed={seed}: snapshot + {APPLY_WINDOWS} windows of {len(APPLY_TABLES)} tables in "
            f"{total} MERGE commits, equal to MySQL, spark-submit ran {kill.ran:.2f}s"
        )
        self._drop("ref")

    def _stage_source(self) -> None:
        """Snapshot (4 chunks) and two captured windows: every kind of change, DDL and a TRUNCATE."""
        db, server, pipeline = APPLY_DB, self.server, self.pipeline
        server.execute(
            f"DROP DATABASE IF EXISTS {db}",
            f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, city VARCHAR(40) NULL, "
            "balance DECIMAL(10,2), seen DATETIME(6))",
            f"CREATE TABLE {db}.lines (order_id BIGINT, line INT, qty INT, note TEXT, PRIMARY KEY (order_id, line))",
        )
        server.execute(
            "SET SESSION cte_max_recursion_depth = 100000",
            f"INSERT INTO {db}.customers WITH RECURSIVE seq (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq "
            f"WHERE i < {APPLY_CUSTOMERS}) SELECT i, CONCAT('c', i), IF(i % 7 = 0, NULL, CONCAT('city', i % 5)), "
            "i + 0.25, TIMESTAMPADD(MICROSECOND, i, '2024-01-01 10:00:00') FROM seq",
            f"INSERT INTO {db}.lines WITH RECURSIVE seq (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq "
            "WHERE i < 799) SELECT 1 + i DIV 4, 1 + i % 4, i, CONCAT('n', i) FROM seq",
        )
        pipeline.snapshot("crash-run-1")
        server_id = SERVER_ID_BASE + 2
        server.execute(
            f"INSERT INTO {db}.customers VALUES (5001, 'new', NULL, NULL, NULL), (5002, 'n2', 'x', 1.50, NULL)",
            f"UPDATE {db}.customers SET city = 'moved', balance = balance * 2 WHERE id BETWEEN 100 AND 400",
            f"DELETE FROM {db}.customers WHERE id BETWEEN 500 AND 560",
            f"UPDATE {db}.customers SET id = 10005 WHERE id = 5",
            *(f"UPDATE {db}.customers SET balance = {n} WHERE id = 7" for n in range(10)),
            f"UPDATE {db}.customers SET city = NULL, seen = NULL WHERE id = 8",
            f"UPDATE {db}.lines SET qty = qty + 1 WHERE order_id < 30",
            f"DELETE FROM {db}.lines WHERE order_id = 40",
        )
        pipeline.capture("crash-run-1", replica_server_id=server_id)
        server.execute(
            f"UPDATE {db}.customers SET name = 'before-ddl' WHERE id = 1000",
            f"ALTER TABLE {db}.customers ADD COLUMN tier INT NULL",
            f"ALTER TABLE {db}.lines MODIFY qty BIGINT",
            f"UPDATE {db}.customers SET tier = id % 3 WHERE id < 300",
            f"INSERT INTO {db}.customers VALUES (6000, 'tiered', 'z', 0.01, NULL, 9)",
            f"DELETE FROM {db}.customers WHERE id % 10 = 3",
            f"INSERT INTO {db}.lines VALUES (900, 1, 5000000000, 'gone with the truncate')",
            f"TRUNCATE TABLE {db}.lines",
            f"INSERT INTO {db}.lines VALUES (1, 1, 11, 'after'), (2, 1, 22, NULL)",
            f"UPDATE {db}.lines SET qty = 5000000000 WHERE order_id = 1",
        )
        last = pipeline.capture("crash-run-2", replica_server_id=server_id)
        if last.window_id != APPLY_WINDOWS:
            raise RuntimeError(f"seed={self.seed}: staging the apply source made {last.window_id} windows")

    def _template(self, name: str) -> str:
        return f"crash{self.token}{name}_" + "{database}.{table}"

    def _target(self, name: str, table: str) -> str:
        from airflow_provider_mysql_cdc.apply.verify import target_name

        return target_name(table, CATALOG, self._template(name))

    def _submit(self, name: str, attempt: int, kill_at: float | None) -> Kill:
        """spark-submit the apply job as ``SparkApplyOperator`` does, for every window into ``name``'s targets."""
        os.environ.setdefault("AIRFLOW_HOME", str(self.root / "airflow-home"))  # the import below reads it
        from airflow_provider_mysql_cdc.operators.apply import SparkApplyOperator, apply_spark_conf

        operator = SparkApplyOperator(
            task_id="apply",
            pipeline=self.pipeline.name,
            staging_uri=str(self.pipeline.staging),
            windows=f"1-{APPLY_WINDOWS}",
            warehouse=self.warehouse,
            target_template=self._template(name),
            chunks_per_commit=APPLY_CHUNKS_PER_COMMIT,
        )
        report = self.root / "reports" / f"{name}-try{attempt}.json"
        conf = {
            **apply_spark_conf(CATALOG, self.warehouse, None),
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.local.dir": str(self.root / "spark-local"),
        }
        (self.root / "spark-local").mkdir(parents=True, exist_ok=True)
        argv = [str(Path(sys.executable).with_name("spark-submit")), "--master", "local[2]", "--name", f"crash-{name}"]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        spec = self.root / "specs" / f"{name}-try{attempt}.json"
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(operator.apply_spec(str(report)).to_json())
        argv += ["--jars", self.jars, str(REPO_ROOT / "spark_apps" / "apply_changes.py"), "--spec", str(spec)]
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        }
        return run_child(argv, env, self.root / "logs" / f"{name}-try{attempt}.log", kill_at)

    def _commits(self, name: str, table: str) -> tuple[list[tuple[int, int]], int]:
        found = _cdc_commits(self.spark, self._target(name, table))
        return found if found is not None else ([], 0)

    def _compare(self, name: str) -> list[str]:
        for table in APPLY_TABLES:
            with contextlib.suppress(Exception):
                self.spark.sql(f"REFRESH TABLE {self._target(name, table)}")
        results = compare_with_mysql(
            self.spark, self.server.cdc, list(APPLY_TABLES), catalog=CATALOG, target_template=self._template(name)
        )
        return [result.describe() for result in results if not result.equal]

    def _drop(self, name: str) -> None:
        """Delete a passed trial's targets from the warehouse (Hadoop catalog: a directory per namespace)."""
        namespace = self._template(name).format(database=APPLY_DB, table="x").split(".", 1)[0]
        shutil.rmtree(Path(self.warehouse) / namespace, ignore_errors=True)

    def trial(self, number: int, kill_at: float) -> TrialOutcome:
        name = f"t{number}"
        kill = self.last_kill = self._submit(name, 1, kill_at)
        made = []
        for table, (expected, _) in self.commits.items():
            found = _cdc_commits(self.spark, self._target(name, table))
            made.append(f"{table} " + ("not created" if found is None else f"{len(found[0])}/{len(expected)} commits"))
        outcome = TrialOutcome(kill, ", ".join(made))
        problems = outcome.problems
        if kill.returncode not in (0, -signal.SIGKILL):
            problems.append(f"the killed apply failed on its own (exit {kill.returncode}): {kill.tail(1500)}")
        rerun = self._submit(name, 2, None)
        if rerun.returncode != 0:
            problems.append(f"the re-run apply failed (exit {rerun.returncode}): {rerun.tail(2000)}")
            return outcome
        report = json.loads((self.root / "reports" / f"{name}-try2.json").read_text())
        outcome.note = "re-run: " + ", ".join(
            f"{table.split('.')[-1]} {t['status']} {t['windows_applied']}" for table, t in report["tables"].items()
        )
        problems += self._compare(name)
        for table in APPLY_TABLES:
            commits, foreign = self._commits(name, table)
            expected, _ = self.commits[table]
            if commits != expected or foreign:
                problems.append(
                    f"{table}: commits (window, chunks loaded) {commits} (+{foreign} other), reference {expected}"
                )
            windows = Counter(window for window, _ in commits)
            twice = {w: n for w, n in windows.items() if w and n != 1}
            if twice:
                problems.append(f"{table}: windows committed more than once: {twice}")
        problems += self._password_leaks(kill.log, rerun.log)
        if not problems:
            self._drop(name)
        return outcome


# -- the trials --------------------------------------------------------------------------------------


def _make_bench(stage: str, server: MySqlTestServer, workdir: Path, seed: int, spark: Any) -> _Bench:
    """A stage's source data and reference run, in a directory of its own under ``workdir``."""
    root = workdir / f"{stage}-{uuid.uuid4().hex[:6]}"
    try:
        if stage == "capture":
            return _CaptureBench(server, root, seed)
        if stage == "snapshot":
            return _SnapshotBench(server, root, seed)
        return _ApplyBench(server, root, seed, spark)
    except Exception as exc:
        raise RuntimeError(f"crash trials seed={seed}: the {stage} setup failed: {exc}") from exc


@contextlib.contextmanager
def _spark_session(spark: Any, workdir: Path) -> Iterator[Any]:
    """The given session, or a local one with the Iceberg jars and catalog ``lake`` on ``workdir``."""
    if spark is not None:
        yield spark
        return
    from tests.spark_session import iceberg_session

    sessions = iceberg_session(workdir / "warehouse", workdir / "spark-warehouse")
    try:
        yield next(sessions)
    finally:
        next(sessions, None)  # resumes the generator past its yield: it stops the session


def run_crash_trials(
    server: MySqlTestServer,
    workdir: Path,
    *,
    trials: int,
    seed: int,
    stages: Sequence[str] = STAGES,
    spark: Any = None,
    progress: Callable[[str], None] | None = None,
) -> CrashReport:
    """Run ``trials`` kill-and-rerun trials rotating over ``stages`` (see :data:`ROTATION`).

    ``server`` is a running well-configured server with the ``cdc`` account; the trials use databases
    ``crash_*``, pipelines ``crash-*`` and replica server ids from :data:`SERVER_ID_BASE` of their own.
    Apply trials need a SparkSession with the Iceberg jars and catalog ``lake`` (a Hadoop catalog):
    ``spark``, or one started on ``workdir``. Passed trials' files are deleted; failed ones are kept
    under ``workdir``. ``progress`` receives every line as it is made.
    """
    schedule = stage_schedule(trials, stages)
    rng = random.Random(seed)
    report = CrashReport(seed=seed)
    workdir.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        report.lines.append(line)
        if progress is not None:
            progress(line)

    sessions = _spark_session(spark, workdir) if "apply" in schedule else contextlib.nullcontext(None)
    with sessions as session:
        benches: dict[str, _Bench] = {}
        for number, stage in enumerate(schedule, 1):
            fraction = rng.random()
            started = time.monotonic()
            bench = benches.get(stage)
            if bench is None:
                bench = benches[stage] = _make_bench(stage, server, workdir, seed, session)
                say(bench.reference_line)
            kill_at = fraction * bench.reference_seconds
            bench.last_kill = None
            try:
                outcome = bench.trial(number, kill_at)
            except Exception as exc:  # a re-run that raised is a difference, reported with the seed
                kill = bench.last_kill or Kill(kill_at, 0.0, 0, workdir / "no-run")
                outcome = TrialOutcome(kill, "see the error")
                outcome.problems.append(f"{type(exc).__name__}: {exc}")
            report.trials += 1
            report.trials_by_stage[stage] = report.trials_by_stage.get(stage, 0) + 1
            report.mid_run_by_stage.setdefault(stage, 0)
            if outcome.kill.mid_run:
                report.mid_run_by_stage[stage] += 1
            report.seconds_by_stage[stage] = report.seconds_by_stage.get(stage, 0.0) + time.monotonic() - started
            when = "mid-run" if outcome.kill.mid_run else f"after it ended (exit {outcome.kill.returncode})"
            head = (
                f"{stage} trial {number} seed={seed}: kill at {kill_at:.2f}s of {bench.reference_seconds:.2f}s "
                f"({fraction:.0%}) {when}; left: {outcome.left}; {outcome.note}"
            )
            if outcome.problems:
                report.differences += 1
                say(f"{head}: DIFFERENT: " + "; ".join(outcome.problems))
            else:
                say(f"{head}: identical")
                if stage != "apply":
                    shutil.rmtree(bench.root / f"trial-{number:03d}", ignore_errors=True)
    return report
