"""The fast snapshot reader stages exactly what the PyMySQL reader staged, on the real server.

:func:`staged_record_batches` reads a chunk's ``SELECT`` with the fast reader (raw row packets,
Arrow; the ``SELECT`` a prepared statement, so binary-protocol rows, and with ``prepared=False`` a
plain query, text-protocol rows) and, with ``fast=False``, with PyMySQL's ``fetchmany`` and
``SnapshotRowConverter`` (the snapshot's reader before). For

* every case of the type round trip and the snapshot type test (every type of docs/type-map.md's type
  map with its edge values: zero and partial dates, year 0, TIME beyond 24 h, every character set
  of the cases, ENUM/SET, JSON, geometry, VECTOR, BIT, DECIMAL beyond 38 digits, NULLs), read two
  rows per batch so that batches with and without invalid dates alternate, and
* a table of 3,000 generated rows whose values need every length header (1 byte, 2, 3 and, in a
  row of more than 16 MiB that arrives in several packets, 8 bytes), with invalid dates in a few
  batches only,

* a table of nullable columns of every fixed width a binary row holds, with every pattern of NULLs
  over three bytes of the rows' NULL bitmap,

the readers give equal Arrow tables (``Table.equals``: values, NULLs, ``_cdc_invalid_values``) in
equal batches, and the connection is usable afterwards (its prepared statement deallocated). A
server refusing prepared statements is read with plain queries. A server error in the middle of a
result raises the same error after the same rows as PyMySQL, and a connection killed in the middle
of a result raises instead of hanging.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pymysql
import pymysql.cursors
import pytest

from airflow_provider_mysql_cdc.core.chunks import quote_identifier
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN, arrow_schema
from airflow_provider_mysql_cdc.decoding.text_rows import SNAPSHOT_SESSION_STATEMENTS, select_expressions
from airflow_provider_mysql_cdc.mysql.client import connect, connection_to, query
from airflow_provider_mysql_cdc.snapshot import fast_reader
from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
from airflow_provider_mysql_cdc.snapshot.fast_reader import read_raw_batches, staged_record_batches
from tests.integration.test_snapshot_types import CASES_HERE
from tests.integration.test_type_roundtrip import TEMPORAL, VECTOR, Case, _version, create_table, insert_rows
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

DATABASE = "snapshot_fast"


def read_both(server: MySqlTestServer, table: str, fetch_rows: int) -> tuple[list[pa.RecordBatch], ...]:
    """The table's snapshot rows (in key order) read by the fast reader and by the PyMySQL reader."""
    config = server.cdc
    with connection_to(config) as connection:
        for statement in SNAPSHOT_SESSION_STATEMENTS:
            query(connection, config, statement)
        specs = column_specs_from_information_schema(connection, config, DATABASE, table)
        name = f"{quote_identifier(DATABASE)}.{quote_identifier(table)}"
        sql = f"SELECT {', '.join(select_expressions(specs))} FROM {name} ORDER BY id"
        fast = list(staged_record_batches(connection, specs, sql, None, fetch_rows))
        assert query(connection, config, "SELECT 1") == [(1,)]  # the connection is in a clean state
        plain = list(staged_record_batches(connection, specs, sql, None, fetch_rows, prepared=False))
        old = list(staged_record_batches(connection, specs, sql, None, fetch_rows, fast=False))
    schema = arrow_schema(specs)
    assert all(batch.schema.equals(schema) for batch in fast + plain + old)
    assert_equal(plain, old)  # text-protocol rows (a server refusing prepared statements) too
    return fast, old


def assert_equal(fast: list[pa.RecordBatch], old: list[pa.RecordBatch]) -> pa.Table:
    assert [batch.num_rows for batch in fast] == [batch.num_rows for batch in old]
    fast_table, old_table = pa.Table.from_batches(fast), pa.Table.from_batches(old)
    if not fast_table.equals(old_table):
        differences = [
            (name, fast_table.column(name), old_table.column(name))
            for name in fast_table.column_names
            if not fast_table.column(name).equals(old_table.column(name))
        ]
        pytest.fail(f"the readers disagree on {[name for name, _, _ in differences]}: {differences[:2]}")
    for field in fast_table.schema:  # equals() takes -0.0 for 0.0: compare the bits of floats too
        bits = {pa.float32(): pa.int32(), pa.float64(): pa.int64()}.get(field.type)
        if bits is not None:
            views = [table.column(field.name).combine_chunks().view(bits) for table in (fast_table, old_table)]
            assert views[0].equals(views[1]), field.name
    return fast_table


