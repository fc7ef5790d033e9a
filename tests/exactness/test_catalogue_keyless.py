"""The change catalogue, part 4: tables without a primary key (or unique NOT NULL key).

Such a table is a multiset of rows: an insert adds one copy, a delete takes away one copy of the
identical row, an update takes away one copy of its before image and adds its after image. Each case
runs through the snapshot and several windows and is compared with MySQL as a multiset (the
comparison counts identical rows): duplicates, NULLs, BLOB and JSON columns, FLOAT and DOUBLE
(``-0.0`` and ``0.0`` are two rows), ``UPDATE ... LIMIT 1`` on one of several identical rows,
schema changes, and a table without a key created inside a window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.exactness.conftest import database_name
from tests.exactness.harness import ExactnessPipeline, WindowStopped
from tests.exactness.scenario import run_windows
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]

KEYLESS = (
    "CREATE TABLE {db}.log (a INT, s VARCHAR(20), f FLOAT, d DOUBLE, b BLOB, j JSON)",
    "INSERT INTO {db}.log VALUES (1, 'x', 0.5, 1.25, 0x00ff, '{\"k\": 1}'), (1, 'x', 0.5, 1.25, 0x00ff, '{\"k\": 1}'), "
    "(1, 'x', 0.5, 1.25, 0x00ff, '{\"k\": 1}'), (2, NULL, NULL, NULL, NULL, NULL), (2, NULL, NULL, NULL, NULL, NULL), "
    "(3, 'y', -0e0, -0e0, '', '[]'), (3, 'y', 0e0, 0e0, '', '[]')",
)


def test_duplicates_nulls_blobs_json_and_signed_zeros(pipeline_for: NewPipeline) -> None:
    """Copies come and go one at a time, whatever the order of the changes in a window."""
    pipeline = pipeline_for(*KEYLESS)
    run_windows(
        pipeline,
        [
            [
                "DELETE FROM {db}.log WHERE a = 1 LIMIT 1",
                "UPDATE {db}.log SET s = 'z' WHERE a = 2 LIMIT 1",
                "INSERT INTO {db}.log VALUES (2, NULL, NULL, NULL, NULL, NULL)",
                "DELETE FROM {db}.log WHERE a = 3 AND d = 0 AND CAST(d AS CHAR) = '-0' LIMIT 1",
            ],
            [
                "UPDATE {db}.log SET j = JSON_SET(j, '$.k', 2) WHERE a = 1 LIMIT 1",
                "INSERT INTO {db}.log SELECT * FROM {db}.log WHERE a = 1",
                "DELETE FROM {db}.log WHERE a = 2 AND s IS NULL LIMIT 1",
                "UPDATE {db}.log SET b = REPEAT(0x01, 60000) WHERE a = 3",
            ],
            [
                "DELETE FROM {db}.log WHERE a = 1 LIMIT 2",
                "INSERT INTO {db}.log VALUES (4, 'w', 1.5, 2.5, 0x01, 'null')",
                "DELETE FROM {db}.log WHERE a = 4",
                "INSERT INTO {db}.log VALUES (4, 'w', 1.5, 2.5, 0x01, 'null'), (4, 'w', 1.5, 2.5, 0x01, 'null')",
                "UPDATE {db}.log SET a = 5 WHERE a = 4 LIMIT 1",
                "UPDATE {db}.log SET a = 4 WHERE a = 5",
            ],
        ],
    )


def test_an_update_limit_1_of_identical_rows_in_one_window_and_across_windows(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.same (v INT, w VARCHAR(5))",
        "INSERT INTO {db}.same VALUES (1, 'a'), (1, 'a'), (1, 'a'), (1, 'a')",
    )
    run_windows(
        pipeline,
        [
            ["UPDATE {db}.same SET v = 2 LIMIT 1", "UPDATE {db}.same SET v = 2 WHERE v = 1 LIMIT 1"],
            ["UPDATE {db}.same SET v = 1 WHERE v = 2 LIMIT 1", "DELETE FROM {db}.same WHERE v = 1 LIMIT 3"],
            ["INSERT INTO {db}.same VALUES (2, 'a')", "UPDATE {db}.same SET v = 1"],
        ],
    )


def test_a_table_without_a_key_created_inside_a_window(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.keyed (id INT PRIMARY KEY, v INT)", "INSERT INTO {db}.keyed VALUES (1, 1)"
    )
    run_windows(
        pipeline,
        [
            [
                "CREATE TABLE {db}.born (v INT, t TEXT)",
                "INSERT INTO {db}.born VALUES (1, 'a'), (1, 'a'), (2, NULL)",
                "DELETE FROM {db}.born WHERE v = 1 LIMIT 1",
                "UPDATE {db}.keyed SET v = 2",
            ],
            ["UPDATE {db}.born SET t = 'b' WHERE v = 2", "INSERT INTO {db}.born VALUES (1, 'a')"],
        ],
    )


def test_schema_changes_of_a_table_without_a_key(pipeline_for: NewPipeline) -> None:
    """ADD COLUMN with a default (every existing copy gets it), DROP COLUMN (copies that differed only in
    it become identical), a rename (then one of letter case only), and a TRUNCATE followed by new copies
    in one window."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.evolve (a INT, b VARCHAR(10))",
        "INSERT INTO {db}.evolve VALUES (1, 'x'), (1, 'y'), (1, 'y'), (2, 'z')",
    )
    run_windows(
        pipeline,
        [
            [
                "ALTER TABLE {db}.evolve ADD COLUMN c INT NOT NULL DEFAULT 7",
                "DELETE FROM {db}.evolve WHERE a = 1 AND b = 'y' LIMIT 1",
                "INSERT INTO {db}.evolve VALUES (2, 'z', 7)",
            ],
            [
                "ALTER TABLE {db}.evolve DROP COLUMN b",
                "DELETE FROM {db}.evolve WHERE a = 1 LIMIT 1",
                "ALTER TABLE {db}.evolve RENAME COLUMN c TO c2",
                "UPDATE {db}.evolve SET c2 = 8 WHERE a = 2 LIMIT 1",
                "ALTER TABLE {db}.evolve RENAME COLUMN c2 TO C2",
                "UPDATE {db}.evolve SET C2 = 9 WHERE a = 2 LIMIT 1",
            ],
            [
                "INSERT INTO {db}.evolve VALUES (3, 3)",
                "TRUNCATE TABLE {db}.evolve",
                "INSERT INTO {db}.evolve VALUES (4, 4), (4, 4)",
                "DELETE FROM {db}.evolve LIMIT 1",
            ],
        ],
    )


