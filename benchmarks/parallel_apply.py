"""A window of many small tables: the apply one table after the other against ``parallel_tables``.

What it measures, in one run, with one SparkSession:

1. **Load** (not timed). ``--tables`` MySQL tables ``bench_parallel.t_0000``, ``t_0001``, ... of
   :mod:`apply`'s schema, ``--rows`` rows each (ids 1..N, no binlog; :mod:`tables`' loader).
2. **Snapshot and warm-up** (not timed). One pipeline (``benchparallel``) over ``bench_parallel.*``:
   every chunk of its snapshot, then a warm-up change set in every table (``--changes``, :mod:`apply`'s
   mix: 60% updates, 20% inserts, 20% deletes), ``capture_window`` of window 1 and ``run_apply`` of
   it, one table after the other. That loads every snapshot and MERGEs the changes, so the JVM, the
   catalog and Spark's code paths are warm before the clock starts.
3. **Rounds** (``--rounds`` pairs), each: a change set in every table, one capture (one window for all
   tables), then ``run_apply`` of that window, timed, with ``parallel_tables=1`` (one table after the
   other, the apply before this setting existed) or ``parallel_tables=--parallel``, alternating which
   comes first from one pair to the next. Each window is applied once, so each round's two settings
   apply two windows of the same size, one after the other.

After each timed apply every table is checked against MySQL: row count, ``SUM(id)``, ``SUM(a)``,
``SUM(c)``, and the row count the load and change sets imply; the run fails (exit code 1) otherwise,
or when a table is not reported applied for exactly that window.

Spark runs in this process as :mod:`apply` sets it up (``local[2]``, ``--spark-cores``; a Hadoop
catalog in a temporary directory). Run (starts and afterwards destroys its own local MySQL 9.7
instance ``benchparallel``; see :mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/parallel_apply.py
    .venv/bin/python benchmarks/parallel_apply.py --tables 16 --rows 10000 --changes 500 --parallel 2

The last line printed is always::

    parallel_apply tables=<n> changes_per_table=<c> one_by_one_s=<a> parallel=<p> parallel_s=<b> ratio=<b/a>
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

# This folder is sys.path[0] of the script: mypy, given benchmarks/, knows these modules only as
# benchmarks.<name> (see apply.py).
from apply import LOCAL_SETTINGS, Keys, Pipeline, make_changes, spark_session  # type: ignore[import-not-found, unused-ignore]
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]
    BenchmarkError,
    Server,
    execute,
    local_server,
    print_summary,
    require_positive,
)
from tables import apply_windows, check_targets, load_tables  # type: ignore[import-not-found, unused-ignore]

DATABASE = "bench_parallel"
INSTANCE_NAME = "benchparallel"
PIPELINE = "benchparallel"
DEFAULT_TABLES = 8
DEFAULT_ROWS = 2_000
DEFAULT_CHANGES = 50
DEFAULT_ROUNDS = 3
DEFAULT_PARALLEL = 4


def benchmark(server: Server, tables: int, rows: int, changes: int, rounds: int, parallel: int, cores: int) -> str:
    """Load, snapshot, warm up, then the timed pairs of applies; return the summary line."""
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    names = load_tables(server, DATABASE, tables, rows)
    rng = random.Random(1)
    keys = [Keys(name, rows, random.Random(rng.random())) for name in names]
    timings: dict[int, list[float]] = {1: [], parallel: []}
    with tempfile.TemporaryDirectory(prefix="bench-parallel-apply-") as scratch_dir:
        scratch = Path(scratch_dir)
        store = FrontierStore.from_url(f"sqlite:///{scratch / 'meta.db'}")
        store.ensure_schema()
        pipeline = Pipeline(PIPELINE, f"{DATABASE}.*", str(scratch / "staging"), store, 4_700_001)
        chunks, staged = pipeline.snapshot(server.cdc)
        if staged != tables * rows:
            raise BenchmarkError(f"the snapshot staged {staged} rows, expected {tables * rows}")
        print(f"load and snapshot tables={tables} rows_each={rows} chunks={chunks}", flush=True)
        spark = spark_session(scratch, cores, "2g")
        try:
            window_id = 0
            for round_no in range(rounds + 1):  # round 0 is the warm-up, applied one table after the other
                order = [1] if round_no == 0 else ([1, parallel] if round_no % 2 else [parallel, 1])
                for setting in order:
                    make_changes(server.admin, keys, changes, rng)
                    window_id, ops = pipeline.capture(server.cdc, window_id + 1)
                    if sum(ops.values()) != tables * changes:
                        raise BenchmarkError(f"the capture of window {window_id} staged {ops}")
                    started = time.perf_counter()
                    apply_windows(spark, pipeline, window_id, names, loads=False, parallel_tables=setting)
                    seconds = time.perf_counter() - started
                    check_targets(spark, server, keys, window_id)
                    if round_no:
                        timings[setting].append(seconds)
                    label = "warm-up" if round_no == 0 else f"round {round_no}"
                    print(f"{label}: window={window_id} parallel_tables={setting} seconds={seconds:.3f}", flush=True)
        finally:
            spark.stop()
    one_by_one, side_by_side = statistics.median(timings[1]), statistics.median(timings[parallel])
    for setting, values in timings.items():
        print(f"parallel_tables={setting} seconds: {' '.join(f'{v:.3f}' for v in values)}")
    return (
        f"parallel_apply tables={tables} changes_per_table={changes} one_by_one_s={one_by_one:.3f} "
        f"parallel={parallel} parallel_s={side_by_side:.3f} ratio={side_by_side / one_by_one:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tables", type=int, default=DEFAULT_TABLES, help=f"tables (default {DEFAULT_TABLES})")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS, help=f"rows per table (default {DEFAULT_ROWS})")
    parser.add_argument(
        "--changes", type=int, default=DEFAULT_CHANGES, help=f"changes per table per window (default {DEFAULT_CHANGES})"
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help=f"timed pairs of windows (default {DEFAULT_ROUNDS})"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_PARALLEL,
        help=f"parallel_tables to compare (default {DEFAULT_PARALLEL})",
    )
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--port", type=int, help="port of the local MySQL instance (default: a free one)")
    parser.add_argument("--instance", default=INSTANCE_NAME, help=f"local MySQL instance (default {INSTANCE_NAME})")
    args = parser.parse_args(argv)
    require_positive(parser, args, "tables", "rows", "changes", "rounds", "spark_cores")
    if args.parallel < 2:
        parser.error("--parallel must be at least 2 (1 is the baseline it is compared with)")
    if args.rows < 2 * args.changes * (2 * args.rounds + 1):
        parser.error("--rows must be at least twice the updated and deleted keys of every window")

    def run(server: Server) -> str:
        return benchmark(server, args.tables, args.rows, args.changes, args.rounds, args.parallel, args.spark_cores)

    return int(print_summary(local_server(args.instance, LOCAL_SETTINGS, args.port), run))


if __name__ == "__main__":
    raise SystemExit(main())
