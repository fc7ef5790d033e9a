"""The MySQL DDL tokenizer and parser (pure): statements as the binlog logs them -> dataclasses."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_mysql_cdc.core.ddl import DdlTarget, ddl_targets
from airflow_provider_mysql_cdc.core.ddl_parser import SqlMode, parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import (
    MYSQL_TYPE_NAMES,
    AddColumn,
    AddPrimaryKey,
    AlterTable,
    ChangeColumn,
    ColumnDefinition,
    ConvertCharset,
    CreateTable,
    DatabaseDdl,
    DefaultValue,
    DropColumn,
    DropPrimaryKey,
    DropTables,
    GeneratedColumn,
    IndexChange,
    IndexDdl,
    OtherDdl,
    Partitioning,
    RenameColumn,
    RenameTables,
    RenameTableTo,
    SetColumnDefault,
    SetColumnVisibility,
    SetTableDefaults,
    TableOption,
    TableRef,
    TruncateTable,
    UnknownAction,
    UnparsedDdl,
)
from airflow_provider_mysql_cdc.core.ddl_tokens import BIT, HEX, NAME, NUMBER, STRING, WORD, tokenize
from airflow_provider_mysql_cdc.errors import DdlSyntaxError

APP = "app"


def ref(table: str, database: str = APP) -> TableRef:
    return TableRef(database, table)


def column_of(type_sql: str, mode: str | None = None) -> ColumnDefinition:
    statement = parse_ddl(f"ALTER TABLE t ADD COLUMN c {type_sql}", APP, sql_mode=mode)
    assert isinstance(statement, AlterTable), statement
    action = statement.actions[0]
    assert isinstance(action, AddColumn)
    return action.column


# -- tokens ---------------------------------------------------------------------------------------


def kinds(sql: str, **options: bool) -> list[tuple[str, str]]:
    return [(token.kind, token.value) for token in tokenize(sql, **options)[:-1]]


def test_comments_are_skipped_and_versioned_comments_count() -> None:
    sql = "/* a */ ALTER -- b\n TABLE # c\n /*!80013 t */ /*!99999 never */ /*! x */ /*+ hint */"
    assert kinds(sql) == [(WORD, "ALTER"), (WORD, "TABLE"), (WORD, "t"), (WORD, "x")]


def test_double_dash_needs_a_space_to_start_a_comment() -> None:
    assert kinds("1--2") == [(NUMBER, "1"), ("punct", "-"), ("punct", "-"), (NUMBER, "2")]
    assert kinds("1 -- 2") == [(NUMBER, "1")]


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("'it''s'", "it's"),
        ("'a\\'b'", "a'b"),
        ("'\\0\\n\\r\\t\\Z\\b\\\\'", "\0\n\r\t\x1a\b\\"),
        ("'\\%\\_\\x'", "\\%\\_x"),
        ('"dq ""x"""', 'dq "x"'),
        ("'ñ 日本 😀'", "ñ 日本 😀"),
    ],
)
def test_string_literals(sql: str, value: str) -> None:
    assert kinds(sql) == [(STRING, value)]


def test_backslashes_are_plain_under_no_backslash_escapes() -> None:
    assert kinds("'a\\b'", backslash_escapes=False) == [(STRING, "a\\b")]


def test_hex_bit_and_national_literals() -> None:
    tokens = tokenize("X'4142' 0x0A1 b'101' 0b1 N'ñ' x''")
    assert [(t.kind, t.value, t.charset) for t in tokens[:-1]] == [
        (HEX, "4142", None),
        (HEX, "00a1", None),
        (BIT, "05", None),
        (BIT, "01", None),
        (STRING, "ñ", "utf8mb3"),
        (HEX, "", None),
    ]


def test_names_quoted_unicode_and_starting_with_digits() -> None:
    assert kinds("`a``b` `x.y` café 1abc 1e5 db.1t $x") == [
        (NAME, "a`b"),
        (NAME, "x.y"),
        (WORD, "café"),
        (WORD, "1abc"),
        (NUMBER, "1e5"),
        (WORD, "db"),
        ("punct", "."),
        (WORD, "1t"),
        (WORD, "$x"),
    ]


def test_ansi_quotes_make_double_quotes_names() -> None:
    assert kinds('"a ""b"""', ansi_quotes=True) == [(NAME, 'a "b"')]


