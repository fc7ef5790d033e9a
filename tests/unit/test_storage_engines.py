"""What a window can know of the engine a CREATE TABLE naming none gave its table
(core.storage_engines): the server's answer now holds unless a DDL after the window changed the table
(its CREATE_TIME, whole seconds, is in a later second than the window's end)."""

from __future__ import annotations

from airflow_provider_mysql_cdc.core.ddl_parser import parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import CreateTable, UnparsedDdl
from airflow_provider_mysql_cdc.core.storage_engines import (
    CREATED_ENGINE_REASONS,
    UNKNOWN_ENGINE_REASON,
    TableEngine,
    created_engine_problem,
)

WINDOW_END_US = 1_795_900_183_250_000  # 0.25 s into the second 1795900183


def test_a_table_in_an_engine_that_keeps_rows_and_unchanged_since_is_followed() -> None:
    assert created_engine_problem("db.t", TableEngine("InnoDB", 1_795_900_183), WINDOW_END_US) is None
    assert created_engine_problem("db.t", TableEngine("MyISAM", 1_795_900_100), WINDOW_END_US) is None
    assert created_engine_problem("db.t", TableEngine("InnoDB", None), WINDOW_END_US) is None


def test_a_table_in_blackhole_names_the_engine_and_the_fix() -> None:
    reason = created_engine_problem("db.t", TableEngine("BLACKHOLE", 1_795_900_183), WINDOW_END_US)
    assert reason is not None and reason.startswith("ENGINE=BLACKHOLE keeps no rows")
    assert "exclude_tables=['db.t']" in reason and reason.startswith(CREATED_ENGINE_REASONS)


def test_a_table_changed_after_the_window_or_gone_has_no_known_engine() -> None:
    later = created_engine_problem("db.t", TableEngine("InnoDB", 1_795_900_184), WINDOW_END_US)
    gone = created_engine_problem("db.t", None, WINDOW_END_US)
    assert later is not None and later.startswith(UNKNOWN_ENGINE_REASON) and "CREATE_TIME" in later
    assert gone is not None and gone.startswith(UNKNOWN_ENGINE_REASON) and "gone" in gone


def test_the_parser_records_the_engine_a_create_names() -> None:
    named = {
        "CREATE TABLE t (id INT) ENGINE=InnoDB": "INNODB",
        "CREATE TABLE t (id INT) ENGINE MyISAM DEFAULT CHARSET=latin1": "MYISAM",
        "CREATE TABLE t (id INT) TYPE = memory": "MEMORY",
        "CREATE TABLE t (id INT) DEFAULT CHARSET=utf8mb4": None,
        "CREATE TABLE t LIKE s": None,
    }
    for sql, engine in named.items():
        statement = parse_ddl(sql, "db")
        assert isinstance(statement, CreateTable) and statement.engine == engine, (sql, statement)
    assert isinstance(parse_ddl("CREATE TABLE t (id INT) ENGINE=BLACKHOLE", "db"), UnparsedDdl)
