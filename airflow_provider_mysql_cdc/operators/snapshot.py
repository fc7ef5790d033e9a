"""Snapshot operators: plan a pipeline's snapshot, then read each chunk in its own (mapped) task.

.. code-block:: python

    plan = MySqlSnapshotPlanOperator(task_id="snapshot_plan", pipeline="orders", staging_uri=STAGING)
    chunks = MySqlSnapshotOperator.partial(task_id="snapshot", pipeline="orders", staging_uri=STAGING).expand(
        snapshot_chunk=plan.output
    )
    plan >> chunks >> capture  # capture: trigger_rule="none_failed" (no chunks: the mapped task is skipped)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context, conf

from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.lineage import (
    MySqlServer,
    snapshot_chunk_lineage,
    snapshot_plan_lineage,
    staging_lineage,
)
from airflow_provider_mysql_cdc.core.windows import TableSelection, patterns
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.hooks.metadata import metadata_store
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.hooks.object_store import object_store_settings
from airflow_provider_mysql_cdc.operators.lineage import OpenLineageFacets, staged_snapshots_uri
from airflow_provider_mysql_cdc.snapshot.defaults import (
    DEFAULT_CHUNK_ROWS,
    DEFAULT_FETCH_ROWS,
    DEFAULT_LOCK_WAIT_TIMEOUT_SECONDS,
)
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task

if TYPE_CHECKING:  # the engine (PyMySQL, pyarrow) is imported when a task runs, not when a DAG is parsed
    from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest

#: Airflow's default ``[core] max_map_length``: the most map indexes one mapped task may have.
DEFAULT_MAX_MAP_LENGTH = 1024


def _positive_int(value: int | str, name: str) -> int:
    """Templated numbers arrive as text unless the DAG renders templates as native objects."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    return value


def _key_columns(value: Mapping[str, Sequence[str]] | None) -> dict[str, list[str]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f'key_columns must be a dict {{"db.table": ["col", ...]}}, got {value!r} '
            "(templated from params? set render_template_as_native_obj=True on the DAG)"
        )
    return {
        str(table): list(columns) if not isinstance(columns, str) else [columns] for table, columns in value.items()
    }


