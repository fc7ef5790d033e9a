"""JSON as MySQL prints it (``CAST(j AS CHAR)``): from Python values and from MySQL's binary JSON.

* :func:`mysql_json_text`: Python values (as python-mysql-replication decodes JSON, or hand-written)
  as MySQL's text: ``, `` and ``: `` separators, keys in MySQL's order, MySQL's escapes.
* :func:`json_binary_to_text`: a JSON column's binary value (``json_binary`` format) straight to
  that text. The library's own JSON decoding loses the type of opaque values (DATE and DATETIME
  look alike, TIME loses its sign, other types become lossy text) and raises ``ValueError`` on a
  TIME beyond 24 hours, so the binlog paths use this one.
* :func:`mysql_double_text`: a double as MySQL prints it inside JSON.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import struct
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from airflow_provider_mysql_cdc.decoding.values import decode_decimal, time_text, timedelta_text
from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = ["json_binary_to_text", "mysql_double_text", "mysql_json_text"]

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
        return '"' + timedelta_text(value) + '"'
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
            return '"' + time_text(negative, clock, micros) + '"'
        year, month = divmod(whole >> 22, 13)
        text = f"{year:04d}-{month:02d}-{(whole >> 17) & 31:02d}"
        if field_type != FIELD_TYPE.DATE:
            text += " " + time_text(False, clock, micros)
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
