"""The long reliability run (``make reliability``).

``python -m tests.reliability.run --seeds N --windows W --crash-trials T [--first-seed S]`` starts
its own local MySQL source (instance names prefixed with ``MYSQL_CDC_TEST_INSTANCE_PREFIX``, default
``reliability``), a replica of it and a local SparkSession with the Iceberg catalog ``lake``; runs the
randomized differential (:mod:`tests.reliability.differential`) for seeds S .. S+N-1 with W windows
each, then T crash trials (:func:`tests.reliability.crash.run_crash_trials`), and prints as its last
line::

    reliability windows=<n> rows=<n> seeds=<n> crash_trials=<n> differences=<n>

``windows`` and ``rows`` are summed over the seeds (rows: staged by captures plus read by snapshots);
``differences`` adds the differential's differences, one per seed that stopped with an error, and the
crash trials' differences. Exit status 1 when differences > 0. Everything it started (servers by PID,
Spark, its temporary directory) is stopped and deleted on exit, also on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

from tests.mysql_servers import running_local
from tests.reliability.differential import DifferentialResult, run_differential
from tests.reliability.replica import running_replica

PREFIX_ENV = "MYSQL_CDC_TEST_INSTANCE_PREFIX"
DEFAULT_PREFIX = "reliability"
#: The replica applies only the differential's databases (``rel_s<seed>``).
REPLICATED_TABLES = "rel\\_s%.%"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    parser.add_argument("--windows", type=int, default=25, help="windows per seed (default 25)")
    parser.add_argument("--crash-trials", type=int, default=0, help="crash trials after the seeds (default 0)")
    parser.add_argument("--first-seed", type=int, default=1, help="first seed (default 1)")
    args = parser.parse_args(argv)
    if args.seeds < 0 or args.crash_trials < 0 or args.windows < 4:
        parser.error("--seeds and --crash-trials must be >= 0 and --windows >= 4")
    return args


def _raise_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _spark(workdir: Path) -> Iterator[Any]:
    from tests.spark_session import iceberg_session

    sessions = iceberg_session(workdir / "warehouse", workdir / "spark-warehouse")
    try:
        yield next(sessions)
    finally:
        next(sessions, None)  # runs the generator's cleanup: session.stop()


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    prefix = os.environ.get(PREFIX_ENV, DEFAULT_PREFIX)
    started = time.monotonic()
    results: list[DifferentialResult] = []
    errors = 0
    crash_trials = crash_differences = 0
    with (
        tempfile.TemporaryDirectory(prefix=f"mysql-cdc-{prefix}-") as tmp,
        running_local(f"{prefix}-source") as source,
        running_replica(source, f"{prefix}-replica", wild_do_tables=[REPLICATED_TABLES]) as replica,
        _spark(Path(tmp)) as spark,
    ):
        workdir = Path(tmp)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            try:
                result = run_differential(
                    spark, source, replica, workdir / f"seed-{seed}", seed=seed, windows=args.windows, log=_say
                )
            except Exception:
                errors += 1
                _say(f"seed={seed}: the run stopped with an error (counted as a difference):")
                _say(traceback.format_exc())
                continue
            results.append(result)
            _say(f"{result.summary()} ({time.monotonic() - started:.0f}s so far)")
        if args.crash_trials > 0:
            try:
                from tests.reliability.crash import run_crash_trials

                report = run_crash_trials(
                    source,
                    workdir / "crash",
                    trials=args.crash_trials,
                    seed=args.first_seed,
                    spark=spark,
                    progress=_say,
                )
                crash_trials, crash_differences = report.trials, report.differences
            except Exception:
                errors += 1
                _say("the crash trials stopped with an error (counted as a difference):")
                _say(traceback.format_exc())
    differences = sum(r.differences for r in results) + errors + crash_differences
    _say(f"wall time {time.monotonic() - started:.0f}s")
    _say(
        f"reliability windows={sum(r.windows for r in results)} rows={sum(r.rows for r in results)} "
        f"seeds={args.seeds} crash_trials={crash_trials} differences={differences}"
    )
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
