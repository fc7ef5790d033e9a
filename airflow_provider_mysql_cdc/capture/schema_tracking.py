"""The selected tables' schemas while a window is captured: columns followed by identity, DDL turned into
schema events, and the tables that wait for a rebuild (no Airflow import).

Each selected table's :class:`~airflow_provider_mysql_cdc.core.table_schema.TrackedTable` is kept in
the metadata store from the point it took effect (a snapshot's ``SHOW CREATE TABLE``, a DDL statement,
or the first table map of a table the pipeline never saw). A window starts from the schemas in force at
its lower bound; each DDL statement of a selected table is parsed and applied to them
(:func:`~airflow_provider_mysql_cdc.core.table_schema.apply_statement`), and its effects become the
window's :class:`~airflow_provider_mysql_cdc.core.schema_events.SchemaEvent` records. Row events are
then staged under the column ids of the tracked schema, checked against their table map (names and
staged types, position by position).

Whatever the target cannot follow exactly (a retype that may have changed values, a key change, an
added column whose existing values are not known, a renamed table, a statement that is not understood,
a table map that does not match) is a ``rebuild`` event: the table's changes from that point are not
staged, and it waits until a fresh snapshot governs it again (the snapshot planner takes it when the
pipeline's policy allows; otherwise the apply stops the table with the error and the fix).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_mysql_cdc.core.ddl import with_lower_case_names
from airflow_provider_mysql_cdc.core.ddl_charsets import charset_of_collation
from airflow_provider_mysql_cdc.core.ddl_parser import parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import (
    AddColumn,
    AlterTable,
    ChangeColumn,
    ColumnDefinition,
    CreateTable,
    DatabaseDdl,
    DdlStatement,
    DropTables,
    IndexDdl,
    OtherDdl,
    RenameTables,
    RenameTableTo,
    TableOption,
    TableRef,
    TruncateTable,
    UnparsedDdl,
)
from airflow_provider_mysql_cdc.core.schema_effects import (
    ColumnAdded,
    ColumnDropped,
    ColumnRenamed,
    ColumnRetyped,
    DataChangeUnknown,
    KeyChanged,
    Known,
    NoDataChange,
    SchemaEffect,
    TableCreated,
    TableDropped,
    TableRenamed,
    TableTruncated,
    backfill_for,
)
from airflow_provider_mysql_cdc.core.schema_events import (
    COLUMN_ADDED,
    COLUMN_DROPPED,
    COLUMN_RENAMED,
    COLUMN_RETYPED,
    REBUILD,
    RESET,
    SchemaEvent,
    encode_value,
)
from airflow_provider_mysql_cdc.core.storage_engines import unknown_engine_reason
from airflow_provider_mysql_cdc.core.table_schema import TrackedColumn, TrackedTable, apply_statement
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_type
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

log = logging.getLogger(__name__)

#: ``in_snapshot(table, gtid)``: True when the governing snapshot of the table holds the transaction in
#: every chunk, None when in some chunks only, False when in none (or no snapshot governs the table).
SnapshotTest = Callable[[str, str], "bool | None"]


def column_spec(column: ColumnDefinition, primary_key: bool = False) -> ColumnSpec:
    """The staging spec of a tracked column (what its staged Arrow type depends on)."""
    return ColumnSpec(
        name=column.name,
        mysql_type=column.mysql_type,
        unsigned=column.unsigned,
        precision=column.precision if column.mysql_type == "decimal" else None,
        scale=column.scale if column.mysql_type == "decimal" else None,
        fsp=column.fsp,
        charset=column.charset,
        enum_values=column.enum_values,
        set_values=column.set_values,
        bits=column.length if column.mysql_type == "bit" else None,
        dimensions=column.length if column.mysql_type == "vector" else None,
        nullable=column.nullable,
        primary_key=primary_key,
    )


def tracked_specs(table: TrackedTable) -> tuple[ColumnSpec, ...]:
    """The staging specs of a tracked table's columns, in table order."""
    key = {name.lower() for name in table.primary_key}
    return tuple(column_spec(c.definition, c.name.lower() in key) for c in table.columns)