@pytest.mark.parametrize("sql", ["'open", "`open", "/* open", "/*!80000 open", "X'4'"])
def test_unclosed_literals_and_comments_are_errors(sql: str) -> None:
    with pytest.raises(DdlSyntaxError):
        tokenize(sql)


# -- column types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "type_text", "mysql_type"),
    [
        ("INT(11)", "int", "int"),
        ("INTEGER UNSIGNED", "int unsigned", "int"),
        ("INT(5) ZEROFILL", "int(5) unsigned zerofill", "int"),
        ("BIGINT ZEROFILL", "bigint(20) unsigned zerofill", "bigint"),
        ("TINYINT(1)", "tinyint(1)", "tinyint"),
        ("TINYINT(1) UNSIGNED", "tinyint unsigned", "tinyint"),
        ("BOOLEAN", "tinyint(1)", "tinyint"),
        ("MIDDLEINT", "mediumint", "mediumint"),
        ("INT8 SIGNED", "bigint", "bigint"),
        ("DECIMAL", "decimal(10,0)", "decimal"),
        ("NUMERIC(7)", "decimal(7,0)", "decimal"),
        ("FIXED(4,1) UNSIGNED", "decimal(4,1) unsigned", "decimal"),
        ("FLOAT(24)", "float", "float"),
        ("FLOAT(25)", "double", "double"),
        ("FLOAT(7,3)", "float(7,3)", "float"),
        ("DOUBLE PRECISION", "double", "double"),
        ("REAL(8,2)", "double(8,2)", "double"),
        ("DOUBLE ZEROFILL", "double unsigned zerofill", "double"),
        ("BIT", "bit(1)", "bit"),
        ("CHAR", "char(1)", "char"),
        ("CHARACTER VARYING(9)", "varchar(9)", "varchar"),
        ("CHAR(10) BYTE", "binary(10)", "binary"),
        ("BINARY", "binary(1)", "binary"),
        ("VARCHAR(5) CHARACTER SET binary", "varbinary(5)", "varbinary"),
        ("TEXT CHARSET binary", "blob", "blob"),
        ("LONG", "mediumtext", "mediumtext"),
        ("LONG VARCHAR", "mediumtext", "mediumtext"),
        ("LONG VARBINARY", "mediumblob", "mediumblob"),
        ("BLOB(255)", "tinyblob", "tinyblob"),
        ("BLOB(256)", "blob", "blob"),
        ("TEXT(100)", "text(100)", "text"),
        ("YEAR(4)", "year", "year"),
        ("DATETIME(0)", "datetime", "datetime"),
        ("TIMESTAMP(6)", "timestamp(6)", "timestamp"),
        ("GEOMETRYCOLLECTION", "geomcollection", "geometry"),
        ("POINT SRID 4326", "point", "geometry"),
        ("VECTOR", "vector(2048)", "vector"),
        ("ENUM('a''b', 'c\\\\d', 'e  ')", "enum('a''b','c\\\\d','e')", "enum"),
        ("SET('x', 'y')", "set('x','y')", "set"),
        ("SERIAL", "bigint unsigned", "bigint"),
    ],
)
def test_types_are_normalized_as_column_type_prints_them(written: str, type_text: str, mysql_type: str) -> None:
    column = column_of(written)
    assert (column.type_text, column.mysql_type) == (type_text, mysql_type)
    assert column.mysql_type in MYSQL_TYPE_NAMES


def test_type_name_set_matches_the_staging_type_map() -> None:
    from airflow_provider_mysql_cdc.core.types import MYSQL_TYPES

    assert MYSQL_TYPE_NAMES == MYSQL_TYPES


def test_character_set_attributes_as_written() -> None:
    assert (column_of("NCHAR(4)").charset, column_of("NVARCHAR(2)").charset) == ("utf8mb3", "utf8mb3")
    assert column_of("VARCHAR(5) ASCII").charset == "latin1"
    assert column_of("VARCHAR(5) UNICODE").charset == "ucs2"
    assert column_of("CHAR(3) CHARSET utf8 COLLATE utf8_bin").collation == "utf8mb3_bin"
    binary = column_of("VARCHAR(5) BINARY")
    assert (binary.charset, binary.collation, binary.binary_collation) == (None, None, True)
    inherited = column_of("TEXT")
    assert (inherited.charset, inherited.collation) == (None, None)


def test_real_is_float_under_real_as_float() -> None:
    assert column_of("REAL").type_text == "double"
    assert column_of("REAL", "REAL_AS_FLOAT").type_text == "float"


