"""End to end: one ``airflow dags test`` run of the example DAG over a window of 100,000 changes, timed by task.

What it measures, in one run, with Airflow on SQLite and Spark in local mode:

1. **Load** (not timed). A MySQL table ``bench.e2e_rows`` of ``benchmarks/apply.py``'s schema (BIGINT
   key, INT, VARCHAR(40), DECIMAL(12,2), DATETIME(6)) with ``--rows`` rows (ids 1..N, deterministic
   values computed by the server, admin account, ``sql_log_bin = 0``: the snapshot reads the table).
2. **Airflow** (not timed). A fresh ``AIRFLOW_HOME`` in a temporary directory: ``airflow db migrate``
   (SQLite), the DAGs folder ``dags/`` (the example DAG ``mysql_cdc_example``, built by the
   ``mysql_cdc_pipeline`` factory), so its staging and Iceberg warehouse (``$AIRFLOW_HOME/mysql_cdc``)
   and the CDC metadata database are in that directory too. Connections through the environment, as
   ``scripts/demo.py`` does: ``AIRFLOW_CONN_MYSQL_CDC_DEFAULT`` (the ``cdc`` account; never printed,
   never on a command line) and ``AIRFLOW_CONN_SPARK_DEFAULT`` (``local[2]``); the Iceberg runtime
   from ``scripts/iceberg_jars.py`` (``MYSQL_CDC_ICEBERG_JARS``). Every run passes
   ``--conf '{"pipeline": "bench-e2e", "tables": ["bench.*"]}'``; the cut-off is the DAG's default
   ``data_interval`` (``--cutoff catch_up`` adds ``"cutoff": "catch_up"`` to both runs' conf) and each
   run's logical date is the moment it starts, as in the demo.
3. **First run** (timed apart, not in the summary): ``airflow dags test mysql_cdc_example <now>``:
   preflight, purge headroom, the snapshot plan, the snapshot (``chunk_rows`` 250,000: one chunk per
   250,000 rows), capture of window 1 (empty: it carries the snapshot's hand-off) and the apply that
   loads the snapshot into ``lake.bench.e2e_rows`` (checked: window 1, every snapshot row loaded).
4. **Changes** (not timed): ``--changes`` changes (default 100,000) with ``benchmarks/apply.py``'s
   mix: 60% updates of existing keys (every non-key column changes), 20% inserts of new keys (above
   the largest id), 20% deletes of existing keys; updated and deleted keys are drawn at random
   (``--seed``) from the loaded ids, none twice, so each change is one row event. Statements of
   1,000 keys each, in a seeded random order, each its own transaction, admin account, binlog on.
5. **The timed run**: one ``airflow dags test mysql_cdc_example <now>`` process (logical date taken
   after the last change committed, so the window holds all of them). Its wall time is measured
   around the process. Each task's time is the union of its task instances' start..end intervals
   (mapped tasks: every map index) from the task instances in Airflow's metadata database, read
   after the run by a child process of this script (hidden ``--phase read-run``); ``other`` is the
   wall time minus the sum of the tasks: the CLI's start (imports, DAG parsing, creating the run),
   Airflow's work between tasks and its exit, split on a detail line into ``before first task``,
   ``between tasks`` and ``after last task``. Per task the detail lines also give its ``runner
   start``: the seconds from its ``start_date`` to the ``Task started`` line Airflow's in-process
   execution API logs for that task instance in the command's output (Airflow starting the task
   runner, before the operator runs; the first task of a ``dags test`` process pays for the API's
   start). Another detail line gives the apply job's own time in Spark (the table's ``seconds`` in
   the job's report under ``$AIRFLOW_HOME/mysql_cdc/staging/bench-e2e/apply-reports/``); the rest of
   the apply task is spark-submit, the JVM and the Spark session starting and stopping, and the
   operator's bookkeeping.

With ``--warm-spark SECONDS`` every run's environment sets ``MYSQL_CDC_WARM_SPARK_SECONDS`` (and
``TMPDIR`` to a folder of the Airflow home, where the services' sockets, pid files and logs go): the
first run's apply starts a warm Spark service (:mod:`airflow_provider_mysql_cdc.apply.warm_service`)
and its verify a warm verify service (:class:`~airflow_provider_mysql_cdc.verify.child.WarmVerifyClient`),
the timed run's apply and verify send their requests to them, and the benchmark stops both at the end
(``stopped warm Spark services [<pid>, <pid>]``). The timed run's ``apply`` and ``verify`` then have
no spark-submit, JVM or session start in them.

6. **A run without a change** (after the checks below): a third ``airflow dags test`` process, no change
   made since the timed run, so its window 3 holds no row of the table. Its apply task reads the
   target's applied state from the Iceberg metadata and reports the table ``up_to_date`` without starting
   Spark (``SparkApplyOperator``'s ``skip_spark_when_up_to_date``); the baseline, in the same run, is the
   apply job of that same window through ``spark-submit`` (``local[2]``, the operator's catalog properties
   and jars; its report must say ``up_to_date`` too), timed around the process. The
   line ``idle window 3 (no change): ...`` gives both and their ratio.
7. **Airflow's floor**: ``airflow dags test`` of a DAG of as many tasks as the timed run had, chained
   ``EmptyOperator`` tasks (its own DAGs folder, the same Airflow home), timed around the process: what
   Airflow alone costs such a run. The line ``airflow floor: ...`` and the summary's
   ``airflow_floor_s`` / ``beyond_floor_s`` (the timed run's wall less it) give it.

The benchmark fails (exit code 1) when: either run's ``airflow dags test`` exits non-zero or the run's
state is not ``success`` or a task instance (other than the skipped snapshot of the second run) did
not succeed (``airflow tasks test`` and friends exit 0 even when a task failed, so states are
checked); the timed run's capture did not stage exactly the changes made (its XCom ``rows_by_op``
and its published manifest's op counts must both be ``c``/``u``/``d`` = the mix, window 2, table
``bench.e2e_rows`` only); the apply did not report ``applied`` for window 2 with those rows; or
``lake.bench.e2e_rows`` differs from the MySQL table, compared row by row by
:func:`airflow_provider_mysql_cdc.apply.verify.compare_with_mysql` in a child process with its own
local Spark session (hidden ``--phase verify``), or the MySQL row count is not what the load and the
changes imply; or the run without a change did not capture window 3 without a row, or its apply (or the
baseline job) did not report the table ``up_to_date``.

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``bench-e2e``, prefixed with
``$MYSQL_CDC_TEST_INSTANCE_PREFIX-`` when that is set; see :mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/e2e.py
    .venv/bin/python benchmarks/e2e.py --rows 200000 --changes 100000 --workdir /tmp/e2e   # keep the files
    .venv/bin/python benchmarks/e2e.py --cutoff catch_up
    .venv/bin/python benchmarks/e2e.py --warm-spark 600                     # the apply in a warm Spark driver
    .venv/bin/python benchmarks/e2e.py --rows 10000 --changes 1000 --warm-spark 600
    .venv/bin/python benchmarks/e2e.py --mysql-url mysql://root:PASSWORD@127.0.0.1:3306

``--mysql-url`` uses an existing server instead (an admin account; database ``bench`` is dropped and
re-created; the ``cdc`` account is created if missing, password from ``MYSQL_CDC_TEST_CDC_PASSWORD``,
default ``cdc-test-pw``). The server needs the settings listed in docs/connection.md (GTIDs, ROW binlog, FULL
row image and metadata). ``--workdir`` keeps Airflow's home, the logs of both runs
(``run-1.log``, ``run-2.log``), staging and the warehouse in that directory (it must be empty or
absent); by default they go to a temporary directory that is deleted at the end.

The last line printed is always (one line, broken here)::

    e2e changes=<n> wall_s=<w> preflight_s=<p> headroom_s=<h> plan_s=<l> snapshot_s=<s>
        capture_s=<c> apply_s=<a> other_s=<o>

with one ``<task>_s`` per task of the example DAG (``headroom`` is ``purge_headroom``, ``plan`` is
``snapshot_plan``), all of the timed run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCHMARKS_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCHMARKS_DIR.parent
for _path in (str(REPO_ROOT / "scripts"), str(BENCHMARKS_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# scripts/ and benchmarks/ are put on sys.path above (a script's own folder is sys.path[0] anyway): mypy
# finds these only when given those folders, as `make lint` would.
import iceberg_jars  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from apply import Keys, change_statements, load, mix  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
    BenchmarkError,
    Server,
    execute,
    existing_server,
    local_server,
    print_summary,
)

DATABASE = "bench"
TABLE = f"{DATABASE}.e2e_rows"
TARGET = f"lake.{TABLE}"
DAG_ID = "mysql_cdc_example"
PIPELINE = "bench-e2e"
INSTANCE_NAME = "bench-e2e"
PREFIX_ENV = "MYSQL_CDC_TEST_INSTANCE_PREFIX"
#: The run's params (the same for both runs: one pipeline, one sequence of windows); ``--cutoff`` adds ``cutoff``.
RUN_CONF = {"pipeline": PIPELINE, "tables": [f"{DATABASE}.*"]}
#: Replica server id of the pipeline's capture.
CAPTURE_SERVER_ID = 4_300_001
#: A run that takes longer than this is stuck (e.g. ``depends_on_past`` waiting on a failed run).
RUN_TIMEOUT_SECONDS = 30 * 60
CHILD_TIMEOUT_SECONDS = 30 * 60
RESULT_MARKER = "E2E-RESULT-JSON: "
CDC_CONN_ENV = "AIRFLOW_CONN_MYSQL_CDC_DEFAULT"
#: The example DAG's tasks in the order they run, with the short names of the summary line.
TASKS = (
    ("preflight", "preflight"),
    ("purge_headroom", "headroom"),
    ("snapshot_plan", "plan"),
    ("snapshot", "snapshot"),
    ("capture", "capture"),
    ("apply", "apply"),
)
#: Server options of the local instance: a buffer pool that holds the table, no fsync per commit.
LOCAL_SETTINGS = {
    "innodb_buffer_pool_size": "512M",
    "innodb_flush_log_at_trx_commit": "2",
    "sync_binlog": "0",
}
SCRIPT = str(Path(__file__).resolve())
VENV_BIN = Path(sys.executable).parent


# -- pure logic: where a run's time went ----------------------------------------------------------


@dataclass(frozen=True)
class TaskInstanceTimes:
    """One task instance of a run as the metadata database has it (times are None when it never ran)."""

    task_id: str
    map_index: int
    state: str
    start: datetime | None
    end: datetime | None
    ti_id: str = ""


def busy_seconds(intervals: Sequence[tuple[datetime, datetime]]) -> float:
    """Seconds covered by the union of the intervals (overlaps, e.g. parallel map indexes, count once)."""
    total = 0.0
    current: tuple[datetime, datetime] | None = None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += (current[1] - current[0]).total_seconds()
            current = (start, max(start, end))
        else:
            current = (current[0], max(current[1], end))
    if current is not None:
        total += (current[1] - current[0]).total_seconds()
    return total


def _ran(ti: TaskInstanceTimes) -> tuple[datetime, datetime] | None:
    return (ti.start, ti.end) if ti.start is not None and ti.end is not None else None


def task_seconds(tis: Sequence[TaskInstanceTimes], task_ids: Sequence[str]) -> dict[str, float]:
    """Per task id (every one of ``task_ids``, then any other in the run): the union of its instances' intervals."""
    ordered = list(task_ids) + sorted({ti.task_id for ti in tis} - set(task_ids))
    return {
        task_id: busy_seconds([span for ti in tis if ti.task_id == task_id and (span := _ran(ti)) is not None])
        for task_id in ordered
    }


