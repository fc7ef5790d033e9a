"""Partial JSON updates (``binlog_row_value_options=PARTIAL_JSON``): MySQL's diffs, applied to JSON text.

With ``PARTIAL_JSON`` a session logs ``UPDATE t SET j = JSON_SET(j, '$.a', 1)`` (and ``JSON_REPLACE``,
``JSON_REMOVE``) as a ``PARTIAL_UPDATE_ROWS_EVENT`` whose after image holds, for the JSON column, a
list of diffs instead of the document. Each diff is (MySQL ``sql/json_diff.h``, ``Json_diff::write_binary``):

* the operation, one byte: 0 ``REPLACE`` (the value at the path is replaced), 1 ``INSERT`` (a new
  object member, or an array element inserted at the index, appended when the index is past the end),
  2 ``REMOVE`` (the member or element at the path is removed);
* the path, a length-encoded string in MySQL's path syntax (``$.a``, ``$."a b"``, ``$[2]``, ``$.a[0].b``);
* unless ``REMOVE``: the value, a length-encoded MySQL binary JSON value.

A column's diff list is the concatenation of its diffs. The value a diff list gives is the diffs
applied in order to the column's previous value. This module applies them to JSON *text* as the
pipeline stages it (MySQL's ``CAST(j AS CHAR)``, see :func:`~airflow_provider_mysql_cdc.decoding.json_diff.json_text`):
the document is parsed into objects, arrays and scalars kept as their exact text, changed, and printed
again the way MySQL prints (``, `` and ``: `` separators, object keys by length then bytes), so the
result is the text MySQL gives for the updated document. Capture applies diffs to the before image
when it has the column; otherwise the diffs are staged and the apply uses the same function on the
target's current value.

Pure: no network, no python-mysql-replication, no pyarrow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Union

from airflow_provider_mysql_cdc.errors import JsonDiffError

__all__ = [
    "JSON_DIFF_OPERATIONS",
    "JsonDiff",
    "apply_json_diffs",
    "diffs_from_text",
    "diffs_to_text",
    "parse_json_diffs",
]

JsonDiffOperation = Literal["replace", "insert", "remove"]
#: Operation codes of the binlog's diffs, in code order.
JSON_DIFF_OPERATIONS: tuple[JsonDiffOperation, ...] = ("replace", "insert", "remove")


@dataclass(frozen=True)
class JsonDiff:
    """One change of a JSON document: ``operation`` at ``path``; ``value`` is MySQL JSON text (None for remove)."""

    operation: JsonDiffOperation
    path: str
    value: str | None = None


# -- the binlog's diff list -----------------------------------------------------------------------


def _length_encoded(data: bytes, pos: int) -> tuple[int, int]:
    """MySQL's length-encoded integer: (value, next position)."""
    if pos >= len(data):
        raise JsonDiffError("diff list ends inside a length")
    first = data[pos]
    if first < 251:
        return first, pos + 1
    sizes = {252: 2, 253: 3, 254: 8}
    if first not in sizes:
        raise JsonDiffError(f"bad length-encoded integer prefix 0x{first:02x}")
    size = sizes[first]
    if pos + 1 + size > len(data):
        raise JsonDiffError("diff list ends inside a length")
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "little"), pos + 1 + size


def parse_json_diffs(data: bytes, value_text: Callable[[bytes], str]) -> list[JsonDiff]:
    """The diffs of one column's partial value (the bytes after its length prefix).

    ``value_text`` turns a binary JSON value into MySQL's text (``json_binary_to_text``)."""
    diffs: list[JsonDiff] = []
    pos = 0
    while pos < len(data):
        code = data[pos]
        if code >= len(JSON_DIFF_OPERATIONS):
            raise JsonDiffError(f"unknown JSON diff operation {code}")
        operation = JSON_DIFF_OPERATIONS[code]
        length, pos = _length_encoded(data, pos + 1)
        path = data[pos : pos + length].decode("utf-8")
        pos += length
        value = None
        if operation != "remove":
            length, pos = _length_encoded(data, pos)
            if pos + length > len(data):
                raise JsonDiffError(f"diff at {path!r}: value of {length} bytes runs past the diff list")
            value = value_text(data[pos : pos + length])
            pos += length
        diffs.append(JsonDiff(operation, path, value))
    return diffs