def table_from_specs(database: str, table: str, specs: Sequence[ColumnSpec]) -> TrackedTable:
    """A tracked schema for a table first met in a table map (column ids 1..n; defaults unknown)."""
    columns = tuple(
        TrackedColumn(
            index + 1,
            ColumnDefinition(
                name=spec.name,
                type_text=spec.sql_type,
                mysql_type=spec.mysql_type,
                unsigned=spec.unsigned,
                precision=spec.precision,
                scale=spec.scale,
                fsp=spec.fsp,
                length=spec.bits if spec.mysql_type == "bit" else spec.dimensions,
                charset=spec.charset,
                enum_values=spec.enum_values,
                set_values=spec.set_values,
                nullable=spec.nullable is not False,
            ),
        )
        for index, spec in enumerate(specs)
    )
    key = tuple(spec.name for spec in specs if spec.primary_key)
    return TrackedTable(database, table, columns, key, len(columns) + 1)


def _key_changed_reason(table: TrackedTable, before: tuple[int, ...], after: tuple[int, ...]) -> str:
    """Why a table whose binlog key changed inside a window waits (``before``/``after``: column ids)."""

    def names(ids: tuple[int, ...]) -> list[str]:
        return [column.name if (column := table.column_by_id(i)) else f"#{i}" for i in ids]

    return (
        f"the key its row events carry changed in the window from {names(before)} to {names(after)} without a "
        "primary key statement: a table without a primary key is keyed by its first UNIQUE index of NOT NULL "
        "columns, and one was dropped, made nullable or added; its rows before and after the change cannot be "
        "merged on one key"
    )


def mismatch(table: TrackedTable, specs: Sequence[ColumnSpec]) -> str:
    """Why a table map does not fit the tracked schema ("" when it fits): names and staged types."""
    tracked = tracked_specs(table)
    if len(tracked) != len(specs):
        return f"the binlog's table map has {len(specs)} columns, the tracked schema {len(tracked)}"
    for position, (known, seen) in enumerate(zip(tracked, specs, strict=True), start=1):
        if known.name != seen.name:
            return f"column {position} is {seen.name!r} in the binlog's table map, {known.name!r} in the tracked schema"
        if arrow_type(known) != arrow_type(seen):
            return (
                f"column {seen.name!r} is staged as {arrow_type(seen)} from the binlog's table map, "
                f"{arrow_type(known)} from the tracked schema"
            )
    return ""


@dataclass(frozen=True)
class StatementOutcome:
    """What one DDL statement did to the selected tables."""

    events: tuple[SchemaEvent, ...] = ()
    #: ``db.table`` of every TRUNCATE (rows before it are gone).
    truncated: tuple[str, ...] = ()
    #: Whether the statement concerns a selected table at all (it is then recorded in the manifest).
    relevant: bool = False


def _iceberg_widens(old: ColumnSpec, new: ColumnSpec) -> bool:
    """Whether a target column staged as ``old`` can take ``new``'s values in place."""
    before, after = arrow_type(old), arrow_type(new)
    if before == after:
        return True
    widening = {("int8", "int16"), ("int8", "int32"), ("int16", "int32"), ("int8", "int64"), ("int16", "int64")}
    widening |= {("int32", "int64"), ("uint8", "int16"), ("uint8", "int32"), ("uint16", "int32"), ("uint32", "int64")}
    widening |= {("float", "double")}
    if (str(before), str(after)) in widening:
        return True
    return (
        old.mysql_type == new.mysql_type == "decimal"
        and old.scale == new.scale
        and (old.precision or 0) <= (new.precision or 0) <= 38
    )


