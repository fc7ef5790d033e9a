"""The Spark side of table maintenance: Iceberg's procedures on the tables a pipeline applies to.

The spark-submit application (``spark_apps/maintain_tables.py`` runs the same :func:`main`): it reads its
:class:`~airflow_provider_mysql_cdc.apply.contract.MaintenanceSpec`, and for each table (given, or every
table of the catalog whose newest apply commit is the pipeline's) runs, in this order:

1. ``rewrite_data_files``: bin-packs the small files each window's MERGE wrote, applying the position
   deletes to the rows it rewrites (and dropping the deletes older than every data file);
2. ``rewrite_position_delete_files``: compacts the delete files left, on tables Iceberg 1.10 can run it
   on (not those with a map or array column, which every target has: apache/iceberg#15080; the data
   rewrite applies their deletes instead, see ``DEFAULT_REWRITE_DATA_OPTIONS``);
3. ``expire_snapshots``: expires snapshots older than the retention, but always keeps every snapshot from
   the current one back to the newest commit of the apply. The compaction commits carry no CDC summary
   properties (Iceberg 1.10's procedures cannot add any: their actions commit with their own summary); the
   apply finds the table's applied window and GTID set by walking back from the current snapshot to the
   newest commit that has them (``table_applier.read_applied_state``), so that commit and the ones after
   it must stay;
4. ``remove_orphan_files``: deletes files under the table's location that no snapshot references (left by
   a crashed write) and older than ``orphan_file_age_hours``.

Then it writes the :class:`~airflow_provider_mysql_cdc.apply.contract.MaintenanceReport` (per table: files
and snapshots before and after, snapshots expired, orphans removed). A step that fails (a concurrent
commit won, storage) fails that table and the others go on. No Airflow import. Exit status: 0 every table
maintained, 1 some table failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply import maintenance_sql
from airflow_provider_mysql_cdc.apply.contract import MaintenanceReport, MaintenanceSpec, TableMaintenance
from airflow_provider_mysql_cdc.apply.iceberg_session import (
    java_error_summary,
    require_reachable_catalog,
    snapshot_summary,
)
from airflow_provider_mysql_cdc.apply.plan import AppliedState, quote
from airflow_provider_mysql_cdc.apply.table_applier import read_applied_state
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    ForeignTableError,
    MySqlCdcError,
    TableMaintenanceError,
)
from airflow_provider_mysql_cdc.staging import read_text_from_uri, write_text_to_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("airflow_provider_mysql_cdc.maintenance")


def _full_name(catalog: str, target: str) -> str:
    return f"{quote(catalog)}.{maintenance_sql.table_argument(target)}"


def _target_text(namespace: str, table: str) -> str:
    """A discovered table as ``namespace.table``, a part backquoted where it holds a dot or a backquote."""
    return ".".join(quote(part) if "." in part or "`" in part else part for part in (namespace, table))


def _count(spark: SparkSession, query: str) -> int:
    return int(spark.sql(query).collect()[0][0])


def apply_commit_flags(spark: SparkSession, full_name: str) -> list[bool]:
    """For the current snapshot and each ancestor (newest first): whether it is a commit of the apply."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, full_name)
    flags = []
    snapshot = table.currentSnapshot()
    while snapshot is not None:
        summary, parent = snapshot_summary(jvm, snapshot)
        flags.append(AppliedState.from_summary(summary, full_name) is not None)
        snapshot = None if parent is None else table.snapshot(parent)
    return flags


def discover_targets(spark: SparkSession, spec: MaintenanceSpec) -> list[str]:
    """The tables (``namespace.table``) of the catalog whose newest apply commit is the pipeline's."""
    targets = []
    for (namespace,) in spark.sql(f"SHOW NAMESPACES IN {quote(spec.catalog)}").collect():
        for row in spark.sql(f"SHOW TABLES IN {quote(spec.catalog)}.{quote(namespace)}").collect():
            if row.isTemporary:
                continue
            target = _target_text(namespace, row.tableName)
            try:
                state = read_applied_state(spark, _full_name(spec.catalog, target))[1]
            except Exception:  # not an Iceberg table, or unreadable: not ours to maintain
                log.info("%s: skipped (its apply state cannot be read)", target, exc_info=True)
                continue
            if state is not None and state.pipeline == spec.pipeline:
                targets.append(target)
    return sorted(targets)


