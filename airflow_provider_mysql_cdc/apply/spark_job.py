"""The Spark side of apply: MERGE staged snapshots and windows into Iceberg tables, exactly once.

The spark-submit application (``spark_apps/apply_changes.py`` runs the same :func:`main`): it reads
its :class:`~airflow_provider_mysql_cdc.apply.contract.ApplySpec`, applies every table of the windows
(:class:`~airflow_provider_mysql_cdc.apply.table_applier.TableApplier`, with the session checks of
:mod:`.iceberg_session` and the statements of :mod:`.merge_sql`) and writes the
:class:`~airflow_provider_mysql_cdc.apply.contract.ApplyReport`. No Airflow import. For each table of the
requested windows: read its applied state from the Iceberg table (:mod:`.plan`), evolve the schema,
then one ``MERGE INTO`` per step (snapshot chunk batch or window) whose commit carries the new state
as snapshot summary properties. Every target is created merge-on-read, so a MERGE writes position
deletes and new rows for the changed keys and leaves the table's other data files alone. It still
scans the target's key column to find the matches, but shuffles only the rows that pass a
:class:`~airflow_provider_mysql_cdc.apply.plan.KeyFilter` of the change set's keys (a Bloom filter
in the ON clause, built by a small Spark job over the staged keys before the MERGE).

Exactly once without a lock: the Iceberg table object is pinned when the state is read (the catalog's
table cache is refreshed first and does not expire during the job), the MERGE scans that same table
snapshot, and Iceberg's serializable validation refuses the commit if anything was committed to the
table since. A refused commit re-reads the state and re-plans, which then skips what the winner
applied. A table that fails (a schema change the target cannot follow, a gap) is reported and the
other tables go on; the job exits non-zero when any table failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec, TableReport
from airflow_provider_mysql_cdc.apply.iceberg_session import (
    configure_catalog_cache,
    configure_shuffle_partitions,
    java_error_summary,
    require_reachable_catalog,
)
from airflow_provider_mysql_cdc.apply.plan import tables_in_windows
from airflow_provider_mysql_cdc.apply.table_applier import TableApplier
from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings, is_s3_uri
from airflow_provider_mysql_cdc.errors import ConfigurationError, MySqlCdcError, TerminalCdcError
from airflow_provider_mysql_cdc.staging import Staging, read_text_from_uri, write_text_to_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("airflow_provider_mysql_cdc.apply")


def spark_object_store(spark: SparkSession) -> ObjectStoreSettings | None:
    """The object store settings the job was given as S3A Spark properties (by ``SparkApplyOperator``'s
    properties file), for its own pyarrow reads and writes of staging; None without any."""
    return ObjectStoreSettings.from_spark_properties(lambda key: spark.conf.get(key, None))


def submitted_object_store() -> ObjectStoreSettings | None:
    """The S3A settings spark-submit gave this driver (its properties file), read before any session
    exists (the driver's JVM already runs: no Spark context is started)."""
    from pyspark import SparkConf, SparkContext

    # Connects to spark-submit's JVM (SparkConf alone reads nothing before a context exists).
    SparkContext._ensure_initialized()
    conf = SparkConf()
    return ObjectStoreSettings.from_spark_properties(conf.get)


def run_apply(spark: SparkSession, config: ApplySpec) -> ApplyReport:
    """Apply ``config``'s windows to every table they hold; returns the report (also written to
    ``config.report_uri`` when set). Staging on S3 is read with the job's S3A settings
    (:func:`spark_object_store`)."""
    if spark.conf.get(f"spark.sql.catalog.{config.catalog}", None) is None:
        raise ConfigurationError(
            f"Spark catalog {config.catalog!r} is not configured: set spark.sql.catalog.{config.catalog}="
            "org.apache.iceberg.spark.SparkCatalog and its type/warehouse (or uri) for the apply job"
        )
    configure_catalog_cache(spark, config.catalog)
    configure_shuffle_partitions(spark)
    require_reachable_catalog(spark, config.catalog)
    object_store = spark_object_store(spark)
    staging = Staging(config.staging_uri, config.pipeline, object_store)
    manifests = []
    for window_id in config.window_ids:
        manifest = staging.read_window_manifest(window_id)
        if manifest is None:
            raise TerminalCdcError(
                f"window {window_id} of pipeline {config.pipeline!r} has no manifest under {config.staging_uri}; "
                "run its capture first (a window exists only once its manifest is published)"
            )
        manifests.append(manifest)
    tables = _apply_tables(spark, config, staging, tables_in_windows(manifests))
    report = ApplyReport(config.pipeline, config.first_window, config.last_window, manifests[-1].upper, tables)
    if config.report_uri:
        write_text_to_uri(config.report_uri, report.to_json(), object_store)
    return report


def _apply_tables(
    spark: SparkSession, config: ApplySpec, staging: Staging, table_names: Sequence[str]
) -> dict[str, TableReport]:
    """Each table's report, in ``table_names``' order. Up to ``config.parallel_tables`` tables are applied
    at the same time, each in a thread of its own. The thread starts from its own copy of the caller's Spark
    local properties (:func:`with_callers_local_properties`) and has its own JVM thread (pinned-thread mode), where
    Iceberg keeps the commit properties of that table's MERGE. Every table has its own target and its
    own state: no two threads commit to the same table."""

    def apply_table(table_name: str) -> TableReport:
        table = TableApplier(spark, config, table_name, staging).apply()
        log.info("%s: %s %s", table_name, table.status, table.error or table.windows_applied)
        return table

    threads = min(config.parallel_tables, len(table_names))
    if threads <= 1:
        return {table_name: apply_table(table_name) for table_name in table_names}
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mysql-cdc-apply") as pool:
        reports = list(pool.map(with_callers_local_properties(spark, apply_table), table_names))
    return dict(zip(table_names, reports, strict=True))


def with_callers_local_properties(
    spark: SparkSession, action: Callable[[str], TableReport]
) -> Callable[[str], TableReport]:
    """``action`` for a pool thread: each call starts from its own copy of the caller's Spark local
    properties (the job group a warm service names its runs by).

    PySpark's ``inheritable_thread_target`` hands every call one shared copy. Spark keeps the running
    statement's ``spark.sql.execution.root.id`` there, so threads sharing it clear each other's: a
    statement that read it just after another thread's statement ended failed with
    ``NumberFormatException: Cannot parse null string`` (``SQLExecution.withNewExecutionId``)."""
    context = spark.sparkContext._jsc.sc()
    callers = context.getLocalProperties().clone()

    def in_thread(table_name: str) -> TableReport:
        context.setLocalProperties(callers.clone())
        return action(table_name)

    return in_thread


def _report_job_failure(config: ApplySpec, error: Exception, object_store: ObjectStoreSettings | None) -> None:
    """Write the report of a job that stopped before applying any table, so the operator can name the
    error and decide on retries by its class (``error_class``)."""
    if not config.report_uri:
        return
    message = str(error) if isinstance(error, MySqlCdcError) else f"{type(error).__name__}: {java_error_summary(error)}"
    report = ApplyReport(
        config.pipeline,
        config.first_window,
        config.last_window,
        "",
        {},
        error=message,
        error_class=type(error).__name__,
    )
    try:
        write_text_to_uri(config.report_uri, report.to_json(), object_store)
    except Exception:  # the original error matters more; the operator then reports the job's exit
        log.warning("could not write the failure report to %s", config.report_uri, exc_info=True)


def read_spec(spec_uri: str, object_store: ObjectStoreSettings | None = None) -> ApplySpec:
    """The :class:`ApplySpec` at a pyarrow filesystem URI (the job's ``--spec``)."""
    text = read_text_from_uri(spec_uri, object_store)
    if text is None:
        raise ConfigurationError(f"there is no apply spec at {spec_uri}; give the job the URI the operator wrote")
    return ApplySpec.from_json(text, spec_uri)


def parse_args(argv: Sequence[str]) -> str:
    """The job's command line: ``--spec URI``; returns the URI."""
    parser = argparse.ArgumentParser(prog="apply_changes.py", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spec", required=True, help="URI of the ApplySpec JSON (apply/contract.py)")
    return str(parser.parse_args(list(argv)).spec)


def apply_in_session(spark: SparkSession, config: ApplySpec, say: Callable[[str], None] = print) -> int:
    """Apply ``config`` in ``spark`` (not stopped), write its report and ``say`` what each table got:
    0 when every table is applied, 1 when any failed, 2 when the job stopped before the tables with a
    named error. Any other exception is raised, after the failure report is written."""
    object_store = spark_object_store(spark)
    try:
        report = run_apply(spark, config)
    except Exception as exc:
        _report_job_failure(config, exc, object_store)
        if not isinstance(exc, MySqlCdcError):
            raise
        log.error("%s", exc)
        return 2
    summary = {"pipeline": report.pipeline, "first_window": report.first_window, "last_window": report.last_window}
    say(json.dumps({"apply": {**summary, "upper": report.upper, "failed": report.failed}}, sort_keys=True))
    for name, table in report.tables.items():
        say(f"apply table={name} status={table.status} windows={table.windows_applied} rows={table.rows}")
        if table.error:
            say(f"apply table={name} error={table.error}")
    return 1 if report.failed else 0


def read_submitted_spec(spec_uri: str) -> ApplySpec:
    """The spec at ``spec_uri``, read with the S3A settings spark-submit was given when it is on S3."""
    return read_spec(spec_uri, submitted_object_store() if is_s3_uri(spec_uri) else None)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: 0 when every table is applied, 1 when any failed, 2 on bad input."""
    from pyspark.sql import SparkSession

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = read_submitted_spec(parse_args(sys.argv[1:] if argv is None else argv))
    except MySqlCdcError as exc:
        log.error("%s", exc)
        return 2
    spark = SparkSession.builder.appName(f"mysql-cdc-apply-{config.pipeline}").getOrCreate()
    try:
        return apply_in_session(spark, config)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
