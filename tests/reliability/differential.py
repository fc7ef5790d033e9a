"""The randomized differential cycle: seeded workload -> snapshot -> capture -> Spark apply, then
every Iceberg table compared with MySQL as of the window's upper GTID set, value by value.

The pipeline is the exactness tests' :class:`~tests.exactness.harness.ExactnessPipeline` (its schema
change policy is the default, ``rebuild``), compared with a replica of the source instead of the
source. One window of :func:`run_differential` mirrors one run of the example DAG:

1. the workload's step for the window (:meth:`Workload.step`; window 1 creates the database);
2. a :class:`ConcurrentWriter` starts writing small transactions;
3. the snapshot plan and every chunk (the first window snapshots every table; later ones the tables
   created since and the tables a window left waiting for a rebuild), then the capture with the
   ``catch_up`` cut-off, all while the writer writes, so snapshots are taken and windows are cut on a
   source that is being written;
4. the writer stops; the apply runs the window into the Iceberg catalog ``lake``;
5. the oracle: the replica applies exactly the window's upper GTID set (:meth:`Replica.apply_until`),
   and every table of the database on the replica is compared with its Iceberg target read by
   pyiceberg (:mod:`tests.exactness.comparison`: canonical values, both directions, as multisets).

A table the window left waiting for a rebuild (a change its target cannot follow: the apply skips its
rows from that change on and reports it) is not compared after that window; the next window's snapshot
plan takes it, and from then on it is compared again (a table that loses its primary key is such a
table: re-built, then followed as a table without a key). Tables without a key are compared as
multisets like every table; a stop of any table (``TargetDivergedError`` included) ends the run.
After the last window a *settle* window runs with no writes at all (the snapshot plan, a capture,
the apply): no table may still wait, and every table must equal MySQL. Its capture still holds what the
writer wrote after the last window's cut-off, and such a change can leave a table waiting (a key change
under a minimal row image); then a second settle window runs, whose capture is empty by construction,
and only after it is a table still waiting a difference.

Because the writer keeps writing after the cut-off, the live source is ahead of the window; the
replica stopped at the window's upper set is MySQL as of that set.

``rows`` in the result counts rows the pipeline moved: rows staged by the captures (every change
row of every window) plus rows read by the snapshots. ``differences`` counts rows present on one side
only (both directions, as multisets) plus one per table-level problem (target missing, a MySQL column
missing from the target, a table still waiting after the settle window), and one per table whose
apply stopped with an error that is not allowed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_mysql_cdc.apply.contract import ApplyReport
from airflow_provider_mysql_cdc.capture.engine import CaptureResult
from tests.exactness.comparison import TableComparison
from tests.exactness.harness import ExactnessPipeline, StopError, WindowStopped
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
    #: Times a table was left waiting for a rebuild after a window (and compared again after the next).
    rebuilds: int = 0
    #: Whether the settle window ran and left every table equal to MySQL.
    settled: bool = False
    #: One line per window (the workload's operation counts, rows, tables compared, differences).
    lines: list[str] = field(default_factory=list)
    #: Descriptions of every difference found (table, window, differing rows).
    problems: list[str] = field(default_factory=list)
    #: Operations by kind over the whole run (main workload and concurrent writer).
    op_counts: OpCounts = field(default_factory=OpCounts)
    #: Rows written by the workload (as MySQL counted them).
    rows_written: int = 0
    replay: str = ""

    def summary(self) -> str:
        return (
            f"seed={self.seed} windows={self.windows} rows={self.rows} rows_written={self.rows_written} "
            f"rebuilds={self.rebuilds} differences={self.differences}"
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
    """Rows on one side only (as multisets), plus one per table-level problem."""
    rows = sum(n for _, n in comparison.only_mysql) + sum(n for _, n in comparison.only_iceberg)
    return rows + len(comparison.problems)


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


@dataclass
class _Outcome:
    """One window's apply: its report (None when the whole apply stopped) and the errors not allowed."""

    report: ApplyReport | None
    errors: list[StopError]


