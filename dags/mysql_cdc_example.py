"""Example pipeline ``mysql_cdc_example``: the DAG users copy.

preflight (server settings and privileges) -> binlog inventory -> snapshot plan -> snapshot (one
mapped task per chunk) -> capture of the run's binlog window into Parquet staging -> Spark apply of
that window (and of the snapshots it builds on) into Iceberg tables. The plan picks the selected
tables the pipeline has never snapshotted (all of them on its first run) plus those named in
``resnapshot``; when there are none the mapped snapshot task is skipped and capture runs anyway
(``trigger_rule="none_failed"``). Connections ``mysql_cdc_default`` (``AIRFLOW_CONN_MYSQL_CDC_DEFAULT``
works) and ``spark_default`` (e.g. ``AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host":
"local[*]"}'``). The Iceberg runtime comes from Maven, or from the jar files listed (comma-separated)
in ``MYSQL_CDC_ICEBERG_JARS`` on machines without Maven access. Override params with
``airflow dags test mysql_cdc_example <date> --conf '{"tables": [...], "cutoff": "catch_up"}'``;
snapshot a table again with ``--conf '{"resnapshot": ["demo.orders"]}'``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.operators.apply import SparkApplyOperator
from airflow_provider_mysql_cdc.operators.capture import MySqlBinlogCaptureOperator
from airflow_provider_mysql_cdc.operators.preflight import MySqlCdcPreflightOperator
from airflow_provider_mysql_cdc.operators.snapshot import MySqlSnapshotOperator, MySqlSnapshotPlanOperator

#: Local staging for the embedded demo; production pipelines point this at s3://, gs://, hdfs://...
DEFAULT_STAGING_URI = str(Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "mysql_cdc" / "staging")
#: Local Iceberg warehouse (Hadoop catalog ``lake``) for the embedded demo.
DEFAULT_WAREHOUSE = str(Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "mysql_cdc" / "warehouse")

with DAG(
    dag_id="mysql_cdc_example",
    description="Batch CDC from MySQL: preflight, inventory, chunked snapshot, binlog-window capture, Iceberg apply",
    schedule=timedelta(hours=1),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params={
        "pipeline": Param("demo", type="string", description="pipeline name (one frontier, one window sequence)"),
        "tables": Param(["demo.*"], type="array", description="'database.table' glob patterns to capture"),
        "staging_uri": Param(DEFAULT_STAGING_URI, type="string", description="Parquet staging root (any pyarrow URI)"),
        "cutoff": Param(
            "data_interval",
            enum=["data_interval", "catch_up"],
            description="window end: transactions committed before the run's data_interval_end, or everything now",
        ),
        "resnapshot": Param(
            [],
            type="array",
            description="'database.table' names or patterns of selected tables to snapshot again in this run",
        ),
        "warehouse": Param(DEFAULT_WAREHOUSE, type="string", description="Iceberg warehouse of the Hadoop catalog"),
        "chunk_rows": Param(250_000, type="integer", minimum=1, description="about this many rows per snapshot chunk"),
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

    snapshot_plan = MySqlSnapshotPlanOperator(
        task_id="snapshot_plan",
        pipeline="{{ params.pipeline }}",
        staging_uri="{{ params.staging_uri }}",
        tables="{{ params.tables }}",
        resnapshot="{{ params.resnapshot }}",
        chunk_rows="{{ params.chunk_rows }}",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
    )

    # One task per chunk; an empty plan marks the mapped task skipped. At most 4 chunks read the
    # source at once per run.
    snapshot = MySqlSnapshotOperator.partial(
        task_id="snapshot",
        pipeline="{{ params.pipeline }}",
        staging_uri="{{ params.staging_uri }}",
        tables="{{ params.tables }}",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        max_active_tis_per_dagrun=4,
        map_index_template="{{ task.snapshot_chunk.chunk.database }}.{{ task.snapshot_chunk.chunk.table }}"
        " chunk {{ task.snapshot_chunk.chunk.chunk_no }}",
    ).expand(snapshot_chunk=snapshot_plan.output)

    capture = MySqlBinlogCaptureOperator(
        task_id="capture",
        pipeline="{{ params.pipeline }}",
        staging_uri="{{ params.staging_uri }}",
        tables="{{ params.tables }}",
        cutoff="{{ params.cutoff }}",
        mysql_cdc_conn_id="{{ params.mysql_cdc_conn_id }}",
        depends_on_past=True,
        # Runs after a skipped (empty) snapshot too; a failed chunk still stops it (upstream_failed).
        trigger_rule="none_failed",
    )

    # MERGE the run's window into the Iceberg tables lake.<database>.<table>; a re-run is a no-op.
    apply = SparkApplyOperator(
        task_id="apply",
        pipeline="{{ params.pipeline }}",
        staging_uri="{{ params.staging_uri }}",
        windows="{{ ti.xcom_pull(task_ids='capture')['window_id'] }}",
        catalog="lake",
        warehouse="{{ params.warehouse }}",
        jars=os.environ.get("MYSQL_CDC_ICEBERG_JARS") or None,
        conn_id="spark_default",
    )

    preflight >> binlog_inventory("{{ params.mysql_cdc_conn_id }}") >> snapshot_plan >> snapshot >> capture >> apply
