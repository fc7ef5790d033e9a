"""Value building blocks shared by every decoding path: :class:`InvalidValue`, MySQL's temporal and
DECIMAL encodings.

* :class:`InvalidValue` marks a value MySQL stores but the typed column cannot hold (zero and
  partial dates, a zero TIMESTAMP, year 0): every path stages NULL and keeps the text in
  ``_cdc_invalid_values`` (see docs/type-map.md "Type map").
* :func:`time_text` / :func:`timedelta_text`: TIME as MySQL prints it (``-838:59:59.000000``).
* :func:`datetime_or_invalid`, :func:`timestamp_value`: a DATETIME's fields / a TIMESTAMP's epoch
  seconds as the staged value or the :class:`InvalidValue` of its text.
* :func:`decimal_groups` / :func:`decode_decimal`: MySQL's binary DECIMAL (``bin2decimal``).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

__all__ = [
    "EPOCH",
    "InvalidValue",
    "datetime_or_invalid",
    "decimal_groups",
    "decode_decimal",
    "time_text",
    "timedelta_text",
    "timestamp_value",
]

#: 1970-01-01 00:00:00 UTC: TIMESTAMP values are seconds since then.
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class InvalidValue(str):
    """A value MySQL stores but the typed column cannot hold (zero/partial dates); the text is
    ``CAST(col AS CHAR)``'s. The converter stages NULL and keeps the text in ``_cdc_invalid_values``."""

    __slots__ = ()


# -- temporal -------------------------------------------------------------------------------------


def time_text(negative: bool, hms: tuple[int, int, int], micros: int, fsp: int = 6) -> str:
    """A TIME as MySQL prints it: ``[-]hh:mm:ss`` and ``fsp`` fraction digits."""
    hours, minutes, seconds = hms
    text = f"{'-' if negative else ''}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return text + f".{micros:06d}"[: fsp + 1] if fsp else text


def timedelta_text(value: dt.timedelta, fsp: int = 6) -> str:
    """A TIME held as ``timedelta`` as MySQL prints it (:func:`time_text`)."""
    total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    seconds, micros = divmod(abs(total), 1_000_000)
    return time_text(total < 0, (seconds // 3600, seconds // 60 % 60, seconds % 60), micros, fsp)


def datetime_or_invalid(ymd: tuple[int, int, int], hms: tuple[int, int, int], micros: int, fsp: int) -> Any:
    """The naive ``datetime`` of a DATETIME's fields, or the :class:`InvalidValue` of MySQL's text
    (``fsp`` fraction digits) when Python cannot hold it (zero or partial date, year 0)."""
    year, month, day = ymd
    try:
        return dt.datetime(year, month, day, *hms, micros)
    except ValueError:
        text = f"{year:04d}-{month:02d}-{day:02d} " + time_text(False, hms, micros, fsp)
        return InvalidValue(text)


def timestamp_value(seconds: int, micros: int, fsp: int) -> Any:
    """A TIMESTAMP (seconds since :data:`EPOCH`) as an aware UTC ``datetime``; the zero TIMESTAMP
    (seconds 0) as the :class:`InvalidValue` ``0000-00-00 00:00:00[.000...]``."""
    if seconds == 0:  # MySQL's zero TIMESTAMP; 1970-01-01 00:00:00 UTC itself is out of range
        return InvalidValue("0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else ""))
    return EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)


# -- binary DECIMAL -------------------------------------------------------------------------------

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
