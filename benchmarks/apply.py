"""Apply cost against table size: one window of changes MERGEd into a small and a large Iceberg table.

What it measures, in one run, with one SparkSession for both tables:

1. **Load** (not timed). Two MySQL tables of the same schema (BIGINT key, INT, VARCHAR(40),
   DECIMAL(12,2), DATETIME(6)): ``bench.apply_small`` with ``--small-rows`` rows and
   ``bench.apply_large`` with ``--large-rows`` rows (ids 1..N), deterministic values computed by the
   server (``INSERT ... SELECT`` over a recursive CTE, 100,000 rows a statement, admin account,
   ``sql_log_bin = 0``: the snapshot reads the tables, not the binlog).
2. **Snapshot and warm-up** (not timed). Two pipelines, one per table (``benchapply-small`` and
   ``benchapply-large``, each with its own SQLite ``FrontierStore``; staging and the Hadoop Iceberg
   warehouse in a temporary directory): ``plan_snapshot`` and every chunk through ``snapshot_chunk``,
   one after the other. Then a warm-up change set per table (``--warmup-changes``, default as many as
   a timed window, the mix below), ``capture_window`` (catch-up) of window 1 per pipeline and
   ``run_apply`` of window 1 per pipeline: that loads the snapshot into the target table, then MERGEs
   window 1, so the JVM, the catalog and Spark's code paths are warm before the clock starts.
3. **Rounds** (``--rounds``, default 3), each:

   a. **Changes** (not timed): ``--changes`` changes per table with the same mix: 60% updates of
      existing keys (every non-key column changes), 20% inserts of new keys (above the largest id)
      and 20% deletes of existing keys; the updated and deleted keys are drawn at random
      (``--seed``) from the loaded ids, never one twice in the whole run, so the window holds
      exactly ``--changes`` changed keys per table. The statements (1,000 keys each, in a seeded
      random order of the two tables and the three kinds) run through the admin account with the
      binlog on. Then ``capture_window`` of the round's window (2, 3, ...) per pipeline.
   b. **Apply** (timed): ``run_apply`` of that window for each table, in the same SparkSession;
      the small table goes first in odd rounds, the large one in even rounds (what runs first is
      a little slower, the JIT still warming up). The clock covers the whole ``run_apply`` call
      (reading the manifest, planning from the table's state, schema check, the ``MERGE INTO``
      and its commit).

   The last line reports each table's median over the rounds (the single figures are printed
   before it); ``--rounds 1`` times one window per table, small table first.

After each timed apply the Iceberg table is checked against MySQL (no writer runs in between): row
count, ``SUM(id)``, ``SUM(a)`` and ``SUM(c)`` must be equal (updates change ``a`` and ``c``), and the
row count must be what the load and the change sets imply; the benchmark fails (exit code 1)
otherwise, or when the apply reports a failed table or applied another window than the round's. Per
apply it also prints the commit's summary figures (data and delete files and records added and
removed, data and delete files in the table) from the table's ``snapshots`` metadata table, and where
the apply's time went (``stages``): wall seconds of the apply's top-level ``TableApplier`` calls
(``_source``: staged files checked and read into a DataFrame; ``_ensure_target``: schema check;
``read_state``: table refresh and state; ``_exists``; ``_merge``: the ``MERGE INTO`` and its
commit), measured by wrapping those methods in this process (the package is not changed); ``other``
is the rest of ``run_apply``. Inside ``merge`` it also reports ``key_filter``: the Spark job that
hashes the staged keys for the MERGE's key filter (``KeyFilter`` in ``apply/plan.py``).

``--write-mode copy-on-write`` and ``--bucket N`` change the target tables after the warm-up (not
timed): the first sets ``write.{merge,update,delete}.mode`` (the package creates its targets
merge-on-read), the second adds the partition field ``bucket(N, id)`` and rewrites every data file
with ``rewrite_data_files`` so the table is laid out by it. ``--no-key-filter`` MERGEs without the
key filter, as the apply did before it had one (every key of the target is shuffled). They are for
comparisons; the default run measures the tables and the apply as the package creates and runs them.

Spark runs in this process: ``local[2]`` (``--spark-cores``), ``spark.sql.shuffle.partitions`` 4
(``--shuffle-partitions``; the apply job leaves Spark's default), the
Iceberg runtime jars from ``scripts/iceberg_jars.py`` on ``spark.jars`` before the JVM starts, a
Hadoop catalog ``lake``, driver bound to 127.0.0.1 and no UI.

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``benchapply``; see
:mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/apply.py
    .venv/bin/python benchmarks/apply.py --small-rows 100000 --large-rows 300000 --changes 10000
    .venv/bin/python benchmarks/apply.py --write-mode copy-on-write
    .venv/bin/python benchmarks/apply.py --no-key-filter

The last line printed is always::

    apply changes=<n> small_table_s=<a> large_table_s=<b> ratio=<b/a>

The cost of an apply should follow the number of changes, not the size of the table: a ratio near 1.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

# scripts/ is not a package: mypy finds these only when given scripts/ too (as `make lint` would), and
# mysql_bench (this folder, sys.path[0] of a script) it checks only as benchmarks.mysql_bench.
import iceberg_jars  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
    BenchmarkError,
    Server,
    execute,
    local_server,
    print_summary,
    require_positive,
)

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_mysql_cdc.apply.contract import TableReport
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

DATABASE = "bench"
#: ``spark.sql.shuffle.partitions`` of the benchmark's session (small: local mode on two cores).
DEFAULT_SHUFFLE_PARTITIONS = 4
INSTANCE_NAME = "benchapply"
PIPELINE_PREFIX = "benchapply"
CATALOG = "lake"
ROWS_PER_STATEMENT = 100_000
KEYS_PER_STATEMENT = 1_000
DEFAULT_WARMUP_CHANGES = 10_000
DEFAULT_ROUNDS = 3
#: Server options of the local instance: a buffer pool that holds both tables, no fsync per commit.
LOCAL_SETTINGS = {
    "innodb_buffer_pool_size": "1G",
    "innodb_flush_log_at_trx_commit": "2",
    "sync_binlog": "0",
}
CREATE_TABLE = """CREATE TABLE {table} (
    id BIGINT NOT NULL PRIMARY KEY,
    a INT NOT NULL,
    b VARCHAR(40) NOT NULL,
    c DECIMAL(12,2) NOT NULL,
    d DATETIME(6) NOT NULL
)"""
#: The values of row ``n`` (deterministic).
ROW_EXPRESSIONS = {
    "id": "n",
    "a": "(n * 2654435761) % 4294967296 - 2147483648",
    "b": "CONCAT('name-', LPAD(n, 10, '0'), '-', REPEAT('x', n % 16))",
    "c": "((n * 104729) % 10000000000 DIV 100) + (n % 100) / 100",
    "d": "TIMESTAMP('2024-01-01 00:00:00') + INTERVAL n * 37 SECOND + INTERVAL (n * 7919) % 1000000 MICROSECOND",
}
#: What an update does to a row (every non-key column changes; ``a`` stays an INT, ``c`` fits).
UPDATE_SET = (
    "a = (a + 7919) % 2147483647, b = CONCAT('updated-', id), c = (c + 1.25) % 9999999999, d = d + INTERVAL 1 SECOND"
)
#: The TableApplier methods whose wall time is reported per stage (top-level calls only).
STAGE_METHODS = ("_source", "_ensure_target", "read_state", "_exists", "_merge")
#: Parts of a stage reported on their own as well (inside the stage's figure): the key filter's
#: Spark job (hashes of the change set's keys) runs inside ``_merge``, before the MERGE statement.
SUB_STAGE_METHODS = ("_key_filter",)


# -- the tables and their changes ---------------------------------------------------------------


def insert_statement(table: str, first: int, last: int) -> str:
    """``INSERT ... SELECT`` of the rows with ids ``first..last`` (a recursive CTE of two levels)."""
    low_end = min(last - first, 999)
    high_end = (last - first) // 1_000
    columns = ", ".join(ROW_EXPRESSIONS)
    values = ", ".join(f"{expression} AS {name}" for name, expression in ROW_EXPRESSIONS.items())
    return (
        f"INSERT INTO {table} ({columns}) "
        f"WITH RECURSIVE low (n) AS (SELECT CAST(0 AS SIGNED) UNION ALL SELECT n + 1 FROM low WHERE n < {low_end}), "
        f"high (n) AS (SELECT CAST(0 AS SIGNED) UNION ALL SELECT n + 1 FROM high WHERE n < {high_end}) "
        f"SELECT {values} FROM (SELECT {int(first)} + high.n * 1000 + low.n AS n FROM high CROSS JOIN low) AS s "
        f"WHERE s.n <= {int(last)}"
    )


def fill(admin: MySqlConnectionConfig, table: str, ids: int, *then: str) -> None:
    """Insert ids 1..ids into ``table``, run the statements ``then`` in the same session (no binlog for
    any of them), then ANALYZE the table."""
    connection = pymysql.connect(**admin.pymysql_kwargs(), autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION sql_log_bin = 0")
            for first in range(1, ids + 1, ROWS_PER_STATEMENT):
                cursor.execute(insert_statement(table, first, min(first + ROWS_PER_STATEMENT - 1, ids)))
            for statement in then:
                cursor.execute(statement)
            cursor.execute(f"ANALYZE TABLE {table}")
            cursor.fetchall()
    finally:
        connection.close()


def load(admin: MySqlConnectionConfig, table: str, rows: int) -> float:
    """Create the table and fill it with ids 1..rows (no binlog); returns seconds."""
    execute(admin, CREATE_TABLE.format(table=table))
    started = time.perf_counter()
    fill(admin, table, rows)
    count = int(execute(admin, f"SELECT COUNT(*) FROM {table}")[0][0])
    if count != rows:
        raise BenchmarkError(f"the load left {count} rows in {table}, expected {rows}")
    return time.perf_counter() - started


def mix(changes: int) -> dict[str, int]:
    """Updates, inserts and deletes of a change set: 60% / 20% / 20%."""
    updates = round(changes * 0.6)
    inserts = round(changes * 0.2)
    return {"u": updates, "c": inserts, "d": changes - updates - inserts}


@dataclass
class Keys:
    """One table's keys: existing keys are handed out at random, each at most once; new keys count up."""

    table: str
    rows: int
    rng: random.Random
    used: set[int] = field(default_factory=set)
    next_new: int = 0
    #: Rows inserted and deleted by the change sets so far.
    inserted: int = 0
    deleted: int = 0

    def __post_init__(self) -> None:
        self.next_new = self.rows + 1

    def existing(self, count: int) -> list[int]:
        """``count`` random existing keys (of the loaded ids) never handed out before."""
        if len(self.used) + count > self.rows // 2:
            raise BenchmarkError(f"{self.table} has too few rows for {count} more updated or deleted keys")
        taken: set[int] = set()
        while len(taken) < count:
            key = self.rng.randint(1, self.rows)
            if key not in self.used:
                taken.add(key)
                self.used.add(key)
        return sorted(taken)

    def new(self, count: int) -> tuple[int, int]:
        """The range ``(first, last)`` of ``count`` new keys."""
        first = self.next_new
        self.next_new += count
        return first, first + count - 1


