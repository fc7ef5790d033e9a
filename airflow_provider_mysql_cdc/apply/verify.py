"""Check that Iceberg targets equal their MySQL source tables (no Airflow import).

:func:`compare_with_mysql` takes a fresh snapshot of the tables with the provider's own snapshot
engine (a throwaway pipeline, its own metadata store in a temporary SQLite file, a scratch staging
directory), reads it with Spark, casts every staged column to the target column's type and compares
the rows, as multisets, with the target's columns (every column except the ``_cdc_*`` ones, plus
``_cdc_invalid_values``) in both directions. Reading the source through the snapshot engine means
both sides went through the same type map, so "equal" is exact, value for value.

The comparison is only meaningful when nothing writes to the tables between the last applied
window and the check (or when the caller knows which rows may have moved since); the verify engine
(:mod:`airflow_provider_mysql_cdc.verify`) compares while MySQL is written to, reusing this module's
throwaway snapshot (:func:`snapshot_tables`) and type alignment (:func:`align_to_target`). Used by
the demo and by reliability harnesses::

    for result in compare_with_mysql(spark, source, ["demo.orders", "demo.customers"]):
        print(result.describe())
"""

from __future__ import annotations

import glob
import logging
import shutil
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply.plan import quote, target_table
from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import CorruptStagingError
from airflow_provider_mysql_cdc.mysql.client import connection_to
from airflow_provider_mysql_cdc.mysql.introspection import selected_tables
from airflow_provider_mysql_cdc.snapshot.defaults import DEFAULT_CHUNK_ROWS
from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest, plan_snapshot, snapshot_chunk
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

#: Example rows kept per direction and table.
DEFAULT_EXAMPLES = 3
#: ``chunk_rows`` that makes every table one snapshot chunk (one consistent read, one GTID set).
ONE_CHUNK_ROWS = 10**15


@dataclass(frozen=True)
class TableComparison:
    """How one Iceberg target compares with its MySQL table."""

    table: str
    target: str
    mysql_rows: int
    #: None when the target table does not exist.
    iceberg_rows: int | None
    only_in_mysql: int = 0
    only_in_iceberg: int = 0
    examples_only_in_mysql: tuple[dict[str, Any], ...] = ()
    examples_only_in_iceberg: tuple[dict[str, Any], ...] = ()
    #: Columns of the MySQL table the target lacks (a target column MySQL no longer has is ignored).
    missing_columns: tuple[str, ...] = ()
    #: Why the rows could not be compared (missing table), empty otherwise.
    problem: str = ""

    @property
    def equal(self) -> bool:
        """True when both sides hold exactly the same rows (duplicates counted)."""
        return not self.problem and not self.missing_columns and self.only_in_mysql == self.only_in_iceberg == 0

    def describe(self, max_chars: int = 300) -> str:
        """One line (``demo.orders: 123 rows, equal``), plus one indented line per example row."""
        if self.problem:
            return f"{self.table}: {self.problem}"
        if self.equal:
            return f"{self.table}: {self.mysql_rows} rows, equal"
        lines = [
            f"{self.table}: DIFFERENT: MySQL {self.mysql_rows} rows, {self.target} {self.iceberg_rows} rows; "
            f"{self.only_in_mysql} only in MySQL, {self.only_in_iceberg} only in Iceberg"
            + (f"; columns missing from the target: {', '.join(self.missing_columns)}" if self.missing_columns else "")
        ]
        for side, rows in (
            ("only in MySQL  ", self.examples_only_in_mysql),
            ("only in Iceberg", self.examples_only_in_iceberg),
        ):
            lines += [f"    {side}: {_short(row, max_chars)}" for row in rows]
        return "\n".join(lines)


def _short(row: dict[str, Any], max_chars: int) -> str:
    text = ", ".join(f"{name}={value!r}" for name, value in row.items())
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def target_name(table_name: str, catalog: str = "lake", target_template: str = "{database}.{table}") -> str:
    """The quoted Iceberg table of a MySQL ``db.table``, named as the apply names it."""
    return target_table(catalog, target_template, table_name)


