#!/usr/bin/env python3
"""The demo behind ``make demo``: a local MySQL under load, three runs of the example DAG, a check.

1. Start clean: the demo's Airflow home ``.airflow-home`` (Airflow's metadata database, the CDC
   metadata, staging and the Iceberg warehouse) is deleted and the ``demo`` database re-created.
2. Start (or reuse) the local MySQL instance ``demo`` on 127.0.0.1, or use ``MYSQL_CDC_EXTERNAL_URL``,
   and load the sample schema ``demo``: a small shop (customers, products, orders, order_items) and
   ``demo.all_types``, one column of every type of the type map with tricky rows.
3. Preflight, ``airflow db migrate``, then a background workload (a thread with its own connection)
   inserts, updates and deletes rows in every demo table, including primary-key changes and
   deletes followed by re-inserts of the same key.
4. ``airflow dags test mysql_cdc_example <now>`` three times in a row (default cut-off
   ``data_interval``: each window holds what was committed before its run's logical date); the
   workload stops before the last one so that the last window holds everything. After each run: the run's state,
   its window (rows by op and table), what the apply did, lag and binlog headroom, read from the
   XComs in Airflow's metadata database.
5. Every Iceberg table ``lake.demo.*`` is compared with its MySQL table
   (:mod:`airflow_provider_mysql_cdc.apply.verify`); the demo fails on any difference. Then it prints
   how to query the tables with pyspark and stops the local MySQL (``DEMO_KEEP_MYSQL=1`` keeps it).

Credentials travel only in the ``AIRFLOW_CONN_MYSQL_CDC_DEFAULT`` environment variable (and the
workload's in-process connection), never on a command line or in the output. Logs of every Airflow
and Spark step are kept in ``.airflow-home/demo-*.log``.

Internal entry points, run by the demo itself in the demo's environment: ``demo.py --read-run
LOGICAL_DATE`` (one run's state and XComs as JSON) and ``demo.py --verify`` (the final check).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# scripts/ (this script's folder) is sys.path[0] already; the repository root holds the testbed package.
sys.path.insert(0, str(REPO_ROOT))

import iceberg_jars  # noqa: E402
import pymysql  # noqa: E402
import s3_jars  # noqa: E402
from demo_data import DEMO_TABLES, Workload, load_sample_schema  # noqa: E402

from testbed.mysql import CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD, LocalMySQL, parse_server_url  # noqa: E402
from testbed.object_store import LocalObjectStore, ObjectStoreAddress  # noqa: E402

DAG_ID = "mysql_cdc_example"
DEMO_PORT = int(os.environ.get("DEMO_MYSQL_PORT", "33306"))
AIRFLOW_HOME = REPO_ROOT / ".airflow-home"
VENV_BIN = Path(sys.executable).parent
WAREHOUSE = AIRFLOW_HOME / "mysql_cdc" / "warehouse"
RUNS = 3
#: A run that takes longer than this is stuck (e.g. ``depends_on_past`` waiting on a failed run).
RUN_TIMEOUT_SECONDS = 30 * 60
RESULT_MARKER = "DEMO-RESULT-JSON: "
CDC_CONN_ENV = "AIRFLOW_CONN_MYSQL_CDC_DEFAULT"
#: ``local`` (staging and warehouse under .airflow-home) or ``s3`` (on a local SeaweedFS, ``make demo STORAGE=s3``).
STORAGE = os.environ.get("DEMO_STORAGE", "local")
OBJECT_STORE_CONN_ID = "demo_object_store"
OBJECT_STORE_CONN_ENV = f"AIRFLOW_CONN_{OBJECT_STORE_CONN_ID.upper()}"
S3_STAGING, S3_WAREHOUSE = "s3://lake/mysql_cdc/staging", "s3://lake/mysql_cdc/warehouse"
#: The object store's S3A settings for pyspark (``--properties-file``; they hold the secret key).
S3_PROPERTIES = AIRFLOW_HOME / "object-store" / "spark-s3.properties"
WAREHOUSE_PLACE = f"{S3_WAREHOUSE}, while the store runs" if STORAGE == "s3" else ".airflow-home/mysql_cdc/warehouse"


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


# -- Airflow -----------------------------------------------------------------------------------------


def read_run(logical_date: str) -> dict[str, Any]:
    """One run of the example DAG as Airflow's metadata database has it: state, task states, XComs.

    Runs in a child process whose environment points AIRFLOW_HOME at the demo's (Airflow reads its
    configuration when it is first imported).
    """
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalars(
            select(DagRun).where(DagRun.dag_id == DAG_ID, DagRun.logical_date == datetime.fromisoformat(logical_date))
        ).one_or_none()
        if run is None:
            return {"state": "missing", "tasks": {}, "xcoms": {}}
        tasks: dict[str, list[str]] = {}
        for ti in session.scalars(
            select(TaskInstance)
            .where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run.run_id)
            .order_by(TaskInstance.start_date, TaskInstance.map_index)
        ):
            tasks.setdefault(ti.task_id, []).append(str(ti.state))
        xcoms: dict[str, dict[str, Any]] = {}
        for xcom in session.scalars(
            select(XComModel)
            .where(XComModel.dag_id == DAG_ID, XComModel.run_id == run.run_id)
            .order_by(XComModel.map_index)
        ):
            value = XComModel.deserialize_value(xcom)
            if xcom.map_index >= 0:  # mapped tasks: a list of their return values
                xcoms.setdefault(xcom.task_id, {}).setdefault("mapped", []).append(value)
            else:
                xcoms.setdefault(xcom.task_id, {})[xcom.key] = value
        return {"state": str(run.state), "run_id": run.run_id, "tasks": tasks, "xcoms": xcoms}


def fetch_run(env: dict[str, str], logical_date: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--read-run", logical_date], env=env, text=True, capture_output=True, check=False
    )
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return dict(json.loads(line[len(RESULT_MARKER) :]))
    print(result.stdout[-2000:] + result.stderr[-2000:], file=sys.stderr)
    return {"state": "unknown (could not read the metadata database)", "tasks": {}, "xcoms": {}}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}min"
    return f"{minutes}min {secs}s" if minutes else f"{secs}s"


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


#: The example DAG's tasks in the order they run (others, e.g. of a changed DAG, are listed after).
TASK_ORDER = ("preflight", "purge_headroom", "snapshot_plan", "snapshot", "capture", "apply")
OPS = ("r", "c", "u", "d")


def _ops(counts: dict[str, int]) -> str:
    return ", ".join(f"{op}={counts[op]}" for op in OPS if counts.get(op)) or "no rows"


def _task_rank(task_id: str) -> int:
    return TASK_ORDER.index(task_id) if task_id in TASK_ORDER else len(TASK_ORDER)


def headroom_line(facts: dict[str, Any]) -> str:
    """Lag and binlog purge headroom from the ``purge_headroom`` sensor's XCom."""
    lag, needed, seconds = facts.get("lag_seconds"), facts.get("oldest_needed_file"), facts.get("headroom_seconds")
    text = f"lag {'n/a' if lag is None else f'{float(lag):.1f} s'}; "
    if needed is None:
        text += "headroom n/a"
    elif seconds is None:
        text += f"headroom unlimited: binlogs are never purged automatically (capture resumes in {needed})"
    else:
        older = f"{facts.get('headroom_files')} older files, {_size(int(facts.get('headroom_bytes') or 0))}"
        text += (
            f"headroom {_duration(seconds)} before {needed}, where capture resumes, may be purged ({older} go first)"
        )
    status = facts.get("status")
    return text + f"; {status}" + (f": {facts.get('message')}" if status != "ok" or needed is None else "")


