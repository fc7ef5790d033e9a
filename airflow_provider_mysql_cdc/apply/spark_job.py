"""The Spark side of apply: MERGE staged snapshots and windows into Iceberg tables, exactly once.

Run by ``spark_apps/apply_changes.py`` (spark-submit); no Airflow import. For each table of the
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
import dataclasses
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec, TableReport
from airflow_provider_mysql_cdc.apply.plan import (
    AppliedState,
    ApplyWindow,
    KeyFilter,
    LoadSnapshotChunks,
    TableStep,
    key_filter_applies,
    key_filter_pays_off,
    plan_schema_changes,
    plan_table,
    quote,
    tables_in_windows,
)
from airflow_provider_mysql_cdc.apply.schema_alignment import (
    ColumnAlteration,
    WindowTableChanges,
    plan_window_changes,
    version_renames,
)
from airflow_provider_mysql_cdc.apply.staged_rows import (
    PARTIAL_COLUMN,
    apply_pending_json_diffs,
    fold_partial_rows,
    key_match,
    last_change_per_key,
    read_versions,
    sql_string,
    temporal_keys,
    window_rows,
)
from airflow_provider_mysql_cdc.core.ddl import ddl_targets
from airflow_provider_mysql_cdc.core.schema_events import (
    SCHEMA_CHANGE_STOP,
    TRUNCATED,
    SchemaEvent,
)
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
    TerminalCdcError,
    UnsupportedSchemaChangeError,
    WarehouseUnreachableError,
)
from airflow_provider_mysql_cdc.staging import Staging, read_text_from_uri, write_text_to_uri

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("airflow_provider_mysql_cdc.apply")

#: Properties of every target table the apply creates: merge-on-read row-level operations (a MERGE
#: writes new rows and position deletes for the changed keys only; it still scans the target's keys),
#: format v2, serializable validation.
TARGET_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.merge.isolation-level": "serializable",
    "write.parquet.compression-codec": "zstd",
    # Check the row group's size from the first row on (Iceberg's default waits for 100 rows): a task
    # writing rows of many MiB otherwise buffers 100 of them before its first check.
    "write.parquet.row-group-check-min-record-count": "1",
}
#: The staged column that only drives the MERGE (it is kept in changelog tables).
OP_COLUMN = "_cdc_op"
#: Changelog tables are partitioned by this column (the window id), so re-writing a window
#: replaces exactly its partition.
CHANGELOG_WINDOW_COLUMN = "_cdc_window_id"
#: How often a table is re-planned after a commit lost to a concurrent writer.
MAX_CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class _StepSource:
    """What one step merges into one table."""

    #: One row per key: its last change (snapshot chunks: every row).
    frame: DataFrame
    keys: list[str]
    files: list[StagedFile]
    #: Every staged change that counts (the key filter's keys); None when the step staged none.
    rows: DataFrame | None
    #: The window's schema changes (None for snapshot loads).
    changes: WindowTableChanges | None


def _final_version(step: ApplyWindow, table_schemas: Sequence[SchemaVersionInfo]) -> SchemaVersionInfo | None:
    """The table's schema version at the end of the window: the one its last schema event leaves, or
    the one of its last staged change."""
    by_version = {info.schema_version: info for info in table_schemas}
    candidates: list[tuple[int, int | None]] = [(event.seq, event.schema_version) for event in step.events]
    candidates += [(staged.last_seq, staged.schema_version) for staged in step.files if staged.rows]
    candidates += [(-1, staged.schema_version) for staged in step.files]
    for _, version in sorted(candidates, key=lambda item: item[0], reverse=True):
        if version is not None and version in by_version:
            return by_version[version]
    return None


def _updated_value(column: str, partial: bool) -> str:
    """The MERGE's new value of a target column: the staged one, or the target's own where a partial row
    image lacks the column."""
    staged = f"s.{quote(column)}"
    if not partial:
        return staged
    absent = f"s.{PARTIAL_COLUMN} IS NOT NULL AND map_contains_key(s.{PARTIAL_COLUMN}, {sql_string(column)})"
    return f"CASE WHEN {absent} THEN t.{quote(column)} ELSE {staged} END"


def _json_columns(final: SchemaVersionInfo | None, columns: Sequence[str]) -> list[str]:
    """The staged columns that hold MySQL JSON documents."""
    present = set(columns)
    return [
        str(column["name"])
        for column in (final.columns if final is not None else ())
        if str(column.get("mysql_type", "")).startswith("json") and column["name"] in present
    ]


def _describe_event(event: SchemaEvent) -> str:
    """A schema event as the report lists it."""
    what = {
        "column_added": f"column {event.name!r} added",
        "column_dropped": f"column {event.name!r} dropped",
        "column_renamed": f"column {event.old_name!r} renamed to {event.name!r}",
        "column_retyped": f"column {event.name!r} retyped",
        "truncated": "truncated",
        "reset": "dropped or created again",
        "rebuild": f"needs a rebuild: {event.reason}",
    }[event.kind]
    return f"{what} (GTID {event.gtid})" if event.gtid else what


def _is_commit_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return any(
        marker in text
        for marker in ("ValidationException", "CommitFailedException", "Found conflicting", "conflicting files")
    )


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

    # -- staging ------------------------------------------------------------------------------------

    def read_window(self, window_id: int) -> StagingManifest | None:
        if window_id not in self._window_cache:
            self._window_cache[window_id] = self.staging.read_window_manifest(window_id)
        return self._window_cache[window_id]

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

    def _key_columns(self, step: TableStep, schemas: Sequence[Any], final: SchemaVersionInfo | None) -> list[str]:
        if final is not None and final.primary_key:
            return list(final.primary_key)
        for schema in reversed(schemas):
            if f"{schema.database}.{schema.table}" == self.table_name and schema.primary_key:
                return list(schema.primary_key)
        snapshot = step.snapshot if isinstance(step, LoadSnapshotChunks) else None
        if snapshot is None and step.before.snapshot_id:
            snapshot = self.read_snapshot(step.before.snapshot_id, self.table_name)
        if snapshot is not None and snapshot.chunks:
            return list(snapshot.chunks[0]["chunk"]["key_columns"])
        raise TerminalCdcError(
            f"{self.table_name} has no primary key, so its changes cannot be merged by key; add a primary key "
            "in MySQL, or snapshot it with key_columns (the apply then merges on those columns)"
        )

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
        final = _final_version(step, table_schemas) if isinstance(step, ApplyWindow) else None
        changes: WindowTableChanges | None = None
        renames: dict[int, dict[str, str]] | None = None
        if isinstance(step, ApplyWindow):
            changes, final_ids = self._window_changes(step, final)
            if final_ids:
                renames = {info.schema_version: version_renames(info.columns, final_ids) for info in table_schemas}
        # A table replaced by nothing (dropped, renamed away) needs no key: nothing is merged.
        gone = changes is not None and changes.reset_seq is not None and not files
        keys = [] if gone else self._key_columns(step, schemas, final)
        paths: dict[int, list[str]] = {}
        for path, staged in files:
            paths.setdefault(staged.schema_version, []).append(path)
        frame = read_versions(self.spark, paths, renames)
        staged_files = [f for _, f in files]
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
        if isinstance(step, ApplyWindow) and any(f.partial_rows for f in staged_files):
            json_columns = _json_columns(final, frame.columns)
            frame = fold_partial_rows(frame, keys, json_columns)
            if json_columns and self._exists(self.target):
                frame = apply_pending_json_diffs(frame, self.spark.table(self.target), keys, json_columns)
        elif isinstance(step, ApplyWindow):
            frame = last_change_per_key(frame, keys)
        return _StepSource(frame, keys, staged_files, rows, changes)

    # -- target -------------------------------------------------------------------------------------

    def _iceberg_table(self) -> Any:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, self.target)

    def _target_rows(self) -> int:
        """Records in the data files of the target's current snapshot (deleted rows included), as the
        catalog's cached (pinned) table has it; 0 before its first commit."""
        snapshot = self._iceberg_table().currentSnapshot()
        return 0 if snapshot is None else int(dict(snapshot.summary()).get("total-records", 0))

    def _exists(self, name: str) -> bool:
        try:
            self.spark.sql(f"DESCRIBE TABLE {name}").collect()
        except Exception as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
                return False
            raise
        return True

    def read_state(self, target: str | None = None) -> AppliedState | None:
        """Refresh the cached table, then read the newest CDC state from its current history."""
        name = target or self.target
        self.spark.sql(f"REFRESH TABLE {name}")
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, name)
        snapshot = table.currentSnapshot()
        while snapshot is not None:
            state = AppliedState.from_summary(dict(snapshot.summary()), name)
            if state is not None:
                return state
            parent = snapshot.parentId()
            snapshot = None if parent is None else table.snapshot(parent)
        return None

    def _columns(self, name: str) -> list[tuple[str, str]]:
        return [(f.name, f.dataType.simpleString()) for f in self.spark.table(name).schema.fields]

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
            self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
            properties = self._table_properties()
            partition = f" PARTITIONED BY ({quote(CHANGELOG_WINDOW_COLUMN)})" if changelog else ""
            ddl = ", ".join(f"{quote(c)} {t}" for c, t in columns)
            self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {name} ({ddl}) USING iceberg{partition} TBLPROPERTIES ({properties})"
            )
            log.info("created %s", name)
            return
        for alteration in alterations:
            statement = alteration.sql(name)
            log.info("%s: %s", self.table_name, statement)
            self.spark.sql(statement)
            self.report.schema_changes.append(statement)
        try:
            changes = plan_schema_changes(self._columns(name), columns, self.config.drop_dropped_columns)
        except UnsupportedSchemaChangeError as exc:
            raise UnsupportedSchemaChangeError(
                f"{self.table_name} -> {name}: {exc}; {self._ddl_context(step)}"
            ) from None
        for change in changes:
            statement = change.sql(name)
            log.info("%s: %s", self.table_name, statement)
            self.spark.sql(statement)
            self.report.schema_changes.append(statement)

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
        from pyspark.sql import functions as F

        source, keys, changes = staged.frame, staged.keys, staged.rows
        target_columns = self._columns(self.target)
        source_names = {f.name.lower(): f.name for f in source.schema.fields}

        def projected(column: str, type_text: str) -> Column:
            """A staged column as the target's column of type ``type_text`` (NULL when not staged)."""
            name = source_names.get(column.lower())
            return (F.lit(None) if name is None else F.col(quote(name))).cast(type_text).alias(column)

        window_changes = staged.changes
        replace_rest = (isinstance(step, LoadSnapshotChunks) and step.replace) or (
            window_changes is not None and window_changes.replaces_rows
        )
        backfills = () if window_changes is None or replace_rest else window_changes.backfills
        temporal = temporal_keys(source, keys)
        on = key_match(keys, temporal)
        args: dict[str, Any] = {}
        # With NOT MATCHED BY SOURCE the join is a full outer join: every target row takes part anyway.
        full_outer = replace_rest or bool(backfills)
        if changes is not None and not full_outer and key_filter_pays_off(self._target_rows(), changed_rows):
            types = {c.lower(): t for c, t in target_columns}
            key_types = [types.get(k.lower(), "") for k in keys]
            if key_filter_applies(key_types) and all(k.lower() in source_names for k in keys):
                key_columns = [projected(k, t) for k, t in zip(keys, key_types, strict=True)]
                key_filter = self._key_filter(changes.select(*key_columns))
                if key_filter is not None:
                    condition = key_filter.condition("t", keys)
                    if temporal:  # an invalid date's key is staged as NULL: such rows skip the filter
                        condition = " OR ".join([condition, *(f"t.{quote(k)} IS NULL" for k in temporal)])
                    on += f" AND ({condition})"
                    args[KeyFilter.PARAMETER] = key_filter.parameter()
        partial = PARTIAL_COLUMN in source_names
        updates = ", ".join(f"t.{quote(c)} = {_updated_value(c, partial)}" for c, _ in target_columns)
        names = ", ".join(quote(c) for c, _ in target_columns)
        values = ", ".join(f"s.{quote(c)}" for c, _ in target_columns)
        # A partial row whose key the target lacks has nothing to complete it: it is not inserted.
        complete = f" AND s.{PARTIAL_COLUMN} IS NULL" if partial else ""
        untouched = ""
        if replace_rest:
            untouched = " WHEN NOT MATCHED BY SOURCE THEN DELETE"
        elif backfills:
            settings = []
            for index, backfill in enumerate(backfills):
                args[f"cdc_backfill_{index}"] = backfill.value
                settings.append(f"t.{quote(backfill.column)} = :cdc_backfill_{index}")
            untouched = f" WHEN NOT MATCHED BY SOURCE THEN UPDATE SET {', '.join(settings)}"
        view = f"cdc_apply_{abs(hash((self.target, step.describe()))) % 10**9}"
        statement = (
            f"MERGE INTO {self.target} t USING {view} s ON {on} "
            f"WHEN MATCHED AND s.{OP_COLUMN} = 'd' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {updates} "
            f"WHEN NOT MATCHED AND s.{OP_COLUMN} <> 'd'{complete} THEN INSERT ({names}) VALUES ({values})" + untouched
        )
        extra = [F.col(OP_COLUMN), *([F.col(PARTIAL_COLUMN)] if partial else [])]
        source.select(*[projected(c, t) for c, t in target_columns], *extra).createOrReplaceTempView(view)
        try:
            with_commit_properties(self.spark, properties, lambda: self.spark.sql(statement, args=args or None))
        finally:
            self.spark.catalog.dropTempView(view)

    def _replace(self, step: TableStep, source: DataFrame, properties: dict[str, str]) -> None:
        """Replace the target, schema and rows, by the step's rows in one commit (``CREATE OR REPLACE
        TABLE ... AS SELECT``): readers see the old table or the new one, never a mix."""
        from pyspark.sql import functions as F

        columns = [c for c in source.columns if c not in (OP_COLUMN, PARTIAL_COLUMN)]
        view = f"cdc_replace_{abs(hash((self.target, step.describe()))) % 10**9}"
        source.where(F.col(OP_COLUMN) != F.lit("d")).select(
            *[F.col(quote(c)) for c in columns]
        ).createOrReplaceTempView(view)
        statement = (
            f"CREATE OR REPLACE TABLE {self.target} USING iceberg TBLPROPERTIES ({self._table_properties()}) "
            f"AS SELECT * FROM {view}"
        )
        log.info("%s: %s replaces %s", self.table_name, step.describe(), self.target)
        try:
            with_commit_properties(self.spark, properties, lambda: self.spark.sql(statement))
        finally:
            self.spark.catalog.dropTempView(view)
        self.report.schema_changes.append(f"replaced {self.target} ({step.describe()})")

    def _key_filter(self, keys: DataFrame) -> KeyFilter | None:
        """The :class:`KeyFilter` of ``keys`` (the key columns of every staged change, as the target's
        types; at most :data:`KEY_FILTER_MAX_ROWS` rows), or None when they hold more than
        :data:`KEY_FILTER_MAX_KEYS` distinct keys."""
        from pyspark.sql import functions as F

        hashes = keys.select(F.xxhash64(*[F.col(quote(c)) for c in keys.columns]))
        return KeyFilter.of_hashes({int(row[0]) for row in hashes.collect()})  # one stage: no shuffle

    # -- steps --------------------------------------------------------------------------------------

    def run_step(self, step: TableStep) -> None:
        """Evolve the schema, check the state is still ``step.before``, then MERGE with ``step.after``
        (or replace the table in one commit: a table reset by DROP/CREATE, a re-load of a snapshot)."""
        events = step.events if isinstance(step, ApplyWindow) else ()
        nothing_staged = isinstance(step, ApplyWindow) and not step.files and not self._exists(self.target)
        if nothing_staged and (not events or any(event.kind == "reset" for event in events)):
            log.info("%s: %s stages nothing for a table without target", self.table_name, step.describe())
            return  # created and gone again in the window, or renamed away: nothing to hold
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
            self._replace(step, source.frame, step.after.to_summary())
        else:
            self._merge(step, source, step.after.to_summary(), sum(f.rows for f in source.files))
        for staged in source.files:  # staged rows by op (before keeping the last change per key)
            for op, count in staged.op_counts.items():
                if count:
                    self.report.rows[op] = self.report.rows.get(op, 0) + count
        if changes is not None:
            self.report.schema_changes += [_describe_event(event) for event in changes.applied_events]
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
                        not (isinstance(exc, StaleApplyStateError) or _is_commit_conflict(exc))
                        or attempt == MAX_CONFLICT_RETRIES
                    ):
                        raise
                    self.report.conflicts_retried += 1
                    log.warning("%s: a concurrent commit won (%s); re-reading its state", self.target, exc)
            if self.config.keeps_history(self.table_name):
                self._write_changelog(windows)
            final = self.read_state() if self._exists(self.target) else None
            self.report.state = asdict(final) if final else {}
            # Whether this run or an earlier one left the table waiting: a retried task says so again.
            self.report.rebuild = final.rebuild_pending if final else ""
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
            final = _final_version(step, table_schemas)
            changes, final_ids = self._window_changes(step, final, changelog)
            renames = None
            if final_ids:
                renames = {info.schema_version: version_renames(info.columns, final_ids) for info in table_schemas}
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
            frame = frame.select(
                *[F.col(quote(c)) if c.lower() in source_names else F.lit(None).alias(c) for c in columns]
            )
            writer = frame.writeTo(changelog)
            for key, value in step.after.to_summary().items():
                writer = writer.option(f"snapshot-property.{key}", value)
            writer.overwritePartitions()
            self.report.changelog_windows.append(step.manifest.window_id)


