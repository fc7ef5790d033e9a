"""The change catalogue, part 6: the forms of DML whose row events are not one row per statement row.

``REPLACE`` deletes every row a new row conflicts with (on the primary key or any unique key) before
inserting it; ``INSERT ... ON DUPLICATE KEY UPDATE`` turns into an update, possibly of the key itself;
``INSERT IGNORE`` skips rows; multi-table ``UPDATE``/``DELETE`` change several tables in one statement;
foreign keys cascade deletes, key changes and ``SET NULL`` into child tables (MySQL 9.7 logs the
cascaded rows as row events of the child, before the parent's); triggers write other tables and
rewrite ``NEW``; and one ``UPDATE`` may shift keys onto keys it frees in the same statement. Each is
compared with MySQL after the snapshot and after every window.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.capture import window_reading
from airflow_provider_mysql_cdc.core.foreign_keys import CASCADES_NOT_LOGGED_REASON
from airflow_provider_mysql_cdc.mysql.client import connection_to
from airflow_provider_mysql_cdc.mysql.introspection import run_preflight
from airflow_provider_mysql_cdc.staging import Staging
from testbed.mysql import LocalMySQL
from tests.conftest import INSTANCE_PREFIX
from tests.exactness.harness import ExactnessPipeline, WindowRecord, WindowStopped
from tests.exactness.scenario import drive, run_windows
from tests.mysql_servers import MySqlTestServer, running_local
from tests.reliability.replica import running_replica
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]


def test_replace_upserts_ignored_rows_and_multi_table_statements(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.u (id INT PRIMARY KEY, code VARCHAR(10) UNIQUE, n INT, note VARCHAR(20))",
        "INSERT INTO {db}.u VALUES (1, 'a', 1, 'one'), (2, 'b', 2, 'two'), (3, 'c', 3, 'three'), (4, 'd', 4, 'four')",
        "CREATE TABLE {db}.totals (code VARCHAR(10) PRIMARY KEY, total INT)",
        "INSERT INTO {db}.totals VALUES ('a', 0), ('b', 0), ('z', 9)",
    )
    run_windows(
        pipeline,
        [
            [
                # conflicts on the key (1) and on the unique code ('b', row 2): both rows go, one comes
                "REPLACE INTO {db}.u VALUES (1, 'b', 10, 'replaced')",
                "REPLACE INTO {db}.u VALUES (5, 'e', 5, 'new')",
                "INSERT INTO {db}.u VALUES (3, 'x', 0, 'dup') ON DUPLICATE KEY UPDATE n = n + 100, note = 'upserted'",
                "INSERT INTO {db}.u VALUES (6, 'c', 0, 'dup') ON DUPLICATE KEY UPDATE id = 30",  # the key moves
                "INSERT IGNORE INTO {db}.u VALUES (4, 'q', 0, 'ignored'), (7, 'g', 7, 'kept')",
                "UPDATE {db}.u JOIN {db}.totals ON u.code = totals.code SET totals.total = u.n, u.note = 'joined'",
                "DELETE {db}.u, {db}.totals FROM {db}.u JOIN {db}.totals ON u.code = totals.code WHERE u.n = 10",
            ],
            [
                "REPLACE INTO {db}.u SELECT id + 100, CONCAT(code, '2'), n, note FROM {db}.u WHERE id < 10",
                "INSERT INTO {db}.u (id, code, n) SELECT id, code, n FROM {db}.u WHERE id > 100 "
                "ON DUPLICATE KEY UPDATE n = VALUES(n) * 2",
                "INSERT INTO {db}.totals VALUES ('z', 1) ON DUPLICATE KEY UPDATE code = 'zz', total = total + 1",
            ],
        ],
    )


def test_cascading_foreign_keys_triggers_and_keys_shifted_in_one_statement(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.parent (id INT PRIMARY KEY, name VARCHAR(10))",
        "CREATE TABLE {db}.child (id INT PRIMARY KEY, parent_id INT, v INT, "
        "FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE ON UPDATE CASCADE)",
        "CREATE TABLE {db}.loose (id INT PRIMARY KEY, parent_id INT, "
        "FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE SET NULL ON UPDATE SET NULL)",
        "CREATE TABLE {db}.tree (id INT PRIMARY KEY, up INT, FOREIGN KEY (up) REFERENCES tree (id) ON DELETE CASCADE)",
        "CREATE TABLE {db}.audit (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(40))",
        "CREATE TABLE {db}.shift (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TRIGGER {db}.child_upper BEFORE INSERT ON {db}.child FOR EACH ROW SET NEW.v = NEW.v * 10",
        "CREATE TRIGGER {db}.parent_audit AFTER UPDATE ON {db}.parent FOR EACH ROW "
        "INSERT INTO audit (what) VALUES (CONCAT(OLD.id, '->', NEW.id))",
        "INSERT INTO {db}.parent VALUES (1, 'p1'), (2, 'p2'), (3, 'p3')",
        "INSERT INTO {db}.child VALUES (10, 1, 1), (11, 1, 2), (12, 2, 3), (13, 3, 4)",
        "INSERT INTO {db}.loose VALUES (20, 1), (21, 2)",
        "INSERT INTO {db}.tree VALUES (1, NULL), (2, 1), (3, 2), (4, 1), (5, NULL)",
        "INSERT INTO {db}.shift VALUES (1, 'a'), (2, 'b'), (3, 'c'), (5, 'e')",
    )
    run_windows(
        pipeline,
        [
            [
                "DELETE FROM {db}.parent WHERE id = 1",  # cascades to child 10, 11; loose 20 gets NULL
                "UPDATE {db}.parent SET id = 20 WHERE id = 2",  # child 12 and loose 21 follow; audited
                "INSERT INTO {db}.child VALUES (14, 20, 5)",  # the trigger stores 50
                "DELETE FROM {db}.tree WHERE id = 1",  # cascades down two levels
                "UPDATE {db}.shift SET id = id + 1 ORDER BY id DESC",  # each key onto one just freed
            ],
            [
                "UPDATE {db}.parent SET id = id + 100",
                "DELETE FROM {db}.parent WHERE id = 103",
                "UPDATE {db}.shift SET id = id * 10 WHERE id > 3 ORDER BY id DESC",
                "UPDATE {db}.shift SET id = -id",
            ],
        ],
    )


@pytest.mark.usefixtures("local_infile")
@pytest.mark.parametrize("binlog_format", ["ROW", "STATEMENT"])
def test_load_data(pipeline_for: NewPipeline, tmp_path: Path, binlog_format: str) -> None:
    """``LOAD DATA LOCAL INFILE`` (with ``REPLACE`` and ``IGNORE``) is logged as row events under ROW; under
    a session's STATEMENT format as ``Begin_load_query``/``Execute_load_query`` events carrying the file,
    which cannot be applied from the binlog: every table is then re-built from the next snapshot."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.loaded (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(8,2))",
        "INSERT INTO {db}.loaded VALUES (1, 'one', 1.00), (2, 'two', 2.00)",
    )
    database = pipeline.databases[0]
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text("3,three,3.50\n4,four,4.25\n")
    second.write_text("1,one again,10.00\n5,five,5.00\n")

    def load(path: Path, mode: str) -> None:
        admin = pipeline.server.admin
        with connection_to(admin, local_infile=True) as connection, connection.cursor() as cursor:
            cursor.execute(f"SET SESSION binlog_format = '{binlog_format}'")
            cursor.execute(
                f"LOAD DATA LOCAL INFILE '{path}' {mode} INTO TABLE `{database}`.loaded "
                "FIELDS TERMINATED BY ',' (id, name, amount)"
            )

    drive(pipeline, [partial(load, first, ""), partial(load, second, "REPLACE"), partial(load, first, "IGNORE")])