def print_window(number: int, logical_date: str, seconds: float, log_path: Path, run: dict[str, Any]) -> None:
    """One block per run: state, tasks, the window's rows by op and table, the apply, lag and headroom."""
    xcoms: dict[str, dict[str, Any]] = run["xcoms"]
    print(f"-- run {number} of {RUNS}: {logical_date}  state {run['state']}  ({seconds:.0f} s, log {log_path.name})")
    tasks = sorted(run["tasks"].items(), key=lambda item: _task_rank(item[0]))
    print(
        "   tasks: "
        + ", ".join(
            f"{task} {states[0]}" if len(states) == 1 else f"{task} {len(states)}x {'/'.join(sorted(set(states)))}"
            for task, states in tasks
        )
    )
    headroom = xcoms.get("purge_headroom", {})
    facts = headroom.get("return_value") if isinstance(headroom.get("return_value"), dict) else headroom
    print("   " + (headroom_line(facts) if facts and "headroom_seconds" in facts else "lag n/a; headroom n/a"))
    chunks = xcoms.get("snapshot", {}).get("mapped", [])
    if chunks:
        rows: Counter[str] = Counter()
        for chunk in chunks:
            rows[chunk["table"]] += int(chunk["rows"])
        print(f"   snapshot: {len(chunks)} chunks, " + ", ".join(f"{t} {n} rows" for t, n in sorted(rows.items())))
    capture = xcoms.get("capture", {}).get("return_value") or {}
    if "window_id" in capture:
        print(
            f"   window {capture['window_id']}: {capture.get('transactions')} transactions, "
            f"rows by op {_ops(capture.get('rows_by_op') or {})}"
        )
        print(f"     GTIDs {capture.get('lower') or '(empty)'}  ->  {capture.get('upper')}")
        by_table: dict[str, dict[str, int]] = capture.get("rows_by_table") or {}
        if by_table:
            print(f"     {'rows by table':<20}" + "".join(f"{op:>7}" for op in OPS[1:]))
            for table, counts in sorted(by_table.items()):
                print(f"     {table:<20}" + "".join(f"{counts.get(op, 0):>7}" for op in OPS[1:]))
    elif capture:
        print(f"   capture: {capture}")
    apply = xcoms.get("apply", {}).get("return_value") or {}
    for table, report in sorted((apply.get("tables") or {}).items()):
        print(f"   apply {table:<18} {report['status']:<10} {_ops(report.get('rows') or {})}")