def _mask_userinfo(text: str) -> str:
    """``scheme://user:secret@host`` -> ``scheme://***@host``."""
    return re.sub(r"(?<=://)[^/@\s]+@", "***@", text)


def java_error_summary(exc: BaseException) -> str:
    """The first line of an exception's message and its root cause, without the JVM stack trace that
    Py4J puts into the text of Java exceptions (URL credentials masked)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line.removeprefix(": ").strip() for line in lines if line and not line.startswith("at ")]
    lines = [line for line in lines if not line.startswith(("An error occurred while calling", "..."))]
    if not lines:
        return type(exc).__name__
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    summary = lines[0] if not causes or causes[-1] == lines[0] else f"{lines[0]} (caused by {causes[-1]})"
    return _mask_userinfo(summary)


def require_reachable_catalog(spark: SparkSession, catalog: str) -> None:
    """List the catalog's namespaces once, before any table is touched; an unreachable catalog or
    warehouse raises :class:`WarehouseUnreachableError` (a Hadoop warehouse directory that does not
    exist yet is fine: the first apply creates it)."""
    try:
        spark.sql(f"SHOW NAMESPACES IN {quote(catalog)}").collect()
    except Exception as exc:
        if "NoSuchNamespaceException" in str(exc):
            return
        prefix = f"spark.sql.catalog.{catalog}"
        settings = [
            f"{key} {_mask_userinfo(str(value))}"
            for key in ("type", "uri", "warehouse")
            if (value := spark.conf.get(f"{prefix}.{key}", None))
        ]
        raise WarehouseUnreachableError(
            f"cannot reach the Iceberg catalog {catalog!r} ({', '.join(settings) or 'no type, uri or warehouse set'}): "
            f"{java_error_summary(exc)}. Nothing was applied: check the catalog's uri or warehouse, the network "
            "and the catalog's credentials, then retry"
        ) from None


def with_commit_properties(spark: SparkSession, properties: dict[str, str], action: Callable[[], object]) -> None:
    """Run ``action`` so that every Iceberg commit it makes carries ``properties`` in its summary.

    Iceberg keeps them in a JVM thread-local (``CommitMetadata.withCommitProperties``); PySpark's
    pinned-thread mode runs the Python callable on the JVM thread that called it, so SQL issued from
    the callable commits with the properties.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    assert gateway is not None and jvm is not None
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    failure: list[BaseException] = []

    class _Callable:
        def call(self) -> None:
            try:
                action()
            except BaseException as exc:  # kept to re-raise the Python exception itself
                failure.append(exc)
                raise

        class Java:
            implements = ["java.util.concurrent.Callable"]

    jprops = jvm.java.util.HashMap()
    for key, value in properties.items():
        jprops.put(key, value)
    runtime_exception = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(jprops, _Callable(), runtime_exception)
    except Exception:
        if failure:
            raise failure[0] from None
        raise