def _apply(pipeline: ExactnessPipeline, capture: CaptureResult) -> _Outcome:
    """Apply the window; every table it stops is an error (a table waiting for a rebuild is not
    stopped: the apply reports it waiting)."""
    try:
        record = pipeline.apply_captured(capture)
    except WindowStopped as stopped:
        applied = bool(pipeline.windows) and pipeline.windows[-1].window_id == capture.window_id
        report = pipeline.windows[-1].apply if applied else None
        return _Outcome(report, list(stopped.errors))
    return _Outcome(record.apply, [])


def run_differential(
    spark: Any,
    source: MySqlTestServer,
    replica: Replica,
    workdir: Path,
    *,
    seed: int,
    windows: int,
    database: str | None = None,
    size: WorkloadSize | None = None,
    log: Callable[[str], None] = print,
    replay: str | None = None,
) -> DifferentialResult:
    """Run ``windows`` windows of the seed's workload through the pipeline, comparing after each, then
    the settle window.

    ``replica`` must replicate ``source`` (at least the workload's database) and have its SQL thread
    stopped before the database is created. Stops at the first window that stops with an error that is
    not allowed (later windows would only repeat it); differences in the comparison do not stop the run.
    ``replay`` is the command that runs this seed again, for messages (default: the long runner's).
    The workload's statements depend only on the seed, ``windows`` and ``size``; the concurrent
    writer's interleaving with the snapshot and the capture is timing.
    """
    workload = Workload(seed, windows, database, size)
    result = DifferentialResult(seed, workload.database, replay=replay or replay_command(seed, windows))
    workdir.mkdir(parents=True, exist_ok=True)
    pipeline = ExactnessPipeline(
        source,
        spark,
        workdir,
        f"rel-{workload.database}",
        [workload.database],
        oracle=replica.server,
        chunk_rows=CHUNK_ROWS,
    )
    log(
        f"seed={seed}: database {workload.database}, {windows} windows, large transaction in window "
        f"{workload.large_window}, scheduled {dict(sorted(workload.schedule.items()))}"
    )
    with_vector = _mysql_major(source) >= 9
    stopped = False
    for window in range(1, windows + 1):
        problems_before = len(result.problems)
        stopped = _run_window(pipeline, source, replica, workload, window, with_vector, result, log)
        for problem in result.problems[problems_before:]:
            log("  " + problem.replace("\n", "\n  "))
        if stopped:
            log(f"seed={seed}: stopping after window {window}: it stopped with an error that is not allowed")
            break
    if not stopped:
        problems_before = len(result.problems)
        _settle(pipeline, replica, result, log)
        for problem in result.problems[problems_before:]:
            log("  " + problem.replace("\n", "\n  "))
    result.op_counts = workload.totals
    result.rows_written = workload.rows_written
    if result.differences:
        log(result.failure_message())
    return result


def _run_window(
    pipeline: ExactnessPipeline,
    source: MySqlTestServer,
    replica: Replica,
    workload: Workload,
    window: int,
    with_vector: bool,
    result: DifferentialResult,
    log: Callable[[str], None],
) -> bool:
    """One window (see the module docstring); returns whether it stopped with an error not allowed."""
    timer = _Timer()
    counts = workload.step(source.admin, window, with_vector=with_vector)
    timer.lap("workload")
    waiting_before = dict(pipeline.rebuilding)
    writer = ConcurrentWriter(workload, source.admin, window)
    writer.start()
    try:
        try:
            chunks = pipeline.snapshot()
            timer.lap("snapshot")
            capture = pipeline.capture_next()
            timer.lap("capture")
        finally:
            writer_counts = writer.stop()
    except WindowStopped as stop:
        result.problems += [f"window {window}: {error}" for error in stop.errors]
        result.differences += len(stop.errors)
        return True
    workload.totals.update(writer_counts)
    workload.rows_written += writer.rows
    if capture.window_id != window:
        raise AssertionError(f"seed {workload.seed}: window {window} was captured as window {capture.window_id}")
    outcome = _apply(pipeline, capture)
    timer.lap("apply")
    snapshot_rows = sum(chunk.rows for chunk in chunks)
    result.rows += snapshot_rows + sum(capture.op_counts.values())
    result.windows = window
    differences = _check(pipeline, replica, capture, outcome, waiting_before, f"window {window}", result)
    timer.lap("compare")
    tables = outcome.report.tables if outcome.report else {}
    line = (
        f"seed={workload.seed} window={window} {timer.line()} chunks={len(chunks)} snapshot_rows={snapshot_rows} "
        f"captured_rows={sum(capture.op_counts.values())} transactions={capture.transactions} "
        f"applied={sum(1 for t in tables.values() if t.status == 'applied')} "
        f"waiting={','.join(sorted(pipeline.rebuilding)) or '-'} "
        f"compared={len(pipeline.windows[-1].comparisons) if pipeline.windows else 0} "
        f"differences={differences} | {counts.line()} | writer {writer_counts.line()}"
    )
    result.lines.append(line)
    log(line)
    return bool(outcome.errors)