def change_statements(keys: Keys, changes: int) -> list[str]:
    """The statements of one change set of a table (each of at most 1,000 keys)."""
    counts = mix(changes)
    statements: list[str] = []
    updated, deleted = keys.existing(counts["u"]), keys.existing(counts["d"])
    keys.inserted += counts["c"]
    keys.deleted += counts["d"]
    for start in range(0, len(updated), KEYS_PER_STATEMENT):
        chunk = ",".join(str(k) for k in updated[start : start + KEYS_PER_STATEMENT])
        statements.append(f"UPDATE {keys.table} SET {UPDATE_SET} WHERE id IN ({chunk})")
    for start in range(0, len(deleted), KEYS_PER_STATEMENT):
        chunk = ",".join(str(k) for k in deleted[start : start + KEYS_PER_STATEMENT])
        statements.append(f"DELETE FROM {keys.table} WHERE id IN ({chunk})")
    first, last = keys.new(counts["c"])
    for start in range(first, last + 1, KEYS_PER_STATEMENT):
        statements.append(insert_statement(keys.table, start, min(start + KEYS_PER_STATEMENT - 1, last)))
    return statements


def make_changes(admin: MySqlConnectionConfig, tables: list[Keys], changes: int, rng: random.Random) -> float:
    """One change set per table, the statements of both in a random order; returns seconds."""
    statements = [statement for keys in tables for statement in change_statements(keys, changes)]
    rng.shuffle(statements)
    started = time.perf_counter()
    execute(admin, *statements)
    return time.perf_counter() - started


