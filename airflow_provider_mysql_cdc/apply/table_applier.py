"""One target table's apply: plan its steps (:mod:`.plan`) against the state its Iceberg commits
record, read each step's staged rows, evolve the schema, then MERGE (or replace the table) in one
commit that carries the new state; re-plan when a concurrent apply committed first. No Airflow import."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply.contract import ApplySpec, TableReport
from airflow_provider_mysql_cdc.apply.iceberg_session import (
    is_commit_conflict,
    java_error_summary,
    mask_userinfo,
    snapshot_summary,
    table_exists,
    with_commit_properties,
)
from airflow_provider_mysql_cdc.apply.merge_sql import (
    CHANGELOG_WINDOW_COLUMN,
    OP_COLUMN,
    TARGET_PROPERTIES,
    backfill_expressions,
    describe_event,
    final_version,
    json_document_columns,
    merge_statement,
    merge_update_value,
)
from airflow_provider_mysql_cdc.apply.multiset import MultisetSql, identity_columns
from airflow_provider_mysql_cdc.apply.partitioning import (
    PartitionField,
    configured_fields,
    evolution_statements,
    field_of_iceberg,
    fields_that_fit,
    partition_clause,
    require_columns,
)
from airflow_provider_mysql_cdc.apply.plan import (
    AppliedState,
    ApplyWindow,
    KeyFilter,
    LoadSnapshotChunks,
    SnapshotLink,
    TableStep,
    key_filter_applies,
    key_filter_pays_off,
    key_range_applies,
    key_range_condition,
    newest_applied_state,
    plan_schema_changes,
    plan_table,
    quote,
    waits_without_target,
)
from airflow_provider_mysql_cdc.apply.schema_alignment import (
    ColumnAlteration,
    WindowTableChanges,
    plan_window_changes,
    window_version_renames,
)
from airflow_provider_mysql_cdc.apply.staged_rows import (
    PARTIAL_COLUMN,
    apply_pending_json_diffs,
    fold_partial_rows,
    key_match,
    last_change_per_key,
    read_versions,
    temporal_keys,
    window_rows,
)
from airflow_provider_mysql_cdc.core.ddl import ddl_targets
from airflow_provider_mysql_cdc.core.lineage import identifier_parts
from airflow_provider_mysql_cdc.core.schema_events import RESET, SCHEMA_CHANGE_STOP, TRUNCATED, SchemaEvent
from airflow_provider_mysql_cdc.core.staging import (
    SchemaVersionInfo,
    SnapshotTableManifest,
    StagedFile,
    StagingManifest,
)
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    CorruptStagingError,
    MySqlCdcError,
    RebuildPendingError,
    StaleApplyStateError,
    TableWithoutKeyError,
    TargetDivergedError,
    TerminalCdcError,
    UnsupportedSchemaChangeError,
)
from airflow_provider_mysql_cdc.staging import Staging

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("airflow_provider_mysql_cdc.apply")
#: Held while a namespace is created (``CREATE NAMESPACE IF NOT EXISTS`` is a check, then a create).
_NAMESPACE_CREATION = threading.Lock()

#: How often a table is re-planned after a commit lost to a concurrent writer.
MAX_CONFLICT_RETRIES = 5


def _as_target_column(staged_names: Mapping[str, str], column: str, type_text: str) -> str:
    """SQL of a staged column (``staged_names``: lower-case name -> staged name) as the target's column of
    type ``type_text`` (NULL when not staged). Text, for ``selectExpr``: a wide table's projection built
    through the DataFrame API costs several calls into the JVM a column."""
    name = staged_names.get(column.lower())
    return f"CAST({'NULL' if name is None else quote(name)} AS {type_text}) AS {quote(column)}"


#: The lowest and highest value of a step's integer key.
KeyBounds = tuple[int, int]


@dataclass(frozen=True)
class _StepSource:
    """What one step merges into one table."""

    #: One row per key: its last change (snapshot chunks: every row); for a table without a key (no
    #: ``keys``), every staged row that counts.
    frame: DataFrame
    keys: list[str]
    files: list[StagedFile]
    #: Every staged change that counts (the key filter's keys); None when the step staged none.
    rows: DataFrame | None
    #: The window's schema changes (None for snapshot loads).
    changes: WindowTableChanges | None


def _field_text(transform: str, column: str) -> str:
    """An Iceberg partition field as Spark SQL writes it (``days(`c`)``), or as Iceberg does (``void(c)``)."""
    try:
        field = field_of_iceberg(transform, column)
    except ConfigurationError:  # a transform without a Spark SQL form here
        field = None
    return field.sql() if field is not None else f"{transform}({column})"


def _fields_by_source(table: Any) -> dict[str, str]:
    """The columns of an Iceberg table that a partition spec it has had (Iceberg keeps every one) takes
    values from, each with those fields as Spark SQL writes them."""
    schema = table.schema()
    fields: dict[str, list[str]] = {}
    for spec in table.specs().values():
        for f in spec.fields():
            column = schema.findColumnName(f.sourceId())
            if column is not None:
                fields.setdefault(str(column), []).append(_field_text(str(f.transform().toString()), str(column)))
    return {column: ", ".join(dict.fromkeys(texts)) for column, texts in fields.items()}


def read_applied_state(spark: SparkSession, name: str) -> tuple[int | None, AppliedState | None]:
    """Refresh the cached table ``name``, then return its current Iceberg snapshot id (None before its
    first commit) and the newest CDC state its history records (None when no apply wrote it); the
    table's rows as of that snapshot are the rows of that state."""
    spark.sql(f"REFRESH TABLE {name}")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    current = table.currentSnapshot()
    current_id = None if current is None else int(current.snapshotId())

    def snapshot(snapshot_id: int) -> SnapshotLink | None:
        found = current if snapshot_id == current_id else table.snapshot(snapshot_id)
        return None if found is None else snapshot_summary(jvm, found)

    return current_id, newest_applied_state(current_id, snapshot, name)


