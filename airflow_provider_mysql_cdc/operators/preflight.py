"""``MySqlCdcPreflightOperator``: fail early, with every fix listed, when a source cannot do CDC."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_provider_mysql_cdc.core.preflight import DEFAULT_MIN_BINLOG_RETENTION_SECONDS
from airflow_provider_mysql_cdc.core.windows import patterns
from airflow_provider_mysql_cdc.errors import PreflightFailedError
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task


class MySqlCdcPreflightOperator(BaseOperator):
    """Check server version, GTID/binlog settings and privileges on the selected tables.

    Fails with :class:`PreflightFailedError` listing every problem and the statement that fixes it.
    Returns (XCom) the server version, account, selected tables and warnings.

    :param tables: ``database.table`` glob patterns of the tables the pipeline captures.
    :param mysql_cdc_conn_id: connection of type ``mysql_cdc`` or ``mysql``.
    :param min_binlog_retention_seconds: warn when ``binlog_expire_logs_seconds`` is below this.
    :param fail_on_warnings: treat warnings as errors.
    """

    template_fields: Sequence[str] = ("tables", "mysql_cdc_conn_id")
    ui_color = "#e8f4fa"

    def __init__(
        self,
        *,
        tables: Sequence[str] = (),
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        min_binlog_retention_seconds: int = DEFAULT_MIN_BINLOG_RETENTION_SECONDS,
        fail_on_warnings: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tables = tables
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.min_binlog_retention_seconds = min_binlog_retention_seconds
        self.fail_on_warnings = fail_on_warnings

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:
        hook = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id)
        report = hook.preflight(patterns(self.tables), min_binlog_retention_seconds=self.min_binlog_retention_seconds)
        text = report.format()
        if not report.ok or (self.fail_on_warnings and report.warnings):
            raise PreflightFailedError(text)
        self.log.info("%s", text)
        return {
            "server": str(report.server),
            "account": report.account,
            "tables": [str(table) for table in report.selected_tables],
            "warnings": [finding.problem for finding in report.warnings],
        }
