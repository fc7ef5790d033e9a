"""Row values of python-mysql-replication (``pymysqlreplication`` 1.0.x) -> Arrow-ready values.

Capture reads most row events with :mod:`compiled_rows` (code generated per table version, which
reuses this module's readers and converters for the rarer types); this module is the reference that
code is tested against, and the path for the events it leaves to the library (partial JSON updates,
images without every column). Three steps, each for one reason:

* :func:`column_specs_from_table_map` builds the :class:`~airflow_provider_mysql_cdc.core.types.ColumnSpec`
  of every column from the table map (``binlog_row_metadata=FULL``: names, signedness, character
  sets, ENUM/SET labels, primary key, nullability).
* :func:`decoded_rows` is ``event.rows`` with our value decoding for the types the library gets
  wrong or lossy (list below). It swaps the event's class for a subclass that overrides the
  library's per-value reading routine for the duration of the call, so no other user of the library
  sees a change.
* :class:`RowConverter` turns one decoded row dict into the staged values, in column order, then
  the ``_cdc_invalid_values`` map (see the README's "Type map").

Library bugs found (1.0.17 against MySQL 9.7), each reproduced, and how they are handled:

* DATE/DATETIME ``0000-00-00`` and ``2024-00-15`` come back as None (= SQL NULL), a zero TIMESTAMP
  as 1970-01-01, and a DATE ``2024-02-30`` (``ALLOW_INVALID_DATES``) raises ``ValueError``: read
  from the raw bytes here, the original text is kept (:class:`InvalidValue` ->
  ``_cdc_invalid_values``).
* Negative TIME with a fraction is wrong (``-12:34:56.7`` -> ``-12:34:56.3``, ``-00:00:00.000001``
  -> ``-00:00:00.999999``): TIME2 is decoded as MySQL's ``my_time_packed_from_binary`` does.
* YEAR ``0000`` -> 1900: 0.
* An empty SET -> None, other SETs -> an unordered Python ``set``: the bitmask is mapped to the
  members in definition order, joined by ``,``.
* latin1 bytes 0x81 0x8D 0x8F 0x90 0x9D raise ``UnicodeDecodeError`` (Python's cp1252 leaves them
  undefined): MySQL's latin1 table is used. utf16/ucs2/utf32 are decoded little-endian (Python's
  BOM-less default): big-endian, as MySQL stores them.
* BINARY(n) loses its trailing 0x00 (the binlog strips them) and an empty one comes back as ``''``:
  padded back to n bytes, always ``bytes``.
* JSON: opaque values lose their type (DATE and DATETIME look alike, TIME loses its sign, other
  types are decoded as lossy text) and a TIME beyond 24 hours raises ``ValueError``: the binary
  JSON is decoded here straight to MySQL's text (:func:`json_binary_to_text`).
* MySQL 9 VECTOR: the table map cannot be read (``ValueError: 13 is not a valid
  MetadataFieldType``; the column's metadata byte is not consumed and the charset list is
  misaligned), rows raise ``NotImplementedError``: fixed by :func:`install_library_fixes`, values
  decoded here.
* Non-UTF-8 ENUM/SET labels become ``''``; labels and column names of 128 bytes or more break the
  table map (read as 7-bit varints instead of packed integers): :func:`install_library_fixes`
  reads them right and keeps the bytes; the spec decodes labels with the column's charset.
* Primary-key columns with a prefix (``PRIMARY KEY (t(10))``) are not flagged: flagged.

:func:`install_library_fixes` changes how *table maps* are parsed, so it must run before a stream
starts; this module runs it when imported. It only repairs parsing that crashed or lost data.
"""

from __future__ import annotations

import base64
import codecs
import datetime as dt
import functools
import math
import struct
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from pymysqlreplication.bitmap import BitGet
from pymysqlreplication.column import Column
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.constants.BINLOG import BINLOG_CHECKSUM_LEN
from pymysqlreplication.json_binary import JsonDiff
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    RowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from airflow_provider_mysql_cdc.core.types import (
    BINARY_TYPES,
    DECIMAL128_MAX_PRECISION,
    INTEGER_TYPES,
    TEXT_TYPES,
    ColumnSpec,
)
from airflow_provider_mysql_cdc.errors import TerminalCdcError

