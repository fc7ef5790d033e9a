"""``MySqlCdcVerifyOperator``: compare a pipeline's Iceberg targets with MySQL as of one GTID set."""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_provider_mysql_cdc.core.lineage import MySqlServer, verify_lineage
from airflow_provider_mysql_cdc.errors import TargetDiffersError, TargetNotVerifiableError
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.operators.apply import ICEBERG_PACKAGE, apply_spark_conf, warm_spark_setting
from airflow_provider_mysql_cdc.operators.lineage import OpenLineageFacets
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task
from airflow_provider_mysql_cdc.verify import DEFAULT_VERIFY_SERVER_ID


class MySqlCdcVerifyOperator(OpenLineageFacets, BaseOperator):
    """Verify that Iceberg targets equal their MySQL tables as of one GTID set, while MySQL is written to.

    Reads each table in a consistent snapshot (GTID set ``S``), brings the target to ``S`` in memory
    (the changes between the target's applied frontier and ``S`` are captured and applied in Spark;
    the target is never written), then compares hash ranges of the key by checksum and the ranges that
    differ row by row. Returns the report (XCom: tables, ``S``, ranges checked, differing keys and
    columns, rows missing/extra/changed). See docs/operators.md "Verify: the lake against MySQL as of one GTID set".

    OpenLineage (when enabled): inputs are each verified MySQL table and its Iceberg target; no output.

    The verification runs in a child process of the task (its Spark driver too: ``spark_master``
    ``local[*]`` by default, or a cluster URL); the connection's password reaches it on stdin only.
    With ``warm_spark_idle_timeout`` that child stays up between runs as a warm verify service (its JVM
    and Spark session started once, like the apply's warm service), reached over a private Unix socket
    that the password then travels on.

    :param pipeline: pipeline name (the targets' apply commits name it).
    :param tables: MySQL ``db.table`` names or glob patterns (``shop.*``) to verify.
    :param staging_uri: the pipeline's staging; lets a target that holds only its (one-chunk) snapshot be
        verified from that snapshot's GTID set.
    :param sample_fraction: fraction of each table's key ranges to check (1.0: all, a full verify).
    :param seed: seed of the sample; default: derived from the run id (a re-run checks the same ranges).
    :param row_budget: most rows per table compared row by row (ranges beyond it are reported, not compared).
    :param rows_per_range: rows per key range (the checksum granularity).
    :param max_keys: differing keys listed per table.
    :param fail_on_difference: fail the task with ``TargetDiffersError`` when a table differs.
    :param fail_on_unverified: fail the task with ``TargetNotVerifiableError`` when a table could not be
        verified (no apply yet, a snapshot being loaded, a schema change pending); else it is logged and
        reported in the XCom.
    :param catalog, warehouse, catalog_conf, target_template: the targets, as for ``SparkApplyOperator``.
    :param scratch_uri: staging URI for the throwaway snapshot and window (default: a local temp dir).
    :param key_columns: columns that cut tables without a key into snapshot chunks, as for the snapshot
        (such a table is compared as a multiset: distinct rows and their copy counts).
    :param replica_server_id: server id of the verification's binlog reader (not the capture's).
    :param spark_master, jars, packages, spark_conf: the Spark session (Iceberg runtime: ``jars`` paths
        or ``packages`` Maven coordinates, default the Iceberg runtime package; ``jars`` may be one
        comma-separated string, as for ``SparkApplyOperator``).
    :param warm_spark_idle_timeout: keep the verification's process (its JVM and Spark session) running
        between runs, stopping after this long without a verification; None (the default): a new process
        per run. One service per set of Spark settings; stop them with ``python -m
        airflow_provider_mysql_cdc.apply.warm_service stop <folder>``.
    :param warm_spark_folder: the private (``0700``) folder of the warm services' sockets, pid files and
        logs (default: ``mysql-cdc-spark-<uid>`` in the temporary directory, shared with the apply's).
    """

    template_fields: Sequence[str] = (
        "pipeline",
        "tables",
        "mysql_cdc_conn_id",
        "staging_uri",
        "scratch_uri",
        "warehouse",
        "catalog_conf",
        "sample_fraction",
    )
    ui_color = "#f0e3d9"

    def __init__(
        self,
        *,
        pipeline: str,
        tables: Sequence[str] | str,
        staging_uri: str | None = None,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        sample_fraction: float = 1.0,
        seed: int | None = None,
        row_budget: int = 1_000_000,
        rows_per_range: int = 10_000,
        max_keys: int = 20,
        fail_on_difference: bool = True,
        fail_on_unverified: bool = True,
        catalog: str = "lake",
        warehouse: str | None = None,
        catalog_conf: Mapping[str, str] | None = None,
        target_template: str = "{database}.{table}",
        scratch_uri: str | None = None,
        key_columns: Mapping[str, Sequence[str]] | None = None,
        spark_master: str = "local[*]",
        jars: Sequence[str] | str | None = None,
        packages: Sequence[str] | None = None,
        spark_conf: Mapping[str, str] | None = None,
        replica_server_id: int = DEFAULT_VERIFY_SERVER_ID,
        warm_spark_idle_timeout: timedelta | None = None,
        warm_spark_folder: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.tables = tables
        self.staging_uri = staging_uri
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.sample_fraction = sample_fraction
        self.seed = seed
        self.row_budget = row_budget
        self.rows_per_range = rows_per_range
        self.max_keys = max_keys
        self.fail_on_difference = fail_on_difference
        self.fail_on_unverified = fail_on_unverified
        self.catalog = catalog
        self.warehouse = warehouse
        self.catalog_conf = dict(catalog_conf or {})
        self.target_template = target_template
        self.scratch_uri = scratch_uri
        self.key_columns = {name: list(columns) for name, columns in (key_columns or {}).items()}
        self.spark_master = spark_master
        self.jars = [jar for jar in jars.split(",") if jar] if isinstance(jars, str) else list(jars or ())
        self.packages = list(packages) if packages is not None else ([] if self.jars else [ICEBERG_PACKAGE])
        self.spark_conf = dict(spark_conf or {})
        self.replica_server_id = replica_server_id
        self.warm_spark = warm_spark_setting(warm_spark_idle_timeout, warm_spark_folder)

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:
        # The engine runs in a child process (its Spark driver never lives in the worker's process).
        from airflow_provider_mysql_cdc.verify.child import SparkSettings, WarmVerifyClient, run_verify_child

        source = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id).get_connection_config()
        tables = [self.tables] if isinstance(self.tables, str) else list(self.tables)
        seed = self.seed if self.seed is not None else zlib.crc32(str(context["run_id"]).encode())
        request = {
            "pipeline": self.pipeline,
            "tables": tables,
            "staging_uri": self.staging_uri,
            "catalog": self.catalog,
            "target_template": self.target_template,
            "scratch_uri": self.scratch_uri,
            "key_columns": self.key_columns,
            "sample_fraction": float(self.sample_fraction),
            "seed": seed,
            "rows_per_range": self.rows_per_range,
            "row_budget": self.row_budget,
            "max_keys": self.max_keys,
            "replica_server_id": self.replica_server_id,
        }
        conf = {**apply_spark_conf(self.catalog, self.warehouse, self.catalog_conf), **self.spark_conf}
        settings = SparkSettings(self.spark_master, conf, self.jars, self.packages)
        if self.warm_spark is None:
            report = run_verify_child(source, request, settings)
        else:
            client = WarmVerifyClient(
                Path(self.warm_spark.folder), settings, self.warm_spark.idle_timeout.total_seconds()
            )
            report = client.verify(source, request, self.log.info)
        self._record_lineage(
            lambda: verify_lineage(
                MySqlServer(source.host, source.port),
                {table.table: table.target for table in report.tables},
                self.warehouse,
                self.catalog_conf,
            )
        )
        for line in report.describe().splitlines():
            self.log.info("%s", line)
        return check_report(
            report.as_xcom(), fail_on_difference=self.fail_on_difference, fail_on_unverified=self.fail_on_unverified
        )


def check_report(xcom: dict[str, Any], *, fail_on_difference: bool, fail_on_unverified: bool = True) -> dict[str, Any]:
    """Return the report's XCom, or raise: :class:`TargetDiffersError` when a table differs (and
    ``fail_on_difference``), :class:`TargetNotVerifiableError` when a table could not be verified (and
    ``fail_on_unverified``)."""
    from airflow_provider_mysql_cdc.verify.report import VerifyReport

    report = VerifyReport.from_xcom(xcom)
    if report.differing and fail_on_difference:
        raise TargetDiffersError(report.difference_message())
    if report.unverified and fail_on_unverified:
        problems = "; ".join(f"{t.table}: {t.problem}" for t in report.unverified)
        raise TargetNotVerifiableError(f"pipeline {report.pipeline!r}: not verified: {problems}")
    return xcom
