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

And one change for speed: the library parses every table map from its bytes, and MySQL logs one in
every transaction, before each table's first row event. In a binlog of small transactions that parse
was half of the capture's time (1-row transactions: 78 of 156 profiled seconds). The parsed table
map is a function of the event's bytes after the header (table id, names, column types and metadata,
optional metadata) and of the stream's settings, so :func:`install_table_map_fixes` also makes the
library keep the parsed state of recent table maps (:class:`_ParsedTableMaps`) and reuse it for a
table map with the same bytes: the columns and table object are shared, the event's own header
fields (timestamp, packet) are its own. A table map is only kept when the library's parse did not
ask the server (it has every column's name: ``binlog_row_metadata = FULL``, which capture requires),
so a reused one says exactly what parsing its bytes would.

Nothing here runs at import time: importing a ``decoding`` module never changes the library.
:func:`~airflow_provider_mysql_cdc.capture.binlog_library.install_library_fixes` (run by
``BinlogReader.open()``, and by anything else that reads table maps: tests, benchmarks) installs
these together with the binlog reader's own hooks. The fixes change how *table maps* are parsed, so
they must be installed before a stream starts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pymysqlreplication.column import Column
from pymysqlreplication.constants.BINLOG import BINLOG_CHECKSUM_LEN
from pymysqlreplication.event import BinLogEvent
from pymysqlreplication.row_event import TableMapEvent

from airflow_provider_mysql_cdc.decoding.binlog_values import VECTOR_TYPE
from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = ["install_table_map_fixes"]

#: Table-map optional metadata ``VECTOR_DIMENSIONALITY`` (MySQL 9); the library knows types 1-12.
_VECTOR_DIMENSIONALITY = 13
_LAST_KNOWN_METADATA_FIELD = 12

#: How many parsed table maps :class:`_ParsedTableMaps` keeps (the least recently used goes first).
PARSED_TABLE_MAPS_KEPT = 1024
#: Stream settings a table map's parse depends on, part of the key a parsed one is kept under.
_PARSE_SETTINGS = ("only_tables", "ignored_tables", "only_schemas", "ignored_schemas", "optional_meta_data")
#: Attributes of a parsed table map that belong to the event that carried it, never kept.
_PER_EVENT = frozenset({"packet", "table_map", "_ctl_connection", "timestamp"})

_fixes_installed = False


class _ParsedTableMaps:
    """The parsed state of recently seen table maps, by their bytes after the header and the stream's
    settings (see the module docstring); bounded, least recently used dropped first; thread-safe."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._parsed: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with self._lock:
            parsed = self._parsed.get(key)
            if parsed is not None:
                self._parsed.move_to_end(key)
            return parsed

    def put(self, key: tuple[Any, ...], parsed: dict[str, Any]) -> None:
        with self._lock:
            self._parsed[key] = parsed
            self._parsed.move_to_end(key)
            while len(self._parsed) > self._kept:
                self._parsed.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._parsed.clear()


_PARSED_TABLE_MAPS = _ParsedTableMaps(PARSED_TABLE_MAPS_KEPT)


def _parse_key(from_packet: Any, event_size: int, kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The key a table map's parse is kept under: its bytes after the header (without the checksum:
    ``event_size`` excludes it) and the settings it depends on; None when it must be parsed (a schema
    frozen by the stream, or bytes pushed back into the packet)."""
    if kwargs.get("freeze_schema") or getattr(from_packet, "_BinLogPacketWrapper__data_buffer", b""):
        return None
    raw_packet = from_packet.packet
    start = int(raw_packet._position)
    body = bytes(raw_packet._data[start : start + int(event_size)])
    settings = tuple(_hashable(kwargs.get(name)) for name in _PARSE_SETTINGS)
    return (body, settings, tuple(kwargs.get("post_header_lengths") or ()))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple | set | frozenset) else value


def _reusing_table_map_init(library_init: Callable[..., None]) -> Callable[..., None]:
    """``TableMapEvent.__init__`` that reuses the parse of a table map with the same bytes."""

    def init(event: Any, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any, **kwargs: Any) -> None:
        key = _parse_key(from_packet, event_size, kwargs)
        parsed = None if key is None else _PARSED_TABLE_MAPS.get(key)
        if parsed is None:
            library_init(event, from_packet, event_size, table_map, ctl_connection, **kwargs)
            if key is not None and _parsed_from_bytes_alone(event):
                _PARSED_TABLE_MAPS.put(key, {k: v for k, v in vars(event).items() if k not in _PER_EVENT})
            return
        BinLogEvent.__init__(event, from_packet, event_size, table_map, ctl_connection, **kwargs)
        own = vars(event)  # what the base class set: this event's header fields, packet and settings
        own.update({name: value for name, value in parsed.items() if name not in own})
        table_map[event.table_id] = event.table_obj

    return init


def _parsed_from_bytes_alone(event: Any) -> bool:
    """Whether the library's parse of ``event`` came from its bytes only: processed, with every
    column's name in the optional metadata (else the library asked the server for the names)."""
    if not getattr(event, "_processed", False) or getattr(event, "table_obj", None) is None:
        return False
    metadata = getattr(event, "optional_metadata", None)
    names = getattr(metadata, "column_name_list", None) or []
    return len(names) == int(event.column_count) and all(column.name is not None for column in event.columns)


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
    * A table map with the same bytes as a recent one reuses its parse (see the module docstring).
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
    TableMapEvent.__init__ = _reusing_table_map_init(TableMapEvent.__init__)
    TableMapEvent._get_optional_meta_data = get_optional_meta_data
    TableMapEvent._is_character_column = staticmethod(is_character_column)
    TableMapEvent._read_column_names = lambda event, length: _read_packed_strings(event, length, True)
    TableMapEvent._read_type_values = lambda event, length: _read_packed_strings(event, length, False)
    _fixes_installed = True
