"""Apply cost of a table without a primary key against a keyed one: the same window MERGEd into each.

A table without a key is replicated as a multiset of rows: the apply nets the window's copies per
row identity (every table column) in one Iceberg MERGE, and a window that takes copies away first
reads the target's copies of the identities it touches (:mod:`airflow_provider_mysql_cdc.apply.multiset`).
This benchmark times that apply against the keyed apply of :mod:`apply` on tables of the same size,
in one run, with one SparkSession for both, and checks both targets against MySQL.

1. **Load** (not timed). ``bench.kl_keyed`` (the schema of :mod:`apply`: BIGINT primary key ``id``,
   INT, VARCHAR(40), DECIMAL(12,2), DATETIME(6)) with ``--rows`` rows, ids 1..N; ``bench.kl_keyless``,
   the same columns without a primary key (a non-unique index on ``id`` only, so that MySQL finds
   the rows a change statement names; the package sees no key), also with ``--rows`` rows: ids
   1..U (U = N - N/10) once, and the ids 9, 18, ..., 9 * N/10 a second time, so that 10% of its rows
   are second copies of a row. Values are :mod:`apply`'s deterministic ones (``sql_log_bin = 0``).
2. **Snapshot and warm-up** (not timed). One pipeline per table (``benchkl-keyed``, ``benchkl-keyless``),
   snapshot, a warm-up change set (``--warmup-changes``, the mix below), capture and apply of
   window 1 per pipeline (loads the snapshot, then MERGEs window 1).
3. **Rounds** (``--rounds``, default 3), each: ``--changes`` changes per table with :mod:`apply`'s mix,
   60% updates (every non-key column changes), 20% inserts of new ids, 20% deletes.

   * keyed table: :mod:`apply`'s statements (``WHERE id IN (...)``, 1,000 keys each);
   * keyless table: one statement per row, ``UPDATE ... WHERE id = X LIMIT 1`` and
     ``DELETE ... WHERE id = X LIMIT 1``; half of the updated and deleted ids have two copies (one of
     them changes), half have one; inserts are new rows (1,000 a statement). No id is changed twice
     in the run. Capture stages an update of this table as ``d`` (before image) + ``c`` (after image).

   The statements of both tables run in one seeded random order, then each pipeline captures the
   window and ``run_apply`` of it is timed per table (keyed first in odd rounds, keyless first in
   even ones), with the wall time of the apply's top-level ``TableApplier`` calls (``stages``, as in
   :mod:`apply`; the keyless table's MERGE is ``merge_multiset``, and ``multiset_shortfalls`` inside
   it is the check that the target holds the copies the window takes away).

After every timed apply each target is compared with its MySQL table: row count, ``SUM(id)``,
``SUM(a)``, ``SUM(c)`` (:func:`apply.mysql_figures` / :func:`apply.iceberg_figures`) and the number of
surplus copies (``COUNT(*) - COUNT(DISTINCT id, a, b, c, d)``); the row count and the surplus copies
must also be what the load and the change sets imply. A difference fails the benchmark (exit code 1)
after printing ``exact=no``.

How to run (starts and afterwards destroys its own local MySQL 9.7 instance ``benchkeyless``; see
:mod:`testbed.mysql`; Spark ``local[2]`` in this process, as in :mod:`apply`)::

    .venv/bin/python benchmarks/apply_keyless.py
    .venv/bin/python benchmarks/apply_keyless.py --rows 200000 --changes 5000 --warmup-changes 5000
    .venv/bin/python benchmarks/apply_keyless.py --rounds 6 --spark-stages 8 --driver-memory 4g

``--spark-stages N`` also prints the N slowest Spark stages of each timed apply (wall and task
seconds, input records, shuffle records read and written), from the driver's status store. Every
window hands out ``0.4 * changes`` ids with two copies (half of its updates and deletes), never one
twice, from the ``rows / 10`` loaded ones: the run refuses options that need more than half of them.

It prints the Spark driver's memory settings (``spark.driver.memory``, default ``--driver-memory 2g``,
the JVM's maximum heap, ``spark.memory.fraction``) before the warm-up, the figures of each apply, the
times per round and their medians, and last (exit code 0)::

    apply_keyless rows=<n> changes=<n> keyed_s=<median a> keyless_s=<median b> ratio=<b/a> exact=yes

A target that differs from MySQL prints that line with ``exact=no``, then fails (exit code 1).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# This folder is sys.path[0] of the script: mypy, given benchmarks/, knows these modules only as
# benchmarks.<name> (see apply.py).
from apply import (  # type: ignore[import-not-found, unused-ignore]
    COMMIT_FIGURES,
    CREATE_TABLE,
    DEFAULT_WARMUP_CHANGES,
    LOCAL_SETTINGS,
    STAGE_METHODS,
    UPDATE_SET,
    Keys,
    Pipeline,
    apply_window,
    change_statements,
    fill,
    iceberg_figures,
    insert_statement,
    last_commit,
    load,
    mix,
    mysql_figures,
    spark_session,
    stage_clock,
)
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]
    BenchmarkError,
    execute,
    local_server,
    print_summary,
    require_positive,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

DATABASE = "bench"
INSTANCE_NAME = "benchkeyless"
PIPELINE_PREFIX = "benchkl"
DEFAULT_ROWS = 1_000_000
DEFAULT_CHANGES = 10_000
DEFAULT_ROUNDS = 3
#: Every ``DUPLICATE_EVERY``-th id of the keyless table (up to a tenth of its rows) has two copies.
DUPLICATE_EVERY = 9
#: Share of the keyless table's updated and deleted ids that have two copies.
DUPLICATED_SHARE = 0.5
#: The keyless table's stages: its MERGE is ``_merge_multiset``; the shortfall check runs inside it.
KEYLESS_STAGE_METHODS = ("_source", "_ensure_target", "read_state", "_exists", "_merge_multiset")
KEYLESS_SUB_STAGE_METHODS = ("_multiset_shortfalls",)
KINDS = ("keyed", "keyless")


# -- the keyless table and its changes ----------------------------------------------------------


def keyless_ddl(table: str) -> str:
    """:mod:`apply`'s table without its primary key (an index on ``id`` that is not unique)."""
    ddl = str(CREATE_TABLE).format(table=table).replace("id BIGINT NOT NULL PRIMARY KEY", "id BIGINT NOT NULL")
    if "PRIMARY KEY" in ddl:
        raise BenchmarkError(f"could not take the primary key out of {ddl!r}")
    return ddl[: ddl.rindex(")")] + ",\n    KEY ix_id (id)\n)"


