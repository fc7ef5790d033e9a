"""The compiled row decoder (capture's fast path) against the library path, on a real MySQL binlog.

For every case of the type map (``test_type_roundtrip.CASES``: every type, NULLs, zero and partial
dates, charsets, JSON, geometry, VECTOR, generated columns), the rows are inserted, updated and
deleted; each row event is then decoded twice: by :func:`compile_row_decoder` from the raw images
(:func:`row_images`), and by python-mysql-replication with this provider's fixes
(:func:`decoded_rows` + :class:`RowConverter`, the path capture used before). Every image (inserts,
both images of updates, deletes) must be equal value for value, with the same Python types.
"""

from __future__ import annotations

from typing import Any

import pytest
from pymysqlreplication.row_event import UpdateRowsEvent

from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter, decoded_rows
from airflow_provider_mysql_cdc.decoding.compiled_rows import compile_row_decoder, row_images
from airflow_provider_mysql_cdc.decoding.table_map import column_specs_from_table_map
from airflow_provider_mysql_cdc.errors import TerminalCdcError
from tests.integration.test_type_roundtrip import (
    CASES,
    VECTOR,
    Case,
    _binlog_events,
    _binlog_position,
    _version,
    create_table,
    insert_rows,
    write_session,
)
from tests.mysql_servers import MySqlTestServer


def _typed(image: tuple[Any, ...]) -> list[tuple[str, Any]]:
    return [(type(value).__name__, value) for value in image]


def _library_images(event: Any, converter: RowConverter) -> list[tuple[Any, ...]]:
    rows = decoded_rows(event)
    if isinstance(event, UpdateRowsEvent):
        return [converter.convert(row[image]) for row in rows for image in ("before_values", "after_values")]
    return [converter.convert(row["values"]) for row in rows]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_compiled_decoder_equals_the_library_path(mysql_server: MySqlTestServer, case: Case) -> None:
    if case is VECTOR and _version(mysql_server) < (9, 0):
        pytest.skip("VECTOR needs MySQL 9")
    table = create_table(mysql_server, case)
    start = _binlog_position(mysql_server)
    insert_rows(mysql_server, case, table)
    session = write_session(case)
    mysql_server.execute(*session, *(f"UPDATE {table} SET {sets} WHERE id = {i}" for i, sets in case.updates))
    mysql_server.execute(*(f"DELETE FROM {table} WHERE id = {i}" for i in case.deletes))

    images = 0
    nulls = 0
    for event in _binlog_events(mysql_server, case.name, start):
        specs = column_specs_from_table_map(event)
        decoder = compile_row_decoder(event.table_map[event.table_id].columns, specs)
        found = row_images(event)
        assert found is not None, f"{type(event).__name__} was not handed to the compiled decoder"
        data, begin, end = found
        compiled = decoder.images(data, begin, end, case.name)
        library = _library_images(event, RowConverter(specs))
        assert [_typed(image) for image in compiled] == [_typed(image) for image in library]
        images += len(compiled)
        nulls += sum(value is None for image in compiled for value in image[:-1])
    expected_images = len(case.rows) + 2 * len(case.updates) + len(case.deletes)
    assert images == expected_images
    assert nulls > 0, "every case has NULL values"


def test_invalid_dates_reach_the_invalid_values_map(mysql_server: MySqlTestServer) -> None:
    """Zero and partial dates: NULL in the typed column, their text in the map (both decoders)."""
    database = "compiled_rows"
    mysql_server.execute(
        f"CREATE DATABASE IF NOT EXISTS {database}",
        f"DROP TABLE IF EXISTS {database}.dates",
        f"CREATE TABLE {database}.dates (id INT PRIMARY KEY, d DATE, t DATETIME(3), s TIMESTAMP(2) NULL)",
    )
    start = _binlog_position(mysql_server)
    mysql_server.execute(
        "SET sql_mode = ''",
        "SET time_zone = '+00:00'",
        f"INSERT INTO {database}.dates VALUES (1, '0000-00-00', '2024-00-15 01:02:03.456', '0000-00-00 00:00:00')",
        f"INSERT INTO {database}.dates VALUES (2, '2024-02-29', '2024-02-29 23:59:59.999', '2024-02-29 12:00:00.5')",
    )
    compiled: list[tuple[Any, ...]] = []
    for event in _binlog_events(mysql_server, "dates", start, database):
        specs = column_specs_from_table_map(event)
        found = row_images(event)
        assert found is not None
        compiled += compile_row_decoder(event.table_map[event.table_id].columns, specs).images(*found, "dates")
    assert [image[0] for image in compiled] == [1, 2]
    assert compiled[0][1:4] == (None, None, None)
    assert compiled[0][4] == {"d": "0000-00-00", "t": "2024-00-15 01:02:03.456", "s": "0000-00-00 00:00:00.00"}
    assert compiled[1][4] is None
    assert str(compiled[1][2]) == "2024-02-29 23:59:59.999000"


def test_images_that_do_not_fit_the_table_map_are_an_error(mysql_server: MySqlTestServer) -> None:
    """Decoding with the wrong table version must fail loudly, never stage shifted values."""
    database = "compiled_rows"
    mysql_server.execute(
        f"CREATE DATABASE IF NOT EXISTS {database}",
        f"DROP TABLE IF EXISTS {database}.narrow",
        f"CREATE TABLE {database}.narrow (id INT PRIMARY KEY, a VARCHAR(10), b BIGINT)",
    )
    start = _binlog_position(mysql_server)
    mysql_server.execute(f"INSERT INTO {database}.narrow VALUES (1, 'abc', 7), (2, 'defgh', 8)")
    events = list(_binlog_events(mysql_server, "narrow", start, database))
    assert len(events) == 1
    event = events[0]
    specs = column_specs_from_table_map(event)
    columns = event.table_map[event.table_id].columns
    found = row_images(event)
    assert found is not None
    good = compile_row_decoder(columns, specs).images(*found, "narrow")
    assert [image[:3] for image in good] == [(1, "abc", 7), (2, "defgh", 8)]
    # The same images read as if b came before a: the bytes no longer add up.
    shuffled = compile_row_decoder([columns[0], columns[2], columns[1]], [specs[0], specs[2], specs[1]])
    with pytest.raises(TerminalCdcError, match="narrow"):
        shuffled.images(*found, "narrow")
