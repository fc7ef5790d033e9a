"""Spark apply against real parts: MySQL (snapshot + binlog windows), pyspark local mode, Iceberg.

After each applied window every Iceberg table is compared with its MySQL table (captures and applies
run with no writer in between, so "as of the window's upper GTID set" is "now").
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec
from airflow_provider_mysql_cdc.apply.plan import AppliedState
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.apply.table_applier import TableApplier
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


def config(pipeline: SnapshotPipeline, first: int, last: int | None = None, **overrides: Any) -> ApplySpec:
    settings: dict[str, Any] = {"catalog": CATALOG, "chunks_per_commit": 2}
    settings.update(overrides)
    return ApplySpec(pipeline.name, str(pipeline.staging), first, last or first, **settings)


def apply(spark: SparkSession, pipeline: SnapshotPipeline, first: int, last: int | None = None, **kw: Any) -> Any:
    report = run_apply(spark, config(pipeline, first, last, **kw))
    assert not report.failed, {name: report.tables[name].error for name in report.failed}
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
    customers = report.tables[f"{db}.customers"]
    assert customers.status == "applied" and customers.windows_applied == [1]
    assert customers.snapshot_chunks_loaded == 3
    assert customers.state["snapshot_id"] == "000001" and customers.state["window_id"] == 1
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
    assert any("ADD COLUMN `tier`" in s for s in report.tables[f"{db}.customers"].schema_changes)
    assert any("`qty` TYPE bigint" in s for s in report.tables[f"{db}.lines"].schema_changes)
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
    assert {t.status for t in report.tables.values()} == {"up_to_date"}
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
    assert report.failed == [f"{db}.customers"]
    error = report.tables[f"{db}.customers"].error
    assert "window 1 holds changes the table does not have yet" in error and "apply windows 1..1 first" in error

    apply(spark, pipeline, 1, 2)
    _check(spark, mysql_server, db, CUSTOMER_COLUMNS)

    # A type change the target cannot hold: under the 'stop' policy that table stops with a named error
    # that says what to do; the other table of the window applies.
    mysql_server.execute(
        f"ALTER TABLE {db}.customers MODIFY balance VARCHAR(20)",
        f"UPDATE {db}.customers SET balance = 'n/a' WHERE id = 3",
        f"UPDATE {db}.lines SET qty = 77 WHERE order_id = 3",
    )
    gtid_of_alter = str(mysql_server.execute("SELECT @@GLOBAL.gtid_executed")[0][0])
    assert pipeline.capture("run-3").window_id == 3
    report = run_apply(spark, config(pipeline, 3, schema_change_policy="stop"))
    assert report.failed == [f"{db}.customers"]
    customers = report.tables[f"{db}.customers"]
    assert customers.error_class == "RebuildPendingError"
    error = customers.error
    assert "column 'balance'" in error and "window 3" in error and "resnapshot=['apply_errors.customers']" in error
    assert "GTID " in error and gtid_of_alter.split(":", maxsplit=1)[0] in error
    assert report.tables[f"{db}.lines"].status == "applied"
    assert iceberg_rows(spark, f"{CATALOG}.{db}.lines", LINE_COLUMNS) == mysql_rows(
        mysql_server, f"{db}.lines", LINE_COLUMNS
    )
    # The table took window 3 up to the change and waits for a fresh snapshot; a later window does not
    # move it on its own.
    state = AppliedState.from_summary(cdc_commits(spark, f"{CATALOG}.{db}.customers")[-1], "customers")
    assert state is not None and state.window_id == 3 and "column 'balance'" in state.rebuild_pending
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'w4' WHERE id = 1")
    assert pipeline.capture("run-4").window_id == 4
    report = run_apply(spark, config(pipeline, 4))
    assert report.failed == [f"{db}.customers"]
    assert report.tables[f"{db}.customers"].error_class == "RebuildPendingError"
    assert "waits for a fresh snapshot since window 3" in report.tables[f"{db}.customers"].error


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
    reports: list[ApplyReport] = []

    def run(catalog: str) -> None:
        reports.append(run_apply(spark, config(pipeline, 1, 3, catalog=catalog, chunks_per_commit=1)))

    threads = [threading.Thread(target=run, args=(c,)) for c in (CATALOG, OTHER_CATALOG)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reports) == 2 and not any(r.failed for r in reports), reports
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
    assert report.failed == [f"{db}.customers"]
    assert "missing, truncated or changed" in report.tables[f"{db}.customers"].error
    state = AppliedState.from_summary(cdc_commits(spark, f"{CATALOG}.{db}.customers")[-1], "customers")
    assert state is not None and state.window_id == 0  # the snapshot is in, window 1 is not


def test_a_table_the_jvm_fails_on_fails_alone_and_its_java_stack_is_logged(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Java failure of one table (its current metadata names a format version Iceberg cannot read) fails
    that table only, and the log shows where in the JVM it failed: PySpark keeps that stack out of the
    text of the exceptions it converts (here an ``IllegalArgumentException``)."""
    db = "apply_java_failure"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    assert pipeline.capture("run-1").window_id == 1
    apply(spark, pipeline, 1)
    warehouse = Path(str(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")).removeprefix("file:"))
    metadata = warehouse / db / "customers" / "metadata"
    current = metadata / f"v{(metadata / 'version-hint.text').read_text().strip()}.metadata.json"
    document = json.loads(current.read_text())
    current.write_text(json.dumps({**document, "format-version": 99}))
    (metadata / f".{current.name}.crc").unlink()  # Hadoop's local file system would refuse the file first
    spark.sql(f"REFRESH TABLE {CATALOG}.{db}.customers")  # the session's catalog forgets the loaded table
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'w2' WHERE id < 5", f"UPDATE {db}.lines SET qty = 0")
    assert pipeline.capture("run-2").window_id == 2

    with caplog.at_level("WARNING", logger="airflow_provider_mysql_cdc.apply"):
        report = run_apply(spark, config(pipeline, 2))
    assert report.failed == [f"{db}.customers"], report.tables
    assert report.tables[f"{db}.lines"].status == "applied"
    stacks = [r.getMessage() for r in caplog.records if "where the JVM failed" in r.getMessage()]
    assert len(stacks) == 1 and stacks[0].startswith(f"{db}.customers: "), stacks
    assert "\tat org.apache." in stacks[0], stacks[0]


# -- the key filter (a Bloom filter on the target's keys in the MERGE's ON clause) -----------------

KEY_TABLES = {
    # table: (columns, key columns, SQL of row n's key values)
    "str_key": ("k VARCHAR(20) COLLATE utf8mb4_bin NOT NULL, v INT", ("k",), "CONCAT('k-', {n}, '-ключ')"),
    "multi_key": (
        "a BIGINT NOT NULL, b VARCHAR(10) NOT NULL, c DATE NOT NULL, v INT",
        ("a", "b", "c"),
        "-{n} * 4294967311, CONCAT('b', {n} % 7), DATE('2000-01-01') + INTERVAL {n} DAY",
    ),
    "mixed_key": (
        "d DECIMAL(20,4) NOT NULL, t DATETIME(6) NOT NULL, r VARBINARY(16) NOT NULL, v INT",
        ("d", "t", "r"),
        "({n} - 150) * 1234567.8901, TIMESTAMP('1970-01-01') + INTERVAL {n} * 3607 SECOND, "
        "UNHEX(LPAD(HEX({n} * 2654435761), 16, 'F'))",
    ),
    "widened_key": ("k INT NOT NULL, v INT", ("k",), "{n} * 7 - 1000"),
    "double_key": ("k DOUBLE NOT NULL, v INT", ("k",), "{n} / 8 - 10"),
    # No primary key: snapshotted with key_columns (they only cut chunks), merged as a multiset without key filter.
    "no_pk": ("k BIGINT NOT NULL, v INT", ("k",), "{n} * 1000003"),
}


def allow_key_filters_on_small_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test tables are small: let their MERGEs take a key filter all the same."""
    from airflow_provider_mysql_cdc.apply import plan

    monkeypatch.setattr(plan, "KEY_FILTER_MIN_TARGET_ROWS", 0)
    monkeypatch.setattr(plan, "KEY_FILTER_MIN_TARGET_RATIO", 0)


def _key_values(table: str, n: int) -> str:
    """The SQL values of row ``n``'s key columns."""
    return KEY_TABLES[table][2].format(n=n)


def _key_is(table: str, n: int) -> str:
    """``WHERE`` row ``n``'s key."""
    return f"WHERE ({', '.join(KEY_TABLES[table][1])}) = ({_key_values(table, n)})"


def _key_tables(server: MySqlTestServer, db: str, rows: int) -> None:
    statements = [f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"]
    for table, (columns, keys, _) in KEY_TABLES.items():
        primary_key = "" if table == "no_pk" else f", PRIMARY KEY ({', '.join(keys)})"
        statements.append(f"CREATE TABLE {db}.{table} ({columns}{primary_key})")
        statements.append(
            f"INSERT INTO {db}.{table} ({', '.join(keys)}, v) VALUES "
            + ", ".join(f"({_key_values(table, n)}, {n})" for n in range(rows))
        )
    server.execute(*statements)


def _key_table_changes(db: str, table: str, first_new: int) -> list[str]:
    """Updates of every third row, deletes, inserts, a key deleted then inserted again, a key moved to
    a new value, one key changed many times: all in one window."""
    keys = KEY_TABLES[table][1]
    names = ", ".join(keys)
    moved = f"{keys[0]} = -1" if len(keys) > 1 else f"{keys[0]} = {_key_values(table, first_new + 100)}"
    return [
        f"UPDATE {db}.{table} SET v = v + 1000 WHERE v % 3 = 0",
        f"DELETE FROM {db}.{table} WHERE v % 11 = 1",
        *(
            f"INSERT INTO {db}.{table} ({names}, v) VALUES ({_key_values(table, n)}, {n})"
            for n in range(first_new, first_new + 20)
        ),
        f"DELETE FROM {db}.{table} {_key_is(table, 2)}",
        f"INSERT INTO {db}.{table} ({names}, v) VALUES ({_key_values(table, 2)}, -2)",
        # (Of the table without a primary key, the capture stages it as a delete of the old row and an
        # insert of the new one, like every update of such a table.)
        f"UPDATE {db}.{table} SET {moved} {_key_is(table, 4)}",
        *(f"UPDATE {db}.{table} SET v = {-i} {_key_is(table, 5)}" for i in range(10)),
    ]


def test_the_key_filter_keeps_every_match_of_every_key_type(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """String, composite (BIGINT, VARCHAR, DATE and DECIMAL, DATETIME, VARBINARY) and widened INT->BIGINT
    keys: each window's MERGE carries a key filter built from the staged keys (cast to the target's
    types), and every target equals MySQL after each window; a key the filter missed would leave a
    deleted row behind and turn an update into a second row of the key. DOUBLE keys get no filter, and
    neither does the table without a primary key (snapshotted in chunks of its ``key_columns``, merged as
    a multiset of whole rows), whose moved ``key_columns`` value leaves no old row behind."""
    db = "apply_keys"
    _key_tables(mysql_server, db, rows=300)
    pipeline = SnapshotPipeline(
        mysql_server, tmp_path, db, TableSelection.of(f"{db}.*"), key_columns={f"{db}.no_pk": ["k"]}
    )
    pipeline.snapshot("run-1")
    allow_key_filters_on_small_tables(monkeypatch)
    filters: list[tuple[str, int | None]] = []
    real_key_filter = TableApplier._key_filter

    def recording_key_filter(self: TableApplier, keys: Any, bounded: bool = False) -> Any:
        found, bounds = real_key_filter(self, keys, bounded)
        filters.append((self.table_name.split(".")[1], None if found is None else found.bits))
        return found, bounds

    monkeypatch.setattr(TableApplier, "_key_filter", recording_key_filter)

    def check(table: str) -> None:
        columns = [*KEY_TABLES[table][1], "v"]
        assert iceberg_rows(spark, f"{CATALOG}.{db}.{table}", columns) == mysql_rows(
            mysql_server, f"{db}.{table}", columns
        ), table

    mysql_server.execute(*[s for table in KEY_TABLES for s in _key_table_changes(db, table, 1000)])
    assert pipeline.capture("run-1").window_id == 1
    apply(spark, pipeline, 1)
    for table in KEY_TABLES:
        check(table)
    filtered = {table for table, bits in filters if bits}
    assert filtered == set(KEY_TABLES) - {"double_key", "no_pk"}, filters

    # Window 2: the INT key becomes BIGINT, with changes before and after the DDL (the staged key
    # columns are INT and BIGINT; the target is widened to BIGINT before the MERGE).
    filters.clear()
    mysql_server.execute(
        f"UPDATE {db}.widened_key SET v = v + 1 WHERE v % 5 = 0",
        f"ALTER TABLE {db}.widened_key MODIFY k BIGINT NOT NULL",
        f"UPDATE {db}.widened_key SET v = v + 1 WHERE v % 7 = 0",
        f"INSERT INTO {db}.widened_key VALUES (5000000000, 1), (-5000000000, 2)",
        f"UPDATE {db}.widened_key SET k = 6000000000 WHERE k = {_key_values('widened_key', 6)}",
        f"DELETE FROM {db}.widened_key WHERE v % 13 = 3",
    )
    assert pipeline.capture("run-2").window_id == 2
    report = apply(spark, pipeline, 2)
    assert any("`k` TYPE bigint" in s for s in report.tables[f"{db}.widened_key"].schema_changes)
    assert filters and all(bits for _, bits in filters), filters
    check("widened_key")


def test_a_key_filter_that_missed_keys_would_break_the_table(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filter decides which target rows the MERGE can match: one built from other keys' hashes
    leaves deleted rows behind and writes updated keys a second time (what the test above would catch,
    were the filter wrong). A small target gets no filter at all."""
    from airflow_provider_mysql_cdc.apply import plan

    db = "apply_bad_filter"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.customers"))
    pipeline.snapshot("run-1")
    real_of_hashes = plan.KeyFilter.of_hashes.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        plan.KeyFilter, "of_hashes", classmethod(lambda cls, hashes: real_of_hashes(cls, {h + 1 for h in hashes}))
    )
    target = f"{CATALOG}.{db}.customers"

    # 300 rows: below KEY_FILTER_MIN_TARGET_ROWS, so the wrong filter is never built.
    mysql_server.execute(f"UPDATE {db}.customers SET name = 'updated' WHERE id <= 10")
    pipeline.capture("run-1")
    apply(spark, pipeline, 1)
    assert iceberg_rows(spark, target, CUSTOMER_COLUMNS) == mysql_rows(
        mysql_server, f"{db}.customers", CUSTOMER_COLUMNS
    )

    allow_key_filters_on_small_tables(monkeypatch)
    mysql_server.execute(
        f"UPDATE {db}.customers SET name = 'updated again' WHERE id <= 100",
        f"DELETE FROM {db}.customers WHERE id > 250",
    )
    pipeline.capture("run-2")
    apply(spark, pipeline, 2)
    rows = spark.sql(f"SELECT COUNT(*), COUNT(DISTINCT id), SUM(CAST(id > 250 AS INT)) FROM {target}").collect()[0]
    assert rows[0] > rows[1] and rows[2] > 0, rows  # keys written twice, deleted keys still there


def record_merge_plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The physical plans of the MERGE statements run from now on (the list fills as they run)."""
    plans: list[str] = []
    real_sql = SparkSession.sql

    def recording_sql(self: SparkSession, text: str, *args: Any, **kwargs: Any) -> Any:
        frame = real_sql(self, text, *args, **kwargs)
        if text.startswith("MERGE INTO "):
            plans.append(frame._jdf.queryExecution().executedPlan().toString())
        return frame

    monkeypatch.setattr(SparkSession, "sql", recording_sql)
    return plans


def _target_scans(plan: str, target: str) -> str:
    """What a physical plan's scans of ``target`` say after their columns (the filters pushed into them)."""
    return " ".join(re.findall(rf"BatchScan {re.escape(target)}\[[^\]]*\] ([^\n]*)", plan))


def _target_columns_read(plan: str, target: str) -> set[str]:
    """The columns (data and metadata) a physical plan's scan of ``target`` reads."""
    scans = re.findall(rf"BatchScan {re.escape(target)}\[([^\]]*)\]", plan)
    assert scans, plan
    return {name for scan in scans for name in re.findall(r"(\w+)#\d+", scan)}


def test_a_merge_of_whole_row_images_reads_no_more_of_the_target_than_its_keys(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window of whole row images sets every column from the staged row, so its MERGE scans the
    target's keys only (into a large target, reading every column was most of the MERGE). A window with
    partial images (``binlog_row_image=MINIMAL``) keeps the target's value of the columns an image
    lacks, so its MERGE reads them; the target equals MySQL after both."""
    db = "apply_scan"
    _create_shop(mysql_server, db)
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.customers"))
    pipeline.snapshot("run-1")
    target = f"{CATALOG}.{db}.customers"
    plans = record_merge_plans(monkeypatch)  # of the one table of the pipeline
    data_columns = set(CUSTOMER_COLUMNS) - {"id"}

    mysql_server.execute(
        f"UPDATE {db}.customers SET city = 'moved' WHERE id <= 40",
        f"DELETE FROM {db}.customers WHERE id > 290",
        f"INSERT INTO {db}.customers VALUES (1000, 'new', NULL, 1.50, '2024-02-01 00:00:00')",
    )
    pipeline.capture("run-1")
    apply(spark, pipeline, 1)
    _check_customers(spark, mysql_server, db)
    read = _target_columns_read(plans[-1], target)  # the window's MERGE, after the snapshot's load
    assert {c for c in read if not c.startswith("_") or c.startswith("_cdc_")} == {"id"}, read  # and metadata

    plans.clear()
    mysql_server.execute(
        "SET SESSION binlog_row_image = 'MINIMAL'",
        f"UPDATE {db}.customers SET city = 'minimal' WHERE id BETWEEN 41 AND 60",
    )
    pipeline.capture("run-2")
    apply(spark, pipeline, 2)
    _check_customers(spark, mysql_server, db)
    assert len(plans) == 1, plans
    assert data_columns <= _target_columns_read(plans[0], target), plans[0]


def test_the_merge_bounds_an_integer_key_by_the_lowest_and_highest_staged_key(
    spark: SparkSession, mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into a large target, a MERGE on one integer key carries the step's lowest and highest key,
    pushed into the target's scan so Iceberg can skip the data files outside them: each batch of a
    snapshot's load after the first, and a window of new and recently added rows. The target equals
    MySQL after the load and after the window."""
    db = "apply_range"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.events (id BIGINT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO {db}.events VALUES {', '.join(f'({i}, {i % 97})' for i in range(1, 2001))}",
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.events"), chunk_rows=500)
    assert len(pipeline.snapshot("run-1")) == 4
    from airflow_provider_mysql_cdc.apply import plan

    # A small table bounded all the same. A batch of the load is too large a part of the target for a key
    # filter (its bounds come from a job of their own); the window takes one (the bounds from its job).
    monkeypatch.setattr(plan, "KEY_FILTER_MIN_TARGET_ROWS", 0)
    target = f"{CATALOG}.{db}.events"
    plans = record_merge_plans(monkeypatch)  # of the one table of the pipeline

    def check() -> None:
        columns = ["id", "v"]
        assert iceberg_rows(spark, target, columns) == mysql_rows(mysql_server, f"{db}.events", columns)

    mysql_server.execute(
        f"INSERT INTO {db}.events VALUES {', '.join(f'({i}, 1)' for i in range(2001, 2101))}",
        f"UPDATE {db}.events SET v = -v WHERE id BETWEEN 1990 AND 2050",
        f"DELETE FROM {db}.events WHERE id IN (1995, 2005)",
    )
    pipeline.capture("run-1")
    apply(spark, pipeline, 1, chunks_per_commit=1)
    check()
    scans = [_target_scans(merge_plan, target) for merge_plan in plans]
    assert len(scans) == 5, scans  # four batches of the load, then the window
    assert "filters=," in scans[0] or "filters=]" in scans[0], scans[0]  # the first batch: a full outer join, unbounded
    for lowest, scan in zip((501, 1001, 1501), scans[1:4], strict=True):
        assert f"id >= {lowest}" in scan and f"id <= {lowest + 499}" in scan, scan
    assert "id >= 1990" in scans[4] and "id <= 2100" in scans[4], scans[4]
    assert "xxhash64" not in " ".join(plans[:4]) and "xxhash64" in plans[4]  # the key filter: the window only


def _check_customers(spark: SparkSession, server: MySqlTestServer, db: str) -> None:
    assert iceberg_rows(spark, f"{CATALOG}.{db}.customers", CUSTOMER_COLUMNS) == mysql_rows(
        server, f"{db}.customers", CUSTOMER_COLUMNS
    )


def _check_key_filter_condition(spark: SparkSession, frame: Any, key_sets: list[list[str]]) -> None:
    """Filters of the hashes of every tenth row (``n % 10 = 0``) of ``frame``, one per key set, evaluated
    by Spark over every row."""
    from pyspark.sql import functions as F

    from airflow_provider_mysql_cdc.apply.plan import KeyFilter

    for key_set in key_sets:
        hashed = F.xxhash64(*[F.col(k) for k in key_set])
        members = {int(row[0]) for row in frame.where(F.col("n") % 10 == 0).select(hashed).collect()}
        key_filter = KeyFilter.of_hashes(members)
        assert key_filter is not None
        frame.createOrReplaceTempView("key_filter_rows")
        result = spark.sql(
            f"SELECT n, xxhash64({', '.join(key_set)}) AS h, {key_filter.condition('r', key_set)} AS passes "
            "FROM key_filter_rows r",
            args={KeyFilter.PARAMETER: key_filter.parameter()},
        )
        assert "from_json" not in result._jdf.queryExecution().executedPlan().toString()
        rows = result.collect()
        assert all(row.passes == key_filter.might_contain(row.h) for row in rows)
        assert all(row.passes for row in rows if row.n % 10 == 0)
        assert sum(row.passes for row in rows) < len(rows) / 4, key_set  # and most of the others do not


@pytest.mark.parametrize("ansi", ["false", "true"])
def test_the_key_filter_condition_in_spark_computes_the_bits_of_its_filter(spark: SparkSession, ansi: str) -> None:
    """Spark's evaluation of :meth:`KeyFilter.condition` over keys of every eligible type (negative
    hashes included) is the filter's own bit test, with and without ANSI SQL mode; every key the filter
    was built from passes; the JSON parameter is read once into a literal (no ``from_json`` left in the
    executed plan)."""
    from pyspark.sql import functions as F

    frame = spark.range(0, 20_000).select(
        F.col("id").alias("n"),
        (F.col("id") * 2654435761 - 10**13).alias("big"),
        F.concat(F.lit("ключ-"), F.col("id").cast("string")).alias("text"),
        (F.col("id") / 7 - 1000).cast("decimal(20,4)").alias("amount"),
        F.timestamp_seconds(F.col("id") * 3607 - 10**9).alias("at"),
        F.date_add(F.lit("1001-01-01").cast("date"), F.col("id").cast("int")).alias("day"),
        F.unhex(F.hex(F.col("id") * 48271)).alias("raw"),
        (F.col("id") % 2 == 0).alias("flag"),
    )
    keys = ["big", "text", "amount", "at", "day", "raw", "flag"]
    previous = str(spark.conf.get("spark.sql.ansi.enabled", "false"))
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        _check_key_filter_condition(spark, frame, [["n"], ["text"], keys])
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)


def test_a_local_job_without_shuffle_partitions_gets_two_a_core_and_a_set_value_stays(spark: SparkSession) -> None:
    """The apply's session: unset, ``spark.sql.shuffle.partitions`` becomes two per core of the local
    master; set by the application or the session, it is left as it is."""
    from airflow_provider_mysql_cdc.apply.iceberg_session import SHUFFLE_PARTITIONS, configure_shuffle_partitions

    before = str(spark.conf.get(SHUFFLE_PARTITIONS))
    try:
        spark.conf.unset(SHUFFLE_PARTITIONS)
        assert spark.conf.get(SHUFFLE_PARTITIONS, None) is None
        configure_shuffle_partitions(spark)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == str(2 * spark.sparkContext.defaultParallelism) == "4"
        spark.conf.set(SHUFFLE_PARTITIONS, "3")
        configure_shuffle_partitions(spark)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "3"
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, before)
