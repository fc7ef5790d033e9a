"""Partial JSON diffs applied to MySQL JSON text (decoding.json_diff); the end-to-end check against the
server's own results is in tests/integration/test_partial_images.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_mysql_cdc.decoding.json_diff import (
    JsonDiff,
    apply_json_diffs,
    diffs_from_text,
    diffs_to_text,
    json_text,
    parse_json_diffs,
    parse_json_text,
    parse_path,
)
from airflow_provider_mysql_cdc.errors import JsonDiffError

DOCUMENTS = [
    "null",
    "1e300",
    '"a \\"quoted\\" \\\\ text\\n"',
    "[]",
    "{}",
    '{"a": 1, "bb": [1, 2.5, -0.0, "x"], "ccc": {"d": null, "e": true}}',
    '[{"k": "v"}, [[]], 18446744073709551615, -12.50, "2024-01-15 10:00:00.000000"]',
    '{"\\u0001": 1, "z": "😀", "é": "ü"}',
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_mysql_text_round_trips(text: str) -> None:
    assert json_text(parse_json_text(text)) == text


def test_printing_orders_keys_like_mysql() -> None:
    assert json_text(parse_json_text('{"bb": 1, "a": 2, "ab": 3, "b": 4}')) == '{"a": 2, "b": 4, "ab": 3, "bb": 1}'


@pytest.mark.parametrize(
    ("path", "legs"),
    [
        ("$", []),
        ("$.a", ["a"]),
        ('$."a b".c', ["a b", "c"]),
        ("$[0]", [("index", 0)]),
        ("$.a[last]", ["a", ("last", 0)]),
        ("$.a[last - 2].b", ["a", ("last", 2), "b"]),
        ('$."with \\"quote"', ['with "quote']),
    ],
)
def test_paths(path: str, legs: list[object]) -> None:
    assert parse_path(path) == legs


@pytest.mark.parametrize("path", ["a", "$.*", "$[*]", "$**.a", "$.a[1 to 2]"])
def test_paths_with_wildcards_or_ranges_are_refused(path: str) -> None:
    with pytest.raises(JsonDiffError):
        parse_path(path)


@pytest.mark.parametrize(
    ("document", "diffs", "expected"),
    [
        ('{"k": 1}', [JsonDiff("replace", "$.k", "42")], '{"k": 42}'),
        ('{"k": 1}', [JsonDiff("replace", "$.k", "42"), JsonDiff("insert", "$.new", '"x"')], '{"k": 42, "new": "x"}'),
        ('{"k": 42, "new": "x"}', [JsonDiff("remove", "$.k")], '{"new": "x"}'),
        ("[1, 2, 3]", [JsonDiff("insert", "$[1]", "9")], "[1, 9, 2, 3]"),
        ("[1, 2, 3]", [JsonDiff("insert", "$[7]", "9")], "[1, 2, 3, 9]"),
        ("[1, 2, 3]", [JsonDiff("remove", "$[last]")], "[1, 2]"),
        ("[1, 2, 3]", [JsonDiff("replace", "$[last-1]", "{}")], "[1, {}, 3]"),
        (
            '{"a": {"b": [1, {"c": 2}]}}',
            [JsonDiff("replace", "$.a.b[1].c", '"deep"')],
            '{"a": {"b": [1, {"c": "deep"}]}}',
        ),
        ('{"a": 1}', [JsonDiff("replace", "$", "[1]")], "[1]"),
    ],
)
def test_diffs_apply_in_order(document: str, diffs: list[JsonDiff], expected: str) -> None:
    assert apply_json_diffs(document, diffs) == expected


def test_a_diff_below_a_missing_member_is_an_error() -> None:
    with pytest.raises(JsonDiffError, match="does not exist"):
        apply_json_diffs('{"a": 1}', [JsonDiff("replace", "$.b.c", "1")])


def test_binlog_diff_list_is_read_whole() -> None:
    # Two diffs as MySQL writes them: op, length-encoded path, length-encoded binary value.
    values = {b"\x05\x2a\x00": "42", b"\x0c\x01x": '"x"'}
    data = b"\x00\x03$.k\x03\x05\x2a\x00" + b"\x01\x05$.new\x03\x0c\x01x" + b"\x02\x05$.old"
    diffs = parse_json_diffs(data, values.__getitem__)
    assert diffs == [JsonDiff("replace", "$.k", "42"), JsonDiff("insert", "$.new", '"x"'), JsonDiff("remove", "$.old")]


def test_truncated_diff_list_is_an_error() -> None:
    with pytest.raises(JsonDiffError):
        parse_json_diffs(b"\x00\x03$.k\x09\x05", lambda raw: "1")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["replace", "insert", "remove"]),
            st.text(max_size=8),
            st.one_of(st.none(), st.text(max_size=8)),
        ),
        max_size=5,
    )
)
def test_staged_diff_lists_round_trip(items: list[tuple[str, str, str | None]]) -> None:
    diffs = [JsonDiff(op, path, value) for op, path, value in items]  # type: ignore[arg-type]
    assert diffs_from_text(diffs_to_text(diffs)) == diffs