@pytest.mark.parametrize("case", CASES_HERE, ids=[case.name for case in CASES_HERE])
def test_every_type_is_staged_alike_by_both_readers(mysql_server: MySqlTestServer, case: Case) -> None:
    if case is VECTOR and _version(mysql_server) < (9, 0):
        pytest.skip("VECTOR needs MySQL 9")
    table = create_table(mysql_server, case, DATABASE)
    insert_rows(mysql_server, case, table)
    staged = assert_equal(*read_both(mysql_server, case.name, fetch_rows=2))
    assert staged.num_rows == len(case.rows)
    if case is TEMPORAL:  # not vacuous: invalid dates staged as NULL with their text
        assert staged.column(INVALID_VALUES_COLUMN).null_count < staged.num_rows


#: Generated rows: ``n`` is the row id (1..3000); NULLs, invalid dates and long values every so often.
WIDE_COLUMNS = {
    "s": ("VARCHAR(2000) CHARACTER SET utf8mb4", "IF(n % 13 = 0, NULL, REPEAT('é', n % 300))"),
    "m": (
        "MEDIUMTEXT",
        "CASE n % 500 WHEN 0 THEN REPEAT('x', 65535) WHEN 1 THEN REPEAT('y', 65536) "
        "WHEN 2 THEN REPEAT('😀', 20000) WHEN 3 THEN NULL ELSE CONCAT('m', n) END",
    ),
    "b": ("LONGBLOB", "IF(n % 17 = 0, NULL, REPEAT(x'00ff', n % 130))"),
    "l": ("TEXT CHARACTER SET latin1", "IF(n % 11 = 0, NULL, CONCAT(_latin1 x'e9ff80', n))"),
    "a": ("VARCHAR(40) CHARACTER SET ascii", "CONCAT('a', n)"),
    "dt": (
        "DATETIME(3)",
        "CASE WHEN n % 997 = 0 THEN '0000-00-00 00:00:00' WHEN n % 1499 = 0 THEN '0000-01-01 10:00:00.5' "
        "ELSE TIMESTAMP('2024-01-01') + INTERVAL n * 3671 SECOND + INTERVAL n MICROSECOND * 1000 END",
    ),
    "d": ("DATE", "IF(n % 1201 = 0, '2024-02-30', DATE('2000-01-01') + INTERVAL n DAY)"),
    "ts": ("TIMESTAMP(6) NULL", "IF(n % 19 = 0, NULL, FROM_UNIXTIME(1000000000 + n * 7919.123456))"),
    "t": ("TIME(2)", "SEC_TO_TIME((n - 1500) * 997.25)"),
    "dc": ("DECIMAL(20,5)", "(n - 1500) * 12345.67891"),
    "dc50": ("DECIMAL(50,10)", "IF(n % 3 = 0, NULL, (n - 1500) * 1234567890123456789012.3456789)"),
    "f": ("FLOAT", "IF(n % 5 = 0, NULL, (n - 1500) / 7)"),
    "g": ("DOUBLE", "IF(n = 7, -0.0, (n - 1500) / 7e10)"),
    "bt": ("BIT(3)", "n % 8"),
    "b1": ("BIT(1)", "IF(n % 23 = 0, NULL, n % 2)"),
    "j": ("JSON", "IF(n % 29 = 0, NULL, JSON_OBJECT('n', n, 's', REPEAT('j', n % 400)))"),
    "e": ("ENUM('x','y','é')", "ELT(n % 3 + 1, 'x', 'y', 'é')"),
    "st": ("SET('p','q')", "IF(n % 4 = 0, '', 'p,q')"),
    "ge": ("GEOMETRY", "IF(n % 31 = 0, NULL, POINT(n, -n))"),
    "y": ("YEAR", "IF(n % 37 = 0, 0, 1901 + n % 255)"),
}


