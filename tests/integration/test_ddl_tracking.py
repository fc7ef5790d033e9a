"""Differential test of the DDL model against MySQL: every corpus statement (tests/integration/ddl_corpus.py)
runs on the server; the model follows what the server wrote to the binlog and must describe the server.

1. Each scenario runs its statements on one session; after each one the harness records every table
   of the scenario's databases (``information_schema`` columns, primary key, ``SHOW CREATE TABLE``) and
   its rows as the snapshot stages them (``snapshot/row_reading.py``).
2. The binlog written meanwhile is read once (python-mysql-replication Query events: text, session
   database, sql_mode), grouped by GTID.
3. Per statement, the Query events of its GTIDs go through ``parse_ddl`` and ``apply_statement``; the
   tracked tables must equal the server's (names, order, types, nullability, charsets, defaults,
   generated, invisible, AUTO_INCREMENT, ON UPDATE, primary key, table collation) and so must
   ``table_from_create`` of ``SHOW CREATE TABLE``. Tables the update calls ``unknown`` are re-read
   from ``SHOW CREATE TABLE``, as a caller would. Then, for rows that existed before the statement:
   every ``ColumnAdded`` with ``Known(value)`` must be exactly the staged value of the new column, and
   every column that keeps its id and is not reported as possibly changed (``ColumnRetyped`` with
   ``values_preserved=False``, ``DataChangeUnknown``, truncation) must hold exactly the same staged
   values as before, under its possibly new name: this checks renames, swaps, DROP+ADD identities
   and every ``values_preserved=True`` claim.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, QueryEvent

from airflow_provider_mysql_cdc.core.ddl_parser import parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import DefaultValue, TableRef, UnparsedDdl
from airflow_provider_mysql_cdc.core.ddl_values import literal_value
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.core.schema_effects import (
    ColumnAdded,
    ColumnRetyped,
    DataChangeUnknown,
    Known,
    SchemaEffect,
    TableCreated,
    TableDropped,
    TableRenamed,
    TableTruncated,
    Unknown,
    backfill_for,
)
from airflow_provider_mysql_cdc.core.table_schema import TrackedTable, apply_statement, table_from_create
from airflow_provider_mysql_cdc.decoding.text_rows import (
    SNAPSHOT_SESSION_STATEMENTS,
    SnapshotRowConverter,
    select_expressions,
)
from airflow_provider_mysql_cdc.errors import NotExact
from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
from tests.integration.ddl_corpus import SCENARIOS, Scenario, is_data
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

_COLUMNS_SQL = (
    "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA, CHARACTER_SET_NAME, COLLATION_NAME "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
)
_KEY_SQL = (
    "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
    "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX"
)
_TABLES_SQL = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_COLLATION FROM information_schema.TABLES "
    "WHERE TABLE_SCHEMA IN ({}) AND TABLE_TYPE = 'BASE TABLE'"
)
_server_ids = itertools.count(5100)

#: A staged value and its ``_cdc_invalid_values`` text.
Staged = tuple[Any, str | None]


@dataclass
class TableState:
    """One table on the server after a statement."""

    collation: str
    columns: list[dict[str, Any]]
    primary_key: tuple[str, ...]
    create_sql: str
    rows: list[dict[str, Staged]]


@dataclass
class StepRecord:
    """One statement of a scenario and what the server looked like after it."""

    sql: str
    gtids: GtidSet
    tables: dict[TableRef, TableState]
    error: str | None = None


@dataclass
class Corpus:
    """Every scenario's records and the Query events of the binlog, by GTID."""

    records: dict[str, list[StepRecord]]
    events: dict[str, list[tuple[str, str, int]]]
    stats: dict[str, int] = field(default_factory=dict)


# -- phase 1: run the statements ---------------------------------------------------------------------


def _connect(server: MySqlTestServer) -> pymysql.connections.Connection[Any]:
    return pymysql.connect(**{**server.admin.pymysql_kwargs(), "autocommit": True})


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else value