#: ``MYSQL_TYPE_VECTOR`` (MySQL 9), unknown to the library.
VECTOR_TYPE = 242
#: Table-map optional metadata ``VECTOR_DIMENSIONALITY`` (MySQL 9); the library knows types 1-12.
_VECTOR_DIMENSIONALITY = 13
_LAST_KNOWN_METADATA_FIELD = 12

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)


class InvalidValue(str):
    """A value MySQL stores but the typed column cannot hold (zero/partial dates); the text is
    ``CAST(col AS CHAR)``'s. The converter stages NULL and keeps the text in ``_cdc_invalid_values``."""

    __slots__ = ()


# -- character sets -----------------------------------------------------------------------------

#: MySQL's latin1 is cp1252 whose five undefined bytes map to the C1 controls of the same number.
_LATIN1_TABLE = "".join(bytes([b]).decode("cp1252", errors="ignore") or chr(b) for b in range(256))

#: MySQL character set -> Python codec (``None``: binary, staged as bytes).
_CODECS: dict[str, str | None] = {
    "binary": None,
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "ascii": "ascii",
    "latin1": "mysql-latin1",
    "latin2": "iso8859-2",
    "latin5": "iso8859-9",
    "latin7": "iso8859-13",
    "greek": "iso8859-7",
    "hebrew": "iso8859-8",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "macroman": "mac-roman",
    "macce": "mac-latin2",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "big5": "big5",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc-jp",
    "euckr": "euc-kr",
    "tis620": "tis-620",
}


def _text_decoder(charset: str, where: str) -> Callable[[bytes], str]:
    codec = _CODECS.get(charset)
    if codec is None:
        raise TerminalCdcError(f"{where}: character set {charset!r} cannot be decoded (no Python codec)")
    if codec == "mysql-latin1":
        return lambda raw: codecs.charmap_decode(raw, "strict", _LATIN1_TABLE)[0]
    return functools.partial(bytes.decode, encoding=codec)


def _charset_of(column: Any) -> str:
    """MySQL charset name from the library's column (its collation name starts with it)."""
    collation: str | None = column.collation_name
    if not collation:
        return "utf8mb4"
    charset = collation.split("_", 1)[0]
    return "utf8mb3" if charset == "utf8" else charset


# -- MySQL's JSON text ----------------------------------------------------------------------------

_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPE_TABLE = {code: _JSON_ESCAPES.get(chr(code), f"\\u{code:04x}") for code in range(0x20)}
_JSON_ESCAPE_TABLE.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _json_quote(text: str) -> str:
    """MySQL's ``double_quote``: escape ``"``, ``\\`` and controls below 0x20; nothing else."""
    return '"' + text.translate(_JSON_ESCAPE_TABLE) + '"'


def mysql_double_text(value: float) -> str:
    """A double as MySQL prints it in JSON (``my_gcvt`` with ``MY_GCVT_MAX_FIELD_WIDTH``, then
    ``.0`` when the text has neither ``.`` nor ``e``).

    ``my_gcvt`` takes the shortest round-trip digits (Python's ``repr`` digits) and uses the fixed
    notation when the decimal exponent ``decpt`` is in -14..15 (or the number has more digits than
    ``decpt``), else ``d.ddde[-]N``; with that width nothing is ever truncated.
    """
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    digits_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()[1:]
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_tuple))
    decpt = len(digits) + exponent
    if -14 <= decpt <= 15 or len(digits) > decpt > 0:
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < len(digits):
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - len(digits)) + ".0"
        return sign + text
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{decpt - 1}"


def _time_text(negative: bool, hms: tuple[int, int, int], micros: int, fsp: int = 6) -> str:
    hours, minutes, seconds = hms
    text = f"{'-' if negative else ''}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return text + f".{micros:06d}"[: fsp + 1] if fsp else text


