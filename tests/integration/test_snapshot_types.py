"""Snapshot rows (SELECT over PyMySQL) are staged exactly like binlog capture stages the same rows.

For every case of the type round trip (every MySQL type with its tricky values) the table is
created and its rows inserted; then

* the specs read from ``information_schema`` equal the specs capture builds from the inserts' table
  map (same Arrow schema and ``schema_fingerprint``), and
* the rows SELECTed with :func:`select_expressions` under :data:`SNAPSHOT_SESSION_STATEMENTS`,
  converted with :class:`SnapshotRowConverter` (and, the same Arrow table, read by the engine's fast
  reader :func:`staged_record_batches`), written to Parquet with ``_cdc_op = 'r'`` and read back,
  equal the rows ``capture_window`` staged for the inserts: every typed value and every
  ``_cdc_invalid_values`` entry.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest

from airflow_provider_mysql_cdc.core.chunks import quote_identifier
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN, ColumnSpec, arrow_schema, schema_fingerprint
from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter, decoded_rows
from airflow_provider_mysql_cdc.decoding.table_map import column_specs_from_table_map
from airflow_provider_mysql_cdc.decoding.text_rows import (
    SNAPSHOT_SESSION_STATEMENTS,
    SnapshotRowConverter,
    select_expressions,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
from airflow_provider_mysql_cdc.snapshot.fast_reader import staged_record_batches
from tests.integration.test_type_roundtrip import (
    CASES,
    STRINGS,
    TEMPORAL,
    VECTOR,
    Case,
    Col,
    _binlog_events,
    _binlog_position,
    _version,
    captured_rows,
    create_table,
    insert_rows,
)
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

DATABASE = "snapshot_types"

#: Tables beyond the type round trip's cases: keys, names and character sets the specs must get right.
KEYS_AND_NAMES = Case(
    "keys_and_names",
    (
        Col("we`ird name", "VARCHAR(5) CHARACTER SET utf8mb3 NOT NULL"),
        Col("u", "INT NOT NULL UNIQUE"),
        Col("t", "TEXT CHARACTER SET latin1 COLLATE latin1_bin"),
        Col("zf", "INT(5) UNSIGNED ZEROFILL"),
        Col("c16", "CHAR(3) CHARACTER SET utf16"),
        Col("c32", "CHAR(3) CHARACTER SET utf32"),
        Col("u16le", "VARCHAR(4) CHARACTER SET utf16le"),
        Col("ucs", "CHAR(2) CHARACTER SET ucs2"),
        Col("w1250", "VARCHAR(8) CHARACTER SET cp1250"),
        Col("sj", "VARCHAR(8) CHARACTER SET cp932"),
        Col("gb", "VARCHAR(8) CHARACTER SET gb18030"),
        Col("bin0", "BINARY(0)"),
        Col("ch255", "CHAR(255)"),
        Col("en", "ENUM('a''q', 'b\\\\c', 'n\\nl', ' x ', 'é') CHARACTER SET cp1250"),
        Col("fl", "FLOAT(30)"),
        Col("dbl", "DOUBLE UNSIGNED"),
        Col("dec", "DECIMAL(39,2)"),
        Col("big", "BIGINT UNSIGNED INVISIBLE"),
    ),
    (
        "'ab`c', 1, _latin1 x'81ff', 42, 'a b', 'xy ', 'é😀', 'é', 'Łódź', '表ソ', '中😀', '', "
        "'x  ', 'b\\\\c', 1e300, 1.5, '-1.25', 18446744073709551615",
        "'', 2, '', 0, '', '', '', '', '', '', '', '', '', ' x', 0, 0, 0, 0",
        "'n', 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
    ),
    sql_mode="",
)
CASES_HERE = (*CASES, KEYS_AND_NAMES)


def _as_information_schema_shows(spec: ColumnSpec) -> ColumnSpec:
    """``information_schema`` keeps ENUM/SET labels in utf8mb3: a character outside the BMP is ``?``
    there (the one known difference, see the module docstring of ``snapshot.column_specs``)."""

    def lossy(labels: tuple[str, ...]) -> tuple[str, ...]:
        return tuple("".join("?" if ord(char) > 0xFFFF else char for char in label) for label in labels)

    return dataclasses.replace(spec, enum_values=lossy(spec.enum_values), set_values=lossy(spec.set_values))


def _capture(server: MySqlTestServer, case: Case, before: GtidSet, tmp_path: Path) -> list[dict[str, Any]]:
    """The rows ``capture_window`` stages for everything written to the case's table since ``before``."""
    return captured_rows(server, DATABASE, case.name, before, tmp_path)