def test_serial_and_attributes() -> None:
    assert column_of("SERIAL") == ColumnDefinition(
        "c", "bigint unsigned", "bigint", unsigned=True, nullable=False, auto_increment=True, unique=True
    )
    column = column_of(
        "INT NOT NULL AUTO_INCREMENT UNIQUE KEY COMMENT 'x' INVISIBLE COLUMN_FORMAT FIXED "
        "ENGINE_ATTRIBUTE '{}' CHECK (c > 0) NOT ENFORCED REFERENCES p (id) ON DELETE SET NULL"
    )
    assert (column.nullable, column.auto_increment, column.unique, column.invisible, column.comment) == (
        False,
        True,
        True,
        True,
        "x",
    )
    key = column_of("INT KEY")
    assert (key.primary_key, key.nullable) == (True, False)


def test_generated_columns() -> None:
    assert column_of("INT AS (a + 1)").generated == GeneratedColumn("a + 1", stored=False)
    assert column_of("INT GENERATED ALWAYS AS ((a * 2)) STORED NOT NULL").generated == GeneratedColumn("(a * 2)", True)


@pytest.mark.parametrize(
    ("written", "default"),
    [
        ("NULL", DefaultValue("null")),
        ("-5", DefaultValue("number", "-5")),
        ("- - 5", DefaultValue("number", "5")),
        ("+1.50", DefaultValue("number", "1.50")),
        (".5e3", DefaultValue("number", ".5e3")),
        ("'a' 'b' \"c\"", DefaultValue("string", "abc")),
        ("_latin1'x'", DefaultValue("string", "x", "latin1")),
        ("_utf8mb4 X'41'", DefaultValue("hex", "41", "utf8mb4")),
        ("N'ñ'", DefaultValue("string", "ñ", "utf8mb3")),
        ("0x0A", DefaultValue("hex", "0a")),
        ("b'101'", DefaultValue("bit", "05")),
        ("TRUE", DefaultValue("bool", "TRUE")),
        ("CURRENT_TIMESTAMP", DefaultValue("current_timestamp", "CURRENT_TIMESTAMP")),
        ("NOW(3)", DefaultValue("current_timestamp", "CURRENT_TIMESTAMP(3)")),
        ("LOCALTIMESTAMP()", DefaultValue("current_timestamp", "CURRENT_TIMESTAMP")),
        ("(CONCAT('a', \n b))", DefaultValue("expression", "(CONCAT('a', b))")),
    ],
)
def test_defaults(written: str, default: DefaultValue) -> None:
    assert column_of(f"VARCHAR(20) DEFAULT {written}").default == default


# -- statements -----------------------------------------------------------------------------------


def test_create_table_with_keys_options_and_partitions() -> None:
    statement = parse_ddl(
        "CREATE TABLE IF NOT EXISTS `db`.`t` (a INT NOT NULL, `b c` VARCHAR(3), CONSTRAINT pk PRIMARY KEY "
        "USING BTREE (`b c`(2) DESC, a), UNIQUE KEY u (a), FOREIGN KEY (a) REFERENCES p (id), CHECK (a > 0)) "
        "ENGINE=InnoDB, DEFAULT CHARSET = latin1 COLLATE latin1_bin COMMENT 'x' PARTITION BY HASH (a) PARTITIONS 2;",
        APP,
    )
    assert isinstance(statement, CreateTable)
    assert statement.table == ref("t", "db")
    assert [column.name for column in statement.columns] == ["a", "b c"]
    assert statement.primary_key == ("b c", "a")
    assert (statement.if_not_exists, statement.default_charset, statement.default_collation) == (
        True,
        "latin1",
        "latin1_bin",
    )


def test_create_table_forms_like_select_and_the_logged_select() -> None:
    assert parse_ddl("CREATE TABLE n LIKE o", APP) == CreateTable(ref("n"), like=ref("o"))
    assert parse_ddl("CREATE TABLE n (LIKE x.o)", APP) == CreateTable(ref("n"), like=ref("o", "x"))
    selected = parse_ddl("CREATE TABLE n (PRIMARY KEY (id)) IGNORE AS SELECT 1 AS id", APP)
    assert isinstance(selected, CreateTable) and selected.as_select and selected.primary_key == ("id",)
    assert parse_ddl("CREATE TEMPORARY TABLE n SELECT 1", APP) == CreateTable(ref("n"), temporary=True, as_select=True)
    logged = parse_ddl("CREATE TABLE `s` (\n  `id` int NOT NULL\n) START TRANSACTION ENGINE=InnoDB", APP)
    assert isinstance(logged, CreateTable) and logged.start_transaction and not logged.as_select
    assert [column.name for column in logged.columns] == ["id"]


