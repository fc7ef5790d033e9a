"""Example pipeline ``mysql_cdc_maintained_example``: ``mysql_cdc_example`` plus daily Iceberg table maintenance.

The same tasks as ``mysql_cdc_example`` (preflight -> purge_headroom -> snapshot -> capture -> apply ->
verify), then ``maintenance`` (``IcebergMaintenanceOperator``): once a day, in the hourly run whose data
interval holds midnight UTC, it compacts the small files each window's MERGE wrote (applying their
position deletes), expires snapshots older than five days (always keeping every snapshot back to the
newest apply commit, which records the applied window and GTID set) and removes orphan files older than
three days. The other 23 runs skip it without starting Spark. It runs inside the pipeline's DAG
(``max_active_runs=1``) so it never competes with an apply committing to the same tables, and a clear of
that run maintains again (see docs/operators.md "Table maintenance").

Its own pipeline name, staging and warehouse, so it can run next to ``mysql_cdc_example``; connections
and ``MYSQL_CDC_ICEBERG_JARS`` as there.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

#: Local paths of the embedded demo; production pipelines point these at s3://, gs://, hdfs://...
DEMO_ROOT = Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "mysql_cdc_maintained"

with DAG(
    dag_id="mysql_cdc_maintained_example",
    description="Batch CDC from MySQL into Iceberg, with daily table maintenance after the apply",
    schedule=timedelta(hours=1),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params=mysql_cdc_params(
        pipeline="demo_maintained",
        tables=["demo.*"],
        staging_uri=str(DEMO_ROOT / "staging"),
        warehouse=str(DEMO_ROOT / "warehouse"),
    ),
    tags=["mysql-cdc", "example"],
) as dag:
    mysql_cdc_pipeline(jars=os.environ.get("MYSQL_CDC_ICEBERG_JARS") or None, maintenance=timedelta(days=1))