def test_partition_maintenance_that_moves_or_removes_rows(pipeline_for: NewPipeline) -> None:
    """``EXCHANGE PARTITION`` swaps rows between two tables, ``TRUNCATE``/``DROP PARTITION`` remove them and
    ``REORGANIZE``/``COALESCE`` move them between partitions, all without row events: the tables whose
    rows changed are re-built; moves inside one table change nothing."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.parted (id INT PRIMARY KEY, v VARCHAR(10)) PARTITION BY RANGE (id) ("
        "PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
        "PARTITION p2 VALUES LESS THAN (30), PARTITION p3 VALUES LESS THAN MAXVALUE)",
        "CREATE TABLE {db}.swap (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE {db}.hashed (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 4",
        "INSERT INTO {db}.parted VALUES (1, 'a'), (2, 'b'), (11, 'c'), (21, 'd'), (31, 'e'), (41, 'f')",
        "INSERT INTO {db}.swap VALUES (5, 'x'), (6, 'y')",
        "INSERT INTO {db}.hashed VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)",
    )
    run_windows(
        pipeline,
        [
            [
                "ALTER TABLE {db}.parted EXCHANGE PARTITION p0 WITH TABLE {db}.swap",
                "INSERT INTO {db}.parted VALUES (12, 'g')",
                "ALTER TABLE {db}.hashed COALESCE PARTITION 2",
                "UPDATE {db}.hashed SET v = 30 WHERE id = 3",
            ],
            [
                "ALTER TABLE {db}.parted TRUNCATE PARTITION p1",
                "ALTER TABLE {db}.parted DROP PARTITION p2",
                "ALTER TABLE {db}.parted REORGANIZE PARTITION p3 INTO "
                "(PARTITION p3a VALUES LESS THAN (40), PARTITION p3b VALUES LESS THAN MAXVALUE)",
                "INSERT INTO {db}.swap VALUES (7, 'z')",
            ],
        ],
    )


def test_a_table_whose_engine_keeps_no_rows_waits_alone_with_the_reason(
    pipeline_for: NewPipeline, mysql_server: MySqlTestServer
) -> None:
    """``ENGINE=BLACKHOLE`` logs its inserts as row events but keeps no row, so no target can equal it.
    Such a table (there before the snapshot, created in a window, or altered to it) waits alone for a
    rebuild, the reason naming the engine (the window's manifest lists it); its rows are not applied and
    the other tables stay exact."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.outbox (id INT PRIMARY KEY, payload VARCHAR(20)) ENGINE=BLACKHOLE",
        "CREATE TABLE {db}.orders (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE {db}.archive (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.outbox VALUES (1, 'event')",
        "INSERT INTO {db}.orders VALUES (1, 1)",
        "INSERT INTO {db}.archive VALUES (1, 1)",
    )
    database = pipeline.databases[0]
    staging = Staging(str(pipeline.engine.staging), pipeline.name)

    def waiting(record: WindowRecord) -> dict[str, str]:
        manifest = staging.read_window_manifest(record.window_id)
        assert manifest is not None
        return dict(manifest.rebuilds_pending)

    pipeline.snapshot()
    first = pipeline.run_window()
    assert "ENGINE=BLACKHOLE keeps no rows" in waiting(first).get(f"{database}.outbox", ""), waiting(first)
    assert "ENGINE=BLACKHOLE keeps no rows" in pipeline.rebuilding.get(f"{database}.outbox", "")  # the apply report
    pipeline.assert_exact([(database, "orders"), (database, "archive")])
    mysql_server.execute(
        f"INSERT INTO `{database}`.outbox VALUES (2, 'event 2')",
        f"INSERT INTO `{database}`.orders VALUES (2, 2)",
        f"CREATE TABLE `{database}`.log (id INT PRIMARY KEY) ENGINE=BLACKHOLE",
        f"INSERT INTO `{database}`.log VALUES (1)",
        f"ALTER TABLE `{database}`.archive ENGINE=BLACKHOLE",
    )
    second = pipeline.run_window()  # log and archive wait for a rebuild from their DDL on
    assert {f"{database}.log", f"{database}.archive"} <= set(waiting(second)), waiting(second)
    pipeline.assert_exact([(database, "orders")])
    # The rebuild's snapshot leaves them out, the engine as the reason; archive's target, left from
    # before its ALTER, stops its apply (RebuildPendingError) and the other tables go on.
    with pytest.raises(WindowStopped) as stopped:
        pipeline.run_window()
    assert [(e.stage, e.error_class, e.table) for e in stopped.value.errors] == [
        ("apply", "RebuildPendingError", f"{database}.archive")
    ]
    third = pipeline.windows[-1]
    for table in ("outbox", "log", "archive"):
        reason = waiting(third).get(f"{database}.{table}", "")  # the first reason met is kept
        assert "ENGINE=BLACKHOLE" in reason, (table, waiting(third))
    pipeline.assert_exact([(database, "orders")])
    assert not (pipeline.warehouse / database / "outbox").exists()
    assert not (pipeline.warehouse / database / "log").exists()


