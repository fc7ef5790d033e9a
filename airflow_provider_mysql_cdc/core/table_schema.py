"""Tracked table schemas with stable column identities, and what a DDL statement does to them (pure).

A :class:`TrackedTable` is a table's columns in table order, each with a ``column_id`` that follows the
column, not its name: a new column takes ``next_column_id`` (never reused), RENAME/CHANGE/MODIFY keep
it, DROP removes it. So ``CHANGE f1 tmp, CHANGE f2 f1, CHANGE tmp f2`` swaps two ids, and ``DROP c``
then ``ADD c`` is a new column whose old values are gone. A table dropped and created again starts again
at 1 (a new identity); RENAME TABLE moves a table with its ids.

:func:`apply_statement` applies one parsed statement and returns a :class:`SchemaUpdate`: the tracked
tables after it, the :mod:`~airflow_provider_mysql_cdc.core.schema_effects` in statement order, and the
tables whose schema the model can no longer state (``unknown``: re-read them from the server with
``SHOW CREATE TABLE`` -> :func:`table_from_create`, or stop).

ALTER TABLE follows MySQL's ``mysql_prepare_alter_table`` (checked on 9.7): DROP, CHANGE, MODIFY,
RENAME COLUMN and ALTER COLUMN name the columns of the table *before* the statement (so
``CHANGE a b INT, CHANGE b a INT`` swaps), ADD and the FIRST/AFTER positions are then processed in
statement order against the new names (AFTER a column moved or added earlier in the same statement
works); dropping a key column removes it from the primary key; primary-key columns are NOT NULL; RENAME
TO happens last.

Character sets of the tracked columns are resolved where the table's defaults are known (``SHOW CREATE
TABLE`` always says them; a CREATE TABLE without DEFAULT CHARSET inherits the database's, which is not
tracked: such columns keep ``charset`` None, meaning "the table's original default").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_provider_mysql_cdc.core.ddl_alter import apply_alter
from airflow_provider_mysql_cdc.core.ddl_model import TrackedColumn, TrackedTable, build_table, with_key
from airflow_provider_mysql_cdc.core.ddl_parser import SqlMode, parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import (
    AlterTable,
    CreateTable,
    DatabaseDdl,
    DdlStatement,
    DropTables,
    IndexDdl,
    OtherDdl,
    RenameTables,
    RenameTableTo,
    TableRef,
    TruncateTable,
    UnparsedDdl,
)
from airflow_provider_mysql_cdc.core.schema_effects import (
    DataChangeUnknown,
    KeyChanged,
    NoDataChange,
    SchemaEffect,
    TableCreated,
    TableDropped,
    TableRenamed,
    TableTruncated,
)
from airflow_provider_mysql_cdc.errors import ModelMismatch, SchemaModelError

#: database -> (default character set, default collation).
DatabaseDefaults = Mapping[str, tuple[str | None, str | None]]

__all__ = [
    "DatabaseDefaults",
    "SchemaUpdate",
    "TrackedColumn",
    "TrackedTable",
    "apply_statement",
    "table_from_create",
]


@dataclass(frozen=True)
class SchemaUpdate:
    """The result of one statement: the tracked tables after it, its effects in statement order, and the
    tables whose schema is no longer known exactly (their entry in ``tables``, if any, is a best effort)."""

    tables: Mapping[TableRef, TrackedTable]
    effects: tuple[SchemaEffect, ...] = ()
    unknown: tuple[TableRef, ...] = ()
    #: Tables added or changed / removed by the statement (renames: the old name removed, the new changed).
    changed: tuple[TableRef, ...] = ()
    removed: tuple[TableRef, ...] = ()

    def effects_for(self, table: TableRef) -> tuple[SchemaEffect, ...]:
        """The effects that name ``table`` (for a rename: its old name), in statement order."""
        return tuple(effect for effect in self.effects if effect.table == table)

    def by_table(self) -> dict[TableRef, tuple[SchemaEffect, ...]]:
        """Effects grouped by the table they name, each group in statement order."""
        grouped: dict[TableRef, list[SchemaEffect]] = {}
        for effect in self.effects:
            grouped.setdefault(effect.table, []).append(effect)
        return {table: tuple(effects) for table, effects in grouped.items()}


def table_from_create(sql: str, database: str) -> TrackedTable:
    """The tracked schema of ``SHOW CREATE TABLE`` text (column ids 1..n); raises :class:`SchemaModelError`."""
    statement = parse_ddl(sql, database)
    if not isinstance(statement, CreateTable) or not statement.columns or statement.like or statement.as_select:
        reason = (
            statement.reason
            if isinstance(statement, UnparsedDdl)
            else f"not a CREATE TABLE with columns: {type(statement).__name__}"
        )
        raise SchemaModelError(f"cannot track the schema from {sql[:200]!r}: {reason}")
    try:
        return build_table(
            statement.table,
            statement.columns,
            statement.primary_key,
            statement.default_charset,
            statement.default_collation,
        )
    except ModelMismatch as exc:
        raise SchemaModelError(f"cannot track {statement.table}: {exc}") from None


# -- applying statements ----------------------------------------------------------------------------


@dataclass
class _State:
    """The tables while a statement is applied."""

    tables: dict[TableRef, TrackedTable]
    effects: list[SchemaEffect] = field(default_factory=list)
    unknown: set[TableRef] = field(default_factory=set)
    changed: set[TableRef] = field(default_factory=set)
    removed: set[TableRef] = field(default_factory=set)

    def put(self, table: TrackedTable) -> None:
        self.tables[table.ref] = table
        self.changed.add(table.ref)
        self.removed.discard(table.ref)

    def remove(self, ref: TableRef) -> TrackedTable | None:
        self.unknown.discard(ref)
        self.changed.discard(ref)
        table = self.tables.pop(ref, None)
        if table is not None:
            self.removed.add(ref)
        return table

    def mark_unknown(self, ref: TableRef, reason: str) -> None:
        self.unknown.add(ref)
        self.effects.append(DataChangeUnknown(ref, reason))

    def result(self) -> SchemaUpdate:
        return SchemaUpdate(
            tables=dict(self.tables),
            effects=tuple(self.effects),
            unknown=tuple(sorted(self.unknown)),
            changed=tuple(sorted(self.changed)),
            removed=tuple(sorted(self.removed - self.changed)),
        )


def _create(state: _State, statement: CreateTable, database_defaults: DatabaseDefaults) -> None:
    ref = statement.table
    if statement.temporary:
        return  # temporary tables are not logged with row-based logging and never replace a table
    if statement.if_not_exists and ref in state.tables:
        state.effects.append(NoDataChange(ref, "CREATE TABLE IF NOT EXISTS of an existing table"))
        return
    state.remove(ref)
    state.effects.append(TableCreated(ref))
    if statement.like is not None:
        source = state.tables.get(statement.like)
        if source is None or statement.like in state.unknown:
            state.mark_unknown(ref, f"CREATE TABLE ... LIKE {statement.like}, which is not tracked")
            return
        columns = tuple(TrackedColumn(i, c.definition) for i, c in enumerate(source.columns, start=1))
        state.put(
            dataclasses.replace(
                source, database=ref.database, table=ref.table, columns=columns, next_column_id=len(columns) + 1
            )
        )
        return
    if statement.as_select:
        state.mark_unknown(ref, "CREATE TABLE ... SELECT: the columns come from the query")
        return
    charset, collation = statement.default_charset, statement.default_collation
    if charset is None and collation is None:
        charset, collation = database_defaults.get(ref.database, (None, None))
    try:
        state.put(build_table(ref, statement.columns, statement.primary_key, charset, collation))
    except ModelMismatch as exc:
        state.mark_unknown(ref, str(exc))


def _alter(state: _State, statement: AlterTable, mode: SqlMode | None) -> None:
    ref = statement.table
    table = state.tables.get(ref)
    if table is None or ref in state.unknown:
        untracked = "is not tracked" if table is None else "has an unknown schema"
        _alter_unknown(state, statement, f"ALTER TABLE of a table that {untracked}")
        return
    try:
        outcome = apply_alter(table, statement, mode)
    except ModelMismatch as exc:
        _alter_unknown(state, statement, f"ALTER TABLE does not fit the tracked schema: {exc}")
        return
    state.effects.extend(outcome.effects)
    if outcome.table.ref != ref:
        state.remove(ref)
    state.put(outcome.table)
    if outcome.unknown:
        state.unknown.add(outcome.table.ref)
    for other in outcome.other_tables:
        state.effects.append(DataChangeUnknown(other, f"rows exchanged with a partition of {ref}"))


def _alter_unknown(state: _State, statement: AlterTable, reason: str) -> None:
    """The ALTER cannot be followed: the table (under its new name, if the ALTER renames it) is unknown."""
    ref = statement.table
    state.mark_unknown(ref, reason)
    for action in statement.actions:
        if isinstance(action, RenameTableTo) and action.new != ref:
            state.remove(ref)
            state.effects.append(TableRenamed(ref, action.new))
            state.unknown.add(action.new)
            ref = action.new


def _rename(state: _State, statement: RenameTables) -> None:
    for old, new in statement.pairs:
        table = state.tables.get(old)
        was_unknown = old in state.unknown or table is None
        state.remove(old)
        state.effects.append(TableRenamed(old, new))
        if table is not None:
            state.put(dataclasses.replace(table, database=new.database, table=new.table))
        if was_unknown:
            state.unknown.add(new)


def _drop(state: _State, statement: DropTables) -> None:
    if statement.temporary:
        return
    for ref in statement.tables:
        state.remove(ref)
        state.effects.append(TableDropped(ref))


def _index(state: _State, statement: IndexDdl) -> None:
    table = state.tables.get(statement.table)
    if not statement.drops_primary_key:
        state.effects.append(NoDataChange(statement.table, "index"))
        return
    if table is None:
        state.mark_unknown(statement.table, "DROP INDEX `PRIMARY` of a table that is not tracked")
        return
    state.put(with_key(table, ()))
    state.effects.append(KeyChanged(statement.table, table.primary_key, ()))


def _database(state: _State, statement: DatabaseDdl) -> None:
    if statement.kind != "drop":
        return
    for ref in sorted(ref for ref in {*state.tables, *state.unknown} if ref.database == statement.database):
        state.remove(ref)
        state.effects.append(TableDropped(ref))


def apply_statement(
    tables: Mapping[TableRef, TrackedTable],
    statement: DdlStatement,
    *,
    sql_mode: SqlMode | int | str | None = None,
    database_defaults: DatabaseDefaults | None = None,
) -> SchemaUpdate:
    """The tracked tables after ``statement`` and what it did to each table.

    ``sql_mode``: the statement's session sql_mode (the binlog Query event carries it), when known: strict
    mode and TIME_TRUNCATE_FRACTIONAL make some outcomes exact (see :mod:`schema_effects`).
    ``database_defaults``: database -> (default character set, collation) as ``information_schema.SCHEMATA``
    says (and CREATE/ALTER DATABASE statements change: :class:`DatabaseDdl` carries them): a CREATE TABLE
    without its own defaults takes them; without them its text columns keep ``charset`` None.
    Statements that do not fit the tracked schemas (the model is stale) make those tables ``unknown``.
    ``tables`` must hold every existing table the caller follows: a CREATE TABLE IF NOT EXISTS of a
    table missing from it is taken as creating the table.
    """
    state = _State(dict(tables))
    mode = SqlMode.of(sql_mode)
    if isinstance(statement, CreateTable):
        _create(state, statement, database_defaults or {})
    elif isinstance(statement, AlterTable):
        _alter(state, statement, mode)
    elif isinstance(statement, RenameTables):
        _rename(state, statement)
    elif isinstance(statement, DropTables):
        _drop(state, statement)
    elif isinstance(statement, TruncateTable):
        state.effects.append(TableTruncated(statement.table))
    elif isinstance(statement, IndexDdl):
        _index(state, statement)
    elif isinstance(statement, DatabaseDdl):
        _database(state, statement)
    elif isinstance(statement, UnparsedDdl):
        named = statement.tables if statement.tables is not None else tuple(sorted(state.tables))
        for ref in named:
            state.mark_unknown(ref, f"statement not understood ({statement.reason})")
    else:
        assert isinstance(statement, OtherDdl)
    return state.result()