def load_keyless(admin: MySqlConnectionConfig, table: str, rows: int) -> tuple[int, float]:
    """Create the keyless table: ids 1..U once, every DUPLICATE_EVERY-th id up to rows/10 of them twice
    (no binlog); returns (the number of ids with two copies, seconds)."""
    duplicated = rows // 10
    unique_ids = rows - duplicated
    execute(admin, keyless_ddl(table))
    started = time.perf_counter()
    second_copies = (
        f"INSERT INTO {table} SELECT * FROM {table} WHERE id % {DUPLICATE_EVERY} = 0 "
        f"AND id <= {DUPLICATE_EVERY * duplicated}"
    )
    fill(admin, table, unique_ids, second_copies)
    count, distinct = execute(admin, f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}")[0]
    if int(count) != rows or int(distinct) != unique_ids:
        raise BenchmarkError(f"the load left {count} rows ({distinct} ids) in {table}, expected {rows} ({unique_ids})")
    return duplicated, time.perf_counter() - started


@dataclass
class KeylessRows:
    """The keyless table's ids: two pools (ids with two copies, ids with one) handed out at random,
    each id at most once, and what the change sets did so far."""

    table: str
    rows: int
    duplicated: int
    rng: random.Random
    twice: Keys = field(init=False)
    once: Keys = field(init=False)
    next_new: int = field(init=False)
    inserted: int = 0
    deleted: int = 0
    #: Ids with two copies of which a change set changed or deleted one (each leaves one copy).
    duplicates_touched: int = 0

    def __post_init__(self) -> None:
        unique_ids = self.rows - self.duplicated
        self.twice = Keys(self.table, self.duplicated, random.Random(self.rng.random()))
        # The k-th id that is not a multiple of DUPLICATE_EVERY (those above the duplicated ones are
        # single too, but not handed out).
        self.once = Keys(self.table, unique_ids - unique_ids // DUPLICATE_EVERY, random.Random(self.rng.random()))
        self.next_new = unique_ids + 1

    def take(self, count: int) -> tuple[list[int], list[int]]:
        """``count`` ids never handed out before: (ids with two copies, ids with one)."""
        from_twice = round(count * DUPLICATED_SHARE)
        twice = [k * DUPLICATE_EVERY for k in self.twice.existing(from_twice)]
        once = [k + (k - 1) // (DUPLICATE_EVERY - 1) for k in self.once.existing(count - from_twice)]
        self.duplicates_touched += len(twice)
        return twice, once

    @property
    def expected_rows(self) -> int:
        return self.rows + self.inserted - self.deleted

    @property
    def expected_surplus(self) -> int:
        """Second copies the table must hold: the loaded ones the change sets left alone."""
        return self.duplicated - self.duplicates_touched


def keyless_statements(rows: KeylessRows, changes: int) -> list[str]:
    """The statements of one change set of the keyless table: one per updated or deleted row."""
    counts = mix(changes)
    statements: list[str] = []
    for kind in ("u", "d"):
        twice, once = rows.take(counts[kind])
        for key in sorted(twice + once):
            if kind == "u":
                statements.append(f"UPDATE {rows.table} SET {UPDATE_SET} WHERE id = {key} LIMIT 1")
            else:
                statements.append(f"DELETE FROM {rows.table} WHERE id = {key} LIMIT 1")
    rows.deleted += counts["d"]
    first, last = rows.next_new, rows.next_new + counts["c"] - 1
    rows.next_new = last + 1
    rows.inserted += counts["c"]
    for start in range(first, last + 1, 1_000):
        statements.append(insert_statement(rows.table, start, min(start + 999, last)))
    return statements


def twice_needed(windows: list[int]) -> int:
    """Ids with two copies that change sets of ``windows`` changes each update or delete."""
    return sum(round(mix(changes)[kind] * DUPLICATED_SHARE) for changes in windows for kind in ("u", "d"))


def expected_ops(kind: str, changes: int) -> dict[str, int]:
    """The staged rows by op of a change set: a keyless update is staged as ``d`` + ``c``."""
    counts = mix(changes)
    if kind == "keyed":
        return {op: count for op, count in counts.items() if count}
    return {"c": counts["c"] + counts["u"], "d": counts["d"] + counts["u"]}


# -- checks -------------------------------------------------------------------------------------


def mysql_surplus(admin: MySqlConnectionConfig, table: str) -> int:
    """Rows of the MySQL table that are further copies of another row."""
    return int(execute(admin, f"SELECT COUNT(*) - COUNT(DISTINCT id, a, b, c, d) FROM {table}")[0][0])


def iceberg_surplus(spark: SparkSession, target: str) -> int:
    """Rows of the Iceberg table that are further copies of another row."""
    return int(spark.sql(f"SELECT COUNT(*) - COUNT(DISTINCT id, a, b, c, d) FROM {target}").collect()[0][0])


@dataclass
class Tables:
    """Both tables: their pipelines and what their rows must be."""

    pipelines: dict[str, Pipeline]
    keyed: Keys
    keyless: KeylessRows

    def expected(self, kind: str) -> tuple[int, int]:
        """(rows, surplus copies) the table must hold after the change sets so far."""
        if kind == "keyed":
            return self.keyed.rows + self.keyed.inserted - self.keyed.deleted, 0
        return self.keyless.expected_rows, self.keyless.expected_surplus


def check(spark: SparkSession, admin: MySqlConnectionConfig, tables: Tables, kind: str) -> bool:
    """Compare one target with its MySQL table; print the figures; True when they match."""
    pipeline = tables.pipelines[kind]
    mysql = (*mysql_figures(admin, pipeline.table), mysql_surplus(admin, pipeline.table))
    iceberg = (*iceberg_figures(spark, pipeline.target), iceberg_surplus(spark, pipeline.target))
    rows, surplus = tables.expected(kind)
    exact = mysql == iceberg and (mysql[0], mysql[-1]) == (rows, surplus)
    print(
        f"  check {kind} mysql(rows, sum_id, sum_a, sum_c, surplus_copies)={mysql} iceberg={iceberg} "
        f"expected_rows={rows} expected_surplus={surplus} match={'yes' if exact else 'no'}",
        flush=True,
    )
    return exact


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Options:
    rows: int
    changes: int
    warmup_changes: int
    rounds: int
    seed: int
    spark_cores: int
    driver_memory: str
    spark_stages: int


def prepare(admin: MySqlConnectionConfig, cdc: MySqlConnectionConfig, options: Options, scratch: Path) -> Tables:
    """Load both tables and snapshot each through its own pipeline (not timed)."""
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    execute(admin, f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}")
    rng = random.Random(options.seed)
    pipelines: dict[str, Pipeline] = {}
    keyed = Keys(f"{DATABASE}.kl_keyed", options.rows, random.Random(rng.random()))
    seconds = load(admin, keyed.table, options.rows)
    print(f"load table={keyed.table} rows={options.rows} seconds={seconds:.1f}", flush=True)
    duplicated, seconds = load_keyless(admin, f"{DATABASE}.kl_keyless", options.rows)
    keyless = KeylessRows(f"{DATABASE}.kl_keyless", options.rows, duplicated, random.Random(rng.random()))
    print(
        f"load table={keyless.table} rows={options.rows} ids_with_two_copies={duplicated} seconds={seconds:.1f}",
        flush=True,
    )
    for number, (kind, table) in enumerate((("keyed", keyed.table), ("keyless", keyless.table))):
        store = FrontierStore.from_url(f"sqlite:///{scratch / f'meta-{kind}.db'}")
        store.ensure_schema()
        pipeline = Pipeline(f"{PIPELINE_PREFIX}-{kind}", table, str(scratch / "staging"), store, 4_600_001 + number)
        started = time.perf_counter()
        chunks, staged = pipeline.snapshot(cdc)
        if staged != options.rows:
            raise BenchmarkError(f"the snapshot of {table} staged {staged} rows, expected {options.rows}")
        print(f"snapshot table={table} chunks={chunks} seconds={time.perf_counter() - started:.1f}", flush=True)
        pipelines[kind] = pipeline
    return Tables(pipelines, keyed, keyless)


def make_changes(admin: MySqlConnectionConfig, tables: Tables, changes: int, rng: random.Random) -> float:
    """One change set per table, the statements of both in a random order; returns seconds."""
    statements = change_statements(tables.keyed, changes) + keyless_statements(tables.keyless, changes)
    rng.shuffle(statements)
    started = time.perf_counter()
    execute(admin, *statements)
    return time.perf_counter() - started


def capture(cdc: MySqlConnectionConfig, tables: Tables, window_id: int, changes: int) -> None:
    """Capture the window of both pipelines; fail unless each staged what its change set implies."""
    for kind, pipeline in tables.pipelines.items():
        captured, ops = pipeline.capture(cdc, window_id)
        staged = {op: count for op, count in ops.items() if count}
        if captured != window_id or staged != expected_ops(kind, changes):
            raise BenchmarkError(
                f"the capture of {pipeline.name}: window {captured}, staged rows {staged}, "
                f"expected window {window_id} with {expected_ops(kind, changes)}"
            )


def timed_apply(
    spark: SparkSession, pipeline: Pipeline, kind: str, window_id: int, spark_stage_lines: int = 0
) -> tuple[float, dict[str, int]]:
    """Time ``run_apply`` of one window and print its figures (and its ``spark_stage_lines`` slowest
    Spark stages); returns (seconds, staged rows by op)."""
    methods = (STAGE_METHODS, ()) if kind == "keyed" else (KEYLESS_STAGE_METHODS, KEYLESS_SUB_STAGE_METHODS)
    stages_before = set(spark_stages(spark)) if spark_stage_lines else set()
    with stage_clock(*methods) as stages:
        started = time.perf_counter()
        report = apply_window(spark, pipeline, window_id)
        seconds = time.perf_counter() - started
    new_stages = (
        [s for i, s in sorted(spark_stages(spark).items()) if i not in stages_before] if spark_stage_lines else []
    )
    commit = last_commit(spark, pipeline.target)
    ops = {op: int(count) for op, count in sorted(report.rows.items())}
    stage_text = " ".join(f"{name.lstrip('_')}={stages[name]:.3f}" for name in methods[0])
    sub_text = " ".join(f"{name.lstrip('_')}={stages[name]:.3f}" for name in methods[1])
    other = seconds - sum(stages[name] for name in methods[0])
    print(
        f"apply {kind} table={pipeline.table} window={window_id} staged_ops={ops} seconds={seconds:.3f} "
        f"(job's own: {report.seconds:.3f})",
        flush=True,
    )
    print(f"  stages {stage_text} other={other:.3f}" + (f" (inside merge: {sub_text})" if sub_text else ""))
    print(f"  commit operation={commit['operation']} " + " ".join(f"{k}={commit.get(k, 0)}" for k in COMMIT_FIGURES))
    slowest = sorted(new_stages, key=lambda s: s.wall_s, reverse=True)[:spark_stage_lines]
    for stage in sorted(slowest, key=lambda s: s.stage_id):
        print(f"  spark {stage.describe()}")
    return seconds, ops


@dataclass(frozen=True)
class SparkStage:
    """One completed Spark stage, as the driver's status store has it."""

    stage_id: int
    name: str
    tasks: int
    wall_s: float
    task_s: float
    input_records: int
    shuffle_read_records: int
    shuffle_write_records: int

    def describe(self) -> str:
        return (
            f"stage={self.stage_id} wall_s={self.wall_s:.2f} task_s={self.task_s:.2f} tasks={self.tasks} "
            f"input_records={self.input_records} shuffle_read={self.shuffle_read_records} "
            f"shuffle_write={self.shuffle_write_records} name={self.name!r}"
        )


def spark_stages(spark: SparkSession) -> dict[int, SparkStage]:
    """The completed stages of the jobs the driver's status store holds (it keeps the newest 1,000)."""
    tracker = spark.sparkContext.statusTracker()
    store: Any = spark.sparkContext._jsc.sc().statusStore()
    stage_ids = {s for job in tracker.getJobIdsForGroup(None) for s in (tracker.getJobInfo(job) or (0, []))[1]}
    stages: dict[int, SparkStage] = {}
    for stage_id in sorted(stage_ids):
        try:
            data = store.lastStageAttempt(stage_id)
        except Exception:  # skipped (its shuffle output reused) or no longer kept
            continue
        submitted, completed = data.submissionTime(), data.completionTime()
        if str(data.status()) != "COMPLETE" or not submitted.isDefined() or not completed.isDefined():
            continue
        stages[stage_id] = SparkStage(
            stage_id,
            str(data.name()),
            int(data.numTasks()),
            (int(completed.get().getTime()) - int(submitted.get().getTime())) / 1000,
            int(data.executorRunTime()) / 1000,
            int(data.inputRecords()),
            int(data.shuffleReadRecords()),
            int(data.shuffleWriteRecords()),
        )
    return stages


def driver_memory_text(spark: SparkSession) -> str:
    """The Spark driver's memory settings, as the session has them."""
    conf = spark.sparkContext.getConf()
    jvm: Any = spark.sparkContext._jvm
    heap_mb = int(jvm.java.lang.Runtime.getRuntime().maxMemory()) // (1024 * 1024)
    return (
        f"spark.master={conf.get('spark.master')} spark.driver.memory={conf.get('spark.driver.memory')} "
        f"jvm_max_heap_mb={heap_mb} spark.memory.fraction={conf.get('spark.memory.fraction', '0.6 (default)')} "
        f"spark.sql.shuffle.partitions={spark.conf.get('spark.sql.shuffle.partitions')}"
    )


def warm_up(spark: SparkSession, cdc: MySqlConnectionConfig, tables: Tables, changes: int) -> None:
    """Window 1 of each pipeline: loads the snapshot, then MERGEs the warm-up changes (not timed)."""
    capture(cdc, tables, 1, changes)
    for kind, pipeline in tables.pipelines.items():
        started = time.perf_counter()
        apply_window(spark, pipeline, 1)
        commit = last_commit(spark, pipeline.target)
        print(
            f"warm-up {kind} table={pipeline.table} window=1 apply_seconds={time.perf_counter() - started:.1f} "
            f"data_files={commit.get('total-data-files')} delete_files={commit.get('total-delete-files')}",
            flush=True,
        )


def benchmark(admin: MySqlConnectionConfig, cdc: MySqlConnectionConfig, description: str, options: Options) -> str:
    """Load, snapshot, warm up, then per round change, capture and time both applies, check; return the
    summary line."""
    print(f"server: {description}, MySQL {execute(admin, 'SELECT VERSION()')[0][0]}", flush=True)
    rng = random.Random(options.seed + 1)
    timings: dict[str, list[float]] = {kind: [] for kind in KINDS}
    window_ops: dict[str, dict[str, int]] = {}
    exact = True
    with tempfile.TemporaryDirectory(prefix="bench-apply-keyless-") as scratch_dir:
        scratch = Path(scratch_dir)
        tables = prepare(admin, cdc, options, scratch)
        seconds = make_changes(admin, tables, options.warmup_changes, rng)
        print(f"warm-up changes per_table={options.warmup_changes} seconds={seconds:.1f}", flush=True)
        spark = spark_session(scratch, options.spark_cores, options.driver_memory)
        try:
            print(f"spark driver: {driver_memory_text(spark)}", flush=True)
            warm_up(spark, cdc, tables, options.warmup_changes)
            for round_no in range(options.rounds):
                window_id = round_no + 2
                seconds = make_changes(admin, tables, options.changes, rng)
                print(
                    f"round {round_no + 1}: changes per_table={options.changes} mix={mix(options.changes)} "
                    f"seconds={seconds:.1f}",
                    flush=True,
                )
                capture(cdc, tables, window_id, options.changes)
                for kind in KINDS if round_no % 2 == 0 else tuple(reversed(KINDS)):
                    seconds, window_ops[kind] = timed_apply(
                        spark, tables.pipelines[kind], kind, window_id, options.spark_stages
                    )
                    timings[kind].append(seconds)
                    exact = check(spark, admin, tables, kind) and exact
            keyed_rows, keyless_rows = tables.expected("keyed")[0], tables.expected("keyless")[0]
        finally:
            spark.stop()
    for kind, values in timings.items():
        print(f"{kind}_s per round: {' '.join(f'{v:.3f}' for v in values)} median={statistics.median(values):.3f}")
    keyed, keyless = statistics.median(timings["keyed"]), statistics.median(timings["keyless"])
    print(
        f"rows now keyed={keyed_rows} keyless={keyless_rows} (loaded {options.rows} each); window changes "
        f"per table={mix(options.changes)}; staged ops of the last window keyed={window_ops['keyed']} "
        f"keyless={window_ops['keyless']}",
        flush=True,
    )
    summary = (
        f"apply_keyless rows={options.rows} changes={options.changes} keyed_s={keyed:.3f} keyless_s={keyless:.3f} "
        f"ratio={keyless / keyed:.3f} exact={'yes' if exact else 'no'}"
    )
    if not exact:
        print(summary, flush=True)
        raise BenchmarkError("a target differs from its MySQL table (see the check lines)")
    return summary


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS, help=f"rows of each table (default {DEFAULT_ROWS})")
    parser.add_argument(
        "--changes", type=int, default=DEFAULT_CHANGES, help=f"changes of a timed window (default {DEFAULT_CHANGES})"
    )
    parser.add_argument(
        "--warmup-changes",
        type=int,
        default=DEFAULT_WARMUP_CHANGES,
        help=f"changes of the warm-up window (default {DEFAULT_WARMUP_CHANGES})",
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help=f"timed windows per table (default {DEFAULT_ROUNDS})"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the id choice and statement order (default 1)")
    parser.add_argument("--port", type=int, help="port of the local MySQL instance (default: a free one)")
    parser.add_argument("--instance", default=INSTANCE_NAME, help=f"local MySQL instance (default {INSTANCE_NAME})")
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    parser.add_argument(
        "--spark-stages",
        type=int,
        default=0,
        help="print the N slowest Spark stages of each timed apply (default 0: none)",
    )
    args = parser.parse_args(argv)
    require_positive(parser, args, "rows", "changes", "warmup_changes", "rounds", "spark_cores")
    if args.rows < 100:
        parser.error("--rows must be at least 100")
    windows = [args.warmup_changes] + [args.changes] * args.rounds
    if twice_needed(windows) > (args.rows // 10) // 2:
        parser.error(
            f"the change sets change or delete {twice_needed(windows)} ids with two copies, more than half of the "
            f"{args.rows // 10} the table has: lower --changes, --warmup-changes or --rounds, or raise --rows"
        )
    options = Options(
        rows=args.rows,
        changes=args.changes,
        warmup_changes=args.warmup_changes,
        rounds=args.rounds,
        seed=args.seed,
        spark_cores=args.spark_cores,
        driver_memory=args.driver_memory,
        spark_stages=args.spark_stages,
    )
    return int(
        print_summary(
            local_server(args.instance, LOCAL_SETTINGS, args.port),
            lambda server: benchmark(server.admin, server.cdc, server.description, options),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
