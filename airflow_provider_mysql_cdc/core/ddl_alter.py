"""ALTER TABLE on a tracked table (pure): the new schema and the effects, the way MySQL 9.7 applies it.

Order of work (``mysql_prepare_alter_table``, checked against the server): DROP/CHANGE/MODIFY/RENAME
COLUMN/ALTER COLUMN name columns of the table before the statement; the surviving columns keep their
places; then ADD and the FIRST/AFTER of CHANGE/MODIFY are applied in statement order, AFTER naming
columns by their new names; table defaults (``CHARACTER SET``/``COLLATE``) set in the statement apply to
columns it adds or redefines; ``CONVERT TO CHARACTER SET`` applies to every text column last (TEXT types
grow so that they hold as many characters: latin1 TEXT -> utf8mb4 MEDIUMTEXT; they never shrink);
dropping a key column removes it from the primary key; key and AUTO_INCREMENT columns are NOT NULL;
RENAME TO comes last.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from airflow_provider_mysql_cdc.core.ddl_charsets import charset_of_collation, default_collation, max_bytes_per_char
from airflow_provider_mysql_cdc.core.ddl_columns import LOB_BYTES, uses_charset
from airflow_provider_mysql_cdc.core.ddl_model import TrackedColumn, TrackedTable, resolve_column, with_key
from airflow_provider_mysql_cdc.core.ddl_parser import SqlMode
from airflow_provider_mysql_cdc.core.ddl_statements import (
    AddColumn,
    AddPrimaryKey,
    AlterTable,
    ChangeColumn,
    ColumnDefinition,
    ConvertCharset,
    DropColumn,
    DropPrimaryKey,
    IndexChange,
    Partitioning,
    Position,
    RenameColumn,
    RenameTableTo,
    SetColumnDefault,
    SetColumnVisibility,
    SetTableDefaults,
    TableOption,
    TableRef,
    UnknownAction,
)
from airflow_provider_mysql_cdc.core.ddl_tokens import NAME, WORD, tokenize
from airflow_provider_mysql_cdc.core.schema_effects import (
    ColumnAdded,
    ColumnDropped,
    ColumnRenamed,
    ColumnRetyped,
    DataChangeUnknown,
    KeyChanged,
    NoDataChange,
    SchemaEffect,
    TableRenamed,
    backfill_for,
    values_preserved,
)
from airflow_provider_mysql_cdc.errors import DdlSyntaxError, ModelMismatch

_TEXT_TYPES_BY_SIZE = ("tinytext", "text", "mediumtext", "longtext")


@dataclass
class AlterOutcome:
    """The table after an ALTER, its effects, and why the result is not exact (``unknown``, if so)."""

    table: TrackedTable
    effects: list[SchemaEffect] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    #: Another table whose rows the statement changed (``EXCHANGE PARTITION ... WITH TABLE``).
    other_tables: list[TableRef] = field(default_factory=list)


def _storage(definition: ColumnDefinition) -> tuple[object, ...]:
    """What decides stored values and the staged type (not defaults, comments, visibility, position)."""
    return (
        definition.type_text,
        definition.mysql_type,
        definition.unsigned,
        definition.charset,
        definition.collation,
        definition.nullable,
        definition.generated,
        definition.auto_increment,
        definition.srid,
    )


def _table_defaults(table: TrackedTable, statement: AlterTable) -> tuple[str | None, str | None]:
    charset, collation = table.default_charset, table.default_collation
    for action in statement.actions:
        if isinstance(action, SetTableDefaults | ConvertCharset):
            if action.charset is not None:
                charset, collation = action.charset, action.collation or default_collation(action.charset)
            elif action.collation is not None:
                charset, collation = charset_of_collation(action.collation), action.collation
    return charset, collation


def _insert(columns: list[TrackedColumn], column: TrackedColumn, position: Position) -> None:
    if position is None:
        columns.append(column)
    elif position == "FIRST":
        columns.insert(0, column)
    else:
        after = position[1].lower()
        index = next((i for i, c in enumerate(columns) if c.name.lower() == after), None)
        if index is None:
            raise ModelMismatch(f"AFTER {position[1]!r}: no such column")
        columns.insert(index + 1, column)


class _AlterBuilder:
    def __init__(self, table: TrackedTable, statement: AlterTable) -> None:
        self.table = table
        self.statement = statement
        self.charset, self.collation = _table_defaults(table, statement)
        self.dropped: set[str] = set()
        self.changed: dict[str, ChangeColumn | RenameColumn] = {}
        self.altered: dict[str, list[SetColumnDefault | SetColumnVisibility]] = {}
        self.added_ids: dict[int, int] = {}  # id(action) -> column id
        self.next_id = table.next_column_id

    def existing(self, name: str, action: object) -> str:
        lowered = name.lower()
        if self.table.column(name) is None or lowered in self.dropped or lowered in self.changed:
            raise ModelMismatch(f"{type(action).__name__} of {name!r}: no such column (or named twice)")
        if lowered in self.altered and not isinstance(action, SetColumnDefault | SetColumnVisibility):
            raise ModelMismatch(f"{name!r} is altered and redefined in one statement")
        return lowered

    def classify(self) -> None:
        for action in self.statement.actions:
            if isinstance(action, DropColumn):
                self.dropped.add(self.existing(action.name, action))
            elif isinstance(action, ChangeColumn):
                self.changed[self.existing(action.old_name, action)] = action
            elif isinstance(action, RenameColumn):
                self.changed[self.existing(action.old, action)] = action
            elif isinstance(action, SetColumnDefault | SetColumnVisibility):
                self.altered.setdefault(self.existing(action.name, action), []).append(action)

    def redefine(self, column: TrackedColumn) -> TrackedColumn:
        action = self.changed[column.name.lower()]
        if isinstance(action, RenameColumn):
            return TrackedColumn(column.column_id, dataclasses.replace(column.definition, name=action.new))
        return TrackedColumn(column.column_id, resolve_column(action.column, self.charset, self.collation))

    def altered_column(self, column: TrackedColumn) -> TrackedColumn:
        definition = column.definition
        for action in self.altered.get(column.name.lower(), []):
            if isinstance(action, SetColumnDefault):
                definition = dataclasses.replace(definition, default=action.default)
            else:
                definition = dataclasses.replace(definition, invisible=action.invisible)
        return TrackedColumn(column.column_id, definition)

    def columns(self) -> list[TrackedColumn]:
        columns = []
        for column in self.table.columns:
            lowered = column.name.lower()
            if lowered in self.dropped:
                continue
            columns.append(self.redefine(column) if lowered in self.changed else self.altered_column(column))
        for action in self.statement.actions:
            if isinstance(action, AddColumn):
                added = TrackedColumn(self.next_id, resolve_column(action.column, self.charset, self.collation))
                self.added_ids[id(action)] = self.next_id
                self.next_id += 1
                _insert(columns, added, action.position)
            elif isinstance(action, ChangeColumn) and action.position is not None:
                moved = next(c for c in columns if c.column_id == self.table_id(action.old_name))
                columns.remove(moved)
                _insert(columns, moved, action.position)
        names = [column.name.lower() for column in columns]
        if len(set(names)) != len(names):
            raise ModelMismatch("two columns with the same name")
        return columns

    def table_id(self, name: str) -> int:
        column = self.table.column(name)
        assert column is not None  # checked by classify()
        return column.column_id

    def key(self, columns: list[TrackedColumn]) -> tuple[str, ...]:
        by_id = {column.column_id: column.name for column in columns}
        key = [
            by_id[c.column_id]
            for name in self.table.primary_key
            if (c := self.table.column(name)) and c.column_id in by_id
        ]
        actions = self.statement.actions
        if any(isinstance(action, DropPrimaryKey) for action in actions):
            if not self.table.primary_key:
                raise ModelMismatch("DROP PRIMARY KEY of a table without one")
            key = []
        for action in actions:
            new_key: list[str] = []
            if isinstance(action, AddPrimaryKey):
                new_key = list(action.columns)
            elif isinstance(action, AddColumn | ChangeColumn) and action.column.primary_key:
                new_key = [action.column.name]
            if new_key:
                if key:
                    raise ModelMismatch("a second primary key")
                key = new_key
        return tuple(key)

    def converted(self, columns: list[TrackedColumn]) -> list[TrackedColumn]:
        convert = next((a for a in self.statement.actions if isinstance(a, ConvertCharset)), None)
        if convert is None:
            return columns
        if convert.charset == "binary":
            raise ModelMismatch("CONVERT TO CHARACTER SET binary turns text columns into binary ones")
        collation = convert.collation or default_collation(convert.charset)
        return [TrackedColumn(c.column_id, _convert(c.definition, convert.charset, collation)) for c in columns]


def _convert(definition: ColumnDefinition, charset: str, collation: str | None) -> ColumnDefinition:
    if not uses_charset(definition):
        return definition
    converted = dataclasses.replace(definition, charset=charset, collation=collation)
    if definition.mysql_type in LOB_BYTES:
        old_per_char, new_per_char = max_bytes_per_char(definition.charset), max_bytes_per_char(charset)
        if old_per_char is None or new_per_char is None:
            raise ModelMismatch(f"CONVERT of {definition.name!r} from an unknown character set")
        needed = LOB_BYTES[definition.mysql_type] // old_per_char * new_per_char
        text_type = next(t for t in _TEXT_TYPES_BY_SIZE if LOB_BYTES[t] >= needed or t == "longtext")
        if _TEXT_TYPES_BY_SIZE.index(text_type) > _TEXT_TYPES_BY_SIZE.index(definition.mysql_type):
            converted = dataclasses.replace(converted, type_text=text_type, mysql_type=text_type)
    elif definition.mysql_type == "varchar" and (definition.length or 0) * (max_bytes_per_char(charset) or 4) > 65535:
        raise ModelMismatch(f"CONVERT of {definition.name!r}: MySQL turns a long VARCHAR into a TEXT type")
    return converted


def _column_effects(
    outcome: AlterOutcome, old_table: TrackedTable, builder: _AlterBuilder, mode: SqlMode | None
) -> list[int]:
    """Effects of the statement's actions in statement order; returns the ids of retyped columns."""
    ref, new = old_table.ref, outcome.table
    truncate = None if mode is None else "TIME_TRUNCATE_FRACTIONAL" in mode.names
    retyped: list[int] = []
    effects = outcome.effects

    def retype(old: TrackedColumn, current: TrackedColumn) -> None:
        if _storage(old.definition) != _storage(current.definition):
            preserved, reason = values_preserved(
                old.definition, current.definition, strict=mode.strict if mode else None
            )
            effects.append(
                ColumnRetyped(ref, old.column_id, current.name, old.definition, current.definition, preserved, reason)
            )
            retyped.append(old.column_id)

    for action in builder.statement.actions:
        if isinstance(action, DropColumn):
            dropped = old_table.column(action.name)
            assert dropped is not None
            effects.append(ColumnDropped(ref, dropped.column_id, dropped.name))
        elif isinstance(action, AddColumn):
            added = new.column_by_id(builder.added_ids[id(action)])
            assert added is not None
            effects.append(
                ColumnAdded(
                    ref, added.column_id, added.name, backfill_for(added.definition, truncate_fractions=truncate)
                )
            )
        elif isinstance(action, ChangeColumn | RenameColumn):
            old = old_table.column(action.old_name if isinstance(action, ChangeColumn) else action.old)
            assert old is not None
            current = new.column_by_id(old.column_id)
            assert current is not None
            if current.name != old.name:
                effects.append(ColumnRenamed(ref, old.column_id, old.name, current.name))
            retype(old, current)
            if current.name == old.name and _storage(old.definition) == _storage(current.definition):
                effects.append(NoDataChange(ref, f"column {old.name!r}: default, comment, visibility or place"))
        elif isinstance(action, SetColumnDefault | SetColumnVisibility):
            effects.append(NoDataChange(ref, f"column {action.name!r}: default or visibility"))
        elif isinstance(action, ConvertCharset):
            for current in new.columns:
                old = old_table.column_by_id(current.column_id)
                if old is not None and current.column_id not in retyped:
                    retype(old, current)
        elif isinstance(action, SetTableDefaults | IndexChange | TableOption):
            effects.append(NoDataChange(ref, type(action).__name__))
        elif isinstance(action, Partitioning):
            if action.changes_data:
                effects.append(DataChangeUnknown(ref, f"partition operation: {action.text}"))
                if action.other_table is not None:
                    outcome.other_tables.append(action.other_table)
            else:
                effects.append(NoDataChange(ref, "partitioning"))
        elif isinstance(action, UnknownAction):
            effects.append(DataChangeUnknown(ref, f"ALTER TABLE action not understood: {action.text}"))
            outcome.unknown.append(action.text)
    return retyped