def overhead_split(tis: Sequence[TaskInstanceTimes], started: datetime, ended: datetime) -> dict[str, float]:
    """Where the time outside the tasks went: before the first task started, between tasks (no task
    running), after the last one ended; with no task run at all, everything is ``before_first_task``."""
    spans = [span for ti in tis if (span := _ran(ti)) is not None]
    wall = (ended - started).total_seconds()
    if not spans:
        return {"before_first_task": wall, "between_tasks": 0.0, "after_last_task": 0.0}
    first = min(start for start, _ in spans)
    last = max(end for _, end in spans)
    return {
        "before_first_task": (first - started).total_seconds(),
        "between_tasks": (last - first).total_seconds() - busy_seconds(spans),
        "after_last_task": (ended - last).total_seconds(),
    }


#: ``airflow dags test`` output: the execution API recording that a task instance started (``ti_id=`` its id).
_TASK_STARTED = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) \[info\s*\] Task started\b.*\bti_id=([^\s>]+)"
)


def reported_starts(log_text: str) -> dict[str, datetime]:
    """Per task instance id: when Airflow's execution API recorded it as started (the ``Task started`` lines
    of ``airflow dags test``'s output); the first line wins."""
    found: dict[str, datetime] = {}
    for line in log_text.splitlines():
        match = _TASK_STARTED.match(line)
        if match:
            found.setdefault(match.group(2), datetime.fromisoformat(match.group(1)))
    return found


