"""Example pipeline ``mysql_cdc_example``: the DAG users copy.

preflight (server settings and privileges) -> purge_headroom (how long until the server purges binlog
the pipeline still needs; lag) -> snapshot_plan -> snapshot (one mapped task per chunk; skipped when
no table needs one) -> capture of the run's binlog window into Parquet staging -> apply (Spark MERGE
of that window, and of the snapshots it builds on, into Iceberg tables ``lake.<database>.<table>``;
each changed table gets an Asset event, see ``iceberg_table_asset``).

Hourly; each run captures the transactions committed in its data interval (``cutoff``
``data_interval``), so clears re-capture the same window and backfills capture each interval.
``airflow dags test mysql_cdc_example <date>`` makes a manual run whose interval ends at ``<date>``.

Connections: ``mysql_cdc_default`` (``AIRFLOW_CONN_MYSQL_CDC_DEFAULT`` works) and ``spark_default``
(e.g. ``AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'``). The Iceberg runtime
comes from Maven, or from the jar files listed (comma-separated) in ``MYSQL_CDC_ICEBERG_JARS`` on
machines without Maven access (plus Hadoop's S3A jars for S3). With ``MYSQL_CDC_OBJECT_STORE_CONN_ID``
naming an Airflow ``aws`` connection, ``staging_uri`` and ``warehouse`` may be ``s3://`` URIs. With
``MYSQL_CDC_WARM_SPARK_SECONDS`` the apply and the verify keep their Spark drivers warm between runs
that long (their sockets in ``MYSQL_CDC_WARM_SPARK_FOLDER``, default ``mysql-cdc-spark-<uid>`` in the
temporary directory). Override params per run with ``--conf '{"tables": [...], "cutoff":
"catch_up"}'``; snapshot a table again with ``--conf '{"resnapshot": ["demo.orders"]}'``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

#: Local paths of the embedded demo; production pipelines point these at s3://, gs://, hdfs://...
DEMO_ROOT = Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "mysql_cdc"

with DAG(
    dag_id="mysql_cdc_example",
    description="Batch CDC from MySQL: preflight, purge headroom, chunked snapshot, binlog window, Iceberg apply",
    schedule=timedelta(hours=1),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params=mysql_cdc_params(
        pipeline="demo",
        tables=["demo.*"],
        staging_uri=str(DEMO_ROOT / "staging"),
        warehouse=str(DEMO_ROOT / "warehouse"),
    ),
    tags=["mysql-cdc", "example"],
) as dag:
    # Staging and warehouse on S3 (``make demo STORAGE=s3``): an Airflow ``aws`` connection named here; the
    # sampled verify does not read S3 staging yet, so it is left out then.
    object_store_conn_id = os.environ.get("MYSQL_CDC_OBJECT_STORE_CONN_ID") or None
    # Keep the apply's and the verify's Spark drivers warm between runs for this many seconds (their
    # warm_spark_idle_timeout); unset or 0: one spark-submit and one verify process per run.
    # MYSQL_CDC_WARM_SPARK_FOLDER: their private folder (default: mysql-cdc-spark-<uid> in the temp dir).
    warm_spark_seconds = float(os.environ.get("MYSQL_CDC_WARM_SPARK_SECONDS") or 0)
    warm = (
        {
            "warm_spark_idle_timeout": timedelta(seconds=warm_spark_seconds),
            "warm_spark_folder": os.environ.get("MYSQL_CDC_WARM_SPARK_FOLDER") or None,
        }
        if warm_spark_seconds
        else None
    )
    mysql_cdc_pipeline(
        jars=os.environ.get("MYSQL_CDC_ICEBERG_JARS") or None,
        object_store_conn_id=object_store_conn_id,
        verify_sample_fraction=None if object_store_conn_id else 0.1,
        apply_kwargs=warm,
        verify_kwargs=warm,
    )
