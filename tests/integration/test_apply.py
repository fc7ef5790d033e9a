"""Spark apply against real parts: MySQL (snapshot + binlog windows), pyspark local mode, Iceberg.

After each applied window every Iceberg table is compared with its MySQL table (captures and applies
run with no writer in between, so "as of the window's upper GTID set" is "now").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.plan import AppliedState
from airflow_provider_mysql_cdc.apply.spark_job import ApplyConfig, TableApplier, run_apply
from airflow_provider_mysql_cdc.core.windows import TableSelection
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.integration.test_type_roundtrip import CASES, VECTOR, _version, create_table, insert_rows, write_session
from tests.mysql_servers import MySqlTestServer
from tests.spark_session import CATALOG, OTHER_CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]


def normalize(value: Any) -> Any:
    """Spark and PyMySQL values in one comparable form."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, list):
        return tuple(normalize(v) for v in value)
    return value


def iceberg_rows(spark: SparkSession, target: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    rows = spark.table(target).select(*[f"`{c}`" for c in columns]).collect()
    return sorted((tuple(normalize(v) for v in row) for row in rows), key=repr)


def mysql_rows(server: MySqlTestServer, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    rows = server.execute(f"SELECT {', '.join(f'`{c}`' for c in columns)} FROM {table}")
    return sorted((tuple(normalize(v) for v in row) for row in rows), key=repr)


def config(pipeline: SnapshotPipeline, first: int, last: int | None = None, **overrides: Any) -> ApplyConfig:
    settings: dict[str, Any] = {"catalog": CATALOG, "chunks_per_commit": 2}
    settings.update(overrides)
    return ApplyConfig(pipeline.name, str(pipeline.staging), first, last or first, **settings)


def apply(spark: SparkSession, pipeline: SnapshotPipeline, first: int, last: int | None = None, **kw: Any) -> Any:
    report = run_apply(spark, config(pipeline, first, last, **kw))
    assert not report["failed"], {name: report["tables"][name]["error"] for name in report["failed"]}
    return report


def cdc_commits(spark: SparkSession, target: str) -> list[dict[str, str]]:
    """Summaries of the table's commits made by the apply, oldest first."""
    rows = spark.sql(f"SELECT summary FROM {target}.snapshots ORDER BY committed_at").collect()
    return [dict(row.summary) for row in rows if "cdc.pipeline" in row.summary]


CUSTOMER_COLUMNS = ["id", "name", "city", "balance", "seen"]
LINE_COLUMNS = ["order_id", "line", "qty", "note"]


def _create_shop(server: MySqlTestServer, db: str) -> None:
    server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, city VARCHAR(40) NULL, "
        "balance DECIMAL(10,2), seen DATETIME(6))",
        f"CREATE TABLE {db}.lines (order_id BIGINT, line INT, qty INT, note TEXT, PRIMARY KEY (order_id, line))",
        f"INSERT INTO {db}.customers VALUES "
        + ", ".join(
            f"({i}, 'c{i}', {'NULL' if i % 7 == 0 else repr(f'city{i % 5}')}, {i}.25, "
            f"'2024-01-{1 + i % 28:02d} 10:00:00.{i:06d}')"
            for i in range(1, 301)
        ),
        f"INSERT INTO {db}.lines VALUES "
        + ", ".join(f"({o}, {n}, {o * n}, 'n{o}-{n}')" for o in range(1, 51) for n in range(1, 5)),
    )


def _check(spark: SparkSession, server: MySqlTestServer, db: str, customer_columns: Sequence[str]) -> None:
    assert iceberg_rows(spark, f"{CATALOG}.{db}.customers", customer_columns) == mysql_rows(
        server, f"{db}.customers", customer_columns
    )
    assert iceberg_rows(spark, f"{CATALOG}.{db}.lines", LINE_COLUMNS) == mysql_rows(server, f"{db}.lines", LINE_COLUMNS)


def test_snapshot_then_windows_equal_mysql_after_every_window(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    db = "apply_main"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_main", TableSelection.of(f"{db}.*"), chunk_rows=100)
    pipeline.snapshot("run-1")  # 3 chunks of customers, 2 of lines: loaded 2 chunks per commit

    # Window 1: inserts, updates, deletes, a key change, one key changed many times, NULLs.
    mysql_server.execute(
        f"INSERT INTO {db}.customers VALUES (301, 'new', NULL, NULL, NULL), (302, 'n2', 'x', 1.50, NULL)",
        f"UPDATE {db}.customers SET city = 'moved', balance = balance * 2 WHERE id BETWEEN 10 AND 40",
        f"DELETE FROM {db}.customers WHERE id BETWEEN 50 AND 60",
        f"UPDATE {db}.customers SET id = 1005 WHERE id = 5",
        *(f"UPDATE {db}.customers SET balance = {n} WHERE id = 7" for n in range(20)),
        f"UPDATE {db}.customers SET city = NULL, seen = NULL WHERE id = 8",
        f"DELETE FROM {db}.customers WHERE id = 301",
        f"INSERT INTO {db}.customers VALUES (301, 'back again', 'here', 3.00, '2024-02-02 00:00:00')",
        f"UPDATE {db}.lines SET qty = qty + 1 WHERE order_id < 10",
        f"DELETE FROM {db}.lines WHERE order_id = 20",
    )
    assert pipeline.capture("run-1").window_id == 1
    report = apply(spark, pipeline, 1)
    customers = report["tables"][f"{db}.customers"]
    assert customers["status"] == "applied" and customers["windows_applied"] == [1]
    assert customers["snapshot_chunks_loaded"] == 3
    assert customers["state"]["snapshot_id"] == "000001" and customers["state"]["window_id"] == 1
    _check(spark, mysql_server, db, CUSTOMER_COLUMNS)
    # Snapshot: 2 commits (chunks 0-1, chunk 2); then window 1.
    commits = cdc_commits(spark, f"{CATALOG}.{db}.customers")
    assert [(c["cdc.snapshot-chunks-loaded"], c["cdc.window-id"]) for c in commits] == [
        ("2", "0"),
        ("3", "0"),
        ("3", "1"),
    ]

    # Window 2: DDL (added column, INT -> BIGINT) with changes before and after it.
    mysql_server.execute(
        f"UPDATE {db}.customers SET name = 'before-ddl' WHERE id = 100",
        f"ALTER TABLE {db}.customers ADD COLUMN tier INT NULL",
        f"ALTER TABLE {db}.lines MODIFY qty BIGINT",
        f"UPDATE {db}.customers SET tier = id % 3 WHERE id < 30",
        f"UPDATE {db}.lines SET qty = 5000000000 WHERE order_id = 30",
        f"INSERT INTO {db}.customers VALUES (400, 'tiered', 'z', 0.01, NULL, 9)",
    )
    assert pipeline.capture("run-2").window_id == 2
    report = apply(spark, pipeline, 2)
    assert any("ADD COLUMN `tier`" in s for s in report["tables"][f"{db}.customers"]["schema_changes"])
    assert any("`qty` TYPE bigint" in s for s in report["tables"][f"{db}.lines"]["schema_changes"])
    _check(spark, mysql_server, db, [*CUSTOMER_COLUMNS, "tier"])

    # Window 3: TRUNCATE with rows before and after it; a dropped column stays in the target.
    mysql_server.execute(
        f"INSERT INTO {db}.lines VALUES (900, 1, 1, 'gone with the truncate')",
        f"TRUNCATE TABLE {db}.lines",
        f"INSERT INTO {db}.lines VALUES (1, 1, 11, 'after'), (2, 1, 22, NULL)",
        f"UPDATE {db}.lines SET qty = 12 WHERE order_id = 1",
        f"ALTER TABLE {db}.customers DROP COLUMN city",
        f"INSERT INTO {db}.customers VALUES (500, 'no city', 5.00, NULL, 1)",
        f"UPDATE {db}.customers SET name = 'after-drop' WHERE id = 11",
    )
    assert pipeline.capture("run-3").window_id == 3
    apply(spark, pipeline, 3)
    columns = ["id", "name", "balance", "seen", "tier"]
    _check(spark, mysql_server, db, columns)
    kept: dict[Any, Any] = dict(spark.table(f"{CATALOG}.{db}.customers").select("id", "city").collect())
    assert kept[500] is None and kept[11] is None  # written after the drop: NULL
    assert kept[12] == "moved"  # untouched since: the old value stays

    # Re-running any of the windows changes nothing.
    before = {t: len(cdc_commits(spark, f"{CATALOG}.{db}.{t}")) for t in ("customers", "lines")}
    report = apply(spark, pipeline, 1, 3)
    assert {t["status"] for t in report["tables"].values()} == {"up_to_date"}
    assert {t: len(cdc_commits(spark, f"{CATALOG}.{db}.{t}")) for t in ("customers", "lines")} == before
    _check(spark, mysql_server, db, columns)


def test_gap_and_unsupported_schema_change_stop_only_that_table(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    db = "apply_errors"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_errors", TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'w1' WHERE id = 1")
    pipeline.capture("run-1")
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'w2' WHERE id = 2")
    pipeline.capture("run-2")

    # Window 2 before window 1: refused, nothing written.
    report = run_apply(spark, config(pipeline, 2))
    assert report["failed"] == [f"{db}.customers"]
    error = report["tables"][f"{db}.customers"]["error"]
    assert "window 1 holds changes the table does not have yet" in error and "apply windows 1..1 first" in error

    apply(spark, pipeline, 1, 2)
    _check(spark, mysql_server, db, CUSTOMER_COLUMNS)

    # A type change the target cannot hold stops that table; the other table of the window applies.
    mysql_server.execute(
        f"ALTER TABLE {db}.customers MODIFY balance VARCHAR(20)",
        f"UPDATE {db}.customers SET balance = 'n/a' WHERE id = 3",
        f"UPDATE {db}.lines SET qty = 77 WHERE order_id = 3",
    )
    gtid_of_alter = str(mysql_server.execute("SELECT @@GLOBAL.gtid_executed")[0][0])
    assert pipeline.capture("run-3").window_id == 3
    report = run_apply(spark, config(pipeline, 3))
    assert report["failed"] == [f"{db}.customers"]
    error = report["tables"][f"{db}.customers"]["error"]
    assert "column 'balance' changed from decimal(10,2) to string" in error
    assert "ALTER TABLE" in error and "MODIFY balance VARCHAR(20)" in error and "window 3" in error
    assert "GTID " in error and gtid_of_alter.split(":", maxsplit=1)[0] in error
    assert report["tables"][f"{db}.lines"]["status"] == "applied"
    assert iceberg_rows(spark, f"{CATALOG}.{db}.lines", LINE_COLUMNS) == mysql_rows(
        mysql_server, f"{db}.lines", LINE_COLUMNS
    )
    # The stopped table still holds window 2's state.
    state = AppliedState.from_summary(cdc_commits(spark, f"{CATALOG}.{db}.customers")[-1], "customers")
    assert state is not None and state.window_id == 2


def test_history_mode_keeps_every_change_in_a_changelog_table(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    db = "apply_history"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_history", TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(
        f"UPDATE {db}.customers SET name = 'v1' WHERE id = 1",
        f"UPDATE {db}.customers SET name = 'v2' WHERE id = 1",
        f"DELETE FROM {db}.customers WHERE id = 2",
    )
    pipeline.capture("run-1")
    # Window 2 holds two schema versions of the table: before and after an added column.
    mysql_server.execute(
        f"UPDATE {db}.customers SET name = 'pre-ddl' WHERE id = 3",
        f"ALTER TABLE {db}.customers ADD COLUMN tier INT NULL",
        f"INSERT INTO {db}.customers VALUES (900, 'new', NULL, NULL, NULL, 7)",
    )
    pipeline.capture("run-2")

    for _ in range(2):  # a re-run replaces each window's partition: no duplicates
        apply(spark, pipeline, 1, 2, history=(f"{db}.customers",))
    changelog = f"{CATALOG}.{db}.customers_changelog"
    rows = spark.sql(f"SELECT _cdc_window_id, _cdc_op, id, name, tier FROM {changelog} ORDER BY _cdc_seq").collect()
    assert [tuple(r) for r in rows] == [
        (1, "u", 1, "v1", None),
        (1, "u", 1, "v2", None),
        (1, "d", 2, "c2", None),
        (2, "u", 3, "pre-ddl", None),
        (2, "c", 900, "new", 7),
    ]
    assert not spark.catalog.tableExists(f"{CATALOG}.{db}.lines_changelog")
    _check(spark, mysql_server, db, [*CUSTOMER_COLUMNS, "tier"])


def _race_setup(mysql_server: MySqlTestServer, tmp_path: Path, db: str) -> SnapshotPipeline:
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.customers"))
    pipeline.snapshot("run-1")
    for n in range(1, 4):
        mysql_server.execute(
            f"UPDATE {db}.customers SET balance = balance + {n} WHERE id % 3 = {n % 3}",
            f"INSERT INTO {db}.customers VALUES ({1000 + n}, 'w{n}', NULL, {n}, NULL)",
            f"DELETE FROM {db}.customers WHERE id = {n * 10}",
        )
        pipeline.capture(f"run-{n}")
    return pipeline


def test_an_apply_that_lost_the_race_commits_nothing(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another Spark application (catalog ``lake_other``: its own table cache) applies window 2 after
    this one read the table's state; this one's MERGE is refused by Iceberg, it re-reads and skips."""
    db = "apply_race"
    pipeline = _race_setup(mysql_server, tmp_path, db)
    target = f"{CATALOG}.{db}.customers"
    apply(spark, pipeline, 1)

    loser = TableApplier(spark, config(pipeline, 2), f"{db}.customers")
    stale = loser.read_state()  # pins the table in this catalog's cache at window 1
    apply(spark, pipeline, 2, catalog=OTHER_CATALOG)
    real_read_state = loser.read_state
    calls = {"n": 0}

    def stale_then_real(target_name: str | None = None) -> AppliedState | None:
        calls["n"] += 1  # planning and the pre-merge check both see the stale state
        return stale if calls["n"] <= 2 else real_read_state(target_name)

    monkeypatch.setattr(loser, "read_state", stale_then_real)
    report = loser.apply()
    assert report.status == "up_to_date" and report.conflicts_retried == 1, report
    windows = [c["cdc.window-id"] for c in cdc_commits(spark, target)]
    assert windows.count("2") == 1
    apply(spark, pipeline, 3)  # MySQL is at window 3's upper bound
    assert iceberg_rows(spark, target, CUSTOMER_COLUMNS) == mysql_rows(
        mysql_server, f"{db}.customers", CUSTOMER_COLUMNS
    )


def test_two_applies_racing_for_the_same_windows_apply_each_once(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    db = "apply_race2"
    pipeline = _race_setup(mysql_server, tmp_path, db)
    reports: list[dict[str, Any]] = []

    def run(catalog: str) -> None:
        reports.append(run_apply(spark, config(pipeline, 1, 3, catalog=catalog, chunks_per_commit=1)))

    threads = [threading.Thread(target=run, args=(c,)) for c in (CATALOG, OTHER_CATALOG)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reports) == 2 and not any(r["failed"] for r in reports), reports
    target = f"{CATALOG}.{db}.customers"
    spark.sql(f"REFRESH TABLE {target}")
    commits = [(c["cdc.snapshot-chunks-loaded"], c["cdc.window-id"]) for c in cdc_commits(spark, target)]
    # The snapshot (one chunk), then windows 1..3: each committed exactly once, in order.
    assert commits == [("1", "0"), ("1", "1"), ("1", "2"), ("1", "3")], commits
    assert iceberg_rows(spark, target, CUSTOMER_COLUMNS) == mysql_rows(
        mysql_server, f"{db}.customers", CUSTOMER_COLUMNS
    )


def test_every_type_of_the_type_map_lands_as_a_fresh_snapshot_stages_it(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """Every case of the type round trip (every MySQL type with its tricky values, zero dates and
    NULLs): snapshot, a window of updates and deletes, a window of inserts; then every Iceberg table
    equals what a fresh snapshot of the MySQL table stages (the staged values are checked against
    SELECT by the type round-trip and snapshot type tests), read through Spark as the target's types."""
    from pyspark.sql import functions as F

    db = "apply_types"
    cases = [case for case in CASES if case is not VECTOR or _version(mysql_server) >= (9, 0)]
    mysql_server.execute(f"DROP DATABASE IF EXISTS {db}")
    for case in cases:
        insert_rows(mysql_server, case, create_table(mysql_server, case, db))
    pipeline = SnapshotPipeline(mysql_server, tmp_path, "apply_types", TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    for case in cases:
        table = f"`{db}`.`{case.name}`"
        mysql_server.execute(
            *write_session(case),
            *(f"UPDATE {table} SET {sets} WHERE id = {i}" for i, sets in case.updates),
            *(f"DELETE FROM {table} WHERE id = {i}" for i in case.deletes),
        )
    pipeline.capture("run-1")
    for case in cases:
        names = ", ".join(f"`{col.name.replace('`', '``')}`" for col in case.columns)
        mysql_server.execute(
            *write_session(case),
            *(
                f"INSERT INTO `{db}`.`{case.name}` (id, {names}) VALUES ({100 + i}, {values})"
                for i, values in enumerate(case.rows, 1)
            ),
        )
    pipeline.capture("run-2")
    apply(spark, pipeline, 1, 2)

    (tmp_path / "check").mkdir()
    check = SnapshotPipeline(mysql_server, tmp_path / "check", "check", TableSelection.of(f"{db}.*"))
    check.snapshot("check")
    for case in cases:
        table_name = f"{db}.{case.name}"
        target = f"{CATALOG}.{db}.{case.name}"
        paths = []
        for chunk in check.table_manifest("000001", table_name)["chunks"]:
            chunk_dir = check.staging / Path(chunk["manifest"]).parent
            manifest = json.loads((chunk_dir / "_manifest.json").read_text())
            paths += [str(chunk_dir / f["path"]) for f in manifest["files"]]
        target_types = [(f.name, f.dataType) for f in spark.table(target).schema.fields]
        columns = [name for name, _ in target_types if name == "_cdc_invalid_values" or not name.startswith("_cdc_")]
        staged = (
            spark.read.option("datetimeRebaseMode", "CORRECTED")
            .parquet(*paths)
            .select(*[F.col(f"`{name}`").cast(kind).alias(name) for name, kind in target_types if name in columns])
        )
        expected = sorted((tuple(normalize(v) for v in row) for row in staged.collect()), key=repr)
        assert len(expected) == len(case.rows) * 2 - len(case.deletes), table_name
        assert iceberg_rows(spark, target, columns) == expected, table_name


def test_a_corrupt_staged_file_stops_the_table_before_its_merge(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    db = "apply_corrupt"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.customers"))
    pipeline.snapshot("run-1")
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'changed' WHERE id < 10")
    pipeline.capture("run-1")
    (staged,) = (pipeline.staging / db / "windows" / "00000001").glob("*/v*/part-*.parquet")
    staged.write_bytes(staged.read_bytes()[:-100])

    report = run_apply(spark, config(pipeline, 1))
    assert report["failed"] == [f"{db}.customers"]
    assert "missing, truncated or changed" in report["tables"][f"{db}.customers"]["error"]
    state = AppliedState.from_summary(cdc_commits(spark, f"{CATALOG}.{db}.customers")[-1], "customers")
    assert state is not None and state.window_id == 0  # the snapshot is in, window 1 is not
