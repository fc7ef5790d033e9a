"""What a DDL statement says, as frozen dataclasses (pure): the output of
:func:`~airflow_provider_mysql_cdc.core.ddl_parser.parse_ddl`.

Names are case-preserving as written; MySQL compares column names case-insensitively (table names
depend on ``lower_case_table_names``; they are kept as written). No network, Airflow, Spark, PyMySQL or
pyarrow import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

#: Every MySQL type name a column may map to (equal to ``core.types.MYSQL_TYPES``, which imports pyarrow).
MYSQL_TYPE_NAMES = frozenset(
    {
        *("tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "bit"),
        *("char", "varchar", "tinytext", "text", "mediumtext", "longtext"),
        *("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"),
        *("date", "datetime", "timestamp", "time", "year", "enum", "set", "json", "geometry", "vector"),
    }
)
#: Character string types (values are text in the column's character set).
CHARACTER_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
#: Binary string types.
BYTE_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
#: Integer types in increasing width.
INTEGER_RANKS = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}


@dataclass(frozen=True, order=True)
class TableRef:
    """A table: database (schema) and table name as written (unquoted)."""

    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


@dataclass(frozen=True)
class DefaultValue:
    """A column's ``DEFAULT`` clause.

    ``kind``: ``null``; ``string`` (``text`` = the characters, unescaped, adjacent literals joined,
    ``charset`` = an introducer's charset (``_latin1'x'``) or ``utf8mb3`` for ``N'x'``); ``number``
    (``text`` as written, sign included: ``-5``, ``1.50``, ``.5``, ``1e3``); ``hex`` / ``bit``
    (``text`` = the bytes as lower-case hex); ``bool`` (``TRUE``/``FALSE``); ``current_timestamp``
    (``text`` e.g. ``CURRENT_TIMESTAMP(3)``: ``NOW()``, ``LOCALTIME``... included); ``expression``
    (``text`` = the parenthesized expression as written, parentheses included).
    """

    kind: Literal["null", "string", "number", "hex", "bit", "bool", "current_timestamp", "expression"]
    text: str = ""
    charset: str | None = None


@dataclass(frozen=True)
class GeneratedColumn:
    """``[GENERATED ALWAYS] AS (expression) [VIRTUAL|STORED]``: the expression without its parentheses."""

    expression: str
    stored: bool


@dataclass(frozen=True)
class ColumnDefinition:
    """One column as a statement defines it (see :mod:`~airflow_provider_mysql_cdc.core.ddl_columns`)."""

    name: str
    #: Normalized type as ``information_schema.COLUMNS.COLUMN_TYPE`` prints it: ``varchar(10)``,
    #: ``int unsigned``, ``tinyint(1)``, ``decimal(10,2)``, ``enum('a','b')``, ``datetime(6)``.
    type_text: str
    #: One of :data:`MYSQL_TYPE_NAMES` (spatial types -> ``geometry``).
    mysql_type: str
    unsigned: bool = False
    #: DECIMAL(precision, scale); FLOAT/DOUBLE(M, D) when written.
    precision: int | None = None
    scale: int | None = None
    #: Fractional-second digits of DATETIME, TIMESTAMP and TIME (0 when not written).
    fsp: int | None = None
    #: CHAR/VARCHAR length in characters, BINARY/VARBINARY in bytes, BIT in bits, VECTOR dimensions.
    length: int | None = None
    #: Character set and collation as written (None: inherited from the table); a tracked table's
    #: columns carry the resolved values where the table's defaults are known.
    charset: str | None = None
    collation: str | None = None
    #: The BINARY attribute without COLLATE: the ``_bin`` collation of the column's character set.
    binary_collation: bool = False
    enum_values: tuple[str, ...] = ()
    set_values: tuple[str, ...] = ()
    nullable: bool = True
    #: None: no DEFAULT clause.
    default: DefaultValue | None = None
    generated: GeneratedColumn | None = None
    invisible: bool = False
    auto_increment: bool = False
    #: Inline ``PRIMARY KEY`` (or ``KEY``) in the column definition; in a tracked table: the column is
    #: part of the table's primary key.
    primary_key: bool = False
    #: Inline ``UNIQUE [KEY]`` (and ``SERIAL``).
    unique: bool = False
    on_update_current_timestamp: bool = False
    #: ``SRID n`` of a spatial column.
    srid: int | None = None
    comment: str | None = None


#: Where an added or changed column goes: None (end, or unchanged for CHANGE/MODIFY), FIRST, AFTER name.
Position: TypeAlias = "Literal['FIRST'] | tuple[Literal['AFTER'], str] | None"


@dataclass(frozen=True)
class AddColumn:
    """``ADD [COLUMN] definition [FIRST|AFTER c]``."""

    column: ColumnDefinition
    position: Position = None


@dataclass(frozen=True)
class DropColumn:
    """``DROP [COLUMN] name``."""

    name: str


@dataclass(frozen=True)
class ChangeColumn:
    """``CHANGE [COLUMN] old definition`` or ``MODIFY [COLUMN] definition`` (``old_name`` = the name)."""

    old_name: str
    column: ColumnDefinition
    position: Position = None


@dataclass(frozen=True)
class RenameColumn:
    """``RENAME COLUMN old TO new``."""

    old: str
    new: str


@dataclass(frozen=True)
class SetColumnDefault:
    """``ALTER [COLUMN] c SET DEFAULT ...`` (``default``) or ``DROP DEFAULT`` (None)."""

    name: str
    default: DefaultValue | None


@dataclass(frozen=True)
class SetColumnVisibility:
    """``ALTER [COLUMN] c SET VISIBLE|INVISIBLE``."""

    name: str
    invisible: bool


@dataclass(frozen=True)
class AddPrimaryKey:
    """``ADD [CONSTRAINT [s]] PRIMARY KEY (columns)`` (prefix lengths and ASC/DESC dropped)."""

    columns: tuple[str, ...]


@dataclass(frozen=True)
class DropPrimaryKey:
    """``DROP PRIMARY KEY`` (also ``DROP INDEX `PRIMARY```)."""


@dataclass(frozen=True)
class RenameTableTo:
    """``RENAME [TO|AS] new``."""

    new: TableRef


@dataclass(frozen=True)
class ConvertCharset:
    """``CONVERT TO CHARACTER SET charset [COLLATE collation]``: every text column is converted."""

    charset: str
    collation: str | None


@dataclass(frozen=True)
class SetTableDefaults:
    """``[DEFAULT] CHARACTER SET = x [COLLATE = y]`` without CONVERT: the defaults of new columns only."""

    charset: str | None
    collation: str | None


@dataclass(frozen=True)
class IndexChange:
    """Index, key (other than the primary key), foreign key, CHECK or constraint change."""

    text: str


@dataclass(frozen=True)
class TableOption:
    """ENGINE, COMMENT, AUTO_INCREMENT, ROW_FORMAT, ALGORITHM, LOCK, FORCE, ORDER BY, ...; ``engine``: the
    storage engine an ``ENGINE=`` option names (upper case); ``union``: the tables a MERGE table's
    ``UNION=(...)`` names, as written ((qualifier or None, name)): unqualified ones are in the session's
    database."""

    text: str
    engine: str | None = None
    union: tuple[tuple[str | None, str], ...] = ()


@dataclass(frozen=True)
class Partitioning:
    """A partitioning clause; ``changes_data`` for DROP/TRUNCATE/EXCHANGE/DISCARD/IMPORT PARTITION,
    ``other_table`` the table of ``EXCHANGE PARTITION p WITH TABLE other``."""

    text: str
    changes_data: bool = False
    other_table: TableRef | None = None


@dataclass(frozen=True)
class UnknownAction:
    """An ALTER TABLE action that is not understood (or whose effect on the rows is unknown)."""

    text: str


AlterAction: TypeAlias = (
    AddColumn
    | DropColumn
    | ChangeColumn
    | RenameColumn
    | SetColumnDefault
    | SetColumnVisibility
    | AddPrimaryKey
    | DropPrimaryKey
    | RenameTableTo
    | ConvertCharset
    | SetTableDefaults
    | IndexChange
    | TableOption
    | Partitioning
    | UnknownAction
)


@dataclass(frozen=True)
class CreateTable:
    """``CREATE [TEMPORARY] TABLE``.

    ``like``: ``CREATE TABLE t LIKE src``. ``as_select``: the statement carries a query, so the columns
    are not all known from its text (clients send that form; with GTIDs and row logging MySQL logs
    instead the full column list followed by ``START TRANSACTION``: ``start_transaction``, and the
    rows as row events of the same transaction).
    """

    table: TableRef
    columns: tuple[ColumnDefinition, ...] = ()
    primary_key: tuple[str, ...] = ()
    if_not_exists: bool = False
    temporary: bool = False
    like: TableRef | None = None
    as_select: bool = False
    default_charset: str | None = None
    default_collation: str | None = None
    start_transaction: bool = False
    #: The storage engine its ``ENGINE=`` option names (upper case); None when it names none (the
    #: session's ``default_storage_engine``, which the binlog does not carry, then decides; with ``LIKE``,
    #: the source's engine).
    engine: str | None = None
    #: It gives the table a foreign key whose ``ON DELETE``/``ON UPDATE`` changes the table's rows
    #: (``CASCADE``, ``SET NULL``, ``SET DEFAULT``; ``core.foreign_keys``).
    cascading_foreign_key: bool = False


@dataclass(frozen=True)
class AlterTable:
    """``ALTER TABLE t action, ...``; ``cascading_foreign_key``: it adds a foreign key whose ``ON DELETE``/
    ``ON UPDATE`` changes the table's rows (``CASCADE``, ``SET NULL``, ``SET DEFAULT``)."""

    table: TableRef
    actions: tuple[AlterAction, ...]
    cascading_foreign_key: bool = False


@dataclass(frozen=True)
class RenameTables:
    """``RENAME TABLE a TO b, c TO d`` (performed left to right)."""

    pairs: tuple[tuple[TableRef, TableRef], ...]


@dataclass(frozen=True)
class DropTables:
    """``DROP [TEMPORARY] TABLE [IF EXISTS] a, b``."""

    tables: tuple[TableRef, ...]
    temporary: bool = False
    if_exists: bool = False


@dataclass(frozen=True)
class TruncateTable:
    """``TRUNCATE [TABLE] t``."""

    table: TableRef


@dataclass(frozen=True)
class IndexDdl:
    """``CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX ... ON t`` / ``DROP INDEX i ON t``; ``drops_primary_key``
    for ``DROP INDEX `PRIMARY` ON t``."""

    table: TableRef
    text: str
    drops_primary_key: bool = False


@dataclass(frozen=True)
class DatabaseDdl:
    """``CREATE``/``DROP``/``ALTER DATABASE`` (or ``SCHEMA``); ``charset``/``collation``: the defaults it
    sets for tables created later (None: not set by this statement)."""

    kind: Literal["create", "drop", "alter"]
    database: str
    charset: str | None = None
    collation: str | None = None


@dataclass(frozen=True)
class OtherDdl:
    """A statement that changes no table's rows or columns (views, triggers, routines, events,
    accounts, grants, tablespaces, ANALYZE/OPTIMIZE/REPAIR/CHECK TABLE, transaction control)."""

    text: str


@dataclass(frozen=True)
class UnparsedDdl:
    """A statement that may change tables but was not understood exactly; ``tables`` as far as known
    (None: not even that). Its caller must re-read those tables' schemas (or stop), never guess."""

    text: str
    reason: str
    tables: tuple[TableRef, ...] | None = None


DdlStatement: TypeAlias = (
    CreateTable
    | AlterTable
    | RenameTables
    | DropTables
    | TruncateTable
    | IndexDdl
    | DatabaseDdl
    | OtherDdl
    | UnparsedDdl
)