def diffs_to_text(diffs: Sequence[JsonDiff]) -> str:
    """The staged form of a diff list: a JSON array of ``[operation, path, value]``."""
    return json.dumps([[d.operation, d.path, d.value] for d in diffs], ensure_ascii=False, separators=(",", ":"))


def diffs_from_text(text: str) -> list[JsonDiff]:
    """The diff list of :func:`diffs_to_text`."""
    try:
        items = json.loads(text)
        diffs = [(str(op), str(path), None if value is None else str(value)) for op, path, value in items]
    except (ValueError, TypeError) as exc:
        raise JsonDiffError(f"staged JSON diff list is unreadable: {exc}") from None
    known: dict[str, JsonDiffOperation] = {operation: operation for operation in JSON_DIFF_OPERATIONS}
    unknown = [op for op, _, _ in diffs if op not in known]
    if unknown:
        raise JsonDiffError(f"staged JSON diff has unknown operation {unknown[0]!r}")
    return [JsonDiff(known[op], path, value) for op, path, value in diffs]


# -- documents: objects, arrays, scalars kept as their exact text ---------------------------------


class Scalar(str):
    """A JSON scalar (string, number, true, false, null) as MySQL prints it."""


Node = Union["dict[str, Node]", "list[Node]", Scalar]

_WHITESPACE = " \t\n\r"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NUMBER_OR_WORD = re.compile(r"[-+0-9.eE]+|true|false|null")


