"""The change catalogue, part 5: the MERGE's target narrowing, forced on small tables.

Into a large target (100,000 rows or more, several times the change set) a MERGE carries conditions on
the target alone that the key match implies: a key filter (a Bloom filter of the staged keys' hashes)
and, for a single integer key, the staged keys' lowest and highest value. The other catalogue tests
have small targets, so they merge without either. Here both are forced on (the thresholds at zero) and
every window is compared with MySQL as everywhere else: keys at the extremes of every integer width, a
key widened by ``ALTER TABLE``, keys of the other types the filter takes (invalid dates staged as NULL,
temporal, strings under a ``_ci`` collation, binary, decimal, composite), partial row images, and a
snapshot loaded one chunk per commit (each batch bounded by its own keys). Each test also checks that
the narrowing it is about was really used.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply import plan
from airflow_provider_mysql_cdc.apply.table_applier import TableApplier
from tests.exactness.harness import ExactnessPipeline
from tests.exactness.scenario import run_windows

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]
#: ``db.table`` -> the narrowing of each of its MERGEs ("" where it had none).
Narrowings = dict[str, list[str]]

KEY_RANGE = " BETWEEN "
KEY_FILTER = "xxhash64("


@pytest.fixture
def narrowings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Narrowings]:
    """Key filter and key range for every MERGE that can take them, whatever the target's size; yields
    what each table's MERGEs were narrowed by."""
    monkeypatch.setattr(plan, "KEY_FILTER_MIN_TARGET_ROWS", 0)
    monkeypatch.setattr(plan, "KEY_FILTER_MIN_TARGET_RATIO", 0)
    seen: Narrowings = defaultdict(list)
    original = TableApplier._target_narrowing

    def recorded(self: TableApplier, *args: Any, **kwargs: Any) -> str:
        narrowing = original(self, *args, **kwargs)
        seen[self.table_name.split(".", 1)[1]].append(narrowing)
        return narrowing

    monkeypatch.setattr(TableApplier, "_target_narrowing", recorded)
    yield seen


def assert_narrowed(seen: Narrowings, tables: Sequence[str], *kinds: str) -> None:
    """Each of ``tables`` had a MERGE narrowed by each of ``kinds``, and none narrowed by anything else."""
    for table in tables:
        used = " ".join(seen.get(table, []))
        for kind in kinds:
            assert kind in used, f"{table}: no MERGE narrowed by {kind!r}: {seen.get(table)}"
        for kind in {KEY_RANGE, KEY_FILTER} - set(kinds):
            assert kind not in used, f"{table}: a MERGE narrowed by {kind!r}: {seen.get(table)}"


#: Integer key columns of every width, signed and unsigned, and their lowest and highest value.
INTEGER_KEYS = {
    "ti": ("TINYINT", -128, 127),
    "tu": ("TINYINT UNSIGNED", 0, 255),
    "si": ("SMALLINT", -32768, 32767),
    "mu": ("MEDIUMINT UNSIGNED", 0, 16777215),
    "ii": ("INT", -2147483648, 2147483647),
    "iu": ("INT UNSIGNED", 0, 4294967295),
    "bi": ("BIGINT", -9223372036854775808, 9223372036854775807),
}
#: BIGINT UNSIGNED is held as decimal(20,0): a key filter, not a key range.
UNSIGNED_BIGINT = ("bu", "BIGINT UNSIGNED", 0, 18446744073709551615)


