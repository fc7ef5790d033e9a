"""The value MySQL stores for a DEFAULT literal (or an implicit default), as the staged Python value (pure).

:func:`literal_value` converts a :class:`DefaultValue` to the value a column of a given definition
holds, the way the snapshot stages it (``snapshot/row_reading.py``): ``int`` for integers and YEAR,
``Decimal`` (text beyond 38 digits) for DECIMAL, ``float`` for FLOAT (the float32 value) and DOUBLE,
``bool`` for BIT(1) and ``bytes`` for wider BITs, ``str`` for text, ENUM, SET and JSON, ``bytes`` for
binary strings (BINARY(n) padded with 0x00 to n), ``date``, naive ``datetime``, ``timedelta`` for
TIME. Zero dates are :class:`InvalidStaged` (NULL typed value, text in ``_cdc_invalid_values``).

Only conversions whose result is certain are made; everything else raises :class:`NotExact` with the
reason. Facts checked on MySQL 9.7 (``ADD COLUMN ... DEFAULT lit`` on a table with rows, both the
default sql_mode and ``sql_mode=''``):

* DECIMAL rounds half away from zero (``1.005`` -> ``1.01``, ``-2.5`` -> ``-3`` for INT), from a
  number or a numeric string; too many integer digits is an error; exponent literals go through DOUBLE;
* FLOAT stores the float32 rounding of the double; ``FLOAT(M,D)`` rounds to D digits first;
* CHAR drops trailing spaces; VARCHAR keeps them, and a value longer than the column is cut only when
  the excess is spaces (a Note); BINARY(n) pads with 0x00; a number into a string column is its text
  (``-0`` -> ``0``, ``.5`` -> ``0.5``, ``1e1`` -> ``10``);
* ENUM/SET match labels case-insensitively under _ci collations (``'B'`` -> ``b``); SET members are
  printed in definition order without duplicates;
* DATE/DATETIME/TIME accept relaxed forms (``2024-2-3``, ``20240203``, ``1 10:00:00``); fractional
  seconds beyond the column's fsp are rounded (truncated under ``TIME_TRUNCATE_FRACTIONAL``);
  YEAR ``24`` / ``'24'`` is 2024, ``0`` is 0 but ``'0'`` is 2000;
* TIMESTAMP literals are read in the session time zone (not known here);
* NOT NULL without DEFAULT: 0, 0.0, ``''``, ``b''``, the first ENUM label, ``''`` for SET, ``'null'``
  for JSON, 0x00 * n for BINARY(n), ``b'\\0'`` for BIT, 0:00:00 for TIME, the zero date (also for
  TIMESTAMP under the default sql_mode; DATE/DATETIME then fail on a non-empty table);
  GEOMETRY fails on a non-empty table, VECTOR gets an empty value.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from airflow_provider_mysql_cdc.core.ddl_columns import LOB_BYTES
from airflow_provider_mysql_cdc.core.ddl_statements import CHARACTER_TYPES, ColumnDefinition, DefaultValue
from airflow_provider_mysql_cdc.errors import NotExact

#: Largest DECIMAL precision staged as Decimal (core.types.DECIMAL128_MAX_PRECISION); wider: exact text.
DECIMAL_MAX_STAGED_PRECISION = 38
#: Enough digits for DECIMAL(65,30) and any literal rounded to it.
_DECIMALS = Context(prec=200)
_INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
_PLAIN_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_DIGITS = re.compile(r"[0-9]+")
_INTEGER_TEXT = re.compile(r"[-+]?[0-9]+")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATETIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?: ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?)?")
_TIME = re.compile(r"(-)?([0-9]{1,3}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?")
#: Python codecs of the character sets whose text conversion is exact for any character they hold.
_CODECS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "ascii": "ascii", "latin1": "cp1252"}


@dataclass(frozen=True)
class InvalidStaged:
    """A value staged as NULL with ``text`` in ``_cdc_invalid_values`` (zero dates)."""

    text: str


def _fsp_zeros(fsp: int | None) -> str:
    return "." + "0" * fsp if fsp else ""


def implicit_value(column: ColumnDefinition) -> Any:
    """The value existing rows get when a NOT NULL column without DEFAULT is added."""
    kind = column.mysql_type
    if kind in _INTEGER_BITS or kind == "year":
        return 0
    if kind == "decimal":
        return _staged_decimal(Decimal(0), column)
    if kind in ("float", "double"):
        return 0.0
    if kind == "bit":
        return False if column.length == 1 else bytes((column.length or 1) + 7 >> 3)
    if kind in CHARACTER_TYPES or kind == "set":
        return ""
    if kind == "binary":
        return bytes(column.length or 1)
    if kind in ("varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return b""
    if kind == "enum":
        if not column.enum_values:
            raise NotExact("ENUM without labels")
        return column.enum_values[0]
    if kind == "json":
        return "null"
    if kind == "date":
        return InvalidStaged("0000-00-00")
    if kind in ("datetime", "timestamp"):
        return InvalidStaged("0000-00-00 00:00:00" + _fsp_zeros(column.fsp))
    if kind == "time":
        return dt.timedelta(0)
    raise NotExact(f"{kind.upper()} NOT NULL without DEFAULT fails on a table with rows or has no staged form")


def literal_value(column: ColumnDefinition, default: DefaultValue, *, truncate_fractions: bool | None) -> Any:
    """The value a DEFAULT literal stores in ``column``.

    ``truncate_fractions``: whether ``TIME_TRUNCATE_FRACTIONAL`` was set (None: unknown; then extra
    fractional digits are not exact). Raises :class:`NotExact`.
    """
    if default.kind == "null":
        return None
    if default.kind in ("current_timestamp",):
        raise NotExact("CURRENT_TIMESTAMP is the statement's time")
    kind = column.mysql_type
    if kind in _INTEGER_BITS:
        return _integer(column, default)
    if kind == "decimal":
        return _staged_decimal(_decimal_of(default, column), column)
    if kind in ("float", "double"):
        return _floating(column, default)
    if kind == "bit":
        return _bit(column, default)
    if kind in CHARACTER_TYPES:
        return _character(column, default)
    if kind in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return _binary(column, default)
    if kind in ("enum", "set"):
        return _enum_or_set(column, _text_of(default))
    if kind == "year":
        return _year(default)
    if kind in ("date", "datetime", "time", "timestamp"):
        return _temporal(column, _text_of(default), truncate_fractions)
    raise NotExact(f"no exact conversion of a literal to {kind.upper()}")


# -- numbers --------------------------------------------------------------------------------------


def _number_text(default: DefaultValue) -> str:
    """The text of a numeric literal, or of a string that is a plain number."""
    if default.kind == "number":
        return default.text
    if default.kind == "string" and _PLAIN_NUMBER.fullmatch(default.text):
        return default.text
    raise NotExact(f"{default.kind} literal {default.text!r} is not a plain number")


def _exact_number(default: DefaultValue) -> Decimal:
    """The literal's exact value (hex/bit/bool as integers); exponents only when integral."""
    if default.kind in ("hex", "bit"):
        return Decimal(int(default.text or "0", 16))
    if default.kind == "bool":
        return Decimal(1 if default.text.upper() == "TRUE" else 0)
    text = _number_text(default)
    try:
        value = Decimal(text)
    except InvalidOperation as exc:
        raise NotExact(f"not a number: {text!r}") from exc
    if "e" in text.lower() and value != value.to_integral_value():
        raise NotExact(f"{text!r} is a DOUBLE literal whose conversion rounds")
    return value