def mysql_figures(admin: MySqlConnectionConfig, table: str) -> tuple[int, int, int, Decimal]:
    """(rows, SUM(id), SUM(a), SUM(c)) of the MySQL table."""
    count, id_sum, a_sum, c_sum = execute(admin, f"SELECT COUNT(*), SUM(id), SUM(a), SUM(c) FROM {table}")[0]
    return int(count), int(id_sum or 0), int(a_sum or 0), Decimal(c_sum or 0)


# -- the pipelines ------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """One table's pipeline: its name, store and the shared staging directory."""

    name: str
    table: str
    staging: str
    store: FrontierStore
    server_id: int

    @property
    def target(self) -> str:
        database, table = self.table.split(".", 1)
        return f"{CATALOG}.{database}.{table}"

    def snapshot(self, cdc: MySqlConnectionConfig) -> tuple[int, int]:
        """Plan and run every chunk, one after the other; returns (chunks, rows)."""
        from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
        from airflow_provider_mysql_cdc.core.windows import TableSelection
        from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, plan_snapshot, snapshot_chunk

        request = SnapshotRequest(
            pipeline=self.name, run_id="bench-run-1", staging_uri=self.staging, tables=TableSelection.of(self.table)
        )
        plan = plan_snapshot(request, cdc, self.store)
        rows = 0
        for argument in plan.mapped_arguments():
            chunk = SnapshotChunk.from_json(argument["chunk"])
            rows += snapshot_chunk(request, argument["snapshot_id"], chunk, cdc, self.store).rows
        return len(plan.chunks), rows

    def capture(self, cdc: MySqlConnectionConfig, run: int) -> tuple[int, dict[str, int]]:
        """Capture (catch-up) the next window; returns (window id, staged rows by op)."""
        from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
        from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection

        request = CaptureRequest(
            pipeline=self.name,
            run_id=f"bench-run-{run}",
            staging_uri=self.staging,
            cutoff=CutoffRule.CATCH_UP,
            tables=TableSelection.of(self.table),
            replica_server_id=self.server_id,
        )
        result = capture_window(request, cdc, self.store)
        return result.window_id, dict(result.op_counts)


