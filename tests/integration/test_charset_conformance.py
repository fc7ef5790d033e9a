"""The text decoder against MySQL's own conversion to Unicode, for every character of every character set.

Each character set of the server is swept (:mod:`testbed.charset_sweep`): every byte sequence of one
character is stored in a column of that set, and MySQL says which character it is
(``CONVERT(c USING utf8mb4)``) and whether that character converts back to the same bytes. The decoder
must give exactly that character; where MySQL has none (``?``), it must raise
:class:`UnmappableTextError`, and so must a key decoder for a sequence that does not convert back.
Strings of several characters then check the cutting into characters, including byte pairs that look
like a special sequence but straddle two characters.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from airflow_provider_mysql_cdc.decoding.charsets import MULTI_BYTE_CODECS, UNICODE_CODECS, text_decoder, token_pattern
from airflow_provider_mysql_cdc.errors import UnmappableTextError
from testbed.charset_sweep import Character, candidates, character_sets, sweep
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql


@pytest.fixture(scope="module")
def cursor(mysql_server: MySqlTestServer) -> Iterator[Any]:
    admin = mysql_server.admin
    connection = pymysql.connect(
        host=admin.host, port=admin.port, user=admin.user, password=admin.password, autocommit=True
    )
    with connection, connection.cursor() as cursor:
        yield cursor


def _database() -> str:
    return f"charset_sweep_{uuid.uuid4().hex[:8]}"


def _decoded(charset: str, raw: bytes, key: bool = False) -> str | None:
    """The decoder's text, or None when it refuses the value."""
    try:
        return text_decoder(charset, "t.c", key=key)(raw)
    except UnmappableTextError:
        return None


def _mismatches(charset: str, answers: dict[bytes, Character]) -> list[str]:
    found = []
    for seq, answer in sorted(answers.items()):
        ours, as_key = _decoded(charset, seq), _decoded(charset, seq, key=True)
        key_expected = answer.text if answer.round_trips else None
        if ours != answer.text or as_key != key_expected:
            mysql = f"MySQL {answer.text!r} (round trip {answer.round_trips})"
            found.append(f"0x{seq.hex()}: {mysql}, ours {ours!r}, as key {as_key!r}")
    return found


@pytest.fixture(scope="module")
def swept(cursor: Any) -> dict[str, dict[bytes, Character]]:
    """MySQL's answer for every character of every character set the decoder has a table for."""
    database = _database()
    return {
        charset: sweep(cursor, charset, candidates(charset, length), database)
        for charset, length in sorted(character_sets(cursor).items())
    }


def test_every_character_of_every_character_set_decodes_as_mysql_converts_it(
    swept: dict[str, dict[bytes, Character]],
) -> None:
    assert len(swept) == 34, sorted(swept)  # MySQL's 41 sets but binary and the 6 Python decodes as they are
    report = {charset: _mismatches(charset, answers) for charset, answers in swept.items()}
    assert {charset: found[:5] for charset, found in report.items() if found} == {}
    # The cases that were wrong before MySQL's own tables (Python's codecs of the same name):
    assert swept["greek"][b"\xa1"].text == _decoded("greek", b"\xa1") == "\u02bd"
    assert swept["cp866"][b"\xfc"].text == _decoded("cp866", b"\xfc") == "\u207f"
    assert swept["sjis"][b"\x81\x5f"].text == _decoded("sjis", b"\x81\x5f") == "\\"
    assert swept["euckr"][b"\x81\x41"].text == _decoded("euckr", b"\x81\x41") == "\uac02"
    assert swept["gb18030"][b"\x81\x35\xf4\x37"].text == _decoded("gb18030", b"\x81\x35\xf4\x37") == "\ue7c7"
    assert swept["greek"][b"\xa4"].text is _decoded("greek", b"\xa4") is None  # Python's iso8859-7: the euro sign
    # sjis 0x5C and 0x815F are both U+005C, which converts back to 0x815F: a key cannot hold 0x5C
    assert _decoded("sjis", b"\x5c", key=True) is None
    assert _decoded("sjis", b"\x81\x5f", key=True) == "\\"