def _names_in(expression: str) -> set[str]:
    """The names an expression mentions, lower case (words and quoted names: column names, but also
    function names and keywords, which only makes :func:`_generated_from_retyped` more careful)."""
    try:
        tokens = tokenize(expression)
    except DdlSyntaxError:
        return {expression.lower()}  # unreadable: it counts as naming anything it contains
    return {token.value.lower() for token in tokens if token.kind in (WORD, NAME)}


def _generated_from_retyped(new_table: TrackedTable, effects: list[SchemaEffect]) -> list[SchemaEffect]:
    """A generated column is computed again by MySQL when a column its expression reads is redefined,
    and no row event carries the new values: an in-place retype that keeps the column's own values
    (a collation, more fractional digits, an ENUM label inserted, FLOAT -> DOUBLE) can still change
    ``(s = 'ABC')``, ``CAST(dt AS CHAR)``, ``(e + 0)`` or ``LENGTH(s)``. Such a table's data change is
    unknown (its generated columns hold values MySQL chose)."""
    found: list[SchemaEffect] = []
    for effect in effects:
        if not isinstance(effect, ColumnRetyped) or not effect.values_preserved:
            continue
        names = {effect.name.lower(), effect.old.name.lower()}
        for column in new_table.columns:
            generated = column.definition.generated
            if column.column_id == effect.column_id or generated is None:
                continue
            if names & _names_in(generated.expression):
                found.append(
                    DataChangeUnknown(
                        effect.table,
                        f"generated column {column.name!r} is computed from {effect.name!r}, whose definition "
                        "changed: MySQL computes its values again, and no row event carries them",
                    )
                )
    return found