def test_integer_keys_at_the_extremes_of_every_width(pipeline_for: NewPipeline, narrowings: Narrowings) -> None:
    """Keys at both ends of their type and around zero; updates, key changes from one end to the other
    (the range spans the whole type), a key changed twice in a window, deletes and re-inserts; then an
    INT key widened to BIGINT and keys beyond the old width."""
    tables = {**INTEGER_KEYS, UNSIGNED_BIGINT[0]: UNSIGNED_BIGINT[1:]}
    statements = []
    for table, (column_type, lowest, highest) in tables.items():
        middle = (lowest + highest) // 2
        statements += [
            f"CREATE TABLE {{db}}.{table} (k {column_type} PRIMARY KEY, v INT)",
            f"INSERT INTO {{db}}.{table} VALUES ({lowest}, 1), ({lowest + 1}, 2), ({middle}, 3), "
            f"({highest - 1}, 4), ({highest}, 5)",
        ]
    pipeline = pipeline_for(*statements)
    first, second = [], []
    for table, (_, lowest, highest) in tables.items():
        middle = (lowest + highest) // 2
        first += [
            f"UPDATE {{db}}.{table} SET v = 10 WHERE k = {lowest}",
            f"UPDATE {{db}}.{table} SET k = {middle + 1} WHERE k = {highest}",
            f"UPDATE {{db}}.{table} SET k = {highest} WHERE k = {lowest + 1}",
            f"UPDATE {{db}}.{table} SET k = {lowest + 1} WHERE k = {highest}",
            f"DELETE FROM {{db}}.{table} WHERE k = {highest - 1}",
            f"INSERT INTO {{db}}.{table} VALUES ({highest - 1}, 40)",
        ]
        second += [
            f"DELETE FROM {{db}}.{table} WHERE k = {lowest}",
            f"UPDATE {{db}}.{table} SET v = v + 100 WHERE k = {middle}",
            f"INSERT INTO {{db}}.{table} VALUES ({highest}, 50)",
        ]
    widened = [
        "ALTER TABLE {db}.ii MODIFY k BIGINT",
        "INSERT INTO {db}.ii VALUES (1099511627776, 60), (-1099511627776, 61)",
        "UPDATE {db}.ii SET k = 9223372036854775807 WHERE k = 2147483647",
        "UPDATE {db}.ii SET v = 62 WHERE k = -2147483647",
    ]
    run_windows(pipeline, [first, second, widened])
    assert_narrowed(narrowings, list(INTEGER_KEYS), KEY_RANGE, KEY_FILTER)
    assert_narrowed(narrowings, [UNSIGNED_BIGINT[0]], KEY_FILTER)