def runner_start_seconds(tis: Sequence[TaskInstanceTimes], reported: Mapping[str, datetime]) -> dict[str, float]:
    """Per task id: seconds from its instances' ``start_date`` to the execution API's ``Task started`` (Airflow
    starting the task runner, before the operator runs); tasks with no such line are left out."""
    seconds: dict[str, float] = {}
    for ti in tis:
        when = reported.get(ti.ti_id)
        if ti.start is not None and when is not None:
            seconds[ti.task_id] = seconds.get(ti.task_id, 0.0) + max(0.0, (when - ti.start).total_seconds())
    return seconds


def summary_line(changes: int, wall: float, seconds: Mapping[str, float], floor: float | None = None) -> str:
    """``e2e changes=<n> wall_s=<w> <short>_s=<t> ... other_s=<wall minus the tasks>`` (tasks of :data:`TASKS`
    by short name, in DAG order, then any other task by its id), then ``airflow_floor_s=<f>
    beyond_floor_s=<w - f>`` when the floor was measured."""
    short = dict(TASKS)
    parts = [f"{short.get(task_id, task_id)}_s={value:.1f}" for task_id, value in seconds.items()]
    other = wall - sum(seconds.values())
    line = f"e2e changes={changes} wall_s={wall:.1f} " + " ".join(parts) + f" other_s={other:.1f}"
    if floor is not None:
        line += f" airflow_floor_s={floor:.1f} beyond_floor_s={wall - floor:.1f}"
    return line


