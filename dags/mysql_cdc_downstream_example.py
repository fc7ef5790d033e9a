"""``mysql_cdc_orders_report``: a downstream DAG scheduled on an Iceberg table the example pipeline applies.

The apply task of ``mysql_cdc_example`` emits an Asset event for each target table a run changed; this
DAG runs after each change of ``lake.demo.orders`` and logs which windows brought it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_provider_mysql_cdc.operators.apply import iceberg_table_asset

ORDERS = iceberg_table_asset("lake.demo.orders")

with DAG(
    dag_id="mysql_cdc_orders_report",
    description="Runs when the CDC pipeline changed lake.demo.orders",
    schedule=[ORDERS],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["mysql-cdc", "example"],
) as dag:

    @task
    def report_new_orders(**context: Any) -> list[dict[str, Any]]:
        """Log the windows and row counts of the Asset events that triggered this run."""
        events = context["triggering_asset_events"].get(ORDERS, [])
        changes = [dict(event.extra) for event in events]
        for change in changes:
            print(f"lake.demo.orders changed: windows {change.get('windows')} rows {change.get('rows')}")
        return changes

    report_new_orders()
