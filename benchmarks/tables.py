"""What a pipeline's table count costs: one pipeline over 1, 10 and 100 tables, same work per table.

What it measures, in one run, with one SparkSession for every apply:

1. **Load** (not timed). For each count N of ``--tables`` (default ``1,10,100``) a database ``bench_tN``
   holds N tables of ``benchmarks/apply.py``'s schema with ``--rows`` rows each (ids 1..N, values
   computed by the server, no binlog).
2. **Snapshot** (timed): one pipeline over ``bench_tN.*`` (its own SQLite ``FrontierStore``):
   ``plan_snapshot`` and every chunk through ``snapshot_chunk``, one after the other in this process
   (the example DAG maps chunks over its worker slots; this is one slot).
3. **Load window** (timed): ``capture_window`` of window 1 (catch-up, nothing changed) and ``run_apply``
   of it, which creates every target and loads its snapshot.
4. **Change window**: ``--changes`` changes per table (``benchmarks/apply.py``'s mix: 60% updates of
   every non-key column, 20% inserts, 20% deletes, keys drawn at random, ``--seed``), all tables' statements
   in a seeded random order (not timed); then ``capture_window`` of window 2 (timed) and ``run_apply``
   of it (timed): one Spark job applies every table of the window, one after the other.

After the change window every target is checked against MySQL (row count, ``SUM(id)``, ``SUM(a)``,
``SUM(c)``), and the apply must report every table applied with window 2; the benchmark fails (exit
code 1) otherwise. A warm-up pass of two tables (database ``bench_warmup``, the same phases, not
reported) runs first, so no count's figures include warming the JVM; then the counts, smallest first.

Per count it prints ``tables=N snapshot_s capture_s load_apply_s window_apply_s`` and the window's
apply per table (``window_apply_s / N``), and the job's own per-table seconds (``TableReport.seconds``:
median and largest). Spark runs in this process as in ``benchmarks/apply.py`` (``local[2]``, the Iceberg
runtime jars, a Hadoop catalog in a temporary directory).

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``benchtables``; see
:mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/tables.py
    .venv/bin/python benchmarks/tables.py --tables 1,10 --rows 1000 --changes 100

The last line printed is always::

    tables counts=<n,...> window_apply_s=<s,...> per_table_s=<s,...> largest_over_smallest_per_table=<r>

A window's apply costs about the same per table whatever the count: its time follows the number of
tables it touches, which is what splitting a large pipeline is about (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# This folder is sys.path[0] of a script: benchmarks/apply.py's helpers are imported by its name.
from apply import (  # type: ignore[import-not-found, unused-ignore]
    CATALOG,
    LOCAL_SETTINGS,
    Keys,
    Pipeline,
    iceberg_figures,
    load,
    make_changes,
    mysql_figures,
    spark_session,
)
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]
    BenchmarkError,
    Server,
    execute,
    local_server,
    print_summary,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_provider_mysql_cdc.apply.contract import ApplyReport

INSTANCE_NAME = "benchtables"
#: Tables of the warm-up pass (the same phases, not reported), so that the first count is not the one
#: that warms the JVM.
WARMUP_TABLES = 2


@dataclass(frozen=True)
class Options:
    counts: tuple[int, ...]
    rows: int
    changes: int
    seed: int
    spark_cores: int
    driver_memory: str


@dataclass(frozen=True)
class CountFigures:
    """The timed phases of one table count."""

    tables: int
    snapshot_s: float
    capture_s: float
    load_apply_s: float
    window_apply_s: float
    job_table_median_s: float
    job_table_max_s: float

    @property
    def per_table_s(self) -> float:
        return self.window_apply_s / self.tables


def load_tables(server: Server, database: str, count: int, rows: int) -> list[str]:
    """``count`` tables of ``rows`` rows in a fresh ``database`` (rows without binlog); their names."""
    execute(server.admin, f"DROP DATABASE IF EXISTS {database}", f"CREATE DATABASE {database}")
    tables = [f"{database}.t_{number:04d}" for number in range(count)]
    for table in tables:
        load(server.admin, table, rows)
    return tables


def apply_windows(
    spark: SparkSession,
    pipeline: Pipeline,
    window_id: int,
    tables: list[str],
    *,
    loads: bool,
    parallel_tables: int | None = None,
) -> ApplyReport:
    """``run_apply`` of one window of the pipeline (``parallel_tables``: the spec's, default its default);
    fails unless every table applied it (``loads``: the window that loads the snapshots, each table's
    one chunk)."""
    from airflow_provider_mysql_cdc.apply.contract import ApplySpec
    from airflow_provider_mysql_cdc.apply.spark_job import run_apply

    spec = ApplySpec(pipeline.name, pipeline.staging, window_id, window_id, catalog=CATALOG)
    if parallel_tables is not None:
        spec = dataclasses.replace(spec, parallel_tables=parallel_tables)
    report = run_apply(spark, spec)
    wrong = {
        name: (table.status, table.windows_applied, table.snapshot_chunks_loaded, table.error)
        for name, table in report.tables.items()
        if table.status != "applied"
        or (table.snapshot_chunks_loaded != 1 if loads else table.windows_applied != [window_id])
    }
    if report.failed or wrong or sorted(report.tables) != sorted(tables):
        raise BenchmarkError(f"apply of window {window_id} of {pipeline.name}: {wrong or sorted(report.tables)}")
    return report


def check_targets(spark: SparkSession, server: Server, keys: list[Keys], window_id: int) -> None:
    """Every table's target against MySQL (row count and sums, and the rows its change sets imply)."""
    for table_keys in keys:
        target = f"{CATALOG}.{table_keys.table}"
        expected, found = mysql_figures(server.admin, table_keys.table), iceberg_figures(spark, target)
        if found != expected or expected[0] != table_keys.rows + table_keys.inserted - table_keys.deleted:
            raise BenchmarkError(f"{target} differs from MySQL after window {window_id}: {found} against {expected}")


def run_count(
    spark: SparkSession, server: Server, options: Options, count: int, scratch: Path, name: str | None = None
) -> CountFigures:
    """Load, snapshot, load window and change window of one table count (in database ``bench_<name>``,
    default ``bench_t<count>``); check the targets."""
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    database = f"bench_{name or f't{count}'}"
    started = time.perf_counter()
    tables = load_tables(server, database, count, options.rows)
    print(f"tables={count} load rows_per_table={options.rows} seconds={time.perf_counter() - started:.1f}", flush=True)
    store = FrontierStore.from_url(f"sqlite:///{scratch / f'meta-{database}.db'}")
    store.ensure_schema()
    server_id = 4_599_999 if name else 4_600_000 + count
    pipeline = Pipeline(f"benchtables-{database}", f"{database}.*", str(scratch / "staging"), store, server_id)

    started = time.perf_counter()
    chunks, staged = pipeline.snapshot(server.cdc)
    snapshot_s = time.perf_counter() - started
    if staged != count * options.rows:
        raise BenchmarkError(f"the snapshot of {database} staged {staged} rows, expected {count * options.rows}")
    window_id, ops = pipeline.capture(server.cdc, 1)
    if window_id != 1 or sum(ops.values()):
        raise BenchmarkError(f"the first capture of {database}: window {window_id}, rows {ops}")
    started = time.perf_counter()
    apply_windows(spark, pipeline, 1, tables, loads=True)
    load_apply_s = time.perf_counter() - started

    rng = random.Random(options.seed + count)
    keys = [Keys(table, options.rows, random.Random(rng.random())) for table in tables]
    make_changes(server.admin, keys, options.changes, rng)
    started = time.perf_counter()
    window_id, ops = pipeline.capture(server.cdc, 2)
    capture_s = time.perf_counter() - started
    if window_id != 2 or sum(ops.values()) != count * options.changes:
        raise BenchmarkError(f"the change capture of {database}: window {window_id}, rows {ops}")
    started = time.perf_counter()
    report = apply_windows(spark, pipeline, 2, tables, loads=False)
    window_apply_s = time.perf_counter() - started

    check_targets(spark, server, keys, 2)
    job_seconds = [table.seconds for table in report.tables.values()]
    figures = CountFigures(
        count,
        snapshot_s,
        capture_s,
        load_apply_s,
        window_apply_s,
        statistics.median(job_seconds),
        max(job_seconds),
    )
    print(
        f"tables={count} chunks={chunks} snapshot_s={snapshot_s:.2f} capture_s={capture_s:.2f} "
        f"load_apply_s={load_apply_s:.2f} window_apply_s={window_apply_s:.2f} per_table_s={figures.per_table_s:.3f} "
        f"job_table_s median={figures.job_table_median_s:.3f} max={figures.job_table_max_s:.3f} "
        f"changes_per_table={options.changes} checked={len(keys)}",
        flush=True,
    )
    return figures


def benchmark(server: Server, options: Options) -> str:
    """Every table count in one SparkSession; the summary line."""
    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    results: list[CountFigures] = []
    with tempfile.TemporaryDirectory(prefix="bench-tables-") as scratch_dir:
        scratch = Path(scratch_dir)
        spark = spark_session(scratch, options.spark_cores, options.driver_memory)
        try:
            print("warm-up (not reported):", flush=True)
            run_count(spark, server, options, WARMUP_TABLES, scratch, "warmup")
            for count in sorted(options.counts):
                results.append(run_count(spark, server, options, count, scratch))
        finally:
            spark.stop()
    ratio = results[-1].per_table_s / results[0].per_table_s
    return (
        f"tables counts={','.join(str(r.tables) for r in results)} "
        f"window_apply_s={','.join(f'{r.window_apply_s:.2f}' for r in results)} "
        f"per_table_s={','.join(f'{r.per_table_s:.3f}' for r in results)} "
        f"largest_over_smallest_per_table={ratio:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tables", default="1,10,100", help="table counts, comma-separated (default 1,10,100)")
    parser.add_argument("--rows", type=int, default=1_000, help="rows per table (default 1000)")
    parser.add_argument("--changes", type=int, default=100, help="changes per table in the window (default 100)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the key choice and statement order (default 1)")
    parser.add_argument("--instance", default=INSTANCE_NAME, help=f"local MySQL instance (default {INSTANCE_NAME})")
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    args = parser.parse_args(argv)
    try:
        counts = tuple(sorted({int(part) for part in args.tables.split(",") if part.strip()}))
    except ValueError:
        parser.error("--tables takes comma-separated whole numbers")
    if not counts or min(counts) < 1 or args.rows < 2 or args.changes < 1 or args.changes * 2 > args.rows:
        parser.error("--tables must be positive, --rows at least 2 and --changes at most half of --rows")
    options = Options(counts, args.rows, args.changes, args.seed, args.spark_cores, args.driver_memory)
    return int(print_summary(local_server(args.instance, LOCAL_SETTINGS), lambda server: benchmark(server, options)))


if __name__ == "__main__":
    sys.exit(main())