def _staged_rows(reader: Any, server: MySqlTestServer, ref: TableRef) -> list[dict[str, Staged]]:
    specs = column_specs_from_information_schema(reader, server.admin, ref.database, ref.table)
    converter = SnapshotRowConverter(specs)
    expressions = ", ".join(select_expressions(specs))
    with reader.cursor() as cursor:
        cursor.execute(f"SELECT {expressions} FROM `{ref.database}`.`{ref.table.replace('`', '``')}`")
        fetched = cursor.fetchall()
    rows = []
    for row in fetched:
        *values, invalid = converter.convert(row)
        rows.append(
            {spec.name: (value, (invalid or {}).get(spec.name)) for spec, value in zip(specs, values, strict=True)}
        )
    return rows


def _table_states(reader: Any, server: MySqlTestServer, databases: Sequence[str]) -> dict[TableRef, TableState]:
    states: dict[TableRef, TableState] = {}
    with reader.cursor() as cursor:
        cursor.execute(_TABLES_SQL.format(", ".join(["%s"] * len(databases))), tuple(databases))
        tables = [(_text(db), _text(name), _text(collation)) for db, name, collation in cursor.fetchall()]
        for database, name, collation in tables:
            ref = TableRef(database, name)
            cursor.execute(_COLUMNS_SQL, (database, name))
            keys = ("name", "type", "nullable", "default", "extra", "charset", "collation")
            columns = [dict(zip(keys, map(_text, row), strict=True)) for row in cursor.fetchall()]
            cursor.execute(_KEY_SQL, (database, name))
            primary_key = tuple(_text(row[0]) for row in cursor.fetchall())
            cursor.execute(f"SHOW CREATE TABLE `{database}`.`{name.replace('`', '``')}`")
            create_sql = _text(cursor.fetchall()[0][1])
            states[ref] = TableState(collation, columns, primary_key, create_sql, _staged_rows(reader, server, ref))
    return states


def _executed(cursor: Any) -> GtidSet:
    cursor.execute("SELECT @@GLOBAL.gtid_executed")
    return GtidSet.parse(str(_text(cursor.fetchall()[0][0])))


def _run_scenario(server: MySqlTestServer, scenario: Scenario) -> list[StepRecord]:
    session, reader = _connect(server), _connect(server)
    try:
        with reader.cursor() as cursor:
            for statement in SNAPSHOT_SESSION_STATEMENTS:
                cursor.execute(statement)
        with session.cursor() as cursor:
            for database in scenario.databases:
                cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
                cursor.execute(f"CREATE DATABASE `{database}` DEFAULT CHARACTER SET utf8mb4")
            cursor.execute(f"USE `{scenario.database}`")
            mode = scenario.sql_mode if scenario.sql_mode == "DEFAULT" else repr(scenario.sql_mode)
            cursor.execute(f"SET SESSION sql_mode = {mode}")
            records = []
            for sql in scenario.statements:
                before = _executed(cursor)
                error = None
                try:
                    cursor.execute(sql)
                    cursor.fetchall()
                except pymysql.MySQLError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                gtids = _executed(cursor) - before
                records.append(StepRecord(sql, gtids, _table_states(reader, server, scenario.databases), error))
        return records
    finally:
        session.close()
        reader.close()


# -- phase 2: read the binlog ------------------------------------------------------------------------


def _binlog_position(server: MySqlTestServer) -> tuple[str, int]:
    row = server.execute("SHOW BINARY LOG STATUS")[0]
    return str(_text(row[0])), int(row[1])


