"""Binlog value readers: one column's value read from a row image, for the types
python-mysql-replication (1.0.x) decodes wrong or lossy.

Each reader takes ``(packet, column)``: ``packet.read(n)`` returns the next ``n`` bytes of the row
image, ``column`` is the library's column of the table map. :data:`VALUE_READERS` maps a binlog
column type to its reader; :func:`~airflow_provider_mysql_cdc.decoding.binlog_rows.decoded_rows`
uses them in place of the library's reading, and the compiled decoders
(:mod:`~airflow_provider_mysql_cdc.decoding.compiled_rows`) call them for the rarer types.

Library bugs found (1.0.17 against MySQL 9.7), each reproduced, and how the readers handle them:

* DATE/DATETIME ``0000-00-00`` and ``2024-00-15`` come back as None (= SQL NULL), a zero TIMESTAMP
  as 1970-01-01, and a DATE ``2024-02-30`` (``ALLOW_INVALID_DATES``) raises ``ValueError``: read
  from the raw bytes here, the original text is kept (:class:`InvalidValue` ->
  ``_cdc_invalid_values``).
* Negative TIME with a fraction is wrong (``-12:34:56.7`` -> ``-12:34:56.3``, ``-00:00:00.000001``
  -> ``-00:00:00.999999``): TIME2 is decoded as MySQL's ``my_time_packed_from_binary`` does.
* YEAR ``0000`` -> 1900: 0.
* An empty SET -> None, other SETs -> an unordered Python ``set``: the bitmask is read here and
  mapped to the members by the converter.
* BINARY(n) loses its trailing 0x00 (the binlog strips them) and an empty one comes back as ``''``:
  read as ``bytes`` here, padded back to n bytes by the converter.
* Text comes back decoded with the wrong codec for latin1 and utf16/utf32: read as bytes here,
  decoded by the converter (:mod:`~airflow_provider_mysql_cdc.decoding.charsets`).
* JSON (see :mod:`~airflow_provider_mysql_cdc.decoding.json_text`): decoded here straight to
  MySQL's text.
* MySQL 9 VECTOR: rows raise ``NotImplementedError``: read as bytes here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from airflow_provider_mysql_cdc.decoding.json_text import json_binary_to_text
from airflow_provider_mysql_cdc.decoding.values import InvalidValue, datetime_or_invalid, timestamp_value

__all__ = [
    "VALUE_READERS",
    "VECTOR_TYPE",
    "read_bit",
    "read_date",
    "read_datetime",
    "read_datetime2",
    "read_json",
    "read_long_string",
    "read_short_string",
    "read_time",
    "read_time2",
    "read_timestamp",
    "read_timestamp2",
    "read_uint_of_size",
    "read_year",
]

#: ``MYSQL_TYPE_VECTOR`` (MySQL 9), unknown to the library.
VECTOR_TYPE = 242


def _frac(raw: bytes, fsp: int) -> int:
    """Microseconds of the big-endian fractional part of DATETIME2/TIMESTAMP2 (``fsp`` digits)."""
    if not fsp:
        return 0
    return int.from_bytes(raw, "big") * (10_000, 100, 1)[(fsp - 1) // 2]


def _fsp_bytes(column: Any) -> int:
    return (int(column.fsp) + 1) // 2


def read_date(packet: Any, column: Any) -> Any:
    """DATE: 3 bytes, ``year << 9 | month << 5 | day``; a zero or partial date as its :class:`InvalidValue`."""
    value = int.from_bytes(packet.read(3), "little")
    year, month, day = value >> 9, (value >> 5) & 15, value & 31
    try:
        return dt.date(year, month, day)
    except ValueError:
        return InvalidValue(f"{year:04d}-{month:02d}-{day:02d}")


def read_datetime2(packet: Any, column: Any) -> Any:
    """DATETIME2 (5.6.4+): 5 bytes big-endian then the fraction; invalid dates as :class:`InvalidValue`."""
    raw = packet.read(5 + _fsp_bytes(column))
    packed = int.from_bytes(raw[:5], "big") - 0x80_0000_0000
    ymd, hms = packed >> 17, packed & 0x1FFFF
    year, month = divmod(ymd >> 5, 13)
    clock = (hms >> 12, (hms >> 6) & 63, hms & 63)
    return datetime_or_invalid((year, month, ymd & 31), clock, _frac(raw[5:], column.fsp), column.fsp)


def read_datetime(packet: Any, column: Any) -> Any:
    """Pre-5.6.4 DATETIME: ``YYYYMMDDhhmmss`` as a little-endian uint64."""
    date, clock = divmod(int.from_bytes(packet.read(8), "little"), 1_000_000)
    hms = (clock // 10_000, clock // 100 % 100, clock % 100)
    return datetime_or_invalid((date // 10_000, date // 100 % 100, date % 100), hms, 0, 0)


def read_timestamp2(packet: Any, column: Any) -> Any:
    """TIMESTAMP2 (5.6.4+): seconds (4 bytes big-endian) then the fraction; UTC."""
    raw = packet.read(4 + _fsp_bytes(column))
    return timestamp_value(int.from_bytes(raw[:4], "big"), _frac(raw[4:], column.fsp), column.fsp)


def read_timestamp(packet: Any, column: Any) -> Any:
    """Pre-5.6.4 TIMESTAMP: seconds as a little-endian uint32; UTC."""
    return timestamp_value(int.from_bytes(packet.read(4), "little"), 0, 0)


def read_time2(packet: Any, column: Any) -> dt.timedelta:
    """TIME2 as ``my_time_packed_from_binary`` reads it: negative values store the fraction
    reversed (``intpart + 1``, ``frac - 0x100...``), which the library ignores."""
    fsp = int(column.fsp)
    raw = packet.read(3 + (fsp + 1) // 2)
    if fsp >= 5:
        packed = int.from_bytes(raw, "big") - 0x8000_0000_0000
    else:
        intpart = int.from_bytes(raw[:3], "big") - 0x80_0000
        frac = int.from_bytes(raw[3:], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 1 << (8 * len(raw[3:]))
        packed = (intpart << 24) + frac * (1, 10_000, 100)[len(raw) - 3]
    negative, packed = packed < 0, abs(packed)
    hms = packed >> 24
    value = dt.timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 63, seconds=hms & 63)
    value += dt.timedelta(microseconds=packed & 0xFFFFFF)
    return -value if negative else value


def read_time(packet: Any, column: Any) -> dt.timedelta:
    """Pre-5.6.4 TIME: ``±hhmmss`` as a little-endian int24."""
    value = int.from_bytes(packet.read(3), "little", signed=True)
    hours, rest = divmod(abs(value), 10_000)
    result = dt.timedelta(hours=hours, minutes=rest // 100, seconds=rest % 100)
    return -result if value < 0 else result


def read_year(packet: Any, column: Any) -> int:
    """YEAR: one byte, years since 1900; 0 is the year 0000."""
    value: int = packet.read(1)[0]
    return 1900 + value if value else 0


def read_uint_of_size(packet: Any, column: Any) -> int:
    """ENUM index / SET bitmask (the converter maps them to labels)."""
    return int.from_bytes(packet.read(column.size), "little")


def read_bit(packet: Any, column: Any) -> bytes:
    """BIT(n): its bytes, big-endian (the converter turns BIT(1) into a bool)."""
    data: bytes = packet.read(column.bytes)
    return data


def read_short_string(packet: Any, column: Any) -> bytes:
    """CHAR/VARCHAR/BINARY/VARBINARY: 1- or 2-byte length, then the stored bytes."""
    size = 2 if column.max_length > 255 else 1
    data: bytes = packet.read(int.from_bytes(packet.read(size), "little"))
    return data


def read_long_string(packet: Any, column: Any) -> bytes:
    """BLOB/TEXT/geometry/VECTOR: ``length_size``-byte length, then the stored bytes."""
    data: bytes = packet.read(int.from_bytes(packet.read(column.length_size), "little"))
    return data


def read_json(packet: Any, column: Any) -> str:
    """JSON: the binary value as MySQL's text (:func:`json_binary_to_text`)."""
    return json_binary_to_text(read_long_string(packet, column))


#: Binlog column type -> its reader (the types not listed are read by the library: decoded correctly).
VALUE_READERS: dict[int, Callable[[Any, Any], Any]] = {
    FIELD_TYPE.DATE: read_date,
    FIELD_TYPE.DATETIME2: read_datetime2,
    FIELD_TYPE.DATETIME: read_datetime,
    FIELD_TYPE.TIMESTAMP2: read_timestamp2,
    FIELD_TYPE.TIMESTAMP: read_timestamp,
    FIELD_TYPE.TIME2: read_time2,
    FIELD_TYPE.TIME: read_time,
    FIELD_TYPE.YEAR: read_year,
    FIELD_TYPE.ENUM: read_uint_of_size,
    FIELD_TYPE.SET: read_uint_of_size,
    FIELD_TYPE.BIT: read_bit,
    FIELD_TYPE.STRING: read_short_string,
    FIELD_TYPE.VARCHAR: read_short_string,
    FIELD_TYPE.VAR_STRING: read_short_string,
    FIELD_TYPE.BLOB: read_long_string,
    FIELD_TYPE.GEOMETRY: read_long_string,
    FIELD_TYPE.JSON: read_json,
    VECTOR_TYPE: read_long_string,
}