class _TextParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
            self.pos += 1

    def _fail(self, what: str) -> JsonDiffError:
        return JsonDiffError(f"JSON text: {what} at offset {self.pos} of {self.text[:80]!r}")

    def document(self) -> Node:
        node = self.value()
        self._skip()
        if self.pos != len(self.text):
            raise self._fail("text after the document")
        return node

    def value(self) -> Node:
        self._skip()
        if self.pos >= len(self.text):
            raise self._fail("unexpected end")
        char = self.text[self.pos]
        if char == "{":
            return self._object()
        if char == "[":
            return self._array()
        if char == '"':
            return Scalar(self._string_token())
        match = _NUMBER_OR_WORD.match(self.text, self.pos)
        if not match:
            raise self._fail("no JSON value")
        self.pos = match.end()
        return Scalar(match.group(0))

    def _string_token(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if not match:
            raise self._fail("unterminated string")
        self.pos = match.end()
        return match.group(0)

    def _expect(self, char: str) -> None:
        self._skip()
        if self.pos >= len(self.text) or self.text[self.pos] != char:
            raise self._fail(f"expected {char!r}")
        self.pos += 1

    def _object(self) -> Node:
        self.pos += 1
        members: dict[str, Node] = {}
        self._skip()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return members
        while True:
            self._skip()
            key = json.loads(self._string_token())
            self._expect(":")
            members[key] = self.value()
            self._skip()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return members
            self._expect(",")

    def _array(self) -> Node:
        self.pos += 1
        items: list[Node] = []
        self._skip()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return items
        while True:
            items.append(self.value())
            self._skip()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return items
            self._expect(",")


def parse_json_text(text: str) -> Node:
    """A document in MySQL's JSON text, scalars kept as their exact text."""
    return _TextParser(text).document()


_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote_key(key: str) -> str:
    """A member name as MySQL prints it: ``"``, ``\\`` and controls below 0x20 escaped, nothing else."""
    out = []
    for char in key:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif ord(char) < 0x20:
            out.append(_CONTROL_ESCAPES.get(char, f"\\u{ord(char):04x}"))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def json_text(node: Node) -> str:
    """A document as MySQL prints it (``CAST(j AS CHAR)``): object keys by length, then bytes."""
    if isinstance(node, Scalar):
        return str(node)
    if isinstance(node, list):
        return "[" + ", ".join(json_text(item) for item in node) + "]"
    keys = sorted(node, key=lambda key: (len(key.encode("utf-8")), key.encode("utf-8")))
    return "{" + ", ".join(f"{_quote_key(key)}: {json_text(node[key])}" for key in keys) + "}"


# -- paths ----------------------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_$\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*")
_INDEX = re.compile(r"\[\s*(?:(last)\s*(?:-\s*(\d+))?|(\d+))\s*\]")

Leg = str | tuple[str, int]  # a member name, or ("index", n) / ("last", n) for [last-n]


def parse_path(path: str) -> list[Leg]:
    """The legs of a MySQL JSON path without wildcards (``$.a."b c"[2][last-1]``)."""
    text = path.strip()
    if not text.startswith("$"):
        raise JsonDiffError(f"JSON path {path!r} does not start with '$'")
    legs: list[Leg] = []
    pos = 1
    while pos < len(text):
        if text[pos] in _WHITESPACE:
            pos += 1
        elif text[pos] == ".":
            pos += 1
            while pos < len(text) and text[pos] in _WHITESPACE:
                pos += 1
            if text.startswith('"', pos):
                match = _STRING.match(text, pos)
                if not match:
                    raise JsonDiffError(f"JSON path {path!r}: unterminated member name")
                legs.append(json.loads(match.group(0)))
            else:
                match = _IDENTIFIER.match(text, pos)
                if not match:
                    raise JsonDiffError(f"JSON path {path!r}: no member name at offset {pos}")
                legs.append(match.group(0))
            pos = match.end()
        elif text[pos] == "[":
            match = _INDEX.match(text, pos)
            if not match:
                raise JsonDiffError(f"JSON path {path!r}: unsupported array leg at offset {pos}")
            if match.group(3) is not None:
                legs.append(("index", int(match.group(3))))
            else:
                legs.append(("last", int(match.group(2) or 0)))
            pos = match.end()
        else:
            raise JsonDiffError(f"JSON path {path!r}: unexpected {text[pos]!r} at offset {pos}")
    return legs


def _array_index(leg: tuple[str, int], size: int) -> int:
    kind, number = leg
    return number if kind == "index" else size - 1 - number


def _apply_one(document: Node, diff: JsonDiff) -> Node:
    legs = parse_path(diff.path)
    value = None if diff.value is None else parse_json_text(diff.value)
    if not legs:
        if diff.operation != "replace" or value is None:
            raise JsonDiffError(f"{diff.operation} of the whole document is not a valid JSON diff")
        return value
    parent = document
    for leg in legs[:-1]:
        if isinstance(leg, str):
            if not isinstance(parent, dict) or leg not in parent:
                raise JsonDiffError(f"path {diff.path!r} does not exist in the document")
            parent = parent[leg]
        else:
            if not isinstance(parent, list):
                raise JsonDiffError(f"path {diff.path!r} does not exist in the document")
            index = _array_index(leg, len(parent))
            if not 0 <= index < len(parent):
                raise JsonDiffError(f"path {diff.path!r} does not exist in the document")
            parent = parent[index]
    last = legs[-1]
    if isinstance(last, str):
        if not isinstance(parent, dict):
            raise JsonDiffError(f"path {diff.path!r}: the parent is not an object")
        if diff.operation == "remove":
            parent.pop(last, None)
        else:
            assert value is not None
            parent[last] = value
        return document
    if not isinstance(parent, list):
        raise JsonDiffError(f"path {diff.path!r}: the parent is not an array")
    index = _array_index(last, len(parent))
    if diff.operation == "remove":
        if 0 <= index < len(parent):
            del parent[index]
    elif diff.operation == "insert":
        assert value is not None
        parent.insert(min(max(index, 0), len(parent)), value)
    else:
        assert value is not None
        if not 0 <= index < len(parent):
            raise JsonDiffError(f"replace at {diff.path!r}: no such array element")
        parent[index] = value
    return document


def apply_json_diffs(document: str, diffs: Sequence[JsonDiff]) -> str:
    """The text of ``document`` (MySQL JSON text) after ``diffs``, in order, as MySQL prints it."""
    node = parse_json_text(document)
    for diff in diffs:
        node = _apply_one(node, diff)
    return json_text(node)