class _SnapshotOperatorBase(OpenLineageFacets, BaseOperator):
    """Parameters both snapshot operators share (they build the same :class:`SnapshotRequest`)."""

    def __init__(
        self,
        *,
        pipeline: str,
        staging_uri: str,
        tables: Sequence[str] | str = ("*.*",),
        exclude_tables: Sequence[str] | str = (),
        key_columns: Mapping[str, Sequence[str]] | None = None,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        metadata_conn_id: str | None = None,
        object_store_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.object_store_conn_id = object_store_conn_id
        self.pipeline = pipeline
        self.staging_uri = staging_uri
        self.tables = tables
        self.exclude_tables = exclude_tables
        self.key_columns = key_columns
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.metadata_conn_id = metadata_conn_id

    def _request(self, context: Context, **settings: Any) -> SnapshotRequest:
        from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest

        return SnapshotRequest(
            pipeline=self.pipeline,
            run_id=str(context["run_id"]),
            staging_uri=self.staging_uri,
            object_store=object_store_settings(self.object_store_conn_id),
            tables=TableSelection.of(self.tables, self.exclude_tables),
            key_columns=_key_columns(self.key_columns),
            **settings,
        )


class MySqlSnapshotPlanOperator(_SnapshotOperatorBase):
    """Plan the run's snapshot of ``pipeline``: the selected tables it has never snapshotted, plus
    those named in ``resnapshot``, split into key ranges of about ``chunk_rows`` rows.

    Registers a brand-new pipeline's initial frontier first, and records the plan once: re-running
    (clearing) the task returns the same chunks. Returns (XCom) one dict per chunk, the argument
    list of :class:`MySqlSnapshotOperator`'s ``.expand(snapshot_chunk=...)``; an empty list when
    nothing needs a snapshot (the mapped task is then skipped).

    Airflow caps a mapped task at ``[core] max_map_length`` indexes (1024 by default): choose
    ``chunk_rows`` for very large tables before their first snapshot, or raise that setting.

    OpenLineage (when enabled): inputs are the tables planned (their keys were read); no output.

    :param pipeline: pipeline name (one frontier, one window sequence).
    :param staging_uri: pyarrow filesystem URI of the staging root (local path, ``s3://``, ...).
    :param object_store_conn_id: an Airflow ``aws`` connection for a ``staging_uri`` on S3 (login = access key
        id, password = secret access key, extra ``endpoint_url`` and ``region_name``); None: pyarrow's defaults.
    :param tables: ``database.table`` glob patterns to include.
    :param exclude_tables: patterns to exclude.
    :param resnapshot: ``database.table`` names or glob patterns to snapshot again; each must match a
        selected table.
    :param key_columns: ``{"database.table": ["col", ...]}``: columns that cut a table without a primary
        key or unique NOT NULL key into chunks (without them it is one chunk). They need not identify
        rows: such a table is replicated as a multiset of rows either way.
    :param chunk_rows: about this many rows per chunk (one mapped task each).
    :param schema_change_policy: ``rebuild`` (default): tables a window left waiting for a rebuild (a
        change their target could not follow exactly) are snapshotted again in this run; ``stop``: only
        when named in ``resnapshot``.
    :param approved_rebuilds: with an approval step in front of the plan
        (:class:`~airflow_provider_mysql_cdc.operators.approval.MySqlCdcRebuildApprovalOperator`), the
        tables it approved: a table that already has a snapshot is snapshotted again only when named here
        (the others stay as they are, and a later run asks again). None (default): no approval step.
    :param mysql_cdc_conn_id: the MySQL source connection.
    :param metadata_conn_id: connection of the metadata database; default: a SQLite file in AIRFLOW_HOME.
    """

    template_fields: Sequence[str] = (
        "pipeline",
        "staging_uri",
        "object_store_conn_id",
        "tables",
        "exclude_tables",
        "resnapshot",
        "key_columns",
        "chunk_rows",
        "schema_change_policy",
        "approved_rebuilds",
        "mysql_cdc_conn_id",
        "metadata_conn_id",
    )
    ui_color = "#fdf1d6"

    def __init__(
        self,
        *,
        resnapshot: Sequence[str] | str = (),
        chunk_rows: int | str = DEFAULT_CHUNK_ROWS,
        schema_change_policy: str = "rebuild",
        approved_rebuilds: Sequence[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.resnapshot = resnapshot
        self.chunk_rows = chunk_rows
        self.schema_change_policy = schema_change_policy
        self.approved_rebuilds = approved_rebuilds

    @terminal_errors_fail_task
    def execute(self, context: Context) -> list[dict[str, Any]]:
        from airflow_provider_mysql_cdc.snapshot.engine import plan_snapshot

        source = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id).get_connection_config()
        request = self._request(
            context,
            resnapshot=patterns(self.resnapshot),
            chunk_rows=_positive_int(self.chunk_rows, "chunk_rows"),
            schema_change_policy=str(self.schema_change_policy),
            approved_rebuilds=None if self.approved_rebuilds is None else patterns(self.approved_rebuilds),
            # Airflow maps one task over at most this many chunks: checked before the plan is recorded.
            max_chunks=conf.getint("core", "max_map_length", fallback=DEFAULT_MAX_MAP_LENGTH),
        )
        plan = plan_snapshot(request, source, metadata_store(self.metadata_conn_id))
        self._record_lineage(lambda: snapshot_plan_lineage(MySqlServer(source.host, source.port), plan.tables))
        arguments = plan.mapped_arguments()
        if plan.snapshot_id is None:
            self.log.info("pipeline %s: every selected table has a snapshot; nothing to snapshot", plan.pipeline)
        else:
            self.log.info(
                "pipeline %s: snapshot %s of %s in %s chunks",
                plan.pipeline,
                plan.snapshot_id,
                ", ".join(plan.tables),
                len(arguments),
            )
        return arguments


class MySqlSnapshotOperator(_SnapshotOperatorBase):
    """Read one planned chunk at its own point in time and stage it as Parquet.

    Meant to be mapped over the plan: ``MySqlSnapshotOperator.partial(...).expand(snapshot_chunk=plan.output)``.
    Takes ``LOCK TABLES ... READ`` for milliseconds (logged), streams the chunk's key range from a
    consistent-snapshot transaction and marks the chunk finished with its GTID frontier. A finished
    chunk is never redone: re-running the task verifies and returns it. Returns (XCom) the table,
    chunk number, row count, frontier, manifest URI and lock time.

    OpenLineage (when enabled): the input is the chunk's MySQL table, the output the pipeline's staged
    snapshots (see docs/operators.md "Lineage (OpenLineage)").

    :param snapshot_chunk: one element of :class:`MySqlSnapshotPlanOperator`'s return value.
    :param pipeline: pipeline name (the plan's).
    :param staging_uri: pyarrow filesystem URI of the staging root (the plan's).
    :param object_store_conn_id: an Airflow ``aws`` connection for a ``staging_uri`` on S3 (login = access key
        id, password = secret access key, extra ``endpoint_url`` and ``region_name``); None: pyarrow's defaults.
    :param tables: ``database.table`` glob patterns (the plan's).
    :param exclude_tables: patterns to exclude (the plan's).
    :param key_columns: user-named key columns (the plan's).
    :param fetch_rows: rows fetched from the server per round trip.
    :param lock_wait_timeout_seconds: how long ``LOCK TABLES`` may wait behind running transactions
        (writers queue behind it meanwhile) before the attempt fails and is retried.
    :param mysql_cdc_conn_id: the MySQL source connection.
    :param metadata_conn_id: connection of the metadata database; default: a SQLite file in AIRFLOW_HOME.
    """

    # ``snapshot_chunk`` is not templated: key values of the data must reach the engine verbatim.
    template_fields: Sequence[str] = (
        "pipeline",
        "staging_uri",
        "object_store_conn_id",
        "tables",
        "exclude_tables",
        "key_columns",
        "fetch_rows",
        "mysql_cdc_conn_id",
        "metadata_conn_id",
    )
    ui_color = "#fbe3b3"

    def __init__(
        self,
        *,
        snapshot_chunk: Mapping[str, Any],
        fetch_rows: int | str = DEFAULT_FETCH_ROWS,
        lock_wait_timeout_seconds: int = DEFAULT_LOCK_WAIT_TIMEOUT_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.snapshot_chunk = snapshot_chunk
        self.fetch_rows = fetch_rows
        self.lock_wait_timeout_seconds = lock_wait_timeout_seconds

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_mysql_cdc.snapshot.engine import snapshot_chunk

        argument = self.snapshot_chunk
        if not isinstance(argument, Mapping) or set(argument) != {"snapshot_id", "chunk"}:
            raise ConfigurationError(
                f"snapshot_chunk must be one element of MySqlSnapshotPlanOperator's return value, got {argument!r}"
            )
        source = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id).get_connection_config()
        request = self._request(
            context,
            fetch_rows=_positive_int(self.fetch_rows, "fetch_rows"),
            lock_wait_timeout_seconds=self.lock_wait_timeout_seconds,
        )
        snapshots = staged_snapshots_uri(self.staging_uri, self.pipeline)
        self._record_lineage(lambda: staging_lineage(snapshots))  # a failed run's FAIL event
        result = snapshot_chunk(
            request,
            str(argument["snapshot_id"]),
            SnapshotChunk.from_json(argument["chunk"]),
            source,
            metadata_store(self.metadata_conn_id),
        )
        self._record_lineage(
            lambda: snapshot_chunk_lineage(
                MySqlServer(source.host, source.port), result.table_name, result.rows, snapshots
            )
        )
        self.log.info(
            "snapshot %s, %s chunk %s: %s rows%s, table lock held %s, manifest %s",
            result.snapshot_id,
            result.table_name,
            result.chunk_no,
            result.rows,
            " (finished before; reused)" if result.reused else "",
            "n/a" if result.lock_ms is None else f"{result.lock_ms:.1f} ms",
            result.manifest_uri,
        )
        return result.as_xcom()
