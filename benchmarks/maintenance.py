"""Table maintenance: one Iceberg table after N small windows, before and after ``run_maintenance``.

What it measures, in one run, with one SparkSession:

1. **Build** (not timed). The MySQL table ``bench.maint`` (the schema of ``benchmarks/apply.py``:
   BIGINT key, INT, VARCHAR(40), DECIMAL(12,2), DATETIME(6)) with ``--rows`` rows, snapshotted through
   its pipeline; then ``--windows`` windows (default 500) of ``--changes`` changes each (default 20:
   60% updates, 20% inserts, 20% deletes of keys never changed before), each captured (catch-up) as its
   own window, and applied through ``run_apply`` in this process (``--apply-batch`` windows a call, each
   window still its own MERGE commit, as one apply task per window would leave the table): every
   window adds small data files, a position delete file and a snapshot.
2. **Before** (timed): the table's live data and delete files (its ``data_files`` and ``delete_files``
   metadata tables) and the files under its directory; the **full scan**, ``SELECT COUNT(*), SUM(id),
   SUM(a), SUM(c)`` (SUM is not answered from metadata, so every data file is read and every delete
   applied), the median of ``--scan-repeats`` runs after one untimed run; and the **apply of the next
   window** (``--changes`` changes, captured, then one timed ``run_apply``).
3. **Maintenance** (timed): ``run_maintenance`` (``apply/table_maintenance.py``: rewrite_data_files,
   position deletes, expire_snapshots with a retention of 0 hours, keeping the snapshots back to the
   newest apply commit, remove_orphan_files).
4. **After** (timed): the same three figures on the maintained table, the apply of window N+2.

After each apply the table is checked against MySQL (row count, SUM(id), SUM(a), SUM(c)); the run fails
(exit 1) on a difference or when an apply does not apply exactly its window.

Run (starts and afterwards destroys its own local MySQL instance ``benchmaint``)::

    .venv/bin/python benchmarks/maintenance.py                      # 500 windows
    .venv/bin/python benchmarks/maintenance.py --windows 100        # a shorter run

The last line printed is always::

    maintenance windows=<n> files_before=<a> files_after=<b> scan_before_s= scan_after_s= scan_ratio=
    apply_before_s= apply_after_s= apply_ratio= maintenance_s=

(ratios are after/before: below 1 is faster after maintenance; all on one line).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import apply as apply_bench  # benchmarks/apply.py: tables, change sets, pipeline, Spark session
from mysql_bench import BenchmarkError, Server, execute, local_server, print_summary, require_positive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INSTANCE_NAME = "benchmaint"
TABLE = f"{apply_bench.DATABASE}.maint"
PIPELINE = "benchmaint"


@dataclass(frozen=True)
class Options:
    rows: int
    windows: int
    changes: int
    apply_batch: int
    scan_repeats: int
    seed: int
    spark_cores: int
    driver_memory: str


@dataclass(frozen=True)
class Figures:
    """The table's shape and costs at one point of the run."""

    data_files: int
    delete_files: int
    files_on_disk: int
    snapshots: int
    scan_s: float
    apply_s: float

    @property
    def live_files(self) -> int:
        return self.data_files + self.delete_files


def count(spark: SparkSession, query: str) -> int:
    return int(spark.sql(query).collect()[0][0])


def full_scan(spark: SparkSession, target: str, repeats: int) -> float:
    """Median seconds of a full scan (one untimed run first)."""
    query = f"SELECT COUNT(*), SUM(id), SUM(a), SUM(c) FROM {target}"
    spark.sql(f"REFRESH TABLE {target}")
    spark.sql(query).collect()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        spark.sql(query).collect()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def check(spark: SparkSession, server: Server, target: str) -> None:
    iceberg = apply_bench.iceberg_figures(spark, target)
    mysql = apply_bench.mysql_figures(server.admin, TABLE)
    if iceberg != mysql:
        raise BenchmarkError(f"{target} differs from MySQL: (rows, SUM(id), SUM(a), SUM(c)) {iceberg} != {mysql}")


def apply_windows(spark: SparkSession, pipeline: apply_bench.Pipeline, first: int, last: int) -> None:
    from airflow_provider_mysql_cdc.apply.contract import ApplySpec
    from airflow_provider_mysql_cdc.apply.spark_job import run_apply

    spec = ApplySpec(pipeline.name, pipeline.staging, first, last, catalog=apply_bench.CATALOG)
    table = run_apply(spark, spec).tables.get(TABLE)
    if table is None or table.status != "applied" or table.windows_applied != list(range(first, last + 1)):
        raise BenchmarkError(f"apply of windows {first}..{last}: {table}")


def next_window(
    server: Server, pipeline: apply_bench.Pipeline, keys: apply_bench.Keys, options: Options, run: int
) -> int:
    """Make one change set and capture it as the next window (run ``run`` of the pipeline); returns its id."""
    execute(server.admin, *apply_bench.change_statements(keys, options.changes))
    window_id, ops = pipeline.capture(server.cdc, run)
    if sum(ops.values()) != options.changes:
        raise BenchmarkError(f"window {window_id} staged {ops}, expected {options.changes} changes")
    return window_id