def test_alter_table_actions() -> None:
    statement = parse_ddl(
        "ALTER ONLINE IGNORE TABLE t ADD COLUMN a INT FIRST, ADD b INT AFTER `a`, ADD COLUMN (c INT, d INT), "
        "DROP COLUMN e, DROP f, CHANGE g h BIGINT, MODIFY COLUMN i TEXT, RENAME COLUMN j TO k, "
        "ALTER COLUMN l SET DEFAULT 1, ALTER m DROP DEFAULT, ALTER COLUMN n SET INVISIBLE, DROP PRIMARY KEY, "
        "ADD CONSTRAINT p PRIMARY KEY (a), ADD UNIQUE INDEX u (b), DROP INDEX `PRIMARY`, RENAME INDEX u TO v, "
        "CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, DEFAULT CHARACTER SET = latin1, "
        "ALGORITHM=INSTANT, LOCK = NONE, FORCE, ENGINE InnoDB COMMENT 'x', RENAME TO x.t2",
        APP,
    )
    assert isinstance(statement, AlterTable)
    actions = statement.actions
    names = [type(action).__name__ for action in actions]
    assert names == [
        "AddColumn", "AddColumn", "AddColumn", "AddColumn", "DropColumn", "DropColumn", "ChangeColumn",
        "ChangeColumn", "RenameColumn", "SetColumnDefault", "SetColumnDefault", "SetColumnVisibility",
        "DropPrimaryKey", "AddPrimaryKey", "IndexChange", "DropPrimaryKey", "IndexChange", "ConvertCharset",
        "SetTableDefaults", "TableOption", "TableOption", "TableOption", "TableOption", "TableOption",
        "RenameTableTo",
    ]  # fmt: skip
    assert actions[0] == AddColumn(ColumnDefinition("a", "int", "int"), "FIRST")
    assert isinstance(actions[1], AddColumn) and actions[1].position == ("AFTER", "a")
    assert actions[6] == ChangeColumn("g", ColumnDefinition("h", "bigint", "bigint"))
    assert isinstance(actions[7], ChangeColumn) and actions[7].old_name == actions[7].column.name == "i"
    assert actions[8] == RenameColumn("j", "k")
    assert actions[9] == SetColumnDefault("l", DefaultValue("number", "1"))
    assert actions[10] == SetColumnDefault("m", None)
    assert actions[11] == SetColumnVisibility("n", invisible=True)
    assert (actions[12], actions[13]) == (DropPrimaryKey(), AddPrimaryKey(("a",)))
    assert actions[17] == ConvertCharset("utf8mb4", "utf8mb4_bin")
    assert actions[18] == SetTableDefaults("latin1", None)
    assert actions[22] == TableOption("ENGINE InnoDB", "INNODB")
    assert actions[24] == RenameTableTo(ref("t2", "x"))
    assert isinstance(actions[4], DropColumn) and isinstance(actions[14], IndexChange)


@pytest.mark.parametrize(
    ("sql", "action"),
    [
        ("ALTER TABLE t DISCARD TABLESPACE", UnknownAction("DISCARD TABLESPACE")),
        ("ALTER TABLE t CONVERT TO CHARACTER SET DEFAULT", UnknownAction("CONVERT TO CHARACTER SET DEFAULT")),
        ("ALTER TABLE t TRUNCATE PARTITION p0, p1", Partitioning("TRUNCATE PARTITION p0, p1", changes_data=True)),
        ("ALTER TABLE t ANALYZE PARTITION ALL", Partitioning("ANALYZE PARTITION ALL")),
        ("ALTER TABLE t REMOVE PARTITIONING", Partitioning("REMOVE PARTITIONING")),
        (
            "ALTER TABLE t EXCHANGE PARTITION p WITH TABLE o.u WITHOUT VALIDATION",
            Partitioning("EXCHANGE PARTITION p WITH TABLE o.u WITHOUT VALIDATION", True, ref("u", "o")),
        ),
    ],
)
def test_alter_actions_that_change_rows_or_are_not_understood(sql: str, action: object) -> None:
    statement = parse_ddl(sql, APP)
    assert isinstance(statement, AlterTable) and statement.actions == (action,)


