"""Ask MySQL what every character of its character sets is in Unicode, and write the decoding tables.

A CDC pipeline reads text as the bytes MySQL stores and decodes them itself; a client reading through
``utf8mb4`` gets MySQL's own conversion. The two must agree character by character. Python's codecs of
the same names differ from MySQL's conversion in places (MySQL 9.7: ``greek`` 0xA1 is U+02BD, not
U+2018; ``sjis`` 0x815F is U+005C; ``cp866`` 0xFC is U+207F; ``euckr`` is Microsoft's cp949), and
several character sets have no Python codec at all. So the tables in
``airflow_provider_mysql_cdc/decoding/charset_tables.py`` are MySQL's conversion itself, read from a
server by this module:

* :func:`sweep` stores every single-character byte sequence of a character set (as the decoder's
  tokenizer cuts characters: every byte, every two-byte sequence of a multi-byte set, the three-byte
  ``0x8F`` sequences of the EUC-JP sets, the four-byte GB18030 sequences of the BMP) in a column of that
  set and reads back, for those MySQL keeps intact: ``CONVERT(c USING utf8mb4)``, and whether that
  character converts back to the same bytes;
* ``python -m testbed.charset_sweep`` starts a private MySQL instance, sweeps every character set
  and rewrites the tables module (``make charset-tables``); the conformance test
  (``tests/integration/test_charset_conformance.py``) sweeps again and checks the decoder against
  every answer.

MySQL's answer for a character it cannot convert is ``?`` (or U+FFFD); such a sequence has no character,
and the decoder refuses it rather than stage a guess.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from airflow_provider_mysql_cdc.decoding.charsets import MULTI_BYTE_CODECS, UNICODE_CODECS, token_pattern
from testbed.mysql import LocalMySQL, install

__all__ = ["Character", "candidates", "sweep", "tables_module_text"]

TABLES_MODULE = Path(__file__).resolve().parents[1] / "airflow_provider_mysql_cdc" / "decoding" / "charset_tables.py"
#: Sets whose Python codec joins two sequences it refuses alone into one character (UTF-16 surrogate
#: pairs): every sequence MySQL has no character for is recorded, not only those Python decodes.
_PAIRING = frozenset({"ucs2"})
#: Rows inserted per statement.
_BATCH = 4000


@dataclass(frozen=True)
class Character:
    """MySQL's answer for one byte sequence kept intact in a column of the character set."""

    #: Its character in ``utf8mb4`` (None: MySQL has none, it answers ``?`` or U+FFFD).
    text: str | None
    #: Whether converting that character back gives the same bytes (False: another sequence has it).
    round_trips: bool


def candidates(charset: str, max_length: int) -> list[bytes]:
    """The byte sequences of one character each (as the decoder's tokenizer cuts them) to ask about."""
    found = [bytes([b]) for b in range(256)]
    if max_length == 1:
        return found
    token = re.compile(token_pattern(charset))
    pairs = [bytes([a, b]) for a in range(256) for b in range(256)]
    found += [p for p in pairs if token.fullmatch(p)]
    if max_length >= 3 and charset in ("ujis", "eucjpms"):
        found += [bytes([0x8F, a, b]) for a in range(0x80, 0x100) for b in range(0x80, 0x100)]
    if charset == "gb18030":  # the BMP's four-byte sequences; the planes above are arithmetic
        quads = [
            bytes([a, b, c, d])
            for a in range(0x81, 0x85)
            for b in range(0x30, 0x3A)
            for c in range(0x81, 0xFF)
            for d in range(0x30, 0x3A)
        ]
        found += quads + [bytes([a, 0x30, c, 0x30]) for a in range(0x85, 0xFF, 3) for c in range(0x81, 0xFF, 5)]
    return found