class TableMaintainer:
    """Runs the four procedures on one table through one SparkSession, filling its report."""

    def __init__(self, spark: SparkSession, spec: MaintenanceSpec, target: str) -> None:
        self.spark = spark
        self.spec = spec
        self.target = target
        self.full_name = _full_name(spec.catalog, target)
        self.report = TableMaintenance(target=self.full_name)

    def _files(self, kind: str) -> int:
        return _count(self.spark, f"SELECT count(*) FROM {self.full_name}.{kind}")

    def _snapshots(self) -> set[int]:
        return {int(row[0]) for row in self.spark.sql(f"SELECT snapshot_id FROM {self.full_name}.snapshots").collect()}

    def _call(self, step: str, statement: str) -> list[Any]:
        log.info("%s: %s", self.target, statement)
        try:
            return list(self.spark.sql(statement).collect())
        except Exception as exc:
            raise TableMaintenanceError(
                f"{self.full_name}: {step} failed ({java_error_summary(exc)}); the steps before it are committed, "
                "the table's rows are unchanged, and the next maintenance run does it again"
            ) from None

    def _state(self) -> AppliedState:
        state = read_applied_state(self.spark, self.full_name)[1]
        if state is None or state.pipeline != self.spec.pipeline:
            owner = "no pipeline" if state is None else f"pipeline {state.pipeline!r}"
            raise ForeignTableError(
                f"{self.full_name} holds no apply commit of pipeline {self.spec.pipeline!r} ({owner} applied to it); "
                "maintenance leaves it alone: name only the pipeline's tables"
            )
        return state

    def _rewrite_position_deletes(self) -> None:
        """Compact the delete files the data rewrite left, where Iceberg can."""
        if not self._files("delete_files"):
            return
        types = [f.dataType.simpleString() for f in self.spark.table(self.full_name).schema.fields]
        skipped = maintenance_sql.position_delete_rewrite_skipped(types)
        if skipped:
            self.report.notes.append(skipped)
            return
        deletes = self._call(
            "rewrite_position_delete_files",
            maintenance_sql.rewrite_position_delete_files(
                self.spec.catalog, self.target, self.spec.rewrite_delete_options
            ),
        )
        if deletes:
            self.report.delete_files_rewritten, self.report.delete_files_added = int(deletes[0][0]), int(deletes[0][1])
        self.spark.sql(f"REFRESH TABLE {self.full_name}")

    def maintain(self) -> TableMaintenance:
        started = time.monotonic()
        report, spec, catalog = self.report, self.spec, self.spec.catalog
        try:
            state = self._state()
            report.window_id, report.upper = state.window_id, state.upper
            report.data_files_before = self._files("data_files")
            report.delete_files_before = self._files("delete_files")
            report.snapshots_before = len(self._snapshots())
            rewritten = self._call(
                "rewrite_data_files",
                maintenance_sql.rewrite_data_files(catalog, self.target, spec.rewrite_data_options),
            )
            if rewritten:
                report.data_files_rewritten, report.data_files_added = int(rewritten[0][0]), int(rewritten[0][1])
            self.spark.sql(f"REFRESH TABLE {self.full_name}")
            self._rewrite_position_deletes()
            now = datetime.now(UTC).replace(tzinfo=None)
            report.snapshots_kept = maintenance_sql.snapshots_to_keep(
                apply_commit_flags(self.spark, self.full_name), spec.retain_last
            )
            snapshots_with_rewrites = self._snapshots()
            expired = self._call(
                "expire_snapshots",
                maintenance_sql.expire_snapshots(
                    catalog,
                    self.target,
                    now - timedelta(hours=spec.snapshot_retention_hours),
                    report.snapshots_kept,
                ),
            )
            report.expired_files_deleted = sum(int(value) for value in expired[0]) if expired else 0
            orphans = self._call(
                "remove_orphan_files",
                maintenance_sql.remove_orphan_files(
                    catalog, self.target, now - timedelta(hours=spec.orphan_file_age_hours)
                ),
            )
            report.orphan_files_removed = sorted(str(row[0]) for row in orphans)
            self.spark.sql(f"REFRESH TABLE {self.full_name}")
            snapshots_after = self._snapshots()
            report.snapshots_after = len(snapshots_after)
            report.snapshots_expired = len(snapshots_with_rewrites - snapshots_after)
            report.data_files_after = self._files("data_files")
            report.delete_files_after = self._files("delete_files")
        except MySqlCdcError as exc:
            report.status, report.error, report.error_class = "failed", str(exc), type(exc).__name__
        except Exception as exc:  # a Spark error outside the procedures (a metadata table read)
            report.status, report.error = "failed", f"{type(exc).__name__}: {java_error_summary(exc)}"
            report.error_class = TableMaintenanceError.__name__
        report.seconds = round(time.monotonic() - started, 3)
        return report