def _timedelta_text(value: dt.timedelta, fsp: int = 6) -> str:
    total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    seconds, micros = divmod(abs(total), 1_000_000)
    return _time_text(total < 0, (seconds // 3600, seconds // 60 % 60, seconds % 60), micros, fsp)


def mysql_json_text(value: Any) -> str:
    """Python values (as the library decodes JSON, or hand-written) as MySQL's JSON text
    (``CAST(j AS CHAR)``): ``, `` and ``: `` separators, object keys in MySQL's order (by length,
    then bytes), strings escaped like MySQL, doubles like :func:`mysql_double_text`, DECIMAL with
    its scale, temporal values quoted (date, datetime with 6 digits, TIME from ``timedelta``/``time``)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return mysql_double_text(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return _json_quote(value.decode("utf-8"))
    if isinstance(value, str):
        return _json_quote(value)
    if isinstance(value, Mapping):
        items = [(key.encode("utf-8") if isinstance(key, str) else key, item) for key, item in value.items()]
        items.sort(key=lambda pair: (len(pair[0]), pair[0]))
        return "{" + ", ".join(f"{_json_quote(k.decode('utf-8'))}: {mysql_json_text(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(mysql_json_text(item) for item in value) + "]"
    if isinstance(value, dt.datetime):
        return '"' + value.replace(tzinfo=None).isoformat(" ", "microseconds") + '"'
    if isinstance(value, dt.date):
        return '"' + value.isoformat() + '"'
    if isinstance(value, dt.timedelta):
        return '"' + _timedelta_text(value) + '"'
    if isinstance(value, dt.time):
        return '"' + value.isoformat("microseconds") + '"'
    raise TypeError(f"no JSON text for {type(value).__name__}")


# -- binary JSON (MySQL's json_binary format) -> text ---------------------------------------------

_JSONB_SMALL_OBJECT, _JSONB_LARGE_OBJECT, _JSONB_SMALL_ARRAY, _JSONB_LARGE_ARRAY = 0, 1, 2, 3
_JSONB_LITERAL, _JSONB_INT16, _JSONB_UINT16, _JSONB_INT32, _JSONB_UINT32 = 4, 5, 6, 7, 8
_JSONB_INT64, _JSONB_UINT64, _JSONB_DOUBLE, _JSONB_STRING, _JSONB_OPAQUE = 9, 10, 11, 12, 15
_JSONB_LITERALS = {0: "null", 1: "true", 2: "false"}
_JSONB_NUMBERS = {
    _JSONB_INT16: "<h",
    _JSONB_UINT16: "<H",
    _JSONB_INT32: "<i",
    _JSONB_UINT32: "<I",
    _JSONB_INT64: "<q",
    _JSONB_UINT64: "<Q",
}


def _varlen(data: bytes, pos: int) -> tuple[int, int]:
    """A json_binary variable-length integer (7 bits per byte, low first): (value, next position)."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _json_at(type_: int, data: bytes, pos: int) -> str:
    """Text of the value of type ``type_`` whose bytes start at ``data[pos]``."""
    if type_ <= _JSONB_LARGE_ARRAY:
        return _json_container(data, pos, large=type_ in (_JSONB_LARGE_OBJECT, _JSONB_LARGE_ARRAY), obj=type_ <= 1)
    if type_ == _JSONB_LITERAL:
        return _JSONB_LITERALS[data[pos]]
    if type_ in _JSONB_NUMBERS:
        return str(struct.unpack_from(_JSONB_NUMBERS[type_], data, pos)[0])
    if type_ == _JSONB_DOUBLE:
        return mysql_double_text(struct.unpack_from("<d", data, pos)[0])
    if type_ == _JSONB_STRING:
        length, start = _varlen(data, pos)
        return _json_quote(data[start : start + length].decode("utf-8"))
    if type_ == _JSONB_OPAQUE:
        length, start = _varlen(data, pos + 1)
        return _json_opaque(data[pos], data[start : start + length])
    raise TerminalCdcError(f"binary JSON value of unknown type {type_}")


def _json_container(data: bytes, base: int, *, large: bool, obj: bool) -> str:
    offset_format, offset_size = ("<I", 4) if large else ("<H", 2)
    count = struct.unpack_from(offset_format, data, base)[0]
    key_entries = base + 2 * offset_size
    value_entries = key_entries + (count * (offset_size + 2) if obj else 0)
    inline = {_JSONB_LITERAL, _JSONB_INT16, _JSONB_UINT16} | ({_JSONB_INT32, _JSONB_UINT32} if large else set())
    items = []
    for index in range(count):
        entry = value_entries + index * (1 + offset_size)
        type_ = data[entry]
        if type_ in inline:
            text = _json_at(type_, data, entry + 1)
        else:
            text = _json_at(type_, data, base + struct.unpack_from(offset_format, data, entry + 1)[0])
        if obj:
            key_entry = key_entries + index * (offset_size + 2)
            key_offset = base + struct.unpack_from(offset_format, data, key_entry)[0]
            key_length = struct.unpack_from("<H", data, key_entry + offset_size)[0]
            text = _json_quote(data[key_offset : key_offset + key_length].decode("utf-8")) + ": " + text
        items.append(text)
    return ("{" if obj else "[") + ", ".join(items) + ("}" if obj else "]")


def _json_opaque(field_type: int, payload: bytes) -> str:
    """An opaque scalar as ``Json_wrapper::to_string`` prints it."""
    if field_type == FIELD_TYPE.NEWDECIMAL:
        return format(decode_decimal(payload[2:], payload[0], payload[1]), "f")
    if field_type in (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME):
        packed = struct.unpack_from("<q", payload)[0]
        negative, packed = packed < 0, abs(packed)
        micros, whole = packed & 0xFFFFFF, packed >> 24  # whole: [ymd << 17 |] hour << 12 | min << 6 | sec
        clock = ((whole >> 12) & (0x3FF if field_type == FIELD_TYPE.TIME else 31), (whole >> 6) & 63, whole & 63)
        if field_type == FIELD_TYPE.TIME:
            return '"' + _time_text(negative, clock, micros) + '"'
        year, month = divmod(whole >> 22, 13)
        text = f"{year:04d}-{month:02d}-{(whole >> 17) & 31:02d}"
        if field_type != FIELD_TYPE.DATE:
            text += " " + _time_text(False, clock, micros)
        return '"' + text + '"'
    if field_type == FIELD_TYPE.VAR_STRING:
        return _json_quote(payload.decode("utf-8"))
    encoded = base64.b64encode(payload).decode("ascii")
    lines = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    return _json_quote(f"base64:type{field_type}:{lines}")


def json_binary_to_text(data: bytes) -> str:
    """A JSON column's binary value (MySQL's ``json_binary`` format) as ``CAST(j AS CHAR)`` prints it."""
    if not data:
        return "null"  # an empty binary value is JSON null for MySQL too
    return _json_at(data[0], data, 1)


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """(bytes, digits) of each digit group of a binary DECIMAL(precision, scale), most significant first:
    the leading partial integral group, whole 9-digit groups, then the trailing partial fraction group."""
    integral = precision - scale
    return (
        [(_DIG2BYTES[integral % 9], integral % 9)]
        + [(4, 9)] * (integral // 9)
        + [(4, 9)] * (scale // 9)
        + [(_DIG2BYTES[scale % 9], scale % 9)]
    )


def decode_decimal(raw: bytes, precision: int, scale: int) -> Decimal:
    """MySQL's binary DECIMAL(precision, scale) (``bin2decimal``): 9 digits per 4 bytes, big-endian,
    sign in the first bit, negative numbers bit-inverted."""
    integral = precision - scale
    sizes = decimal_groups(precision, scale)
    data = bytearray(raw[: sum(size for size, _ in sizes)])
    negative = not data[0] & 0x80
    data[0] ^= 0x80
    if negative:
        data = bytearray(byte ^ 0xFF for byte in data)
    groups, pos = [], 0
    for size, digits in sizes:
        groups.append(str(int.from_bytes(data[pos : pos + size], "big")).zfill(digits) if size else "")
        pos += size
    integral_count = 1 + integral // 9
    text = "".join(groups[:integral_count]).lstrip("0") or "0"
    if scale:
        text += "." + "".join(groups[integral_count:])
    return Decimal(("-" if negative else "") + text)


# -- per-value reading from the row event's packet ------------------------------------------------


def _frac(raw: bytes, fsp: int) -> int:
    """Microseconds of the big-endian fractional part of DATETIME2/TIMESTAMP2 (``fsp`` digits)."""
    if not fsp:
        return 0
    return int.from_bytes(raw, "big") * (10_000, 100, 1)[(fsp - 1) // 2]


def _fsp_bytes(column: Any) -> int:
    return (int(column.fsp) + 1) // 2


def _datetime_or_invalid(ymd: tuple[int, int, int], hms: tuple[int, int, int], micros: int, fsp: int) -> Any:
    year, month, day = ymd
    try:
        return dt.datetime(year, month, day, *hms, micros)
    except ValueError:
        text = f"{year:04d}-{month:02d}-{day:02d} " + _time_text(False, hms, micros, fsp)
        return InvalidValue(text)


def _read_date(packet: Any, column: Any) -> Any:
    value = int.from_bytes(packet.read(3), "little")
    year, month, day = value >> 9, (value >> 5) & 15, value & 31
    try:
        return dt.date(year, month, day)
    except ValueError:
        return InvalidValue(f"{year:04d}-{month:02d}-{day:02d}")


def _read_datetime2(packet: Any, column: Any) -> Any:
    raw = packet.read(5 + _fsp_bytes(column))
    packed = int.from_bytes(raw[:5], "big") - 0x80_0000_0000
    ymd, hms = packed >> 17, packed & 0x1FFFF
    year, month = divmod(ymd >> 5, 13)
    clock = (hms >> 12, (hms >> 6) & 63, hms & 63)
    return _datetime_or_invalid((year, month, ymd & 31), clock, _frac(raw[5:], column.fsp), column.fsp)


def _read_datetime(packet: Any, column: Any) -> Any:
    """Pre-5.6.4 DATETIME: ``YYYYMMDDhhmmss`` as a little-endian uint64."""
    date, clock = divmod(int.from_bytes(packet.read(8), "little"), 1_000_000)
    hms = (clock // 10_000, clock // 100 % 100, clock % 100)
    return _datetime_or_invalid((date // 10_000, date // 100 % 100, date % 100), hms, 0, 0)


def _timestamp(seconds: int, micros: int, fsp: int) -> Any:
    if seconds == 0:  # MySQL's zero TIMESTAMP; 1970-01-01 00:00:00 UTC itself is out of range
        return InvalidValue("0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else ""))
    return _EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)


def _read_timestamp2(packet: Any, column: Any) -> Any:
    raw = packet.read(4 + _fsp_bytes(column))
    return _timestamp(int.from_bytes(raw[:4], "big"), _frac(raw[4:], column.fsp), column.fsp)


def _read_timestamp(packet: Any, column: Any) -> Any:
    return _timestamp(int.from_bytes(packet.read(4), "little"), 0, 0)


def _read_time2(packet: Any, column: Any) -> dt.timedelta:
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


def _read_time(packet: Any, column: Any) -> dt.timedelta:
    """Pre-5.6.4 TIME: ``±hhmmss`` as a little-endian int24."""
    value = int.from_bytes(packet.read(3), "little", signed=True)
    hours, rest = divmod(abs(value), 10_000)
    result = dt.timedelta(hours=hours, minutes=rest // 100, seconds=rest % 100)
    return -result if value < 0 else result


def _read_year(packet: Any, column: Any) -> int:
    value: int = packet.read(1)[0]
    return 1900 + value if value else 0


def _read_uint_of_size(packet: Any, column: Any) -> int:
    """ENUM index / SET bitmask (the converter maps them to labels)."""
    return int.from_bytes(packet.read(column.size), "little")


def _read_bit(packet: Any, column: Any) -> bytes:
    data: bytes = packet.read(column.bytes)
    return data


def _read_short_string(packet: Any, column: Any) -> bytes:
    size = 2 if column.max_length > 255 else 1
    data: bytes = packet.read(int.from_bytes(packet.read(size), "little"))
    return data


def _read_long_string(packet: Any, column: Any) -> bytes:
    data: bytes = packet.read(int.from_bytes(packet.read(column.length_size), "little"))
    return data


def _read_json(packet: Any, column: Any) -> str:
    return json_binary_to_text(_read_long_string(packet, column))


_VALUE_READERS: dict[int, Callable[[Any, Any], Any]] = {
    FIELD_TYPE.DATE: _read_date,
    FIELD_TYPE.DATETIME2: _read_datetime2,
    FIELD_TYPE.DATETIME: _read_datetime,
    FIELD_TYPE.TIMESTAMP2: _read_timestamp2,
    FIELD_TYPE.TIMESTAMP: _read_timestamp,
    FIELD_TYPE.TIME2: _read_time2,
    FIELD_TYPE.TIME: _read_time,
    FIELD_TYPE.YEAR: _read_year,
    FIELD_TYPE.ENUM: _read_uint_of_size,
    FIELD_TYPE.SET: _read_uint_of_size,
    FIELD_TYPE.BIT: _read_bit,
    FIELD_TYPE.STRING: _read_short_string,
    FIELD_TYPE.VARCHAR: _read_short_string,
    FIELD_TYPE.VAR_STRING: _read_short_string,
    FIELD_TYPE.BLOB: _read_long_string,
    FIELD_TYPE.GEOMETRY: _read_long_string,
    FIELD_TYPE.JSON: _read_json,
    VECTOR_TYPE: _read_long_string,
}
_LIBRARY_READ_VALUE: Callable[..., Any] = RowsEvent._RowsEvent__read_values_name


def _read_value(
    event: Any,
    column: Any,
    null_bitmap: bytes,
    null_bitmap_index: int,
    is_partial: bool,
    cols_bitmap: bytes,
    unsigned: bool,
    i: int,
) -> Any:
    """Override of ``RowsEvent.__read_values_name``: our readers for the types above; the library's
    own code for absent and NULL values, partial JSON updates and the remaining types (integers,
    FLOAT, DOUBLE, DECIMAL: decoded correctly)."""
    reader = _VALUE_READERS.get(column.type)
    if reader is None or is_partial or not BitGet(cols_bitmap, i) or event._is_null(null_bitmap, null_bitmap_index):
        return _LIBRARY_READ_VALUE(event, column, null_bitmap, null_bitmap_index, is_partial, cols_bitmap, unsigned, i)
    return reader(event.packet, column)


_FIXED_EVENT_CLASSES: dict[type, type] = {
    base: type(f"Cdc{base.__name__}", (base,), {"_RowsEvent__read_values_name": _read_value})
    for base in (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, PartialUpdateRowsEvent)
}


def decoded_rows(event: Any) -> list[dict[str, Any]]:
    """``event.rows`` (same shape: ``values``, or ``before_values``/``after_values``) decoded with
    this module's readers. Call it instead of ``event.rows``, before anything reads ``event.rows``."""
    base = type(event)
    fixed = _FIXED_EVENT_CLASSES.get(base)
    if fixed is None:
        raise TypeError(f"decoded_rows() needs a library row event, not {base.__name__}")
    if event._RowsEvent__rows is not None:
        raise TerminalCdcError("the event's rows were already decoded by the library; call decoded_rows() first")
    event.__class__ = fixed
    try:
        rows: list[dict[str, Any]] = event.rows
    finally:
        event.__class__ = base
    return rows


# -- table maps -----------------------------------------------------------------------------------

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
    reads 7-bit varints, wrong from 128 bytes on). Bytes are kept losslessly: UTF-8 with
    ``surrogateescape``; :func:`column_specs_from_table_map` re-decodes labels with the column charset."""
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


def install_library_fixes() -> None:
    """Repair the library's table-map parsing in place (idempotent; runs when this module is imported):

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


install_library_fixes()

_INTEGER_NAMES = {
    FIELD_TYPE.TINY: "tinyint",
    FIELD_TYPE.SHORT: "smallint",
    FIELD_TYPE.INT24: "mediumint",
    FIELD_TYPE.LONG: "int",
    FIELD_TYPE.LONGLONG: "bigint",
}
_SIMPLE_NAMES = {
    FIELD_TYPE.FLOAT: "float",
    FIELD_TYPE.DOUBLE: "double",
    FIELD_TYPE.YEAR: "year",
    FIELD_TYPE.DATE: "date",
    FIELD_TYPE.JSON: "json",
    FIELD_TYPE.GEOMETRY: "geometry",
}
_FSP_NAMES = {
    FIELD_TYPE.DATETIME2: "datetime",
    FIELD_TYPE.DATETIME: "datetime",
    FIELD_TYPE.TIMESTAMP2: "timestamp",
    FIELD_TYPE.TIMESTAMP: "timestamp",
    FIELD_TYPE.TIME2: "time",
    FIELD_TYPE.TIME: "time",
}
_BLOB_PREFIXES = {1: "tiny", 2: "", 3: "medium", 4: "long"}


def _column_spec(column: Any, where: str) -> ColumnSpec:
    type_ = column.type
    common: dict[str, Any] = {
        "name": column.name,
        "nullable": getattr(column, "nullable", None),
        "primary_key": bool(column.is_primary),
    }
    if type_ in _INTEGER_NAMES:
        return ColumnSpec(mysql_type=_INTEGER_NAMES[type_], unsigned=bool(column.unsigned), **common)
    if type_ in _SIMPLE_NAMES:
        return ColumnSpec(mysql_type=_SIMPLE_NAMES[type_], **common)
    if type_ in _FSP_NAMES:
        return ColumnSpec(mysql_type=_FSP_NAMES[type_], fsp=int(getattr(column, "fsp", 0)), **common)
    if type_ == FIELD_TYPE.NEWDECIMAL:
        return ColumnSpec(mysql_type="decimal", precision=column.precision, scale=column.decimals, **common)
    if type_ == FIELD_TYPE.BIT:
        return ColumnSpec(mysql_type="bit", bits=column.bits, **common)
    if type_ == VECTOR_TYPE:
        return ColumnSpec(mysql_type="vector", dimensions=getattr(column, "dimensions", None), **common)
    charset = _charset_of(column)
    binary = charset == "binary"
    if type_ in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        decode = _text_decoder(charset, where)
        raw = (column.enum_values or [""])[1:] if type_ == FIELD_TYPE.ENUM else column.set_values or []
        labels = tuple(decode(label.encode("utf-8", "surrogateescape")) for label in raw)
        if type_ == FIELD_TYPE.ENUM:
            return ColumnSpec(mysql_type="enum", charset=charset, enum_values=labels, **common)
        return ColumnSpec(mysql_type="set", charset=charset, set_values=labels, **common)
    if type_ in (FIELD_TYPE.STRING, FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING):
        name = ("" if type_ == FIELD_TYPE.STRING else "var") + ("binary" if binary else "char")
        spec = ColumnSpec(mysql_type=name, charset=charset, max_length=column.max_length, **common)
    elif type_ == FIELD_TYPE.BLOB:
        name = _BLOB_PREFIXES[column.length_size] + ("blob" if binary else "text")
        spec = ColumnSpec(mysql_type=name, charset=charset, **common)
    else:
        raise TerminalCdcError(f"{where}: MySQL column type {type_} is not supported")
    if not binary:
        _text_decoder(charset, where)  # fail now, not on the first row
    return spec


def column_specs_from_table_map(event: Any) -> tuple[ColumnSpec, ...]:
    """The specs of a table's columns, in table order, from a ``TableMapEvent`` or a row event."""
    table = event.get_table() if isinstance(event, TableMapEvent) else event.table_map[event.table_id]
    where = f"{table.schema}.{table.table}"
    columns = table.columns
    if any(not column.name or str(column.name).startswith("UNKNOWN_COL") for column in columns):
        raise TerminalCdcError(f"{where}: the binlog has no column names; set binlog_row_metadata = FULL")
    if any(not hasattr(column, "nullable") for column in columns):
        raise TerminalCdcError(f"{where}: table map parsed before install_library_fixes(); restart the stream")
    return tuple(_column_spec(column, f"{where}.{column.name}") for column in columns)


# -- row values -> staged values ------------------------------------------------------------------


def _set_converter(members: tuple[str, ...]) -> Callable[[int], str]:
    bits = tuple((1 << index, member) for index, member in enumerate(members))
    return lambda mask: ",".join([member for bit, member in bits if mask & bit])


def _json_converter(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, JsonDiff):
        raise TerminalCdcError("partial JSON updates are not supported: set binlog_row_value_options = ''")
    return mysql_json_text(value)


def _decimal_text(value: Decimal) -> str:
    """A DECIMAL wider than 38 digits as MySQL prints it: plain notation, every scale digit."""
    return format(value, "f")


def _vector_converter(value: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(value) // 4}f", value))


#: Types whose decoded values are staged as they are (besides integers and binary strings).
_AS_IS_TYPES = frozenset({"decimal", "float", "double", "bit", "year", "date", "datetime", "timestamp", "time"})


def _converter(spec: ColumnSpec) -> Callable[[Any], Any] | None:
    """The function that turns a decoded value (never None) into the staged value; None: as is."""
    kind = spec.mysql_type
    if kind in TEXT_TYPES:
        return _text_decoder(spec.charset or "utf8mb4", spec.name)
    if kind == "binary" and spec.max_length:
        length = spec.max_length
        return lambda value: value.ljust(length, b"\0")  # the binlog strips BINARY's trailing 0x00
    if kind == "enum":
        return ("", *spec.enum_values).__getitem__
    if kind == "set":
        return _set_converter(spec.set_values)
    if kind == "bit" and spec.bits == 1:
        return lambda value: value != b"\0"
    if kind == "json":
        return _json_converter
    if kind == "geometry":
        return lambda value: value[4:]  # MySQL's value is a 4-byte SRID, then WKB
    if kind == "vector":
        return _vector_converter
    if kind == "decimal" and (spec.precision or 0) > DECIMAL128_MAX_PRECISION:
        return _decimal_text
    assert kind in INTEGER_TYPES or kind in BINARY_TYPES or kind in _AS_IS_TYPES, kind
    return None


class RowConverter:
    """Converts the decoded row dicts of one table version into staged values.

    ``convert(values)`` returns the table's values in column order followed by the
    ``_cdc_invalid_values`` map (or None): the leading columns of
    :func:`~airflow_provider_mysql_cdc.core.types.arrow_schema`, so a staged row is
    ``(*converter.convert(values), op, gtid, seq, commit_ts)``.
    """

    def __init__(self, specs: Iterable[ColumnSpec]) -> None:
        self.specs = tuple(specs)
        self._plan = tuple((spec.name, _converter(spec)) for spec in self.specs)

    def convert(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """One row image (a ``values``/``before_values``/``after_values`` dict of :func:`decoded_rows`)."""
        if len(values) != len(self._plan):
            raise TerminalCdcError(f"row has {len(values)} columns, the table map {len(self._plan)}")
        out: list[Any] = []
        invalid: dict[str, str] | None = None
        try:
            for name, convert in self._plan:
                value = values[name]
                if value is None:
                    out.append(None)
                elif type(value) is InvalidValue:
                    invalid = invalid or {}
                    invalid[name] = str(value)
                    out.append(None)
                else:
                    out.append(value if convert is None else convert(value))
        except (TypeError, AttributeError, KeyError) as exc:
            column = self._plan[len(out)][0]
            raise TerminalCdcError(
                f"column {column!r}: {type(exc).__name__}: {exc}; were the rows decoded with decoded_rows(event)?"
            ) from exc
        out.append(invalid)
        return tuple(out)
