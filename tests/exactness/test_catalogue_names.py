"""The change catalogue, part 6: names. A quoted MySQL identifier may hold any character but NUL: dots,
backquotes, spaces, letters beyond ASCII, reserved words. Each case runs a snapshot and windows of DML
and schema changes through tables and columns so named, and compares every table after every window;
the names the pipeline cannot tell apart from others (a database with a dot, a slash, a column with the
staging prefix) must stop the snapshot or window with ``UnsupportedNameError`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply.contract import MaintenanceSpec
from airflow_provider_mysql_cdc.apply.table_maintenance import run_maintenance
from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets
from tests.conftest import INSTANCE_PREFIX
from tests.exactness.harness import ExactnessPipeline, StopError, WindowStopped
from tests.exactness.scenario import run_windows
from tests.mysql_servers import MySqlTestServer, running_local
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]


def stopped_by_name(call: Callable[[], object], stage: str) -> StopError:
    """The one error ``call`` (the harness's snapshot or capture) stops with, checked to be ``stage``'s
    :class:`UnsupportedNameError`."""
    with pytest.raises(WindowStopped) as stopped:
        call()
    ((error),) = stopped.value.errors
    assert (error.stage, error.error_class) == (stage, "UnsupportedNameError"), error
    return error


def test_columns_named_with_dots_backquotes_spaces_letters_and_reserved_words(pipeline_for: NewPipeline) -> None:
    """A composite key of such columns; updates, a key update, deletes; then a column added, one renamed
    to a name with a dot and a backquote, one dropped, and rows written after each."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.names (`k``.id` INT, `Ключ` VARCHAR(8), `a.b` INT, `c``d` VARCHAR(10), `e f` JSON, "
        "`Ünï` DATE, `select` DECIMAL(10, 2), `MixedCase` TEXT, PRIMARY KEY (`k``.id`, `Ключ`))",
        "INSERT INTO {db}.names VALUES (1, 'один', 1, 'one', '{\"n\": 1}', '2020-01-01', 1.50, 'First'), "
        "(2, 'два', 2, 'two', NULL, NULL, NULL, NULL), (3, 'три', 3, 'three', '[3]', '2023-03-03', -3.25, 'x')",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.names SET `a.b` = 10, `c``d` = 'uno' WHERE `k``.id` = 1",
                "UPDATE {db}.names SET `k``.id` = 30 WHERE `k``.id` = 3",
                "INSERT INTO {db}.names VALUES (4, 'четыре', 4, 'four', '{}', '2024-04-04', 4.00, 'Four')",
                "DELETE FROM {db}.names WHERE `Ключ` = 'два'",
            ],
            [
                "ALTER TABLE {db}.names ADD COLUMN `new.col` VARCHAR(5) NOT NULL DEFAULT 'std'",
                "UPDATE {db}.names SET `new.col` = 'set', `select` = `select` + 1 WHERE `k``.id` = 1",
                "ALTER TABLE {db}.names RENAME COLUMN `a.b` TO `a``b.c`",
                "UPDATE {db}.names SET `a``b.c` = `a``b.c` * 10",
                "INSERT INTO {db}.names (`k``.id`, `Ключ`, `a``b.c`) VALUES (5, 'пять', 5)",
            ],
            [
                "ALTER TABLE {db}.names DROP COLUMN `e f`",
                "UPDATE {db}.names SET `MixedCase` = 'changed' WHERE `k``.id` = 4",
                "DELETE FROM {db}.names WHERE `k``.id` = 30",
            ],
        ],
    )
    assert_verified_equal(pipeline)


def assert_verified_equal(pipeline: ExactnessPipeline) -> None:
    """The verification (a snapshot and a window of its own, compared in Spark) finds every table of
    the pipeline's database equal to MySQL."""
    request = VerifyRequest(pipeline=pipeline.name, tables=(f"{pipeline.databases[0]}.*",), catalog=CATALOG)
    report = verify_targets(pipeline.spark, pipeline.server.cdc, request)
    assert report.tables and all(t.describe().endswith(": equal") for t in report.tables), [
        t.describe() for t in report.tables
    ]


