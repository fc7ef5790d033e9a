"""``IcebergMaintenanceOperator``: spark-submit Iceberg's table maintenance for a pipeline's targets."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_mysql_cdc.apply.contract import (
    DEFAULT_REWRITE_DATA_OPTIONS,
    DEFAULT_REWRITE_DELETE_OPTIONS,
    MaintenanceReport,
    MaintenanceSpec,
)
from airflow_provider_mysql_cdc.errors import (
    MySqlCdcError,
    TerminalCdcError,
    TransientCdcError,
    error_class,
    error_named,
)
from airflow_provider_mysql_cdc.operators.apply import IcebergSparkJobOperator, apply_spark_conf
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task

if TYPE_CHECKING:  # pyarrow is imported when the task runs, not when a DAG is parsed
    from airflow_provider_mysql_cdc.staging import Staging

#: The spark-submit application (``spark_apps/maintain_tables.py`` runs the same ``main``).
MAINTENANCE_APPLICATION = str(Path(__file__).resolve().parents[1] / "apply" / "table_maintenance.py")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def maintenance_due(interval_start: datetime | None, interval_end: datetime | None, every: timedelta | None) -> bool:
    """Whether a run with this data interval maintains the tables: always without ``every``, and for runs
    without an interval (manual runs); otherwise when the interval ends on or crosses a multiple of
    ``every`` counted from 1970-01-01 UTC (``every=timedelta(days=1)``: the run whose interval holds
    midnight UTC, once a day whatever the DAG's schedule; a backfill or clear of that run does it again)."""
    if every is None or interval_start is None or interval_end is None or interval_start >= interval_end:
        return True
    if every <= timedelta(0):
        raise ValueError(f"maintenance interval must be positive, got {every}")
    return (interval_end - _EPOCH) // every > (interval_start - _EPOCH) // every


class IcebergMaintenanceOperator(IcebergSparkJobOperator):
    """Compact, rewrite position deletes, expire snapshots and remove orphan files of a pipeline's Iceberg
    targets, keeping every snapshot back to the newest apply commit (which records the applied window
    and GTID set, so the next apply still skips what the tables hold).

    Writes a :class:`~airflow_provider_mysql_cdc.apply.contract.MaintenanceSpec` to the pipeline's staging
    and submits ``airflow_provider_mysql_cdc/apply/table_maintenance.py --spec <URI>`` (the same
    spark-submit as :class:`~airflow_provider_mysql_cdc.operators.apply.SparkApplyOperator`: catalog
    properties as Spark ``conf``, the Iceberg runtime from ``jars`` or Maven, no Airflow secret in the
    job's environment). Its report (per table: files and snapshots before and after, orphans removed) is
    the XCom. A table a step failed on fails the task after the other tables were maintained (transient:
    retried); a table of another pipeline named in ``targets`` fails it at once.

    :param pipeline: pipeline name (only tables whose newest apply commit is this pipeline's are touched).
    :param staging_uri: the pipeline's staging root (the spec and report are written there).
    :param targets: tables inside the catalog (``namespace.table``, a part holding a dot in backquotes:
        ``shop.`t.x```); default: every table of the catalog whose newest apply commit is the pipeline's.
    :param every: maintain only in the run whose data interval ends on or crosses a multiple of this
        (e.g. ``timedelta(days=1)``: one hourly run a day); other runs are skipped without starting Spark.
        None: every run.
    :param snapshot_retention: snapshots older than this are expired (except the kept ones).
    :param retain_last: at least this many of the newest snapshots are kept.
    :param orphan_file_age: unreferenced files older than this are deleted (at least 24 hours, as
        Iceberg's procedure requires: a younger one may belong to a commit in progress).
    :param rewrite_data_options: options of ``rewrite_data_files`` (default
        :data:`~airflow_provider_mysql_cdc.apply.contract.DEFAULT_REWRITE_DATA_OPTIONS`).
    :param rewrite_delete_options: options of ``rewrite_position_delete_files``.
    :param catalog: Spark catalog name of the targets; ``warehouse``/``catalog_conf`` as for the apply.
    :param jars: Iceberg runtime jar(s) for ``--jars`` (offline); default: Maven ``packages``.
    :param local_python: for local masters, the Python of the Spark driver (default: this worker's).
    :param conn_id: the Spark connection (its host is the master).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "pipeline",
        "staging_uri",
        "warehouse",
        "catalog_conf",
        "targets",
    )
    ui_color = "#e3f1d4"

    def __init__(
        self,
        *,
        pipeline: str,
        staging_uri: str,
        targets: Sequence[str] | str = (),
        every: timedelta | None = None,
        snapshot_retention: timedelta = timedelta(hours=MaintenanceSpec.snapshot_retention_hours),
        retain_last: int = MaintenanceSpec.retain_last,
        orphan_file_age: timedelta = timedelta(hours=MaintenanceSpec.orphan_file_age_hours),
        rewrite_data_options: Mapping[str, str] = DEFAULT_REWRITE_DATA_OPTIONS,
        rewrite_delete_options: Mapping[str, str] = DEFAULT_REWRITE_DELETE_OPTIONS,
        catalog: str = MaintenanceSpec.catalog,
        warehouse: str | None = None,
        catalog_conf: Mapping[str, str] | None = None,
        local_python: str | None = None,
        conf: dict[str, Any] | None = None,
        jars: str | None = None,
        packages: str | None = None,
        application: str = MAINTENANCE_APPLICATION,
        name: str = "mysql-cdc-maintenance",
        conn_id: str = "spark_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            application=application, conf=conf, jars=jars, packages=packages, name=name, conn_id=conn_id, **kwargs
        )
        self.spark_conn_id = conn_id
        self.pipeline = pipeline
        self.staging_uri = staging_uri
        self.targets = targets
        self.every = every
        self.snapshot_retention = snapshot_retention
        self.retain_last = retain_last
        self.orphan_file_age = orphan_file_age
        self.rewrite_data_options = dict(rewrite_data_options)
        self.rewrite_delete_options = dict(rewrite_delete_options)
        self.catalog = catalog
        self.warehouse = warehouse
        self.catalog_conf = dict(catalog_conf or {})
        self.local_python = local_python or sys.executable

    def maintenance_spec(self, report_uri: str) -> MaintenanceSpec:
        """What the job is asked to do, from the (rendered) arguments; no credential is part of it."""
        targets = [self.targets] if isinstance(self.targets, str) and self.targets else self.targets or ()
        return MaintenanceSpec(
            self.pipeline,
            catalog=self.catalog,
            targets=tuple(targets),
            rewrite_data_options=self.rewrite_data_options,
            rewrite_delete_options=self.rewrite_delete_options,
            snapshot_retention_hours=self.snapshot_retention / timedelta(hours=1),
            retain_last=int(self.retain_last),
            orphan_file_age_hours=self.orphan_file_age / timedelta(hours=1),
            report_uri=report_uri,
        )

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]  # returns the XCom
        if not maintenance_due(context.get("data_interval_start"), context.get("data_interval_end"), self.every):
            raise AirflowSkipException(
                f"pipeline {self.pipeline!r}: table maintenance runs once every {self.every}; not in this run"
            )
        spec_probe = self.maintenance_spec("")  # a bad setting fails before anything is written
        self.conf = {**apply_spark_conf(self.catalog, self.warehouse, self.catalog_conf), **(self.conf or {})}
        run_id = str(context["run_id"])
        try_number = int(getattr(context.get("ti"), "try_number", 1) or 1)
        from airflow_provider_mysql_cdc.staging import Staging

        staging = Staging(self.staging_uri, self.pipeline)
        report_path = staging.maintenance_report_path(run_id, try_number)
        spec = dataclasses.replace(spec_probe, report_uri=staging.uri_of(report_path))
        spec_uri = staging.write_text(staging.maintenance_spec_path(run_id, try_number), spec.to_json())
        try:
            self.submit_job(context, spec_uri)
        except Exception as exc:
            report = self._read_report(staging, report_path)
            if report is None:
                raise
            self._log_report(report)
            raise self._failure(report) from exc
        report = self._read_report(staging, report_path)
        if report is None:
            raise TerminalCdcError(f"the maintenance job succeeded but wrote no report at {spec.report_uri}")
        self._log_report(report)
        if report.failed or report.error:
            raise self._failure(report)
        return self._xcom(report)

    @staticmethod
    def _read_report(staging: Staging, report_path: str) -> MaintenanceReport | None:
        found = staging.read_text(report_path)
        return None if found is None else MaintenanceReport.from_json(*found)

    def _log_report(self, report: MaintenanceReport) -> None:
        for name, table in report.tables.items():
            self.log.info(
                "%s: %s files %d -> %d, snapshots %d -> %d (kept back to the apply commit of window %d), "
                "orphan files removed %d%s",
                name,
                table.status,
                table.data_files_before + table.delete_files_before,
                table.data_files_after + table.delete_files_after,
                table.snapshots_before,
                table.snapshots_after,
                table.window_id,
                len(table.orphan_files_removed),
                "".join(f"; {note}" for note in table.notes),
            )

    def _failure(self, report: MaintenanceReport) -> MySqlCdcError:
        """The job's own error when it stopped before the tables; otherwise every failed table's, terminal
        only when each of them is (a retry maintains the tables again; what is done stays done)."""
        where = f"pipeline {self.pipeline!r} table maintenance"
        if report.error:
            return error_named(report.error_class, f"{where}: {report.error}", TransientCdcError)
        errors = "; ".join(
            f"{name}: {report.tables[name].error_class or 'error'}: {report.tables[name].error}"
            for name in report.failed
        )
        text = f"{where} failed on {len(report.failed)} table(s), the others were maintained: {errors}"
        terminal = all(
            issubclass(error_class(report.tables[name].error_class) or MySqlCdcError, TerminalCdcError)
            for name in report.failed
        )
        return TerminalCdcError(text) if terminal else TransientCdcError(f"{text}; the retry runs them again")

    @staticmethod
    def _xcom(report: MaintenanceReport) -> dict[str, Any]:
        return {
            "pipeline": report.pipeline,
            "tables": {
                name: {
                    "target": table.target,
                    "status": table.status,
                    "window_id": table.window_id,
                    "files_before": table.data_files_before + table.delete_files_before,
                    "files_after": table.data_files_after + table.delete_files_after,
                    "snapshots_expired": table.snapshots_expired,
                    "orphan_files_removed": len(table.orphan_files_removed),
                }
                for name, table in report.tables.items()
            },
        }
