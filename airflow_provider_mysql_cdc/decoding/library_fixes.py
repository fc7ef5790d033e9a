"""Repairs of python-mysql-replication's (1.0.x) table-map parsing, installed explicitly.

Library bugs found (1.0.17 against MySQL 9.7), each reproduced, that :func:`install_table_map_fixes`
repairs (it only repairs parsing that crashed or lost data):

* MySQL 9 VECTOR: the table map cannot be read (``ValueError: 13 is not a valid
  MetadataFieldType``; the column's metadata byte is not consumed and the charset list is
  misaligned).
* Non-UTF-8 ENUM/SET labels become ``''``; labels and column names of 128 bytes or more break the
  table map (read as 7-bit varints instead of packed integers): read right, the bytes kept (the
  spec decodes labels with the column's charset).
* Primary-key columns with a prefix (``PRIMARY KEY (t(10))``) are not flagged: flagged.
* Columns do not say whether they are nullable: ``nullable`` from the table map's null bitmap.

Nothing here runs at import time: importing a ``decoding`` module never changes the library.
:func:`~airflow_provider_mysql_cdc.capture.binlog_library.install_library_fixes` (run by
``BinlogReader.open()``, and by anything else that reads table maps: tests, benchmarks) installs
these together with the binlog reader's own hooks. The fixes change how *table maps* are parsed, so
they must be installed before a stream starts.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.column import Column
from pymysqlreplication.constants.BINLOG import BINLOG_CHECKSUM_LEN
from pymysqlreplication.row_event import TableMapEvent

from airflow_provider_mysql_cdc.decoding.binlog_values import VECTOR_TYPE
from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = ["install_table_map_fixes"]

#: Table-map optional metadata ``VECTOR_DIMENSIONALITY`` (MySQL 9); the library knows types 1-12.
_VECTOR_DIMENSIONALITY = 13
_LAST_KNOWN_METADATA_FIELD = 12

_fixes_installed = False


def _packed_int(data: bytes, pos: int) -> tuple[int, int]:
    """MySQL's packed (length-encoded) integer: (value, next position)."""
    first = data[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "little"), pos + 1 + size


def _read_packed_strings(event: Any, length: int, one_list: bool) -> list[Any]:
    """Column names (``one_list``) or ENUM/SET label lists, with packed-integer lengths (the library
    reads 7-bit varints, wrong from 128 bytes on). Bytes are kept losslessly: UTF-8 with ``surrogateescape``;
    :func:`~airflow_provider_mysql_cdc.decoding.table_map.column_specs_from_table_map` re-decodes labels with the
    column charset."""
    packet = event.packet
    end = packet.read_bytes + length
    result: list[Any] = []
    while packet.read_bytes < end:
        count = 1 if one_list else packet.read_length_coded_binary()
        values = [
            packet.read(packet.read_length_coded_binary()).decode("utf-8", "surrogateescape") for _ in range(count)
        ]
        if one_list:
            result.extend(values)
        else:
            result.append(values)
    return result


def _drop_unknown_metadata(event: Any) -> None:
    """Remove optional-metadata fields the library cannot parse (MySQL 9's ``VECTOR_DIMENSIONALITY``
    and any newer type) from the event's packet, keeping the vector dimensions on the columns."""
    if getattr(event.packet, "_BinLogPacketWrapper__data_buffer", b""):
        return  # bytes were pushed back: the raw packet's position is not the reading position
    raw_packet = event.packet.packet
    data: bytes = raw_packet._data
    start, end = raw_packet._position, len(data) - BINLOG_CHECKSUM_LEN
    kept, pos, dimensions = bytearray(), start, []
    while pos < end:
        length, value_start = _packed_int(data, pos + 1)
        value_end = value_start + length
        if data[pos] <= _LAST_KNOWN_METADATA_FIELD:
            kept += data[pos:value_end]
        elif data[pos] == _VECTOR_DIMENSIONALITY:
            at = value_start
            while at < value_end:
                dimension, at = _packed_int(data, at)
                dimensions.append(dimension)
        pos = value_end
    if len(kept) != end - start:
        raw_packet._data = data[:start] + bytes(kept) + data[end:]
    vectors = [column for column in event.columns if column.type == VECTOR_TYPE]
    for column, dimension in zip(vectors, dimensions, strict=False):
        column.dimensions = dimension


def install_table_map_fixes() -> None:
    """Repair the library's table-map parsing in place (idempotent; never run at import time):

    * VECTOR columns (MySQL 9): read their 1-byte metadata, count them among the columns that
      have a character set (``binary``), as the server does; skip optional-metadata types > 12.
    * Column names and ENUM/SET labels: packed-integer lengths, bytes kept losslessly.
    * Every column gets ``nullable`` (from the table map's null bitmap) and prefix primary key
      columns get ``is_primary``.
    """
    global _fixes_installed
    if _fixes_installed:
        return
    parse_column = getattr(Column, "_Column__parse_column_definition", None)
    read_optional = getattr(TableMapEvent, "_get_optional_meta_data", None)
    is_character = getattr(TableMapEvent, "_is_character_column", None)
    if parse_column is None or read_optional is None or is_character is None:
        raise TerminalCdcError("this python-mysql-replication version is not supported (install 1.0.x)")

    def parse_column_definition(column: Any, column_type: int, packet: Any) -> None:
        parse_column(column, column_type, packet)
        if column_type == VECTOR_TYPE:
            column.length_size = packet.read_uint8()
            column.dimensions = None

    def is_character_column(column_type: int, dbms: str = "mysql") -> bool:
        return column_type == VECTOR_TYPE or bool(is_character(column_type, dbms=dbms))

    def get_optional_meta_data(event: Any) -> Any:
        _drop_unknown_metadata(event)
        metadata = read_optional(event)
        for index, column in enumerate(event.columns):
            column.nullable = bool(event.null_bitmask[index // 8] & (1 << (index % 8)))
        for index in metadata.primary_keys_with_prefix or {}:
            event.columns[index].is_primary = True
        return metadata

    Column._Column__parse_column_definition = parse_column_definition
    TableMapEvent._get_optional_meta_data = get_optional_meta_data
    TableMapEvent._is_character_column = staticmethod(is_character_column)
    TableMapEvent._read_column_names = lambda event, length: _read_packed_strings(event, length, True)
    TableMapEvent._read_type_values = lambda event, length: _read_packed_strings(event, length, False)
    _fixes_installed = True