def compare_with_mysql(
    spark: SparkSession,
    source: MySqlConnectionConfig,
    tables: Sequence[str],
    *,
    catalog: str = "lake",
    target_template: str = "{database}.{table}",
    scratch_uri: str | None = None,
    key_columns: dict[str, Sequence[str]] | None = None,
    max_examples: int = DEFAULT_EXAMPLES,
) -> list[TableComparison]:
    """Compare each MySQL table (``db.table``) with its Iceberg target; one result per table, in order.

    ``source`` needs what a snapshot needs (SELECT, LOCK TABLES, REPLICATION CLIENT). The snapshot is
    staged under ``scratch_uri`` (any pyarrow filesystem URI Spark can read too; default: a local
    temporary directory, enough for Spark in local mode) in a directory of its own, deleted afterwards.
    ``key_columns`` names key columns of tables without a primary key, as for the snapshot operators.
    """
    with tempfile.TemporaryDirectory(prefix="mysql-cdc-verify-") as tmp:
        staging_uri = scratch_uri or str(Path(tmp) / "staging")
        pipeline = f"verify-{uuid.uuid4().hex[:12]}"
        try:
            staged = snapshot_tables(source, tables, staging_uri, pipeline, Path(tmp) / "verify.db", key_columns or {})
            return [
                _compare(
                    spark,
                    name,
                    list(staged[name].paths) if name in staged else None,
                    target_name(name, catalog, target_template),
                    max_examples,
                )
                for name in tables
            ]
        finally:
            if scratch_uri:
                scratch = Staging(scratch_uri, pipeline)
                try:
                    scratch.delete_pipeline()
                except OSError as exc:
                    log.warning("could not delete the verification snapshot %s/%s: %s", scratch.root, pipeline, exc)
            else:
                shutil.rmtree(Path(tmp) / "staging", ignore_errors=True)


@dataclass(frozen=True)
class StagedSnapshotTable:
    """One table of a throwaway snapshot: its staged files (Spark paths), key and chunk frontiers."""

    table: str
    paths: tuple[str, ...]
    key_columns: tuple[str, ...]
    #: The table's primary key (or unique NOT NULL key) as its schema says; () for a table without one.
    primary_key: tuple[str, ...]
    #: Each chunk's GTID set, in chunk order (one when the snapshot was taken in one chunk per table).
    frontiers: tuple[GtidSet, ...]
    rows: int = 0


def snapshot_tables(
    source: MySqlConnectionConfig,
    tables: Sequence[str],
    staging_uri: str,
    pipeline: str,
    store_path: Path,
    key_columns: Mapping[str, Sequence[str]],
    *,
    one_chunk_per_table: bool = False,
) -> dict[str, StagedSnapshotTable]:
    """Snapshot the tables (``db.table``) under ``staging_uri`` as the throwaway ``pipeline`` (its store a
    SQLite file at ``store_path``); returns each existing table's staged snapshot. With
    ``one_chunk_per_table`` each table is read in one consistent read, so it has one GTID set."""
    store = FrontierStore.from_url(f"sqlite:///{store_path}")
    with connection_to(source) as connection:  # tables MySQL does not have are reported, not snapshotted
        existing = selected_tables(connection, source, TableSelection.of([glob.escape(name) for name in tables]))
    if not existing:
        return {}
    request = SnapshotRequest(
        pipeline=pipeline,
        run_id="verify",
        staging_uri=staging_uri,
        tables=TableSelection.of([glob.escape(name) for name in existing]),
        key_columns=key_columns,
        chunk_rows=ONE_CHUNK_ROWS if one_chunk_per_table else DEFAULT_CHUNK_ROWS,
    )
    plan = plan_snapshot(request, source, store)
    for argument in plan.mapped_arguments():
        snapshot_chunk(request, str(argument["snapshot_id"]), SnapshotChunk.from_json(argument["chunk"]), source, store)
    staging = Staging(staging_uri, pipeline)
    staged: dict[str, StagedSnapshotTable] = {}
    for table_name in plan.tables:
        database, table = table_name.split(".", 1)
        assert plan.snapshot_id is not None
        table_manifest = staging.read_snapshot_table_manifest(plan.snapshot_id, database, table)
        if table_manifest is None:
            raise CorruptStagingError(f"the verification snapshot of {table_name} published no table manifest")
        files: list[str] = []
        primary_key: tuple[str, ...] = ()
        for chunk in table_manifest.chunks:
            manifest = staging.read_chunk_manifest(chunk)
            if manifest is None:
                raise CorruptStagingError(f"the verification snapshot of {table_name} lost {chunk['manifest']}")
            files += [path for path, _ in staging.spark_files(manifest)]
            primary_key = primary_key or next((tuple(s.primary_key) for s in manifest.schemas if s.primary_key), ())
        staged[table_name] = StagedSnapshotTable(
            table=table_name,
            paths=tuple(files),
            key_columns=tuple(table_manifest.chunks[0]["chunk"]["key_columns"]) if table_manifest.chunks else (),
            primary_key=primary_key,
            frontiers=tuple(GtidSet.parse(chunk["frontier"]) for chunk in table_manifest.chunks),
            rows=sum(int(chunk.get("rows") or 0) for chunk in table_manifest.chunks),
        )
    return staged


