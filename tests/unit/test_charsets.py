"""The text decoder's own logic: MySQL's tables applied, characters cut, refusals named (pure; the
conformance against a server is ``tests/integration/test_charset_conformance.py``)."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.decoding.charset_tables import MULTI_BYTE_DIFFERENCES, NOT_ROUND_TRIPPED, SINGLE_BYTE
from airflow_provider_mysql_cdc.decoding.charsets import MULTI_BYTE_CODECS, UNICODE_CODECS, _expand, text_decoder
from airflow_provider_mysql_cdc.errors import TerminalCdcError, UnmappableTextError
from testbed.charset_sweep import _runs


def test_every_character_set_of_mysql_97_has_a_decoder() -> None:
    mysql_sets = {
        *("armscii8", "ascii", "big5", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866"),
        *("cp932", "dec8", "eucjpms", "euckr", "gb18030", "gb2312", "gbk", "geostd8", "greek", "hebrew"),
        *("hp8", "keybcs2", "koi8r", "koi8u", "latin1", "latin2", "latin5", "latin7", "macce", "macroman"),
        *("sjis", "swe7", "tis620", "ucs2", "ujis", "utf16", "utf16le", "utf32", "utf8mb3", "utf8mb4"),
    }
    assert mysql_sets <= {*SINGLE_BYTE, *MULTI_BYTE_CODECS, *UNICODE_CODECS}
    assert all(len(table) == 256 for table in SINGLE_BYTE.values())
    assert set(MULTI_BYTE_DIFFERENCES) == set(MULTI_BYTE_CODECS)


def test_mysqls_characters_where_pythons_codecs_differ() -> None:
    assert text_decoder("greek", "c")(b"a\xa1b") == "a\u02bdb"  # iso8859-7: U+2018
    assert text_decoder("cp866", "c")(b"\xfc\xfd") == "\u207f\u00b2"  # cp866: U+2116 U+00A4
    assert text_decoder("latin1", "c")(b"\x80\x81\xff") == "\u20ac\x81\xff"  # cp1252 with C1 controls
    assert text_decoder("euckr", "c")(b"\x81\x41") == "\uac02"  # euc_kr: no such character
    assert text_decoder("sjis", "c")(b"x\x81\x5fy") == "x\\y"  # shift_jis: U+FF3C
    assert text_decoder("gb18030", "c")(b"\xa8\xbc\x81\x35\xf4\x37") == "\u1e3f\ue7c7"  # swapped in Python's
    assert text_decoder("ujis", "c")(b"\xf5\xa1") == "\ue000"  # the user-defined rows: the Private Use Area
    assert text_decoder("swe7", "c")(b"\x5b") == "\u00c4"  # no Python codec


def test_a_special_sequence_across_two_characters_is_not_taken_for_one() -> None:
    """``sjis`` 0x89 0x81 is one character, then ``_`` (0x5F): the bytes 0x81 0x5F straddle them."""
    raw = b"\x89\x81\x5f"
    assert text_decoder("sjis", "c")(raw) == raw.decode("shift_jis") == "\u5830_"
    assert text_decoder("sjis", "c")(raw + b"\x81\x5f") == "\u5830_\\"


def test_a_sequence_mysql_has_no_character_for_is_refused_by_name() -> None:
    with pytest.raises(UnmappableTextError) as refused:
        text_decoder("cp1250", "note")(b"ab\x81")
    assert str(refused.value).startswith("note: a value holds the cp1250 bytes 0x81, which MySQL itself cannot")
    with pytest.raises(UnmappableTextError, match="greek bytes 0xA4"):  # Python's iso8859-7: the euro sign
        text_decoder("greek", "c")(b"\xa4")
    with pytest.raises(UnmappableTextError, match="ucs2 bytes 0xD83D"):  # not one emoji, as utf-16 would say
        text_decoder("ucs2", "c")(b"\xd8\x3d\xde\x00")
    with pytest.raises(UnmappableTextError, match="big5 bytes 0xA15A"):
        text_decoder("big5", "c")(b"a\xa1\x5a")
    with pytest.raises(UnmappableTextError, match="utf8mb4 bytes 0xFF"):
        text_decoder("utf8mb4", "c")(b"\xff")


def test_a_key_refuses_a_sequence_whose_character_another_sequence_has() -> None:
    """``sjis`` 0x5C and 0x815F are both U+005C, which converts back to 0x815F."""
    assert text_decoder("sjis", "p")(b"a\x5c") == "a\\"
    assert text_decoder("sjis", "p", key=True)(b"a\x81\x5f") == "a\\"
    with pytest.raises(UnmappableTextError, match="p: a key value holds the sjis bytes 0x5C, whose character"):
        text_decoder("sjis", "p", key=True)(b"a\x5c")
    # 0x5C as the second byte of a character is not a backslash: ``表`` (0x955C) is a fine key
    assert text_decoder("sjis", "p", key=True)(b"\x95\x5c") == "\u8868"
    assert "cp932" in NOT_ROUND_TRIPPED  # the NEC and IBM duplicates
    assert text_decoder("cp932", "p")(b"\x87\x90") == "\u2252"
    with pytest.raises(UnmappableTextError):
        text_decoder("cp932", "p", key=True)(b"\x87\x90")


def test_a_character_set_without_a_table_stops_by_name() -> None:
    with pytest.raises(TerminalCdcError, match="c: character set 'utf8mb5' cannot be decoded"):
        text_decoder("utf8mb5", "c")


def test_runs_compress_and_expand_to_the_same_entries() -> None:
    entries = {
        b"\xf5\xa1": 0xE000,
        b"\xf5\xa2": 0xE001,
        b"\xf5\xa4": 0xE003,
        b"\xa1\x5a": -1,
        b"\xa1\x5b": -1,
        b"\x5c": -1,
    }
    runs = _runs(entries)
    assert runs == [("5c", 1, -1), ("a15a", 2, -1), ("f5a1", 2, 0xE000), ("f5a4", 1, 0xE003)]
    assert _expand(tuple(runs)) == entries