def test_a_table_without_a_key_whose_columns_have_such_names(pipeline_for: NewPipeline) -> None:
    """Identical rows come and go one copy at a time (the multiset apply names every column too)."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.bag (`x.y` INT, `z``w` VARCHAR(10), `a b` DOUBLE, ` lead` INT DEFAULT 0)",
        "INSERT INTO {db}.bag VALUES (1, 'p', 0.5, 1), (1, 'p', 0.5, 1), (1, 'p', 0.5, 1), (2, NULL, NULL, NULL)",
    )
    run_windows(
        pipeline,
        [
            [
                "DELETE FROM {db}.bag WHERE `x.y` = 1 LIMIT 1",
                "UPDATE {db}.bag SET `z``w` = 'q' WHERE `x.y` = 1 LIMIT 1",
                "INSERT INTO {db}.bag VALUES (2, NULL, NULL, NULL)",
            ],
            [
                "ALTER TABLE {db}.bag ADD COLUMN `n.ew` INT DEFAULT 7",
                "UPDATE {db}.bag SET `n.ew` = 8 WHERE `x.y` = 2 LIMIT 1",
                "DELETE FROM {db}.bag WHERE `z``w` = 'p' LIMIT 1",
            ],
        ],
    )


def test_tables_named_with_a_dot_a_backquote_a_space_and_letters(pipeline_for: NewPipeline) -> None:
    """Each such table lands in a target of its own, created in a window too."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.`t.dot` (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE {db}.`t``tick` (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE {db}.`t space` (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO {db}.`t.dot` VALUES (1, 'dot')",
        "INSERT INTO {db}.`t``tick` VALUES (1, 'tick')",
        "INSERT INTO {db}.`t space` VALUES (1, 'space')",
    )
    run_windows(
        pipeline,
        [
            [
                "INSERT INTO {db}.`t.dot` VALUES (2, 'dot2')",
                "UPDATE {db}.`t``tick` SET v = 'tock' WHERE id = 1",
                "DELETE FROM {db}.`t space` WHERE id = 1",
                "CREATE TABLE {db}.`Таблица.2` (id INT PRIMARY KEY, v VARCHAR(10))",
                "INSERT INTO {db}.`Таблица.2` VALUES (1, 'new')",
            ],
            ["UPDATE {db}.`Таблица.2` SET v = 'newer'", "DELETE FROM {db}.`t.dot` WHERE id = 1"],
        ],
    )
    assert_verified_equal(pipeline)
    # The table maintenance finds each of them as the pipeline's (a table with a dot was skipped as
    # unreadable) and compacts it; the tables still equal MySQL.
    report = run_maintenance(pipeline.spark, MaintenanceSpec(pipeline.name))
    database = pipeline.databases[0]
    expected = {f"{database}.`t.dot`", f"{database}.`t``tick`", f"{database}.t space", f"{database}.`Таблица.2`"}
    failures = "\n".join(f"{name}: {table.error}" for name, table in report.tables.items() if table.error)
    statuses = {name: table.status for name, table in report.tables.items()}
    assert statuses == dict.fromkeys(expected, "maintained"), failures
    assert [c.describe() for c in pipeline.compare() if not c.equal] == []


def test_a_database_named_with_a_dot_stops_the_snapshot_and_the_capture_by_name(
    pipeline_for: NewPipeline, mysql_server: MySqlTestServer
) -> None:
    """The pipeline names a table ``database.table``: a table ``c`` of database ``a.b`` would be taken for
    the table ``b.c`` of database ``a``. The snapshot that finds one, and a window that meets one created
    later, stop with :class:`UnsupportedNameError`; the other tables' windows go on once it is left out."""
    pipeline = pipeline_for("CREATE TABLE {db}.t (id INT PRIMARY KEY)", "INSERT INTO {db}.t VALUES (1)")
    database = pipeline.databases[0]
    dotted = f"{database}.sub"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS `{dotted}`",
        f"CREATE DATABASE `{dotted}`",
        f"CREATE TABLE `{dotted}`.t (id INT PRIMARY KEY)",
    )
    try:
        error = stopped_by_name(pipeline.snapshot, "snapshot")
        assert f"`{dotted}`.`t` is selected" in error.message and "exclude_tables=" in error.message

        mysql_server.execute(f"DROP DATABASE `{dotted}`")
        pipeline.snapshot()
        mysql_server.execute(
            f"CREATE DATABASE `{dotted}`",
            f"CREATE TABLE `{dotted}`.t (id INT PRIMARY KEY)",
            f"INSERT INTO `{dotted}`.t VALUES (2)",
            f"INSERT INTO `{database}`.t VALUES (3)",
        )
        error = stopped_by_name(pipeline.capture_next, "capture")
        assert not list((pipeline.warehouse / database).glob("sub*")), "nothing of the dotted database lands"
    finally:
        mysql_server.execute(f"DROP DATABASE IF EXISTS `{dotted}`")