def snapshot(
    server: MySqlTestServer, case: Case, path: Path, session: tuple[str, ...] = SNAPSHOT_SESSION_STATEMENTS
) -> tuple[tuple[ColumnSpec, ...], list[tuple[Any, ...]], list[dict[str, Any]]]:
    """Specs from information_schema, and the table's rows SELECTed and converted (as returned by
    the converter, and staged as ``r`` rows in a Parquet file and read back)."""
    config = server.cdc
    with connection_to(config) as connection:
        for statement in session:
            query(connection, config, statement)
        specs = column_specs_from_information_schema(connection, config, DATABASE, case.name)
        table = f"{quote_identifier(DATABASE)}.{quote_identifier(case.name)}"
        sql = f"SELECT {', '.join(select_expressions(specs))} FROM {table} ORDER BY id"
        rows = query(connection, config, sql)
        fast = list(staged_record_batches(connection, specs, sql, None, 2))
    converter = SnapshotRowConverter(specs)
    schema = arrow_schema(specs)
    converted = [converter.convert(row) for row in rows]
    # The column-at-a-time conversion gives the same values.
    assert [tuple(row) for row in zip(*converter.convert_columns(rows), strict=True)] == converted
    staged = [(*values, None, "r", None, seq, None) for seq, values in enumerate(converted)]
    table_staged = pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in staged], schema)
    # ... and so does the fast reader the snapshot engine uses (test_snapshot_fast_reader.py: in detail).
    assert pa.Table.from_batches(fast, schema).equals(table_staged)
    pq.write_table(table_staged, path)
    back = pq.read_table(path)
    assert back.schema.equals(schema)
    return specs, converted, back.to_pylist()


@pytest.mark.parametrize("case", CASES_HERE, ids=[case.name for case in CASES_HERE])
def test_snapshot_rows_are_staged_like_the_binlog_capture(
    mysql_server: MySqlTestServer, case: Case, tmp_path: Path
) -> None:
    if case is VECTOR and _version(mysql_server) < (9, 0):
        pytest.skip("VECTOR needs MySQL 9")
    table = create_table(mysql_server, case, DATABASE)
    before = GtidSet.parse(str(mysql_server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))
    start = _binlog_position(mysql_server)
    insert_rows(mysql_server, case, table)

    binlog_specs: tuple[ColumnSpec, ...] = ()
    converted: list[tuple[Any, ...]] = []  # what RowConverter returns for the inserts, before Arrow
    for event in _binlog_events(mysql_server, case.name, start, DATABASE):
        binlog_specs = column_specs_from_table_map(event)
        converter = RowConverter(binlog_specs)
        converted += [converter.convert(row["values"]) for row in decoded_rows(event)]
    captured = _capture(mysql_server, case, before, tmp_path)
    specs, values, staged = snapshot(mysql_server, case, tmp_path / f"{case.name}.parquet")

    # (a) the same specs, hence the same staged schema and schema version
    assert schema_fingerprint(specs) == schema_fingerprint(binlog_specs)
    assert arrow_schema(specs).equals(arrow_schema(binlog_specs))
    expected_specs = tuple(map(_as_information_schema_shows, binlog_specs))
    assert specs == expected_specs
    lossy = [spec.name for spec, shown in zip(binlog_specs, expected_specs, strict=True) if spec != shown]
    assert lossy == (["e", "s"] if case is STRINGS else [])  # the emoji labels; equal everywhere else

    # (b) the same staged values, NULLs and invalid-value texts
    assert [row["_cdc_op"] for row in captured] == ["c"] * len(case.rows)
    assert [row["_cdc_op"] for row in staged] == ["r"] * len(case.rows)
    columns = [spec.name for spec in specs] + [INVALID_VALUES_COLUMN]
    mismatches = [
        (row["id"], column, got[column], row[column])
        for got, row in zip(staged, captured, strict=True)
        for column in columns
        if got[column] != row[column] or type(got[column]) is not type(row[column])
    ]
    assert not mismatches, "\n".join(map(repr, mismatches))
    # ... and already the converters' Python values are the same (type, value, sign of zero)
    assert [[(type(v), repr(v)) for v in row[:-1]] for row in values] == [
        [(type(v), repr(v)) for v in row[:-1]] for row in converted
    ]
    assert [row[-1] for row in values] == [row[-1] for row in converted]
    # -0.0 and NaN-free floats: compare bit patterns too (== does not see the sign of zero)
    floats = [spec.name for spec in specs if spec.mysql_type in ("float", "double")]
    for got, row in zip(staged, captured, strict=True):
        assert [repr(got[name]) for name in floats] == [repr(row[name]) for name in floats]


