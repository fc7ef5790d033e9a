"""MySQL statement text -> tokens (pure; the lexer under :mod:`~airflow_provider_mysql_cdc.core.ddl_parser`).

Follows MySQL's own lexer where DDL needs it:

* comments ``/* ... */``, ``-- `` (two dashes then a space or control character) and ``#`` to the
  end of the line are skipped; versioned comments ``/*!`` and ``/*!NNNNN`` count as text when the
  version is at most :data:`SERVER_VERSION` (MySQL 9.7), and are skipped otherwise; optimizer hints
  ``/*+ ... */`` are comments;
* names: unquoted (letters, digits, ``_``, ``$``, any character from U+0080), backquoted with
  doubled backquotes, and double-quoted when ``ANSI_QUOTES`` is on; a name may begin with a digit
  (``1abc``) but a run of digits is a number;
* string literals in single quotes (and double quotes unless ``ANSI_QUOTES``) with MySQL's backslash
  escapes (off under ``NO_BACKSLASH_ESCAPES``) and doubled quotes; ``N'..'``; hexadecimal
  (``X'41'``, ``0x41``) and bit (``b'101'``, ``0b101``) literals become their bytes;
* numbers (``12``, ``1.5``, ``.5``, ``1e3``); punctuation and operators.

Each token keeps its span in the statement so that text such as an expression can be cut out again
(:func:`source_text`). :class:`TokenCursor` reads tokens for the parsers; :class:`SqlMode` is the
session sql_mode a statement was logged with (it decides how quotes and backslashes read). No network
or Airflow import.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_provider_mysql_cdc.core.ddl_charsets import CHARSETS, charset_name
from airflow_provider_mysql_cdc.errors import DdlSyntaxError

#: The server version versioned comments are evaluated against (``/*!80013 ... */`` counts).
SERVER_VERSION = 90704

WORD = "word"  # unquoted name or keyword
NAME = "name"  # quoted name (backquotes, or double quotes under ANSI_QUOTES)
STRING = "string"  # quoted string literal; value is its characters
NUMBER = "number"  # decimal number literal; value is the text
HEX = "hex"  # X'..' / 0x..; value is the bytes as lower-case hex
BIT = "bit"  # b'..' / 0b..; value is the bytes as lower-case hex
PUNCT = "punct"  # punctuation and operators
END = "end"

_DIGITS = "0123456789"
_ESCAPES = {"0": "\0", "'": "'", '"': '"', "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "\\": "\\"}
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_NUMBER = re.compile(r"0x([0-9a-fA-F]+)")
_BIT_NUMBER = re.compile(r"0b([01]+)")
_HEX_STRING = re.compile(r"[xX]'([0-9a-fA-F]*)'")
_BIT_STRING = re.compile(r"[bB]'([01]*)'")
_OPERATORS = ("<=>", "->>", "<=", ">=", "<>", "!=", ":=", "||", "&&", "<<", ">>", "->")


@dataclass(frozen=True)
class Token:
    """One token: its kind, its value (see the kind constants), and its span in the statement."""

    kind: str
    value: str
    start: int
    end: int
    #: For STRING tokens: ``N'..'`` -> ``utf8mb3``; an introducer is attached by the parser.
    charset: str | None = None

    def is_word(self, *words: str) -> bool:
        """True for an unquoted word equal (case-insensitively) to one of ``words``."""
        return self.kind == WORD and self.value.upper() in words

    def is_punct(self, *symbols: str) -> bool:
        """True for punctuation equal to one of ``symbols``."""
        return self.kind == PUNCT and self.value in symbols


def _is_name_char(char: str) -> bool:
    return (char.isascii() and (char.isalnum() or char in "_$")) or (not char.isascii() and char != "\ufeff")


def _bits_to_hex(bits: str) -> str:
    if not bits:
        return ""
    value = int(bits, 2)
    return value.to_bytes((len(bits) + 7) // 8, "big").hex()


def _hex_bytes(digits: str) -> str:
    """``X'...'`` must have an even number of digits; ``0x...`` gets a leading zero when odd."""
    return ("0" + digits if len(digits) % 2 else digits).lower()


class _Lexer:
    def __init__(self, sql: str, *, ansi_quotes: bool, backslash_escapes: bool) -> None:
        self.sql = sql
        self.ansi_quotes = ansi_quotes
        self.backslash_escapes = backslash_escapes
        self.pos = 0
        self.in_versioned = False
        self.tokens: list[Token] = []

    def run(self) -> list[Token]:
        sql = self.sql
        while True:
            self._skip_space_and_comments()
            if self.pos >= len(sql):
                break
            token = self._token()
            if token.end <= token.start:
                raise DdlSyntaxError(f"cannot read the text at offset {token.start}")
            self.tokens.append(token)
        if self.in_versioned:
            raise DdlSyntaxError("versioned comment /*! is not closed")
        self.tokens.append(Token(END, "", len(sql), len(sql)))
        return self.tokens

    def _skip_space_and_comments(self) -> None:
        sql = self.sql
        while self.pos < len(sql):
            char = sql[self.pos]
            if char.isspace():
                self.pos += 1
            elif char == "#" or (sql.startswith("--", self.pos) and self._dash_comment()):
                newline = sql.find("\n", self.pos)
                self.pos = len(sql) if newline < 0 else newline + 1
            elif sql.startswith("/*!", self.pos):
                self._versioned_comment()
            elif sql.startswith("/*", self.pos):
                end = sql.find("*/", self.pos + 2)
                if end < 0:
                    raise DdlSyntaxError("comment /* is not closed")
                self.pos = end + 2
            elif self.in_versioned and sql.startswith("*/", self.pos):
                self.in_versioned = False
                self.pos += 2
            else:
                return

    def _dash_comment(self) -> bool:
        after = self.pos + 2
        return after >= len(self.sql) or self.sql[after].isspace() or ord(self.sql[after]) < 32

    def _versioned_comment(self) -> None:
        if self.in_versioned:
            raise DdlSyntaxError("nested versioned comment")
        start = self.pos + 3
        digits = 0
        while digits < 5 and start + digits < len(self.sql) and self.sql[start + digits] in _DIGITS:
            digits += 1
        if digits not in (0, 5):
            raise DdlSyntaxError(f"versioned comment with a {digits}-digit version")
        version = int(self.sql[start : start + digits]) if digits else 0
        if version > SERVER_VERSION:
            end = self.sql.find("*/", start)
            if end < 0:
                raise DdlSyntaxError("versioned comment /*! is not closed")
            self.pos = end + 2
            return
        self.in_versioned = True
        self.pos = start + digits

    def _token(self) -> Token:
        sql, pos = self.sql, self.pos
        char = sql[pos]
        if char == "`" or (char == '"' and self.ansi_quotes):
            return self._quoted_name(char)
        if char in "'\"":
            return self._string(pos, pos, None)
        if char in "nN" and sql.startswith("'", pos + 1):
            return self._string(pos, pos + 1, "utf8mb3")
        for pattern, kind, convert in (
            (_HEX_STRING, HEX, lambda digits: digits.lower()),
            (_BIT_STRING, BIT, _bits_to_hex),
        ):
            match = pattern.match(sql, pos)
            if match:
                if kind == HEX and len(match.group(1)) % 2:
                    raise DdlSyntaxError(f"hexadecimal literal with an odd number of digits at {pos}")
                return self._emit(kind, convert(match.group(1)), match.end())
        if char in _DIGITS or (char == "." and sql[pos + 1 : pos + 2] in _DIGITS[1:] and not self._after_name()):
            return self._number_or_name()
        if _is_name_char(char):
            return self._word()
        for operator in _OPERATORS:
            if sql.startswith(operator, pos):
                return self._emit(PUNCT, operator, pos + len(operator))
        return self._emit(PUNCT, char, pos + 1)

    def _emit(self, kind: str, value: str, end: int, charset: str | None = None) -> Token:
        token = Token(kind, value, self.pos, end, charset)
        self.pos = end
        return token

    def _after_name(self) -> bool:
        """A ``.`` right after a name qualifies it (``db.1t``), it does not start a number."""
        return bool(self.tokens) and self.tokens[-1].kind in (WORD, NAME) and self.tokens[-1].end == self.pos

    def _after_dot(self) -> bool:
        return bool(self.tokens) and self.tokens[-1].is_punct(".") and self.tokens[-1].end == self.pos

    def _word_end(self, pos: int) -> int:
        while pos < len(self.sql) and _is_name_char(self.sql[pos]):
            pos += 1
        return pos

    def _word(self) -> Token:
        return self._emit(WORD, self.sql[self.pos : self._word_end(self.pos)], self._word_end(self.pos))

    def _number_or_name(self) -> Token:
        sql, pos = self.sql, self.pos
        name_end = self._word_end(pos)
        if self._after_dot():  # db.1t: a name after a qualifying dot
            return self._emit(WORD, sql[pos:name_end], name_end)
        for pattern, kind, convert in ((_HEX_NUMBER, HEX, _hex_bytes), (_BIT_NUMBER, BIT, _bits_to_hex)):
            match = pattern.match(sql, pos)
            if match and match.end() == name_end:
                return self._emit(kind, convert(match.group(1)), match.end())
        match = _NUMBER.match(sql, pos)
        assert match is not None  # starts with a digit or ".digit"
        if name_end == pos or (
            match.end() >= name_end and not _is_name_char(sql[match.end() : match.end() + 1] or " ")
        ):
            return self._emit(NUMBER, match.group(0), match.end())
        return self._emit(WORD, sql[pos:name_end], name_end)  # 1abc, 2e5x: a name

    def _quoted_name(self, quote: str) -> Token:
        sql, pos = self.sql, self.pos + 1
        parts: list[str] = []
        while True:
            end = sql.find(quote, pos)
            if end < 0:
                raise DdlSyntaxError(f"quoted name at {self.pos} is not closed")
            parts.append(sql[pos:end])
            if sql.startswith(quote * 2, end):
                parts.append(quote)
                pos = end + 2
                continue
            return self._emit(NAME, "".join(parts), end + 1)

    def _string(self, start: int, quote_at: int, charset: str | None) -> Token:
        sql = self.sql
        quote = sql[quote_at]
        pos = quote_at + 1
        out: list[str] = []
        while pos < len(sql):
            char = sql[pos]
            if char == "\\" and self.backslash_escapes and pos + 1 < len(sql):
                escaped = sql[pos + 1]
                # \% and \_ keep their backslash (they are LIKE escapes); other unknown escapes drop it.
                out.append(_ESCAPES.get(escaped, "\\" + escaped if escaped in "%_" else escaped))
                pos += 2
            elif char == quote:
                if sql.startswith(quote, pos + 1):
                    out.append(quote)
                    pos += 2
                else:
                    self.pos = start
                    return self._emit(STRING, "".join(out), pos + 1, charset)
            else:
                out.append(char)
                pos += 1
        raise DdlSyntaxError(f"string literal at {start} is not closed")


def tokenize(sql: str, *, ansi_quotes: bool = False, backslash_escapes: bool = True) -> list[Token]:
    """The tokens of ``sql``, ending with an END token; raises :class:`DdlSyntaxError`."""
    return _Lexer(sql, ansi_quotes=ansi_quotes, backslash_escapes=backslash_escapes).run()


def source_text(sql: str, tokens: Sequence[Token]) -> str:
    """The statement text of consecutive tokens, comments and line breaks between them made one space."""
    parts: list[str] = []
    previous_end: int | None = None
    for token in tokens:
        if token.kind == END:
            break
        if previous_end is not None and token.start > previous_end:
            parts.append(" ")
        parts.append(sql[token.start : token.end])
        previous_end = token.end
    return "".join(parts)


class TokenCursor:
    """Reads tokens of one statement: lookahead, keyword and punctuation tests, names, literals."""

    def __init__(self, sql: str, tokens: Sequence[Token], *, real_as_float: bool = False) -> None:
        self.sql = sql
        self.tokens = tokens
        self.index = 0
        self.real_as_float = real_as_float

    def peek(self, ahead: int = 0) -> Token:
        """The token ``ahead`` positions on (END at the end)."""
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        """Consume and return the current token."""
        token = self.peek()
        if token.kind != END:
            self.index += 1
        return token

    def at_end(self) -> bool:
        """True at the end of the statement (a trailing ``;`` counts as the end)."""
        return self.peek().kind == END or (self.peek().is_punct(";") and self.peek(1).kind == END)

    def at_word(self, *words: str) -> bool:
        """True when the current token is one of the unquoted ``words``."""
        return self.peek().is_word(*words)

    def accept_word(self, *words: str) -> str | None:
        """Consume one of ``words`` (returned upper-case) if it is next."""
        if self.peek().is_word(*words):
            return self.next().value.upper()
        return None

    def expect_word(self, *words: str) -> str:
        """Consume one of ``words`` or raise."""
        word = self.accept_word(*words)
        if word is None:
            raise self.error(f"expected {' or '.join(words)}")
        return word

    def accept_words(self, *words: str) -> bool:
        """Consume the sequence ``words`` if all of it is next."""
        if all(self.peek(i).is_word(word) for i, word in enumerate(words)):
            self.index += len(words)
            return True
        return False

    def at_punct(self, *symbols: str) -> bool:
        """True when the current token is one of ``symbols``."""
        return self.peek().is_punct(*symbols)

    def accept_punct(self, *symbols: str) -> bool:
        """Consume one of ``symbols`` if it is next."""
        if self.peek().is_punct(*symbols):
            self.next()
            return True
        return False

    def expect_punct(self, symbol: str) -> None:
        """Consume ``symbol`` or raise."""
        if not self.accept_punct(symbol):
            raise self.error(f"expected {symbol!r}")

    def error(self, message: str) -> DdlSyntaxError:
        """A syntax error at the current token."""
        token = self.peek()
        found = "the end" if token.kind == END else repr(self.sql[token.start : token.end])
        return DdlSyntaxError(f"{message} at offset {token.start} (found {found})")

    def identifier(self) -> str:
        """A name: unquoted word or quoted name."""
        token = self.peek()
        if token.kind in (WORD, NAME):
            return self.next().value
        raise self.error("expected a name")

    def name_or_string(self) -> str:
        """A name, or a string (charset, collation and engine names may be quoted)."""
        if self.peek().kind == STRING:
            return self.next().value
        return self.identifier()

    def qualified_name(self) -> tuple[str | None, str]:
        """``name`` or ``qualifier.name``."""
        first = self.identifier()
        if self.at_punct(".") and self.peek(1).kind in (WORD, NAME):
            self.next()
            return first, self.identifier()
        return None, first

    def balanced(self) -> list[Token]:
        """A parenthesized group, parentheses included."""
        start = self.index
        self.expect_punct("(")
        depth = 1
        while depth:
            token = self.next()
            if token.kind == END:
                raise self.error("unbalanced parentheses")
            if token.is_punct("("):
                depth += 1
            elif token.is_punct(")"):
                depth -= 1
        return list(self.tokens[start : self.index])

    def until(self, stop: Callable[[TokenCursor], bool]) -> list[Token]:
        """Tokens up to (not including) the first place at parenthesis depth 0 where ``stop`` holds, or the end."""
        start = self.index
        while not self.at_end() and not stop(self):
            if self.at_punct("("):
                self.balanced()
            elif self.at_punct(")"):
                break
            else:
                self.next()
        return list(self.tokens[start : self.index])

    def text(self, tokens: Sequence[Token]) -> str:
        """The source text of ``tokens``."""
        return source_text(self.sql, tokens)

    def integer(self) -> int:
        """An unsigned integer literal."""
        token = self.next()
        if token.kind != NUMBER or not token.value.isdigit():
            raise DdlSyntaxError(f"expected an integer at offset {token.start}")
        return int(token.value)

    def string(self) -> str:
        """A string literal (adjacent literals joined)."""
        if self.peek().kind != STRING:
            raise self.error("expected a string")
        parts = [self.next().value]
        while self.peek().kind == STRING:
            parts.append(self.next().value)
        return "".join(parts)

    def introducer(self) -> str | None:
        """Consume a ``_charset`` introducer when a literal follows it."""
        token = self.peek()
        if (
            token.kind == WORD
            and token.value.startswith("_")
            and charset_name(token.value[1:]) in CHARSETS
            and self.peek(1).kind in (STRING, HEX, BIT)
        ):
            self.next()
            return charset_name(token.value[1:])
        return None


_SQL_MODE_BITS = {
    "REAL_AS_FLOAT": 1 << 0,
    "PIPES_AS_CONCAT": 1 << 1,
    "ANSI_QUOTES": 1 << 2,
    "IGNORE_SPACE": 1 << 3,
    "ONLY_FULL_GROUP_BY": 1 << 5,
    "NO_UNSIGNED_SUBTRACTION": 1 << 6,
    "NO_DIR_IN_CREATE": 1 << 7,
    "ANSI": 1 << 18,
    "NO_AUTO_VALUE_ON_ZERO": 1 << 19,
    "NO_BACKSLASH_ESCAPES": 1 << 20,
    "STRICT_TRANS_TABLES": 1 << 21,
    "STRICT_ALL_TABLES": 1 << 22,
    "NO_ZERO_IN_DATE": 1 << 23,
    "NO_ZERO_DATE": 1 << 24,
    "INVALID_DATES": 1 << 25,
    "ERROR_FOR_DIVISION_BY_ZERO": 1 << 26,
    "TRADITIONAL": 1 << 27,
    "HIGH_NOT_PRECEDENCE": 1 << 29,
    "NO_ENGINE_SUBSTITUTION": 1 << 30,
    "PAD_CHAR_TO_FULL_LENGTH": 1 << 31,
    "TIME_TRUNCATE_FRACTIONAL": 1 << 32,
}
_SQL_MODE_COMBINATIONS = {
    "ANSI": ("REAL_AS_FLOAT", "PIPES_AS_CONCAT", "ANSI_QUOTES", "IGNORE_SPACE", "ONLY_FULL_GROUP_BY"),
    "TRADITIONAL": (
        "STRICT_TRANS_TABLES",
        "STRICT_ALL_TABLES",
        "NO_ZERO_IN_DATE",
        "NO_ZERO_DATE",
        "ERROR_FOR_DIVISION_BY_ZERO",
        "NO_ENGINE_SUBSTITUTION",
    ),
}


@dataclasses.dataclass(frozen=True)
class SqlMode:
    """The session ``sql_mode`` a statement ran under: the names that are set.

    Built from the binlog Query event's bitmask (python-mysql-replication's ``QueryEvent.sql_mode``)
    or from the text ``@@sql_mode`` prints; combination modes (ANSI, TRADITIONAL) are expanded.
    """

    names: frozenset[str]

    @classmethod
    def of(cls, value: SqlMode | int | str | None) -> SqlMode | None:
        """None stays None (unknown); an int is the binlog bitmask; a str the comma-separated names."""
        if value is None or isinstance(value, SqlMode):
            return value
        if isinstance(value, int):
            names = {name for name, bit in _SQL_MODE_BITS.items() if value & bit}
        else:
            names = {part.strip().upper() for part in value.split(",") if part.strip()}
        for combination, members in _SQL_MODE_COMBINATIONS.items():
            if combination in names:
                names.update(members)
        return cls(frozenset(names))

    @property
    def strict(self) -> bool:
        """STRICT_TRANS_TABLES or STRICT_ALL_TABLES: ALTERs fail instead of changing values that do not fit."""
        return bool(self.names & {"STRICT_TRANS_TABLES", "STRICT_ALL_TABLES"})