def configure_catalog_cache(spark: SparkSession, catalog: str) -> None:
    """Keep loaded tables pinned for the whole job (refreshed explicitly when a state is read)."""
    prefix = f"spark.sql.catalog.{catalog}"
    if str(spark.conf.get(f"{prefix}.cache-enabled", "true")).lower() == "false":
        raise ConfigurationError(
            f"{prefix}.cache-enabled=false: the apply pins each table while it plans and merges, which needs "
            "the catalog's table cache; remove that setting for the apply job"
        )
    spark.conf.set(f"{prefix}.cache.expiration-interval-ms", "-1")


def run_apply(spark: SparkSession, config: ApplySpec) -> ApplyReport:
    """Apply ``config``'s windows to every table they hold; returns the report (also written to
    ``config.report_uri`` when set)."""
    if spark.conf.get(f"spark.sql.catalog.{config.catalog}", None) is None:
        raise ConfigurationError(
            f"Spark catalog {config.catalog!r} is not configured: set spark.sql.catalog.{config.catalog}="
            "org.apache.iceberg.spark.SparkCatalog and its type/warehouse (or uri) for the apply job"
        )
    configure_catalog_cache(spark, config.catalog)
    require_reachable_catalog(spark, config.catalog)
    staging = Staging(config.staging_uri, config.pipeline)
    manifests = []
    for window_id in config.window_ids:
        manifest = staging.read_window_manifest(window_id)
        if manifest is None:
            raise TerminalCdcError(
                f"window {window_id} of pipeline {config.pipeline!r} has no manifest under {config.staging_uri}; "
                "run its capture first (a window exists only once its manifest is published)"
            )
        manifests.append(manifest)
    tables: dict[str, TableReport] = {}
    for table_name in tables_in_windows(manifests):
        table = tables[table_name] = TableApplier(spark, config, table_name, staging).apply()
        log.info("%s: %s %s", table_name, table.status, table.error or table.windows_applied)
    report = ApplyReport(config.pipeline, config.first_window, config.last_window, manifests[-1].upper, tables)
    if config.report_uri:
        write_text_to_uri(config.report_uri, report.to_json())
    return report