class TableApplier:
    """Applies the planned steps of one table through one SparkSession."""

    def __init__(self, spark: SparkSession, config: ApplySpec, table_name: str, staging: Staging | None = None) -> None:
        self.spark = spark
        self.config = config
        self.staging = staging or Staging(config.staging_uri, config.pipeline)
        self.table_name = table_name
        self.target = config.target(table_name)
        self.report = TableReport(target=self.target)
        self._snapshot_cache: dict[str, SnapshotTableManifest | None] = {}
        self._window_cache: dict[int, StagingManifest | None] = {}
        #: Files of this table per window whose checksums were verified (the changelog reuses them).
        self._verified_window_files: dict[int, list[tuple[str, StagedFile]]] = {}
        #: Tables seen to exist during this apply (a table is never dropped by it, so the answer holds).
        self._existing_tables: set[str] = set()

    # -- staging ------------------------------------------------------------------------------------

    def read_window(self, window_id: int) -> StagingManifest | None:
        if window_id not in self._window_cache:
            self._window_cache[window_id] = self.staging.read_window_manifest(window_id)
        return self._window_cache[window_id]

    def _waiting_in_window(self) -> str:
        """Why the run's last window lists the table as waiting for a rebuild ("" when it does not)."""
        windows = self.config.window_ids
        manifest = self.read_window(windows[-1]) if windows else None
        return "" if manifest is None else manifest.rebuilds_pending.get(self.table_name, "")

    def read_snapshot(self, snapshot_id: str, table_name: str) -> SnapshotTableManifest | None:
        if snapshot_id not in self._snapshot_cache:
            database, table = table_name.split(".", 1)
            self._snapshot_cache[snapshot_id] = self.staging.read_snapshot_table_manifest(snapshot_id, database, table)
        return self._snapshot_cache[snapshot_id]

    def _step_files(self, step: TableStep) -> tuple[list[tuple[str, StagedFile]], tuple[Any, ...]]:
        """The step's staged files (Spark path, file) after checking their checksums, and the schemas."""
        if isinstance(step, ApplyWindow):  # checksums of this table's files only, once per window
            window_id = step.manifest.window_id
            if window_id not in self._verified_window_files:
                self.staging.verify_files(dataclasses.replace(step.manifest, files=step.files))
                self._verified_window_files[window_id] = self.staging.spark_files(step.manifest, step.files)
            return self._verified_window_files[window_id], step.manifest.schemas
        files: list[tuple[str, StagedFile]] = []
        schemas: list[Any] = []
        for chunk in step.snapshot.chunks[step.first_chunk : step.end_chunk]:
            manifest = self.staging.read_chunk_manifest(chunk)
            if manifest is None:
                raise CorruptStagingError(
                    f"chunk manifest {chunk['manifest']} of snapshot {step.snapshot.snapshot_id} is missing; "
                    f"re-snapshot {self.table_name}"
                )
            self.staging.verify_files(manifest)
            files += self.staging.spark_files(manifest)
            schemas += manifest.schemas
        return files, tuple(schemas)

    def _key_columns(
        self, files: Sequence[StagedFile], schemas: Sequence[Any], final: SchemaVersionInfo | None
    ) -> list[str]:
        """The columns the step's rows merge on: the final version's primary key; else the one of the
        version the newest staged rows have (a key dropped in the window: the rows after it wait for a
        rebuild); else [] for a table without a key, whose rows are a multiset (:mod:`.multiset`)."""
        if final is not None and final.primary_key:
            return list(final.primary_key)
        versions = {s.schema_version: s for s in schemas if f"{s.database}.{s.table}" == self.table_name}
        newest = max((f for f in files if f.rows), key=lambda f: f.last_seq, default=None)
        if newest is not None and newest.schema_version in versions:
            return list(versions[newest.schema_version].primary_key)
        return []

    def _window_changes(
        self, step: ApplyWindow, final: SchemaVersionInfo | None, target: str | None = None
    ) -> tuple[WindowTableChanges, dict[int, str]]:
        """The window's schema events replayed on ``target`` (default: the table's target), and the final
        column id -> name map."""
        target = target or self.target
        final_ids = {
            int(column["column_id"]): str(column["name"])
            for column in (final.columns if final is not None else ())
            if column.get("column_id") is not None
        }
        events = list(step.events)
        if step.truncate_seq is not None:
            database, table = self.table_name.split(".", 1)
            events.append(SchemaEvent(database, table, step.truncate_seq, "", TRUNCATED))
        target_columns = [name for name, _ in self._columns(target)] if self._exists(target) else None
        changes = plan_window_changes(
            target_columns, events, final_ids, drop_dropped_columns=self.config.drop_dropped_columns
        )
        return changes, final_ids

    def _source(self, step: TableStep) -> _StepSource:
        """The step's rows (one per key: the last change), the key columns, the staged files, the staged
        rows as read (every change that counts; None when there are none) and the window's schema changes."""
        from pyspark.sql import functions as F

        files, schemas = self._step_files(step)
        table_schemas = [s for s in schemas if f"{s.database}.{s.table}" == self.table_name]
        final = final_version(step, table_schemas) if isinstance(step, ApplyWindow) else None
        changes: WindowTableChanges | None = None
        renames: dict[int, dict[str, str]] | None = None
        if isinstance(step, ApplyWindow):
            changes, final_ids = self._window_changes(step, final)
            if final_ids:
                renames = window_version_renames(table_schemas, [f for _, f in files], final_ids, changes.reset_seq)
        # A table replaced by nothing (dropped, renamed away) needs no key: nothing is merged.
        gone = changes is not None and changes.reset_seq is not None and not files
        staged_files = [f for _, f in files]
        keys = [] if gone else self._key_columns(staged_files, schemas, final)
        paths: dict[int, list[str]] = {}
        for path, staged in files:
            paths.setdefault(staged.schema_version, []).append(path)
        frame = read_versions(self.spark, paths, renames)
        if frame is None:  # a TRUNCATE alone, or a chunk of a table dropped after planning: no rows
            if not self._exists(self.target):
                raise TerminalCdcError(
                    f"{self.table_name}: {step.describe()} stages no rows and no schema, and the target table "
                    f"{self.target} does not exist; if the table was dropped in MySQL, exclude it from the pipeline"
                )
            empty = self.spark.table(self.target).limit(0).withColumn(OP_COLUMN, F.lit("d"))
            return _StepSource(empty, keys, staged_files, None, changes)
        if changes is not None:
            frame = window_rows(frame, changes)
        rows = frame
        if not keys:  # a multiset: every staged row counts (the MERGE nets them per row identity)
            self._require_whole_images(step, staged_files)
        elif isinstance(step, ApplyWindow) and any(f.partial_rows for f in staged_files):
            json_columns = json_document_columns(final, frame.columns)
            frame = fold_partial_rows(frame, keys, json_columns)
            if json_columns and self._exists(self.target):
                frame = apply_pending_json_diffs(frame, self.spark.table(self.target), keys, json_columns)
        elif isinstance(step, ApplyWindow):
            frame = last_change_per_key(frame, keys)
        return _StepSource(frame, keys, staged_files, rows, changes)

    # -- target -------------------------------------------------------------------------------------

    def _iceberg_table(self, name: str | None = None) -> Any:
        """The Iceberg table ``name`` (default: the target) as the catalog has it cached (pinned)."""
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, name or self.target)

    def _target_rows(self) -> int:
        """Records in the data files of the target's current snapshot (deleted rows included), as the
        catalog's cached (pinned) table has it; 0 before its first commit."""
        snapshot = self._iceberg_table().currentSnapshot()
        return (
            0
            if snapshot is None
            else int(snapshot_summary(self.spark.sparkContext._jvm, snapshot)[0].get("total-records", 0))
        )

    def _exists(self, name: str) -> bool:
        """Whether the catalog has the table; asked once per table that exists (a step asks up to six
        times), every time for one that does not yet."""
        if name in self._existing_tables:
            return True
        if not table_exists(self.spark, name):
            return False
        self._existing_tables.add(name)
        return True

    def read_state(self, target: str | None = None) -> AppliedState | None:
        """Refresh the cached table, then read the newest CDC state from its current history."""
        return read_applied_state(self.spark, target or self.target)[1]

    def _columns(self, name: str) -> list[tuple[str, str]]:
        return [(f.name, f.dataType.simpleString()) for f in self.spark.table(name).schema.fields]

    @staticmethod
    def _view_name(prefix: str) -> str:
        """A new temporary view's name: the job's table threads share the session's temporary views, and
        a view must never be another table's or another step's."""
        return f"{prefix}_{uuid.uuid4().hex}"

    @staticmethod
    def _replaces_rest(step: TableStep, staged: _StepSource) -> bool:
        """Whether the step's rows replace every row of the target it does not change (a snapshot
        re-load, a TRUNCATE or a re-created table in the window)."""
        changes = staged.changes
        return (isinstance(step, LoadSnapshotChunks) and step.replace) or (
            changes is not None and changes.replaces_rows
        )

    def _table_properties(self) -> str:
        """The ``TBLPROPERTIES`` of a target the apply creates."""
        return ", ".join(f"'{k}' = '{v}'" for k, v in {**TARGET_PROPERTIES, "cdc.source": self.table_name}.items())

    def _ensure_target(
        self,
        name: str,
        source: DataFrame,
        *,
        changelog: bool,
        step: TableStep,
        alterations: Sequence[ColumnAlteration] = (),
    ) -> None:
        """Create the table from the source's columns, or evolve its schema to take them: first the
        renames and drops of the window's schema events, then added columns and widened types."""
        columns = [
            (f.name, f.dataType.simpleString())
            for f in source.schema.fields
            if f.name != PARTIAL_COLUMN and (changelog or f.name != OP_COLUMN)
        ]
        if changelog:
            columns.append((CHANGELOG_WINDOW_COLUMN, "int"))
        if not self._exists(name):
            with _NAMESPACE_CREATION:  # two tables of a new database, applied at the same time
                namespace = ".".join(quote(part) for part in identifier_parts(name)[:-1])
                self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
            properties = self._table_properties()
            if changelog:
                partition = f" PARTITIONED BY ({quote(CHANGELOG_WINDOW_COLUMN)})"
            else:
                partition = partition_clause(self._configured_partitioning(lambda: dict(columns)) or ())
            ddl = ", ".join(f"{quote(c)} {t}" for c, t in columns)
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {name} ({ddl}) USING iceberg{partition} TBLPROPERTIES ({properties})"
            )
            log.info("created %s", name)
            return
        final_names = {c.lower() for c, _ in columns}
        kept: set[str] = set()
        for alteration in alterations:
            if alteration.action == "drop" and not self._droppable(name, alteration.column, step, final_names, kept):
                continue
            statement = alteration.sql(name)
            log.info("%s: %s", self.table_name, statement)
            if alteration.changes_case_only:  # one schema commit, as the statement would have made
                self._iceberg_table(name).updateSchema().renameColumn(alteration.column, alteration.new_name).commit()
            else:
                self.spark.sql(statement)
            self.report.schema_changes.append(statement)
        try:
            changes = plan_schema_changes(self._columns(name), columns, self.config.drop_dropped_columns)
        except UnsupportedSchemaChangeError as exc:
            raise UnsupportedSchemaChangeError(
                f"{self.table_name} -> {name}: {exc}; {self._ddl_context(step)}"
            ) from None
        for change in changes:
            if change.action == "drop" and not self._droppable(name, change.column, step, final_names, kept):
                continue
            statement = change.sql(name)
            log.info("%s: %s", self.table_name, statement)
            self.spark.sql(statement)
            self.report.schema_changes.append(statement)
        wanted = None if changelog else self._configured_partitioning(lambda: dict(self._columns(name)))
        if wanted is not None:
            for statement in evolution_statements(name, self._partition_fields(name), wanted):
                log.info("%s: %s", self.table_name, statement)
                self.spark.sql(statement)
                self.report.schema_changes.append(statement)

    def _droppable(self, name: str, column: str, step: TableStep, final_names: set[str], kept: set[str]) -> bool:
        """Whether the target ``name`` may lose ``column``. Not when a partition spec of the target, the
        current one or any earlier one, takes values from it: Iceberg refuses to drop a source column of
        the current spec, and once a source column of an earlier spec is dropped, every later MERGE or
        DELETE into the table fails (also when a replace left no file with that spec: Iceberg keeps every
        spec a table had; seen with Iceberg 1.10). Such a column is kept, NULL from then on (added to
        ``kept`` and reported once), unless the step needs its name for another column (one of
        ``final_names``, lower case); that, and a column the table's sort order names (set by hand:
        the apply sets none; Iceberg refuses to drop it), raise :class:`UnsupportedSchemaChangeError`."""
        if column.lower() in kept:
            return False
        table = self._iceberg_table(name)
        field = table.schema().caseInsensitiveFindField(column)
        if field is None:
            return True
        source_id = int(field.fieldId())
        fields = _fields_by_source(table).get(str(field.name()), "")
        if fields and column.lower() not in final_names:
            kept.add(column.lower())
            self._report_kept(name, column, fields)
            return False
        held = []
        if fields:
            held.append(
                f"a partition spec of the target ({fields}) takes values from it (Iceberg keeps every spec a table "
                f"had, and cannot drop such a column and still merge into the table), but {step.describe()} "
                "needs its name for another column"
            )
        if any(int(f.sourceId()) == source_id for f in table.sortOrder().fields()):
            held.append(
                f"the target's sort order names it, which Iceberg refuses to drop (ALTER TABLE {name} WRITE "
                "UNORDERED, or an order without it, lets the next run drop it)"
            )
        if not held:
            return True
        raise UnsupportedSchemaChangeError(
            f"{self.table_name} -> {name}: column {column!r} cannot be dropped from the target: {'; '.join(held)}. "
            f"No row of {step.describe()} was applied to the table; {self._ddl_context(step)}"
        )

    def _configured_partitioning(
        self, column_types: Callable[[], Mapping[str, str]]
    ) -> tuple[PartitionField, ...] | None:
        """The target's partition fields as the pipeline's setting gives them (checked against the
        target's columns, asked for only then), or None when the setting does not name the table."""
        try:
            wanted = configured_fields(self.config.partitioning, self.table_name)
            if wanted is not None:
                require_columns(self.table_name, wanted, column_types())
        except ConfigurationError as exc:
            raise ConfigurationError(f"pipeline {self.config.pipeline!r}: {exc}") from None
        return wanted

    def _partition_fields(self, name: str) -> list[PartitionField]:
        """The current partition fields of the target ``name`` (dropped ones left out)."""
        table = self._iceberg_table(name)
        schema = table.schema()
        fields = [
            field_of_iceberg(str(f.transform().toString()), str(schema.findColumnName(f.sourceId())))
            for f in table.spec().fields()
        ]
        return [f for f in fields if f is not None]

    def _ddl_context(self, step: TableStep) -> str:
        """The DDL statements of the step's window that name the table, with their GTIDs."""
        if not isinstance(step, ApplyWindow):
            return f"found while loading {step.describe()}; re-snapshot into a new target table"
        database, table = self.table_name.split(".", 1)
        statements = []
        for ddl in step.manifest.ddl:
            targets = ddl_targets(ddl.statement, ddl.database) or ()
            if any(t.database == database and t.table in (None, table) for t in targets):
                statements.append(f"{ddl.statement!r} (GTID {ddl.gtid})")
        where = f"window {step.manifest.window_id} of pipeline {self.config.pipeline!r}"
        if statements:
            return (
                f"caused by {'; '.join(statements)} in {where}. The table is stopped, the other tables go on: "
                "re-create the target (drop it and re-snapshot the table) or change the column back in MySQL"
            )
        return f"in {where}. The table is stopped, the other tables go on: drop the target and re-snapshot the table"

    def _merge(self, step: TableStep, staged: _StepSource, properties: dict[str, str], changed_rows: int = 0) -> None:
        """MERGE the step's rows (one per key) into the target in one commit carrying ``properties``.
        Back-filled columns of rows the window does not change get their value in the same commit; the
        staged rows (``changed_rows`` of them) give the keys of a :class:`KeyFilter`."""
        source, keys, changes = staged.frame, staged.keys, staged.rows
        target_columns = self._columns(self.target)
        source_names = {f.name.lower(): f.name for f in source.schema.fields}

        window_changes = staged.changes
        replace_rest = self._replaces_rest(step, staged)
        backfills = () if window_changes is None or replace_rest else window_changes.backfills
        temporal = temporal_keys(source, keys)
        on = key_match(keys, temporal)
        args: dict[str, Any] = {}
        # With NOT MATCHED BY SOURCE the join is a full outer join: every target row takes part anyway.
        full_outer = replace_rest or bool(backfills)
        types = {c.lower(): t for c, t in target_columns}
        if changes is not None and not full_outer:
            on += self._target_narrowing(changes, keys, types, source_names, temporal, changed_rows, args)
        # Only a step with partial row images needs the target's own values (the CASE of
        # merge_update_value): without them the MERGE reads no more of the target than its keys.
        partial = PARTIAL_COLUMN in source_names and any(f.partial_rows for f in staged.files)
        backfilled = backfill_expressions(backfills, types, args)
        updates = ", ".join(
            f"t.{quote(c)} = {merge_update_value(c, partial, backfilled.get(c.lower()))}" for c, _ in target_columns
        )
        # A partial row whose key the target lacks has nothing to complete it: it is not inserted.
        complete = f" AND s.{PARTIAL_COLUMN} IS NULL" if partial else ""
        untouched = ""
        if replace_rest:
            untouched = " WHEN NOT MATCHED BY SOURCE THEN DELETE"
        elif backfills:
            settings = [f"t.{quote(b.column)} = {backfilled[b.column.lower()]}" for b in backfills]
            untouched = f" WHEN NOT MATCHED BY SOURCE THEN UPDATE SET {', '.join(settings)}"
        view = self._view_name("cdc_apply")
        statement = merge_statement(self.target, view, on, [c for c, _ in target_columns], updates, complete, untouched)
        projected = [_as_target_column(source_names, c, t) for c, t in target_columns]
        extra = [OP_COLUMN, *([PARTIAL_COLUMN] if partial else [])]
        source.selectExpr(*projected, *extra).createOrReplaceTempView(view)
        try:
            with_commit_properties(self.spark, properties, lambda: self.spark.sql(statement, args=args or None))
        finally:
            self.spark.catalog.dropTempView(view)

    # -- tables without a key ---------------------------------------------------------------------

    def _require_whole_images(self, step: TableStep, files: Sequence[StagedFile]) -> None:
        """A multiset step merges whole row images only: inserts, deletes and snapshot reads."""
        odd = sorted({op for f in files for op, count in f.op_counts.items() if count and op not in ("c", "d", "r")})
        partial = sum(f.partial_rows for f in files)
        if odd or partial:
            what = f"{partial} partial row images" if partial else f"changes staged as {odd}"
            raise TerminalCdcError(
                f"{self.table_name} has no primary key in {step.describe()} of pipeline {self.config.pipeline!r}, "
                f"but the step holds {what}, which a table without a key cannot be merged with. The table is "
                f"stopped, the other tables go on: re-snapshot it (resnapshot=[{self.table_name!r}])"
            )

    def _multiset_views(
        self,
        staged: _StepSource,
        target_columns: Sequence[tuple[str, str]],
        replace_rest: bool,
        args: dict[str, Any],
    ) -> tuple[str, str, dict[str, str]]:
        """Temporary views of the step's rows (as the target's columns, plus ``_cdc_op``) and of the
        target, and the identity overrides: a column the window adds holds, in every row the target
        has, the value MySQL gave it (``args`` gets the values)."""
        names = {f.name.lower(): f.name for f in staged.frame.schema.fields}
        projected = [_as_target_column(names, c, t) for c, t in target_columns]
        view, target_view = self._view_name("cdc_rows"), self._view_name("cdc_target")
        staged.frame.selectExpr(*projected, OP_COLUMN).createOrReplaceTempView(view)
        self.spark.table(self.target).createOrReplaceTempView(target_view)
        changes = staged.changes
        backfills = () if changes is None or replace_rest else changes.backfills
        overrides = backfill_expressions(backfills, {c.lower(): t for c, t in target_columns}, args)
        return view, target_view, overrides

    def _multiset_shortfalls(self, step: TableStep, sql: MultisetSql, candidates: str) -> None:
        """Raise :class:`TargetDivergedError` when the target cannot give up the copies the step takes
        (``candidates``: the view of the target's candidate copies)."""
        found = self.spark.sql(sql.shortfalls(candidates)).limit(3).collect()
        if not found:
            return
        detail = "; ".join(
            f"{row['needed']} copies of a row deleted (last in GTID {row['gtid']}), the target holds "
            + (f"{row['available']}" if not row["ambiguous"] else f"{row['available']} it cannot tell apart")
            for row in found
        )
        where = step.manifest.window_id if isinstance(step, ApplyWindow) else step.describe()
        raise TargetDivergedError(
            f"{self.table_name} (pipeline {self.config.pipeline!r}, window {where}): {detail}. The target "
            f"{self.target} no longer equals MySQL before this window, so nothing of the window was applied to "
            f"it. The table is stopped, the other tables go on: re-snapshot it (resnapshot=[{self.table_name!r}])"
        )

    def _multiset_replacement(self, step: TableStep, staged: _StepSource) -> DataFrame:
        """The rows a table without a key holds after a step that replaces it (schema and rows): the
        copies the step adds, as the staged columns."""
        frame = staged.frame.drop(PARTIAL_COLUMN)
        columns = [f.name for f in frame.schema.fields if f.name != OP_COLUMN]
        identity = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields if f.name != OP_COLUMN]
        view = self._view_name("cdc_rows")
        frame.createOrReplaceTempView(view)
        sql = MultisetSql(identity_columns(identity, columns), view, "")
        try:
            if any(f.op_counts.get("d") for f in staged.files):
                self._require_no_deficit(step, sql, "after the table was created again")
            return self.spark.sql(sql.inserts(columns))  # analysed now: the view may go
        finally:
            self.spark.catalog.dropTempView(view)

    def _require_no_deficit(self, step: TableStep, sql: MultisetSql, since: str) -> None:
        """Raise :class:`TargetDivergedError` when the step takes away a row it did not add ``since``."""
        deficits = self.spark.sql(sql.deficits()).limit(1).collect()
        if deficits:
            raise TargetDivergedError(
                f"{self.table_name} (pipeline {self.config.pipeline!r}, {step.describe()}): a row deleted in GTID "
                f"{deficits[0]['__cdc_gtid']} was never inserted {since}; the staged rows do not match MySQL. The "
                f"table is stopped, the other tables go on: re-snapshot it (resnapshot=[{self.table_name!r}])"
            )

    def _merge_multiset(self, step: TableStep, staged: _StepSource, properties: dict[str, str]) -> None:
        """One MERGE that adds and takes away copies of rows of a table without a key (see
        :mod:`.multiset`), in one commit carrying ``properties``: the window's other effects on rows it
        does not touch (a TRUNCATE's or a snapshot's replacement, columns it adds) go into the same
        commit."""
        args: dict[str, Any] = {}
        target_columns = self._columns(self.target)
        replace_rest = self._replaces_rest(step, staged)
        view, target_view, overrides = self._multiset_views(staged, target_columns, replace_rest, args)
        sql = MultisetSql(identity_columns(target_columns, staged.frame.columns), view, target_view)
        columns = [c for c, _ in target_columns]
        takes_away = any(f.op_counts.get("d") for f in staged.files)
        if takes_away and replace_rest:
            self._require_no_deficit(step, sql, "after the table was emptied")
            takes_away = False
        untouched = ""
        if replace_rest:
            untouched = " WHEN NOT MATCHED BY SOURCE THEN DELETE"
        elif overrides:
            settings = ", ".join(f"t.{quote(c)} = {overrides[c.lower()]}" for c in columns if c.lower() in overrides)
            untouched = f" WHEN NOT MATCHED BY SOURCE THEN UPDATE SET {settings}"
        names = ", ".join(quote(c) for c in columns)
        values = ", ".join(f"s.{quote(c)}" for c in columns)
        source, on = sql.inserts(columns), sql.copy_match()
        candidates_view = f"{view}_candidates"
        candidates: DataFrame | None = None
        try:
            if takes_away:
                # The target's copies of the touched rows, read once: for the check and for the MERGE.
                candidates = self.spark.sql(sql.candidates(overrides), args=args or None).cache()
                candidates.createOrReplaceTempView(candidates_view)
                self._multiset_shortfalls(step, sql, candidates_view)
                source = f"{source} UNION ALL {sql.deletes(columns, candidates_view)}"
                if not untouched:  # only the copies taken away match: the target's scan keeps their _cdc_seq
                    on += self._copy_filter(sql.deletes(["_cdc_seq"], candidates_view), args)
            adds = any(f.op_counts.get("c") or f.op_counts.get("r") for f in staged.files)
            if adds and not takes_away and not untouched:  # only new copies: an append, the target is not read
                statement = f"INSERT INTO {self.target} ({names}) SELECT {names} FROM ({source})"
            else:
                statement = (
                    f"MERGE INTO {self.target} t USING ({source}) s ON {on} "
                    "WHEN MATCHED THEN DELETE "
                    f"WHEN NOT MATCHED AND s.{OP_COLUMN} = 'c' THEN INSERT ({names}) VALUES ({values})" + untouched
                )
            with_commit_properties(self.spark, properties, lambda: self.spark.sql(statement, args=args or None))
        finally:
            if candidates is not None:
                self.spark.catalog.dropTempView(candidates_view)
                candidates.unpersist()
            self.spark.catalog.dropTempView(view)
            self.spark.catalog.dropTempView(target_view)

    def _copy_filter(self, taken: str, args: dict[str, Any]) -> str:
        """`` AND`` a :class:`KeyFilter` on the target's ``_cdc_seq`` that every copy ``taken`` (a query of
        their ``_cdc_seq``) passes, so the MERGE shuffles those copies, not the whole target; "" when
        they are too many for a filter (``args`` gets its parameter)."""
        from pyspark.sql import functions as F

        copies = self.spark.sql(taken).select(F.xxhash64(F.col("_cdc_seq")))
        key_filter = KeyFilter.of_hashes({int(row[0]) for row in copies.collect()})
        if key_filter is None:
            return ""
        args[KeyFilter.PARAMETER] = key_filter.parameter()
        return f" AND ({key_filter.condition('t', ['_cdc_seq'])})"

    def _replace(self, step: TableStep, source: DataFrame, properties: dict[str, str]) -> None:
        """Replace the target, schema and rows, by the step's rows in one commit (``CREATE OR REPLACE
        TABLE ... AS SELECT``): readers see the old table or the new one, never a mix."""
        columns = [c for c in source.columns if c not in (OP_COLUMN, PARTIAL_COLUMN)]
        types = {f.name: f.dataType.simpleString() for f in source.schema.fields if f.name in columns}
        wanted = self._configured_partitioning(lambda: types)
        if wanted is None:  # the setting does not name the table: the new table keeps the old one's fields
            wanted = fields_that_fit(self._partition_fields(self.target), types)
        kept = self._partition_sources_to_keep(step, types)
        view = self._view_name("cdc_replace")
        projection = [quote(c) for c in columns] + [f"CAST(NULL AS {t}) AS {quote(c)}" for c, t, _ in kept]
        source.where(f"{OP_COLUMN} != 'd'").selectExpr(*projection).createOrReplaceTempView(view)
        statement = (
            f"CREATE OR REPLACE TABLE {self.target} USING iceberg{partition_clause(wanted)} "
            f"TBLPROPERTIES ({self._table_properties()}) AS SELECT * FROM {view}"
        )
        log.info("%s: %s replaces %s", self.table_name, step.describe(), self.target)
        try:
            with_commit_properties(self.spark, properties, lambda: self.spark.sql(statement))
        finally:
            self.spark.catalog.dropTempView(view)
        self.report.schema_changes.append(f"replaced {self.target} ({step.describe()})")
        for column, _, fields in kept:
            self._report_kept(self.target, column, fields)

    def _report_kept(self, name: str, column: str, fields: str) -> None:
        """Log and report that the target ``name`` keeps ``column`` (a source of partition ``fields``)."""
        note = (
            f"kept {quote(column)} in {name} (NULL from now on): a partition spec the target has had ({fields}) "
            "takes values from it, and Iceberg cannot drop such a column and still merge into the table"
        )
        log.warning("%s: %s", self.table_name, note)
        self.report.schema_changes.append(note)

    def _partition_sources_to_keep(self, step: TableStep, types: Mapping[str, str]) -> list[tuple[str, str, str]]:
        """The target's columns (name, Spark type, fields) that a partition spec it has had takes values from and
        the rows replacing it lack: the replaced table keeps them (NULL), since Iceberg keeps every spec
        a table had and a table without one's source column takes no MERGE. Raise
        :class:`UnsupportedSchemaChangeError` for such a column the rows have under another type (with
        a type the spec cannot take, the replace fails in Iceberg; other types are not tried)."""
        target_types = dict(self._columns(self.target))
        new_types = {c.lower(): t for c, t in types.items()}
        kept: list[tuple[str, str, str]] = []
        for column, fields in sorted(_fields_by_source(self._iceberg_table()).items()):
            old, new = target_types.get(column), new_types.get(column.lower())
            if old is None:  # a nested field: the apply's tables have none
                continue
            if new is None:
                kept.append((column, old, fields))
            elif new != old:
                raise UnsupportedSchemaChangeError(
                    f"{self.table_name} -> {self.target}: {step.describe()} replaces the target, but column "
                    f"{column!r}, which a partition spec the target had takes values from "
                    f"({fields}), comes back as {new} instead of {old}: Iceberg keeps every "
                    "spec a table had, and the apply does not give a spec's source column another type (with a type "
                    f"the spec cannot take, the replace fails in Iceberg). Nothing of {step.describe()} was applied "
                    "to the table. The table is stopped, the other tables go on: drop the target "
                    f"({self.target}) and re-snapshot the table (resnapshot=[{self.table_name!r}])"
                )
        return kept

    def _key_filter(self, keys: DataFrame, bounded: bool = False) -> tuple[KeyFilter | None, KeyBounds | None]:
        """The :class:`KeyFilter` of ``keys`` (the key columns of every staged change, as the target's
        types; at most :data:`KEY_FILTER_MAX_ROWS` rows), or None when they hold more than
        :data:`KEY_FILTER_MAX_KEYS` distinct keys; and, when ``bounded``, the lowest and highest value
        of the first (integer) key column, found by the same Spark job."""
        from pyspark.sql import functions as F

        hashed = F.xxhash64(*[F.col(quote(c)) for c in keys.columns])
        rows = keys.select(hashed, *([F.col(quote(keys.columns[0]))] if bounded else [])).collect()
        values = [int(row[1]) for row in rows if row[1] is not None] if bounded else []
        key_filter = KeyFilter.of_hashes({int(row[0]) for row in rows})  # one stage: no shuffle
        return key_filter, ((min(values), max(values)) if values else None)

    def _target_narrowing(
        self,
        changes: DataFrame,
        keys: Sequence[str],
        types: Mapping[str, str],
        source_names: Mapping[str, str],
        temporal: Sequence[str],
        changed_rows: int,
        args: dict[str, Any],
    ) -> str:
        """Conditions on the target alone for the MERGE's ON clause (each implied by the key match, so
        none changes the result): the staged keys' range, which lets Iceberg skip data files, and the
        :class:`KeyFilter`, which keeps most other rows out of the join's shuffle (its parameter goes
        into ``args``). "" where neither pays off."""
        key_types = [types.get(k.lower(), "") for k in keys]
        target_rows = self._target_rows()
        narrowing = ""
        ranged = key_range_applies(key_types, target_rows) and keys[0].lower() in source_names
        bounds: KeyBounds | None = None
        filtered = key_filter_applies(key_types) and all(k.lower() in source_names for k in keys)
        if filtered and key_filter_pays_off(target_rows, changed_rows):
            key_columns = [_as_target_column(source_names, k, t) for k, t in zip(keys, key_types, strict=True)]
            key_filter, bounds = self._key_filter(changes.selectExpr(*key_columns), bounded=ranged)
            if key_filter is not None:
                condition = key_filter.condition("t", keys)
                if temporal:  # an invalid date's key is staged as NULL: such rows skip the filter
                    condition = " OR ".join([condition, *(f"t.{quote(k)} IS NULL" for k in temporal)])
                narrowing += f" AND ({condition})"
                args[KeyFilter.PARAMETER] = key_filter.parameter()
        elif ranged:  # a snapshot's batch, or a window too large for a key filter
            bounds = self._key_bounds(changes.selectExpr(_as_target_column(source_names, keys[0], key_types[0])))
        if ranged and bounds is not None:
            narrowing += f" AND {key_range_condition('t', keys[0], *bounds)}"
        return narrowing

    def _key_bounds(self, key: DataFrame) -> KeyBounds | None:
        """The lowest and highest value of ``key`` (one integer column, as the target's type), or None
        when it holds none."""
        from pyspark.sql import functions as F

        column = F.col(quote(key.columns[0]))
        lowest, highest = key.agg(F.min(column), F.max(column)).collect()[0]
        return None if lowest is None else (int(lowest), int(highest))

    # -- steps --------------------------------------------------------------------------------------

    def run_step(self, step: TableStep) -> None:
        """Evolve the schema, check the state is still ``step.before``, then MERGE with ``step.after``
        (or replace the table in one commit: a table reset by DROP/CREATE, a re-load of a snapshot)."""
        events = step.events if isinstance(step, ApplyWindow) else ()
        nothing_staged = isinstance(step, ApplyWindow) and not step.files and not self._exists(self.target)
        if nothing_staged and (not events or any(event.kind == RESET for event in events)):
            log.info("%s: %s stages nothing for a table without target", self.table_name, step.describe())
            return  # created and gone again in the window, or renamed away: nothing to hold
        if (
            nothing_staged
            and isinstance(step, ApplyWindow)
            and waits_without_target(self.config.pipeline, step.before, step.files, events)
        ):
            # Created in the window by a statement the capture cannot follow: the metadata store holds its
            # rebuild request, and its first snapshot creates the target.
            log.info(
                "%s: %s leaves the table without target waiting for its snapshot", self.table_name, step.describe()
            )
            self.report.rebuild = step.after.rebuild_pending
            return
        source = self._source(step)
        changes = source.changes
        replaces_table = self._exists(self.target) and (
            (changes is not None and changes.reset_seq is not None)
            or (
                isinstance(step, LoadSnapshotChunks)
                and step.replace
                and step.before != AppliedState(step.before.pipeline)
            )
        )
        if not replaces_table:
            alterations = changes.alterations if changes is not None else ()
            self._ensure_target(self.target, source.frame, changelog=False, step=step, alterations=alterations)
        state = self.read_state()
        if (state or AppliedState(self.config.pipeline)) != step.before:
            raise StaleApplyStateError(f"{self.target} moved to {state} while {step.describe()} was prepared")
        if replaces_table:
            frame = source.frame if source.keys else self._multiset_replacement(step, source)
            self._replace(step, frame, step.after.to_summary())
        elif not source.keys:
            self._merge_multiset(step, source, step.after.to_summary())
        else:
            self._merge(step, source, step.after.to_summary(), sum(f.rows for f in source.files))
        for staged in source.files:  # staged rows by op (before keeping the last change per key)
            for op, count in staged.op_counts.items():
                if count:
                    self.report.rows[op] = self.report.rows.get(op, 0) + count
        if changes is not None:
            self.report.schema_changes += [describe_event(event) for event in changes.applied_events]
            if changes.rebuild is not None:
                self.report.rebuild = step.after.rebuild_pending
        if isinstance(step, ApplyWindow):
            self.report.windows_applied.append(step.manifest.window_id)
        else:
            self.report.snapshot_chunks_loaded += step.end_chunk - step.first_chunk
        log.info("%s: %s merged into %s", self.table_name, step.describe(), self.target)

    def apply(self) -> TableReport:
        """Plan and apply the table's steps, re-planning after commits lost to a concurrent writer."""
        started = time.monotonic()
        windows = self.config.window_ids
        try:
            for attempt in range(MAX_CONFLICT_RETRIES + 1):
                state = self.read_state() if self._exists(self.target) else None
                steps = plan_table(
                    self.table_name,
                    self.config.pipeline,
                    state,
                    windows,
                    self.read_window,
                    self.read_snapshot,
                    self.config.chunks_per_commit,
                )
                try:
                    for step in steps:
                        self.run_step(step)
                        self.report.status = "applied"
                    break
                except Exception as exc:
                    if (
                        not (isinstance(exc, StaleApplyStateError) or is_commit_conflict(exc))
                        or attempt == MAX_CONFLICT_RETRIES
                    ):
                        raise
                    self.report.conflicts_retried += 1
                    log.warning("%s: a concurrent commit won (%s); re-reading its state", self.target, exc)
            if self.config.keeps_history(self.table_name):
                self._write_changelog(windows)
            final = self.read_state() if self._exists(self.target) else None
            self.report.state = asdict(final) if final else {}
            # Whether this run or an earlier one left the table waiting: a retried task says so again. A
            # table without target (the snapshot left it out) waits as the last window's manifest says.
            self.report.rebuild = final.rebuild_pending if final else self.report.rebuild or self._waiting_in_window()
            if self.report.rebuild.startswith(f"{TableWithoutKeyError.__name__}: "):
                raise TableWithoutKeyError(
                    f"{self.table_name} of pipeline {self.config.pipeline!r} stops at "
                    f"{self.report.rebuild.split(': ', 1)[1]}"
                )
            if self.report.rebuild and self.config.schema_change_policy == SCHEMA_CHANGE_STOP:
                raise RebuildPendingError(
                    f"{self.table_name} of pipeline {self.config.pipeline!r} stops at {self.report.rebuild}: its "
                    "target cannot follow that change. "
                    f"Re-snapshot it (trigger a run with resnapshot=[{self.table_name!r}]), or set the pipeline's "
                    "schema_change_policy to 'rebuild' to have the next run do it; the other tables go on"
                )
        except MySqlCdcError as exc:
            self.report.status, self.report.error = "failed", str(exc)
            self.report.error_class = type(exc).__name__
        except Exception as exc:  # a Spark or Iceberg failure of this table: reported, the others go on
            log.warning("%s: the apply failed", self.table_name, exc_info=True)
            if java_stack := getattr(exc, "stackTrace", None):  # PySpark keeps the JVM's stack apart
                log.warning("%s: where the JVM failed:\n%s", self.table_name, mask_userinfo(str(java_stack)))
            self.report.status, self.report.error = "failed", f"{type(exc).__name__}: {java_error_summary(exc)}"
            self.report.error_class = type(exc).__name__
        self.report.seconds = round(time.monotonic() - started, 3)
        return self.report

    def _write_changelog(self, windows: list[int]) -> None:
        """Append the windows' change rows to the changelog table, replacing each window's partition."""
        from pyspark.sql import functions as F

        changelog = self.config.target(self.table_name, self.config.history_suffix)
        state = self.read_state(changelog) if self._exists(changelog) else None
        steps = plan_table(
            self.table_name,
            self.config.pipeline,
            state,
            windows,
            self.read_window,
            self.read_snapshot,
            load_snapshots=False,
        )
        for step in steps:
            assert isinstance(step, ApplyWindow)
            files, schemas = self._step_files(step)
            table_schemas = [s for s in schemas if f"{s.database}.{s.table}" == self.table_name]
            final = final_version(step, table_schemas)
            changes, final_ids = self._window_changes(step, final, changelog)
            renames = None
            if final_ids:
                renames = window_version_renames(table_schemas, [f for _, f in files], final_ids, changes.reset_seq)
            paths: dict[int, list[str]] = {}
            for path, staged in files:
                paths.setdefault(staged.schema_version, []).append(path)
            frame = read_versions(self.spark, paths, renames)
            if frame is None:
                continue
            frame = frame.withColumn(CHANGELOG_WINDOW_COLUMN, F.lit(step.manifest.window_id).cast("int"))
            self._ensure_target(
                changelog,
                frame.drop(CHANGELOG_WINDOW_COLUMN),
                changelog=True,
                step=step,
                alterations=changes.alterations,
            )
            columns = [c for c, _ in self._columns(changelog)]
            source_names = {f.name.lower() for f in frame.schema.fields}
            frame = frame.selectExpr(
                *[quote(c) if c.lower() in source_names else f"NULL AS {quote(c)}" for c in columns]
            )
            writer = frame.writeTo(changelog)
            for key, value in step.after.to_summary().items():
                writer = writer.option(f"snapshot-property.{key}", value)
            writer.overwritePartitions()
            self.report.changelog_windows.append(step.manifest.window_id)