#: The DAG of the floor run: as many tasks as the example DAG, in one chain, each doing nothing.
FLOOR_DAG_ID = "bench_e2e_floor"


def floor_dag_source(tasks: int) -> str:
    """A DAG file of ``tasks`` chained ``EmptyOperator`` tasks (:data:`FLOOR_DAG_ID`)."""
    return (
        "import pendulum\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "from airflow.sdk import DAG, chain\n\n"
        f"with DAG({FLOOR_DAG_ID!r}, schedule=None, start_date=pendulum.datetime(2024, 1, 1), catchup=False) as dag:\n"
        f"    chain(*(EmptyOperator(task_id=f'task_{{n}}') for n in range({tasks})))\n"
    )


def airflow_floor(env: Mapping[str, str], home: Path, tasks: int) -> float:
    """Wall seconds of ``airflow dags test`` of :func:`floor_dag_source` in the same Airflow home (its own
    DAGs folder): what Airflow alone costs such a run."""
    folder = home / "floor-dags"
    folder.mkdir(exist_ok=True)
    (folder / "floor.py").write_text(floor_dag_source(tasks))
    argv = [str(VENV_BIN / "airflow"), "dags", "test", FLOOR_DAG_ID, datetime.now(UTC).isoformat()]
    clock = time.monotonic()
    code = run_logged(argv, {**env, "AIRFLOW__CORE__DAGS_FOLDER": str(folder)}, home / "floor.log", 600)
    wall = time.monotonic() - clock
    if code != 0:
        raise BenchmarkError(f"the floor run failed (exit {code}):\n{(home / 'floor.log').read_text()[-3000:]}")
    return wall


# -- child processes ---------------------------------------------------------------------------------