@pytest.mark.parametrize(
    ("sql", "tables", "reason"),
    [
        ("ALTER TABLE t ENGINE=BLACKHOLE", ("t",), "ENGINE=BLACKHOLE: the table keeps no rows"),
        ("CREATE TABLE t (id INT) TYPE = blackhole", ("t",), "TYPE = blackhole: the table keeps no rows"),
        (
            "CREATE TABLE m (id INT NOT NULL, KEY (id)) ENGINE=MERGE UNION=(t1, o.t2) INSERT_METHOD=LAST",
            ("m", "t1", "o.t2"),
            "ENGINE=MERGE: the table shows the rows of the tables of its UNION",
        ),
        ("ALTER TABLE m ENGINE=MRG_MyISAM UNION=(t3, `t 4`)", ("m", "t3", "t 4"), "ENGINE=MRG_MyISAM: the table"),
        ("ALTER TABLE m UNION=(t3)", ("m", "t3"), "a MERGE table's UNION changed"),
        (
            "CREATE TABLE f (id INT) ENGINE=FEDERATED CONNECTION='mysql://u@h:3306/db/t'",
            ("f",),
            "ENGINE=FEDERATED: the table shows the rows of a table on another server",
        ),
    ],
)
def test_tables_in_engines_whose_rows_their_row_events_do_not_describe(
    sql: str, tables: tuple[str, ...], reason: str
) -> None:
    """BLACKHOLE keeps no rows; a MERGE table shows its UNION's rows, and writes through it are logged as
    its own: the statement is not followed, and names the MERGE table's UNION too."""
    statement = parse_ddl(sql, APP)
    assert isinstance(statement, UnparsedDdl) and statement.reason.startswith(reason), statement
    expected = tuple(ref(*reversed(name.split("."))) if "." in name else ref(name) for name in tables)
    assert statement.tables == expected


SWAP = ((ref("a"), ref("tmp")), (ref("b"), ref("a")), (ref("tmp"), ref("b")))
CREATE_INDEX = "CREATE UNIQUE INDEX ix USING BTREE ON t (a) ALGORITHM=INPLACE"


@pytest.mark.parametrize(
    ("sql", "statement"),
    [
        ("DROP TABLE `a`,`other`.`b` /* generated by server */", DropTables((ref("a"), ref("b", "other")))),
        ("DROP TABLE IF EXISTS `c`,`x` /* generated by server */", DropTables((ref("c"), ref("x")), if_exists=True)),
        ("DROP TEMPORARY TABLES IF EXISTS t CASCADE", DropTables((ref("t"),), temporary=True, if_exists=True)),
        ("RENAME TABLE a TO tmp, b TO a, tmp TO b", RenameTables(SWAP)),
        ("/* app:billing */ TRUNCATE TABLE b", TruncateTable(ref("b"))),
        ("truncate `x`.`y`;", TruncateTable(ref("y", "x"))),
        (CREATE_INDEX, IndexDdl(ref("t"), CREATE_INDEX)),
        ("DROP INDEX `PRIMARY` ON t", IndexDdl(ref("t"), "DROP INDEX `PRIMARY` ON t", drops_primary_key=True)),
        ("CREATE DATABASE IF NOT EXISTS d DEFAULT CHARACTER SET = latin1", DatabaseDdl("create", "d", "latin1")),
        ("ALTER DATABASE COLLATE utf8mb4_bin", DatabaseDdl("alter", APP, None, "utf8mb4_bin")),
        ("DROP SCHEMA IF EXISTS d", DatabaseDdl("drop", "d")),
    ],
)
def test_statements(sql: str, statement: object) -> None:
    assert parse_ddl(sql, APP) == statement


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS SELECT 1",
        "CREATE DEFINER=`root`@`%` TRIGGER trg BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
        "CREATE OR REPLACE VIEW v AS SELECT 1",
        "DROP VIEW v",
        "CREATE USER 'x'@'%' IDENTIFIED BY 'secret'",
        "GRANT SELECT ON *.* TO 'x'@'%'",
        "RENAME USER a TO b",
        "OPTIMIZE TABLE t",
        "ANALYZE TABLE t UPDATE HISTOGRAM ON a",
        "CREATE SPATIAL REFERENCE SYSTEM 4120 NAME 'x' DEFINITION 'y'",
        "BEGIN",
    ],
)
def test_statements_that_change_no_table(sql: str) -> None:
    assert isinstance(parse_ddl(sql, APP), OtherDdl)


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("ALTER TABLE t ADD COLUMN c FROBNICATE", (ref("t"),)),
        ("ALTER TABLE t RENAME TO u, ADD COLUMN c FROBNICATE", None),
        ("CREATE TABLE t (a INT) WEIRD_OPTION=1", (ref("t"),)),
        ("RENAME TABLE broken", None),
        ("INSERT INTO t VALUES (1)", None),
        ("CREATE OR REPLACE TABLE t (a INT)", None),
        ("ALTER TABLE t ADD COLUMN a INT b", (ref("t"),)),
        ("", None),
    ],
)
def test_unparsed_statements_name_tables_only_when_certain(sql: str, tables: tuple[TableRef, ...] | None) -> None:
    statement = parse_ddl(sql, APP)
    assert isinstance(statement, UnparsedDdl)
    assert statement.tables == tables and statement.reason


