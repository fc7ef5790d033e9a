"""The pipeline driver of the exactness tests, at engine level.

A pipeline snapshots its tables (every chunk, one after the other), then runs windows as the example
DAG runs them: the snapshot plan (tables never snapshotted, and tables a change left waiting for a
rebuild) and its chunks, a capture with ``cutoff=catch_up`` (everything committed so far) and the
Spark apply of that window into the catalog ``lake``. After each window every table of the
pipeline's databases, in MySQL and in the warehouse, is compared value by value
(:mod:`tests.exactness.comparison`). A window either is exact, or it stops with a named error of
the provider (:class:`WindowStopped`). The one documented exception: a table whose window held a
change its target cannot follow waits for the fresh snapshot of the next run (the apply reports it);
it is compared again after that run, and :meth:`ExactnessPipeline.finish` runs that one more window
when the test's last window left such a table.

The apply runs in the test run's one SparkSession, or (``own_jvm=True``, for cases that may exhaust
a JVM's memory) as ``spark-submit`` of the provider's job, as the example DAG's ``SparkApplyOperator``
runs it: Spark's default memory unless the windows' largest staged row needs more, which the
operator's own sizing (:func:`~airflow_provider_mysql_cdc.apply.memory.plan_apply_memory`) then
gives the driver. An ``OutOfMemoryError`` cannot take the shared session down.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_mysql_cdc.apply import spark_job
from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec
from airflow_provider_mysql_cdc.apply.memory import plan_apply_memory
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.capture.engine import CaptureResult
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import MySqlCdcError
from airflow_provider_mysql_cdc.snapshot.engine import ChunkResult
from airflow_provider_mysql_cdc.staging import Staging
from tests.exactness.comparison import TableComparison, compare_table, describe_differences, sql_string
from tests.exactness.iceberg_reader import current_metadata_file
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG, iceberg_jars


@dataclass(frozen=True)
class StopError:
    """A named error that stopped a window, where it came from (snapshot, capture or apply) and for
    which table (apply errors are per table)."""

    stage: str
    error_class: str
    message: str
    table: str = ""

    def __str__(self) -> str:
        where = f"{self.stage} of {self.table}" if self.table else self.stage
        return f"{where}: {self.error_class}: {self.message[:600]}"


class WindowStopped(Exception):
    """A window stopped with errors instead of applying (named errors of the provider, or not)."""

    def __init__(self, window: int, errors: Sequence[StopError]) -> None:
        self.window = window
        self.errors = tuple(errors)
        super().__init__(f"window {window} stopped: " + "; ".join(str(e) for e in errors))

    @property
    def error_classes(self) -> set[str]:
        return {e.error_class for e in self.errors}


class NotExact(AssertionError):
    """After a window, MySQL and Iceberg differ (the message lists the differing rows)."""


class ApplyProcessFailed(AssertionError):
    """The spark-submit of the apply ended without a report (the JVM or the driver died)."""


@dataclass
class WindowRecord:
    """What one window of a test pipeline did."""

    window_id: int
    capture: dict[str, Any]
    apply: ApplyReport
    comparisons: list[TableComparison] = field(default_factory=list)


def _stopped_by_apply(window_id: int, report: ApplyReport) -> WindowStopped | None:
    if not report.failed:
        return None
    errors = [
        StopError("apply", report.tables[name].error_class or "?", report.tables[name].error, name)
        for name in report.failed
    ]
    return WindowStopped(window_id, errors)


#: The master of the apply's own JVM (the example DAG's ``spark_default`` is ``local[*]``; two cores here).
SUBMIT_MASTER = "local[2]"


def submit_apply(config: ApplySpec, warehouse: Path, report_path: Path) -> ApplyReport:
    """Run the provider's apply job with ``spark-submit`` (local master) on the Hadoop catalog
    ``config.catalog`` at ``warehouse``; return its report. Spark's memory is sized as
    ``SparkApplyOperator`` sizes it (:func:`plan_apply_memory`), which raises
    ``SparkMemoryTooSmallError`` before anything is submitted when this machine cannot hold the rows."""
    prefix = f"spark.sql.catalog.{config.catalog}"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hadoop",
        f"{prefix}.warehouse": str(warehouse),
        f"{prefix}.cache.expiration-interval-ms": "-1",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    spec_path = report_path.with_name(f"{report_path.stem}.spec.json")
    spec_path.write_text(dataclasses.replace(config, report_uri=str(report_path)).to_json())
    staging = Staging(config.staging_uri, config.pipeline)
    _, sized = plan_apply_memory(staging, config.first_window, config.last_window, SUBMIT_MASTER, conf)
    driver_memory = sized.pop("spark.driver.memory", None)
    conf.update(sized)
    argv = [
        str(Path(sys.executable).with_name("spark-submit")),
        "--master",
        SUBMIT_MASTER,
        *(["--driver-memory", driver_memory] if driver_memory else []),
        "--jars",
        ",".join(str(jar) for jar in iceberg_jars()),
        *(item for key, value in conf.items() for item in ("--conf", f"{key}={value}")),
        str(Path(spark_job.__file__)),
        "--spec",
        str(spec_path),
    ]
    environment = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    report_path.unlink(missing_ok=True)
    done = subprocess.run(argv, capture_output=True, text=True, env=environment, check=False)
    if not report_path.is_file():
        raise ApplyProcessFailed(
            f"spark-submit of the apply of windows {config.first_window}..{config.last_window} exited "
            f"{done.returncode} without a report:\n{done.stderr[-3000:]}"
        )
    return ApplyReport.from_json(report_path.read_text(), str(report_path))


class ExactnessPipeline:
    """One test pipeline over whole databases: snapshot, then windows of capture + apply, each
    followed by the comparison of every table of those databases.

    The targets are compared with ``oracle`` (default: ``server`` itself). A source that is written
    while windows are cut (the randomized differential) is compared through a replica stopped at the
    window's upper GTID set instead: that replica is MySQL as of the window."""

    def __init__(
        self,
        server: MySqlTestServer,
        spark: Any,
        tmp_path: Path,
        name: str,
        databases: Sequence[str],
        *,
        own_jvm: bool = False,
        oracle: MySqlTestServer | None = None,
        apply_settings: dict[str, Any] | None = None,
        **snapshot_settings: Any,
    ) -> None:
        self.server = server
        self.oracle = oracle or server
        self.spark = spark
        self.name = name
        self.databases = tuple(databases)
        self.own_jvm = own_jvm
        #: Fields of every window's :class:`ApplySpec` beyond its windows and catalog (``chunks_per_commit``).
        self.apply_settings = dict(apply_settings or {})
        self.warehouse = Path(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse"))
        self.root = tmp_path / name
        self.root.mkdir(parents=True, exist_ok=True)
        patterns = TableSelection.of(*(f"{db}.*" for db in self.databases))
        self.engine = SnapshotPipeline(server, self.root, name, patterns, **snapshot_settings)
        self.windows: list[WindowRecord] = []
        #: Differences and stops found by :meth:`check_window`, one text per window.
        self.differences: list[str] = []
        #: ``db.table`` -> why, for tables the last window left waiting for a rebuild (not compared
        #: until the next window, whose snapshot re-reads them).
        self.rebuilding: dict[str, str] = {}

    # -- running ------------------------------------------------------------------------------------

    def snapshot(self) -> list[ChunkResult]:
        """Plan the pipeline's snapshot and run every chunk; return the chunks' results."""
        try:
            return self.engine.snapshot(f"{self.name}-snapshot-{len(self.windows)}")
        except MySqlCdcError as exc:
            raise WindowStopped(len(self.windows) + 1, [StopError("snapshot", type(exc).__name__, str(exc))]) from exc

    def _apply(self, config: ApplySpec) -> ApplyReport:
        if self.own_jvm:
            return submit_apply(config, self.warehouse, self.root / f"apply-{config.first_window}.json")
        return run_apply(self.spark, config)

    def run_window(self) -> WindowRecord:
        """Capture the next window (everything committed so far) and apply it; raise
        :class:`WindowStopped` when the capture or a table's apply stopped with an error."""
        if self.windows:  # as each run of the example DAG: snapshot what needs one, then capture
            self.snapshot()
        return self.apply_captured(self.capture_next())

    def capture_next(self) -> CaptureResult:
        """Capture the next window (``cutoff=catch_up``: everything committed so far), without the
        snapshot plan that :meth:`run_window` runs first; raise :class:`WindowStopped` on a named error."""
        number = len(self.windows) + 1
        try:
            return self.engine.capture(f"{self.name}-run-{number}")
        except MySqlCdcError as exc:
            raise WindowStopped(number, [StopError("capture", type(exc).__name__, str(exc))]) from exc

    def apply_captured(self, result: CaptureResult) -> WindowRecord:
        """Apply a captured window and record it (and the tables it leaves waiting for a rebuild);
        raise :class:`WindowStopped` when the apply, or a table's apply, stopped with an error."""
        window_id = result.window_id
        config = ApplySpec(
            self.name, str(self.engine.staging), window_id, window_id, catalog=CATALOG, **self.apply_settings
        )
        try:
            report = self._apply(config)
        except MySqlCdcError as exc:
            raise WindowStopped(window_id, [StopError("apply", type(exc).__name__, str(exc))]) from exc
        record = WindowRecord(window_id, result.as_xcom(), report)
        self.windows.append(record)
        self.rebuilding = {name: t.rebuild for name, t in report.tables.items() if t.rebuild}
        stopped = _stopped_by_apply(window_id, report)
        if stopped is not None:
            raise stopped
        return record

    # -- comparing ----------------------------------------------------------------------------------

    def tables(self) -> list[tuple[str, str]]:
        """Every table of the pipeline's databases that exists in MySQL or has an Iceberg target."""
        found: set[tuple[str, str]] = set()
        for database in self.databases:
            rows = self.oracle.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES "
                f"WHERE TABLE_SCHEMA = {sql_string(database)} AND TABLE_TYPE = 'BASE TABLE'"
            )
            found.update((database, str(row[0])) for row in rows)
            namespace = self.warehouse / database
            if namespace.is_dir():
                found.update(
                    (database, path.name) for path in namespace.iterdir() if current_metadata_file(path) is not None
                )
        return sorted(found)

    def compare(self, tables: Iterable[tuple[str, str]] | None = None) -> list[TableComparison]:
        """Compare the given tables (default: :meth:`tables`) with their Iceberg targets; tables waiting
        for a rebuild are left out until the next window."""
        chosen = self.tables() if tables is None else list(tables)
        chosen = [(db, table) for db, table in chosen if f"{db}.{table}" not in self.rebuilding]
        comparisons = [compare_table(self.oracle, self.warehouse, database, table) for database, table in chosen]
        if self.windows:
            self.windows[-1].comparisons = comparisons
        return comparisons

    def _differences_text(self, comparisons: Sequence[TableComparison]) -> str | None:
        if all(c.equal for c in comparisons):
            return None
        window = self.windows[-1].window_id if self.windows else 0
        return f"pipeline {self.name}, after window {window}:\n{describe_differences(comparisons)}"

    def assert_exact(self, tables: Iterable[tuple[str, str]] | None = None) -> list[TableComparison]:
        """Compare, and raise :class:`NotExact` listing the differing rows when any table differs."""
        comparisons = self.compare(tables)
        text = self._differences_text(comparisons)
        if text is not None:
            raise NotExact(text)
        return comparisons

    def window(self, tables: Iterable[tuple[str, str]] | None = None) -> WindowRecord:
        """Run a window, then assert that every table is exact."""
        record = self.run_window()
        self.assert_exact(tables)
        return record

    def start(self) -> WindowRecord:
        """Snapshot, then a first window (the hand-off, which loads the snapshot), then assert exact."""
        self.snapshot()
        return self.window()

    def check_window(self) -> WindowRecord:
        """Run a window and compare; differences are kept in :attr:`differences` (the next windows
        still run and are compared), a stop is raised."""
        record = self.run_window()
        text = self._differences_text(self.compare())
        if text is not None:
            self.differences.append(text)
        return record

    def settle(self) -> None:
        """When the last window left tables waiting for a rebuild, run the next window (its snapshot
        re-reads them) and compare again."""
        if self.rebuilding:
            self.check_window()
            if self.rebuilding:
                self.differences.append(f"pipeline {self.name}: still waiting for a rebuild: {self.rebuilding}")

    def finish(self, stop: WindowStopped | None = None, *, settle: bool = True) -> None:
        """Raise :class:`NotExact` with every window's differences and the stop, if any (after the
        window that completes pending rebuilds, unless ``settle`` is False: the scenario ended on a
        stop it allows)."""
        if stop is None and settle:
            self.settle()
        found = [*self.differences, *([str(stop)] if stop is not None else [])]
        if found:
            raise NotExact("\n\n".join(found))

    # -- writing to MySQL ---------------------------------------------------------------------------

    def sql(self, *statements: str, session: Sequence[str] = ()) -> list[tuple[Any, ...]]:
        """Run statements as the admin, in one session that first runs ``session`` (``SET SESSION ...``);
        return the last statement's rows."""
        return self.server.execute(*session, *statements)
