"""The apply's key filter (a Bloom filter on the target's keys in the MERGE's ON clause): its bits,
size limits, eligible key types and SQL text. That Spark evaluates the condition to the same bits is
checked in ``tests/integration/test_apply.py``."""

from __future__ import annotations

import json
import random

import pytest

from airflow_provider_mysql_cdc.apply.plan import (
    KEY_FILTER_BITS_PER_KEY,
    KEY_FILTER_MAX_BITS,
    KEY_FILTER_MAX_KEYS,
    KEY_FILTER_MAX_ROWS,
    KEY_FILTER_MIN_BITS_PER_KEY,
    KEY_FILTER_MIN_TARGET_ROWS,
    KeyFilter,
    key_filter_applies,
    key_filter_pays_off,
    key_range_applies,
    key_range_condition,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def random_hashes(count: int, seed: int) -> set[int]:
    rng = random.Random(seed)
    hashes: set[int] = set()
    while len(hashes) < count:
        hashes.add(rng.randint(INT64_MIN, INT64_MAX))
    return hashes


@pytest.mark.parametrize("count", [1, 63, 64, 1_000, 10_000])
def test_every_hash_of_the_change_set_passes_its_filter(count: int) -> None:
    hashes = random_hashes(count, seed=count) | ({INT64_MIN, INT64_MAX, -1, 0} if count > 4 else set())
    key_filter = KeyFilter.of_hashes(hashes)
    assert key_filter is not None
    assert all(key_filter.might_contain(h) for h in hashes)
    # A power of two with at least KEY_FILTER_BITS_PER_KEY bits a key (these counts stay under the
    # largest filter), 64 bits a word.
    assert key_filter.bits & (key_filter.bits - 1) == 0
    assert key_filter.bits >= KEY_FILTER_BITS_PER_KEY * len(hashes)
    assert key_filter.bits < 2 * KEY_FILTER_BITS_PER_KEY * len(hashes) or key_filter.bits == 1024
    assert len(key_filter.words) * 64 == key_filter.bits
    # Spark reads the words as BIGINTs: signed 64-bit values, and the JSON parameter holds exactly them.
    assert all(INT64_MIN <= w <= INT64_MAX for w in key_filter.words)
    assert tuple(json.loads(key_filter.parameter())) == key_filter.words
    # As many bits set as distinct slots the hashes fall into.
    set_bits = sum(bin(w & ((1 << 64) - 1)).count("1") for w in key_filter.words)
    assert set_bits == len({h & (key_filter.bits - 1) for h in hashes})


def test_few_other_keys_pass() -> None:
    """With at least 64 bits a key, about 1 - e^(-1/64) (1.6%) of other hashes pass; at most 1 in 40 here."""
    hashes = random_hashes(10_000, seed=1)
    key_filter = KeyFilter.of_hashes(hashes)
    assert key_filter is not None
    others = random_hashes(30_000, seed=2) - hashes
    passed = sum(key_filter.might_contain(h) for h in others)
    assert 0 < passed < len(others) / 40


def test_a_change_set_too_large_for_64_bits_a_key_gets_the_largest_filter_with_at_least_16() -> None:
    """Past KEY_FILTER_MAX_BITS / 64 keys the filter stops growing; up to KEY_FILTER_MAX_KEYS keys it
    still has KEY_FILTER_MIN_BITS_PER_KEY bits a key, so at most about 6% of other hashes pass."""
    count = KEY_FILTER_MAX_BITS // KEY_FILTER_BITS_PER_KEY + 1
    key_filter = KeyFilter.of_hashes(random_hashes(count, seed=3))
    assert key_filter is not None and key_filter.bits == KEY_FILTER_MAX_BITS
    assert KEY_FILTER_MAX_BITS >= KEY_FILTER_MIN_BITS_PER_KEY * KEY_FILTER_MAX_KEYS


def test_no_filter_for_no_keys_or_too_many() -> None:
    assert KeyFilter.of_hashes(set()) is None
    assert KeyFilter.of_hashes(set(range(KEY_FILTER_MAX_KEYS + 1))) is None
    largest = KeyFilter.of_hashes(set(range(KEY_FILTER_MAX_KEYS)))
    assert largest is not None and largest.bits == KEY_FILTER_MAX_BITS
    assert KEY_FILTER_MAX_ROWS >= KEY_FILTER_MAX_KEYS


def test_condition_hashes_the_aliased_key_columns_and_reads_the_parameter() -> None:
    key_filter = KeyFilter.of_hashes({5, -7})
    assert key_filter is not None and key_filter.bits == 1024
    condition = key_filter.condition("t", ["id", "we`ird"])
    assert condition.count("xxhash64(t.`id`, t.`we``ird`)") == 2
    assert f":{KeyFilter.PARAMETER}" in condition and "& 1023" in condition and "& 63" in condition


@pytest.mark.parametrize(
    ("types", "applies"),
    [
        (["int"], True),
        (["bigint", "string", "date"], True),
        (["tinyint", "smallint", "binary", "boolean", "timestamp", "timestamp_ntz"], True),
        (["decimal(10,2)"], True),
        (["decimal(38,0)", "string"], True),
        (["double"], False),  # 0.0 = -0.0 holds, but the two hash differently
        (["int", "float"], False),
        (["array<int>"], False),
        ([""], False),  # a key column the target does not have
        ([], False),
    ],
)
def test_key_types_that_take_a_filter(types: list[str], applies: bool) -> None:
    assert key_filter_applies(types) is applies


@pytest.mark.parametrize(
    ("target_rows", "changed_rows", "pays_off"),
    [
        (1_000_000, 10_000, True),
        (100_000, 10_000, True),
        (KEY_FILTER_MIN_TARGET_ROWS - 1, 10, False),  # a small target: shuffling its keys is cheap
        (0, 0, False),  # a new table
        (1_000_000, 300_000, False),  # most of the target's keys would pass
        (10_000_000, KEY_FILTER_MAX_ROWS, True),
        (10_000_000, KEY_FILTER_MAX_ROWS + 1, False),  # too many staged rows to count their keys
    ],
)
def test_a_key_filter_pays_off_for_large_targets_and_small_change_sets(
    target_rows: int, changed_rows: int, pays_off: bool
) -> None:
    assert key_filter_pays_off(target_rows, changed_rows) is pays_off


@pytest.mark.parametrize(
    ("types", "target_rows", "applies"),
    [
        (["bigint"], KEY_FILTER_MIN_TARGET_ROWS, True),
        (["int"], 10**9, True),
        (["tinyint"], KEY_FILTER_MIN_TARGET_ROWS, True),
        (["bigint"], KEY_FILTER_MIN_TARGET_ROWS - 1, False),  # a small target: not worth the job
        (["bigint", "int"], 10**9, False),  # composite keys are not bounded
        (["string"], 10**9, False),  # only integers: exact literals
        (["decimal(20,0)"], 10**9, False),
        (["date"], 10**9, False),
        (["double"], 10**9, False),
        ([], 10**9, False),
    ],
)
def test_a_key_range_bounds_a_single_integer_key_of_a_large_target(
    types: list[str], target_rows: int, applies: bool
) -> None:
    assert key_range_applies(types, target_rows) is applies


def test_the_key_range_condition_is_an_inclusive_range_of_integer_literals() -> None:
    assert key_range_condition("t", "id", -5, 2**63 - 1) == f"t.`id` BETWEEN -5 AND {2**63 - 1}"
    assert key_range_condition("t", "we`ird", 7, 7) == "t.`we``ird` BETWEEN 7 AND 7"
