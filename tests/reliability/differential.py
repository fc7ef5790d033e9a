"""The randomized differential cycle: seeded workload -> snapshot -> capture -> Spark apply, then
every Iceberg table compared with MySQL as of the window's upper GTID set.

One window of :func:`run_differential` mirrors one run of the example DAG:

1. the workload's step for the window (:meth:`Workload.step`; window 1 creates the database);
2. a :class:`ConcurrentWriter` starts writing small transactions;
3. ``plan_snapshot`` and every chunk (the first window snapshots every table, later ones the tables
   created since), then ``capture_window`` with the ``catch_up`` cut-off, all while the writer
   writes, so snapshots are taken and windows are cut on a source that is being written;
4. the writer stops; ``run_apply`` applies the window into the Iceberg catalog;
5. the oracle: the replica applies exactly the window's upper GTID set
   (:meth:`Replica.apply_until`), and ``compare_with_mysql`` compares every table of the database on
   the replica with its Iceberg target, full rows, both directions (Spark ``exceptAll``).

Because the writer keeps writing after the cut-off, the live source is ahead of the window; the
replica stopped at the window's upper set is MySQL as of that set.

``rows`` in the result counts rows the pipeline moved: rows staged by the captures (every change
row of every window) plus rows read by the snapshots (the verification snapshots of the comparison
are not counted). ``differences`` counts rows present on one side only (both directions, as
multisets), plus one per table that could not be compared (target missing, a MySQL column missing
from the target) and one per table whose apply failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.apply.verify import TableComparison, compare_with_mysql
from airflow_provider_mysql_cdc.core.windows import TableSelection
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.reliability.replica import Replica
from tests.reliability.workload import ConcurrentWriter, OpCounts, Workload, WorkloadSize

#: Rows per snapshot chunk: small, so that tables have several chunks (per-chunk hand-off).
CHUNK_ROWS = 120


def replay_command(seed: int, windows: int) -> str:
    """The command that runs one seed of the long runner again (same seed and windows: same workload)."""
    return (
        f".venv/bin/python -m tests.reliability.run --seeds 1 --first-seed {seed} --windows {windows} --crash-trials 0"
    )


def replica_filter(database: str) -> str:
    """The ``REPLICATE_WILD_DO_TABLE`` pattern of exactly one database."""
    escaped = database.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    return f"{escaped}.%"


@dataclass
class DifferentialResult:
    """What one seed's run did and found."""

    seed: int
    database: str
    windows: int = 0
    #: Rows staged by the captures plus rows read by the snapshots.
    rows: int = 0
    differences: int = 0
    #: One line per window (the workload's operation counts, rows, tables compared, differences).
    lines: list[str] = field(default_factory=list)
    #: Descriptions of every difference found (with example rows).
    problems: list[str] = field(default_factory=list)
    #: Operations by kind over the whole run (main workload and concurrent writer).
    op_counts: OpCounts = field(default_factory=OpCounts)
    #: Rows written by the workload (as MySQL counted them).
    rows_written: int = 0
    replay: str = ""

    def summary(self) -> str:
        return (
            f"seed={self.seed} windows={self.windows} rows={self.rows} rows_written={self.rows_written} "
            f"differences={self.differences}"
        )

    def failure_message(self) -> str:
        """Seed, replay command and the differences (for assertion messages)."""
        return "\n".join(
            [
                f"randomized differential seed {self.seed}: {self.differences} differences (replay: {self.replay})",
                *self.problems[:20],
                "windows:",
                *self.lines,
            ]
        )


def count_differences(comparison: TableComparison) -> int:
    """Rows on one side only; a table that could not be compared counts its MySQL rows (at least 1)."""
    if comparison.problem or comparison.iceberg_rows is None:
        return max(comparison.mysql_rows, 1)
    return comparison.only_in_mysql + comparison.only_in_iceberg + (1 if comparison.missing_columns else 0)


def replica_tables(replica: Replica, database: str) -> list[str]:
    """``db.table`` of every base table of ``database`` on the replica, sorted."""
    rows = replica.server.execute(
        "SELECT table_name FROM information_schema.tables "
        f"WHERE table_schema = '{database}' AND table_type = 'BASE TABLE' ORDER BY table_name"
    )
    return [f"{database}.{row[0]}" for row in rows]


