"""Example pipeline ``mysql_cdc_example``: the DAG users copy.

At this stage of the project it checks the source (preflight) and records the binlog inventory the
capture tasks will start from. Connection ``mysql_cdc_default`` (``AIRFLOW_CONN_MYSQL_CDC_DEFAULT``
works). Override params with ``airflow dags test mysql_cdc_example <date> --conf '{"tables": [...]}'``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.operators.preflight import MySqlCdcPreflightOperator

with DAG(
    dag_id="mysql_cdc_example",
    description="Batch CDC from MySQL: preflight and binlog inventory (capture and apply follow)",
    schedule=timedelta(hours=1),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params={
        "pipeline": Param("demo", type="string", description="pipeline name"),
        "tables": Param(["demo.*"], type="array", description="'database.table' glob patterns to capture"),
        "mysql_cdc_conn_id": Param("mysql_cdc_default", type="string"),
    },
    tags=["mysql-cdc", "example"],
) as dag:
    preflight = MySqlCdcPreflightOperator(
        task_id="preflight",
        tables="{{ params.tables }}",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
    )

    @task
    def binlog_inventory(conn_id: str) -> dict[str, Any]:
        """Record where the binlog stands: GTID sets, current file, number and size of files."""
        inventory = MySqlCdcHook(mysql_cdc_conn_id=conn_id).binlog_inventory()
        return inventory.as_xcom()

    preflight >> binlog_inventory("{{ params.mysql_cdc_conn_id }}")