def test_merge_tables_and_the_tables_of_their_union_wait_alone(pipeline_for: NewPipeline) -> None:
    """A ``MERGE`` table shows the rows of the MyISAM tables of its ``UNION``: an insert into one of those
    is logged as that table's row, an insert through the MERGE table as the MERGE table's (MySQL 9.7), so
    neither target could follow. Both wait alone with the reason (the snapshot's, or the DDL's: a
    ``CREATE`` of a MERGE table, an ``ALTER ... UNION=``); a table taken out of the UNION, or whose MERGE
    table is dropped, is snapshotted again, and equals MySQL from then on."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t1 (id INT NOT NULL PRIMARY KEY, v INT) ENGINE=MyISAM",
        "CREATE TABLE {db}.t3 (id INT NOT NULL PRIMARY KEY, v INT) ENGINE=MyISAM",
        "CREATE TABLE {db}.m (id INT NOT NULL, v INT, KEY (id)) ENGINE=MERGE UNION=({db}.t1) INSERT_METHOD=LAST",
        "CREATE TABLE {db}.orders (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.t1 VALUES (1, 1)",
        "INSERT INTO {db}.t3 VALUES (1, 1)",
        "INSERT INTO {db}.orders VALUES (1, 1)",
    )
    database = pipeline.databases[0]

    def write(*statements: str) -> None:
        pipeline.sql(*(statement.replace("{db}", f"`{database}`") for statement in statements))

    pipeline.snapshot()
    pipeline.run_window()
    assert "shows the rows of the tables of its UNION" in pipeline.rebuilding.get(f"{database}.m", "")
    assert "in the UNION of the MERGE table" in pipeline.rebuilding.get(f"{database}.t1", "")
    write("INSERT INTO {db}.t1 VALUES (2, 2)", "INSERT INTO {db}.m VALUES (3, 3)", "INSERT INTO {db}.t3 VALUES (2, 2)")
    assert pipeline.sql(f"SELECT id FROM `{database}`.m ORDER BY id") == [(1,), (2,), (3,)]
    pipeline.run_window()
    assert {f"{database}.m", f"{database}.t1"} <= set(pipeline.rebuilding), pipeline.rebuilding
    pipeline.assert_exact([(database, "t3"), (database, "orders")])
    # t1 leaves the UNION, t3 joins it: t3 waits from the ALTER on, t1's next snapshot takes it
    write("ALTER TABLE {db}.m UNION=({db}.t3)", "INSERT INTO {db}.m VALUES (4, 4)", "INSERT INTO {db}.t1 VALUES (5, 5)")
    pipeline.run_window()
    assert "MERGE table's UNION changed" in pipeline.rebuilding.get(f"{database}.t3", ""), pipeline.rebuilding
    assert f"{database}.t1" not in pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact([(database, "t1"), (database, "orders")])
    # A second MERGE table over t1, created in a window: both wait. t3's target, left from before the
    # ALTER, stops its apply (RebuildPendingError: the snapshot leaves a UNION's table out); the others go on.
    write(
        "CREATE TABLE {db}.m2 (id INT NOT NULL, v INT) ENGINE=MRG_MyISAM UNION=({db}.t1)",
        "INSERT INTO {db}.t1 VALUES (6, 6)",
    )
    with pytest.raises(WindowStopped) as stopped:
        pipeline.run_window()
    assert [(e.stage, e.error_class, e.table) for e in stopped.value.errors] == [
        ("apply", "RebuildPendingError", f"{database}.t3")
    ]
    assert {f"{database}.m2", f"{database}.t1"} <= set(pipeline.rebuilding), pipeline.rebuilding
    pipeline.assert_exact([(database, "orders")])
    # Dropping both MERGE tables frees t1 and t3: the next snapshot takes them
    write("DROP TABLE {db}.m, {db}.m2", "INSERT INTO {db}.t3 VALUES (7, 7)", "INSERT INTO {db}.orders VALUES (2, 2)")
    pipeline.run_window()
    pipeline.run_window()  # the snapshot that takes t1 and t3 again
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()


@pytest.fixture(scope="module")
def restarted_mysql() -> Iterator[MySqlTestServer]:
    """A server of this module's own: it is restarted with other settings."""
    with running_local(f"{INSTANCE_PREFIX}-fk-cascades") as server:
        yield server


