"""The change catalogue, part 2: keys that are not ordinary values.

Every change kind on such keys: updates of other columns, key changes (one key to another, one key
changed several times in a window), deletes, inserts, and a key deleted and inserted again; within
one window and across windows. MySQL decides which key values are equal by the key's collation and
type (``'a' = 'A'`` under ``_ci``, ``'a' = 'a '`` under PAD SPACE, ``-0.0 = 0.0``); a zero or invalid
date has no calendar value at all (the target holds it as NULL + ``_cdc_invalid_values``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.exactness.harness import ExactnessPipeline
from tests.exactness.scenario import drive, fill, run_windows

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]
LOOSE_DATES = ("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",)


def test_zero_partial_and_invalid_dates_in_a_date_key(pipeline_for: NewPipeline) -> None:
    """The issue's case: ``sql_mode=''``-style keys; two distinct invalid keys at once; updates, key
    changes (valid -> invalid, invalid -> invalid, invalid -> valid) and deletes."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.dk (d DATE PRIMARY KEY, v INT)",
        "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
        "INSERT INTO {db}.dk VALUES ('2024-01-01', 1), ('0000-00-00', 2), ('2024-00-15', 3), ('2024-02-30', 4)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.dk SET v = 20 WHERE d = '0000-00-00'",
                "UPDATE {db}.dk SET d = '2024-02-00' WHERE d = '2024-00-15'",
                "INSERT INTO {db}.dk VALUES ('2023-00-00', 5)",
                "UPDATE {db}.dk SET d = '2023-06-00' WHERE d = '2024-01-01'",
            ],
            [
                "DELETE FROM {db}.dk WHERE d = '0000-00-00'",
                "UPDATE {db}.dk SET d = '2024-03-01' WHERE d = '2024-02-30'",
                "UPDATE {db}.dk SET v = 50 WHERE d = '2023-00-00'",
                "INSERT INTO {db}.dk VALUES ('0000-00-00', 6)",
            ],
        ],
        session=LOOSE_DATES,
    )


def test_zero_datetimes_in_a_composite_key(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.dtk (id INT, at DATETIME(3), v INT, PRIMARY KEY (id, at))",
        "SET SESSION sql_mode = ''",
        "INSERT INTO {db}.dtk VALUES (1, '0000-00-00 00:00:00', 1), (1, '2024-01-01 10:00:00.5', 2), "
        "(2, '2024-00-00 00:00:00', 3), (2, '0000-00-00 00:00:00', 4)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.dtk SET v = 10 WHERE id = 1 AND at = '0000-00-00 00:00:00'",
                "UPDATE {db}.dtk SET at = '2024-05-00 01:02:03.004' WHERE id = 2 AND at = '2024-00-00 00:00:00'",
                "DELETE FROM {db}.dtk WHERE id = 2 AND at = '0000-00-00 00:00:00'",
            ],
            [
                "UPDATE {db}.dtk SET at = '1999-00-00 00:00:00' WHERE id = 1 AND at = '2024-01-01 10:00:00.5'",
                "INSERT INTO {db}.dtk VALUES (3, '0000-00-00 00:00:00', 5)",
            ],
        ],
        session=("SET SESSION sql_mode = ''",),
    )


def test_case_and_accent_only_key_changes_under_a_ci_collation(pipeline_for: NewPipeline) -> None:
    """Under utf8mb4_0900_ai_ci 'abc', 'ABC' and 'Abc' are one key, as are 'resume' and 'résumé'."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.ci (k VARCHAR(20) PRIMARY KEY, v INT)",
        "INSERT INTO {db}.ci VALUES ('abc', 1), ('resume', 2), ('keep', 3), ('gone', 4)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.ci SET k = 'ABC' WHERE k = 'abc'",
                "UPDATE {db}.ci SET k = 'résumé' WHERE k = 'resume'",
                "UPDATE {db}.ci SET v = 30 WHERE k = 'KEEP'",
                "DELETE FROM {db}.ci WHERE k = 'GONE'",
                "INSERT INTO {db}.ci VALUES ('Gone', 40)",
            ],
            [
                "UPDATE {db}.ci SET k = 'abc' WHERE k = 'abc'",
                "UPDATE {db}.ci SET k = 'Abc' WHERE k = 'ABC'",
                "UPDATE {db}.ci SET v = 10 WHERE k = 'aBC'",
                "UPDATE {db}.ci SET k = 'RESUME' WHERE k = 'resume'",
                "DELETE FROM {db}.ci WHERE k = 'gone'",
            ],
        ],
    )


def test_trailing_spaces_in_a_key_under_a_pad_space_collation(pipeline_for: NewPipeline) -> None:
    """utf8mb4_general_ci pads with spaces: 'a' and 'a  ' are one key; VARCHAR keeps the spaces."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.pad (k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
        "INSERT INTO {db}.pad VALUES ('a', 1), ('b ', 2), ('c', 3)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.pad SET k = 'a  ' WHERE k = 'a'",
                "UPDATE {db}.pad SET v = 20 WHERE k = 'b'",
                "DELETE FROM {db}.pad WHERE k = 'c   '",
                "INSERT INTO {db}.pad VALUES ('c ', 30)",
            ],
            ["UPDATE {db}.pad SET k = 'b' WHERE k = 'b '", "UPDATE {db}.pad SET v = 10 WHERE k = 'a'"],
        ],
    )


