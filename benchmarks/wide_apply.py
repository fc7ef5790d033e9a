"""What partial row images cost the apply of a wide table: the same changes logged with full images and
with minimal images and partial JSON, each MERGEd into its own Iceberg table.

What it measures, in one run, with one SparkSession for both tables:

1. **Load** (not timed). Two MySQL tables of the same schema: ``bench_wide.full_images`` and
   ``bench_wide.minimal_images``, a BIGINT key and ``--columns`` columns (default 120) that cycle
   through INT, VARCHAR(40), DECIMAL(12,2), DATETIME(6) and DOUBLE, plus two JSON documents, with
   ``--rows`` rows each (ids 1..N, values computed by the server, no binlog).
2. **Snapshot and warm-up** (not timed). One pipeline per table (its own SQLite ``FrontierStore``,
   staging and the Hadoop warehouse in a temporary directory): the snapshot, then one warm-up round
   (the changes below, its capture and apply), so the JVM and Spark's code paths are warm.
3. **Rounds** (``--rounds``, default 3), each:

   a. **Changes** (not timed): ``--changes`` statements, the same for both tables: updates of one key
      drawn at random (``--seed``) from the first ``--rows`` / 10 ids, so most keys change more than
      once in a window, each setting three of the columns and one path of a JSON document
      (``JSON_SET``); one in ten statements deletes a key and inserts it again. The full table's
      statements run in a session with ``binlog_row_image = FULL``, the other's with ``MINIMAL`` and
      ``binlog_row_value_options = PARTIAL_JSON``: its window stages partial images and JSON diffs,
      which the apply folds per key. Then ``capture_window`` (catch-up) per pipeline.
   b. **Apply** (timed): ``run_apply`` of the round's window per table, one after the other, the full
      table first in odd rounds and second in even rounds. The clock covers the whole call.

After each apply both Iceberg tables are compared with MySQL value by value (every row and column;
JSON as parsed documents); the benchmark fails (exit code 1) when a value differs, or when the apply
reports a failed table or another window than the round's.

Spark runs in this process as in ``benchmarks/apply.py`` (``local[2]``, the Iceberg runtime jars, a
Hadoop catalog in a temporary directory).

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``benchwide``; see
:mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/wide_apply.py
    .venv/bin/python benchmarks/wide_apply.py --columns 20 --changes 200

The last line printed is always::

    wide_apply columns=<n> changes=<m> full_images_s=<a> partial_images_s=<b> ratio=<b/a>

The medians over the rounds; a ratio near 1 means that partial images cost the apply little more than
full ones.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

# This folder is sys.path[0] of a script: benchmarks/apply.py's helpers are imported by its name.
from apply import (  # type: ignore[import-not-found, unused-ignore]
    CATALOG,
    LOCAL_SETTINGS,
    Pipeline,
    apply_window,
    fill,
    spark_session,
)
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]
    BenchmarkError,
    Server,
    execute,
    local_server,
    print_summary,
)
from tables import apply_windows  # type: ignore[import-not-found, unused-ignore]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INSTANCE_NAME = "benchwide"
DATABASE = "bench_wide"
FULL, MINIMAL = "full_images", "minimal_images"
#: Session settings of each table's change statements.
SESSION_SETTINGS = {
    FULL: ("SET SESSION binlog_row_image = 'FULL'", "SET SESSION binlog_row_value_options = ''"),
    MINIMAL: ("SET SESSION binlog_row_image = 'MINIMAL'", "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'"),
}
#: Column types the table cycles through, each with the value of row ``n`` and an update of it.
COLUMN_KINDS = (
    ("INT", "(n * 2654435761 + {i}) % 2147483647", "({c} + 7919) % 2147483647"),
    ("VARCHAR(40)", "CONCAT('v{i}-', n)", "CONCAT('u{i}-', id, '-', CHAR_LENGTH({c}))"),
    ("DECIMAL(12,2)", "((n * 104729 + {i}) % 100000000) / 100", "({c} + 1.25) % 9999999"),
    ("DATETIME(6)", "TIMESTAMP('2024-01-01') + INTERVAL n * 37 + {i} SECOND", "{c} + INTERVAL 1 SECOND"),
    ("DOUBLE", "n * 1.5 + {i}", "{c} * 0.5 + 1"),
)
JSON_COLUMNS = ("doc_a", "doc_b")
JSON_VALUE = "JSON_OBJECT('n', n, 'tags', JSON_ARRAY('x', n % 7), 'note', REPEAT('j', 200))"


@dataclass(frozen=True)
class Options:
    columns: int
    rows: int
    changes: int
    rounds: int
    seed: int
    spark_cores: int
    driver_memory: str


def column_names(columns: int) -> list[str]:
    return [f"c{i:03d}" for i in range(columns)]


def create_table(table: str, columns: int) -> str:
    typed = [f"{name} {COLUMN_KINDS[i % len(COLUMN_KINDS)][0]}" for i, name in enumerate(column_names(columns))]
    documents = [f"{name} JSON" for name in JSON_COLUMNS]
    return f"CREATE TABLE {table} (id BIGINT NOT NULL PRIMARY KEY, {', '.join(typed + documents)})"


def row_values(columns: int) -> dict[str, str]:
    """Column -> SQL value of row ``n``."""
    values = {"id": "n"}
    for i, name in enumerate(column_names(columns)):
        values[name] = COLUMN_KINDS[i % len(COLUMN_KINDS)][1].format(i=i)
    return {**values, **dict.fromkeys(JSON_COLUMNS, JSON_VALUE)}


def insert_one(table: str, columns: int, key: int) -> str:
    values = row_values(columns)
    return (
        f"INSERT INTO {table} ({', '.join(values)}) SELECT {', '.join(values.values())} FROM (SELECT {key} AS n) AS s"
    )


def change_statements(table: str, columns: int, changes: int, rows: int, rng: random.Random) -> list[str]:
    """One round's statements for ``table`` (the same for both tables when ``rng`` is seeded alike)."""
    names = column_names(columns)
    statements = []
    for number in range(changes):
        key = rng.randint(1, max(1, rows // 10))
        if number % 10 == 9:
            statements += [f"DELETE FROM {table} WHERE id = {key}", insert_one(table, columns, key)]
            continue
        sets = []
        for i in sorted(rng.sample(range(columns), 3)):
            sets.append(f"{names[i]} = {COLUMN_KINDS[i % len(COLUMN_KINDS)][2].format(c=names[i], i=i)}")
        document = JSON_COLUMNS[number % len(JSON_COLUMNS)]
        sets.append(f"{document} = JSON_SET({document}, '$.n', {number}, '$.round', {rng.randint(0, 9)})")
        statements.append(f"UPDATE {table} SET {', '.join(sets)} WHERE id = {key}")
    return statements


# -- the check ----------------------------------------------------------------------------------


def normalized(value: Any, column: str) -> Any:
    if column in JSON_COLUMNS:
        return None if value is None else json.loads(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def check_target(spark: SparkSession, server: Server, table: str, columns: int, window_id: int) -> int:
    """Every row and value of the Iceberg table against MySQL; returns the rows compared."""
    names = ["id", *column_names(columns), *JSON_COLUMNS]
    mysql_rows = execute(server.admin, f"SELECT {', '.join(names)} FROM {DATABASE}.{table} ORDER BY id")
    target = f"{CATALOG}.{DATABASE}.{table}"
    spark.sql(f"REFRESH TABLE {target}")
    iceberg_rows = spark.sql(f"SELECT {', '.join(names)} FROM {target} ORDER BY id").collect()
    expected = [tuple(normalized(v, c) for v, c in zip(row, names, strict=True)) for row in mysql_rows]
    found = [tuple(normalized(v, c) for v, c in zip(row, names, strict=True)) for row in iceberg_rows]
    if found != expected:
        differing = next(
            (i for i, (a, b) in enumerate(zip(expected, found, strict=False)) if a != b), min(len(found), len(expected))
        )
        raise BenchmarkError(
            f"{target} differs from MySQL after window {window_id}: {len(found)} rows against {len(expected)}, "
            f"first difference at row {differing}"
        )
    return len(found)


# -- the run ------------------------------------------------------------------------------------


def round_of_changes(server: Server, options: Options, pipelines: dict[str, Pipeline], seed: int, run: int) -> int:
    """The round's statements for both tables, then the capture of each; returns the window id."""
    windows = set()
    for table, pipeline in pipelines.items():
        statements = change_statements(
            f"{DATABASE}.{table}", options.columns, options.changes, options.rows, random.Random(seed)
        )
        execute(server.admin, *SESSION_SETTINGS[table], *statements)
        window_id, _ = pipeline.capture(server.cdc, run)
        windows.add(window_id)
    if len(windows) != 1:
        raise BenchmarkError(f"the two pipelines captured different windows: {sorted(windows)}")
    return windows.pop()


def benchmark(server: Server, options: Options) -> str:
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    execute(server.admin, f"CREATE DATABASE {DATABASE}")
    values = row_values(options.columns)
    seconds: dict[str, list[float]] = {FULL: [], MINIMAL: []}
    with tempfile.TemporaryDirectory(prefix="bench-wide-") as scratch_dir:
        scratch = Path(scratch_dir)
        pipelines = {}
        for number, table in enumerate((FULL, MINIMAL)):
            name = f"{DATABASE}.{table}"
            execute(server.admin, create_table(name, options.columns))
            columns, expressions = ", ".join(values), ", ".join(values.values())
            rows = f"WITH RECURSIVE s (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {options.rows}) "
            depth = f"SET SESSION cte_max_recursion_depth = {options.rows + 1}"
            fill(server.admin, name, 0, depth, f"INSERT INTO {name} ({columns}) {rows}SELECT {expressions} FROM s")
            store = FrontierStore.from_url(f"sqlite:///{scratch / f'meta-{table}.db'}")
            store.ensure_schema()
            pipelines[table] = Pipeline(f"benchwide-{table}", name, str(scratch / "staging"), store, 4_700_000 + number)
            pipelines[table].snapshot(server.cdc)
        spark = spark_session(scratch, options.spark_cores, options.driver_memory)
        try:
            for pipeline in pipelines.values():
                window_id, _ = pipeline.capture(server.cdc, 1)
                apply_windows(spark, pipeline, window_id, [pipeline.table], loads=True)
            for number in range(options.rounds + 1):
                window_id = round_of_changes(server, options, pipelines, options.seed + number, number + 2)
                order = (FULL, MINIMAL) if number % 2 else (MINIMAL, FULL)
                for table in order:
                    started = time.perf_counter()
                    apply_window(spark, pipelines[table], window_id)
                    elapsed = time.perf_counter() - started
                    checked = check_target(spark, server, table, options.columns, window_id)
                    label = "warm-up" if number == 0 else f"round={number}"
                    print(f"{label} table={table} window={window_id} apply_s={elapsed:.3f} rows_checked={checked}")
                    if number:
                        seconds[table].append(elapsed)
        finally:
            spark.stop()
    full, partial = statistics.median(seconds[FULL]), statistics.median(seconds[MINIMAL])
    return (
        f"wide_apply columns={options.columns} changes={options.changes} full_images_s={full:.3f} "
        f"partial_images_s={partial:.3f} ratio={partial / full:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--columns", type=int, default=120, help="columns besides the key and JSON (default 120)")
    parser.add_argument("--rows", type=int, default=1_000, help="rows per table (default 1000)")
    parser.add_argument("--changes", type=int, default=50, help="statements per table and round (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the keys and columns changed (default 1)")
    parser.add_argument("--instance", default=INSTANCE_NAME, help=f"local MySQL instance (default {INSTANCE_NAME})")
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    args = parser.parse_args(argv)
    if args.columns < 3 or args.rows < 10 or args.changes < 1 or args.rounds < 1:
        parser.error("--columns must be at least 3, --rows at least 10, --changes and --rounds positive")
    options = Options(
        args.columns, args.rows, args.changes, args.rounds, args.seed, args.spark_cores, args.driver_memory
    )
    return int(print_summary(local_server(args.instance, LOCAL_SETTINGS), lambda server: benchmark(server, options)))


if __name__ == "__main__":
    sys.exit(main())