# -- the final check ------------------------------------------------------------------------------


def spark_settings(jars: str) -> dict[str, str]:
    """The Spark settings of a local session that reads the demo's warehouse as catalog ``lake`` (on S3:
    without the store's keys, which :func:`object_store_properties` gives)."""
    return {
        "spark.jars": jars,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": S3_WAREHOUSE if STORAGE == "s3" else str(WAREHOUSE),
    }


def object_store_properties(connection_json: str) -> dict[str, str]:
    """The S3A Spark properties of the demo's object store connection (they hold its secret key)."""
    from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings

    conn = json.loads(connection_json)
    extra = conn.get("extra") or {}
    settings = ObjectStoreSettings(conn["login"], conn["password"], extra["endpoint_url"], extra["region_name"])
    return settings.spark_properties()


def start_object_store() -> tuple[LocalObjectStore, ObjectStoreAddress]:
    """SeaweedFS on 127.0.0.1 with bucket ``lake``; its S3A properties written for pyspark (mode 0600)."""
    store = LocalObjectStore(AIRFLOW_HOME / "object-store", bucket="lake")
    address = store.start()
    descriptor = os.open(S3_PROPERTIES, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        for key, value in object_store_properties(object_store_connection(address)).items():
            out.write(f"{key}={value}\n")
    return store, address


def object_store_connection(address: ObjectStoreAddress) -> str:
    """The store as an Airflow ``aws`` connection (the fields a user gives for AWS)."""
    extra = {"endpoint_url": address.endpoint_url, "region_name": address.region}
    return json.dumps({"conn_type": "aws", "login": address.access_key, "password": address.secret_key, "extra": extra})


def verify_tables() -> int:
    """Child process: compare every demo table with its Iceberg table; 0 when all are equal."""
    from pyspark.sql import SparkSession

    from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql
    from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

    conn = json.loads(os.environ[CDC_CONN_ENV])
    source = MySqlConnectionConfig(
        host=conn["host"], port=int(conn["port"]), user=conn["login"], password=conn["password"]
    )
    builder = SparkSession.builder.master("local[2]").appName("mysql-cdc-demo-verify")
    settings = {
        **spark_settings(os.environ["MYSQL_CDC_ICEBERG_JARS"]),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
    }
    if STORAGE == "s3":
        settings.update(object_store_properties(os.environ[OBJECT_STORE_CONN_ENV]))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        results = compare_with_mysql(spark, source, DEMO_TABLES, catalog="lake")
    finally:
        spark.stop()
    for result in results:
        print(("   " if result.equal else " ! ") + result.describe(), flush=True)
    return 0 if all(result.equal for result in results) else 1


def pyspark_hint(jars: str) -> str:
    options = [
        f"--conf {key}={shlex.quote(value)}" for key, value in spark_settings(jars).items() if key != "spark.jars"
    ]
    command = " \\\n    ".join(
        [
            f"SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON={shlex.quote(sys.executable)} "
            f"{shlex.quote(str(VENV_BIN / 'pyspark'))} --master 'local[2]'",
            f"--jars {shlex.quote(jars)}",
            *([f"--properties-file {shlex.quote(str(S3_PROPERTIES))}"] if STORAGE == "s3" else []),
            *options,
        ]
    )
    return (
        f"{command}\n"
        "then, at the >>> prompt:\n"
        '    spark.sql("SHOW TABLES IN lake.demo").show()\n'
        '    spark.sql("SELECT status, count(*), sum(amount) FROM lake.demo.orders GROUP BY status").show()\n'
        '    spark.sql("SELECT id, wide, dur, title, doc, _cdc_invalid_values FROM lake.demo.all_types '
        'WHERE id <= 5 ORDER BY id").show(truncate=24)\n'
        "    spark.sql(\"SELECT committed_at, summary['cdc.window-id'] AS window FROM lake.demo.orders.snapshots\")"
        ".show(truncate=False)"
    )


# -- main -------------------------------------------------------------------------------------------


def start_clean() -> None:
    """Delete what an earlier demo left in its Airflow home (databases, staging, warehouse, logs)."""
    if AIRFLOW_HOME.exists():
        assert AIRFLOW_HOME.parent == REPO_ROOT and AIRFLOW_HOME.name == ".airflow-home", AIRFLOW_HOME
        shutil.rmtree(AIRFLOW_HOME)
    AIRFLOW_HOME.mkdir()


def demo_env(
    host: str, port: int, cdc_password: str, jars: str, object_store: ObjectStoreAddress | None
) -> dict[str, str]:
    on_s3: dict[str, str] = {}
    if object_store is not None:
        on_s3 = {
            OBJECT_STORE_CONN_ENV: object_store_connection(object_store),
            "MYSQL_CDC_OBJECT_STORE_CONN_ID": OBJECT_STORE_CONN_ID,
            "DEMO_STORAGE": "s3",
        }
    return {
        **on_s3,
        **os.environ,
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Spark in local mode on this machine, Iceberg from the jar `make jars` assembled (no Maven).
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "MYSQL_CDC_ICEBERG_JARS": jars,
        CDC_CONN_ENV: json.dumps(
            {
                "conn_type": "mysql_cdc",
                "host": host,
                "port": port,
                "login": "cdc",
                "password": cdc_password,
                "extra": {"server_id": 4242},
            }
        ),
    }


def run_logged(argv: list[str], env: dict[str, str], log_path: Path, timeout: float | None = None) -> int:
    """Run a command with its output in ``log_path``; returns its exit code (-9 after a timeout)."""
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    with log_path.open("w") as log:
        try:
            return subprocess.run(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            print(f"demo: timed out after {timeout:.0f} s", file=sys.stderr)
            return -9


def prepare_airflow(env: dict[str, str]) -> bool:
    """The preflight CLI, then Airflow's metadata database; False (after printing why) on a failure."""
    step("preflight (python -m airflow_provider_mysql_cdc preflight)")
    preflight = subprocess.run(
        [sys.executable, "-m", "airflow_provider_mysql_cdc", "preflight", "--tables", "demo.*"],
        env=env,
        text=True,
        capture_output=True,
        check=False,
    )
    print(preflight.stdout + preflight.stderr)
    if preflight.returncode != 0:
        print("demo: preflight found problems (see above)", file=sys.stderr)
        return False
    step("Airflow metadata database on SQLite (.airflow-home)")
    log_path = AIRFLOW_HOME / "demo-db-migrate.log"
    if run_logged([str(VENV_BIN / "airflow"), "db", "migrate"], env, log_path) != 0:
        print(log_path.read_text()[-4000:], file=sys.stderr)
        return False
    return True


def run_windows(env: dict[str, str], workload: Workload) -> bool:
    """Three consecutive runs of the example DAG, the workload stopped before the last one."""
    # Each run's logical date is the moment it starts, so its data interval ends there: the default
    # cut-off `data_interval`
    # gives window k exactly the transactions committed between the starts of runs k-1 and k (the
    # first window starts at the pipeline's registration, after which the snapshot was read).
    for number in range(1, RUNS + 1):
        if number == RUNS:
            workload.stop()
            step(f"workload stopped before the last run: {workload.summary()}")
        logical_date = datetime.now(UTC).isoformat()
        step(f"run {number} of {RUNS}: airflow dags test {DAG_ID} {logical_date}")
        log_path = AIRFLOW_HOME / f"demo-run-{number}.log"
        run_started = time.monotonic()
        on_s3 = (
            ["--conf", json.dumps({"staging_uri": S3_STAGING, "warehouse": S3_WAREHOUSE})] if STORAGE == "s3" else []
        )
        code = run_logged(
            [str(VENV_BIN / "airflow"), "dags", "test", DAG_ID, logical_date, *on_s3],
            env,
            log_path,
            timeout=RUN_TIMEOUT_SECONDS,
        )
        run = fetch_run(env, logical_date)
        print_window(number, logical_date, time.monotonic() - run_started, log_path, run)
        if code != 0 or run["state"] != "success":
            print(log_path.read_text()[-4000:], file=sys.stderr)
            print(f"demo: run {number} did not succeed (full log: {log_path})", file=sys.stderr)
            return False
    return True


def final_check(env: dict[str, str]) -> bool:
    """Every Iceberg table against its MySQL table, in a child process (Spark's output goes to a log)."""
    step("check: every Iceberg table equals its MySQL table (a fresh snapshot compared through Spark)")
    log_path = AIRFLOW_HOME / "demo-verify.log"
    with log_path.open("w") as log:
        verify = subprocess.run([sys.executable, __file__, "--verify"], env=env, stderr=log, check=False)
    if verify.returncode != 0:
        print(log_path.read_text()[-3000:], file=sys.stderr)
        print("demo: an Iceberg table differs from its MySQL table (see above)", file=sys.stderr)
        return False
    return True


def jars_and_object_store() -> tuple[list[Path], LocalObjectStore | None, ObjectStoreAddress | None]:
    """The jars Spark needs, and with ``STORAGE=s3`` the local S3 store, started."""
    jar_files = list(iceberg_jars.ensure_jars(python=sys.executable))
    if STORAGE != "s3":
        return jar_files, None, None
    step(f"starting a local S3 store (SeaweedFS): staging {S3_STAGING}, warehouse {S3_WAREHOUSE}")
    store, address = start_object_store()
    return [*jar_files, *s3_jars.ensure_s3_jars()], store, address


def main() -> int:
    started = time.monotonic()
    step("starting clean: deleting .airflow-home (Airflow and CDC metadata, staging, Iceberg warehouse)")
    start_clean()
    external = os.environ.get("MYSQL_CDC_EXTERNAL_URL")
    server: LocalMySQL | None = None
    workload: Workload | None = None
    store: LocalObjectStore | None = None
    if external:
        step("using the MySQL server from MYSQL_CDC_EXTERNAL_URL")
        parts = parse_server_url(external)
        host, port = parts.host, parts.port
        admin = {"user": parts.user, "password": parts.password}
        cdc_password = os.environ.get(CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD)
    else:
        step(f"starting the local MySQL instance 'demo' on 127.0.0.1:{DEMO_PORT}")
        server = LocalMySQL("demo", port=DEMO_PORT)
        server.start()
        host, port = server.host, server.port
        admin = {"user": "root", "password": server.root_password}
        cdc_password = server.cdc_password

    def connect() -> Any:
        return pymysql.connect(
            host=host,
            port=port,
            user=admin["user"],
            password=admin["password"],
            autocommit=False,
            init_command="SET time_zone = '+00:00'",  # TIMESTAMP values are written as UTC
        )

    try:
        with connect() as connection:
            with connection.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                version = str(cursor.fetchone()[0])
            vector = int(version.split(".", maxsplit=1)[0]) >= 9
            step(f"loading the sample schema 'demo' (MySQL {version}; VECTOR column: {'yes' if vector else 'no'})")
            counts = load_sample_schema(connection, vector, random.Random(42))
        print(", ".join(f"{table} {n} rows" for table, n in counts.items()))
        jar_files, store, address = jars_and_object_store()
        jars = ",".join(str(jar) for jar in jar_files)
        env = demo_env(host, port, cdc_password, jars, address)
        if not prepare_airflow(env):
            return 1
        step("starting the background workload (inserts, updates, deletes, key changes on every demo table)")
        workload = Workload(connect, vector)
        workload.start()
        if not run_windows(env, workload) or not final_check(env):
            return 1
        step(f"query the Iceberg tables with pyspark (they stay in {WAREHOUSE_PLACE})")
        print(pyspark_hint(jars))
        print(f"\ndemo: done in {time.monotonic() - started:.0f} s: {RUNS} windows applied, every table equal")
        return 0
    finally:
        if workload is not None:
            workload.stop()
        if store is not None:
            store.stop()
        if server is not None and os.environ.get("DEMO_KEEP_MYSQL") != "1":
            step("stopping the local MySQL instance 'demo' (DEMO_KEEP_MYSQL=1 keeps it running)")
            server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--read-run"]:
        print(RESULT_MARKER + json.dumps(read_run(sys.argv[2]), default=str), flush=True)
        raise SystemExit(0)
    if sys.argv[1:] == ["--verify"]:
        raise SystemExit(verify_tables())
    raise SystemExit(main())