def sweep(
    cursor: Any, charset: str, sequences: Sequence[bytes], database: str = "charset_sweep"
) -> dict[bytes, Character]:
    """MySQL's answer for each of ``sequences`` that a ``charset`` column keeps intact (``cursor`` of an
    account that may create the table ``database.t``; the database is dropped afterwards)."""
    table = f"`{database}`.t"
    cursor.execute("SET SESSION sql_mode = ''")  # an invalid sequence is cut (a warning), not an error
    cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    cursor.execute(f"DROP TABLE IF EXISTS {table}")
    cursor.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, b VARBINARY(64), c VARCHAR(64) CHARACTER SET {charset})")
    for start in range(0, len(sequences), _BATCH):
        rows = [(start + i, seq, seq) for i, seq in enumerate(sequences[start : start + _BATCH])]
        cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s)", rows)
    cursor.execute(
        "SELECT b, CAST(CONVERT(c USING utf8mb4) AS BINARY), "
        f"CAST(CONVERT(CONVERT(c USING utf8mb4) USING {charset}) AS BINARY) = b "
        f"FROM {table} WHERE CAST(c AS BINARY) = b"
    )
    answers: dict[bytes, Character] = {}
    for raw, converted, back in cursor.fetchall():
        seq, text = bytes(raw), bytes(converted).decode("utf-8")
        lost = "\ufffd" in text or not text or ("?" in text and b"?" not in seq)
        answers[seq] = Character(None if lost else text, bool(back) and not lost)
    cursor.execute(f"DROP DATABASE `{database}`")
    return answers


# -- the tables module ----------------------------------------------------------------------------


def _python_text(codec: str, seq: bytes) -> str | None:
    try:
        return seq.decode(codec)
    except UnicodeDecodeError:
        return None


def _runs(entries: dict[bytes, int]) -> list[tuple[str, int, int]]:
    """``{sequence: code point (-1: none)}`` as runs ``(first sequence hex, count, first code point)``
    of sequences whose last byte and code point both step by one (-1 stays -1)."""
    runs: list[tuple[str, int, int]] = []
    previous: tuple[bytes, int] | None = None
    for seq in sorted(entries, key=lambda s: (len(s), s)):
        code = entries[seq]
        if previous is not None and runs:
            last_seq, last_code = previous
            follows = seq[:-1] == last_seq[:-1] and seq[-1] == last_seq[-1] + 1
            steps = code == -1 == last_code or (code != -1 and last_code != -1 and code == last_code + 1)
            if follows and steps:
                first, count, first_code = runs[-1]
                runs[-1] = (first, count + 1, first_code)
                previous = (seq, code)
                continue
        runs.append((seq.hex(), 1, code))
        previous = (seq, code)
    return runs


def tables_module_text(answers: dict[str, dict[bytes, Character]], version: str) -> str:
    """The source of ``charset_tables.py`` from the sweeps of every character set."""
    single: dict[str, str] = {}
    differences: dict[str, list[tuple[str, int, int]]] = {}
    ambiguous: dict[str, list[tuple[str, int, int]]] = {}
    for charset in sorted(answers):
        found = answers[charset]
        if charset in MULTI_BYTE_CODECS:
            codec = MULTI_BYTE_CODECS[charset]
            entries = {
                seq: -1 if answer.text is None else ord(answer.text)
                for seq, answer in found.items()
                if _python_text(codec, seq) != answer.text or (answer.text is None and charset in _PAIRING)
            }
            differences[charset] = _runs(entries)
        else:
            single[charset] = "".join(
                "\ufffe" if bytes([b]) not in found or found[bytes([b])].text is None else found[bytes([b])].text or ""
                for b in range(256)
            )
        not_back = {seq: -1 for seq, answer in found.items() if answer.text is not None and not answer.round_trips}
        if not_back:
            ambiguous[charset] = _runs(not_back)
    lines = [
        f'"""MySQL {version}\'s conversion of its character sets to Unicode, read from the server.',
        "",
        "Generated by ``python -m testbed.charset_sweep`` (``make charset-tables``); do not edit. See",
        ":mod:`airflow_provider_mysql_cdc.decoding.charsets` for how the decoder uses them.",
        '"""',
        "",
        "#: Single-byte character sets: the character of each byte (index = byte), U+FFFE where MySQL has none.",
        "SINGLE_BYTE: dict[str, str] = {",
    ]
    for name, table in single.items():
        lines.append(f'    "{name}": (')
        lines += [
            f"        {_string_literal(table[start : start + 16])}  # 0x{start:02X}" for start in range(0, 256, 16)
        ]
        lines.append("    ),")
    lines.append("}")
    lines += _runs_section(
        "MULTI_BYTE_DIFFERENCES",
        "#: Multi-byte character sets: where MySQL's character differs from the Python codec's (or the codec",
        "#: has none), as runs (first sequence in hex, count, first code point); -1: MySQL has no character.",
        differences,
    )
    lines += _runs_section(
        "NOT_ROUND_TRIPPED",
        "#: Sequences whose character converts back to other bytes: another sequence has the same character",
        "#: (runs as above, the code point -1). A key holding one cannot be told apart in the target.",
        ambiguous,
    )
    return "\n".join([*lines, ""])


