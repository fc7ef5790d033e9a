"""DDL and TRUNCATE inside a snapshot's hand-off range (chunks read off the index, and equal-width chunks).

A chunked snapshot reads each chunk at its own frontier, so a statement committed while the snapshot
runs is in the frontiers of the chunks read after it and not in those read before. The capture skips
a statement every governing chunk holds (the snapshot already reads its result), and has a table
re-built when only some chunks hold it (its rows were read partly before and partly after it). Here
the chunk boundaries are hit deterministically: the snapshot is planned, then its chunks run one by
one, and another session changes the tables *between* chunks (after the first chunk of every table)
or *before* all of them (after the plan, which fixed the chunks' key ranges); rows are written around
the change, between chunks and after the snapshot. Then windows run as the example DAG runs them (the
snapshot plan of each window takes the tables waiting for a rebuild) and every table is compared with
MySQL value by value (pyiceberg): each must end exactly equal, or stop with a named error of the
provider, never differ silently.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.exactness.harness import ExactnessPipeline, WindowStopped
from tests.mysql_servers import MySqlTestServer

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

#: 12 rows in chunks of 4: keys 1-4, 5-8, 9-12.
ROWS = 12
CHUNK_ROWS = 4
COLUMNS = "id INT PRIMARY KEY, v VARCHAR(20) NOT NULL, n INT"


@dataclass(frozen=True)
class Change:
    """A change of one table (``{t}``) by another session, and rows written after it in that session."""

    statements: Sequence[str]
    #: Rows written right after the change (keys in the first and in the last chunk).
    after: Sequence[str]
    #: Rows written after the snapshot (the first window), then in the second window.
    later: Sequence[str] = ("UPDATE {t} SET v = CONCAT(v, '*') WHERE id IN (3, 11)",)
    #: Rows written after the snapshot, before the first window (a key of the middle chunk).
    first: Sequence[str] = ("UPDATE {t} SET v = CONCAT(v, '+') WHERE id = 6",)


CHANGES = {
    "truncate": Change(
        ["TRUNCATE TABLE {t}"],
        ["INSERT INTO {t} (id, v, n) VALUES (1, 'again', 1), (11, 'again', 11)", "UPDATE {t} SET n = 0"],
        ["INSERT INTO {t} (id, v, n) VALUES (3, 'later', 3)", "UPDATE {t} SET v = 'changed' WHERE id = 11"],
    ),
    "commented_truncate": Change(
        ["/* app:reset */ TRUNCATE {t}"],
        ["INSERT INTO {t} (id, v, n) VALUES (2, 'again', 2), (12, 'again', 12)"],
        ["DELETE FROM {t} WHERE id = 12", "INSERT INTO {t} (id, v, n) VALUES (7, 'later', 7)"],
    ),
    "add_column_with_default": Change(
        ["ALTER TABLE {t} ADD COLUMN tier VARCHAR(5) NOT NULL DEFAULT 'std' AFTER id"],
        ["UPDATE {t} SET tier = 'gold' WHERE id IN (2, 10)", "INSERT INTO {t} (id, v) VALUES (20, 'new')"],
        ["UPDATE {t} SET tier = 'x' WHERE id IN (3, 11)", "INSERT INTO {t} (id, v, n) VALUES (21, 'later', 1)"],
    ),
    "drop_column": Change(
        ["ALTER TABLE {t} DROP COLUMN n"],
        ["UPDATE {t} SET v = 'after drop' WHERE id IN (2, 10)", "INSERT INTO {t} VALUES (20, 'new')"],
    ),
    "drop_and_add_the_name": Change(
        ["ALTER TABLE {t} DROP COLUMN n", "ALTER TABLE {t} ADD COLUMN n VARCHAR(8)"],
        ["UPDATE {t} SET n = 'text' WHERE id IN (2, 10)", "INSERT INTO {t} VALUES (20, 'new', 'n20')"],
    ),
    "rename_column": Change(
        ["ALTER TABLE {t} RENAME COLUMN v TO w"],
        ["UPDATE {t} SET w = 'renamed' WHERE id IN (2, 10)", "INSERT INTO {t} (id, w, n) VALUES (20, 'new', 2)"],
        ["UPDATE {t} SET w = CONCAT(w, '*') WHERE id IN (3, 11)"],
        ["UPDATE {t} SET w = CONCAT(w, '+') WHERE id = 6"],
    ),
    "retype_column": Change(
        ["ALTER TABLE {t} MODIFY n VARCHAR(12)"],
        ["UPDATE {t} SET n = CONCAT(n, 'x') WHERE id IN (2, 10)", "INSERT INTO {t} VALUES (20, 'new', 'twenty')"],
    ),
    "widen_column": Change(
        ["ALTER TABLE {t} MODIFY n BIGINT"],
        ["UPDATE {t} SET n = 5000000000 WHERE id IN (2, 10)", "INSERT INTO {t} VALUES (20, 'new', -5000000000)"],
    ),
    "primary_key_change": Change(
        ["ALTER TABLE {t} DROP PRIMARY KEY, ADD PRIMARY KEY (v, id)"],
        ["UPDATE {t} SET v = 'moved' WHERE id IN (2, 10)", "INSERT INTO {t} VALUES (2, 'second 2', 22)"],
        ["UPDATE {t} SET n = -n WHERE v = 'moved'"],
    ),
    "drop_and_create_table": Change(
        ["DROP TABLE {t}", f"CREATE TABLE {{t}} ({COLUMNS})"],
        ["INSERT INTO {t} VALUES (1, 'recreated', 1), (10, 'recreated', 10)"],
    ),
}


def _fill(statement: str, database: str, table: str) -> str:
    return statement.replace("{t}", f"`{database}`.`{table}`")


def _create(server: MySqlTestServer, database: str, tables: Sequence[str]) -> None:
    values = ", ".join(f"({i}, 'v{i}', {i * 10})" for i in range(1, ROWS + 1))
    server.execute(
        f"DROP DATABASE IF EXISTS `{database}`",
        f"CREATE DATABASE `{database}`",
        *(f"CREATE TABLE `{database}`.`{table}` ({COLUMNS})" for table in tables),
        *(f"INSERT INTO `{database}`.`{table}` VALUES {values}" for table in tables),
    )


def _change_all(server: MySqlTestServer, database: str) -> None:
    """Each table's change and the rows after it, plus rows of its first and last chunk."""
    for table, change in CHANGES.items():
        server.execute(*(_fill(s, database, table) for s in [*change.statements, *change.after]))


