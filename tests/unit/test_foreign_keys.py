"""Foreign keys whose cascades the binlog does not hold (core.foreign_keys): which servers log the rows a
cascade changes, which statements give a table a key whose ON DELETE/ON UPDATE changes its rows, and
the tracker leaving such a table waiting."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_mysql_cdc.capture.schema_tracking import SchemaTracker
from airflow_provider_mysql_cdc.core.ddl_parser import parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import AlterTable, CreateTable, TableRef
from airflow_provider_mysql_cdc.core.foreign_keys import (
    UNLOGGED_CASCADE_REASON,
    cascading_child_reason,
    unlogged_cascades,
)
from airflow_provider_mysql_cdc.core.preflight import ServerVersion
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

G = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(
    ("version", "native", "logged"),
    [
        ("9.7.4-2", "OFF", True),
        ("9.6.0", None, True),  # a 9.6 without the variable: the server's own cascades
        ("9.7.4-2", "ON", False),
        ("9.5.0", None, False),
        ("8.4.3", None, False),
        ("8.0.36-log", None, False),
        ("10.11.6-MariaDB", None, False),
    ],
)
def test_which_servers_log_the_rows_cascades_change(version: str, native: str | None, logged: bool) -> None:
    why = unlogged_cascades(ServerVersion.parse(version), native)
    assert (why is None) is logged, why
    if why is not None:
        assert ("innodb_native_foreign_keys=ON" in why) is (native == "ON"), why


def test_the_reason_names_the_server_and_every_fix() -> None:
    unlogged = unlogged_cascades(ServerVersion.parse("8.4.3"), None)
    assert unlogged is not None
    reason = cascading_child_reason("shop.items", unlogged)
    assert reason.startswith(UNLOGGED_CASCADE_REASON) and "MySQL 8.4.3" in reason
    assert "innodb_native_foreign_keys=OFF" in reason and "RESTRICT" in reason
    assert "exclude_tables=['shop.items']" in reason


@pytest.mark.parametrize(
    ("sql", "cascading"),
    [
        ("CREATE TABLE c (id INT, p INT, FOREIGN KEY (p) REFERENCES par (id) ON DELETE CASCADE)", True),
        ("CREATE TABLE c (id INT, p INT, CONSTRAINT fk FOREIGN KEY (p) REFERENCES par (id) ON UPDATE CASCADE)", True),
        ("CREATE TABLE c (id INT, p INT REFERENCES par (id) ON DELETE SET NULL)", True),  # a column's key
        ("create table c (id int, p int, foreign key (p) references par (id) on update set default)", True),
        (
            "CREATE TABLE c (p INT, FOREIGN KEY (p) REFERENCES par (id) MATCH FULL "
            "ON DELETE NO ACTION ON UPDATE CASCADE)",
            True,
        ),
        ("ALTER TABLE c ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES par (id) ON DELETE CASCADE", True),
        ("ALTER TABLE c ADD COLUMN p INT, ADD FOREIGN KEY (p) REFERENCES par (id) ON DELETE SET NULL", True),
        ("CREATE TABLE c (id INT, p INT, FOREIGN KEY (p) REFERENCES par (id))", False),
        ("CREATE TABLE c (p INT, FOREIGN KEY (p) REFERENCES par (id) ON DELETE RESTRICT ON UPDATE NO ACTION)", False),
        ("ALTER TABLE c ADD FOREIGN KEY (p) REFERENCES par (id) ON DELETE SET NULL", True),
        ("ALTER TABLE c DROP FOREIGN KEY fk", False),
        ("ALTER TABLE c ADD COLUMN n VARCHAR(20) DEFAULT 'ON DELETE CASCADE' COMMENT 'REFERENCES'", False),
        ("CREATE TABLE c (id INT) COMMENT 'REFERENCES p ON DELETE CASCADE'", False),
    ],
)
def test_statements_that_give_a_table_a_key_whose_actions_change_its_rows(sql: str, cascading: bool) -> None:
    statement = parse_ddl(sql, "db")
    assert isinstance(statement, CreateTable | AlterTable), statement
    assert statement.cascading_foreign_key is cascading


def test_the_tracker_leaves_a_table_given_a_cascading_key_waiting(tmp_path: Path) -> None:
    """A CREATE or ALTER giving a selected table a key whose actions change its rows asks why it cannot be
    followed; a reason leaves it waiting, the statement quoted. No reason (the server logs cascades), a
    RESTRICT key, a table out of the selection: followed as before."""
    store = FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
    asked: list[tuple[TableRef, int]] = []

    def problem(ref: TableRef, seq: int) -> str | None:
        asked.append((ref, seq))
        return None if ref.table == "logged" else f"{UNLOGGED_CASCADE_REASON} (test)"

    track = SchemaTracker(store, "p", 1, TableSelection.of(["db.*"]), record=True, cascade_problem=problem)
    statements = [
        "CREATE TABLE parent (id INT PRIMARY KEY)",
        "CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent (id) ON DELETE CASCADE)",
        "CREATE TABLE kept (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent (id))",
        "ALTER TABLE kept ADD COLUMN q INT, ADD FOREIGN KEY (q) REFERENCES parent (id) ON UPDATE SET NULL",
        "CREATE TABLE logged (id INT PRIMARY KEY, p INT REFERENCES parent (id) ON DELETE CASCADE)",
        "CREATE TABLE other.child (id INT PRIMARY KEY, p INT REFERENCES db.parent (id) ON DELETE CASCADE)",
    ]
    kinds = [
        [event.kind for event in track.on_statement(sql, "db", seq, f"{G}:{seq}", None, lambda t, g: False).events]
        for seq, sql in enumerate(statements, start=1)
    ]
    assert kinds == [["reset"], ["rebuild"], ["reset"], ["rebuild"], ["reset"], []]
    assert asked == [(TableRef("db", "child"), 2), (TableRef("db", "kept"), 4), (TableRef("db", "logged"), 5)]
    pending = track.rebuilds_pending()
    assert pending.keys() == {"db.child", "db.kept"}
    assert f"{UNLOGGED_CASCADE_REASON} (test) (by: ALTER TABLE kept ADD COLUMN q INT" in pending["db.kept"]