def comparable(frame: DataFrame) -> DataFrame:
    """Map columns cannot take part in set operations: each becomes its entries sorted by key."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    columns: list[Column] = [
        F.array_sort(F.map_entries(F.col(quote(f.name)))).alias(f.name)
        if isinstance(f.dataType, MapType)
        else F.col(quote(f.name))
        for f in frame.schema.fields
    ]
    return frame.select(*columns)


def read_staged_snapshot(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The staged snapshot files as one frame (dates before 1582 read as written)."""
    return spark.read.option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED").parquet(*paths)


@dataclass(frozen=True)
class AlignedFrames:
    """The source's staged rows and the target's rows over the same columns, source values cast to the
    target's types."""

    source: DataFrame
    target: DataFrame
    columns: tuple[str, ...]
    #: Columns of the MySQL table the target lacks.
    missing_columns: tuple[str, ...]


def compared_columns(frame: DataFrame) -> list[str]:
    """The columns a comparison covers: every column except the ``_cdc_*`` ones, plus
    ``_cdc_invalid_values``."""
    return [name for name in frame.columns if name == INVALID_VALUES_COLUMN or not name.startswith("_cdc_")]


def align_to_target(staged: DataFrame, target: DataFrame) -> AlignedFrames:
    """``staged`` (source rows) and ``target`` over the compared columns both have, staged values cast to
    the target column's type (the apply widened or evolved it the same way)."""
    from pyspark.sql import functions as F

    target_types = {f.name: f.dataType for f in target.schema.fields}
    source_columns = compared_columns(staged)
    missing = tuple(name for name in source_columns if name not in target_types)
    columns = tuple(name for name in source_columns if name in target_types)
    return AlignedFrames(
        source=staged.select(*[F.col(quote(name)).cast(target_types[name]).alias(name) for name in columns]),
        target=target.select(*[F.col(quote(name)) for name in columns]),
        columns=columns,
        missing_columns=missing,
    )


def _examples(frame: DataFrame, limit: int) -> tuple[dict[str, Any], ...]:
    return tuple(row.asDict() for row in frame.limit(limit).collect()) if limit > 0 else ()


def _compare(
    spark: SparkSession, table_name: str, staged_paths: list[str] | None, target: str, max_examples: int
) -> TableComparison:
    if not staged_paths:  # not selected: no such table (or it was dropped while the snapshot was planned)
        return TableComparison(table_name, target, 0, None, problem="no such table in MySQL")
    staged = read_staged_snapshot(spark, staged_paths)
    mysql_rows = staged.count()
    try:
        spark.sql(f"REFRESH TABLE {target}")
    except Exception as exc:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
            return TableComparison(table_name, target, mysql_rows, None, problem=f"{target} does not exist")
        raise
    iceberg = spark.table(target)
    aligned = align_to_target(staged, iceberg)
    missing = aligned.missing_columns
    left, right = comparable(aligned.source), comparable(aligned.target)
    only_left = left.exceptAll(right).cache()
    only_right = right.exceptAll(left).cache()
    try:
        return TableComparison(
            table=table_name,
            target=target,
            mysql_rows=mysql_rows,
            iceberg_rows=iceberg.count(),
            only_in_mysql=only_left.count(),
            only_in_iceberg=only_right.count(),
            examples_only_in_mysql=_examples(only_left, max_examples),
            examples_only_in_iceberg=_examples(only_right, max_examples),
            missing_columns=missing,
        )
    finally:
        only_left.unpersist()
        only_right.unpersist()


__all__ = [
    "DEFAULT_EXAMPLES",
    "AlignedFrames",
    "StagedSnapshotTable",
    "TableComparison",
    "align_to_target",
    "comparable",
    "compare_with_mysql",
    "compared_columns",
    "read_staged_snapshot",
    "snapshot_tables",
    "target_name",
]