def _query_events(server: MySqlTestServer, start: tuple[str, int]) -> dict[str, list[tuple[str, str, int]]]:
    settings = server.admin.pymysql_kwargs()
    stream = BinLogStreamReader(
        connection_settings={
            "host": settings["host"],
            "port": settings["port"],
            "user": settings["user"],
            "passwd": settings["password"],
        },
        server_id=next(_server_ids),
        log_file=start[0],
        log_pos=start[1],
        resume_stream=True,
        blocking=False,
        only_events=[GtidEvent, QueryEvent],
    )
    events: dict[str, list[tuple[str, str, int]]] = {}
    gtid = ""
    try:
        for event in stream:
            if isinstance(event, GtidEvent):
                gtid = str(event.gtid)
                events[gtid] = []
            elif str(event.query).strip().upper() not in ("BEGIN", "COMMIT"):
                events[gtid].append((bytes(event.schema).decode("utf-8"), str(event.query), int(event.sql_mode)))
    finally:
        stream.close()
    return events


@pytest.fixture(scope="module")
def corpus(mysql_server: MySqlTestServer) -> Iterator[Corpus]:
    start = _binlog_position(mysql_server)
    records = {scenario.name: _run_scenario(mysql_server, scenario) for scenario in SCENARIOS}
    yield Corpus(records, _query_events(mysql_server, start))
    for scenario in SCENARIOS:
        for database in scenario.databases:
            mysql_server.execute(f"DROP DATABASE IF EXISTS `{database}`")


# -- phase 3: follow the binlog and compare ----------------------------------------------------------