def _restart_with(server: MySqlTestServer, settings: dict[str, str]) -> None:
    """Stop the server (its data dir is kept) and start it again with ``settings``: the way to change a
    read-only variable such as ``innodb_native_foreign_keys``."""
    assert server.local is not None
    assert server.local.stop() is True
    LocalMySQL(server.local.name, port=server.local.port, settings=settings).start()


def test_children_of_cascading_foreign_keys_wait_alone_while_cascades_are_not_logged(
    restarted_mysql: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    """MySQL 9.7 logs the rows a foreign key's cascade changes. Restarted with
    ``innodb_native_foreign_keys=ON`` (InnoDB runs cascades, as on every MySQL before 9.6), it logs a
    parent's delete without the child rows its ``ON DELETE CASCADE`` deletes. A table with a key whose
    ``ON DELETE``/``ON UPDATE`` changes its rows (``CASCADE``, ``SET NULL``) then waits alone, the reason
    naming the setting: found when a window is captured (its target, left from before, stops its apply;
    the other tables go on), or given such a key by a window's DDL (here added and dropped again in the
    window). A ``RESTRICT`` key changes no child row and is followed. A published window read again reads
    the same. Restarted with cascades logged again, the next snapshot takes the tables and every table
    equals MySQL."""
    server = restarted_mysql
    database = "ex_fk_cascades"
    server.execute(
        f"DROP DATABASE IF EXISTS `{database}`",
        f"CREATE DATABASE `{database}`",
        f"USE `{database}`",
        "CREATE TABLE parent (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, "
        "FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE CASCADE)",
        "CREATE TABLE kept (id INT PRIMARY KEY, parent_id INT, "
        "FOREIGN KEY (parent_id) REFERENCES parent (id) ON DELETE RESTRICT ON UPDATE NO ACTION)",
        "CREATE TABLE items (id INT PRIMARY KEY, v INT)",
        "INSERT INTO parent VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
        "INSERT INTO child VALUES (10, 1), (11, 1), (20, 2), (40, 4)",
        "INSERT INTO kept VALUES (30, 3)",
        "INSERT INTO items VALUES (1, 1)",
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, database, [database])
    staging = Staging(str(pipeline.engine.staging), pipeline.name)

    def write(*statements: str) -> None:
        pipeline.sql(*(statement.replace("{db}", f"`{database}`") for statement in statements))

    def waiting(record: WindowRecord) -> dict[str, str]:
        manifest = staging.read_window_manifest(record.window_id)
        assert manifest is not None
        return dict(manifest.rebuilds_pending)

    pipeline.snapshot()
    pipeline.run_window()
    write("DELETE FROM {db}.parent WHERE id = 1")  # child 10 and 11 go: logged
    pipeline.run_window()
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()

    _restart_with(server, {"innodb_native_foreign_keys": "ON"})
    (warning,) = run_preflight(server.cdc, [f"{database}.*"]).warnings  # the preflight names the table
    assert warning.check == "foreign_key_cascades" and f"{database}.child have" in warning.problem, warning
    write("DELETE FROM {db}.parent WHERE id = 2", "INSERT INTO {db}.items VALUES (2, 2)")  # child 20 goes unlogged
    assert pipeline.sql(f"SELECT id FROM `{database}`.child ORDER BY id") == [(40,)]
    third = pipeline.run_window()
    reason = waiting(third).get(f"{database}.child", "")
    assert "found when the window was captured" in reason and "innodb_native_foreign_keys=ON" in reason, reason
    assert set(waiting(third)) == {f"{database}.child"}, waiting(third)
    pipeline.assert_exact([(database, t) for t in ("parent", "kept", "items")])

    write(
        "CREATE TABLE {db}.log (id INT PRIMARY KEY, parent_id INT REFERENCES {db}.parent (id) ON UPDATE CASCADE)",
        "INSERT INTO {db}.log VALUES (1, 3)",
        "ALTER TABLE {db}.items ADD COLUMN parent_id INT, "
        "ADD CONSTRAINT items_parent FOREIGN KEY (parent_id) REFERENCES {db}.parent (id) ON DELETE SET NULL",
        "UPDATE {db}.items SET parent_id = 4",
        "DELETE FROM {db}.child",
        "DELETE FROM {db}.parent WHERE id = 4",  # sets items.parent_id NULL: not logged
        "ALTER TABLE {db}.items DROP FOREIGN KEY items_parent",
    )
    with pytest.raises(WindowStopped) as stopped:
        pipeline.run_window()
    assert [(e.stage, e.error_class, e.table) for e in stopped.value.errors] == [
        ("apply", "RebuildPendingError", f"{database}.child")
    ]
    fourth = pipeline.windows[-1]
    assert set(waiting(fourth)) == {f"{database}.{t}" for t in ("child", "log", "items")}, waiting(fourth)
    assert "a foreign key's cascade changes its rows" in waiting(fourth)[f"{database}.log"], waiting(fourth)
    by_alter = waiting(fourth)[f"{database}.items"]
    assert "a foreign key's cascade changes its rows" in by_alter and "(by: ALTER TABLE" in by_alter, by_alter
    pipeline.assert_exact([(database, t) for t in ("parent", "kept")])
    # The fix: cascades logged again. Read again, the published windows are what they were (the waits
    # their first read found are repeated); the next snapshot takes the waiting tables, and every table
    # equals MySQL.
    _restart_with(server, {})
    published = {record.window_id: staging.read_window_manifest(record.window_id) for record in (third, fourth)}
    for number, record in enumerate(pipeline.windows, start=1):
        if record.window_id in published:
            again = pipeline.engine.capture(f"{pipeline.name}-run-{number}")  # a clear of that run's capture
            reread = staging.read_window_manifest(record.window_id)
            first = published[record.window_id]
            assert again.window_id == record.window_id and reread is not None and first is not None
            assert reread.to_json() == first.to_json()
    write("INSERT INTO {db}.parent VALUES (5, 5)", "INSERT INTO {db}.log VALUES (2, 5)")
    pipeline.run_window()
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()


def test_a_parents_delete_logged_without_its_cascades_leaves_the_children_waiting(
    restarted_mysql: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    """A server restarted with ``innodb_native_foreign_keys=ON`` and back to OFF between two captures:
    the capture sees a server that logs cascades, but the parent's delete written meanwhile lacks
    ``USE_SQL_FOREIGN_KEY_F`` (the child rows its cascade deleted are in no row event). The child waits
    from that row on, and its next snapshot takes it again; the published window reads the same."""
    server = restarted_mysql
    database = "ex_fk_flags"
    server.execute(
        f"DROP DATABASE IF EXISTS `{database}`",
        f"CREATE DATABASE `{database}`",
        f"CREATE TABLE `{database}`.parent (id INT PRIMARY KEY)",
        f"CREATE TABLE `{database}`.child (id INT PRIMARY KEY, parent_id INT, "
        f"FOREIGN KEY (parent_id) REFERENCES `{database}`.parent (id) ON DELETE CASCADE)",
        f"INSERT INTO `{database}`.parent VALUES (1), (2)",
        f"INSERT INTO `{database}`.child VALUES (10, 1), (20, 2)",
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, database, [database])
    staging = Staging(str(pipeline.engine.staging), pipeline.name)
    pipeline.snapshot()
    pipeline.run_window()
    _restart_with(server, {"innodb_native_foreign_keys": "ON"})
    pipeline.sql(f"DELETE FROM `{database}`.parent WHERE id = 1")  # child 10 goes unlogged
    _restart_with(server, {})
    assert pipeline.sql(f"SELECT id FROM `{database}`.child") == [(20,)]
    second = pipeline.run_window()
    manifest = staging.read_window_manifest(second.window_id)
    assert manifest is not None
    reason = dict(manifest.rebuilds_pending).get(f"{database}.child", "")
    assert (
        CASCADES_NOT_LOGGED_REASON in reason
        and f"({database}.parent; the transaction originated on MySQL 9.7.4" in reason
    )
    pipeline.assert_exact([(database, "parent")])
    again = pipeline.engine.capture(f"{pipeline.name}-run-{len(pipeline.windows)}")  # a clear of the capture
    reread = staging.read_window_manifest(second.window_id)
    assert again.window_id == second.window_id and reread is not None and reread.to_json() == manifest.to_json()
    pipeline.run_window()  # its snapshot takes child again
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()


def test_a_replica_of_a_source_running_cascades_in_innodb_leaves_the_children_waiting(
    spark: Any, tmp_path: Path
) -> None:
    """A replica's binlog holds what its source logged. A 9.7 replica with the default settings (which
    logs cascades itself) of a source running cascades in InnoDB (here a 9.7 with
    ``innodb_native_foreign_keys=ON``; any MySQL before 9.6 alike) deletes the child rows when it applies
    the parent's delete, and logs only the parent's row, without ``USE_SQL_FOREIGN_KEY_F``. Captured from
    the replica, the child waits from that row on and its next snapshot takes it again; the other tables
    stay exact; the published window, read again, is the same."""
    database = "ex_replica_cascades"
    with running_local(f"{INSTANCE_PREFIX}-innodb-source", {"innodb_native_foreign_keys": "ON"}) as source:
        source.execute(
            f"CREATE DATABASE `{database}`",
            f"CREATE TABLE `{database}`.parent (id INT PRIMARY KEY)",
            f"CREATE TABLE `{database}`.child (id INT PRIMARY KEY, parent_id INT, "
            f"FOREIGN KEY (parent_id) REFERENCES `{database}`.parent (id) ON DELETE CASCADE)",
            f"CREATE TABLE `{database}`.other (id INT PRIMARY KEY)",
            f"INSERT INTO `{database}`.parent VALUES (1), (2)",
            f"INSERT INTO `{database}`.child VALUES (10, 1), (11, 1), (20, 2)",
        )
        with running_replica(source, f"{INSTANCE_PREFIX}-modern-replica") as replica:
            replica.catch_up()
            pipeline = ExactnessPipeline(replica.server, spark, tmp_path, database, [database])
            staging = Staging(str(pipeline.engine.staging), pipeline.name)
            pipeline.snapshot()
            pipeline.run_window()
            assert not pipeline.rebuilding, pipeline.rebuilding  # the replica logs cascades of its own
            source.execute(
                f"DELETE FROM `{database}`.parent WHERE id = 1", f"INSERT INTO `{database}`.other VALUES (1)"
            )
            replica.catch_up()
            assert replica.server.execute(f"SELECT id FROM `{database}`.child") == [(20,)]
            second = pipeline.run_window()
            reason = pipeline.rebuilding.get(f"{database}.child", "")
            assert CASCADES_NOT_LOGGED_REASON in reason and "originated on MySQL 9.7.4" in reason, reason
            pipeline.assert_exact([(database, "parent"), (database, "other")])
            manifest = staging.read_window_manifest(second.window_id)
            again = pipeline.engine.capture(f"{pipeline.name}-run-{len(pipeline.windows)}")  # a clear of the capture
            reread = staging.read_window_manifest(second.window_id)
            assert again.window_id == second.window_id and manifest is not None and reread is not None
            assert reread.to_json() == manifest.to_json()
            pipeline.run_window()  # its snapshot takes child again
            assert not pipeline.rebuilding, pipeline.rebuilding
            pipeline.assert_exact()


def _xa(xid: str, *statements: str, end: str) -> list[str]:
    """One XA transaction of ``statements`` ending in ``end`` (``XA COMMIT '<xid>' ONE PHASE``, or an
    ``XA PREPARE`` that leaves it prepared, followed by what the caller gives)."""
    return [f"XA START '{xid}'", *statements, f"XA END '{xid}'", end.format(xid=xid)]


def _prepare(xid: str, *statements: str) -> list[str]:
    return _xa(xid, *statements, end="XA PREPARE '{xid}'")


def _while_committing_after(seconds: float, pipeline: ExactnessPipeline, xid: str, step: Callable[[], Any]) -> Any:
    """Run ``step`` while ``XA COMMIT '<xid>'`` runs ``seconds`` after its start; assert it waited for it."""
    commit = threading.Timer(seconds, pipeline.sql, [f"XA COMMIT '{xid}'"])
    started = time.monotonic()
    commit.start()
    try:
        result = step()
        waited = time.monotonic() - started
    finally:
        commit.join()
    assert waited >= seconds, waited  # it returned only after the commit
    return result


@contextlib.contextmanager
def _busy(pipeline: ExactnessPipeline, table: str) -> Iterator[None]:
    """Inside the block, an insert into ``table`` every 0.2 s: the binlog is never idle."""
    stop = threading.Event()

    def write() -> None:
        for key in itertools.count(100):
            if stop.wait(0.2):
                return
            pipeline.sql(f"INSERT INTO {table} VALUES ({key})")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join()


def _assert_read_again_the_same(pipeline: ExactnessPipeline, window_ids: Sequence[int]) -> None:
    """A clear of the captures of ``window_ids`` reads each published window the same."""
    staging = Staging(str(pipeline.engine.staging), pipeline.name)
    for number, record in enumerate(pipeline.windows, start=1):
        if record.window_id in window_ids:
            first = staging.read_window_manifest(record.window_id)
            again = pipeline.engine.capture(f"{pipeline.name}-run-{number}")
            reread = staging.read_window_manifest(record.window_id)
            assert again.window_id == record.window_id and first is not None and reread is not None
            assert reread.to_json() == first.to_json()


def test_xa_transactions_count_from_their_commit(pipeline_for: NewPipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """``XA COMMIT ... ONE PHASE`` is logged as one transaction; a two-phase XA transaction's rows are
    logged at its ``XA PREPARE`` and count only once a later transaction (the single statement
    ``XA COMMIT``) commits them. Committed in the same window: applied like any other. Rolled back after
    its rows were staged: the tables it wrote wait for a fresh snapshot. Prepared when the capture
    starts: the window reads on to its commit; still prepared a while after the window's end (the server
    idle, or busy): the capture stops by name (transient) and publishes nothing. The published windows
    read again the same."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE {db}.u (id INT PRIMARY KEY)",
        "INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')",
    )
    database = pipeline.databases[0]
    t, u = f"`{database}`.t", f"`{database}`.u"
    pipeline.snapshot()
    pipeline.run_window()
    pipeline.sql(
        *_xa(
            "x1", f"INSERT INTO {t} VALUES (3, 'c')", f"DELETE FROM {t} WHERE id = 1", end="XA COMMIT '{xid}' ONE PHASE"
        ),
        *_prepare("c1", f"INSERT INTO {t} VALUES (4, 'd')", f"UPDATE {t} SET v = 'B' WHERE id = 2"),
        f"INSERT INTO {u} VALUES (1)",  # another transaction between the prepare and the commit
        "XA COMMIT 'c1'",
        *_prepare(
            "r1", f"INSERT INTO {t} VALUES (5, 'e')", f"DELETE FROM {t} WHERE id = 3", f"INSERT INTO {u} VALUES (2)"
        ),
        f"INSERT INTO {t} VALUES (6, 'f')",
        "XA ROLLBACK 'r1'",
    )
    rolled_back = pipeline.run_window()
    assert set(pipeline.rebuilding) == {f"{database}.t", f"{database}.u"}, pipeline.rebuilding
    assert all("XA ROLLBACK of X'7231',X'',1" in why for why in pipeline.rebuilding.values()), pipeline.rebuilding
    pipeline.run_window()  # its snapshot takes both tables again
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()

    # Prepared before the capture starts, committed while it reads: the window reads on to the commit.
    pipeline.sql(*_prepare("c2", f"INSERT INTO {t} VALUES (7, 'g')"), f"INSERT INTO {u} VALUES (3)")
    pipeline.snapshot()
    extended = _while_committing_after(2.0, pipeline, "c2", lambda: pipeline.apply_captured(pipeline.capture_next()))
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()

    # Still prepared after the window's end, on an idle server and on a busy one: a transient stop, each
    # time after the time it waits for a missing transaction, and nothing published.
    monkeypatch.setattr(window_reading, "MISSING_TRANSACTIONS_TIMEOUT_SECONDS", 2.0)
    pipeline.sql(*_prepare("c3", f"UPDATE {t} SET v = 'G' WHERE id = 7"), f"DELETE FROM {u} WHERE id = 3")
    for busy in (False, True):
        with _busy(pipeline, u) if busy else contextlib.nullcontext(), pytest.raises(WindowStopped) as stopped:
            pipeline.run_window()
        (error,) = stopped.value.errors
        assert (error.stage, error.error_class) == ("capture", "WindowIncompleteError"), error
        assert "XA transaction X'6333',X'',1 (prepared by " in error.message and "XA RECOVER" in error.message, error
        assert pipeline.windows[-1] == extended
    pipeline.sql("XA COMMIT 'c3'")
    pipeline.run_window()
    pipeline.assert_exact()
    _assert_read_again_the_same(pipeline, (rolled_back.window_id, extended.window_id))


def test_xa_transactions_prepared_before_a_pipeline_starts(
    pipeline_for: NewPipeline, spark: Any, tmp_path: Path
) -> None:
    """An XA transaction prepared before a pipeline's first frontier and committed after it: the window
    reads its commit, not its rows. A snapshot chunk's ``LOCK TABLES ... READ`` waits for the prepared
    transaction's locks, so the snapshot of a table it wrote holds the commit and the rows, and the
    pipeline goes on exact. A pipeline that captures without a snapshot has its rows nowhere: the capture
    stops by name and publishes nothing."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY)",
        "CREATE TABLE {db}.u (id INT PRIMARY KEY)",
        "INSERT INTO {db}.t VALUES (1)",
        "INSERT INTO {db}.u VALUES (1)",
    )
    database = pipeline.databases[0]
    t = f"`{database}`.t"
    pipeline.sql(*_prepare("p1", f"INSERT INTO {t} VALUES (2)"))
    # The plan registers the pipeline at a frontier holding the prepare, not the commit; the chunk of t
    # waits for the commit.
    _while_committing_after(3.0, pipeline, "p1", pipeline.snapshot)
    pipeline.run_window()  # reads the commit of a transaction prepared before its lower bound
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact()

    capture_only = ExactnessPipeline(pipeline.server, spark, tmp_path, f"{database}_capture", [database])
    pipeline.sql(*_prepare("p2", f"INSERT INTO {t} VALUES (3)"))
    first = capture_only.apply_captured(capture_only.capture_next())  # registered: the prepare, not the commit
    pipeline.sql("XA COMMIT 'p2'")
    with pytest.raises(WindowStopped) as stopped:
        capture_only.capture_next()
    (error,) = stopped.value.errors
    assert (error.stage, error.error_class) == ("capture", "BinlogStreamError"), error
    assert "commits XA transaction X'7032',X'',1, prepared before this pipeline's first frontier" in error.message
    assert "Start a new pipeline" in error.message, error.message
    assert (
        Staging(str(capture_only.engine.staging), capture_only.name).read_window_manifest(first.window_id + 1) is None
    )


def test_an_anonymous_transaction_stops_every_capture_until_a_new_pipeline(
    restarted_mysql: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    """``gtid_mode`` stepped down to ``ON_PERMISSIVE`` after the preflight lets a session write a
    transaction without a GTID (``SET gtid_next = 'ANONYMOUS'``). MySQL refuses to send it to a reader
    asking by GTID set, and no frontier can place it: each capture stops by name, with where it is and
    what to do, and publishes nothing. Once ``gtid_mode`` is ``ON`` again and the binlog flushed, a new
    pipeline starts past it and equals MySQL."""
    server = restarted_mysql
    database = "ex_anonymous"
    server.execute(
        f"DROP DATABASE IF EXISTS `{database}`",
        f"CREATE DATABASE `{database}`",
        f"CREATE TABLE `{database}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{database}`.t VALUES (1, 1)",
    )
    pipeline = ExactnessPipeline(server, spark, tmp_path, database, [database])
    pipeline.snapshot()
    pipeline.run_window()
    published = pipeline.windows[-1]
    try:
        server.execute("SET GLOBAL gtid_mode = ON_PERMISSIVE")
        pipeline.sql(
            f"INSERT INTO `{database}`.t VALUES (2, 2)",
            "SET SESSION gtid_next = 'ANONYMOUS'",
            f"UPDATE `{database}`.t SET v = 10 WHERE id = 1",
            "SET SESSION gtid_next = 'AUTOMATIC'",
            f"INSERT INTO `{database}`.t VALUES (3, 3)",
        )
    finally:
        server.execute("SET GLOBAL gtid_mode = ON")
    assert pipeline.sql(f"SELECT id, v FROM `{database}`.t ORDER BY id") == [(1, 10), (2, 2), (3, 3)]
    for _ in range(2):  # the same stop each time: nothing is skipped
        with pytest.raises(WindowStopped) as stopped:
            pipeline.run_window()
        (error,) = stopped.value.errors
        assert (error.stage, error.error_class) == ("capture", "BinlogStreamError"), error
        assert error.message.startswith(
            f"pipeline {database!r} window 2: the binlog holds a transaction without a GTID"
        )
        assert " in binlog.0000" in error.message and " at position " in error.message, error.message
        assert "SET PERSIST gtid_mode = ON" in error.message and "FLUSH BINARY LOGS" in error.message, error.message
        assert pipeline.windows[-1] == published
    server.execute("FLUSH BINARY LOGS")
    spark.sql(f"DROP TABLE {CATALOG}.{database}.t")  # or give the new pipeline targets of its own
    fresh = ExactnessPipeline(server, spark, tmp_path, f"{database}_again", [database])
    fresh.snapshot()
    fresh.run_window()
    fresh.sql(f"DELETE FROM `{database}`.t WHERE id = 2", f"INSERT INTO `{database}`.t VALUES (4, 4)")
    fresh.run_window()
    fresh.assert_exact()