def test_a_column_named_with_the_staging_prefix_stops_the_snapshot_and_the_capture_by_name(
    pipeline_for: NewPipeline, mysql_server: MySqlTestServer
) -> None:
    """A column whose name starts with ``_cdc_`` or ``__cdc_`` (in any case) would be taken for one of the
    columns the provider stages beside each row (a MINIMAL image's ``_cdc_note`` was applied as NULL).
    The snapshot that meets one stops with :class:`UnsupportedNameError` naming it, and so does a window
    in which one is added."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.mimic (id INT PRIMARY KEY, `_CDC_Note` TEXT)", "INSERT INTO {db}.mimic VALUES (1, 'a')"
    )
    database = pipeline.databases[0]
    error = stopped_by_name(pipeline.snapshot, "snapshot")
    assert f"{database}.mimic: the column name(s) ['_CDC_Note']" in error.message, error.message
    assert f"exclude_tables=['{database}.mimic']" in error.message, error.message

    mysql_server.execute(f"ALTER TABLE `{database}`.mimic RENAME COLUMN `_CDC_Note` TO note")
    pipeline.snapshot()
    mysql_server.execute(
        f"ALTER TABLE `{database}`.mimic ADD COLUMN `__cdc_x` INT", f"INSERT INTO `{database}`.mimic VALUES (2, 'b', 2)"
    )
    error = stopped_by_name(pipeline.capture_next, "capture")
    assert "['__cdc_x']" in error.message, error.message


def test_a_column_named_like_an_iceberg_metadata_column_stops_the_snapshot_and_the_capture_by_name(
    pipeline_for: NewPipeline, mysql_server: MySqlTestServer
) -> None:
    """Every MERGE and DELETE into a target with a column ``_file`` or ``_pos`` (in any case) failed in
    Spark's analyser ("Row ID attributes cannot be nullable"), and ``_spec_id`` or ``_partition`` too:
    the table could never be applied.
    The snapshot that meets one stops with :class:`UnsupportedNameError` naming it, and so does a window
    in which one is added."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.files (id INT PRIMARY KEY, `_File` VARCHAR(10), `_pos` INT)",
        "INSERT INTO {db}.files VALUES (1, 'a', 1)",
    )
    database = pipeline.databases[0]
    error = stopped_by_name(pipeline.snapshot, "snapshot")
    assert f"{database}.files: the column name(s) ['_File', '_pos'] are names Iceberg" in error.message, error.message
    assert f"exclude_tables=['{database}.files']" in error.message, error.message

    mysql_server.execute(
        f"ALTER TABLE `{database}`.files RENAME COLUMN `_File` TO file_name, RENAME COLUMN `_pos` TO pos"
    )
    pipeline.snapshot()
    mysql_server.execute(
        f"ALTER TABLE `{database}`.files ADD COLUMN `_PARTITION` INT",
        f"INSERT INTO `{database}`.files VALUES (2, 'b', 2, 0)",
    )
    error = stopped_by_name(pipeline.capture_next, "capture")
    assert "['_PARTITION'] are names Iceberg" in error.message, error.message


def test_iceberg_metadata_column_names_a_table_with_a_key_takes_and_one_without_does_not(
    pipeline_for: NewPipeline,
) -> None:
    """``_deleted``, ``_row_id`` and ``_last_updated_sequence_number`` (a soft-delete flag, say) are
    applied exactly in a table with a key; a table without a key fails in Spark with any of them
    ("Table column names conflict with names reserved for Iceberg metadata columns"), so its snapshot
    stops by name."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.soft (id INT PRIMARY KEY, `_deleted` TINYINT, `_Row_Id` INT, "
        "`_last_updated_sequence_number` INT)",
        "INSERT INTO {db}.soft VALUES (1, 0, 10, 100), (2, 0, 20, 200), (3, 1, 30, 300)",
    )
    run_windows(
        pipeline,
        [
            [
                "UPDATE {db}.soft SET `_deleted` = 1 WHERE id = 1",
                "INSERT INTO {db}.soft VALUES (4, 0, 40, 400)",
                "DELETE FROM {db}.soft WHERE id = 3",
            ],
            ["UPDATE {db}.soft SET `_Row_Id` = 21, `_last_updated_sequence_number` = 201 WHERE id = 2"],
        ],
    )
    keyless = pipeline_for(
        "CREATE TABLE {db}.flags (a INT, `_deleted` TINYINT)", "INSERT INTO {db}.flags VALUES (1, 0)", suffix="k"
    )
    error = stopped_by_name(keyless.snapshot, "snapshot")
    assert "['_deleted'] are names Iceberg" in error.message and "without a key" in error.message, error.message


def test_a_table_named_with_a_slash_stops_the_snapshot_by_name(pipeline_for: NewPipeline) -> None:
    """Staged files are named ``<database>.<table>/...``: a table ``../../00000001/t`` would write into
    another window's directory. A selected table whose name holds a slash stops with
    :class:`UnsupportedNameError`; nothing of it is staged."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.`../../x/t` (id INT PRIMARY KEY)", "INSERT INTO {db}.`../../x/t` VALUES (1)"
    )
    error = stopped_by_name(pipeline.snapshot, "snapshot")
    assert "a slash or a backslash" in error.message, error.message
    assert not [path for path in pipeline.root.rglob("*") if path.name == "x"], "nothing is staged outside"