def test_binary_and_varbinary_keys_with_trailing_zero_bytes(pipeline_for: NewPipeline) -> None:
    """BINARY(4) pads with 0x00 (the binlog strips them); in VARBINARY x'61' and x'6100' differ."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.bk (b BINARY(4) PRIMARY KEY, v INT)",
        "CREATE TABLE {db}.vbk (b VARBINARY(8) PRIMARY KEY, v INT)",
        "INSERT INTO {db}.bk VALUES (x'61', 1), (x'0001', 2), (x'ff00ff', 3), (x'', 4)",
        "INSERT INTO {db}.vbk VALUES (x'61', 1), (x'6100', 2), (x'610000', 3), (x'', 4), (x'00', 5)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.bk SET v = 10 WHERE b = x'61000000'",
                "UPDATE {db}.bk SET b = x'000100ab' WHERE b = x'00010000'",
                "UPDATE {db}.vbk SET b = x'61000000' WHERE b = x'6100'",
                "DELETE FROM {db}.vbk WHERE b = x'61'",
                "INSERT INTO {db}.vbk VALUES (x'61', 6)",
            ],
            [
                "DELETE FROM {db}.bk WHERE b = x'00000000'",
                "UPDATE {db}.vbk SET v = 7 WHERE b = x''",
                "UPDATE {db}.vbk SET b = x'0000' WHERE b = x'00'",
            ],
        ],
    )


def test_float_and_double_keys_with_negative_zero(pipeline_for: NewPipeline) -> None:
    """-0.0 is a stored DOUBLE value (SELECT prints -0) and equal to 0.0 as a key; FLOAT keys hold
    single-precision values (0.1 is 0.10000000149011612)."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.dbl (k DOUBLE PRIMARY KEY, v INT)",
        "CREATE TABLE {db}.flt (k FLOAT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.dbl VALUES (-0e0, 1), (0.1, 2), (1e300, 3), (-2.5e-300, 4)",
        "INSERT INTO {db}.flt VALUES (0.1, 1), (1.5, 2), (-0e0, 3), (3.4e38, 4)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.dbl SET v = 10 WHERE k = 0e0",
                "UPDATE {db}.dbl SET k = 0.30000000000000004 WHERE k = 0.1",
                "UPDATE {db}.flt SET v = 20 WHERE k = CAST(0.1 AS FLOAT)",
                "UPDATE {db}.flt SET k = 2.5 WHERE k = 1.5",
            ],
            [
                "UPDATE {db}.dbl SET k = 0e0 WHERE k = -0e0",
                "DELETE FROM {db}.dbl WHERE k = 1e300",
                "INSERT INTO {db}.dbl VALUES (-0.5, 5)",
                "DELETE FROM {db}.flt WHERE k = 0",
                "INSERT INTO {db}.flt VALUES (-0e0, 30)",
            ],
        ],
    )