def implicit_timestamp_attributes(statement: DdlStatement, sql: str) -> DdlStatement:
    """``statement`` as run with ``explicit_defaults_for_timestamp=OFF``: when it defines a TIMESTAMP
    column, MySQL added attributes its text does not hold (``NOT NULL`` unless ``NULL`` is written;
    the table's first TIMESTAMP ``DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP``, the others
    ``DEFAULT '0000-00-00 00:00:00'``, unless a default is written), which depend on the table's other
    columns: the statement is not followed, its tables are re-read (:class:`UnparsedDdl`)."""
    tables: tuple[TableRef, ...] = (statement.table,) if isinstance(statement, CreateTable | AlterTable) else ()
    if isinstance(statement, CreateTable):
        columns = statement.columns
    elif isinstance(statement, AlterTable):
        columns = tuple(action.column for action in statement.actions if isinstance(action, AddColumn | ChangeColumn))
        tables += tuple(action.new for action in statement.actions if isinstance(action, RenameTableTo))
    else:
        return statement
    if not any(column.mysql_type == "timestamp" for column in columns):
        return statement
    reason = (
        "a TIMESTAMP column defined with explicit_defaults_for_timestamp=OFF (implicit NOT NULL, DEFAULT "
        "and ON UPDATE clauses the statement does not show)"
    )
    return UnparsedDdl(sql.strip(), reason, tables)