def figures(
    spark: SparkSession,
    server: Server,
    pipeline: apply_bench.Pipeline,
    keys: apply_bench.Keys,
    options: Options,
    warehouse: Path,
    run: int,
) -> Figures:
    target = pipeline.target
    spark.sql(f"REFRESH TABLE {target}")
    shape = (
        count(spark, f"SELECT COUNT(*) FROM {target}.data_files"),
        count(spark, f"SELECT COUNT(*) FROM {target}.delete_files"),
        sum(1 for path in (warehouse / apply_bench.DATABASE / "maint").rglob("*") if path.is_file()),
        count(spark, f"SELECT COUNT(*) FROM {target}.snapshots"),
    )
    scan = full_scan(spark, target, options.scan_repeats)
    window_id = next_window(server, pipeline, keys, options, run)
    started = time.perf_counter()
    apply_windows(spark, pipeline, window_id, window_id)
    applied = time.perf_counter() - started
    check(spark, server, target)
    return Figures(*shape, scan_s=scan, apply_s=applied)


def benchmark(server: Server, options: Options) -> str:
    from airflow_provider_mysql_cdc.apply.contract import MaintenanceSpec
    from airflow_provider_mysql_cdc.apply.table_maintenance import run_maintenance
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    execute(server.admin, f"DROP DATABASE IF EXISTS {apply_bench.DATABASE}", f"CREATE DATABASE {apply_bench.DATABASE}")
    apply_bench.load(server.admin, TABLE, options.rows)
    needed = options.windows + 2
    if round(options.changes * 0.8) * needed > options.rows // 2:
        raise BenchmarkError(f"--rows {options.rows} is too small for {needed} windows of {options.changes} changes")
    keys = apply_bench.Keys(TABLE, options.rows, random.Random(options.seed))
    with tempfile.TemporaryDirectory(prefix="bench-maintenance-") as scratch_dir:
        scratch = Path(scratch_dir)
        store = FrontierStore.from_url(f"sqlite:///{scratch / 'meta.db'}")
        store.ensure_schema()
        pipeline = apply_bench.Pipeline(PIPELINE, TABLE, str(scratch / "staging"), store, 4_600_001)
        pipeline.snapshot(server.cdc)
        spark = apply_bench.spark_session(scratch, options.spark_cores, options.driver_memory)
        try:
            started = time.perf_counter()
            for first in range(1, options.windows + 1, options.apply_batch):
                last = min(first + options.apply_batch - 1, options.windows)
                for expected in range(first, last + 1):
                    if next_window(server, pipeline, keys, options, expected) != expected:
                        raise BenchmarkError(f"the capture did not make window {expected}")
                apply_windows(spark, pipeline, first, last)
                print(f"windows 1..{last} applied, {time.perf_counter() - started:.0f} s", flush=True)
            check(spark, server, pipeline.target)
            before = figures(spark, server, pipeline, keys, options, scratch / "warehouse", options.windows + 1)
            print(f"before: {before}", flush=True)
            started = time.perf_counter()
            report = run_maintenance(
                spark, MaintenanceSpec(PIPELINE, catalog=apply_bench.CATALOG, snapshot_retention_hours=0)
            )
            maintenance_s = time.perf_counter() - started
            if report.failed:
                raise BenchmarkError(f"maintenance failed: {report.tables}")
            print(f"maintenance: {report.tables[f'{apply_bench.DATABASE}.maint']}", flush=True)
            after = figures(spark, server, pipeline, keys, options, scratch / "warehouse", options.windows + 2)
            print(f"after: {after}", flush=True)
        finally:
            spark.stop()
    return (
        f"maintenance windows={options.windows} files_before={before.live_files} files_after={after.live_files} "
        f"disk_files_before={before.files_on_disk} disk_files_after={after.files_on_disk} "
        f"scan_before_s={before.scan_s:.3f} scan_after_s={after.scan_s:.3f} "
        f"scan_ratio={after.scan_s / before.scan_s:.3f} apply_before_s={before.apply_s:.3f} "
        f"apply_after_s={after.apply_s:.3f} apply_ratio={after.apply_s / before.apply_s:.3f} "
        f"maintenance_s={maintenance_s:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--windows", type=int, default=500, help="windows applied before maintenance (default 500)")
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the table (default 100000)")
    parser.add_argument("--changes", type=int, default=20, help="changes per window (default 20)")
    parser.add_argument("--apply-batch", type=int, default=50, help="windows per run_apply call (default 50)")
    parser.add_argument("--scan-repeats", type=int, default=3, help="timed full scans, median (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the key choice (default 1)")
    parser.add_argument("--port", type=int, help="port of the local MySQL instance (default: a free one)")
    parser.add_argument("--instance", default=INSTANCE_NAME, help=f"local MySQL instance (default {INSTANCE_NAME})")
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    args = parser.parse_args(argv)
    require_positive(parser, args, "windows", "rows", "changes", "apply_batch", "scan_repeats", "spark_cores")
    options = Options(
        args.rows,
        args.windows,
        args.changes,
        args.apply_batch,
        args.scan_repeats,
        args.seed,
        args.spark_cores,
        args.driver_memory,
    )
    return int(
        print_summary(
            local_server(args.instance, apply_bench.LOCAL_SETTINGS, args.port), lambda s: benchmark(s, options)
        )
    )


if __name__ == "__main__":
    sys.exit(main())