def test_tables_whose_names_differ_only_in_case(pipeline_for: NewPipeline) -> None:
    """MySQL on Linux keeps ``Orders`` and ``orders`` apart (``lower_case_table_names=0``)."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.`Orders` (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE {db}.orders (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO {db}.`Orders` VALUES (1, 'upper'), (2, 'upper')",
        "INSERT INTO {db}.orders VALUES (1, 'lower')",
    )
    run_windows(
        pipeline,
        [["UPDATE {db}.`Orders` SET v = 'UPPER' WHERE id = 1", "INSERT INTO {db}.orders VALUES (3, 'lower3')"]],
    )


def test_a_database_named_with_a_backquote_a_space_and_letters(
    mysql_server: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    """A database name is a namespace of its own; only a dot in it is refused (see above)."""
    database = "ex names `db` ü"
    quoted = "`ex names ``db`` ü`"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {quoted}",
        f"CREATE DATABASE {quoted}",
        f"CREATE TABLE {quoted}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO {quoted}.t VALUES (1, 'a'), (2, 'b')",
    )
    try:
        pipeline = ExactnessPipeline(mysql_server, spark, tmp_path, "ex_names_db", [database])
        run_windows(
            pipeline,
            [
                [f"UPDATE {quoted}.t SET v = 'A' WHERE id = 1", f"DELETE FROM {quoted}.t WHERE id = 2"],
                [f"CREATE TABLE {quoted}.`u.v` (id INT PRIMARY KEY)", f"INSERT INTO {quoted}.`u.v` VALUES (7)"],
            ],
        )
    finally:
        mysql_server.execute(f"DROP DATABASE IF EXISTS {quoted}")


@pytest.fixture(scope="module")
def case_insensitive_mysql() -> Iterator[MySqlTestServer]:
    """A server initialized with ``lower_case_table_names=1`` (MySQL's default on Windows): it stores
    database and table names in lower case and compares them so, whatever case a statement writes."""
    with running_local(f"{INSTANCE_PREFIX}-lowercase", {"lower_case_table_names": "1"}) as server:
        yield server


def test_names_in_another_case_under_lower_case_table_names(
    case_insensitive_mysql: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    """With ``lower_case_table_names=1`` the binlog's table maps name ``shop.orders`` while a statement's
    text keeps the case it was written in (``TRUNCATE TABLE Shop.ORDERS``): DDL naming a table in any
    case (an added column, a truncate, renames, a drop, a re-creation) is followed on that table."""
    server = case_insensitive_mysql
    database = "ex_lower_case_names"
    upper = f"`{database.upper()}`"
    server.execute(
        f"DROP DATABASE IF EXISTS {upper}",
        f"CREATE DATABASE {upper}",
        f"CREATE TABLE {upper}.`Orders` (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE {upper}.`Items` (id INT PRIMARY KEY, n INT)",
        f"INSERT INTO {upper}.`ORDERS` VALUES (1, 'one'), (2, 'two')",
        f"INSERT INTO {upper}.items VALUES (1, 1), (2, 2)",
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, database, [database])
    run_windows(
        pipeline,
        [
            [
                f"ALTER TABLE {upper}.`ORDERS` ADD COLUMN note VARCHAR(10) DEFAULT 'dflt'",
                f"INSERT INTO {upper}.orders (id, v) VALUES (3, 'three')",
                f"TRUNCATE TABLE `{database}`.`iTeMs`",
                f"INSERT INTO {upper}.`Items` VALUES (3, 3)",
            ],
            [
                f"ALTER TABLE {upper}.`Orders` DROP COLUMN note",
                f"RENAME TABLE {upper}.`ITEMS` TO {upper}.`Things`",
                f"DROP TABLE {upper}.`ORDERS`",
                f"CREATE TABLE {upper}.`ORDERS` (id INT PRIMARY KEY, w INT)",
                f"INSERT INTO {upper}.`Orders` VALUES (9, 9)",
            ],
        ],
    )