def _snapshot_around_changes(pipeline: ExactnessPipeline, when: str) -> None:
    """Plan the snapshot, then run its chunks with the changes ``before`` all of them or ``between`` the
    first chunk of each table and the others."""
    plan = pipeline.engine.plan(f"{pipeline.name}-snapshot")
    arguments = plan.mapped_arguments()
    chunk_counts = {table: sum(1 for c in plan.chunks if c.table == table) for table in CHANGES}
    assert set(chunk_counts.values()) == {ROWS // CHUNK_ROWS}, chunk_counts
    first = [a for a in arguments if a["chunk"]["chunk_no"] == 0]
    rest = [a for a in arguments if a["chunk"]["chunk_no"] != 0]
    if when == "before":
        _change_all(pipeline.server, pipeline.databases[0])
        first, rest = [], [*first, *rest]
    for argument in first:
        pipeline.engine.run_chunk(f"{pipeline.name}-snapshot", argument)
    if when == "between":
        _change_all(pipeline.server, pipeline.databases[0])
    for argument in rest:
        pipeline.engine.run_chunk(f"{pipeline.name}-snapshot", argument)


def _write(pipeline: ExactnessPipeline, statements: str) -> None:
    """Each table's ``first`` or ``later`` statements."""
    database = pipeline.databases[0]
    for table, change in CHANGES.items():
        pipeline.sql(*(_fill(s, database, table) for s in getattr(change, statements)))


def _run(pipeline: ExactnessPipeline, when: str) -> dict[str, str]:
    """The snapshot around the changes, then two windows with rows, then the window that re-builds what
    still waits; returns each table a window left waiting, with that window (``window n``)."""
    database = pipeline.databases[0]
    _create(pipeline.server, database, list(CHANGES))
    _snapshot_around_changes(pipeline, when)
    waited: dict[str, str] = {}
    stop = None
    try:
        _write(pipeline, "first")
        for number in range(3):
            pipeline.check_window()
            waited.update({name: f"window {pipeline.windows[-1].window_id}" for name in pipeline.rebuilding})
            if number == 0:
                _write(pipeline, "later")
    except WindowStopped as stopped:
        stop = stopped
    pipeline.finish(stop)
    return waited


@pytest.mark.parametrize("when", ["between", "before"])
def test_ddl_and_truncate_while_a_chunked_snapshot_runs_end_exact(
    mysql_server: MySqlTestServer, spark: Any, tmp_path: Path, when: str
) -> None:
    database = f"snap_ddl_{when}"
    pipeline = ExactnessPipeline(mysql_server, spark, tmp_path, database, [database], chunk_rows=CHUNK_ROWS)
    waited = _run(pipeline, when)
    if when == "between":
        # Every change is in the frontiers of a table's later chunks only: the first window re-builds
        # every table (the next window's snapshot re-reads it, and the comparisons above passed).
        assert waited == {f"{database}.{table}": "window 1" for table in CHANGES}
    else:
        # Every chunk of every table holds the change: the capture skips it, nothing is re-built.
        assert waited == {}


def test_equal_width_chunks_with_dml_and_ddl_between_them_end_exact(
    mysql_server: MySqlTestServer, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks planned as equal key widths (the size threshold lowered to 1,000 rows) hand off like chunks
    read off the index: rows changed between the first chunk and the others, on both sides of its
    boundary, and an ADD COLUMN in one table (which has that table re-built) end exactly as in MySQL."""
    monkeypatch.setattr("airflow_provider_mysql_cdc.core.chunks.EVEN_SPLIT_MIN_ROWS", 1_000)
    database = "snap_even_ddl"
    pipeline = ExactnessPipeline(mysql_server, spark, tmp_path, database, [database], chunk_rows=500)
    tables = ("dml", "ddl")
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS `{database}`",
        f"CREATE DATABASE `{database}`",
        "SET SESSION cte_max_recursion_depth = 10000",
        *(
            statement
            for table in tables
            for statement in (
                f"CREATE TABLE `{database}`.`{table}` ({COLUMNS})",
                f"INSERT INTO `{database}`.`{table}` WITH RECURSIVE k (i) AS "
                "(SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 3000) "
                "SELECT i + i * i DIV 3000, CONCAT('v', i), i FROM k",  # keys 1..6000, gaps widening
                f"ANALYZE TABLE `{database}`.`{table}`",
            )
        ),
    )
    plan = pipeline.engine.plan(f"{pipeline.name}-snapshot")
    boundaries: dict[str, list[int]] = {}
    for table in tables:
        lowers = [c.key_range.lower for c in plan.chunks if c.table == table]
        boundaries[table] = [key[0] for key in lowers[1:] if key is not None and isinstance(key[0], int)]
        widths = {upper - lower for lower, upper in itertools.pairwise(boundaries[table])}
        assert lowers[0] is None and len(boundaries[table]) == len(lowers) - 1 >= 3, lowers
        assert len(widths) == 1, lowers  # equal key widths (the index would give widening ones)
    arguments = plan.mapped_arguments()
    first = [a for a in arguments if a["chunk"]["chunk_no"] == 0]
    for argument in first:
        pipeline.engine.run_chunk(f"{pipeline.name}-snapshot", argument)
    edge = boundaries["dml"][0]
    for table in tables:
        t = f"`{database}`.`{table}`"
        mysql_server.execute(
            *([f"ALTER TABLE {t} ADD COLUMN extra INT NOT NULL DEFAULT 7"] if table == "ddl" else []),
            f"UPDATE {t} SET v = CONCAT(v, '~') WHERE id BETWEEN {edge - 20} AND {edge + 20}",
            f"DELETE FROM {t} WHERE id IN (1, {edge}, 6000)",
            f"INSERT INTO {t} (id, v, n) VALUES (6001, 'past the highest key', 0), (0, 'below the lowest', 0)",
            f"UPDATE {t} SET id = -id WHERE id = (SELECT * FROM (SELECT MIN(id) FROM {t} WHERE id > {edge}) AS m)",
        )
    for argument in [a for a in arguments if a["chunk"]["chunk_no"] != 0]:
        pipeline.engine.run_chunk(f"{pipeline.name}-snapshot", argument)
    waited: dict[str, str] = {}
    stop = None
    try:
        for number in range(3):
            pipeline.check_window()
            waited.update({name: f"window {pipeline.windows[-1].window_id}" for name in pipeline.rebuilding})
            if number == 0:
                pipeline.sql(
                    *(f"UPDATE `{database}`.`{table}` SET n = n + 1 WHERE id < {edge + 5}" for table in tables)
                )
    except WindowStopped as stopped:
        stop = stopped
    pipeline.finish(stop)
    assert waited == {f"{database}.ddl": "window 1"}