def _check(
    pipeline: ExactnessPipeline,
    replica: Replica,
    capture: CaptureResult,
    outcome: _Outcome,
    waiting_before: dict[str, str],
    where: str,
    result: DifferentialResult,
    *,
    final: bool = False,
) -> int:
    """Compare every table not waiting for a rebuild with the replica at the window's upper set; record
    the differences, the errors not allowed and the tables that wait too long (after ``final``: any);
    return how many."""
    differences = 0
    for error in outcome.errors:
        result.problems.append(f"{where}: {error}")
        differences += 1
    for name, why in pipeline.rebuilding.items():
        if final:
            result.problems.append(f"{where}: {name} is still waiting for a rebuild after it: {why}")
            differences += 1
        elif waiting_before.get(name) == why:  # the snapshot plan of this window should have taken it
            result.problems.append(f"{where}: {name} still waits for the same rebuild: {why}")
            differences += 1
    result.rebuilds += len(pipeline.rebuilding)
    replica.apply_until(capture.upper)
    for comparison in pipeline.compare():
        found = count_differences(comparison)
        if found:
            differences += found
            result.problems.append(f"{where} (upper {capture.upper}): {comparison.describe()}")
    result.differences += differences
    return differences


def _settle(
    pipeline: ExactnessPipeline, replica: Replica, result: DifferentialResult, log: Callable[[str], None]
) -> None:
    """The settle windows: the snapshot plan (it takes every table still waiting), a capture of whatever
    is left and the apply, with no writes at all; then no table may wait and every table must be equal.

    The first one's capture holds the writer's changes after the last window's cut-off; when they leave a
    table waiting, a second window (nothing left to capture) must take it."""
    settle_differences = 0
    for attempt in (1, 2):
        timer = _Timer()
        waiting_before = dict(pipeline.rebuilding)
        try:
            chunks = pipeline.snapshot()
            capture = pipeline.capture_next()
        except WindowStopped as stop:
            result.problems += [f"settle window: {error}" for error in stop.errors]
            result.differences += len(stop.errors)
            return
        outcome = _apply(pipeline, capture)
        where = f"settle window {capture.window_id}"
        result.rows += sum(chunk.rows for chunk in chunks) + sum(capture.op_counts.values())
        final = attempt == 2 or not pipeline.rebuilding
        differences = _check(pipeline, replica, capture, outcome, waiting_before, where, result, final=final)
        settle_differences += differences
        timer.lap("settle")
        line = (
            f"seed={result.seed} {where} {timer.line()} chunks={len(chunks)} "
            f"captured_rows={sum(capture.op_counts.values())} rebuilt={','.join(sorted(waiting_before)) or '-'} "
            f"waiting={','.join(sorted(pipeline.rebuilding)) or '-'} "
            f"compared={len(pipeline.windows[-1].comparisons)} differences={differences}"
        )
        result.lines.append(line)
        log(line)
        if final:
            result.settled = settle_differences == 0
            return


def _mysql_major(server: MySqlTestServer) -> int:
    version = str(server.execute("SELECT VERSION()")[0][0])
    return int(version.split(".", 1)[0])