def _runs_section(name: str, first: str, second: str, entries: dict[str, list[tuple[str, int, int]]]) -> list[str]:
    """The lines of one module-level dict of runs, after a blank line, with its two comment lines."""
    lines = ["", first, second, f"{name}: dict[str, tuple[tuple[str, int, int], ...]] = {{"]
    for charset, runs in entries.items():
        lines += _runs_entry(charset, runs)
    return [*lines, "}"]


def _runs_entry(name: str, runs: list[tuple[str, int, int]]) -> list[str]:
    """The lines of one ``name: (runs)`` entry, as ``ruff format`` writes them."""
    texts = [f'("{first}", {count}, {code})' for first, count, code in runs]
    if len(texts) <= 1:
        return [f'    "{name}": ({"".join(texts)}{"," if texts else ""}),']
    return [f'    "{name}": (', *(f"        {text}," for text in texts), "    ),"]


def _string_literal(text: str) -> str:
    """A Python string literal of ``text`` in ASCII (every character outside printable ASCII escaped)."""
    body = "".join(
        char
        if 0x20 <= ord(char) < 0x7F and char not in '\\"'
        else f"\\u{ord(char):04x}"
        if ord(char) > 0xFF
        else f"\\x{ord(char):02x}"
        for char in text
    )
    return f'"{body}"'


def character_sets(cursor: Any) -> dict[str, int]:
    """Every character set of the server but ``binary`` and the Unicode ones Python decodes exactly,
    with its longest character in bytes."""
    cursor.execute("SELECT CHARACTER_SET_NAME, MAXLEN FROM information_schema.CHARACTER_SETS")
    return {
        str(name): int(length) for name, length in cursor.fetchall() if name != "binary" and name not in UNICODE_CODECS
    }


@contextlib.contextmanager
def _private_server() -> Iterator[Any]:
    """A connection (root) to a fresh local instance, destroyed (stopped by PID, data deleted) on exit."""
    install()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    instance = LocalMySQL("charset-sweep", port=port)
    instance.destroy()  # leftovers of an interrupted run
    try:
        instance.start()
        yield pymysql.connect(
            host=instance.host, port=instance.port, user="root", password=instance.root_password, autocommit=True
        )
    finally:
        instance.destroy()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.charset_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=TABLES_MODULE)
    args = parser.parse_args(argv)
    with _private_server() as connection, connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        version = str(cursor.fetchone()[0])
        answers = {}
        for charset, length in sorted(character_sets(cursor).items()):
            answers[charset] = sweep(cursor, charset, candidates(charset, length))
            print(f"{charset}: {len(answers[charset])} characters", flush=True)
    args.output.write_text(tables_module_text(answers, version), encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