def read_run_phase(spec: dict[str, Any]) -> dict[str, Any]:
    """Child, with the benchmark's AIRFLOW_HOME: one run's state, task instances and XComs."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    logical_date = datetime.fromisoformat(spec["logical_date"])
    with create_session() as session:
        run = session.scalars(
            select(DagRun).where(DagRun.dag_id == DAG_ID, DagRun.logical_date == logical_date)
        ).one_or_none()
        if run is None:
            return {"state": "missing", "run_id": None, "tasks": [], "xcoms": {}}
        tasks = [
            {
                "task_id": ti.task_id,
                "ti_id": str(ti.id),
                "map_index": ti.map_index,
                "state": str(ti.state),
                "start": ti.start_date.isoformat() if ti.start_date else None,
                "end": ti.end_date.isoformat() if ti.end_date else None,
            }
            for ti in session.scalars(
                select(TaskInstance).where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run.run_id)
            )
        ]
        xcoms: dict[str, Any] = {}
        for xcom in session.scalars(
            select(XComModel).where(
                XComModel.dag_id == DAG_ID, XComModel.run_id == run.run_id, XComModel.key == "return_value"
            )
        ):
            if xcom.map_index < 0:
                xcoms[xcom.task_id] = XComModel.deserialize_value(xcom)
        return {"state": str(run.state), "run_id": run.run_id, "tasks": tasks, "xcoms": xcoms}


def verify_phase(spec: dict[str, Any]) -> dict[str, Any]:
    """Child: compare the Iceberg table with its MySQL table through a fresh snapshot and local Spark."""
    from pyspark.sql import SparkSession

    from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql
    from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

    source = MySqlConnectionConfig(spec["host"], int(spec["port"]), spec["user"], spec["password"])
    settings = {
        "spark.jars": spec["jars"],
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": spec["warehouse"],
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.memory": "2g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.local.dir": spec["spark_local_dir"],
    }
    builder = SparkSession.builder.master("local[2]").appName("mysql-cdc-bench-e2e-verify")
    for key, value in settings.items():
        builder = builder.config(key, value)
    started = time.perf_counter()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        [result] = compare_with_mysql(spark, source, [TABLE], catalog="lake")
        iceberg_rows = int(spark.sql(f"SELECT COUNT(*) FROM {TARGET}").collect()[0][0])
    finally:
        spark.stop()
    return {
        "equal": result.equal,
        "describe": result.describe(),
        "mysql_rows": result.mysql_rows,
        "iceberg_rows": iceberg_rows,
        "seconds": time.perf_counter() - started,
    }


PHASES = {"read-run": read_run_phase, "verify": verify_phase}


def run_child(phase: str, spec: dict[str, Any], env: Mapping[str, str], log_path: Path) -> dict[str, Any]:
    """This script with ``--phase`` in ``env``: parameters (possibly a password) on stdin, never argv; a
    JSON result on the last marked stdout line; stderr goes to ``log_path``."""
    with log_path.open("w") as log:
        completed = subprocess.run(
            [sys.executable, SCRIPT, "--phase", phase],
            input=json.dumps(spec),
            stdout=subprocess.PIPE,
            stderr=log,
            env=dict(env),
            text=True,
            timeout=CHILD_TIMEOUT_SECONDS,
            check=False,
        )
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARKER) :])
            return result
    raise BenchmarkError(
        f"phase {phase!r} failed with exit code {completed.returncode}; its log ends:\n{log_path.read_text()[-3000:]}"
    )


def child_main(phase: str) -> int:
    spec = json.loads(sys.stdin.read())
    result = PHASES[phase](spec)
    print(RESULT_MARKER + json.dumps(result, default=str), flush=True)
    return 0


# -- Airflow -----------------------------------------------------------------------------------------


def airflow_env(home: Path, server: Server, jars: str) -> dict[str, str]:
    """The environment of every Airflow command: its own home (SQLite), the connections, the jars."""
    cdc = server.cdc
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "MYSQL_CDC_ICEBERG_JARS": jars,
        CDC_CONN_ENV: json.dumps(
            {
                "conn_type": "mysql_cdc",
                "host": cdc.host,
                "port": cdc.port,
                "login": cdc.user,
                "password": cdc.password,
                "extra": {"server_id": CAPTURE_SERVER_ID},
            }
        ),
    }


def run_logged(argv: list[str], env: Mapping[str, str], log_path: Path, timeout: float) -> int:
    """Run a command in its own process group, in the log's directory (whatever Spark or Airflow drop in
    their working directory stays there), with its output in ``log_path``; its exit code. On a timeout the
    whole group (spark-submit and its JVM too) is killed and -9 returned."""
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    with log_path.open("w") as log:
        process = subprocess.Popen(
            argv, env=dict(env), cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process)
            print(f"timed out after {timeout:.0f} s", file=sys.stderr)
            return -9
        except BaseException:  # e.g. Ctrl-C: no Airflow, spark-submit or JVM left behind
            kill_group(process)
            raise


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@dataclass(frozen=True)
class RunResult:
    """One ``airflow dags test`` run: its wall time and what the metadata database says about it."""

    logical_date: str
    exit_code: int
    started: datetime
    ended: datetime
    wall: float
    state: str
    run_id: str | None
    tis: tuple[TaskInstanceTimes, ...]
    xcoms: dict[str, Any]


def dags_test(number: int, env: Mapping[str, str], home: Path, conf: Mapping[str, Any]) -> RunResult:
    """``airflow dags test mysql_cdc_example <now> --conf ...``, timed around the process, then read back."""
    logical_date = datetime.now(UTC).isoformat()
    argv = [str(VENV_BIN / "airflow"), "dags", "test", DAG_ID, logical_date, "--conf", json.dumps(conf)]
    log_path = home / f"run-{number}.log"
    started = datetime.now(UTC)
    clock = time.monotonic()
    code = run_logged(argv, env, log_path, RUN_TIMEOUT_SECONDS)
    wall = time.monotonic() - clock
    ended = datetime.now(UTC)
    found = run_child("read-run", {"logical_date": logical_date}, env, home / f"read-run-{number}.log")
    tis = tuple(
        TaskInstanceTimes(
            task_id=t["task_id"],
            map_index=int(t["map_index"]),
            state=t["state"],
            start=datetime.fromisoformat(t["start"]) if t["start"] else None,
            end=datetime.fromisoformat(t["end"]) if t["end"] else None,
            ti_id=t["ti_id"],
        )
        for t in found["tasks"]
    )
    result = RunResult(
        logical_date, code, started, ended, wall, found["state"], found["run_id"], tis, found.get("xcoms") or {}
    )
    print_run(number, result, runner_start_seconds(tis, reported_starts(log_path.read_text(errors="replace"))))
    # The second run has nothing to snapshot: its mapped snapshot task is skipped.
    bad = [
        f"{ti.task_id}[{ti.map_index}]={ti.state}"
        for ti in tis
        if ti.state != "success" and not (number > 1 and ti.task_id == "snapshot" and ti.state == "skipped")
    ]
    if code != 0 or result.state != "success" or bad or not tis:
        print(log_path.read_text()[-4000:], file=sys.stderr)
        raise BenchmarkError(
            f"run {number} ({logical_date}): exit code {code}, state {result.state}, "
            f"task instances not successful: {', '.join(bad) or 'none'} (log: {log_path})"
        )
    return result


def print_run(number: int, run: RunResult, runner_start: Mapping[str, float]) -> None:
    """Per task: seconds, how many of them went by before Airflow's execution API recorded the task as
    started (``runner start``), the states of its instances; then where the rest of the wall time went."""
    seconds = task_seconds(run.tis, [task_id for task_id, _ in TASKS])
    print(f"run {number}: logical_date={run.logical_date} state={run.state} exit={run.exit_code} wall_s={run.wall:.1f}")
    print(f"  {'task':<15} {'seconds':>7}  {'runner start':>12}  state")
    for task_id, value in seconds.items():
        states = [ti.state for ti in run.tis if ti.task_id == task_id]
        count = f" x{len(states)}" if len(states) > 1 else ""
        start = f"{runner_start[task_id]:.1f}" if task_id in runner_start else "-"
        print(f"  {task_id:<15} {value:7.1f}  {start:>12}  {'/'.join(sorted(set(states))) or 'no instance'}{count}")
    split = overhead_split(run.tis, run.started, run.ended)
    print(
        f"  {'other':<15} {run.wall - sum(seconds.values()):7.1f}  ("
        + ", ".join(f"{name.replace('_', ' ')} {value:.1f} s" for name, value in split.items())
        + ")",
        flush=True,
    )


def apply_job_seconds(home: Path, run_id: str) -> float | None:
    """The apply job's own seconds for the table (its report), None when the report is not there."""
    reports = home / "mysql_cdc" / "staging" / PIPELINE / "apply-reports"
    names = sorted(reports.glob("*.json"), key=lambda path: path.stat().st_mtime)
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in run_id)
    for path in reversed(names):
        if path.name.startswith(safe):
            report = json.loads(path.read_text())
            table = report.get("tables", {}).get(TABLE, {})
            return float(table["seconds"]) if "seconds" in table else None
    return None


