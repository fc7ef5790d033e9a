"""OpenLineage of the operators: the datasets each task read and wrote, the apply's column lineage, and
the parent run the apply's Spark job is given.

Airflow's OpenLineage provider (``apache-airflow-providers-openlineage``, this package's ``openlineage``
extra) is optional and imported inside these functions only, never when a DAG file is parsed. When it
is installed and enabled (a transport is configured, ``[openlineage] disabled`` is not set), each
operator records in ``execute`` what it read and wrote (:class:`OpenLineageFacets`); the provider's
listener asks for it after the task (``get_openlineage_facets_on_complete`` / ``_on_failure``) and
emits it with the task's COMPLETE or FAIL event. The names follow the OpenLineage naming spec
(:mod:`airflow_provider_mysql_cdc.core.lineage`); no name, facet or Spark property holds a credential.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.core.lineage import LineageDataset, TaskLineage

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context
    from openlineage.client.generated.base import Dataset, OutputDatasetFacet, RunFacet

    #: What the facet methods return: datasets, no run or job facet of their own.
    Lineage = OperatorLineage[Dataset, RunFacet]

    from airflow_provider_mysql_cdc.apply.contract import TableReport
    from airflow_provider_mysql_cdc.staging import Staging

log = logging.getLogger(__name__)


def openlineage_enabled() -> bool:
    """Whether Airflow's OpenLineage provider is installed and enabled (its listener emits events)."""
    try:
        from airflow.providers.openlineage import conf
    except ImportError:
        return False
    return not conf.is_disabled()


def _dataset(recorded: LineageDataset, output: bool) -> Dataset:
    """One OpenLineage dataset with its facets: schema, TABLE symlink, column lineage, rows written."""
    from openlineage.client.generated.base import InputDataset, OutputDataset
    from openlineage.client.generated.column_lineage_dataset import (
        ColumnLineageDatasetFacet,
        Fields,
        InputField,
        Transformation,
    )
    from openlineage.client.generated.output_statistics_output_dataset import OutputStatisticsOutputDatasetFacet
    from openlineage.client.generated.schema_dataset import SchemaDatasetFacet, SchemaDatasetFacetFields
    from openlineage.client.generated.symlinks_dataset import Identifier, SymlinksDatasetFacet

    facets: dict[str, Any] = {}
    if recorded.columns:
        fields = [SchemaDatasetFacetFields(name=name, type=kind or None) for name, kind in recorded.columns]
        facets["schema"] = SchemaDatasetFacet(fields=fields)
    if recorded.table is not None:
        identifier = Identifier(namespace=recorded.table.namespace, name=recorded.table.name, type="TABLE")
        facets["symlinks"] = SymlinksDatasetFacet(identifiers=[identifier])
    if recorded.copied_from is not None and recorded.copied_columns:
        source = recorded.copied_from
        copy = Transformation(type="DIRECT", subtype="IDENTITY", description="replicated by MySQL CDC")
        facets["columnLineage"] = ColumnLineageDatasetFacet(
            fields={
                name: Fields(inputFields=[InputField(source.namespace, source.name, name, transformations=[copy])])
                for name in recorded.copied_columns
            }
        )
    name = recorded.dataset
    if not output:
        return InputDataset(namespace=name.namespace, name=name.name, facets=facets)
    statistics: dict[str, OutputDatasetFacet] = {}
    if recorded.rows is not None:
        statistics["outputStatistics"] = OutputStatisticsOutputDatasetFacet(rowCount=recorded.rows)
    return OutputDataset(namespace=name.namespace, name=name.name, facets=facets, outputFacets=statistics)