def test_key_columns_only_cut_chunks_so_changing_them_stays_exact(
    pipeline_for: NewPipeline, request: pytest.FixtureRequest
) -> None:
    """``key_columns`` of a table without a key cut its snapshot into chunks; they need not identify
    rows, and an update that changes them after the hand-off is followed exactly (it used to leave the
    old row in the target)."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.chunked (k INT NOT NULL, v INT)",
        "INSERT INTO {db}.chunked VALUES " + ", ".join(f"({n % 7}, {n % 3})" for n in range(60)),
        key_columns={f"{database_name(request.node.name)}.chunked": ["k"]},
        chunk_rows=10,
    )
    run_windows(
        pipeline,
        [
            ["UPDATE {db}.chunked SET k = k + 100 WHERE k = 3 LIMIT 2", "DELETE FROM {db}.chunked WHERE k = 5 LIMIT 1"],
            ["UPDATE {db}.chunked SET k = 3 WHERE k > 100", "INSERT INTO {db}.chunked VALUES (3, 0)"],
        ],
    )


def test_dropping_a_primary_key_rebuilds_the_table_then_follows_it_as_a_multiset(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.lost (id INT NOT NULL, v INT, PRIMARY KEY (id))",
        "INSERT INTO {db}.lost VALUES (1, 1), (2, 2)",
    )
    run_windows(
        pipeline,
        [
            ["ALTER TABLE {db}.lost DROP PRIMARY KEY", "INSERT INTO {db}.lost VALUES (1, 1)"],
            ["DELETE FROM {db}.lost WHERE id = 1 LIMIT 1", "INSERT INTO {db}.lost VALUES (2, 2), (2, 2)"],
            [
                "DELETE FROM {db}.lost WHERE id = 2 LIMIT 2",
                "ALTER TABLE {db}.lost ADD PRIMARY KEY (id)",
                "UPDATE {db}.lost SET v = 5 WHERE id = 1",
            ],
        ],
    )


def test_a_target_that_lost_a_copy_stops_its_table_alone_until_it_is_snapshotted_again(
    pipeline_for: NewPipeline, spark: Any
) -> None:
    """Someone deletes rows from a keyless target behind the pipeline's back; the next window deletes one
    of those rows in MySQL. That table stops with ``TargetDivergedError`` (table, GTID and fix named),
    nothing of the window reaches it, and the other tables of the window are applied exactly. A
    re-snapshot of that table alone brings it back."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.bag (v INT)",
        "INSERT INTO {db}.bag VALUES (1), (1), (2)",
        "CREATE TABLE {db}.other_bag (v INT)",
        "INSERT INTO {db}.other_bag VALUES (5)",
        "CREATE TABLE {db}.keyed (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.keyed VALUES (1, 1)",
    )
    pipeline.start()
    database = pipeline.databases[0]
    target = f"{CATALOG}.`{database}`.bag"
    spark.sql(f"DELETE FROM {target} WHERE v = 1")
    pipeline.sql(
        f"DELETE FROM `{database}`.bag WHERE v = 1 LIMIT 1",
        f"INSERT INTO `{database}`.bag VALUES (3)",
        f"INSERT INTO `{database}`.other_bag VALUES (5)",
        f"UPDATE `{database}`.keyed SET v = 2",
    )
    with pytest.raises(WindowStopped) as stopped:
        pipeline.run_window()
    assert stopped.value.error_classes == {"TargetDivergedError"}
    (error,) = stopped.value.errors
    gtid = pipeline.sql("SELECT @@GLOBAL.gtid_executed")[0][0].split(":")[0]
    assert f"{database}.bag" in error.message and gtid in error.message
    assert f"resnapshot=['{database}.bag']" in error.message
    pipeline.assert_exact([(database, "other_bag"), (database, "keyed")])
    assert sorted(row[0] for row in spark.sql(f"SELECT v FROM {target}").collect()) == [2]  # untouched
    pipeline.engine.snapshot(f"{pipeline.name}-again", resnapshot=[f"{database}.bag"])
    pipeline.sql(f"DELETE FROM `{database}`.bag WHERE v = 2")
    pipeline.window()