# -- checks ------------------------------------------------------------------------------------------


def check_first_run(run: RunResult, rows: int) -> None:
    """The first run planned window 1 and its apply loaded the whole snapshot into the target."""
    window_id = (run.xcoms.get("capture") or {}).get("window_id")
    table = ((run.xcoms.get("apply") or {}).get("tables") or {}).get(TABLE) or {}
    loaded = int((table.get("rows") or {}).get("r", 0))
    chunks = int(table.get("snapshot_chunks_loaded") or 0)
    print(
        f"first run: window {window_id}, {chunks} snapshot chunk(s) with {loaded} rows loaded into {TARGET}", flush=True
    )
    if window_id != 1 or table.get("status") != "applied" or chunks < 1 or loaded != rows:
        raise BenchmarkError(
            f"the first run planned window {window_id} and its apply reported {table.get('status')!r} with "
            f"{chunks} snapshot chunks of {loaded} rows, expected window 1 and {rows} snapshot rows"
        )


def check_window(run: RunResult, home: Path, expected: Mapping[str, int]) -> None:
    """The capture's XCom and the published manifest hold exactly the changes made; the apply applied them."""
    from airflow_provider_mysql_cdc.staging import Staging

    capture = run.xcoms.get("capture") or {}
    ops = {op: int(n) for op, n in (capture.get("rows_by_op") or {}).items() if n}
    by_table = capture.get("rows_by_table") or {}
    print(
        f"window {capture.get('window_id')}: transactions={capture.get('transactions')} rows_by_op={ops} "
        f"tables={sorted(by_table)}",
        flush=True,
    )
    if capture.get("window_id") != 2 or ops != dict(expected) or sorted(by_table) != [TABLE]:
        raise BenchmarkError(
            f"the timed run's capture staged window {capture.get('window_id')} {ops}, expected {expected}"
        )
    manifest = Staging(str(home / "mysql_cdc" / "staging"), PIPELINE).read_window_manifest(2)
    manifest_ops = {op: n for op, n in (manifest.op_counts() if manifest else {}).items() if n}
    if manifest_ops != dict(expected):
        raise BenchmarkError(f"the manifest of window 2 counts {manifest_ops}, expected {expected}")
    table = ((run.xcoms.get("apply") or {}).get("tables") or {}).get(TABLE) or {}
    applied_rows = {op: int(n) for op, n in (table.get("rows") or {}).items() if n}
    if table.get("status") != "applied" or table.get("windows_applied") != [2] or applied_rows != dict(expected):
        raise BenchmarkError(
            f"the apply reported {table.get('status')!r} for windows {table.get('windows_applied')} "
            f"with rows {applied_rows}, expected window 2 with {dict(expected)}"
        )


def check_tables(server: Server, env: Mapping[str, str], home: Path, jars: str, expected_rows: int) -> None:
    """``lake.bench.e2e_rows`` equals ``bench.e2e_rows``, row for row; MySQL holds the rows it should."""
    spec = {
        "host": server.cdc.host,
        "port": server.cdc.port,
        "user": server.cdc.user,
        "password": server.cdc.password,
        "jars": jars,
        "warehouse": str(home / "mysql_cdc" / "warehouse"),
        "spark_local_dir": str(home / "spark-local"),
    }
    result = run_child("verify", spec, env, home / "verify.log")
    print(
        f"check {result['describe']} (mysql_rows={result['mysql_rows']} iceberg_rows={result['iceberg_rows']} "
        f"expected_rows={expected_rows}; {result['seconds']:.0f} s)",
        flush=True,
    )
    if not result["equal"] or result["mysql_rows"] != expected_rows or result["iceberg_rows"] != expected_rows:
        raise BenchmarkError(f"{TARGET} differs from {TABLE} after the timed run")