def test_timestamps_do_not_depend_on_session_or_local_time_zone(
    mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session starts in another zone and the process runs under others: after
    SNAPSHOT_SESSION_STATEMENTS the staged TIMESTAMPs (and everything else) are the same."""
    table = create_table(mysql_server, TEMPORAL, DATABASE)
    insert_rows(mysql_server, TEMPORAL, table)
    results = []
    try:
        for zone, session_zone in (("UTC", "+00:00"), ("America/New_York", "-08:00"), ("Asia/Kolkata", "+09:30")):
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            session = (f"SET time_zone = '{session_zone}'", *SNAPSHOT_SESSION_STATEMENTS)
            results.append(snapshot(mysql_server, TEMPORAL, tmp_path / f"{session_zone}.parquet", session)[2])
            without = snapshot(mysql_server, TEMPORAL, tmp_path / "raw.parquet", (f"SET time_zone = '{session_zone}'",))
            if session_zone != "+00:00":  # the session statements are needed: the text is local time
                assert [row["ts6"] for row in without[2]] != [row["ts6"] for row in results[-1]]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert results[0] == results[1] == results[2]
    assert results[0][0]["ts0"].isoformat() == "1970-01-01T00:00:01+00:00"  # '05:30:01' written at +05:30


#: Tables whose primary key is not a plain ``PRIMARY KEY (id)``: (name, DDL body, one row's values).
KEY_TABLES = (
    ("promoted_unique", "a INT, b INT NOT NULL, c VARCHAR(5) NOT NULL, UNIQUE KEY (c, b), UNIQUE KEY (a)", "1, 2, 'x'"),
    ("two_uniques", "a INT NOT NULL, b INT NOT NULL, c INT NOT NULL, UNIQUE KEY (b), UNIQUE KEY (c, a)", "1, 2, 3"),
    ("prefix_key", "t TEXT, id INT, n INT, PRIMARY KEY (id, t(10))", "'a', 2, 3"),
    ("no_key", "a INT, b TEXT", "1, 'x'"),
    ("invisible_key", "k INT NOT NULL INVISIBLE, v INT, PRIMARY KEY (k)", "1, 2"),
)


@pytest.mark.parametrize(("name", "body", "values"), KEY_TABLES, ids=[table[0] for table in KEY_TABLES])
def test_primary_keys_and_nullability_are_those_of_the_binlog(
    mysql_server: MySqlTestServer, name: str, body: str, values: str
) -> None:
    """MySQL promotes the first UNIQUE NOT NULL key to primary key when there is none; the binlog's
    table map and ``COLUMN_KEY`` agree on it, on prefix keys and on invisible key columns."""
    table = f"`{DATABASE}`.`{name}`"
    mysql_server.execute(
        f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`", f"DROP TABLE IF EXISTS {table}", f"CREATE TABLE {table} ({body})"
    )
    start = _binlog_position(mysql_server)
    columns = "(k, v)" if name == "invisible_key" else ""  # SELECT * and INSERT without a list skip k
    mysql_server.execute(f"INSERT INTO {table} {columns} VALUES ({values})")
    (binlog_specs,) = [
        column_specs_from_table_map(event) for event in _binlog_events(mysql_server, name, start, DATABASE)
    ]
    with connection_to(mysql_server.cdc) as connection:
        specs = column_specs_from_information_schema(connection, mysql_server.cdc, DATABASE, name)
    assert specs == binlog_specs
