"""MySQL character sets -> Python text decoders, as MySQL itself decodes them.

Two differences from Python's codecs of the same name matter (each reproduced against MySQL 9.7):

* MySQL's ``latin1`` is cp1252 whose five undefined bytes (0x81 0x8D 0x8F 0x90 0x9D) map to the C1
  controls of the same number; Python's cp1252 raises ``UnicodeDecodeError`` on them.
* ``utf16``/``ucs2``/``utf32`` are stored big-endian; Python's BOM-less default is little-endian.

A character set without a Python codec (``binary`` aside, which is staged as bytes) raises
:class:`~airflow_provider_mysql_cdc.errors.TerminalCdcError` naming the column.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable
from typing import Any

from pymysqlreplication.row_event import find_charset

from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = ["charset_of_collation", "charset_of_collation_id", "text_decoder"]

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


def text_decoder(charset: str, where: str) -> Callable[[bytes], str]:
    """The function decoding a value stored in MySQL character set ``charset``; raises
    :class:`TerminalCdcError` (naming ``where``) when Python has no codec for it."""
    codec = _CODECS.get(charset)
    if codec is None:
        raise TerminalCdcError(f"{where}: character set {charset!r} cannot be decoded (no Python codec)")
    if codec == "mysql-latin1":
        return lambda raw: codecs.charmap_decode(raw, "strict", _LATIN1_TABLE)[0]
    return functools.partial(bytes.decode, encoding=codec)


def charset_of_collation(collation_name: str | None) -> str:
    """MySQL charset name of a collation (its name starts with it; ``utf8`` is ``utf8mb3``); a
    column without a collation (python-mysql-replication leaves non-text columns without) is ``utf8mb4``."""
    if not collation_name:
        return "utf8mb4"
    charset = collation_name.split("_", 1)[0]
    return "utf8mb3" if charset == "utf8" else charset


def charset_of_collation_id(collation_id: Any) -> str:
    """The charset of a collation id (``information_schema.COLLATIONS.ID``), resolved through
    python-mysql-replication's table exactly as the binlog's table map is: the same name the binlog
    path derives for the column."""
    collation_name = None if collation_id is None else find_charset(str(int(collation_id)))[1]
    return charset_of_collation(collation_name)