def apply_alter(table: TrackedTable, statement: AlterTable, mode: SqlMode | None) -> AlterOutcome:
    """``statement`` applied to ``table``; raises :class:`ModelMismatch` when it does not fit the table."""
    builder = _AlterBuilder(table, statement)
    builder.classify()
    columns = builder.converted(builder.columns())
    charset, collation = builder.charset, builder.collation
    new = dataclasses.replace(
        table,
        columns=tuple(columns),
        primary_key=(),
        next_column_id=builder.next_id,
        default_charset=charset,
        default_collation=collation,
    )
    new = with_key(new, builder.key(columns))
    outcome = AlterOutcome(new)
    retyped = _column_effects(outcome, table, builder, mode)
    outcome.effects.extend(_generated_from_retyped(new, outcome.effects))
    key_ids = {c.column_id for name in new.primary_key if (c := new.column(name))}
    if table.primary_key != new.primary_key or key_ids & set(retyped):
        outcome.effects.append(KeyChanged(table.ref, table.primary_key, new.primary_key))
    rename = next((a for a in reversed(statement.actions) if isinstance(a, RenameTableTo)), None)
    if rename is not None and rename.new != table.ref:
        outcome.table = dataclasses.replace(new, database=rename.new.database, table=rename.new.table)
        outcome.effects.append(TableRenamed(table.ref, rename.new))
    return outcome
