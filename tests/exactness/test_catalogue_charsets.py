"""The change catalogue, part 5: text in every character set MySQL has.

The pipeline decodes the bytes MySQL stores; the comparison reads MySQL through ``utf8mb4``, that is
through MySQL's own conversion. Python's codecs of the same names disagree with it in places, and were
staged silently wrong before the decoder used MySQL's tables: ``greek`` 0xA1 (U+02BD, staged as
U+2018), ``hebrew`` 0xAF, ``cp866`` 0xFC and 0xFD, ``koi8u`` 0x95, ``sjis`` 0x815F, ``ujis`` 0xA1C0,
``gb18030`` 0xA8BC and 0x8135F437; ``euckr``'s extended Hangul and the EUC-JP user-defined rows
stopped, and six single-byte sets had no decoder at all. Values are written as hexadecimal literals,
so each column holds exactly the bytes chosen here: every byte of each single-byte set that MySQL has a
character for, and, for the multi-byte sets, each sequence where MySQL differs from Python's codec
plus ordinary text.

A value MySQL itself cannot convert (``cp1250`` 0x81 reads as ``?``) and a key whose character another
byte sequence shares (``sjis`` 0x5C and 0x815F are both ``\\``) stop by name instead.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_provider_mysql_cdc.decoding.charset_tables import MULTI_BYTE_DIFFERENCES, SINGLE_BYTE
from airflow_provider_mysql_cdc.decoding.charsets import MULTI_BYTE_CODECS
from tests.exactness.harness import ExactnessPipeline, WindowStopped
from tests.exactness.scenario import run_windows
from tests.mysql_servers import MySqlTestServer

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]

#: Ordinary text of each multi-byte set (encoded with Python's codec, which agrees on these).
_ORDINARY = {
    "big5": "中文資料 abc",
    "cp932": "日本語テキスト①",
    "eucjpms": "日本語テキスト",
    "euckr": "한국어 텍스트",
    "gb18030": "中文数据 😀",
    "gb2312": "中文数据",
    "gbk": "中文數據",
    "sjis": "日本語テキスト",
    "ucs2": "Ωmega ✓",
    "ujis": "日本語テキスト",
}


def _characters(charset: str) -> list[bytes]:
    """The characters one column of ``charset`` holds, in order: see the module docstring."""
    if charset in SINGLE_BYTE:
        return [bytes([b]) for b, char in enumerate(SINGLE_BYTE[charset]) if char != "\ufffe"]
    special = [bytes.fromhex(first) for first, _count, code in MULTI_BYTE_DIFFERENCES.get(charset, ()) if code != -1]
    ordinary = [char.encode(MULTI_BYTE_CODECS[charset]) for char in _ORDINARY[charset]]
    return ordinary + special[:60] + ordinary


CHARSETS = sorted([*SINGLE_BYTE, *MULTI_BYTE_CODECS])


def _column(charset: str) -> str:
    return f"c_{charset}"


def _hex(charset: str, reverse: bool = False) -> str:
    """A hexadecimal literal of the column's characters (in reverse order)."""
    characters = _characters(charset)
    return f"X'{b''.join(reversed(characters) if reverse else characters).hex()}'"


def _values(reverse: bool = False) -> str:
    return ", ".join(_hex(charset, reverse) for charset in CHARSETS)


def test_every_character_of_every_character_set_in_a_snapshot_and_in_windows(pipeline_for: NewPipeline) -> None:
    columns = ", ".join(f"{_column(cs)} TEXT CHARACTER SET {cs}" for cs in CHARSETS)
    names = ", ".join(_column(cs) for cs in CHARSETS)
    pipeline = pipeline_for(
        f"CREATE TABLE {{db}}.texts (id INT PRIMARY KEY, {columns})",
        f"INSERT INTO {{db}}.texts (id, {names}) VALUES (1, {_values()}), (2, {_values(reverse=True)})",
    )
    assert len(CHARSETS) >= 34, CHARSETS
    run_windows(
        pipeline,
        [
            [
                f"INSERT INTO {{db}}.texts (id, {names}) VALUES (3, {_values()})",
                "UPDATE {db}.texts SET "
                + ", ".join(f"{_column(cs)} = CONCAT({_column(cs)}, 'x')" for cs in CHARSETS)
                + " WHERE id = 2",
            ],
            [
                "UPDATE {db}.texts SET "
                + ", ".join(f"{_column(cs)} = {_hex(cs, reverse=True)}" for cs in CHARSETS)
                + " WHERE id = 1",
                "DELETE FROM {db}.texts WHERE id = 3",
            ],
        ],
    )


