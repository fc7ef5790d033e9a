"""Snapshot chunk planning: coverage properties (hypothesis), JSON round-trips, SQL fragments."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_mysql_cdc.core.chunks import (
    EVEN_SPLIT_MAX_SPREAD,
    EVEN_SPLIT_MIN_ROWS,
    Key,
    KeyRange,
    SnapshotChunk,
    boundary_query,
    chunk_of,
    compare_keys,
    even_boundaries,
    key_order,
    next_boundary_query,
    plan_chunks,
    plan_snapshot_chunks,
    quote_identifier,
    range_predicate,
    value_from_json,
    value_to_json,
)
from airflow_provider_mysql_cdc.errors import ConfigurationError, TerminalCdcError

# --- coverage properties -----------------------------------------------------------------------

int_keys = st.tuples(st.integers(-(2**64), 2**64))
composite_keys = st.tuples(st.integers(-5, 5), st.binary(max_size=3))


def assert_partition(boundaries: list[Key], probes: list[Key]) -> None:
    ranges = plan_chunks(boundaries)
    assert len(ranges) == len(boundaries) + 1
    assert ranges[0].lower is None
    assert ranges[-1].upper is None
    for before, after in itertools.pairwise(ranges):
        assert before.upper == after.lower  # contiguous: no gap, no overlap
    for key in [*probes, *boundaries]:
        holders = [i for i, key_range in enumerate(ranges) if key_range.contains(key)]
        assert len(holders) == 1, (key, holders)
        assert chunk_of(ranges, key) == holders[0]
        index = sum(1 for b in boundaries if b <= key)  # Python order is MySQL order for these types
        assert holders[0] == index


@given(st.lists(int_keys, unique=True, max_size=30), st.lists(int_keys, max_size=30))
def test_int_keys_fall_in_exactly_one_chunk(boundaries: list[Key], probes: list[Key]) -> None:
    assert_partition(sorted(boundaries), probes)


@given(st.lists(composite_keys, unique=True, max_size=30), st.lists(composite_keys, max_size=30))
def test_composite_int_bytes_keys_fall_in_exactly_one_chunk(boundaries: list[Key], probes: list[Key]) -> None:
    assert_partition(sorted(boundaries), probes)


@given(st.lists(st.tuples(st.decimals(allow_nan=False, allow_infinity=False, places=3)), unique=True, max_size=20))
def test_decimal_boundaries_round_trip_through_chunks(boundaries: list[Key]) -> None:
    unique = sorted(set(boundaries))
    chunks = plan_snapshot_chunks("db", "t", ["d"], unique)
    restored = tuple(SnapshotChunk.from_json(json.loads(json.dumps(c.to_json()))) for c in chunks)
    assert restored == chunks
    for number, boundary in enumerate(unique, start=1):
        assert chunk_of([c.key_range for c in restored], boundary) == number


def test_no_boundaries_gives_one_unbounded_range() -> None:
    (only,) = plan_chunks([])
    assert only == KeyRange(None, None)
    assert only.contains((1,)) is True
    assert only.contains(("any", b"thing")) is True
    assert chunk_of([only], (42, "x")) == 0


def test_plan_accepts_lists_and_builds_half_open_ranges() -> None:
    ranges = plan_chunks([[10], [20]])
    assert ranges == (KeyRange(None, (10,)), KeyRange((10,), (20,)), KeyRange((20,), None))
    assert ranges[0].contains((9,)) is True
    assert ranges[0].contains((10,)) is False
    assert ranges[1].contains((10,)) is True
    assert ranges[1].contains((20,)) is False
    assert ranges[2].contains((20,)) is True


# --- plan_chunks / KeyRange validation ---------------------------------------------------------


@pytest.mark.parametrize(
    "boundaries",
    [
        [(2,), (1,)],  # decreasing
        [(1,), (1,)],  # duplicate
        [(1, b"b"), (1, b"a")],  # composite, decreasing on the second column
        [(1,), (2, 3)],  # arity changes
        [(1,), (b"x",)],  # incomparable types
        [(date(2024, 1, 1),), (datetime(2024, 1, 2),)],  # date vs datetime
        [(datetime(2024, 1, 1),), (datetime(2024, 1, 2, tzinfo=UTC),)],  # naive vs aware
        [()],  # empty key
        [(1.5,)],  # float keys are not supported
        [(True,)],  # bool is not a key value
        [(None,)],  # key columns are NOT NULL
        [(Decimal("NaN"),)],
        ["ab"],  # a string is not a key tuple
        [5],
    ],
)
def test_plan_chunks_rejects_bad_boundaries(boundaries: Any) -> None:
    with pytest.raises(ConfigurationError):
        plan_chunks(boundaries)


def test_string_boundaries_are_trusted_to_be_in_collation_order() -> None:
    # 'a' < 'B' in a case-insensitive collation although Python says otherwise.
    ranges = plan_chunks([("a",), ("B",)])
    assert len(ranges) == 3
    with pytest.raises(ConfigurationError, match="strictly increasing"):
        plan_chunks([("a",), ("a",)])
    with pytest.raises(ConfigurationError, match="strictly increasing"):
        plan_chunks([(2, "a"), (1, "b")])  # the integer column decides


def test_configuration_errors_are_terminal_value_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        KeyRange((5,), (5,))
    assert isinstance(info.value, TerminalCdcError)
    assert isinstance(info.value, ValueError)
    assert "empty" in str(info.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: KeyRange((5,), (4,)),
        lambda: KeyRange((1,), (2, 3)),
        lambda: KeyRange([1], None),  # type: ignore[arg-type]
        lambda: KeyRange((1,), None).contains((1, 2)),
        lambda: KeyRange((1,), None).contains((b"x",)),
        lambda: chunk_of([], (1,)),
        lambda: chunk_of([KeyRange((1,), None)], (1,)),
    ],
)
def test_key_range_misuse_raises_configuration_error(build: Any) -> None:
    with pytest.raises(ConfigurationError):
        build()


# --- strings: only the server can decide -------------------------------------------------------


def test_contains_returns_none_when_a_string_comparison_decides() -> None:
    key_range = KeyRange(("apple",), ("melon",))
    assert key_range.contains(("banana",)) is None
    assert key_range.contains(("APPLE",)) is None  # equal to the lower bound in a _ci collation
    assert key_range.contains(("zebra",)) is None
    assert key_range.contains(("apple",)) is None  # equal to lower, but still compared with "melon"
    assert KeyRange(("apple",), None).contains(("apple",)) is True  # identical strings are equal in any collation
    assert key_range.contains(("melon",)) is False
    assert chunk_of(plan_chunks([("apple",), ("melon",)]), ("kiwi",)) is None
    assert chunk_of(plan_chunks([("apple",)]), ("apple",)) == 1


def test_contains_with_string_components_after_a_deciding_column() -> None:
    key_range = KeyRange((7, "a"), (9, "a"))
    assert key_range.contains((5, "x")) is False
    assert key_range.contains((8, "anything")) is True
    assert key_range.contains((10, "")) is False
    assert key_range.contains((7, "b")) is None
    assert key_range.contains((9, "A")) is None
    ranges = plan_chunks([(7, "a"), (9, "a")])
    assert chunk_of(ranges, (8, "zz")) == 1
    assert chunk_of(ranges, (7, "Z")) is None


def test_compare_keys_three_valued() -> None:
    assert compare_keys((1, b"a"), (1, b"b")) == -1
    assert compare_keys((1, b"a\x00"), (1, b"a")) == 1  # bytewise, the longer one after its prefix
    assert compare_keys((Decimal("1.50"),), (Decimal("1.5"),)) == 0
    assert compare_keys((2,), (Decimal("1.5"),)) == 1
    assert compare_keys(("a",), ("A",)) is None
    assert compare_keys((timedelta(hours=-1),), (timedelta(0),)) == -1


# --- JSON round-trips --------------------------------------------------------------------------

ROUND_TRIP_VALUES: list[Any] = [
    0,
    -(2**63),
    2**64 - 1,
    "",
    "naïve 🐍 'quoted' `x`",
    b"",
    b"\x00",
    b"\x00\x01\xff\x00",
    Decimal("-12.50"),
    Decimal("-0.000000000000000000000000000001"),
    Decimal("-0"),
    Decimal("1E+3"),
    Decimal("123456789012345678901234567890123456789012345678901234567890.123456789"),
    date(1000, 1, 1),
    date(9999, 12, 31),
    datetime(2024, 2, 29, 23, 59, 59, 999999),
    datetime(2024, 1, 1, 0, 0, 0, 1),
    datetime(2024, 1, 1, 12, 30, tzinfo=UTC),
    datetime(2024, 1, 1, 12, 30, 0, 5, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
    timedelta(hours=-838, minutes=-59, seconds=-59),
    timedelta(microseconds=1),
]


@pytest.mark.parametrize("value", ROUND_TRIP_VALUES, ids=repr)
def test_value_json_round_trip_is_exact(value: Any) -> None:
    restored = value_from_json(json.loads(json.dumps(value_to_json(value))))
    assert type(restored) is type(value)
    assert restored == value
    assert str(restored) == str(value)  # Decimal scale/exponent, datetime offset and microseconds


@given(
    st.one_of(
        st.integers(),
        st.text(),
        st.binary(),
        st.decimals(allow_nan=False, allow_infinity=False),
        st.dates(),
        st.datetimes(),
        st.datetimes(timezones=st.just(UTC)),
        st.timedeltas(),
    )
)
def test_value_json_round_trip_property(value: Any) -> None:
    restored = value_from_json(json.loads(json.dumps(value_to_json(value))))
    assert type(restored) is type(value)
    assert restored == value
    assert str(restored) == str(value)


def test_key_range_json_round_trip() -> None:
    key_range = KeyRange(
        (-5, b"\x00\x00", Decimal("-1.10"), datetime(2024, 5, 1, 1, 2, 3, 456789)),
        (-5, b"\x00\x01", Decimal("-1.10"), datetime(2024, 5, 1, 1, 2, 3, 456789)),
    )
    payload = key_range.to_json()
    assert json.loads(json.dumps(payload)) == payload
    assert KeyRange.from_json(json.loads(json.dumps(payload))) == key_range
    assert payload["lower"][1] == {"bytes": "AAA="}
    assert payload["lower"][2] == {"decimal": "-1.10"}
    assert KeyRange.from_json(KeyRange().to_json()) == KeyRange()
    assert KeyRange().to_json() == {"lower": None, "upper": None}


def test_snapshot_chunk_json_round_trip_and_sql() -> None:
    chunks = plan_snapshot_chunks("shop", "order`items", ("order_id", "line"), [(100, 1), (200, 1)])
    assert [c.chunk_no for c in chunks] == [0, 1, 2]
    for chunk in chunks:
        payload = json.loads(json.dumps(chunk.to_json()))
        assert SnapshotChunk.from_json(payload) == chunk
    sql, params = chunks[1].select_query(["order_id", "line", "qty"])
    assert sql == (
        "SELECT `order_id`, `line`, `qty` FROM `shop`.`order``items` WHERE "
        "(`order_id` > %s OR (`order_id` = %s AND (`line` >= %s))) AND "
        "(`order_id` < %s OR (`order_id` = %s AND (`line` < %s))) ORDER BY `order_id`, `line`"
    )
    assert params == [100, 100, 1, 200, 200, 1]
    (whole,) = plan_snapshot_chunks("shop", "order`items", ("order_id", "line"), [])
    assert whole.select_query() == ("SELECT * FROM `shop`.`order``items` WHERE TRUE ORDER BY `order_id`, `line`", [])


@pytest.mark.parametrize(
    "payload",
    [
        None,
        {},
        {
            "database": "d",
            "table": "t",
            "key_columns": "id",
            "chunk_no": 0,
            "key_range": {"lower": None, "upper": None},
        },
        {
            "database": "d",
            "table": "t",
            "key_columns": ["id"],
            "chunk_no": -1,
            "key_range": {"lower": None, "upper": None},
        },
        {"database": "d", "table": "t", "key_columns": ["id"], "chunk_no": 0, "key_range": {"lower": [1]}},
        {
            "database": "d",
            "table": "t",
            "key_columns": ["id"],
            "chunk_no": 0,
            "key_range": {"lower": [1, 2], "upper": None},
        },
        {
            "database": "",
            "table": "t",
            "key_columns": ["id"],
            "chunk_no": 0,
            "key_range": {"lower": None, "upper": None},
        },
    ],
)
def test_snapshot_chunk_from_json_rejects_malformed(payload: Any) -> None:
    with pytest.raises(ConfigurationError):
        SnapshotChunk.from_json(payload)


@pytest.mark.parametrize(
    "data",
    [
        1.5,
        True,
        None,
        [1],
        {"bytes": "not base64!"},
        {"decimal": "NaN"},
        {"decimal": "x"},
        {"date": "2024-13-01"},
        {"time": "5"},
        {"nope": 1},
        {"bytes": "AA==", "decimal": "1"},
    ],
)
def test_value_from_json_rejects_garbage(data: Any) -> None:
    with pytest.raises(ConfigurationError):
        value_from_json(data)


# --- SQL fragments -----------------------------------------------------------------------------


def test_range_predicate_single_column() -> None:
    assert range_predicate(["id"], KeyRange((10,), (20,))) == ("`id` >= %s AND `id` < %s", [10, 20])
    assert range_predicate(["id"], KeyRange(None, (20,))) == ("`id` < %s", [20])
    assert range_predicate(["id"], KeyRange((10,), None)) == ("`id` >= %s", [10])


def test_range_predicate_composite() -> None:
    sql, params = range_predicate(["a", "b", "c"], KeyRange((1, b"x", 3), (4, b"y", 6)))
    assert sql == (
        "(`a` > %s OR (`a` = %s AND (`b` > %s OR (`b` = %s AND (`c` >= %s))))) AND "
        "(`a` < %s OR (`a` = %s AND (`b` < %s OR (`b` = %s AND (`c` < %s)))))"
    )
    assert params == [1, 1, b"x", b"x", 3, 4, 4, b"y", b"y", 6]
    sql, params = range_predicate(["a", "b"], KeyRange((1, 2), None))
    assert sql == "(`a` > %s OR (`a` = %s AND (`b` >= %s)))"
    assert params == [1, 1, 2]


def test_range_predicate_unbounded_and_escaping() -> None:
    assert range_predicate(["a", "b"], KeyRange()) == ("TRUE", [])
    sql, params = range_predicate(["100%", "x`y"], KeyRange((1, 2), None))
    assert sql == "(`100%%` > %s OR (`100%%` = %s AND (`x``y` >= %s)))"
    assert params == [1, 1, 2]
    assert key_order(["a", "x`y"]) == "`a`, `x``y`"


@pytest.mark.parametrize(
    "call",
    [
        lambda: range_predicate([], KeyRange()),
        lambda: range_predicate("id", KeyRange()),
        lambda: range_predicate(["a", "a"], KeyRange()),
        lambda: range_predicate(["a", "b"], KeyRange((1,), None)),
        lambda: range_predicate([""], KeyRange()),
        lambda: boundary_query("db", "t", ["id"], 0),
        lambda: boundary_query("db", "t", ["id"], True),
        lambda: boundary_query("db", "", ["id"], 10),
        lambda: boundary_query("db", "t", [], 10),
        lambda: next_boundary_query("db", "t", ["a", "b"], 10, (1,)),
        lambda: quote_identifier("a\x00b"),
    ],
)
def test_sql_builders_reject_bad_arguments(call: Any) -> None:
    with pytest.raises(ConfigurationError):
        call()


def test_boundary_query() -> None:
    assert boundary_query("my`db", "t", ["a", "b"], 1000) == (
        "SELECT `a`, `b` FROM (SELECT `a`, `b`, ROW_NUMBER() OVER (ORDER BY `a`, `b`) AS `_cdc_rn` "
        "FROM `my``db`.`t`) AS `_cdc_keys` WHERE `_cdc_rn` > 1 AND MOD(`_cdc_rn` - 1, 1000) = 0 ORDER BY `a`, `b`"
    )


def test_next_boundary_query() -> None:
    assert next_boundary_query("db", "t", ["id"], 500, None) == (
        "SELECT `id` FROM `db`.`t` WHERE TRUE ORDER BY `id` LIMIT 1 OFFSET 500",
        [],
    )
    assert next_boundary_query("db", "t", ["a", "b"], 500, (7, b"k")) == (
        "SELECT `a`, `b` FROM `db`.`t` WHERE (`a` > %s OR (`a` = %s AND (`b` >= %s))) "
        "ORDER BY `a`, `b` LIMIT 1 OFFSET 500",
        [7, 7, b"k"],
    )


# --- equal-width boundaries of a dense integer key ----------------------------------------------


def test_even_boundaries_of_a_dense_key_are_the_boundaries_the_index_would_give() -> None:
    rows = 1_000_000
    assert even_boundaries(1, rows, rows, 250_000) == ((250_001,), (500_001,), (750_001,))
    # the same from any start, and with an estimate too high (never narrower than chunk_rows)
    assert even_boundaries(-500, rows - 501, rows, 250_000) == ((249_500,), (499_500,), (749_500,))
    assert even_boundaries(1, rows, int(rows * 1.05), 250_000) == ((250_001,), (500_001,), (750_001,))
    # an estimate too low widens the ranges by as much
    assert even_boundaries(1, rows, int(rows * 0.95), 250_000) == ((263_159,), (526_317,), (789_475,))


def test_even_boundaries_widen_with_the_spread_of_the_keys() -> None:
    # every 4th key used: ranges four times as wide hold about chunk_rows rows each
    assert even_boundaries(4, 4_000_000, 1_000_000, 250_000) == ((1_000_004,), (2_000_004,), (3_000_004,))


@given(
    lowest=st.integers(-(2**63), 2**63),
    span=st.integers(1, 2**40),
    estimate=st.integers(EVEN_SPLIT_MIN_ROWS, 2**36),
    chunk_rows=st.integers(1, 2_000_000),
)
def test_even_boundaries_cover_the_keys_in_ranges_at_least_chunk_rows_wide(
    lowest: int, span: int, estimate: int, chunk_rows: int
) -> None:
    span = min(span, chunk_rows * 1_000)  # at most 1,000 chunks to check
    highest = lowest + span - 1
    boundaries = even_boundaries(lowest, highest, estimate, chunk_rows)
    if span > EVEN_SPLIT_MAX_SPREAD * estimate:
        assert boundaries is None
        return
    assert boundaries is not None
    values = [lowest, *(b[0] for b in boundaries)]
    widths = {upper - lower for lower, upper in itertools.pairwise(values)}
    assert len(widths) <= 1 and all(width >= chunk_rows for width in widths)
    assert all(lowest < b[0] <= highest for b in boundaries)
    assert highest - values[-1] < (widths.pop() if widths else span)  # the last range is not wider than the others
    ranges = plan_chunks(list(boundaries))
    for value in (lowest, highest, *(b[0] + step for b in boundaries[:3] + boundaries[-3:] for step in (-1, 0))):
        assert sum(1 for r in ranges if r.contains((value,))) == 1


@pytest.mark.parametrize(
    ("lowest", "highest", "estimate"),
    [
        (1, 1_000_000, None),  # no statistics
        (1, 1_000_000, 0),
        (1, 400_000, 400_000),  # small enough to read the index
        (1, 10 * 600_000 + 1, 600_000),  # keys more than ten times sparser than the rows
        (5, 4, 600_000),  # no key at all
    ],
)
def test_even_boundaries_leave_the_plan_to_the_index_when_they_cannot_judge(
    lowest: int, highest: int, estimate: int | None
) -> None:
    assert even_boundaries(lowest, highest, estimate, 100_000) is None


def test_even_boundaries_of_a_span_within_one_chunk_are_none_needed() -> None:
    assert even_boundaries(1, 250_000, 600_000, 250_000) == ()
    with pytest.raises(ConfigurationError):
        even_boundaries(1, 10, 600_000, 0)
