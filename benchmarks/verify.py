"""Verify cost per million rows, against a plain full-table Spark read of the same target, in one run.

What it measures, with one SparkSession (``local[2]``, as :mod:`benchmarks.apply` builds it):

1. **Load** (not timed). ``bench.verify_rows`` with ``--rows`` rows (the schema and values of
   :mod:`benchmarks.apply`: BIGINT key, INT, VARCHAR(40), DECIMAL(12,2), DATETIME(6)).
2. **Pipeline** (not timed). Snapshot, a window of ``--changes`` changes (60% updates, 20% inserts,
   20% deletes) captured and applied: the target holds the snapshot and that window. Then another
   ``--changes`` changes are made in MySQL and not applied, so every verification brings the target
   to its read of MySQL by capturing and applying those changes in memory.
3. **Rounds** (``--rounds``, default 2; medians reported), each timing, in this order:

   a. **baseline**: ``SELECT COUNT(*), SUM(xxhash64(<every column>))`` over the target: one full read
      of the Iceberg table with a hash of each row (what any comparison must at least do on the lake
      side);
   b. **full verify**: :func:`~airflow_provider_mysql_cdc.verify.engine.verify_targets` with every
      key range checked: consistent snapshot of the MySQL table into scratch staging, capture of the
      changes since the target's frontier, checksums of both sides per range;
   c. **sampled verify**: the same with ``--sample-fraction`` of the ranges (default 0.1).

   Each verification must report the table equal (the benchmark fails otherwise).

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``benchverify``)::

    .venv/bin/python benchmarks/verify.py
    .venv/bin/python benchmarks/verify.py --rows 300000 --rounds 1

The last line printed is always::

    verify rows=<n> baseline_s=<a> full_s=<b> sampled_s=<c> full_s_per_million=<..> full_vs_baseline=<b/a>
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

# benchmarks/apply.py is this folder's script (sys.path[0] of a script): its table, load and Spark helpers.
import apply as apply_bench  # type: ignore[import-not-found, unused-ignore]
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]
    BenchmarkError,
    Server,
    execute,
    local_server,
    print_summary,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLE = f"{apply_bench.DATABASE}.verify_rows"
INSTANCE_NAME = "benchverify"
PIPELINE = "benchverify"


def baseline_read(spark: SparkSession, target: str) -> float:
    """Seconds of one full read of the target with a hash of every row."""
    spark.sql(f"REFRESH TABLE {target}")
    started = time.perf_counter()
    spark.sql(f"SELECT COUNT(*), SUM(xxhash64(id, a, b, c, d)) FROM {target}").collect()
    return time.perf_counter() - started


def timed_verify(spark: SparkSession, server: Server, fraction: float, seed: int) -> tuple[float, str]:
    """Seconds of one verification of the table, and its report line; fails unless the table is equal."""
    from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets

    request = VerifyRequest(PIPELINE, (TABLE,), catalog=apply_bench.CATALOG, sample_fraction=fraction, seed=seed)
    started = time.perf_counter()
    report = verify_targets(spark, server.cdc, request)
    seconds = time.perf_counter() - started
    (table,) = report.tables
    if table.problem or table.differs:
        raise BenchmarkError(f"the verification found {TABLE} not equal: {table.describe()}")
    return seconds, table.describe().splitlines()[0]


def benchmark(server: Server, rows: int, changes: int, rounds: int, fraction: float) -> str:
    """Load, run the pipeline once, then time the baseline and the two verifications per round."""
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    execute(server.admin, f"DROP DATABASE IF EXISTS {apply_bench.DATABASE}", f"CREATE DATABASE {apply_bench.DATABASE}")
    print(f"load rows={rows} seconds={apply_bench.load(server.admin, TABLE, rows):.1f}", flush=True)
    timings: dict[str, list[float]] = {"baseline": [], "full": [], "sampled": []}
    rng = random.Random(1)
    keys = apply_bench.Keys(TABLE, rows, random.Random(2))
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch_dir:
        scratch = Path(scratch_dir)
        store = FrontierStore.from_url(f"sqlite:///{scratch / 'meta.db'}")
        store.ensure_schema()
        pipeline = apply_bench.Pipeline(PIPELINE, TABLE, str(scratch / "staging"), store, 4_600_001)
        pipeline.snapshot(server.cdc)
        apply_bench.make_changes(server.admin, [keys], changes, rng)
        pipeline.capture(server.cdc, 1)
        spark = apply_bench.spark_session(scratch, 2, "2g")
        try:
            apply_bench.apply_window(spark, pipeline, 1)
            apply_bench.make_changes(server.admin, [keys], changes, rng)  # not applied: verify catches up
            baseline_read(spark, pipeline.target)  # warm-up, not timed
            for round_no in range(rounds):
                timings["baseline"].append(baseline_read(spark, pipeline.target))
                for name, share in (("full", 1.0), ("sampled", fraction)):
                    seconds, line = timed_verify(spark, server, share, round_no)
                    timings[name].append(seconds)
                    print(f"round {round_no + 1} {name}: {seconds:.2f} s: {line}", flush=True)
                print(f"round {round_no + 1} baseline: {timings['baseline'][-1]:.2f} s", flush=True)
        finally:
            spark.stop()
    base, full, sampled = (statistics.median(timings[name]) for name in ("baseline", "full", "sampled"))
    millions = (rows + keys.inserted - keys.deleted) / 1e6
    return (
        f"verify rows={rows} changes_caught_up={changes} baseline_s={base:.2f} full_s={full:.2f} "
        f"sampled_s={sampled:.2f} (fraction {fraction}) full_s_per_million={full / millions:.2f} "
        f"sampled_s_per_million={sampled / millions:.2f} full_vs_baseline={full / base:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table (default 1000000)")
    parser.add_argument("--changes", type=int, default=10_000, help="changes per change set (default 10000)")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds; medians reported (default 2)")
    parser.add_argument("--sample-fraction", type=float, default=0.1, help="sampled verify fraction (default 0.1)")
    parser.add_argument("--port", type=int, help="port of the local MySQL instance (default: a free one)")
    args = parser.parse_args(argv)
    if min(args.rows, args.changes, args.rounds) < 1 or not 0 < args.sample_fraction <= 1:
        parser.error("--rows, --changes and --rounds must be positive; --sample-fraction in (0, 1]")
    return int(
        print_summary(
            local_server(INSTANCE_NAME, apply_bench.LOCAL_SETTINGS, args.port),
            lambda server: benchmark(server, args.rows, args.changes, args.rounds, args.sample_fraction),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