def _integer(column: ColumnDefinition, default: DefaultValue) -> int:
    if default.kind == "string" and not _INTEGER_TEXT.fullmatch(default.text):
        raise NotExact(f"string {default.text!r} into an integer column")
    value = int(_exact_number(default).to_integral_value(ROUND_HALF_UP, _DECIMALS))
    bits = _INTEGER_BITS[column.mysql_type]
    low, high = (0, 2**bits - 1) if column.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        raise NotExact(f"{value} is out of range of {column.type_text}")
    return value


def _decimal_of(default: DefaultValue, column: ColumnDefinition) -> Decimal:
    assert column.precision is not None and column.scale is not None
    value = _exact_number(default).quantize(Decimal(1).scaleb(-column.scale), ROUND_HALF_UP, _DECIMALS)
    if value == 0:
        value = abs(value)
    if len(value.as_tuple().digits) > column.precision and value != 0:
        raise NotExact(f"{value} does not fit {column.type_text}")
    if value < 0 and column.unsigned:
        raise NotExact(f"{value} into {column.type_text}")
    return value


def _staged_decimal(value: Decimal, column: ColumnDefinition) -> Decimal | str:
    assert column.scale is not None
    value = value.quantize(Decimal(1).scaleb(-column.scale), context=_DECIMALS)
    return value if (column.precision or 0) <= DECIMAL_MAX_STAGED_PRECISION else format(value, "f")


