"""Tracked table schemas, apply_statement and the effects a target must follow (pure).

The values asserted here (backfills, value preservation) are the ones MySQL 9.7 produced in
tests/integration/test_ddl_tracking.py, where each rule is checked row by row against the server.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from decimal import Decimal

import pytest

from airflow_provider_mysql_cdc.core.ddl_parser import parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import ColumnDefinition, DefaultValue, TableRef
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
    Unknown,
    backfill_for,
    values_preserved,
)
from airflow_provider_mysql_cdc.core.table_schema import SchemaUpdate, TrackedTable, apply_statement, table_from_create
from airflow_provider_mysql_cdc.errors import SchemaModelError

APP = "app"
T = TableRef(APP, "t")
SHOW_CREATE = (
    "CREATE TABLE `t` (\n"
    "  `id` int NOT NULL,\n"
    "  `f1` varchar(10) DEFAULT NULL,\n"
    "  `f2` varchar(10) COLLATE utf8mb4_bin DEFAULT 'x',\n"
    "  `c` int DEFAULT NULL,\n"
    "  PRIMARY KEY (`id`)\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
)


def tracked() -> dict[TableRef, TrackedTable]:
    table = table_from_create(SHOW_CREATE, APP)
    return {table.ref: table}


def run(tables: dict[TableRef, TrackedTable], *statements: str, sql_mode: str | None = None) -> list[SchemaUpdate]:
    updates = []
    for sql in statements:
        update = apply_statement(tables, parse_ddl(sql, APP), sql_mode=sql_mode)
        tables.clear()
        tables.update(update.tables)
        updates.append(update)
    return updates


def ids(table: TrackedTable) -> list[tuple[int, str]]:
    return [(column.column_id, column.name) for column in table.columns]


def effects(update: SchemaUpdate) -> list[SchemaEffect]:
    return list(update.effects)


def column(type_sql: str, default: str | None = None, *, charset: str = "utf8mb4") -> ColumnDefinition:
    tables = tracked()
    clause = "" if default is None else f" DEFAULT {default}"
    run(tables, f"ALTER TABLE t ADD COLUMN n {type_sql}{clause}")
    added = tables[T].column("n")
    assert added is not None
    return added.definition


# -- the tracked model ----------------------------------------------------------------------------


def test_table_from_show_create_table() -> None:
    table = tracked()[T]
    assert ids(table) == [(1, "id"), (2, "f1"), (3, "f2"), (4, "c")]
    assert (table.primary_key, table.next_column_id) == (("id",), 5)
    assert (table.default_charset, table.default_collation) == ("utf8mb4", "utf8mb4_0900_ai_ci")
    f1, f2 = table.column("F1"), table.column("f2")
    assert f1 is not None and (f1.definition.charset, f1.definition.collation) == ("utf8mb4", "utf8mb4_0900_ai_ci")
    assert f2 is not None and f2.definition.collation == "utf8mb4_bin"
    assert f2.definition.default == DefaultValue("string", "x")


def test_json_round_trip_is_exact_and_deterministic() -> None:
    tables = tracked()
    run(tables, "ALTER TABLE t ADD COLUMN g INT AS (id + 1) STORED, ADD e ENUM('a','b') DEFAULT 'b' INVISIBLE")
    table = tables[T]
    data = table.to_json()
    assert json.dumps(data, sort_keys=True) == json.dumps(table.to_json(), sort_keys=True)
    assert TrackedTable.from_json(json.loads(json.dumps(data))) == table


@pytest.mark.parametrize("sql", ["CREATE VIEW v AS SELECT 1", "CREATE TABLE t LIKE u", "CREATE TABLE t (a FROB)"])
def test_table_from_create_refuses_what_is_not_a_table_definition(sql: str) -> None:
    with pytest.raises(SchemaModelError):
        table_from_create(sql, APP)


# -- column identities ----------------------------------------------------------------------------


def test_three_changes_swap_two_columns_ids_follow_the_values() -> None:
    tables = tracked()
    updates = run(
        tables,
        "ALTER TABLE t CHANGE f1 tmp VARCHAR(10)",
        "ALTER TABLE t CHANGE f2 f1 VARCHAR(10) COLLATE utf8mb4_bin DEFAULT 'x'",
        "ALTER TABLE t CHANGE tmp f2 VARCHAR(10)",
    )
    assert ids(tables[T]) == [(1, "id"), (2, "f2"), (3, "f1"), (4, "c")]
    assert [effects(update) for update in updates] == [
        [ColumnRenamed(T, 2, "f1", "tmp")],
        [ColumnRenamed(T, 3, "f2", "f1")],
        [ColumnRenamed(T, 2, "tmp", "f2")],
    ]


def test_one_statement_swaps_by_the_names_before_it() -> None:
    tables = tracked()
    (update,) = run(tables, "ALTER TABLE t RENAME COLUMN f1 TO f2, RENAME COLUMN f2 TO f1")
    assert ids(tables[T]) == [(1, "id"), (2, "f2"), (3, "f1"), (4, "c")]
    assert effects(update) == [ColumnRenamed(T, 2, "f1", "f2"), ColumnRenamed(T, 3, "f2", "f1")]


def test_drop_then_add_of_a_name_is_a_new_column() -> None:
    tables = tracked()
    drop, add = run(tables, "ALTER TABLE t DROP COLUMN c", "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7 FIRST")
    assert effects(drop) == [ColumnDropped(T, 4, "c")]
    assert effects(add) == [ColumnAdded(T, 5, "c", Known(7))]
    assert ids(tables[T]) == [(5, "c"), (1, "id"), (2, "f1"), (3, "f2")]
    assert tables[T].next_column_id == 6


def test_positions_in_statement_order_against_new_names() -> None:
    tables = tracked()
    run(tables, "ALTER TABLE t CHANGE c d INT FIRST, ADD e INT AFTER d, MODIFY f1 VARCHAR(10) AFTER e")
    assert [name for _, name in ids(tables[T])] == ["d", "e", "f1", "id", "f2"]


def test_a_column_that_does_not_exist_makes_the_table_unknown() -> None:
    tables = tracked()
    (update,) = run(tables, "ALTER TABLE t DROP COLUMN nope")
    assert update.unknown == (T,)
    assert isinstance(update.effects[0], DataChangeUnknown)


# -- keys ------------------------------------------------------------------------------------------


def test_key_changes() -> None:
    tables = tracked()
    rename, retype, drop, add = run(
        tables,
        "ALTER TABLE t RENAME COLUMN id TO pk",
        "ALTER TABLE t MODIFY pk BIGINT",
        "ALTER TABLE t DROP PRIMARY KEY",
        "ALTER TABLE t ADD PRIMARY KEY (f1, c)",
    )
    assert effects(rename)[-1] == KeyChanged(T, ("id",), ("pk",))
    assert effects(retype)[-1] == KeyChanged(T, ("pk",), ("pk",))
    assert effects(drop) == [KeyChanged(T, ("pk",), ())]
    assert effects(add) == [KeyChanged(T, (), ("f1", "c"))]
    f1 = tables[T].column("f1")
    pk = tables[T].column("pk")
    assert f1 is not None and not f1.definition.nullable
    assert pk is not None and not pk.definition.nullable  # stays NOT NULL after DROP PRIMARY KEY
    assert [c.name for c in tables[T].columns if c.definition.primary_key] == ["f1", "c"]


def test_dropping_a_key_column_shrinks_the_key() -> None:
    tables = tracked()
    run(tables, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, c)")
    (update,) = run(tables, "ALTER TABLE t DROP COLUMN id")
    assert tables[T].primary_key == ("c",)
    assert effects(update) == [ColumnDropped(T, 1, "id"), KeyChanged(T, ("id", "c"), ("c",))]


# -- tables ----------------------------------------------------------------------------------------


def test_rename_table_swap_moves_identities() -> None:
    tables = tracked()
    run(tables, "CREATE TABLE u (x INT)")
    (update,) = run(tables, "RENAME TABLE t TO tmp, u TO t, tmp TO u")
    assert [name for _, name in ids(tables[TableRef(APP, "u")])] == ["id", "f1", "f2", "c"]
    assert [name for _, name in ids(tables[T])] == ["x"]
    assert effects(update) == [
        TableRenamed(T, TableRef(APP, "tmp")),
        TableRenamed(TableRef(APP, "u"), T),
        TableRenamed(TableRef(APP, "tmp"), TableRef(APP, "u")),
    ]


def test_create_drop_truncate_like_and_database() -> None:
    tables = tracked()
    exists, like, truncate, drop, again, database = run(
        tables,
        "CREATE TABLE IF NOT EXISTS t (z INT)",
        "CREATE TABLE o.copy LIKE t",
        "/* app */ TRUNCATE t",
        "DROP TABLE `t`,`o`.`copy` /* generated by server */",
        "CREATE TABLE t (a INT PRIMARY KEY)",
        "DROP DATABASE app",
    )
    assert isinstance(effects(exists)[0], NoDataChange)
    assert effects(like) == [TableCreated(TableRef("o", "copy"))]
    assert effects(truncate) == [TableTruncated(T)]
    assert effects(drop) == [TableDropped(T), TableDropped(TableRef("o", "copy"))]
    assert effects(again) == [TableCreated(T)] and again.tables[T].next_column_id == 2
    assert effects(database) == [TableDropped(T)] and tables == {}


def test_an_alter_that_does_not_fit_still_follows_its_rename() -> None:
    tables = tracked()
    (update,) = run(tables, "ALTER TABLE t DROP COLUMN nope, RENAME TO u")
    assert update.unknown == (TableRef(APP, "u"),) and T not in update.tables
    assert update.effects[1:] == (TableRenamed(T, TableRef(APP, "u")),)


def test_statements_the_model_cannot_follow() -> None:
    tables = tracked()
    select, unparsed, other = run(
        tables, "CREATE TABLE s AS SELECT 1 AS a", "ALTER TABLE t FROBNICATE", "ALTER TABLE nobody ADD x INT"
    )
    assert select.unknown == (TableRef(APP, "s"),)
    assert unparsed.unknown == (T,) and isinstance(unparsed.effects[0], DataChangeUnknown)
    assert other.unknown == (TableRef(APP, "nobody"),)


def test_create_table_takes_the_database_defaults_when_it_has_none() -> None:
    statement = parse_ddl("CREATE TABLE n (a VARCHAR(3), b TEXT(100))", APP)
    unknown = apply_statement({}, statement)
    assert unknown.unknown == (TableRef(APP, "n"),)  # TEXT(100) depends on the character set
    known = apply_statement({}, statement, database_defaults={APP: ("latin1", "latin1_swedish_ci")})
    a, b = known.tables[TableRef(APP, "n")].columns
    assert (a.definition.charset, b.definition.type_text) == ("latin1", "tinytext")


# -- backfills -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_sql", "default", "value"),
    [
        ("INT", None, None),
        ("INT NOT NULL", None, 0),
        ("DECIMAL(5,2) NOT NULL", None, Decimal("0.00")),
        ("BIT(12) NOT NULL", None, b"\0\0"),
        ("BIT(1) NOT NULL", None, False),
        ("BINARY(3) NOT NULL", None, b"\0\0\0"),
        ("ENUM('x','y') NOT NULL", None, "x"),
        ("JSON NOT NULL", None, "null"),
        ("TIME NOT NULL", None, dt.timedelta(0)),
        ("INT", "-2.5", -3),
        ("INT", "0x10", 16),
        ("DECIMAL(5,2)", "1.005", Decimal("1.01")),
        ("DECIMAL(5,2)", "-0.001", Decimal("0.00")),
        ("DECIMAL(65,30)", "1.5", "1.5" + "0" * 29),
        ("DECIMAL(38,30)", "1.5", Decimal("1.5" + "0" * 29)),
        ("DECIMAL(40,2)", "3", "3.00"),
        ("FLOAT", "1.1", 1.100000023841858),
        ("DOUBLE", "-0.0", 0.0),
        ("CHAR(5)", "'ab  '", "ab"),
        ("VARCHAR(3)", "'ab   '", "ab "),
        ("VARCHAR(8)", "'a' 'b'", "ab"),
        ("VARCHAR(5)", "-0.0", "0.0"),
        ("VARCHAR(5)", ".5", "0.5"),
        ("VARCHAR(5)", "0x4142", "AB"),
        ("BINARY(4)", "0x0001", b"\0\x01\0\0"),
        ("SET('a','b','c')", "'c,a,a'", "a,c"),
        ("DATETIME(1)", "'2024-02-03 10:11:12.5'", dt.datetime(2024, 2, 3, 10, 11, 12, 500000)),
        ("TIME", "'-838:59:59'", -dt.timedelta(hours=838, minutes=59, seconds=59)),
        ("YEAR", "'24'", 2024),
        ("YEAR", "0", 0),
        ("YEAR", "'0'", 2000),
        ("BIT(4)", "b'101'", b"\x05"),
        ("TEXT", "('abc')", "abc"),
    ],
)
def test_known_backfills(type_sql: str, default: str | None, value: object) -> None:
    backfill = backfill_for(column(type_sql, default))
    assert isinstance(backfill, Known)
    assert (type(backfill.value), backfill.value, backfill.invalid_text) == (type(value), value, None)


@pytest.mark.parametrize(
    ("type_sql", "text"),
    [("DATE NOT NULL", "0000-00-00"), ("DATETIME(3) NOT NULL", "0000-00-00 00:00:00.000"),
     ("TIMESTAMP NOT NULL", "0000-00-00 00:00:00"), ("DATE DEFAULT '0000-00-00'", "0000-00-00")],
)  # fmt: skip
def test_zero_dates_are_null_with_their_text(type_sql: str, text: str) -> None:
    assert backfill_for(column(type_sql)) == Known(None, text)


@pytest.mark.parametrize(
    ("type_sql", "default"),
    [
        ("INT AS (id + 1)", None),
        ("INT NOT NULL AUTO_INCREMENT UNIQUE", None),
        ("DATETIME", "CURRENT_TIMESTAMP"),
        ("INT", "(1 + 1)"),
        ("JSON", "('[1,  2]')"),
        ("TIMESTAMP NULL", "'2024-01-01 00:00:00'"),
        ("DATETIME", "'2024-01-01 00:00:00.5'"),
        ("FLOAT(7,2)", "1.005"),
        ("VARCHAR(5)", "1e1"),
        ("VARBINARY(3)", "'ñ'"),
        ("ENUM('a','b')", "'B'"),
        ("GEOMETRY NOT NULL", None),
        ("VECTOR(2) NOT NULL", None),
    ],
)
def test_unknown_backfills(type_sql: str, default: str | None) -> None:
    assert isinstance(backfill_for(column(type_sql, default)), Unknown)


def test_fraction_rounding_needs_the_sql_mode() -> None:
    tables = tracked()
    (rounded,) = run(tables, "ALTER TABLE t ADD a DATETIME DEFAULT '2024-12-31 23:59:59.5'", sql_mode="")
    (truncated,) = run(tables, "ALTER TABLE t ADD b TIME(1) DEFAULT '10:00:00.99'", sql_mode="TIME_TRUNCATE_FRACTIONAL")
    assert rounded.effects[0] == ColumnAdded(T, 5, "a", Known(dt.datetime(2025, 1, 1)))
    assert truncated.effects[0] == ColumnAdded(T, 6, "b", Known(dt.timedelta(hours=10, microseconds=900000)))


# -- value preservation ----------------------------------------------------------------------------


def retyped(old: str, new: str, sql_mode: str | None = None) -> ColumnRetyped:
    tables = tracked()
    run(tables, f"ALTER TABLE t ADD COLUMN v {old}")
    (update,) = run(tables, f"ALTER TABLE t MODIFY v {new}", sql_mode=sql_mode)
    retypes: Sequence[SchemaEffect] = [e for e in update.effects if isinstance(e, ColumnRetyped)]
    assert len(retypes) == 1, update.effects
    effect = retypes[0]
    assert isinstance(effect, ColumnRetyped)
    return effect


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("TINYINT", "SMALLINT"),
        ("INT UNSIGNED", "BIGINT"),
        ("MEDIUMINT UNSIGNED", "INT UNSIGNED"),
        ("DECIMAL(7,2)", "DECIMAL(9,2)"),
        ("DECIMAL(7,2) UNSIGNED", "DECIMAL(7,2)"),
        ("FLOAT", "DOUBLE"),
        ("CHAR(4)", "VARCHAR(4)"),
        ("VARCHAR(6)", "VARCHAR(10) COLLATE utf8mb4_bin"),
        ("VARCHAR(5) CHARACTER SET utf8mb3", "VARCHAR(5) CHARACTER SET utf8mb4"),
        ("VARCHAR(5) CHARACTER SET latin1", "VARCHAR(5) CHARACTER SET utf8mb4"),
        ("TINYTEXT", "TEXT"),
        ("BINARY(3)", "VARBINARY(5)"),
        ("ENUM('a','b')", "ENUM('b','x','a')"),
        ("SET('x','z')", "SET('p','x','y','z')"),
        ("DATETIME", "DATETIME(6)"),
        ("BIT(5)", "BIT(8)"),
        ("INT NOT NULL", "INT NULL"),
    ],
)
def test_preserving_retypes(old: str, new: str) -> None:
    effect = retyped(old, new)
    assert effect.values_preserved, effect.reason


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("INT", "TINYINT"),
        ("INT", "INT UNSIGNED"),
        ("DECIMAL(7,2)", "DECIMAL(7,1)"),
        ("DECIMAL(7,2)", "DECIMAL(9,3)"),
        ("DECIMAL(30,2)", "DECIMAL(40,2)"),
        ("DOUBLE", "FLOAT"),
        ("FLOAT", "FLOAT(7,2)"),
        ("VARCHAR(6)", "CHAR(6)"),
        ("VARCHAR(6)", "VARCHAR(3)"),
        ("VARCHAR(5)", "VARCHAR(5) CHARACTER SET latin1"),
        ("TEXT CHARACTER SET latin1", "TEXT CHARACTER SET utf8mb4"),
        ("BINARY(3)", "BINARY(4)"),
        ("ENUM('a','b')", "ENUM('A','b')"),
        ("SET('x','y')", "SET('y','x')"),
        ("DATETIME(6)", "DATETIME(3)"),
        ("DATETIME", "TIMESTAMP"),
        ("BIT(1)", "BIT(8)"),
        ("BIT(8)", "BIT(9)"),
        ("INT", "INT NOT NULL"),
        ("INT", "INT NOT NULL AUTO_INCREMENT UNIQUE"),
        ("INT AS (id + 1)", "INT AS (id + 2)"),
        ("YEAR", "SMALLINT"),
    ],
)
def test_changing_retypes(old: str, new: str) -> None:
    effect = retyped(old, new)
    assert not effect.values_preserved


def test_null_to_not_null_is_preserved_only_in_strict_mode() -> None:
    assert not retyped("INT", "INT NOT NULL", sql_mode="").values_preserved
    assert retyped("INT", "INT NOT NULL", sql_mode="STRICT_TRANS_TABLES").values_preserved


def test_default_comment_and_position_changes_are_no_data_change() -> None:
    tables = tracked()
    (update,) = run(tables, "ALTER TABLE t MODIFY c INT DEFAULT 5 COMMENT 'x' FIRST, ALTER f1 SET INVISIBLE")
    assert all(isinstance(effect, NoDataChange) for effect in update.effects)


def test_convert_to_character_set_grows_text_types() -> None:
    tables: dict[TableRef, TrackedTable] = {}
    run(
        tables, "CREATE TABLE c (a TEXT, b VARCHAR(3)) CHARSET latin1", "ALTER TABLE c CONVERT TO CHARACTER SET utf8mb4"
    )
    a, b = tables[TableRef(APP, "c")].columns
    assert (a.definition.type_text, a.definition.collation) == ("mediumtext", "utf8mb4_0900_ai_ci")
    assert b.definition.type_text == "varchar(3)"


def test_values_preserved_is_a_pure_function_of_two_definitions() -> None:
    old = ColumnDefinition("v", "int", "int")
    assert values_preserved(old, ColumnDefinition("v", "bigint", "bigint"), strict=None) == (True, "integer widening")


GENERATED_TABLE = (
    "CREATE TABLE `g` (\n"
    "  `id` int NOT NULL,\n"
    "  `dt` datetime DEFAULT NULL,\n"
    "  `s` varchar(10) COLLATE utf8mb4_0900_ai_ci DEFAULT NULL,\n"
    "  `e` enum('a','c') DEFAULT NULL,\n"
    "  `plain` int DEFAULT NULL,\n"
    "  `g1` varchar(40) GENERATED ALWAYS AS (cast(`dt` as char charset utf8mb4)) STORED,\n"
    "  `g2` int GENERATED ALWAYS AS ((`s` = _utf8mb4'ABC')) VIRTUAL,\n"
    "  `g3` int GENERATED ALWAYS AS ((E + 0)) VIRTUAL,\n"
    "  PRIMARY KEY (`id`)\n"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
)


@pytest.mark.parametrize(
    ("alter", "generated"),
    [
        ("ALTER TABLE g MODIFY dt DATETIME(3)", ["g1"]),
        ("ALTER TABLE g MODIFY s VARCHAR(10) COLLATE utf8mb4_bin", ["g2"]),
        ("ALTER TABLE g MODIFY s VARCHAR(20)", ["g2"]),
        ("ALTER TABLE g CHANGE e e ENUM('a','b','c')", ["g3"]),
        ("ALTER TABLE g CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ["g2", "g3"]),
    ],
)
def test_a_retype_that_keeps_values_still_changes_the_generated_columns_computed_from_it(
    alter: str, generated: list[str]
) -> None:
    """MySQL computes a generated column again when a column its expression reads is redefined (the
    names in the expression are matched case-insensitively, quoted or not); no row event carries it."""
    table = table_from_create(GENERATED_TABLE, APP)
    tables = {table.ref: table}
    (update,) = run(tables, alter)
    retypes = [effect for effect in update.effects if isinstance(effect, ColumnRetyped)]
    assert retypes and all(effect.values_preserved for effect in retypes), update.effects
    unknown = [effect for effect in update.effects if isinstance(effect, DataChangeUnknown)]
    assert [effect.reason.split(" is computed")[0] for effect in unknown] == [
        f"generated column {g!r}" for g in generated
    ]


def test_a_retype_no_generated_column_reads_changes_no_generated_column() -> None:
    table = table_from_create(GENERATED_TABLE, APP)
    tables = {table.ref: table}
    (update,) = run(tables, "ALTER TABLE g MODIFY plain BIGINT")
    assert not [effect for effect in update.effects if isinstance(effect, DataChangeUnknown)], update.effects