def apply_window(spark: SparkSession, pipeline: Pipeline, window_id: int) -> TableReport:
    """``run_apply`` of one window; the table's report, after checking it applied that window."""
    from airflow_provider_mysql_cdc.apply.contract import ApplySpec, TableReport
    from airflow_provider_mysql_cdc.apply.spark_job import run_apply

    report = run_apply(spark, ApplySpec(pipeline.name, pipeline.staging, window_id, window_id, catalog=CATALOG))
    table = report.tables.get(pipeline.table) or TableReport(pipeline.target, status="absent")
    if report.failed or table.status != "applied" or table.windows_applied != [window_id]:
        raise BenchmarkError(
            f"apply of window {window_id} to {pipeline.target}: status {table.status!r}, "
            f"windows {table.windows_applied}, error {table.error!r}"
        )
    return table


# -- Spark --------------------------------------------------------------------------------------


def spark_session(
    scratch: Path, cores: int, driver_memory: str, shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS
) -> SparkSession:
    """A local SparkSession with Iceberg's extensions and a Hadoop catalog in ``scratch``."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise BenchmarkError("a Spark JVM already runs in this process without the Iceberg jars")
    try:
        jars = iceberg_jars.ensure_jars(python=sys.executable)
    except iceberg_jars.JarAssemblyError as exc:
        raise BenchmarkError(f"could not assemble the Iceberg jars: {exc}") from exc
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("airflow-provider-mysql-cdc-bench-apply")
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(scratch / "spark-local"))
        .config("spark.sql.warehouse.dir", str(scratch / "spark-warehouse"))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
        .config(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
        .config(f"spark.sql.catalog.{CATALOG}.warehouse", str(scratch / "warehouse"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def iceberg_figures(spark: SparkSession, target: str) -> tuple[int, int, int, Decimal]:
    """(rows, SUM(id), SUM(a), SUM(c)) of the Iceberg table."""
    spark.sql(f"REFRESH TABLE {target}")
    row = spark.sql(f"SELECT COUNT(*), SUM(id), SUM(a), SUM(c) FROM {target}").collect()[0]
    return int(row[0]), int(row[1] or 0), int(row[2] or 0), Decimal(row[3] or 0)


def last_commit(spark: SparkSession, target: str) -> dict[str, str]:
    """The summary of the table's newest snapshot (plus its operation)."""
    row = spark.sql(f"SELECT operation, summary FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    return {"operation": str(row[0][0]), **{str(k): str(v) for k, v in dict(row[0][1]).items()}}


def change_layout(spark: SparkSession, target: str, write_mode: str | None, bucket: int | None) -> str:
    """Alternative table settings for comparisons (after the warm-up, not timed); returns a description."""
    done = []
    if write_mode:
        modes = ", ".join(f"'write.{op}.mode' = '{write_mode}'" for op in ("merge", "update", "delete"))
        spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ({modes})")
        done.append(f"write_mode={write_mode}")
    if bucket:
        spark.sql(f"ALTER TABLE {target} ADD PARTITION FIELD bucket({int(bucket)}, id)")
        table_name = target.split(".", 1)[1]
        spark.sql(
            f"CALL {CATALOG}.system.rewrite_data_files(table => '{table_name}', options => map('rewrite-all', 'true'))"
        ).collect()
        spark.sql(f"CALL {CATALOG}.system.rewrite_position_delete_files(table => '{table_name}')").collect()
        done.append(f"partitioned_by=bucket({bucket},id)")
    return " ".join(done)


# -- stage timings ------------------------------------------------------------------------------


@contextlib.contextmanager
def stage_clock(
    stage_methods: Sequence[str] = STAGE_METHODS, sub_stage_methods: Sequence[str] = SUB_STAGE_METHODS
) -> Iterator[dict[str, float]]:
    """Wall seconds of the top-level calls of ``stage_methods`` (default :data:`STAGE_METHODS`) on
    ``TableApplier`` while inside, and of the calls of ``sub_stage_methods`` (default
    :data:`SUB_STAGE_METHODS`; they are also inside some stage's figure)."""
    from airflow_provider_mysql_cdc.apply.table_applier import TableApplier

    seconds: dict[str, float] = dict.fromkeys((*stage_methods, *sub_stage_methods), 0.0)
    depth = {"stage": 0, **dict.fromkeys(sub_stage_methods, 0)}
    names = [name for name in (*stage_methods, *sub_stage_methods) if hasattr(TableApplier, name)]
    originals = {name: getattr(TableApplier, name) for name in names}

    def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        counter = name if name in sub_stage_methods else "stage"

        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth[counter] += 1
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                depth[counter] -= 1
                if depth[counter] == 0:
                    seconds[name] += time.perf_counter() - started

        return wrapper

    for name, method in originals.items():
        setattr(TableApplier, name, timed(name, method))
    try:
        yield seconds
    finally:
        for name, method in originals.items():
            setattr(TableApplier, name, method)


@contextlib.contextmanager
def without_key_filter() -> Iterator[None]:
    """MERGE without the key filter while inside (``--no-key-filter``)."""
    from airflow_provider_mysql_cdc.apply.table_applier import TableApplier

    original = TableApplier._key_filter
    TableApplier._key_filter = lambda *args, **kwargs: (None, None)  # type: ignore[method-assign]
    try:
        yield
    finally:
        TableApplier._key_filter = original  # type: ignore[method-assign]


# -- main ---------------------------------------------------------------------------------------


@dataclass
class Options:
    small_rows: int
    large_rows: int
    changes: int
    warmup_changes: int
    seed: int
    spark_cores: int
    driver_memory: str
    write_mode: str | None
    bucket: int | None
    key_filter: bool
    rounds: int
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS


COMMIT_FIGURES = (
    "added-data-files",
    "added-records",
    "added-delete-files",
    "added-position-deletes",
    "deleted-data-files",
    "removed-delete-files",
    "removed-position-deletes",
    "deleted-records",
    "total-data-files",
    "total-delete-files",
    "total-records",
)


def prepare(server: Server, options: Options, scratch: Path) -> tuple[dict[str, Keys], dict[str, Pipeline]]:
    """Load both tables and snapshot each through its own pipeline (not timed)."""
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    execute(server.admin, f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}")
    rng = random.Random(options.seed)
    keys: dict[str, Keys] = {}
    pipelines: dict[str, Pipeline] = {}
    for number, (size, rows) in enumerate((("small", options.small_rows), ("large", options.large_rows))):
        table = f"{DATABASE}.apply_{size}"
        seconds = load(server.admin, table, rows)
        print(f"load table={table} rows={rows} seconds={seconds:.1f}", flush=True)
        keys[size] = Keys(table, rows, random.Random(rng.random()))
        store = FrontierStore.from_url(f"sqlite:///{scratch / f'meta-{size}.db'}")
        store.ensure_schema()
        pipeline = Pipeline(f"{PIPELINE_PREFIX}-{size}", table, str(scratch / "staging"), store, 4_500_001 + number)
        started = time.perf_counter()
        chunks, staged = pipeline.snapshot(server.cdc)
        if staged != rows:
            raise BenchmarkError(f"the snapshot of {table} staged {staged} rows, expected {rows}")
        print(f"snapshot table={table} chunks={chunks} seconds={time.perf_counter() - started:.1f}", flush=True)
        pipelines[size] = pipeline
    return keys, pipelines


def warm_up(spark: SparkSession, server: Server, options: Options, pipelines: dict[str, Pipeline]) -> None:
    """Window 1 of each pipeline: loads the snapshot, then MERGEs the warm-up changes (not timed)."""
    for pipeline in pipelines.values():
        window_id, ops = pipeline.capture(server.cdc, 1)
        if window_id != 1 or sum(ops.values()) != options.warmup_changes:
            raise BenchmarkError(f"the warm-up capture of {pipeline.name}: window {window_id}, staged rows {ops}")
        started = time.perf_counter()
        apply_window(spark, pipeline, 1)
        seconds = time.perf_counter() - started
        commit = last_commit(spark, pipeline.target)
        layout = change_layout(spark, pipeline.target, options.write_mode, options.bucket)
        print(
            f"warm-up table={pipeline.table} window=1 ops={ops} apply_seconds={seconds:.1f} "
            f"data_files={commit.get('total-data-files')} delete_files={commit.get('total-delete-files')}"
            + (f" then {layout}" if layout else ""),
            flush=True,
        )


def timed_apply(spark: SparkSession, server: Server, pipeline: Pipeline, keys: Keys, window_id: int) -> float:
    """Time ``run_apply`` of one window, print its figures, check the table against MySQL; returns seconds."""
    before = last_commit(spark, pipeline.target)
    with stage_clock() as stages:
        started = time.perf_counter()
        report = apply_window(spark, pipeline, window_id)
        seconds = time.perf_counter() - started
    commit = last_commit(spark, pipeline.target)
    expected = mysql_figures(server.admin, pipeline.table)
    found = iceberg_figures(spark, pipeline.target)
    expected_rows = keys.rows + keys.inserted - keys.deleted
    print(
        f"apply table={pipeline.table} window={window_id} loaded_rows={keys.rows} changes={report.rows} "
        f"seconds={seconds:.3f} (job's own: {report.seconds:.3f}) "
        f"data_files_before={before.get('total-data-files')} delete_files_before={before.get('total-delete-files')}",
        flush=True,
    )
    stage_text = " ".join(f"{name.lstrip('_')}={stages[name]:.3f}" for name in STAGE_METHODS)
    sub_text = " ".join(f"{name.lstrip('_')}={stages[name]:.3f}" for name in SUB_STAGE_METHODS)
    other = seconds - sum(stages[name] for name in STAGE_METHODS)
    print(f"  stages {stage_text} other={other:.3f} (inside merge: {sub_text})", flush=True)
    figures = " ".join(f"{key}={commit.get(key, 0)}" for key in COMMIT_FIGURES)
    print(f"  commit operation={commit['operation']} {figures}", flush=True)
    print(
        f"  check mysql(rows, sum_id, sum_a, sum_c)={expected} iceberg={found} expected_rows={expected_rows}",
        flush=True,
    )
    if found != expected or expected[0] != expected_rows:
        raise BenchmarkError(f"{pipeline.target} differs from {pipeline.table} after window {window_id}")
    return seconds


def benchmark(server: Server, options: Options) -> str:
    """Load, snapshot, warm up, then per round change, capture and time the two applies, check; return
    the summary line (printed by :func:`main` once the server is gone, so that it is the very last line)."""
    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    rng = random.Random(options.seed + 1)
    timings: dict[str, list[float]] = {"small": [], "large": []}
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as scratch_dir, contextlib.ExitStack() as stack:
        scratch = Path(scratch_dir)
        keys, pipelines = prepare(server, options, scratch)
        seconds = make_changes(server.admin, list(keys.values()), options.warmup_changes, rng)
        print(f"warm-up changes per_table={options.warmup_changes} seconds={seconds:.1f}", flush=True)
        spark = spark_session(scratch, options.spark_cores, options.driver_memory, options.shuffle_partitions)
        try:
            if not options.key_filter:
                stack.enter_context(without_key_filter())
            warm_up(spark, server, options, pipelines)
            for round_no in range(options.rounds):
                window_id = round_no + 2
                seconds = make_changes(server.admin, list(keys.values()), options.changes, rng)
                print(
                    f"round {round_no + 1}: changes per_table={options.changes} mix={mix(options.changes)} "
                    f"seconds={seconds:.1f}",
                    flush=True,
                )
                for pipeline in pipelines.values():
                    captured, ops = pipeline.capture(server.cdc, window_id)
                    if captured != window_id or sum(ops.values()) != options.changes:
                        raise BenchmarkError(f"the capture of {pipeline.name}: window {captured}, staged rows {ops}")
                order = ["small", "large"] if round_no % 2 == 0 else ["large", "small"]
                for size in order:
                    timings[size].append(timed_apply(spark, server, pipelines[size], keys[size], window_id))
        finally:
            spark.stop()
    small, large = statistics.median(timings["small"]), statistics.median(timings["large"])
    for size, values in timings.items():
        print(
            f"{size}_table_s per round: {' '.join(f'{v:.3f}' for v in values)} median={statistics.median(values):.3f}"
        )
    return (
        f"apply changes={options.changes} small_table_s={small:.3f} large_table_s={large:.3f} ratio={large / small:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--small-rows", type=int, default=100_000, help="rows of the small table (default 100000)")
    parser.add_argument("--large-rows", type=int, default=1_000_000, help="rows of the large table (default 1000000)")
    parser.add_argument("--changes", type=int, default=10_000, help="changes of the timed window (default 10000)")
    parser.add_argument(
        "--warmup-changes",
        type=int,
        default=DEFAULT_WARMUP_CHANGES,
        help=f"changes of the warm-up window (default {DEFAULT_WARMUP_CHANGES})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"timed windows per table, alternating which goes first; medians reported (default {DEFAULT_ROUNDS})",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the key choice and statement order (default 1)")
    parser.add_argument("--port", type=int, help="port of the local MySQL instance (default: a free one)")
    parser.add_argument("--instance", default=INSTANCE_NAME, help=f"local MySQL instance (default {INSTANCE_NAME})")
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    parser.add_argument(
        "--write-mode", choices=("merge-on-read", "copy-on-write"), help="set on the targets after the warm-up"
    )
    parser.add_argument("--bucket", type=int, help="partition the targets by bucket(N, id) after the warm-up")
    parser.add_argument(
        "--shuffle-partitions",
        type=int,
        default=DEFAULT_SHUFFLE_PARTITIONS,
        help=f"spark.sql.shuffle.partitions (default {DEFAULT_SHUFFLE_PARTITIONS}; Spark's own default is 200)",
    )
    parser.add_argument(
        "--no-key-filter",
        dest="key_filter",
        action="store_false",
        help="MERGE without the key filter (as the apply did before it had one), for comparisons",
    )
    args = parser.parse_args(argv)
    require_positive(
        parser,
        args,
        "small_rows",
        "large_rows",
        "changes",
        "warmup_changes",
        "spark_cores",
        "rounds",
        "shuffle_partitions",
    )
    if args.bucket is not None and args.bucket < 1:
        parser.error("--bucket must be positive")
    options = Options(
        small_rows=args.small_rows,
        large_rows=args.large_rows,
        changes=args.changes,
        warmup_changes=args.warmup_changes,
        seed=args.seed,
        spark_cores=args.spark_cores,
        driver_memory=args.driver_memory,
        write_mode=args.write_mode,
        bucket=args.bucket,
        key_filter=args.key_filter,
        rounds=args.rounds,
        shuffle_partitions=args.shuffle_partitions,
    )
    return int(
        print_summary(local_server(args.instance, LOCAL_SETTINGS, args.port), lambda server: benchmark(server, options))
    )


if __name__ == "__main__":
    sys.exit(main())
