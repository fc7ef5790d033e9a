"""Table maps with the same bytes reuse one parse (``library_fixes``); a changed table map is parsed anew.

MySQL logs a table map in every transaction, before each table's first row event. The parse of one
with the same bytes as a recent one is reused. These tests read real table maps from the binlog and
check three things:
- a reused parse says exactly what parsing the bytes again says;
- a table map that changed (an ALTER TABLE between two transactions, a column's character set among
  the changes) is parsed anew and describes the table after the change;
- a table map is kept under all of its bytes: a table id MySQL reuses for another table (as after a
  restart) gets the parse of its own bytes;
- the streams' table filters are part of what a parse is kept under.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pymysql.protocol import MysqlPacket
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from airflow_provider_mysql_cdc.decoding import library_fixes
from airflow_provider_mysql_cdc.decoding.table_map import column_specs_from_table_map
from tests.exactness.scenario import binlog_position
from tests.integration.library_stream import library_events
from tests.mysql_servers import MySqlTestServer

DATABASE = "table_map_reuse"


def _table_maps(server: MySqlTestServer, start: tuple[str, int], **filters: Any) -> Iterator[Any]:
    """The table maps written after ``start`` (of the rows the stream keeps), read with the library
    and this project's fixes, as ``BinlogReader`` reads them."""
    events = library_events(server, start, [TableMapEvent, WriteRowsEvent], **filters)
    return (event for event in events if isinstance(event, TableMapEvent))


def _described(event: Any) -> tuple[Any, ...]:
    """What a table map says, as the capture reads it: names, the column specs, the table id."""
    return (event.schema, event.table, int(event.table_id), tuple(column_specs_from_table_map(event)))


def _write_transactions(server: MySqlTestServer) -> tuple[str, int]:
    """Two inserts, an ALTER TABLE (a column added, a column's character set changed), two inserts;
    returns the binlog position before them."""
    server.execute(
        f"DROP DATABASE IF EXISTS {DATABASE}",
        f"CREATE DATABASE {DATABASE}",
        f"CREATE TABLE {DATABASE}.t (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET utf8mb4, e ENUM('x', 'y'))",
        f"CREATE TABLE {DATABASE}.other (id INT PRIMARY KEY)",
    )
    start = binlog_position(server)
    server.execute(
        f"INSERT INTO {DATABASE}.t VALUES (1, 'one', 'x')",
        f"INSERT INTO {DATABASE}.t VALUES (2, 'two', 'y')",
        f"INSERT INTO {DATABASE}.other VALUES (1)",
        f"ALTER TABLE {DATABASE}.t ADD COLUMN b INT, MODIFY a VARCHAR(20) CHARACTER SET latin1",
        f"INSERT INTO {DATABASE}.t VALUES (3, 'three', 'x', 3)",
        f"INSERT INTO {DATABASE}.t VALUES (4, 'four', 'y', 4)",
    )
    return start


def test_a_reused_table_map_parse_equals_a_fresh_one_and_a_changed_table_map_is_parsed_again(
    mysql_server: MySqlTestServer,
) -> None:
    start = _write_transactions(mysql_server)
    library_fixes._PARSED_TABLE_MAPS.clear()
    events = [event for event in _table_maps(mysql_server, start) if event.schema == DATABASE]
    assert [(event.table, len(event.columns)) for event in events] == [
        ("t", 3),
        ("t", 3),
        ("other", 1),
        ("t", 4),
        ("t", 4),
    ]
    first, second, other, altered, altered_again = events
    assert second.table_obj is first.table_obj  # the second transaction's table map reused the first's parse
    assert altered_again.table_obj is altered.table_obj
    assert altered.table_obj is not first.table_obj  # the ALTER changed the bytes: parsed anew
    assert other.table_obj is not first.table_obj
    assert [spec.name for spec in column_specs_from_table_map(altered)] == ["id", "a", "e", "b"]
    assert column_specs_from_table_map(first)[1].charset == "utf8mb4"
    assert column_specs_from_table_map(altered)[1].charset == "latin1"

    described = [_described(event) for event in events]
    library_fixes._PARSED_TABLE_MAPS.clear()
    fresh: list[Any] = []
    for event in _table_maps(mysql_server, start):
        if event.schema == DATABASE:
            fresh.append(_described(event))
            library_fixes._PARSED_TABLE_MAPS.clear()  # every table map of this read is parsed from its bytes
    assert described == fresh


class _ControlConnection:
    """What the library's event classes ask of the control connection while parsing a packet."""

    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mysql"


def _parse(packet_data: bytes, table_id: int, post_header_lengths: Any) -> Any:
    """The library's table map event for one packet of the stream (OK byte, header, body, checksum)
    after its table id is replaced by ``table_id``, read with the stream's settings."""
    data = packet_data[:20] + table_id.to_bytes(6, "little") + packet_data[26:]
    wrapper = BinLogPacketWrapper(
        MysqlPacket(data, "utf8"),
        {},
        _ControlConnection(),
        (9, 7, 0),
        True,  # use_checksum: the stream's files are written with CRC32
        frozenset({TableMapEvent}),
        None,
        None,
        None,
        None,
        False,
        False,
        False,  # verify_checksum: the table id was replaced
        True,  # optional_meta_data
        False,
        False,
        post_header_lengths,
    )
    return wrapper.event


def test_a_reused_table_id_gets_the_parse_of_its_own_bytes(mysql_server: MySqlTestServer) -> None:
    start = _write_transactions(mysql_server)
    library_fixes._PARSED_TABLE_MAPS.clear()
    events = [event for event in _table_maps(mysql_server, start) if event.schema == DATABASE and event.table == "t"]
    before, after = events[0], events[-1]
    packets = [bytes(event.packet.packet.get_all_data()) for event in (before, after)]
    table_id = int(before.table_id)
    reparsed_before = _parse(packets[0], table_id, before._post_header_lengths)
    # The altered table's bytes under the first one's table id:
    reparsed_after = _parse(packets[1], table_id, before._post_header_lengths)
    assert reparsed_before.table_obj is before.table_obj  # the same bytes: the parse was reused
    assert reparsed_after.table_obj is not before.table_obj
    assert [spec.name for spec in column_specs_from_table_map(reparsed_after)] == ["id", "a", "e", "b"]
    assert column_specs_from_table_map(reparsed_after)[1].charset == "latin1"


def test_a_parse_is_kept_per_stream_filter(mysql_server: MySqlTestServer) -> None:
    start = _write_transactions(mysql_server)
    library_fixes._PARSED_TABLE_MAPS.clear()
    unfiltered = [event for event in _table_maps(mysql_server, start) if event.schema == DATABASE]
    only_other = list(_table_maps(mysql_server, start, only_schemas=[DATABASE], only_tables=["other"]))
    assert [event.table for event in only_other] == ["other"]  # the filter applies to reused parses too
    assert only_other[0].table_obj is not unfiltered[2].table_obj  # kept apart from the unfiltered stream's
    assert _described(only_other[0]) == _described(unfiltered[2])
