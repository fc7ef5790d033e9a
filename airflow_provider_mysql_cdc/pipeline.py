"""``mysql_cdc_pipeline``: the example DAG's tasks for any pipeline, and ``mysql_cdc_params``, the params
they read.

A DAG of your own::

    with DAG("orders_cdc", schedule=timedelta(hours=1), start_date=..., catchup=False, max_active_runs=1,
             render_template_as_native_obj=True,
             params=mysql_cdc_params(pipeline="orders", tables=["shop.*"], staging_uri="s3://bucket/cdc",
                                     warehouse="s3://bucket/warehouse")):
        mysql_cdc_pipeline(mysql_cdc_conn_id="shop_mysql")

builds preflight -> purge_headroom -> snapshot_plan -> snapshot (mapped) -> capture -> apply. Every
argument left at its default reads the run's params, so ``--conf`` overrides them per run; pass plain
values instead to fix them (and ``group_id`` to put several pipelines in one DAG).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator, Param, TaskGroup

from airflow_provider_mysql_cdc.core.windows import CutoffRule
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.operators.apply import DEFAULT_ASSET_ALIAS, SparkApplyOperator
from airflow_provider_mysql_cdc.operators.capture import MySqlBinlogCaptureOperator
from airflow_provider_mysql_cdc.operators.maintenance import IcebergMaintenanceOperator
from airflow_provider_mysql_cdc.operators.preflight import MySqlCdcPreflightOperator
from airflow_provider_mysql_cdc.operators.snapshot import MySqlSnapshotOperator, MySqlSnapshotPlanOperator
from airflow_provider_mysql_cdc.operators.verify import MySqlCdcVerifyOperator
from airflow_provider_mysql_cdc.sensors.purge_headroom import MySqlBinlogPurgeHeadroomSensor

#: Default minimum purge headroom: the sensor warns when the binlog the pipeline needs is purged sooner.
DEFAULT_MIN_HEADROOM_SECONDS = 6 * 3600

#: Retries of every task the factory creates. Terminal errors fail a task at once whatever these say
#: (see :mod:`airflow_provider_mysql_cdc.task_failure`); transient ones (server unreachable,
#: connection lost, window not closed yet) are retried after 30 s, 60 s, 120 s, 240 s.
DEFAULT_RETRY_ARGS: Mapping[str, Any] = {
    "retries": 4,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": 2.0,  # the multiplier (Airflow 3.2+; True would mean 1: no backoff)
    "max_retry_delay": timedelta(minutes=10),
}


def mysql_cdc_params(
    *,
    pipeline: str,
    staging_uri: str,
    warehouse: str,
    tables: Sequence[str] = ("*.*",),
    cutoff: str = CutoffRule.DATA_INTERVAL.value,
    chunk_rows: int = 250_000,
    mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
    min_headroom_seconds: int = DEFAULT_MIN_HEADROOM_SECONDS,
    schema_change_policy: str = "rebuild",
) -> dict[str, Param]:
    """The params :func:`mysql_cdc_pipeline` reads, with these defaults (each overridable per run)."""
    return {
        "pipeline": Param(pipeline, type="string", description="pipeline name (one frontier, one window sequence)"),
        "tables": Param(list(tables), type="array", description="'database.table' glob patterns to capture"),
        "staging_uri": Param(staging_uri, type="string", description="Parquet staging root (any pyarrow URI)"),
        "warehouse": Param(warehouse, type="string", description="Iceberg warehouse of the Hadoop catalog"),
        "cutoff": Param(
            cutoff,
            enum=[rule.value for rule in CutoffRule],
            description="window end: transactions committed before the run's data_interval_end, or everything now",
        ),
        "resnapshot": Param(
            [], type="array", description="'database.table' names or patterns to snapshot again in this run"
        ),
        "chunk_rows": Param(chunk_rows, type="integer", minimum=1, description="about this many rows per chunk"),
        "mysql_cdc_conn_id": Param(mysql_cdc_conn_id, type="string", description="the MySQL source connection"),
        "min_headroom_seconds": Param(
            min_headroom_seconds, type="integer", minimum=0, description="warn below this much purge headroom"
        ),
        "schema_change_policy": Param(
            schema_change_policy,
            enum=["rebuild", "stop"],
            description="a change a target cannot follow exactly: re-snapshot that table in the next run "
            "(rebuild), or stop it until re-snapshotted (stop); the other tables go on",
        ),
    }


@dataclass(frozen=True)
class MySqlCdcPipelineTasks:
    """The tasks :func:`mysql_cdc_pipeline` created, for wiring more tasks around them."""

    preflight: BaseOperator
    purge_headroom: BaseOperator
    snapshot_plan: BaseOperator
    snapshot: Any  # the mapped snapshot task
    capture: BaseOperator
    apply: BaseOperator
    #: The sampled verify after the apply; None when ``verify_sample_fraction`` is None.
    verify: BaseOperator | None = None
    #: The approval step in front of the snapshot plan; None unless ``approve_rebuilds``.
    approve_rebuild: BaseOperator | None = None
    #: The table maintenance after the apply (and verify); None unless ``maintenance``.
    maintenance: BaseOperator | None = None


def mysql_cdc_pipeline(
    *,
    group_id: str | None = None,
    pipeline: str = "{{ params.pipeline }}",
    tables: Sequence[str] | str = "{{ params.tables }}",
    staging_uri: str = "{{ params.staging_uri }}",
    warehouse: str | None = "{{ params.warehouse }}",
    cutoff: str = "{{ params.cutoff }}",
    resnapshot: Sequence[str] | str = "{{ params.resnapshot }}",
    chunk_rows: int | str = "{{ params.chunk_rows }}",
    mysql_cdc_conn_id: str = "{{ params.mysql_cdc_conn_id }}",
    min_headroom_seconds: int | str = "{{ params.min_headroom_seconds }}",
    schema_change_policy: str = "{{ params.schema_change_policy }}",
    metadata_conn_id: str | None = None,
    spark_conn_id: str = "spark_default",
    catalog: str = "lake",
    catalog_conf: Mapping[str, str] | None = None,
    jars: str | None = None,
    headroom_soft_fail: bool = True,
    deferrable: bool | None = None,
    max_parallel_chunks: int = 4,
    asset_alias: str | None = DEFAULT_ASSET_ALIAS,
    capture_kwargs: Mapping[str, Any] | None = None,
    apply_kwargs: Mapping[str, Any] | None = None,
    verify_sample_fraction: float | None = 0.1,
    verify_kwargs: Mapping[str, Any] | None = None,
    retry_args: Mapping[str, Any] | None = DEFAULT_RETRY_ARGS,
    approve_rebuilds: bool = False,
    approval_kwargs: Mapping[str, Any] | None = None,
    maintenance: timedelta | None = None,
    maintenance_kwargs: Mapping[str, Any] | None = None,
    object_store_conn_id: str | None = None,
) -> MySqlCdcPipelineTasks:
    """Add one pipeline's tasks to the current DAG (inside ``TaskGroup(group_id)`` when given).

    * ``preflight`` checks server settings and privileges (fails with the fixes to make);
    * ``purge_headroom`` (:class:`MySqlBinlogPurgeHeadroomSensor`) reports how long until the server
      purges binlog the pipeline still needs, and lag; below ``min_headroom_seconds`` it is skipped
      with a warning (``headroom_soft_fail``, so capture still runs and catches up) or fails; when
      needed binlog is already purged it fails and the run stops. It waits up to its default
      ``timeout`` (5 minutes, a check a minute) for the headroom to recover, in the triggerer when
      ``deferrable`` (default None: Airflow's ``[operators] default_deferrable``);
    * ``approve_rebuild`` (only with ``approve_rebuilds=True``;
      :class:`~airflow_provider_mysql_cdc.operators.approval.MySqlCdcRebuildApprovalOperator`, Airflow's
      human-in-the-loop): when the run would snapshot tables again (a pending rebuild, ``resnapshot``), a
      person approves or holds each in the UI's "Required actions" before their targets are re-built;
      runs without any succeed at once (``approval_kwargs``: ``response_timeout``, ``assigned_users``...);
    * ``snapshot_plan`` / ``snapshot`` snapshot the tables never snapshotted, those in ``resnapshot``
      and (``schema_change_policy`` ``rebuild``) those a window left waiting for a rebuild (only those
      approved, with an approval step), one mapped task per chunk (skipped when there is nothing to
      snapshot);
    * ``capture`` stages the run's binlog window;
    * ``apply`` MERGEs it into Iceberg and emits an Asset event per changed table;
    * ``verify`` (:class:`MySqlCdcVerifyOperator`, unless ``verify_sample_fraction`` is None) compares a
      seeded sample of each table's key ranges with MySQL as of one GTID set and fails the run on a
      difference; tables it cannot verify yet (a snapshot still loading) are reported, not failed.
      Its Spark driver runs in the worker (``verify_kwargs``: ``spark_master``, ``row_budget``,
      ``warm_spark_idle_timeout`` to keep it up between runs...).
    * ``maintenance`` (only with ``maintenance=timedelta(...)``; :class:`IcebergMaintenanceOperator`) after
      the apply (and verify): compacts data files, rewrites position deletes, expires snapshots (keeping
      the newest apply commit) and removes orphan files of the pipeline's targets, in the run whose data
      interval ends on or crosses a multiple of ``maintenance`` (``timedelta(days=1)``: once a day); the
      other runs skip it without starting Spark (``maintenance_kwargs``: ``snapshot_retention``,
      ``retain_last``, ``orphan_file_age``, ``rewrite_data_options``...). In the pipeline's own DAG
      (``max_active_runs=1``) it never runs while an apply commits to the same tables.

    Capture and apply keep windows in order without ``depends_on_past``: each waits while the previous
    run's same task is unfinished and never waits on a failed one (the engines stop by name when that
    failure is what blocks them, naming the run and the way out; see
    :mod:`airflow_provider_mysql_cdc.operators.run_order`).

    ``retry_args`` (:data:`DEFAULT_RETRY_ARGS`: 4 retries, backoff from 30 s) go to every task; they
    win over the DAG's ``default_args``, so pass ``retry_args=None`` to use those instead. Terminal
    errors never retry. ``capture_kwargs`` and ``apply_kwargs`` go to the capture and apply operators
    (window caps such as ``max_rows``, ``history``, ``target_template``, retries...). The DAG must set
    ``render_template_as_native_obj=True`` when the defaults (param templates) are used.

    ``object_store_conn_id`` names an Airflow ``aws`` connection for a ``staging_uri`` and ``warehouse`` on
    S3 (``s3://``); the snapshot, capture and apply tasks use it (see :class:`SparkApplyOperator`; ``jars``
    must then hold the S3A jars too). The sampled verify and the table maintenance do not read S3
    staging yet: pass ``verify_sample_fraction=None`` and no ``maintenance`` with it.
    """
    if object_store_conn_id and verify_sample_fraction is not None:
        raise ConfigurationError(
            "the sampled verify does not read staging on S3 yet: with object_store_conn_id, pass "
            "verify_sample_fraction=None"
        )
    if object_store_conn_id and maintenance is not None:
        raise ConfigurationError(
            "the table maintenance does not read staging on S3 yet: with object_store_conn_id, pass no "
            "maintenance (run Iceberg's maintenance procedures from a Spark job of your own meanwhile)"
        )
    retries = dict(retry_args or {})
    scope: contextlib.AbstractContextManager[Any] = TaskGroup(group_id) if group_id else contextlib.nullcontext()
    with scope:
        preflight = MySqlCdcPreflightOperator(
            task_id="preflight", tables=tables, mysql_cdc_conn_id=mysql_cdc_conn_id, **retries
        )
        _require_native_rendering(preflight, tables)
        purge_headroom = MySqlBinlogPurgeHeadroomSensor(
            task_id="purge_headroom",
            pipeline=pipeline,
            mysql_cdc_conn_id=mysql_cdc_conn_id,
            metadata_conn_id=metadata_conn_id,
            min_headroom_seconds=min_headroom_seconds,
            soft_fail=headroom_soft_fail,
            # None: the sensor's own default, Airflow's [operators] default_deferrable.
            **({} if deferrable is None else {"deferrable": deferrable}),
            poke_interval=timedelta(minutes=1).total_seconds(),
            resnapshot=resnapshot,  # a run that re-snapshots is the recovery from purged binlogs
            **retries,
        )
        approve_rebuild: BaseOperator | None = None
        approved: dict[str, Any] = {}
        if approve_rebuilds:
            approve_rebuild, approved = _approval_step(
                pipeline=pipeline,
                tables=tables,
                resnapshot=resnapshot,
                schema_change_policy=schema_change_policy,
                mysql_cdc_conn_id=mysql_cdc_conn_id,
                metadata_conn_id=metadata_conn_id,
                trigger_rule="none_failed",  # runs after a soft-failed (skipped) headroom check
                **{**retries, **dict(approval_kwargs or {})},
            )
        snapshot_plan = MySqlSnapshotPlanOperator(
            task_id="snapshot_plan",
            pipeline=pipeline,
            staging_uri=staging_uri,
            tables=tables,
            resnapshot=resnapshot,
            chunk_rows=chunk_rows,
            schema_change_policy=schema_change_policy,
            mysql_cdc_conn_id=mysql_cdc_conn_id,
            metadata_conn_id=metadata_conn_id,
            object_store_conn_id=object_store_conn_id,
            trigger_rule="none_failed",  # runs after a soft-failed (skipped) headroom check
            **approved,  # the tables the approval step approved (its XCom), when there is one
            **retries,
        )
        # One task per chunk; an empty plan marks the mapped task skipped.
        snapshot = MySqlSnapshotOperator.partial(
            task_id="snapshot",
            pipeline=pipeline,
            staging_uri=staging_uri,
            tables=tables,
            mysql_cdc_conn_id=mysql_cdc_conn_id,
            metadata_conn_id=metadata_conn_id,
            object_store_conn_id=object_store_conn_id,
            max_active_tis_per_dagrun=max_parallel_chunks,
            map_index_template="{{ task.snapshot_chunk.chunk.database }}.{{ task.snapshot_chunk.chunk.table }}"
            " chunk {{ task.snapshot_chunk.chunk.chunk_no }}",
            **retries,
        ).expand(snapshot_chunk=snapshot_plan.output)
        capture = MySqlBinlogCaptureOperator(
            task_id="capture",
            pipeline=pipeline,
            staging_uri=staging_uri,
            tables=tables,
            cutoff=cutoff,
            mysql_cdc_conn_id=mysql_cdc_conn_id,
            metadata_conn_id=metadata_conn_id,
            object_store_conn_id=object_store_conn_id,
            trigger_rule="none_failed",  # runs after a skipped (empty) snapshot; a failed chunk stops it
            **{**retries, **dict(capture_kwargs or {})},
        )
        apply = SparkApplyOperator(
            task_id="apply",
            pipeline=pipeline,
            staging_uri=staging_uri,
            windows=f"{{{{ ti.xcom_pull(task_ids={capture.task_id!r})['window_id'] }}}}",
            catalog=catalog,
            warehouse=None if catalog_conf else warehouse,
            catalog_conf=catalog_conf,
            jars=jars,
            conn_id=spark_conn_id,
            asset_alias=asset_alias,
            headroom_task_id=purge_headroom.task_id,
            mysql_cdc_conn_id=mysql_cdc_conn_id,
            schema_change_policy=schema_change_policy,
            object_store_conn_id=object_store_conn_id,
            **{**retries, **dict(apply_kwargs or {})},
        )
        if approve_rebuild is None:
            preflight >> purge_headroom >> snapshot_plan
        else:
            preflight >> purge_headroom >> approve_rebuild >> snapshot_plan
        snapshot_plan >> snapshot >> capture >> apply
        verify = None
        if verify_sample_fraction is not None:
            verify = MySqlCdcVerifyOperator(
                task_id="verify",
                pipeline=pipeline,
                tables=tables,
                staging_uri=staging_uri,
                mysql_cdc_conn_id=mysql_cdc_conn_id,
                sample_fraction=verify_sample_fraction,
                catalog=catalog,
                warehouse=None if catalog_conf else warehouse,
                catalog_conf=catalog_conf,
                target_template=(apply_kwargs or {}).get("target_template", "{database}.{table}"),
                jars=jars,
                fail_on_unverified=False,
                **{**retries, **dict(verify_kwargs or {})},
            )
            apply >> verify
        maintain = None
        if maintenance is not None:
            maintain = IcebergMaintenanceOperator(
                task_id="maintenance",
                pipeline=pipeline,
                staging_uri=staging_uri,
                every=maintenance,
                catalog=catalog,
                warehouse=None if catalog_conf else warehouse,
                catalog_conf=catalog_conf,
                jars=jars,
                conn_id=spark_conn_id,
                **{**retries, **dict(maintenance_kwargs or {})},
            )
            (verify or apply) >> maintain
    return MySqlCdcPipelineTasks(
        preflight, purge_headroom, snapshot_plan, snapshot, capture, apply, verify, approve_rebuild, maintain
    )


def _approval_step(**arguments: Any) -> tuple[BaseOperator, dict[str, Any]]:
    """The approval step and the snapshot plan's argument reading its answer. Its module (Airflow's
    human-in-the-loop operators) is imported only when a DAG asks for it."""
    from airflow_provider_mysql_cdc.operators.approval import APPROVED_XCOM_KEY, MySqlCdcRebuildApprovalOperator

    step = MySqlCdcRebuildApprovalOperator(task_id="approve_rebuild", **arguments)
    # No answer in XCom (the step marked success by hand): nothing is approved, the tables keep waiting.
    approved = f"{{{{ ti.xcom_pull(task_ids={step.task_id!r}, key={APPROVED_XCOM_KEY!r}) or [] }}}}"
    return step, {"approved_rebuilds": approved}


def _require_native_rendering(task: BaseOperator, tables: Sequence[str] | str) -> None:
    dag = task.dag
    if isinstance(tables, str) and "{{" in tables and dag is not None and not dag.render_template_as_native_obj:
        raise ConfigurationError(
            f"DAG {dag.dag_id!r}: mysql_cdc_pipeline reads list params such as {tables!r}; create the DAG with "
            "render_template_as_native_obj=True (or pass plain values)"
        )