def test_a_composite_key_mixing_special_values(pipeline_for: NewPipeline) -> None:
    """DATE (zero), VARCHAR under _ci, VARBINARY with trailing zeros and DOUBLE (-0.0) in one key."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.mix (d DATE, k VARCHAR(10), b VARBINARY(4), f DOUBLE, v INT, PRIMARY KEY (d, k, b, f))",
        "SET SESSION sql_mode = ''",
        "INSERT INTO {db}.mix VALUES ('0000-00-00', 'a', x'6100', -0e0, 1), ('2024-01-01', 'a', x'61', 0.5, 2), "
        "('2024-00-01', 'B', x'', 1, 3)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.mix SET k = 'A' WHERE d = '0000-00-00'",
                "UPDATE {db}.mix SET v = 20 WHERE k = 'a' AND b = x'61'",
                "UPDATE {db}.mix SET d = '0000-00-00' WHERE k = 'B'",
            ],
            ["UPDATE {db}.mix SET f = 0e0 WHERE v = 1", "DELETE FROM {db}.mix WHERE v = 20"],
        ],
        session=("SET SESSION sql_mode = ''",),
    )


def test_a_prefix_primary_key(pipeline_for: NewPipeline) -> None:
    """``PRIMARY KEY (k(3))``: MySQL compares the first three characters only."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.pfx (k VARCHAR(20), v INT, PRIMARY KEY (k(3)))",
        "INSERT INTO {db}.pfx VALUES ('abcX', 1), ('xyz', 2), ('q', 3)",
    )
    run_windows(
        pipeline,
        [
            ["UPDATE {db}.pfx SET k = 'abcZ' WHERE k = 'abcX'", "UPDATE {db}.pfx SET v = 20 WHERE k = 'xyz'"],
            ["DELETE FROM {db}.pfx WHERE k = 'abcZ'", "INSERT INTO {db}.pfx VALUES ('abcY', 4)"],
        ],
    )


def test_a_generated_invisible_primary_key(pipeline_for: NewPipeline) -> None:
    """``sql_generate_invisible_primary_key=ON``: the key is the invisible ``my_row_id``."""
    pipeline = pipeline_for(
        "SET SESSION sql_generate_invisible_primary_key = ON",
        "CREATE TABLE {db}.gipk (v INT, w VARCHAR(10))",
        "INSERT INTO {db}.gipk VALUES (1, 'a'), (1, 'a'), (2, 'b')",
    )
    run_windows(
        pipeline,
        [
            ["UPDATE {db}.gipk SET w = 'c' WHERE my_row_id = 2", "INSERT INTO {db}.gipk VALUES (1, 'a')"],
            ["DELETE FROM {db}.gipk WHERE my_row_id = 1", "UPDATE {db}.gipk SET my_row_id = 10 WHERE my_row_id = 3"],
            [  # a table created inside a window by a session with the setting: the binlog's CREATE has the key
                "SET SESSION sql_generate_invisible_primary_key = ON",
                "CREATE TABLE {db}.gipk2 (v INT)",
                "INSERT INTO {db}.gipk2 VALUES (5), (5), (6)",
                "DELETE FROM {db}.gipk2 WHERE my_row_id = 1",
                "ALTER TABLE {db}.gipk2 ADD COLUMN w INT DEFAULT 7",
            ],
            ["UPDATE {db}.gipk2 SET v = 50 WHERE my_row_id = 2"],
        ],
    )


def test_an_enum_key_whose_error_value_and_empty_label_both_read_as_empty(pipeline_for: NewPipeline) -> None:
    """``ENUM('a', '')`` as a key: an invalid value stored outside strict mode is the error value (index
    0), another row holds the label ``''`` (index 2); MySQL keeps the two keys apart, and both read as
    ``''``. The snapshot reads both rows; a window's row event of either key leaves the table waiting
    for the next snapshot, which reads both again (before: the update of one and the delete of the other
    were applied to one target row). Rows of other keys are followed."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.e (k ENUM('a', '') NOT NULL PRIMARY KEY, v INT)",
        "INSERT IGNORE INTO {db}.e VALUES ('not a label', 1)",
        "INSERT INTO {db}.e VALUES ('', 2), ('a', 3)",
    )
    database = pipeline.databases[0]
    assert pipeline.sql(f"SELECT k + 0, v FROM `{database}`.e ORDER BY 1") == [(0, 1), (1, 3), (2, 2)]

    def window(*statements: str) -> Callable[[], object]:
        return lambda: pipeline.sql(*(fill(statement, database=database) for statement in statements))

    def waiting_then(*statements: str) -> Callable[[], object]:
        def step() -> object:
            (why,) = pipeline.rebuilding.values()
            assert "both read as ''" in why and "k + 0 = 0" in why, why
            return window(*statements)()

        return step

    drive(
        pipeline,
        [
            window("UPDATE {db}.e SET v = 9 WHERE k + 0 = 2", "DELETE FROM {db}.e WHERE k + 0 = 0"),
            waiting_then("UPDATE {db}.e SET v = 4 WHERE k = 'a'"),
            window("INSERT IGNORE INTO {db}.e VALUES ('still not a label', 5)"),
        ],
    )
