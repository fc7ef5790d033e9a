"""MySQL 9.7 character sets as DDL needs them (pure): default collations, bytes per character, and how a
column's character set and collation follow from what its definition and its table say.

The table is ``information_schema.CHARACTER_SETS`` of MySQL 9.7.4 (``DEFAULT_COLLATE_NAME``,
``MAXLEN``); every character set has a ``<charset>_bin`` collation except ``binary``. ``utf8`` is
``utf8mb3`` (and ``utf8_*`` collations are ``utf8mb3_*``). ``utf8mb4``'s default collation is
``utf8mb4_0900_ai_ci`` unless a session sets ``default_collation_for_utf8mb4`` (replication of
5.7 statements): not followed here.
"""

from __future__ import annotations

#: charset -> (default collation, maximum bytes per character).
CHARSETS: dict[str, tuple[str, int]] = {
    "armscii8": ("armscii8_general_ci", 1),
    "ascii": ("ascii_general_ci", 1),
    "big5": ("big5_chinese_ci", 2),
    "binary": ("binary", 1),
    "cp1250": ("cp1250_general_ci", 1),
    "cp1251": ("cp1251_general_ci", 1),
    "cp1256": ("cp1256_general_ci", 1),
    "cp1257": ("cp1257_general_ci", 1),
    "cp850": ("cp850_general_ci", 1),
    "cp852": ("cp852_general_ci", 1),
    "cp866": ("cp866_general_ci", 1),
    "cp932": ("cp932_japanese_ci", 2),
    "dec8": ("dec8_swedish_ci", 1),
    "eucjpms": ("eucjpms_japanese_ci", 3),
    "euckr": ("euckr_korean_ci", 2),
    "gb18030": ("gb18030_chinese_ci", 4),
    "gb2312": ("gb2312_chinese_ci", 2),
    "gbk": ("gbk_chinese_ci", 2),
    "geostd8": ("geostd8_general_ci", 1),
    "greek": ("greek_general_ci", 1),
    "hebrew": ("hebrew_general_ci", 1),
    "hp8": ("hp8_english_ci", 1),
    "keybcs2": ("keybcs2_general_ci", 1),
    "koi8r": ("koi8r_general_ci", 1),
    "koi8u": ("koi8u_general_ci", 1),
    "latin1": ("latin1_swedish_ci", 1),
    "latin2": ("latin2_general_ci", 1),
    "latin5": ("latin5_turkish_ci", 1),
    "latin7": ("latin7_general_ci", 1),
    "macce": ("macce_general_ci", 1),
    "macroman": ("macroman_general_ci", 1),
    "sjis": ("sjis_japanese_ci", 2),
    "swe7": ("swe7_swedish_ci", 1),
    "tis620": ("tis620_thai_ci", 1),
    "ucs2": ("ucs2_general_ci", 2),
    "ujis": ("ujis_japanese_ci", 3),
    "utf16": ("utf16_general_ci", 4),
    "utf16le": ("utf16le_general_ci", 4),
    "utf32": ("utf32_general_ci", 4),
    "utf8mb3": ("utf8mb3_general_ci", 3),
    "utf8mb4": ("utf8mb4_0900_ai_ci", 4),
}


def charset_name(name: str) -> str:
    """A character set name as MySQL reports it: lower case, ``utf8`` -> ``utf8mb3``."""
    lowered = name.lower()
    return "utf8mb3" if lowered == "utf8" else lowered


def collation_name(name: str) -> str:
    """A collation name as MySQL reports it: lower case, ``utf8_*`` -> ``utf8mb3_*``."""
    lowered = name.lower()
    return "utf8mb3_" + lowered[5:] if lowered.startswith("utf8_") else lowered


def charset_of_collation(collation: str) -> str | None:
    """The character set a collation belongs to (None when the name is not one of MySQL's)."""
    collation = collation_name(collation)
    if collation == "binary":
        return "binary"
    best = None
    for charset in CHARSETS:
        if collation.startswith(charset + "_") and (best is None or len(charset) > len(best)):
            best = charset
    return best


def default_collation(charset: str) -> str | None:
    """The default collation of a character set (None when unknown)."""
    entry = CHARSETS.get(charset_name(charset))
    return entry[0] if entry else None


def binary_collation(charset: str) -> str:
    """The ``_bin`` collation that the column attribute ``BINARY`` selects."""
    charset = charset_name(charset)
    return "binary" if charset == "binary" else f"{charset}_bin"


def max_bytes_per_char(charset: str | None) -> int | None:
    """``MAXLEN`` of a character set (None when unknown)."""
    if charset is None:
        return None
    entry = CHARSETS.get(charset_name(charset))
    return entry[1] if entry else None


def resolve_charset(
    charset: str | None, collation: str | None, fallback: tuple[str | None, str | None]
) -> tuple[str | None, str | None]:
    """(charset, collation) from a definition's CHARACTER SET / COLLATE, else ``fallback``.

    A charset alone takes its default collation (not the table's, even when the table has the same
    charset); a collation alone implies its charset; neither takes the fallback (the table's defaults,
    possibly unknown: None).
    """
    if charset is not None:
        charset = charset_name(charset)
        return charset, collation_name(collation) if collation else default_collation(charset)
    if collation is not None:
        return charset_of_collation(collation), collation_name(collation)
    return fallback