def operator_lineage(lineage: TaskLineage | None) -> Lineage:
    """What a task recorded, as the OpenLineage provider's ``OperatorLineage`` (empty when it recorded nothing)."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    lineage = lineage or TaskLineage()
    return OperatorLineage(
        inputs=[_dataset(dataset, output=False) for dataset in lineage.inputs],
        outputs=[_dataset(dataset, output=True) for dataset in lineage.outputs],
    )


class OpenLineageFacets:
    """Mixin of the operators: the OpenLineage facet methods, answered from what ``execute`` recorded.

    ``execute`` calls :meth:`_record_lineage` with a function that describes what the task read and
    wrote; it runs only when OpenLineage is enabled, and a failure in it is logged, never the task's.
    """

    _task_lineage: TaskLineage | None = None

    def _record_lineage(self, describe: Callable[[], TaskLineage]) -> None:
        if not openlineage_enabled():
            return
        try:
            self._task_lineage = describe()
        except Exception as exc:  # lineage is a by-product: it never fails the task
            log.warning("OpenLineage: could not describe what the task read and wrote: %s", exc, exc_info=True)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Lineage:
        """The datasets the task read and wrote (called by the OpenLineage listener after a success)."""
        return operator_lineage(self._task_lineage)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Lineage:
        """What the task had read and written before it failed (what it recorded; possibly nothing)."""
        return operator_lineage(self._task_lineage)


def with_parent_job_properties(conf: dict[str, Any], context: Context) -> dict[str, Any]:
    """``conf`` with this task's OpenLineage run as the parent (and the DAG run as the root) of the Spark
    job's run (``spark.openlineage.parentJobNamespace``, ``parentJobName``, ``parentRunId``,
    ``rootParent*``), when OpenLineage is enabled and ``conf`` names no parent yet; else ``conf``.

    The OpenLineage Spark listener (when the job runs it) then links its events to the Airflow task.
    Only identifiers are passed: the transport settings, which can hold an API key, never are.
    """
    if not openlineage_enabled():
        return conf
    from airflow.providers.openlineage.utils.spark import inject_parent_job_information_into_spark_properties

    return dict(inject_parent_job_information_into_spark_properties(conf, context))


def staged_windows_uri(staging_uri: str, pipeline: str) -> str:
    """The location of a pipeline's staged windows (one lineage dataset for all of them)."""
    from airflow_provider_mysql_cdc.staging import Staging

    staging = Staging(staging_uri, pipeline)
    return staging.uri_of(staging.windows_dir())


def staged_snapshots_uri(staging_uri: str, pipeline: str) -> str:
    """The location of a pipeline's staged snapshots (one lineage dataset for all of them)."""
    from airflow_provider_mysql_cdc.staging import Staging

    staging = Staging(staging_uri, pipeline)
    return staging.uri_of(staging.snapshots_dir())


def staged_columns(
    staging: Staging, first_window: int, last_window: int, tables: Mapping[str, TableReport]
) -> dict[str, tuple[tuple[str, str], ...]]:
    """``(name, MySQL type)`` of each table's newest staged columns in windows ``first..last``; a table
    without a change in them (loaded from its snapshot) from its snapshot's first chunk."""
    newest: dict[str, tuple[int, tuple[Mapping[str, Any], ...]]] = {}

    def keep(table_name: str, version: int, columns: tuple[Mapping[str, Any], ...]) -> None:
        if table_name not in newest or newest[table_name][0] <= version:
            newest[table_name] = (version, columns)

    for window_id in range(first_window, last_window + 1):
        manifest = staging.read_window_manifest(window_id)
        for schema in manifest.schemas if manifest else ():
            keep(f"{schema.database}.{schema.table}", schema.schema_version, schema.columns)
    for table_name, table in tables.items():
        snapshot_id = str(table.state.get("snapshot_id") or "")
        if table_name in newest or not snapshot_id:
            continue
        database, _, name = table_name.partition(".")
        snapshot = staging.read_snapshot_table_manifest(snapshot_id, database, name)
        chunk = staging.read_chunk_manifest(snapshot.chunks[0]) if snapshot and snapshot.chunks else None
        for schema in chunk.schemas if chunk else ():
            keep(table_name, schema.schema_version, schema.columns)
    return {
        table_name: tuple((str(column["name"]), str(column.get("mysql_type") or "")) for column in columns)
        for table_name, (_, columns) in newest.items()
    }