def check_idle_run(run: RunResult, window_id: int) -> None:
    """The run without a change captured the next window, and its apply reported the table up to date."""
    capture = run.xcoms.get("capture") or {}
    table = ((run.xcoms.get("apply") or {}).get("tables") or {}).get(TABLE) or {}
    if capture.get("window_id") != window_id or capture.get("rows_by_table") or table.get("status") != "up_to_date":
        raise BenchmarkError(
            f"the run without changes captured window {capture.get('window_id')} with rows "
            f"{capture.get('rows_by_table')} and its apply reported {table.get('status')!r}; expected window "
            f"{window_id}, no row, up_to_date"
        )


def idle_job_seconds(home: Path, env: Mapping[str, str], jars: str, window_id: int) -> float:
    """Wall seconds of the apply job of ``window_id`` through spark-submit (``local[2]``, the operator's
    catalog properties and jars), as the apply task ran it before it planned such runs without Spark;
    checks that the job reports the table up to date."""
    from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec
    from airflow_provider_mysql_cdc.operators.apply import APPLY_APPLICATION, apply_spark_conf

    staging_uri = str(home / "mysql_cdc" / "staging")
    report_path = home / "idle-job-report.json"
    spec = ApplySpec.for_windows(PIPELINE, staging_uri, str(window_id), report_uri=str(report_path))
    spec_path = home / "idle-job-spec.json"
    spec_path.write_text(spec.to_json())
    conf = apply_spark_conf(spec.catalog, str(home / "mysql_cdc" / "warehouse"), None)
    argv = [str(VENV_BIN / "spark-submit"), "--master", "local[2]", "--jars", jars]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    argv += [APPLY_APPLICATION, "--spec", str(spec_path)]
    job_env = {**env, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    clock = time.monotonic()
    code = run_logged(argv, job_env, home / "idle-job.log", RUN_TIMEOUT_SECONDS)
    seconds = time.monotonic() - clock
    report = ApplyReport.from_json(report_path.read_text(), str(report_path)) if report_path.is_file() else None
    status = report.tables[TABLE].status if report and TABLE in report.tables else None
    if code != 0 or status != "up_to_date":
        raise BenchmarkError(f"the apply job of window {window_id} exited {code} with {TABLE} {status!r}")
    return seconds


# -- main --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    rows: int
    changes: int
    seed: int
    workdir: Path | None
    cutoff: str | None = None
    warm_spark: float = 0.0

    @property
    def conf(self) -> dict[str, Any]:
        """The ``--conf`` of both runs."""
        return {**RUN_CONF, **({"cutoff": self.cutoff} if self.cutoff else {})}


@contextlib.contextmanager
def work_directory(workdir: Path | None) -> Iterator[Path]:
    """``workdir`` (kept afterwards; must be empty or absent) or a temporary directory (deleted)."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="bench-e2e-") as scratch:
            yield Path(scratch)
        return
    if workdir.exists() and any(workdir.iterdir()):
        raise BenchmarkError(f"--workdir {workdir} is not empty")
    workdir.mkdir(parents=True, exist_ok=True)
    yield workdir.resolve()


def benchmark(server: Server, options: Options) -> str:
    """Load, migrate, run once, change, run the timed run, check; return the summary line (printed by
    :func:`main` once the server is gone, so that it is the very last line)."""
    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    execute(server.admin, f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}")
    seconds = load(server.admin, TABLE, options.rows)
    print(f"load table={TABLE} rows={options.rows} seconds={seconds:.1f}", flush=True)
    try:
        jars = ",".join(str(jar) for jar in iceberg_jars.ensure_jars(python=sys.executable))
    except iceberg_jars.JarAssemblyError as exc:
        raise BenchmarkError(f"could not assemble the Iceberg jars: {exc}") from exc
    with work_directory(options.workdir) as home:
        print(f"airflow home: {home}", flush=True)
        env = airflow_env(home, server, jars)
        if options.warm_spark:
            # The example DAG's apply keeps a warm Spark service; its folder goes under this home (TMPDIR).
            (home / "tmp").mkdir()
            env.update({"MYSQL_CDC_WARM_SPARK_SECONDS": str(options.warm_spark), "TMPDIR": str(home / "tmp")})
        try:
            return timed_runs(server, options, home, env, jars)
        finally:
            if options.warm_spark:
                from airflow_provider_mysql_cdc.apply.warm_service import stop_services

                for folder in (home / "tmp").glob("mysql-cdc-spark-*"):
                    print(f"stopped warm Spark services {stop_services(folder)} of {folder}", flush=True)


def timed_runs(server: Server, options: Options, home: Path, env: dict[str, str], jars: str) -> str:
    """The migration, the first run, the changes, the timed run, the checks and the run without a change."""
    if run_logged([str(VENV_BIN / "airflow"), "db", "migrate"], env, home / "db-migrate.log", 600) != 0:
        raise BenchmarkError(f"airflow db migrate failed:\n{(home / 'db-migrate.log').read_text()[-3000:]}")
    first = dags_test(1, env, home, options.conf)
    check_first_run(first, options.rows)

    keys = Keys(TABLE, options.rows, random.Random(options.seed))
    statements = change_statements(keys, options.changes)
    random.Random(options.seed + 1).shuffle(statements)
    started = time.perf_counter()
    execute(server.admin, *statements)
    expected = {op: n for op, n in mix(options.changes).items() if n}
    print(
        f"changes={options.changes} mix={expected} statements={len(statements)} "
        f"seconds={time.perf_counter() - started:.1f}",
        flush=True,
    )

    timed = dags_test(2, env, home, options.conf)
    check_window(timed, home, expected)
    job = apply_job_seconds(home, timed.run_id or "")
    apply_task = task_seconds(timed.tis, ["apply"])["apply"]
    if job is not None:
        print(
            f"apply task {apply_task:.1f} s: the job's own work on the table (staged files, state, MERGE, "
            f"commit) {job:.1f} s, the rest {apply_task - job:.1f} s (spark-submit, the JVM and Spark session "
            "starting and stopping, catalog check, manifests, report, the operator)",
            flush=True,
        )
    check_tables(server, env, home, jars, options.rows + keys.inserted - keys.deleted)
    seconds_by_task = task_seconds(timed.tis, [task_id for task_id, _ in TASKS])

    idle = dags_test(3, env, home, options.conf)
    check_idle_run(idle, 3)
    idle_apply = task_seconds(idle.tis, ["apply"])["apply"]
    job_seconds = idle_job_seconds(home, env, jars, 3)
    print(
        f"idle window 3 (no change): run wall {idle.wall:.1f} s, apply task {idle_apply:.1f} s (planned from the "
        f"Iceberg metadata, no Spark); the apply job for the same window through spark-submit {job_seconds:.1f} s "
        f"(ratio {idle_apply / job_seconds:.3f})",
        flush=True,
    )
    tasks = len({ti.task_id for ti in timed.tis})
    floor = airflow_floor(env, home, tasks)
    print(
        f"airflow floor: `airflow dags test` of {tasks} chained EmptyOperator tasks in the same home "
        f"{floor:.1f} s; the timed run less it {timed.wall - floor:.1f} s",
        flush=True,
    )
    return summary_line(options.changes, timed.wall, seconds_by_task, floor)


def instance_name(explicit: str | None) -> str:
    """``--instance``, else ``bench-e2e`` prefixed with ``$MYSQL_CDC_TEST_INSTANCE_PREFIX-`` when that is set."""
    if explicit:
        return explicit
    prefix = os.environ.get(PREFIX_ENV, "").strip()
    return f"{prefix}-{INSTANCE_NAME}" if prefix else INSTANCE_NAME


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200_000, help="rows loaded before the first run (default 200000)")
    parser.add_argument("--changes", type=int, default=100_000, help="changes of the timed window (default 100000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the key choice and statement order (default 1)")
    parser.add_argument("--mysql-url", help="use this server (mysql://root:PASSWORD@HOST:PORT) instead of a local one")
    parser.add_argument("--instance", help=f"local MySQL instance (default {INSTANCE_NAME}, see above)")
    parser.add_argument("--port", type=int, help="port of the local MySQL instance (default: a free one)")
    parser.add_argument("--workdir", type=Path, help="keep Airflow's home, logs, staging and warehouse here")
    parser.add_argument(
        "--cutoff",
        choices=("data_interval", "catch_up"),
        help="the runs' cut-off param (default: the DAG's, data_interval)",
    )
    parser.add_argument(
        "--warm-spark",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep the apply's and the verify's Spark drivers warm between runs (MYSQL_CDC_WARM_SPARK_SECONDS)",
    )
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        return child_main(args.phase)
    if args.rows < 1 or args.changes < 5:
        parser.error("--rows must be positive and --changes at least 5 (the mix needs every kind)")
    if round(args.changes * 0.8) > args.rows // 2:
        parser.error("--rows must be at least 1.6 x --changes (updated and deleted keys are distinct loaded ids)")
    options = Options(
        rows=args.rows,
        changes=args.changes,
        seed=args.seed,
        workdir=args.workdir,
        cutoff=args.cutoff,
        warm_spark=args.warm_spark,
    )
    server_context = (
        existing_server(args.mysql_url, DATABASE)
        if args.mysql_url
        else local_server(instance_name(args.instance), LOCAL_SETTINGS, args.port)
    )
    return int(print_summary(server_context, lambda server: benchmark(server, options)))


if __name__ == "__main__":
    sys.exit(main())