def _floating(column: ColumnDefinition, default: DefaultValue) -> float:
    if column.scale is not None:
        raise NotExact(f"{column.type_text} rounds to its digits first")
    if default.kind in ("hex", "bit", "bool"):
        value = float(_exact_number(default))
    else:
        text = _number_text(default)
        value = float(text)
    if not math.isfinite(value):
        raise NotExact(f"{default.text!r} is not a finite number")
    if value < 0 and column.unsigned:
        raise NotExact(f"{value} into {column.type_text}")
    if column.mysql_type == "float":
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError as exc:
            raise NotExact(f"{value} is out of FLOAT's range") from exc
        if not math.isfinite(value):
            raise NotExact(f"{default.text!r} is out of FLOAT's range")
    return value + 0.0 if value else 0.0  # -0.0 -> 0.0


def _bit(column: ColumnDefinition, default: DefaultValue) -> bool | bytes:
    if default.kind == "string" or (default.kind == "number" and not _DIGITS.fullmatch(default.text)):
        raise NotExact(f"{default.kind} literal {default.text!r} into {column.type_text}")
    value = int(_exact_number(default))
    bits = column.length or 1
    if not 0 <= value < 2**bits:
        raise NotExact(f"{value} does not fit {column.type_text}")
    return bool(value) if bits == 1 else value.to_bytes((bits + 7) // 8, "big")


# -- strings --------------------------------------------------------------------------------------


def _text_of(default: DefaultValue) -> str:
    """A string literal's characters (ASCII-only when it carries an introducer or is hexadecimal)."""
    if default.kind == "string":
        if default.charset not in (None, "utf8mb4", "utf8mb3") and not default.text.isascii():
            raise NotExact(f"non-ASCII literal with introducer _{default.charset}")
        return default.text
    if default.kind in ("hex", "bit"):
        raw = bytes.fromhex(default.text)
        if not raw.isascii():
            raise NotExact("non-ASCII bytes as text")
        return raw.decode("ascii")
    if default.kind == "number":
        if "e" in default.text.lower():
            raise NotExact(f"{default.text!r} is printed as a DOUBLE")
        value = Decimal(default.text)
        text = format(value, "f")
        return text[1:] if value == 0 and text.startswith("-") else text
    if default.kind == "bool":
        return "1" if default.text.upper() == "TRUE" else "0"
    raise NotExact(f"{default.kind} default as text")


def _check_charset(text: str, charset: str | None) -> None:
    codec = _CODECS.get(charset or "")
    if codec is None or (charset == "utf8mb3" and any(ord(char) > 0xFFFF for char in text)):
        if not text.isascii():
            raise NotExact(f"non-ASCII text in character set {charset or '(inherited, unknown)'}")
        return
    try:
        text.encode(codec)
    except UnicodeEncodeError as exc:
        raise NotExact(f"{text!r} is not representable in {charset}") from exc


def _character(column: ColumnDefinition, default: DefaultValue) -> str:
    text = _text_of(default)
    _check_charset(text, column.charset)
    if column.mysql_type == "char":
        text = text.rstrip(" ")
    length = column.length
    if length is not None and len(text) > length:
        if text[length:].strip(" "):
            raise NotExact(f"{text!r} is longer than {column.type_text}")
        text = text[:length]
    if column.mysql_type in LOB_BYTES and len(text.encode("utf-8")) > LOB_BYTES[column.mysql_type]:
        raise NotExact(f"text longer than {column.type_text}")
    return text


def _binary(column: ColumnDefinition, default: DefaultValue) -> bytes:
    if default.kind in ("hex", "bit"):
        raw = bytes.fromhex(default.text)
    elif default.kind == "string" and default.text.isascii():
        raw = default.text.encode("ascii")
    else:
        raise NotExact(f"{default.kind} literal into {column.type_text} (bytes depend on the client charset)")
    length = column.length
    if column.mysql_type in LOB_BYTES:
        length = LOB_BYTES[column.mysql_type]
    if length is not None and len(raw) > length:
        raise NotExact(f"{len(raw)} bytes into {column.type_text}")
    return raw.ljust(column.length or 0, b"\0") if column.mysql_type == "binary" else raw


def _enum_or_set(column: ColumnDefinition, text: str) -> str:
    if column.mysql_type == "enum":
        if text.rstrip(" ") in column.enum_values:
            return text.rstrip(" ")
        raise NotExact(f"{text!r} is not one of the labels (case-insensitive matching is not followed)")
    members = [part.rstrip(" ") for part in text.split(",")] if text else []
    if any(member not in column.set_values for member in members):
        raise NotExact(f"{text!r} has a member that is not one of the SET's (exactly)")
    return ",".join(member for member in column.set_values if member in members)


# -- temporal -------------------------------------------------------------------------------------


def _year(default: DefaultValue) -> int:
    if default.kind not in ("number", "string") or not _DIGITS.fullmatch(default.text):
        raise NotExact(f"{default.kind} literal {default.text!r} into YEAR")
    value = int(default.text)
    if default.kind == "number" and value == 0:
        return 0
    if len(default.text) == 4 and (1901 <= value <= 2155 or value == 0):
        return value
    if len(default.text) <= 2 and value < 100:
        return 2000 + value if value < 70 else 1900 + value
    raise NotExact(f"{default.text!r} into YEAR")


def _round_fraction(fraction: str, fsp: int, truncate: bool | None) -> tuple[int, bool]:
    """(microseconds kept, carry into the next second)."""
    digits = fraction.ljust(6, "0")
    if len(fraction) <= fsp:
        return int(digits), False
    if truncate is None:
        raise NotExact("fractional seconds beyond the column's precision: rounding depends on TIME_TRUNCATE_FRACTIONAL")
    kept = int(fraction[:fsp] or "0")
    if not truncate and int(fraction[fsp]) >= 5:
        kept += 1
    if kept == 10**fsp:
        return 0, True
    return kept * 10 ** (6 - fsp), False


def _temporal(column: ColumnDefinition, text: str, truncate: bool | None) -> Any:
    kind = column.mysql_type
    fsp = column.fsp or 0
    if kind == "time":
        return _time(text, fsp, truncate)
    if kind == "date":
        match = _DATE.fullmatch(text)
        if not match:
            raise NotExact(f"{text!r} is not YYYY-MM-DD")
        if text == "0000-00-00":
            return InvalidStaged(text)
        return _valid_date(text)
    match = _DATETIME.fullmatch(text)
    if not match:
        raise NotExact(f"{text!r} is not YYYY-MM-DD[ hh:mm:ss[.frac]]")
    year, month, day, hour, minute, second, fraction = match.groups()
    if text.startswith("0000-00-00") and not any(int(part or 0) for part in (hour, minute, second, fraction)):
        return InvalidStaged("0000-00-00 00:00:00" + _fsp_zeros(fsp))
    if kind == "timestamp":
        raise NotExact("a TIMESTAMP literal is read in the session time zone")
    micros, carry = _round_fraction(fraction or "", fsp, truncate)
    try:
        value = dt.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micros)
        return value + dt.timedelta(seconds=1) if carry else value
    except (ValueError, OverflowError) as exc:
        raise NotExact(f"{text!r} is not a valid DATETIME") from exc


def _valid_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise NotExact(f"{text!r} is not a valid DATE") from exc


def _time(text: str, fsp: int, truncate: bool | None) -> dt.timedelta:
    match = _TIME.fullmatch(text)
    if not match:
        raise NotExact(f"{text!r} is not [-]hh:mm[:ss[.frac]]")
    negative, hours, minutes, seconds, fraction = match.groups()
    if int(minutes) > 59 or int(seconds or 0) > 59:
        raise NotExact(f"{text!r} is not a valid TIME")
    micros, carry = _round_fraction(fraction or "", fsp, truncate)
    value = dt.timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds or 0) + carry, microseconds=micros)
    if value > dt.timedelta(hours=838, minutes=59, seconds=59):
        raise NotExact(f"{text!r} is beyond TIME's range")
    return -value if negative else value