def test_keys_of_the_other_filtered_types(pipeline_for: NewPipeline, narrowings: Narrowings) -> None:
    """Keys the filter hashes as the target holds them: invalid dates (staged as NULL, so such target rows
    skip the filter), DATETIME and TIMESTAMP with fractions, strings equal under a ``_ci`` collation
    only as stored, binary with trailing zero bytes, negative decimals (one widened by ``ALTER TABLE``),
    and a composite key of several of them."""
    pipeline = pipeline_for(
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        "CREATE TABLE {db}.dk (d DATE PRIMARY KEY, v INT)",
        "INSERT INTO {db}.dk VALUES ('2024-01-01', 1), ('0000-00-00', 2), ('2024-00-15', 3), ('2024-02-30', 4)",
        "CREATE TABLE {db}.tk (at DATETIME(6) PRIMARY KEY, ts TIMESTAMP(3) NOT NULL, v INT)",
        "INSERT INTO {db}.tk VALUES ('2024-01-01 00:00:00.000001', '2024-01-01 00:00:00.001', 1), "
        "('1000-01-01 00:00:00', '1970-01-01 00:00:01', 2), "
        "('9999-12-31 23:59:59.999999', '2038-01-01 00:00:00.999', 3)",
        "CREATE TABLE {db}.ts (ts TIMESTAMP(3) PRIMARY KEY, v INT)",
        "INSERT INTO {db}.ts VALUES ('2024-03-31 01:30:00.5', 1), ('1970-01-01 00:00:01', 2), "
        "('2038-01-01 00:00:00.999', 3)",
        "CREATE TABLE {db}.sk (k VARCHAR(20) PRIMARY KEY, v INT)",
        "INSERT INTO {db}.sk VALUES ('abc', 1), ('resume', 2), ('', 3), ('zz', 4)",
        "CREATE TABLE {db}.bk (b VARBINARY(8) PRIMARY KEY, v INT)",
        "INSERT INTO {db}.bk VALUES (x'61', 1), (x'6100', 2), (x'', 3), (x'00', 4)",
        "CREATE TABLE {db}.nk (n DECIMAL(12,4) PRIMARY KEY, v INT)",
        "INSERT INTO {db}.nk VALUES (-99999999.9999, 1), (0, 2), (0.0001, 3), (12345678.5, 4)",
        "CREATE TABLE {db}.ck (id INT, k VARCHAR(10), d DATE, v INT, PRIMARY KEY (id, k, d))",
        "INSERT INTO {db}.ck VALUES (1, 'a', '2024-01-01', 1), (1, 'b', '0000-00-00', 2), (2, 'a', '2024-01-01', 3)",
    )
    windows = [
        [
            "UPDATE {db}.dk SET v = 20 WHERE d = '0000-00-00'",
            "UPDATE {db}.dk SET d = '2024-02-00' WHERE d = '2024-00-15'",
            "UPDATE {db}.dk SET d = '2023-06-01' WHERE d = '2024-01-01'",
            "UPDATE {db}.tk SET v = 10 WHERE at = '2024-01-01 00:00:00.000001'",
            "UPDATE {db}.tk SET at = '2024-01-01 00:00:00.000002' WHERE at = '1000-01-01 00:00:00'",
            "UPDATE {db}.ts SET ts = '2024-03-31 01:30:00.501' WHERE v = 1",
            "UPDATE {db}.ts SET v = 20 WHERE ts = '1970-01-01 00:00:01'",
            "UPDATE {db}.sk SET k = 'ABC' WHERE k = 'abc'",
            "UPDATE {db}.sk SET k = 'résumé' WHERE k = 'resume'",
            "UPDATE {db}.sk SET v = 30 WHERE k = 'ZZ'",
            "UPDATE {db}.bk SET b = x'610000' WHERE b = x'6100'",
            "DELETE FROM {db}.bk WHERE b = x'61'",
            "INSERT INTO {db}.bk VALUES (x'61', 5)",
            "UPDATE {db}.nk SET n = -0.0001 WHERE n = 0.0001",
            "UPDATE {db}.nk SET v = 40 WHERE n = -99999999.9999",
            "UPDATE {db}.ck SET k = 'A' WHERE id = 1 AND k = 'a'",
            "UPDATE {db}.ck SET v = 50 WHERE d = '0000-00-00'",
        ],
        [
            "DELETE FROM {db}.dk WHERE d = '0000-00-00'",
            "UPDATE {db}.dk SET v = 21 WHERE d = '2024-02-30'",
            "INSERT INTO {db}.dk VALUES ('0000-00-00', 6)",
            "DELETE FROM {db}.tk WHERE at = '9999-12-31 23:59:59.999999'",
            "INSERT INTO {db}.tk VALUES ('9999-12-31 23:59:59.999999', '2001-01-01 00:00:00', 4)",
            "DELETE FROM {db}.ts WHERE v = 3",
            "UPDATE {db}.sk SET k = 'Abc' WHERE k = 'abc'",
            "DELETE FROM {db}.sk WHERE k = ''",
            "UPDATE {db}.bk SET b = x'0000' WHERE b = x'00'",
            "ALTER TABLE {db}.nk MODIFY n DECIMAL(16,4)",
            "INSERT INTO {db}.nk VALUES (123456789012.1234, 5)",
            "UPDATE {db}.nk SET v = 41 WHERE n = 0",
            "UPDATE {db}.ck SET d = '2024-00-00' WHERE id = 2",
            "DELETE FROM {db}.ck WHERE k = 'b'",
        ],
    ]
    run_windows(pipeline, windows, session=("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",))
    assert_narrowed(narrowings, ["dk", "tk", "ts", "sk", "bk", "nk", "ck"], KEY_FILTER)