def test_unicode_character_sets_decode_as_mysql_converts_them(cursor: Any) -> None:
    """Python's codecs, taken as they are for these sets: checked on a sample of every plane."""
    database = _database()
    codes = [
        *range(0x20, 0x800, 7),
        *range(0x800, 0xD800, 13),
        *range(0xE000, 0x10000, 11),
        *range(0x10000, 0x110000, 997),
    ]
    encodings = {"utf8mb4": "utf-8", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be"}
    for charset, codec in encodings.items():
        sequences = [chr(code).encode(codec) for code in codes]
        answers = sweep(cursor, charset, sequences, database)
        assert len(answers) == len(sequences), charset
        assert _mismatches(charset, answers) == [], charset
    bmp = [chr(code).encode("utf-8") for code in codes if code < 0x10000]
    assert _mismatches("utf8mb3", sweep(cursor, "utf8mb3", bmp, database)) == []
    assert set(UNICODE_CODECS) >= {*encodings, "utf8mb3", "ascii"}


@pytest.mark.parametrize(
    "charset", ["sjis", "cp932", "ujis", "eucjpms", "big5", "gb18030", "euckr", "ucs2", "greek", "armscii8"]
)
def test_strings_of_many_characters_are_cut_into_characters_as_mysql_cuts_them(
    cursor: Any, swept: dict[str, dict[bytes, Character]], charset: str
) -> None:
    """Random strings of MySQL's characters, special ones and ordinary ones mixed, and byte pairs that
    form a special sequence only across two characters (``sjis`` 0x89 0x81 then ``_``: 0x81 0x5F)."""
    answers = swept[charset]
    mapped = sorted(seq for seq, answer in answers.items() if answer.text is not None)
    special = [seq for seq in mapped if _python_differs(charset, seq, answers[seq])]
    unmapped = sorted(seq for seq, answer in answers.items() if answer.text is None)
    pick = random.Random(charset)
    refused: set[bytes] = set()  # strings holding a character MySQL has none for
    strings = []
    for _ in range(400):
        parts = [pick.choice(mapped) for _ in range(pick.randint(1, 12))]
        if special and pick.random() < 0.5:
            parts.insert(pick.randrange(len(parts) + 1), pick.choice(special))
        if unmapped and pick.random() < 0.1:
            at = pick.randrange(len(parts) + 1)
            parts[at:at] = pick.sample(unmapped, min(len(unmapped), pick.randint(1, 2)))
            refused.add(b"".join(parts))
        strings.append(b"".join(parts))
    for first in unmapped[:3]:  # two characters MySQL has none for, side by side (ucs2: a surrogate pair)
        for second in unmapped[-3:]:
            refused.add(first + second)
            strings.append(first + second)
    straddling = _straddling(mapped, special)
    assert straddling or charset in ("cp932", "euckr", "ucs2", "greek", "armscii8"), (
        charset
    )  # no Python differences there
    sequences = list(dict.fromkeys(strings + straddling))
    answers_many = sweep(cursor, charset, sequences, _database())
    assert len(answers_many) == len(sequences)
    wrong = []
    for seq, answer in answers_many.items():
        ours = _decoded(charset, seq)
        expected = None
        if seq not in refused:
            expected = "".join(answers[char].text or "" for char in _characters(charset, seq))
            assert _converted_whole(answer, expected), (seq.hex(), answer.text, expected)
        if ours != expected:
            wrong.append(f"0x{seq.hex()}: MySQL {answer.text!r}, ours {ours!r}")
    assert wrong == []


def _converted_whole(answer: Character, expected: str) -> bool:
    """MySQL converts the whole string to the characters of its parts (``?`` may be a real one)."""
    return answer.text == expected or (answer.text is None and "?" in expected)


def _characters(charset: str, raw: bytes) -> list[bytes]:
    return [match.group() for match in re.finditer(token_pattern(charset), raw)]


def _straddling(mapped: list[bytes], special: list[bytes]) -> list[bytes]:
    """Two characters whose bytes hold a special sequence across their boundary (at most one per
    special sequence and split point)."""
    ending: dict[bytes, bytes] = {}
    starting: dict[bytes, bytes] = {}
    for seq in mapped:
        for cut in range(1, len(seq)):
            ending.setdefault(seq[-cut:], seq)
        for cut in range(1, len(seq) + 1):
            starting.setdefault(seq[:cut], seq)
    found = []
    for seq in special:
        for cut in range(1, len(seq)):
            head, tail = ending.get(seq[:cut]), starting.get(seq[cut:])
            if head is not None and tail is not None:
                found.append(head + tail)
    return found[:300]


def _python_differs(charset: str, seq: bytes, answer: Character) -> bool:
    codec = MULTI_BYTE_CODECS.get(charset)
    if codec is None:
        return False
    try:
        return seq.decode(codec) != answer.text
    except UnicodeDecodeError:
        return True