class _Timer:
    """Seconds per phase of one window, for the window's line."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = now - self._last
        self._last = now

    def line(self) -> str:
        total = sum(self.phases.values())
        return f"{total:.1f}s (" + " ".join(f"{name}={s:.1f}" for name, s in self.phases.items()) + ")"


def run_differential(
    spark: Any,
    source: MySqlTestServer,
    replica: Replica,
    workdir: Path,
    *,
    seed: int,
    windows: int,
    catalog: str = "lake",
    database: str | None = None,
    size: WorkloadSize | None = None,
    log: Callable[[str], None] = print,
    replay: str | None = None,
) -> DifferentialResult:
    """Run ``windows`` windows of the seed's workload through the pipeline, comparing after each.

    ``replica`` must replicate ``source`` (at least the workload's database) and have its SQL thread
    stopped before the database is created. Stops at the first window whose apply fails (later
    windows would only repeat that failure); differences in the comparison do not stop the run.
    ``replay`` is the command that runs this seed again, for messages (default: the long runner's).
    The workload's statements depend only on the seed, ``windows`` and ``size``; the concurrent
    writer's interleaving with the snapshot and the capture is timing.
    """
    workload = Workload(seed, windows, database, size)
    result = DifferentialResult(seed, workload.database, replay=replay or replay_command(seed, windows))
    workdir.mkdir(parents=True, exist_ok=True)
    pipeline = SnapshotPipeline(
        source, workdir, f"rel-{workload.database}", TableSelection.of(f"{workload.database}.*"), chunk_rows=CHUNK_ROWS
    )
    log(
        f"seed={seed}: database {workload.database}, {windows} windows, large transaction in window "
        f"{workload.large_window}, scheduled {dict(sorted(workload.schedule.items()))}"
    )
    with_vector = _mysql_major(source) >= 9
    for window in range(1, windows + 1):
        problems_before = len(result.problems)
        failed = _run_window(spark, source, replica, pipeline, workload, window, with_vector, catalog, result, log)
        for problem in result.problems[problems_before:]:
            log("  " + problem.replace("\n", "\n  "))
        if failed:
            log(f"seed={seed}: stopping after window {window}: the apply failed")
            break
    result.op_counts = workload.totals
    result.rows_written = workload.rows_written
    if result.differences:
        log(result.failure_message())
    return result


def _run_window(
    spark: Any,
    source: MySqlTestServer,
    replica: Replica,
    pipeline: SnapshotPipeline,
    workload: Workload,
    window: int,
    with_vector: bool,
    catalog: str,
    result: DifferentialResult,
    log: Callable[[str], None],
) -> bool:
    """One window (see the module docstring); returns whether an apply failed."""
    timer = _Timer()
    run_id = f"run-{window:04d}"
    counts = workload.step(source.admin, window, with_vector=with_vector)
    timer.lap("workload")
    writer = ConcurrentWriter(workload, source.admin, window)
    writer.start()
    try:
        chunks = pipeline.snapshot(run_id)
        timer.lap("snapshot")
        capture = pipeline.capture(run_id)
        timer.lap("capture")
    finally:
        writer_counts = writer.stop()
    workload.totals.update(writer_counts)
    workload.rows_written += writer.rows
    if capture.window_id != window:
        raise AssertionError(f"seed {workload.seed}: window {window} was captured as window {capture.window_id}")
    snapshot_rows = sum(chunk.rows for chunk in chunks)
    captured_rows = sum(capture.op_counts.values())
    result.rows += snapshot_rows + captured_rows
    result.windows = window

    report = run_apply(spark, ApplySpec(pipeline.name, str(pipeline.staging), window, window, catalog=catalog))
    timer.lap("apply")
    failed = {name: report.tables[name].error for name in report.failed}
    for name, error in failed.items():
        result.problems.append(f"window {window}: apply of {name} failed: {error}")

    replica.apply_until(capture.upper)
    timer.lap("replica")
    tables = replica_tables(replica, workload.database)
    comparisons = compare_with_mysql(spark, replica.server.cdc, tables, catalog=catalog)
    timer.lap("compare")
    differences = len(failed)
    for comparison in comparisons:
        found = count_differences(comparison)
        if found:
            differences += found
            result.problems.append(f"window {window} (upper {capture.upper}): {comparison.describe()}")
    result.differences += differences
    line = (
        f"seed={workload.seed} window={window} {timer.line()} chunks={len(chunks)} snapshot_rows={snapshot_rows} "
        f"captured_rows={captured_rows} transactions={capture.transactions} "
        f"applied={sum(1 for t in report.tables.values() if t.status == 'applied')} "
        f"compared={len(comparisons)} mysql_rows={sum(c.mysql_rows for c in comparisons)} "
        f"differences={differences} | {counts.line()} | writer {writer_counts.line()}"
    )
    result.lines.append(line)
    log(line)
    return bool(failed)


def _mysql_major(server: MySqlTestServer) -> int:
    version = str(server.execute("SELECT VERSION()")[0][0])
    return int(version.split(".", 1)[0])