def create_generated_table(
    server: MySqlTestServer, name: str, columns: dict[str, tuple[str, str]], ids: range, *statements: str
) -> str:
    """Table ``name`` with an INT key ``id`` and ``columns`` (name -> (DDL, value expression of ``n``)),
    one row per ``n`` of ``ids``, inserted after the session ``statements``; returns ``name``."""
    table = f"`{DATABASE}`.`{name}`"
    definitions = ", ".join(f"{column} {ddl}" for column, (ddl, _) in columns.items())
    values = ", ".join(expression for _, expression in columns.values())
    server.execute(
        f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`",
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} (id INT PRIMARY KEY, {definitions})",
        f"SET SESSION cte_max_recursion_depth = {len(ids) + 1}",
        *statements,
        f"INSERT INTO {table} (id, {', '.join(columns)}) WITH RECURSIVE seq (n) AS (SELECT {ids.start} UNION ALL "
        f"SELECT n + 1 FROM seq WHERE n < {ids.stop - 1}) SELECT n, {values} FROM seq",
    )
    return name


@pytest.fixture(scope="module")
def wide_table(mysql_server: MySqlTestServer) -> str:
    name = create_generated_table(
        mysql_server,
        "wide",
        WIDE_COLUMNS,
        range(1, 3001),
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES', time_zone = '+00:00'",
    )
    # More than 16 MiB in one row: several packets, and an 8-byte length header.
    mysql_server.execute(
        f"UPDATE `{DATABASE}`.`{name}` SET b = REPEAT('z', 17 * 1024 * 1024), m = REPEAT('w', 16 * 1024 * 1024 - 1) "
        "WHERE id = 1234"
    )
    return name


@pytest.mark.parametrize("fetch_rows", [500, 3000])
def test_long_values_multi_packet_rows_and_some_invalid_dates_are_staged_alike(
    mysql_server: MySqlTestServer, wide_table: str, fetch_rows: int
) -> None:
    staged = assert_equal(*read_both(mysql_server, wide_table, fetch_rows))
    assert staged.num_rows == 3000
    assert len(staged.column("b")[1233].as_py()) == 17 * 1024 * 1024
    invalid = {i + 1: value for i, value in enumerate(staged.column(INVALID_VALUES_COLUMN).to_pylist()) if value}
    assert invalid == {
        997: [("dt", "0000-00-00 00:00:00.000")],
        1201: [("d", "2024-02-30")],
        1499: [("dt", "0000-01-01 10:00:00.500")],
        1994: [("dt", "0000-00-00 00:00:00.000")],
        2402: [("d", "2024-02-30")],
        2991: [("dt", "0000-00-00 00:00:00.000")],
        2998: [("dt", "0000-01-01 10:00:00.500")],
    }


#: Nullable columns of every fixed width a binary-protocol row has (and length-encoded ones between
#: them); row ``n`` holds NULL in column ``k`` when bit ``k`` of ``n`` is set, so the rows cover every
#: pattern of NULLs over three bytes of the row's NULL bitmap.
NULLABLE_COLUMNS = {
    "ti": ("TINYINT", "-128 + n % 256"),
    "tu": ("TINYINT UNSIGNED", "n % 256"),
    "s": ("VARCHAR(20)", "CONCAT('s', n)"),
    "si": ("SMALLINT", "-32768 + n"),
    "mi": ("MEDIUMINT", "-8388608 + n * 255"),
    "mu": ("MEDIUMINT UNSIGNED", "16777215 - n"),
    "i": ("INT", "-2147483648 + n * 65535"),
    "dc": ("DECIMAL(10,2)", "n / 100"),
    "iu": ("INT UNSIGNED", "4294967295 - n"),
    "bi": ("BIGINT", "-9223372036854775808 + n * 140737488355327"),
    "bu": ("BIGINT UNSIGNED", "18446744073709551615 - n"),
    "f": ("FLOAT", "n / 3"),
    "db": ("DOUBLE", "IF(n = 5, -0.0, n / 7e300)"),
    "y": ("YEAR", "IF(n = 6, 0, 1901 + n % 255)"),
    "b": ("BLOB", "REPEAT(x'fb', n % 300)"),
}


@pytest.fixture(scope="module")
def nullable_table(mysql_server: MySqlTestServer) -> str:
    columns = {
        name: (f"{ddl} NULL", f"IF(n & {1 << bit}, NULL, {expression})")
        for bit, (name, (ddl, expression)) in enumerate(NULLABLE_COLUMNS.items())
    }
    return create_generated_table(mysql_server, "nullable", columns, range(1 << len(NULLABLE_COLUMNS)))


def _prepared_statements(server: MySqlTestServer) -> int:
    return int(server.execute("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")[0][1])


def _spy_on_prepare(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The statement ids :func:`_execute_prepared` returns from now on (None: read as a plain query)."""
    returned: list[int | None] = []
    real = fast_reader._execute_prepared

    def spy(*args: Any) -> int | None:
        returned.append(real(*args))
        return returned[-1]

    monkeypatch.setattr(fast_reader, "_execute_prepared", spy)
    return returned


def test_every_pattern_of_nulls_in_binary_protocol_rows_is_staged_alike(
    mysql_server: MySqlTestServer, nullable_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    returned = _spy_on_prepare(monkeypatch)
    before = _prepared_statements(mysql_server)
    staged = assert_equal(*read_both(mysql_server, nullable_table, fetch_rows=5000))
    assert len(returned) == 1 and returned[0] is not None  # read as a prepared statement, binary rows
    assert _prepared_statements(mysql_server) == before  # and the statement deallocated
    assert staged.num_rows == 1 << len(NULLABLE_COLUMNS)
    assert staged.column("bu")[0].as_py() == 18446744073709551615
    assert staged.column("bi")[2].as_py() == -9223372036854775808 + 2 * 140737488355327
    assert [staged.column(name).null_count for name in NULLABLE_COLUMNS] == [1 << (len(NULLABLE_COLUMNS) - 1)] * len(
        NULLABLE_COLUMNS
    )


def test_a_server_refusing_prepared_statements_and_a_result_with_dates_are_read_as_plain_queries(
    mysql_server: MySqlTestServer, nullable_table: str, wide_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    returned = _spy_on_prepare(monkeypatch)
    limit = mysql_server.execute("SELECT @@GLOBAL.max_prepared_stmt_count")[0][0]
    mysql_server.execute("SET GLOBAL max_prepared_stmt_count = 0")
    try:
        assert_equal(*read_both(mysql_server, nullable_table, fetch_rows=5000))
    finally:
        mysql_server.execute(f"SET GLOBAL max_prepared_stmt_count = {int(limit)}")
    assert returned == [None]
    before = _prepared_statements(mysql_server)
    with connection_to(mysql_server.cdc) as connection:
        cursor = connection.cursor(pymysql.cursors.SSCursor)
        sql = f"SELECT id, dt FROM `{DATABASE}`.`{wide_table}` WHERE id <= %s ORDER BY id"
        assert fast_reader._execute_prepared(cursor, sql, [3]) is None  # a DATETIME column: binary rows hold a struct
        assert [row[0] for row in cursor.fetchall()] == [1, 2, 3]
    assert _prepared_statements(mysql_server) == before


def _rows_until_error(cursor: Any, read: Any) -> tuple[int, pymysql.err.MySQLError]:
    rows = 0
    with pytest.raises(pymysql.err.MySQLError) as raised:
        for count in read(cursor):
            rows += count
    return rows, raised.value


def test_a_server_error_mid_result_is_raised_after_the_same_rows_as_pymysql(
    mysql_server: MySqlTestServer, wide_table: str
) -> None:
    # the subquery returns two rows for id 2500 only
    sql = (
        "SELECT t.id, t.s, (SELECT t.id UNION ALL SELECT t.id FROM DUAL WHERE t.id = 2500) "
        f"FROM `{DATABASE}`.`{wide_table}` AS t WHERE t.id <> 1234 ORDER BY t.id"
    )
    results = []
    for prepared, read in (
        (False, lambda cursor: (batch.rows for batch in read_raw_batches(cursor, 100))),
        (True, lambda cursor: (batch.rows for batch in read_raw_batches(cursor, 100))),
        (False, lambda cursor: (1 for _ in iter(cursor.fetchone, None))),
    ):
        with connection_to(mysql_server.cdc) as connection:
            cursor = connection.cursor(pymysql.cursors.SSCursor)
            if prepared:  # binary-protocol rows
                assert fast_reader._execute_prepared(cursor, sql, None) is not None
            else:
                cursor.execute(sql)
            rows, error = _rows_until_error(cursor, read)
            results.append((rows, error.args[0]))
            cursor.close()
            assert query(connection, mysql_server.cdc, "SELECT 1") == [(1,)]  # still usable
    assert (
        results[0] == results[1] == results[2] == (2498, 1242)
    )  # ids 1-2499 but 1234, then "Subquery returns more than 1 row"


def test_a_connection_killed_mid_result_raises(mysql_server: MySqlTestServer, wide_table: str) -> None:
    connection = connect(mysql_server.cdc)
    try:
        thread_id = connection.thread_id()  # type: ignore[no-untyped-call]
        cursor = connection.cursor(pymysql.cursors.SSCursor)
        cursor.execute(
            f"SELECT a.id, a.s, b.id FROM `{DATABASE}`.`{wide_table}` AS a, `{DATABASE}`.`{wide_table}` AS b"
        )
        batches = read_raw_batches(cursor, 1000)
        rows = next(batches).rows
        killer = threading.Thread(target=mysql_server.execute, args=(f"KILL {int(thread_id)}",))
        killer.start()
        killer.join(30)
        with pytest.raises(pymysql.err.MySQLError):
            for batch in batches:
                rows += batch.rows
        assert rows < 3000 * 3000
        assert getattr(cursor, "_result").unbuffered_active is False  # noqa: B009
    finally:
        connection.close()


def test_a_connection_killed_before_the_statement_is_prepared_raises_the_lost_connection(
    mysql_server: MySqlTestServer, nullable_table: str
) -> None:
    connection = connect(mysql_server.cdc)
    try:
        mysql_server.execute(f"KILL {int(connection.thread_id())}")  # type: ignore[no-untyped-call]
        sql = f"SELECT id FROM `{DATABASE}`.`{nullable_table}`"
        with pytest.raises(pymysql.err.OperationalError) as raised:
            list(staged_record_batches(connection, [], sql, None, 100))
        assert raised.value.args[0] in (2006, 2013)  # not the closed connection's InterfaceError of a retry
    finally:
        connection.close()