def run_maintenance(spark: SparkSession, spec: MaintenanceSpec) -> MaintenanceReport:
    """Maintain ``spec``'s tables; returns the report (also written to ``spec.report_uri`` when set)."""
    if spark.conf.get(f"spark.sql.catalog.{spec.catalog}", None) is None:
        raise ConfigurationError(
            f"Spark catalog {spec.catalog!r} is not configured: set spark.sql.catalog.{spec.catalog}="
            "org.apache.iceberg.spark.SparkCatalog and its type/warehouse (or uri) for the maintenance job"
        )
    require_reachable_catalog(spark, spec.catalog)
    tables: dict[str, TableMaintenance] = {}
    for target in spec.targets or discover_targets(spark, spec):
        table = tables[target] = TableMaintainer(spark, spec, target).maintain()
        log.info(
            "%s: %s files %d+%d -> %d+%d (data+delete), snapshots %d -> %d, orphans removed %d %s",
            target,
            table.status,
            table.data_files_before,
            table.delete_files_before,
            table.data_files_after,
            table.delete_files_after,
            table.snapshots_before,
            table.snapshots_after,
            len(table.orphan_files_removed),
            table.error,
        )
    report = MaintenanceReport(spec.pipeline, tables)
    if spec.report_uri:
        write_text_to_uri(spec.report_uri, report.to_json())
    return report


def _report_job_failure(spec: MaintenanceSpec, error: Exception) -> None:
    """Write the report of a job that stopped before maintaining any table (its error class decides retries)."""
    if not spec.report_uri:
        return
    message = str(error) if isinstance(error, MySqlCdcError) else f"{type(error).__name__}: {java_error_summary(error)}"
    report = MaintenanceReport(spec.pipeline, {}, error=message, error_class=type(error).__name__)
    try:
        write_text_to_uri(spec.report_uri, report.to_json())
    except Exception:  # the original error matters more
        log.warning("could not write the failure report to %s", spec.report_uri, exc_info=True)


def read_spec(spec_uri: str) -> MaintenanceSpec:
    """The :class:`MaintenanceSpec` at a pyarrow filesystem URI (the job's ``--spec``)."""
    text = read_text_from_uri(spec_uri)
    if text is None:
        raise ConfigurationError(f"there is no maintenance spec at {spec_uri}; give the job the URI the operator wrote")
    return MaintenanceSpec.from_json(text, spec_uri)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: 0 when every table is maintained, 1 when any failed, 2 on bad input."""
    from pyspark.sql import SparkSession

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="maintain_tables.py", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spec", required=True, help="URI of the MaintenanceSpec JSON (apply/contract.py)")
    try:
        spec = read_spec(str(parser.parse_args(sys.argv[1:] if argv is None else list(argv)).spec))
    except MySqlCdcError as exc:
        log.error("%s", exc)
        return 2
    spark = SparkSession.builder.appName(f"mysql-cdc-maintenance-{spec.pipeline}").getOrCreate()
    try:
        report = run_maintenance(spark, spec)
    except Exception as exc:
        _report_job_failure(spec, exc)
        if not isinstance(exc, MySqlCdcError):
            raise
        log.error("%s", exc)
        return 2
    finally:
        spark.stop()
    print(json.dumps({"maintenance": {"pipeline": report.pipeline, "failed": report.failed}}, sort_keys=True))
    for name, table in report.tables.items():
        before = table.data_files_before + table.delete_files_before
        after = table.data_files_after + table.delete_files_after
        print(
            f"maintenance table={name} status={table.status} files={before}->{after} "
            f"snapshots_expired={table.snapshots_expired} orphans_removed={len(table.orphan_files_removed)}"
        )
        if table.error:
            print(f"maintenance table={name} error={table.error}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