def test_keys_of_characters_python_decodes_differently(pipeline_for: NewPipeline) -> None:
    """Keys whose characters Python's codecs got wrong (``greek`` 0xA1, ``sjis`` 0x815F beside 0x815E,
    ``gb18030`` 0xA8BC): updates by key, key changes and deletes."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.keyed (g VARCHAR(4) CHARACTER SET greek COLLATE greek_bin, "
        "s VARCHAR(4) CHARACTER SET sjis COLLATE sjis_bin, v INT, PRIMARY KEY (g, s))",
        "INSERT INTO {db}.keyed VALUES (X'a1', X'815f', 1), (X'a2', X'815e', 2), (X'41', X'41', 3)",
        "CREATE TABLE {db}.chinese (k VARCHAR(4) CHARACTER SET gb18030 COLLATE gb18030_bin PRIMARY KEY, v INT)",
        "INSERT INTO {db}.chinese VALUES (X'a8bc', 1), (X'8135f437', 2), (X'd6d0', 3)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.keyed SET v = 10 WHERE g = X'a1' AND s = X'815f'",
                "UPDATE {db}.keyed SET g = X'b6' WHERE g = X'a2'",
                "INSERT INTO {db}.keyed VALUES (X'a1', X'8160', 4)",
                "UPDATE {db}.chinese SET k = X'a8bd' WHERE k = X'a8bc'",
                "INSERT INTO {db}.chinese VALUES (X'a8bc', 4)",
            ],
            [
                "DELETE FROM {db}.keyed WHERE g = X'a1' AND s = X'815f'",
                "UPDATE {db}.chinese SET v = 20 WHERE k = X'8135f437'",
                "DELETE FROM {db}.chinese WHERE k = X'a8bd'",
            ],
        ],
    )


def test_a_value_mysql_cannot_convert_stops_the_snapshot_and_the_window_by_name(
    pipeline_for: NewPipeline, mysql_server: MySqlTestServer
) -> None:
    """``cp1250`` 0x81 has no character (MySQL reads it as ``?``): the snapshot stops with
    :class:`UnmappableTextError` naming the column and the bytes; once the value is corrected the
    table snapshots, and the same byte written later stops the table's rebuild the same way."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.legacy (id INT PRIMARY KEY, note VARCHAR(20) CHARACTER SET cp1250)",
        "INSERT INTO {db}.legacy VALUES (1, X'416281'), (2, X'8a9a')",
    )
    database = pipeline.databases[0]
    with pytest.raises(WindowStopped) as stopped:
        pipeline.snapshot()
    ((error),) = stopped.value.errors
    assert (error.stage, error.error_class) == ("snapshot", "UnmappableTextError"), error
    assert (
        f"snapshot of {database}.legacy (chunk 0), column note: a value holds the cp1250 bytes 0x81" in error.message
    ), error.message
    assert error.message.startswith(f"pipeline {pipeline.name!r}, run {pipeline.name + '-snapshot-0'!r}: "), error

    mysql_server.execute(f"UPDATE `{database}`.legacy SET note = X'4162' WHERE id = 1")
    pipeline.snapshot()
    pipeline.window()
    mysql_server.execute(f"INSERT INTO `{database}`.legacy VALUES (3, X'8163')")
    pipeline.run_window()  # the table waits for a rebuild: its rows could not be staged
    assert "cp1250 bytes 0x81" in pipeline.rebuilding.get(f"{database}.legacy", ""), pipeline.rebuilding
    with pytest.raises(WindowStopped) as stopped:
        pipeline.run_window()  # the rebuild's snapshot meets the value again
    ((error),) = stopped.value.errors
    assert (error.stage, error.error_class) == ("snapshot", "UnmappableTextError"), error


def test_a_key_whose_character_another_sequence_shares_stops_by_name(pipeline_for: NewPipeline) -> None:
    """``sjis`` 0x5C and 0x815F are both U+005C (which converts back to 0x815F): keys ``a\\`` written
    both ways are two rows in MySQL and would be one in the target. A key holding 0x5C stops."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.paths (p VARCHAR(10) CHARACTER SET sjis COLLATE sjis_bin PRIMARY KEY, v INT)",
        "INSERT INTO {db}.paths VALUES (X'615c', 1), (X'61815f', 2)",
    )
    with pytest.raises(WindowStopped) as stopped:
        pipeline.snapshot()
    ((error),) = stopped.value.errors
    assert (error.stage, error.error_class) == ("snapshot", "UnmappableTextError"), error
    assert "column p: a key value holds the sjis bytes 0x5C" in error.message, error.message
    assert "CONVERT TO CHARACTER SET utf8mb4" in error.message, error.message