class SchemaTracker:
    """The tracked schemas of one window's selected tables (see the module docstring)."""

    def __init__(
        self,
        store: FrontierStore,
        pipeline: str,
        window_id: int,
        selection: TableSelection,
        *,
        record: bool,
        database_defaults: Mapping[str, tuple[str | None, str | None]] | None = None,
        created_engine_problem: Callable[[TableRef, int], str | None] = lambda ref, seq: None,
        cascade_problem: Callable[[TableRef, int], str | None] = lambda ref, seq: None,
        lower_case_names: bool = False,
    ) -> None:
        self.store = store
        self.pipeline = pipeline
        self.window_id = window_id
        self.selection = selection
        #: Write what changes to the metadata store (False when a published window is re-read).
        self.record = record
        #: database -> (default character set, collation): what a CREATE TABLE without its own inherits.
        self.database_defaults = dict(database_defaults or {})
        #: Why a table a CREATE TABLE naming no engine made (the table, the statement's seq) cannot be
        #: followed, or None (``core.storage_engines.created_engine_problem``): the session's
        #: default_storage_engine or a LIKE source's engine chose it, which the binlog does not carry.
        self.created_engine_problem = created_engine_problem
        #: Why a table a statement (the table, the statement's seq) gives a foreign key whose ON DELETE/ON
        #: UPDATE changes its rows cannot be followed, or None (``core.foreign_keys``): the server does not
        #: log the rows its cascades change.
        self.cascade_problem = cascade_problem
        #: The server runs with ``lower_case_table_names=1``: it stores and compares database and table
        #: names in lower case, while a statement's text keeps the case it was written in.
        self.lower_case_names = lower_case_names
        #: Tables made in this window by a CREATE TABLE naming no engine: an ALTER ... ENGINE= of one later
        #: in the window leaves the engine its earlier rows were written in unknown.
        self._engine_asked: set[TableRef] = set()
        self.tables: dict[TableRef, TrackedTable] = {}
        #: Tables whose default values are known (met in DDL or a snapshot, not first in a table map).
        self.defaults_known: set[TableRef] = set()
        #: ``db.table`` -> why the table waits for a fresh snapshot.
        self.pending: dict[str, str] = {}
        #: Bumped whenever a table's tracked schema changes (table versions are cached per epoch).
        self.epochs: dict[TableRef, int] = {}
        #: The followed tables before the statement being applied.
        self._before: dict[TableRef, TrackedTable] = {}
        #: The column ids of each table's key as this window's first table map of it (since the table's
        #: identity last changed) named it: all rows of a table in one window are merged on one key.
        self._window_keys: dict[TableRef, tuple[int, ...]] = {}
        self._load()

    # -- state ------------------------------------------------------------------------------------

    def _load(self) -> None:
        """The schemas in force at the window's start, and the tables still waiting for a rebuild."""
        if self.record:
            self.store.forget_captured_schemas(self.pipeline, self.window_id)
        latest = self.store.tracked_schemas_before(self.pipeline, self.window_id)
        for record in latest.values():
            if record.schema is None:
                continue
            table = TrackedTable.from_json(json.loads(record.schema))
            self.tables[table.ref] = table
            if record.source != "table_map":
                self.defaults_known.add(table.ref)
        for name, request in self.store.pending_rebuilds(self.pipeline, self.window_id).items():
            self.pending[name] = f"window {request.window_id} (GTID {request.gtid}): {request.reason}"

    def _save(self, ref: TableRef, seq: int, source: str) -> None:
        self.epochs[ref] = self.epochs.get(ref, 0) + 1
        if not self.record:
            return
        table = self.tables.get(ref)
        schema = None if table is None else json.dumps(table.to_json(), sort_keys=True)
        self.store.record_tracked_schema(self.pipeline, str(ref), self.window_id, seq, source, schema)

    def _selected(self, ref: TableRef) -> bool:
        return self.selection.matches(ref.database, ref.table)

    def rebuild(self, ref: TableRef, seq: int, gtid: str, reason: str, error_class: str = "") -> SchemaEvent:
        """Leave ``ref`` waiting for a fresh snapshot from ``seq`` on; its changes are not staged
        (``error_class``: the named error it stops with until it can be snapshotted again)."""
        name = str(ref)
        self.pending.setdefault(name, f"window {self.window_id} (GTID {gtid}): {reason}")
        if self.record:
            self.store.record_rebuild_request(self.pipeline, name, self.window_id, seq, gtid, reason)
        log.warning("window %s: %s needs a fresh snapshot: %s", self.window_id, name, reason)
        return SchemaEvent(ref.database, ref.table, seq, gtid, REBUILD, reason=reason, error_class=error_class)

    # -- row events -------------------------------------------------------------------------------

    def column_ids(
        self, database: str, table: str, specs: Sequence[ColumnSpec], seq: int, gtid: str
    ) -> tuple[tuple[int, ...] | None, SchemaEvent | None]:
        """The column ids of a table map's columns, or None when the table's rows are not staged (it
        waits for a rebuild; the event says why when this table map is the reason)."""
        ref = TableRef(database, table)
        if str(ref) in self.pending:
            return None, None
        tracked = self.tables.get(ref)
        if tracked is None:
            tracked = self.tables[ref] = table_from_specs(database, table, specs)
            self._save(ref, seq, "table_map")
        problem = mismatch(tracked, specs)
        if problem:
            return None, self.rebuild(ref, seq, gtid, f"{problem}; the schema changed in a way not followed")
        ids = tuple(column.column_id for column in tracked.columns)
        key = tuple(column_id for column_id, spec in zip(ids, specs, strict=True) if spec.primary_key)
        first = self._window_keys.setdefault(ref, key)
        if key != first:
            return None, self.rebuild(ref, seq, gtid, _key_changed_reason(tracked, first, key))
        return ids, None

    def epoch(self, database: str, table: str) -> int:
        """A number that changes whenever the table's tracked schema does."""
        return self.epochs.get(TableRef(database, table), 0)

    def specs(self, database: str, table: str) -> tuple[tuple[ColumnSpec, ...], tuple[int, ...]] | None:
        """The tracked staging specs and column ids of a table (None when it is not tracked)."""
        tracked = self.tables.get(TableRef(database, table))
        if tracked is None:
            return None
        return tracked_specs(tracked), tuple(column.column_id for column in tracked.columns)

    def default_value(self, database: str, table: str, column: str) -> Known | None:
        """The value an insert that omits ``column`` stores (None when it cannot be known here)."""
        ref = TableRef(database, table)
        tracked = self.tables.get(ref)
        found = None if tracked is None or ref not in self.defaults_known else tracked.column(column)
        if found is None or found.definition.generated is not None:
            return None
        backfill = backfill_for(found.definition)
        return backfill if isinstance(backfill, Known) and backfill.invalid_text is None else None

    # -- DDL --------------------------------------------------------------------------------------

    def _database_defaults_of(self, statement: DatabaseDdl) -> None:
        """Follow a CREATE/ALTER DATABASE's defaults for the tables created after it (COLLATE alone sets
        the character set too: the collation's)."""
        if statement.kind != "drop" and (statement.charset or statement.collation):
            charset = statement.charset or charset_of_collation(statement.collation or "")
            self.database_defaults[statement.database] = (charset, statement.collation)

    def on_statement(
        self,
        sql: str,
        database: str,
        seq: int,
        gtid: str,
        sql_mode: int | None,
        in_snapshot: SnapshotTest,
        *,
        explicit_timestamp_defaults: bool | None = None,
        text_problem: str | None = None,
    ) -> StatementOutcome:
        """Apply one statement of the binlog; its events for the selected tables, in statement order
        (``explicit_timestamp_defaults``: the statement's session ``explicit_defaults_for_timestamp``;
        ``text_problem``: why ``sql`` may not be the text MySQL read, which re-reads every table)."""
        statement = self._parse(sql, database, sql_mode, explicit_timestamp_defaults, text_problem)
        if isinstance(statement, DatabaseDdl):
            self._database_defaults_of(statement)
        if isinstance(statement, OtherDdl):
            return StatementOutcome()
        named = self._named_tables(statement)
        if named is not None and not any(self._selected(ref) for ref in named):
            return StatementOutcome()  # about other tables only
        text = sql.strip()[:300]
        problem = self._engine_problem(statement, seq) or self._cascade_problem(statement, seq)
        if problem is not None:
            ref, why = problem
            return StatementOutcome((self.rebuild(ref, seq, gtid, f"{why} (by: {text})"),), (), True)
        if isinstance(statement, UnparsedDdl):
            touched = [ref for ref in (named or tuple(self.tables)) if self._selected(ref)]
            reason = f"statement not followed ({statement.reason}): {text}"
            return StatementOutcome(tuple(self.rebuild(ref, seq, gtid, reason) for ref in touched), (), True)
        events: list[SchemaEvent] = []
        # Tables whose governing snapshot read them after this statement (in every chunk) already hold
        # its result; read partly before and partly after it, they cannot be trusted.
        settled: dict[TableRef, TrackedTable | None] = {}
        for ref in [r for r in named or () if self._selected(r)]:
            holds = in_snapshot(str(ref), gtid)
            if holds is False:
                continue
            settled[ref] = self.tables.pop(ref, None)
            if holds is None:
                events.append(self.rebuild(ref, seq, gtid, f"changed while its snapshot was read: {text}"))
        waiting = {ref: t for ref, t in self.tables.items() if str(ref) in self.pending}
        followed = {ref: t for ref, t in self.tables.items() if ref not in waiting}
        update = apply_statement(followed, statement, sql_mode=sql_mode, database_defaults=self.database_defaults)
        self._before = followed
        self.tables = {**waiting, **update.tables, **{r: t for r, t in settled.items() if t is not None}}
        truncated: list[str] = []
        for effect in update.effects:
            if isinstance(effect, TableDropped | TableCreated):
                self._window_keys.pop(effect.table, None)  # another table from here on
            elif isinstance(effect, TableRenamed):
                self._window_keys.pop(effect.old, None)
                self._window_keys.pop(effect.new, None)
            if effect.table in settled:
                continue
            if isinstance(effect, TableTruncated):
                if self._selected(effect.table):
                    truncated.append(str(effect.table))
                continue
            events += self._events_of(effect, seq, gtid, text)
        for ref in update.unknown:
            if self._selected(ref) and ref not in settled and str(ref) not in self.pending:
                events.append(self.rebuild(ref, seq, gtid, f"schema not known after {text}"))
        for ref in sorted({*update.changed, *update.removed}):
            if not self._selected(ref) or ref in settled:
                continue
            if ref in self.tables:
                self.defaults_known.add(ref)
            else:
                self.defaults_known.discard(ref)
            self._save(ref, seq, "ddl" if ref in self.tables else "dropped")
        for ref in [r for r in self.tables if not self._selected(r)]:
            del self.tables[ref]  # renamed or created out of the selection: not followed
        return StatementOutcome(tuple(events), tuple(truncated), True)

    def _parse(
        self,
        sql: str,
        database: str,
        sql_mode: int | None,
        explicit_timestamp_defaults: bool | None,
        text_problem: str | None,
    ) -> DdlStatement:
        """The statement as its session's settings made MySQL read it (see :meth:`on_statement`)."""
        statement = parse_ddl(sql, database, sql_mode=sql_mode)
        if self.lower_case_names:
            statement = with_lower_case_names(statement)
        if explicit_timestamp_defaults is False:
            statement = implicit_timestamp_attributes(statement, sql)
        if text_problem is not None and not isinstance(statement, OtherDdl):
            statement = UnparsedDdl(sql.strip(), text_problem, None)
        return statement

    def _engine_problem(self, statement: DdlStatement, seq: int) -> tuple[TableRef, str] | None:
        """The table a CREATE TABLE naming no engine makes, or an ALTER ... ENGINE= of such a table later
        in the window, and why it cannot be followed (None: it can, or the statement is neither)."""
        if isinstance(statement, CreateTable) and statement.engine is None and not statement.temporary:
            if not self._selected(statement.table):
                return None
            self._engine_asked.add(statement.table)
            problem = self.created_engine_problem(statement.table, seq)
            return None if problem is None else (statement.table, problem)
        if (
            isinstance(statement, AlterTable)
            and statement.table in self._engine_asked
            and any(isinstance(action, TableOption) and action.engine for action in statement.actions)
        ):
            return statement.table, unknown_engine_reason("an ALTER TABLE ... ENGINE= later in the window changed it")
        return None

    def _cascade_problem(self, statement: DdlStatement, seq: int) -> tuple[TableRef, str] | None:
        """The selected table a CREATE or ALTER TABLE gives a foreign key whose ON DELETE/ON UPDATE changes
        its rows, and why it cannot be followed (None: it can, or the statement gives no such key)."""
        if not isinstance(statement, CreateTable | AlterTable) or not statement.cascading_foreign_key:
            return None
        if isinstance(statement, CreateTable) and statement.temporary:
            return None
        if not self._selected(statement.table):
            return None
        problem = self.cascade_problem(statement.table, seq)
        return None if problem is None else (statement.table, problem)

    def _named_tables(self, statement: DdlStatement) -> tuple[TableRef, ...] | None:
        """The tables a statement names (None: every table of a database, or unknown)."""
        if isinstance(statement, CreateTable):
            return (statement.table,) if statement.like is None else (statement.table, statement.like)
        if isinstance(statement, AlterTable | TruncateTable | IndexDdl):
            return (statement.table,)
        if isinstance(statement, RenameTables):
            return tuple(ref for pair in statement.pairs for ref in pair)
        if isinstance(statement, DropTables):
            return statement.tables
        if isinstance(statement, DatabaseDdl):
            return tuple(ref for ref in self.tables if ref.database == statement.database)
        if isinstance(statement, UnparsedDdl):
            return statement.tables
        return None

    def _events_of(self, effect: SchemaEffect, seq: int, gtid: str, text: str) -> list[SchemaEvent]:
        """The schema events of one effect on a selected table (a ``rebuild`` where the target cannot
        follow it exactly)."""
        ref = effect.table
        if isinstance(effect, TableRenamed):
            return self._renamed(effect, seq, gtid, text)
        if not self._selected(ref) or isinstance(effect, NoDataChange):
            return []
        if isinstance(effect, TableDropped | TableCreated):
            # Gone, or a new identity: whatever waited for a rebuild is moot (a new table is followed).
            self._settle(ref, seq)
            return [SchemaEvent(ref.database, ref.table, seq, gtid, RESET, reason=text)]
        if str(ref) in self.pending:
            return []

        def event(kind: str, **details: object) -> SchemaEvent:
            return SchemaEvent(ref.database, ref.table, seq, gtid, kind, reason=text, **details)  # type: ignore[arg-type]

        def rebuild(why: str, error_class: str = "") -> SchemaEvent:
            return self.rebuild(ref, seq, gtid, f"{why} (by: {text})", error_class)

        if isinstance(effect, ColumnAdded):
            backfill = effect.backfill
            if isinstance(backfill, Known) and backfill.invalid_text is None:
                return [
                    event(
                        COLUMN_ADDED,
                        column_id=effect.column_id,
                        name=effect.name,
                        backfill=encode_value(backfill.value),
                    )
                ]
            why = backfill.reason if not isinstance(backfill, Known) else f"the invalid value {backfill.invalid_text}"
            return [rebuild(f"column {effect.name!r} added; its value in existing rows: {why}")]
        if isinstance(effect, ColumnDropped):
            return [event(COLUMN_DROPPED, column_id=effect.column_id, name=effect.name)]
        if isinstance(effect, ColumnRenamed):
            return [event(COLUMN_RENAMED, column_id=effect.column_id, old_name=effect.old_name, name=effect.new_name)]
        if isinstance(effect, ColumnRetyped):
            if effect.values_preserved and _iceberg_widens(column_spec(effect.old), column_spec(effect.new)):
                return [event(COLUMN_RETYPED, column_id=effect.column_id, name=effect.name)]
            change = f"column {effect.name!r} changed from {effect.old.type_text} to {effect.new.type_text}"
            return [rebuild(f"{change}: {effect.reason}")]
        if isinstance(effect, KeyChanged):
            if self._same_key_columns(ref, effect):
                return []  # its columns renamed or retyped: their own effects say whether that is followed
            if not effect.new_key:
                keyless = (
                    f"its primary key {list(effect.old_key)} was dropped: the target is re-built from a snapshot "
                    "and then followed as a table without a key (a multiset of rows)"
                )
                return [rebuild(keyless)]
            change = f"primary key changed from {list(effect.old_key)} to {list(effect.new_key)}"
            return [rebuild(change)]
        assert isinstance(effect, DataChangeUnknown)
        return [rebuild(effect.reason)]

    def _same_key_columns(self, ref: TableRef, effect: KeyChanged) -> bool:
        """Whether a primary key is made of the same column identities before and after a statement."""
        before, after = self._before.get(ref), self.tables.get(ref)
        if before is None or after is None or not effect.old_key or not effect.new_key:
            return False
        old = [before.column(name) for name in effect.old_key]
        new = [after.column(name) for name in effect.new_key]
        if any(column is None for column in (*old, *new)):
            return False
        return [c.column_id for c in old if c] == [c.column_id for c in new if c]

    def _renamed(self, effect: TableRenamed, seq: int, gtid: str, text: str) -> list[SchemaEvent]:
        """A renamed table: gone under its old name; under its new name its rows are another table's
        than the target there holds, so that one is re-built from a fresh snapshot."""
        events = []
        old, new = effect.old, effect.new
        if self._selected(old):
            self._settle(old, seq)
            events.append(SchemaEvent(old.database, old.table, seq, gtid, RESET, reason=text))
        if self._selected(new):
            events.append(self.rebuild(new, seq, gtid, f"renamed from {old}: the rows under this name changed"))
        return events

    def _settle(self, ref: TableRef, seq: int) -> None:
        """A table waiting for a rebuild was dropped, renamed away or created anew: the wait is over,
        and the metadata store records it (a later window must not wait either)."""
        if self.pending.pop(str(ref), None) is not None:
            self._save(ref, seq, "ddl" if ref in self.tables else "dropped")
            if self.record:  # a request of this window, possibly at this very position: moot
                self.store.forget_rebuild_request(self.pipeline, str(ref), self.window_id)

    def rebuilds_pending(self) -> Mapping[str, str]:
        """``db.table`` -> why, for every selected table waiting for a fresh snapshot."""
        return dict(sorted(self.pending.items()))