def _server_default(definition: Any, column: Mapping[str, Any]) -> DefaultValue:
    text = column["default"]
    if text.startswith("b'") and definition.mysql_type == "bit":
        bits = text[2:-1]
        return DefaultValue("bit", int(bits, 2).to_bytes((len(bits) + 7) // 8, "big").hex())
    if text.startswith("0x") and definition.charset is None:
        return DefaultValue("hex", text[2:].lower())
    return DefaultValue("string", text)


def _assert_default(definition: Any, column: Mapping[str, Any], where: str) -> None:
    extra = column["extra"].lower()
    default = definition.default
    if definition.generated is not None:
        return
    if default is None or default.kind == "null":
        assert column["default"] is None and "default_generated" not in extra, f"{where}: server default {column}"
    elif default.kind == "current_timestamp":
        assert (column["default"] or "").upper() == default.text and "default_generated" in extra, f"{where}: {column}"
    elif default.kind == "expression" and "default_generated" not in extra:
        # ALTER COLUMN ... SET DEFAULT ('z') stores a literal: the model's value must be that literal
        model = backfill_for(definition)
        assert isinstance(model, Known), f"{where}: {default} stored as the literal {column['default']!r}"
        server = literal_value(definition, _server_default(definition, column), truncate_fractions=False)
        assert repr(server) == repr(model.value), f"{where}: {default} is {model}, the server says {column}"
    elif default.kind == "expression":
        pass
    else:
        assert column["default"] is not None and "default_generated" not in extra, f"{where}: server {column}"
        if definition.mysql_type == "float" or definition.mysql_type in ("binary", "varbinary"):
            # information_schema prints a FLOAT default with 6 digits and cuts a binary one at its first
            # 0x00 byte: the rows check those values
            return
        model = backfill_for(definition)
        try:
            server = literal_value(definition, _server_default(definition, column), truncate_fractions=False)
        except NotExact:
            return
        if isinstance(model, Known) and isinstance(model.value, str) and max(map(ord, model.value), default=0) > 0xFFFF:
            return  # information_schema keeps defaults in utf8mb3: characters beyond the BMP read as '?'
        if isinstance(model, Known):
            expected = None if model.invalid_text is not None else model.value
            assert repr(server if not hasattr(server, "text") else None) == repr(expected), (
                f"{where}: DEFAULT {default} is {model}, the server says {column['default']!r}"
            )


def assert_table_matches(model: TrackedTable, state: TableState, where: str) -> None:
    """The tracked table describes the server's table."""
    names = [column.name for column in model.columns]
    assert names == [column["name"] for column in state.columns], f"{where}: columns {names}"
    for tracked, column in zip(model.columns, state.columns, strict=True):
        definition, at = tracked.definition, f"{where}.{tracked.name}"
        assert definition.type_text == column["type"], f"{at}: type {definition.type_text!r} != {column['type']!r}"
        assert definition.nullable == (column["nullable"] == "YES"), f"{at}: nullable {definition.nullable}"
        # None: created with the database's default character set, which the model does not track
        if definition.charset is not None or column["charset"] is None:
            assert definition.charset == column["charset"], f"{at}: charset {definition.charset!r} != {column}"
        if definition.collation is not None or column["collation"] is None:
            assert definition.collation == column["collation"], f"{at}: collation {definition.collation!r} != {column}"
        extra = column["extra"].lower()
        assert definition.invisible == ("invisible" in extra), f"{at}: invisible, server extra {extra!r}"
        assert definition.auto_increment == ("auto_increment" in extra), f"{at}: auto_increment, extra {extra!r}"
        assert definition.on_update_current_timestamp == ("on update" in extra), f"{at}: on update, {extra!r}"
        generated = "stored generated" if definition.generated and definition.generated.stored else "virtual generated"
        assert (definition.generated is not None) == (generated in extra or "stored generated" in extra), (
            f"{at}: {extra}"
        )
        if definition.generated is not None:
            assert generated in extra, f"{at}: generated {definition.generated}, server {extra!r}"
        _assert_default(definition, column, at)
    assert model.primary_key == state.primary_key, f"{where}: primary key {model.primary_key} != {state.primary_key}"
    if model.default_collation is not None:
        assert model.default_collation == state.collation, f"{where}: table collation {model.default_collation}"


def _follow_renames(refs: Sequence[TableRef], effects: Sequence[SchemaEffect]) -> dict[TableRef, TableRef | None]:
    where: dict[TableRef, TableRef | None] = {ref: ref for ref in refs}
    for effect in effects:
        for old, current in list(where.items()):
            if isinstance(effect, TableRenamed) and current == effect.old:
                where[old] = effect.new
            elif isinstance(effect, TableDropped | TableCreated) and current == effect.table:
                where[old] = None
    return where


def _rows_by_key(rows: Sequence[dict[str, Staged]], key: str) -> dict[Any, dict[str, Staged]]:
    return {row[key][0]: row for row in rows}


def _same(left: Staged, right: Staged) -> bool:
    return type(left[0]) is type(right[0]) and repr(left) == repr(right)


@dataclass
class Checks:
    """What one scenario checked."""

    statements: int = 0
    backfills_known: int = 0
    backfills_unknown: int = 0
    preserved_retypes: int = 0
    changed_retypes: int = 0
    values_compared: int = 0
    unknown_tables: int = 0


def _check_values(
    before: TrackedTable,
    after: TrackedTable,
    old_rows: list[dict[str, Staged]],
    new_rows: list[dict[str, Staged]],
    effects: Sequence[SchemaEffect],
    where: str,
    checks: Checks,
) -> None:
    effects = [effect for effect in effects if effect.table == before.ref]
    key_column = before.column("id")
    after_key = after.column_by_id(key_column.column_id) if key_column else None
    if key_column is None or after_key is None or not old_rows:
        return
    old, new = _rows_by_key(old_rows, key_column.name), _rows_by_key(new_rows, after_key.name)
    assert set(old) == set(new), f"{where}: rows {sorted(old)} became {sorted(new)}"
    changed = {e.column_id for e in effects if isinstance(e, ColumnRetyped) and not e.values_preserved}
    for tracked in before.columns:
        current = after.column_by_id(tracked.column_id)
        if current is None or tracked.column_id in changed:
            continue
        for key, row in old.items():
            assert _same(row[tracked.name], new[key][current.name]), (
                f"{where}: column id {tracked.column_id} ({tracked.name} -> {current.name}) row {key}: "
                f"{row[tracked.name]!r} became {new[key][current.name]!r}"
            )
            checks.values_compared += 1
    for effect in effects:
        if isinstance(effect, ColumnAdded) and isinstance(effect.backfill, Known):
            expected = (effect.backfill.value, effect.backfill.invalid_text)
            for key in old:
                assert _same(new[key][effect.name], expected), (
                    f"{where}: added column {effect.name}: MySQL gave row {key} {new[key][effect.name]!r}, "
                    f"the model says {expected!r}"
                )
                checks.values_compared += 1


def _replay(scenario: Scenario, corpus: Corpus) -> Checks:
    checks = Checks()
    tables: dict[TableRef, TrackedTable] = {}
    previous: dict[TableRef, TableState] = {}
    order = list(corpus.events)
    defaults = (
        {db: ("utf8mb4", "utf8mb4_0900_ai_ci") for db in scenario.databases} if scenario.database_defaults else None
    )
    for record in corpus.records[scenario.name]:
        where = f"{scenario.name}: {record.sql[:120]!r}"
        assert record.error is None, f"{where}: the corpus statement failed on MySQL: {record.error}"
        gtids = [gtid for gtid in order if Gtid.parse(gtid) in record.gtids]
        events = [event for gtid in gtids for event in corpus.events[gtid]]
        if not is_data(record.sql):
            checks.statements += 1
        else:
            assert not events, f"{where}: a data statement logged DDL: {events}"
        before_tables = dict(tables)
        effects: list[SchemaEffect] = []
        unknown: set[TableRef] = set()
        for database, query, sql_mode in events:
            statement = parse_ddl(query, database, sql_mode=sql_mode)
            if isinstance(statement, UnparsedDdl):
                assert record.sql in scenario.unparsed, f"{where}: logged as {query!r}, not parsed: {statement.reason}"
            update = apply_statement(tables, statement, sql_mode=sql_mode, database_defaults=defaults)
            tables = {ref: table for ref, table in update.tables.items() if ref.database in scenario.databases}
            effects.extend(update.effects)
            unknown |= set(update.unknown)
        for ref in unknown:
            checks.unknown_tables += 1
            tables.pop(ref, None)
            if ref in record.tables:
                tables[ref] = table_from_create(record.tables[ref].create_sql, ref.database)
        assert set(tables) == set(record.tables), f"{where}: model tables {sorted(tables)} != {sorted(record.tables)}"
        for ref, state in record.tables.items():
            assert_table_matches(tables[ref], state, f"{where} {ref}")
            assert_table_matches(table_from_create(state.create_sql, ref.database), state, f"{where} SHOW CREATE {ref}")
        for effect in effects:
            if isinstance(effect, ColumnAdded):
                checks.backfills_known += isinstance(effect.backfill, Known)
                checks.backfills_unknown += isinstance(effect.backfill, Unknown)
            if isinstance(effect, ColumnRetyped):
                checks.preserved_retypes += effect.values_preserved
                checks.changed_retypes += not effect.values_preserved
        if not is_data(record.sql):
            stopped = {e.table for e in effects if isinstance(e, DataChangeUnknown | TableTruncated)} | unknown
            for old_ref, new_ref in _follow_renames(list(before_tables), effects).items():
                if new_ref is None or old_ref in stopped or new_ref in stopped or old_ref not in previous:
                    continue
                if new_ref not in tables or new_ref not in record.tables:
                    continue
                _check_values(
                    before_tables[old_ref],
                    tables[new_ref],
                    previous[old_ref].rows,
                    record.tables[new_ref].rows,
                    effects,
                    where,
                    checks,
                )
        previous = record.tables
    return checks


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
def test_model_follows_mysql(corpus: Corpus, scenario: Scenario) -> None:
    checks = _replay(scenario, corpus)
    assert checks.statements > 0
    print(f"{scenario.name}: {checks}")


def test_corpus_size() -> None:
    statements = [sql for scenario in SCENARIOS for sql in scenario.statements if not is_data(sql)]
    assert len(statements) >= 150, len(statements)