def read_spec(spec_uri: str) -> ApplySpec:
    """The :class:`ApplySpec` at a pyarrow filesystem URI (the job's ``--spec``)."""
    text = read_text_from_uri(spec_uri)
    if text is None:
        raise ConfigurationError(f"there is no apply spec at {spec_uri}; give the job the URI the operator wrote")
    return ApplySpec.from_json(text, spec_uri)


def parse_args(argv: Sequence[str]) -> str:
    """The job's command line: ``--spec URI``; returns the URI."""
    parser = argparse.ArgumentParser(prog="apply_changes.py", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spec", required=True, help="URI of the ApplySpec JSON (apply/contract.py)")
    return str(parser.parse_args(list(argv)).spec)


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: 0 when every table is applied, 1 when any failed, 2 on bad input."""
    from pyspark.sql import SparkSession

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = read_spec(parse_args(sys.argv[1:] if argv is None else argv))
    except MySqlCdcError as exc:
        log.error("%s", exc)
        return 2
    spark = SparkSession.builder.appName(f"mysql-cdc-apply-{config.pipeline}").getOrCreate()
    try:
        report = run_apply(spark, config)
    except MySqlCdcError as exc:
        log.error("%s", exc)
        return 2
    finally:
        spark.stop()
    summary = {"pipeline": report.pipeline, "first_window": report.first_window, "last_window": report.last_window}
    print(json.dumps({"apply": {**summary, "upper": report.upper, "failed": report.failed}}, sort_keys=True))
    for name, table in report.tables.items():
        print(f"apply table={name} status={table.status} windows={table.windows_applied} rows={table.rows}")
        if table.error:
            print(f"apply table={name} error={table.error}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
