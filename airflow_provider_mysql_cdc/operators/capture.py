"""``MySqlBinlogCaptureOperator``: capture one binlog window of a pipeline into Parquet staging."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.lineage import MySqlServer, TaskLineage, capture_lineage, staging_lineage
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection, WindowCaps
from airflow_provider_mysql_cdc.errors import WindowOrderError
from airflow_provider_mysql_cdc.hooks.metadata import metadata_store
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.hooks.object_store import object_store_settings
from airflow_provider_mysql_cdc.operators.lineage import OpenLineageFacets, staged_windows_uri
from airflow_provider_mysql_cdc.operators.run_order import (
    DEFAULT_PREVIOUS_RUN_WAIT,
    previous_run_note,
    previous_task_reader,
    wait_for_previous_run,
)
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task

#: Server id announced on the binlog stream when the connection has no ``server_id`` extra.
DEFAULT_REPLICA_SERVER_ID = 4_000_001


def run_cutoff_time(context: Context) -> datetime | None:
    """Where a ``data_interval`` window of this run ends: its ``data_interval_end``; for a manual run without
    a logical date (REST ``logical_date: null``, ``airflow dags trigger`` without ``-l``), which Airflow gives
    no data interval, the time it was triggered to run after (``run_after``), fixed for the run's lifetime."""
    end = context.get("data_interval_end")
    if end is not None:
        return end
    dag_run = context.get("dag_run")
    run_after = getattr(dag_run, "run_after", None)
    return run_after if isinstance(run_after, datetime) else None


class MySqlBinlogCaptureOperator(OpenLineageFacets, BaseOperator):
    """Capture the run's window of ``pipeline``: binlog from the window's lower GTID set to its cut-off.

    Returns (XCom) the window id, lower and upper GTID sets, manifest URI and row counts. Re-running
    (clearing) the task re-captures the same window; see docs/concepts.md "Windows and cut-off rules".

    OpenLineage (when enabled): inputs are the MySQL tables whose changes the window staged, the output
    is the pipeline's staged windows (see docs/operators.md "Lineage (OpenLineage)").

    :param pipeline: pipeline name (one frontier, one window sequence).
    :param staging_uri: pyarrow filesystem URI of the staging root (local path, ``s3://``, ...).
    :param object_store_conn_id: an Airflow ``aws`` connection for a ``staging_uri`` on S3 (login = access key
        id, password = secret access key, extra ``endpoint_url`` and ``region_name``); None: pyarrow's defaults.
    :param tables: ``database.table`` glob patterns to include.
    :param exclude_tables: patterns to exclude.
    :param cutoff: ``data_interval`` (default) or ``catch_up``.
    :param mysql_cdc_conn_id: the MySQL source connection.
    :param metadata_conn_id: connection of the metadata database; default: a SQLite file in AIRFLOW_HOME.
    :param initial_frontier: GTID set a brand-new pipeline starts after (default: ``@@gtid_executed``).
    :param max_rows: end the window early after this many rows (on a transaction boundary).
    :param max_bytes: same, for bytes of binlog row events of the selected tables.
    :param max_transactions: same, for transactions.
    :param previous_run_wait: how long to wait while the previous run's capture is unfinished (windows are
        captured in order; see :mod:`airflow_provider_mysql_cdc.operators.run_order`), then fail naming it.
    """

    template_fields: Sequence[str] = (
        "pipeline",
        "staging_uri",
        "object_store_conn_id",
        "tables",
        "exclude_tables",
        "cutoff",
        "mysql_cdc_conn_id",
        "metadata_conn_id",
        "initial_frontier",
    )
    ui_color = "#d9f0e3"

    def __init__(
        self,
        *,
        pipeline: str,
        staging_uri: str,
        tables: Sequence[str] | str = ("*.*",),
        exclude_tables: Sequence[str] | str = (),
        cutoff: str = CutoffRule.DATA_INTERVAL.value,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        metadata_conn_id: str | None = None,
        initial_frontier: str | None = None,
        max_rows: int | None = None,
        max_bytes: int | None = None,
        max_transactions: int | None = None,
        previous_run_wait: timedelta = DEFAULT_PREVIOUS_RUN_WAIT,
        object_store_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.object_store_conn_id = object_store_conn_id
        self.pipeline = pipeline
        self.staging_uri = staging_uri
        self.tables = tables
        self.exclude_tables = exclude_tables
        self.cutoff = cutoff
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.metadata_conn_id = metadata_conn_id
        self.initial_frontier = initial_frontier
        self.previous_run_wait = previous_run_wait
        self.caps = WindowCaps(max_rows=max_rows, max_bytes=max_bytes, max_transactions=max_transactions)

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:
        # The engine (PyMySQL, python-mysql-replication, pyarrow) is imported when the task runs,
        # not when a DAG file is parsed.
        from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window, covered_run

        source = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id).get_connection_config()
        request = CaptureRequest(
            pipeline=self.pipeline,
            run_id=str(context["run_id"]),
            staging_uri=self.staging_uri,
            cutoff=CutoffRule.parse(self.cutoff),
            data_interval_end=run_cutoff_time(context),
            tables=TableSelection.of(self.tables, self.exclude_tables),
            caps=self.caps,
            initial_frontier=GtidSet.parse(self.initial_frontier) if self.initial_frontier else None,
            replica_server_id=source.replica_server_id or DEFAULT_REPLICA_SERVER_ID,
            object_store=object_store_settings(self.object_store_conn_id),
        )
        task = f"pipeline {self.pipeline!r} {self.task_id}"
        previous = wait_for_previous_run(previous_task_reader(context), self.log, task, self.previous_run_wait)
        self._record_lineage(
            lambda: staging_lineage(staged_windows_uri(self.staging_uri, self.pipeline))
        )  # a failed run's FAIL event
        store = metadata_store(self.metadata_conn_id)
        covered = covered_run(request, store)
        if covered is not None:
            self.log.info("pipeline %s: no window for this run: %s", self.pipeline, covered["covered"])
            self._record_lineage(TaskLineage)  # nothing read, nothing written
            return covered
        try:
            result = capture_window(request, source, store)
        except WindowOrderError as error:
            if previous is None:
                raise
            raise WindowOrderError(f"{error}. {previous_run_note(self.dag_id, self.task_id, previous)}") from error
        self._record_lineage(
            lambda: capture_lineage(
                MySqlServer(source.host, source.port),
                result.table_counts,
                staged_windows_uri(self.staging_uri, self.pipeline),
            )
        )
        self.log.info(
            "pipeline %s window %s: %s transactions, rows by op %s, manifest %s",
            result.pipeline,
            result.window_id,
            result.transactions,
            result.op_counts,
            result.manifest_uri,
        )
        return result.as_xcom()