def test_ansi_quotes_and_backslashes_follow_the_sql_mode() -> None:
    sql = 'CREATE TABLE "q" ("a b" VARCHAR(3) DEFAULT \'a\\b\')'
    assert isinstance(parse_ddl(sql, APP), UnparsedDdl)
    statement = parse_ddl(sql, APP, sql_mode=0x100004)
    assert isinstance(statement, CreateTable) and statement.table == ref("q")
    assert statement.columns[0].name == "a b" and statement.columns[0].default == DefaultValue("string", "a\\b")


def test_sql_mode_from_the_binlog_bitmask_and_from_text() -> None:
    default = SqlMode.of(0x45A00020)
    assert default is not None and default.strict
    assert default.names >= {"STRICT_TRANS_TABLES", "NO_ZERO_DATE", "ONLY_FULL_GROUP_BY"}
    assert SqlMode.of("ansi") == SqlMode.of(0x40000 | 0x2F)
    traditional = SqlMode.of("TRADITIONAL")
    assert traditional is not None and traditional.strict
    lax = SqlMode.of("")
    assert lax is not None and not lax.strict
    assert SqlMode.of(None) is None


# -- ddl_targets on the parser ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "targets"),
    [
        ("/* app:billing */ TRUNCATE TABLE t", (DdlTarget(APP, "t"),)),
        ("ALTER TABLE t RENAME TO o.u", (DdlTarget(APP, "t"), DdlTarget("o", "u"))),
        ("ALTER TABLE t EXCHANGE PARTITION p WITH TABLE u", (DdlTarget(APP, "t"), DdlTarget(APP, "u"))),
        ("/*!80000 ALTER TABLE */ t ADD c INT", (DdlTarget(APP, "t"),)),
        ("DROP INDEX i ON o.t", (DdlTarget("o", "t"),)),
        ("ALTER TABLE t FROBNICATE", (DdlTarget(APP, "t"),)),
    ],
)
def test_ddl_targets_follow_the_parser(sql: str, targets: tuple[DdlTarget, ...]) -> None:
    assert ddl_targets(sql, APP) == targets


# -- properties -----------------------------------------------------------------------------------

_NAMES = st.text(st.characters(exclude_characters="\0", exclude_categories=["Cs"]), min_size=1, max_size=20)


def backquote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@given(_NAMES, _NAMES, _NAMES)
@settings(max_examples=200)
def test_backquoted_names_round_trip(database: str, table: str, column: str) -> None:
    statement = parse_ddl(f"ALTER TABLE {backquote(database)}.{backquote(table)} ADD {backquote(column)} INT", "x")
    assert isinstance(statement, AlterTable) and statement.table == TableRef(database, table)
    action = statement.actions[0]
    assert isinstance(action, AddColumn) and action.column.name == column


def quote_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=30))
@settings(max_examples=200)
def test_string_defaults_round_trip(text: str) -> None:
    default = column_of(f"VARCHAR(40) DEFAULT {quote_string(text)}").default
    assert default == DefaultValue("string", text)


@given(st.text(max_size=80))
@settings(max_examples=300)
def test_parse_ddl_never_raises(sql: str) -> None:
    parse_ddl(sql, APP)
    parse_ddl("ALTER TABLE t " + sql, APP)
    parse_ddl("CREATE TABLE t (" + sql, APP)


def test_the_ddl_modules_import_no_driver_arrow_or_airflow() -> None:
    code = (
        "import sys\n"
        "import airflow_provider_mysql_cdc.core.ddl, airflow_provider_mysql_cdc.core.table_schema\n"
        "heavy = {'pyarrow', 'pymysql', 'airflow', 'pyspark', 'pymysqlreplication', 'sqlalchemy'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