def test_partial_row_images_with_the_key_filter_and_range(pipeline_for: NewPipeline, narrowings: Narrowings) -> None:
    """``binlog_row_image=MINIMAL``: updates carry the changed columns only, so the MERGE reads the
    target's other columns too, through the same narrowed scan; and key changes, deletes and inserts."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.pm (id INT PRIMARY KEY, a VARCHAR(10), b INT, c JSON)",
        "INSERT INTO {db}.pm VALUES (-5, 'neg', 1, '{\"x\": 1}'), (1, 'one', 2, NULL), (2, 'two', 3, '[1]'), "
        "(1000, 'big', 4, '{}')",
    )
    minimal = ("SET SESSION binlog_row_image = 'MINIMAL'",)
    windows = [
        [
            "UPDATE {db}.pm SET a = 'NEG' WHERE id = -5",
            "UPDATE {db}.pm SET b = b + 10 WHERE id IN (1, 2)",
            "UPDATE {db}.pm SET id = 3 WHERE id = 2",
            "UPDATE {db}.pm SET c = JSON_SET(c, '$.y', 2) WHERE id = 1000",
            "INSERT INTO {db}.pm VALUES (7, 'seven', 7, NULL)",
        ],
        [
            "UPDATE {db}.pm SET a = NULL WHERE id = 3",
            "DELETE FROM {db}.pm WHERE id = 1",
            "UPDATE {db}.pm SET id = -6, b = 0 WHERE id = 1000",
            "UPDATE {db}.pm SET c = '[]' WHERE id = 7",
        ],
    ]
    run_windows(pipeline, windows, session=minimal)
    assert_narrowed(narrowings, ["pm"], KEY_RANGE, KEY_FILTER)


def test_a_snapshot_loaded_one_chunk_per_commit(
    pipeline_for: NewPipeline, narrowings: Narrowings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch of the load after the first MERGEs bounded by its own chunk's keys (an integer key;
    a batch is too large a part of the target for a key filter, so the bounds come from a job of their
    own) or over all keys loaded so far (a composite key); then a window that touches every chunk with
    few enough changes for a key filter, and one whose back-filled column merges over the whole target."""
    monkeypatch.setattr(plan, "KEY_FILTER_MIN_TARGET_RATIO", 4)  # as shipped: no key filter for a batch of the load
    rows = ", ".join(f"({i * 7 - 300}, 'r{i}')" for i in range(120))
    composite = ", ".join(f"({i % 5}, 'k{i}', {i})" for i in range(120))
    pipeline = pipeline_for(
        "CREATE TABLE {db}.ik (id BIGINT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {{db}}.ik VALUES {rows}",
        "CREATE TABLE {db}.ck (g INT, k VARCHAR(10), v INT, PRIMARY KEY (g, k))",
        f"INSERT INTO {{db}}.ck VALUES {composite}",
        chunk_rows=25,
        apply_settings={"chunks_per_commit": 1},
    )
    windows = [
        [
            "UPDATE {db}.ik SET v = 'w1' WHERE id % 70 = 0",
            "UPDATE {db}.ik SET id = id + 1 WHERE id IN (-300, 533)",
            "DELETE FROM {db}.ik WHERE id BETWEEN 100 AND 120",
            "INSERT INTO {db}.ik VALUES (-1000, 'low'), (5000, 'high')",
            "UPDATE {db}.ck SET v = -v WHERE k IN ('k3', 'k58', 'k119')",
            "DELETE FROM {db}.ck WHERE k IN ('k7', 'k77')",
            "INSERT INTO {db}.ck VALUES (9, 'k7', 7)",
        ],
        ["ALTER TABLE {db}.ik ADD COLUMN w INT NOT NULL DEFAULT 5 FIRST", "UPDATE {db}.ik SET w = 6 WHERE id < 0"],
    ]
    run_windows(pipeline, windows)
    assert_narrowed(narrowings, ["ik"], KEY_RANGE, KEY_FILTER)
    assert_narrowed(narrowings, ["ck"], KEY_FILTER)
    loaded = [narrowing for narrowing in narrowings["ik"] if KEY_RANGE in narrowing and KEY_FILTER not in narrowing]
    assert len(loaded) >= 3, narrowings["ik"]  # the batches of the load after the first (of four chunks here)
