"""Big values and big transactions: 64 MiB LONGBLOBs through snapshot, capture and the apply's
spark-submit, and a 1 GiB transaction through capture and apply, with memory bounded by configuration.

A server of its own allows 1 GiB packets (``max_allowed_packet``, MySQL's maximum); the values are
made server-side (``RANDOM_BYTES``), so the test process never holds a transaction. Snapshot and
capture run in child processes whose peak RSS is checked (:mod:`tests.integration.pipeline_child`).
The 64 MiB values take about 60 s on a 2-core machine shared with other work. The 1 GiB transaction
(about 50 s, and GBs of disk: 1 GiB of binlog, its staging and warehouse) is marked ``slow`` and runs
only with ``MYSQL_CDC_SLOW_TESTS=1``, like the other slow cases.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.apply.memory import MIB, heap_needed, spark_memory, staged_footprint
from airflow_provider_mysql_cdc.errors import SparkMemoryTooSmallError
from airflow_provider_mysql_cdc.staging import DEFAULT_ROW_GROUP_BYTES, Staging
from tests.conftest import INSTANCE_PREFIX
from tests.integration.pipeline_child import run_in_child
from tests.mysql_servers import MySqlTestServer, running_local

pytestmark = pytest.mark.mysql

#: MySQL's largest packet: a row event (an UPDATE holds the row twice) must fit in it.
MAX_ALLOWED_PACKET = 1 << 30
BIG = 64 * MIB
SESSION = ("SET SESSION group_concat_max_len = 1073741824", "SET SESSION cte_max_recursion_depth = 10000000")


def random_bytes_sql(size: int) -> str:
    """An expression of ``size`` random bytes (a multiple of 1 KiB) made by the server."""
    return (
        "(SELECT GROUP_CONCAT(RANDOM_BYTES(1024) SEPARATOR '') FROM (WITH RECURSIVE s(n) AS "
        f"(SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {size // 1024}) SELECT n FROM s) AS k)"
    )


def capture_rss_bound_mb(after_imports_mb: float, row_group_bytes: int, largest_event_bytes: int) -> float:
    """What a capture may hold at once: the buffered rows (up to ``row_group_bytes`` plus the event that
    crossed it), their Arrow copy and the Parquet writer's page and compressed page while a row group is
    written (each at most a row group or one row), so 4 x (budget + event); and the largest row event
    read (PyMySQL joins its packets, then copies them: twice), its decoded images and one more for the
    allocators' slack: 4 x event more. Measured: 620 to 748 MB with 128 MiB UPDATE events, 398 and 416 MB
    for 16 MiB rows."""
    return after_imports_mb + (4 * (row_group_bytes + largest_event_bytes) + 4 * largest_event_bytes) / MIB


@pytest.fixture(scope="module")
def big_mysql() -> Iterator[MySqlTestServer]:
    """A local server that takes packets (and so row events and values) of up to 1 GiB."""
    with running_local(f"{INSTANCE_PREFIX}-bigvalues", {"max_allowed_packet": str(MAX_ALLOWED_PACKET)}) as server:
        yield server


#: Per row: SHA-256 of the value, its length, the note.
Digests = dict[int, tuple[str | None, int | None, str | None]]


def mysql_digests(server: MySqlTestServer, table: str) -> Digests:
    rows = server.execute(f"SELECT id, SHA2(v, 256), LENGTH(v), note FROM {table}")
    return {int(row[0]): (row[1], None if row[2] is None else int(row[2]), row[3]) for row in rows}


def iceberg_digests(warehouse: Path, namespace: str, table: str) -> Digests:
    """The Iceberg table's rows read with pyiceberg (an independent reader), batch by batch, as
    (sha256, length, note)."""
    from pyiceberg.table import StaticTable

    metadata = warehouse / namespace / table / "metadata"
    version = (metadata / "version-hint.text").read_text().strip()
    scan = StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json")).scan(
        selected_fields=("id", "v", "note")
    )
    digests: Digests = {}
    for batch in scan.to_arrow_batch_reader():
        for row in batch.to_pylist():
            value = row["v"]
            digests[row["id"]] = (
                None if value is None else hashlib.sha256(value).hexdigest(),
                None if value is None else len(value),
                row["note"],
            )
    return digests


def apply_operator(tmp_path: Path, pipeline: str, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> Any:
    """``SparkApplyOperator`` as the example DAG runs it: spark-submit on a ``local[2]`` master."""
    from airflow_provider_mysql_cdc.operators.apply import SparkApplyOperator
    from tests.spark_session import iceberg_jars

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return SparkApplyOperator(
        task_id="apply",
        pipeline=pipeline,
        staging_uri=str(tmp_path / "staging"),
        windows="1",
        warehouse=str(tmp_path / "warehouse"),
        jars=",".join(str(jar) for jar in iceberg_jars()),
        asset_alias=None,
        conf={
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.local.dir": str(tmp_path / "spark-local"),
        },
        **kwargs,
    )


@pytest.mark.spark
@pytest.mark.airflow
def test_64_mib_values_pass_snapshot_capture_and_apply(
    big_mysql: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, name = "bigvalues", "bigvalues"
    big_mysql.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v LONGBLOB, note VARCHAR(20))",
        f"INSERT INTO {db}.t VALUES (3, 'small', 'small'), (4, NULL, 'null')",
    )
    for key in (1, 2):
        big_mysql.execute(*SESSION, f"INSERT INTO {db}.t VALUES ({key}, {random_bytes_sql(BIG)}, 'big')")
    request = {"name": name, "tables": [f"{db}.*"], "run_id": "run-1"}

    snapshot = run_in_child(big_mysql, tmp_path, "snapshot", **request)
    # two 64 MiB rows, read, decoded and staged one at a time: about 5 x 64 MiB at most at once
    assert snapshot["peak_rss_mb"] < snapshot["rss_after_imports_mb"] + 6 * BIG / MIB, snapshot

    # The user's case: big rows copied by INSERT ... SELECT, then an UPDATE of a value, an UPDATE of
    # another column of a big row (its row event holds the value twice) and a DELETE.
    big_mysql.execute(f"INSERT INTO {db}.t SELECT id + 10, v, 'copy' FROM {db}.t WHERE id IN (1, 2)")
    big_mysql.execute(*SESSION, f"UPDATE {db}.t SET v = {random_bytes_sql(BIG)} WHERE id = 11")
    big_mysql.execute(f"UPDATE {db}.t SET note = 'touched' WHERE id = 12", f"DELETE FROM {db}.t WHERE id = 2")
    capture = run_in_child(big_mysql, tmp_path, "capture", **request, overrides={"replica_server_id": 4_700_001})
    assert capture["result"]["window_id"] == 1
    assert capture["result"]["op_counts"] == {"r": 0, "c": 2, "u": 2, "d": 1}
    bound = capture_rss_bound_mb(capture["rss_after_imports_mb"], DEFAULT_ROW_GROUP_BYTES, 2 * BIG)
    assert capture["peak_rss_mb"] < bound, (capture, bound)

    manifest = Staging(str(tmp_path / "staging"), name).read_window_manifest(1)
    assert manifest is not None
    largest = max(f.max_row_bytes for f in manifest.files)
    assert BIG < largest < BIG + 1024

    # Memory the user set too small: a named error before anything is submitted.
    with pytest.raises(SparkMemoryTooSmallError) as too_small:
        apply_operator(tmp_path, name, monkeypatch, driver_memory="1g").execute({"run_id": "apply-1"})
    footprint = staged_footprint(Staging(str(tmp_path / "staging"), name), 1, 1)  # the window and the snapshot it loads
    assert footprint.largest is not None and footprint.largest.bytes >= largest
    needed = spark_memory(heap_needed(footprint.largest.bytes, 2))
    message = str(too_small.value)
    assert f"set spark.driver.memory={needed}" in message and f"{db}.t" in message and "windows 1..1" in message
    assert not (tmp_path / "warehouse").exists()

    # Sized by the operator itself (local[2]: two tasks at once).
    operator = apply_operator(tmp_path, name, monkeypatch)
    report = operator.execute({"run_id": "apply-2"})
    assert report["tables"][f"{db}.t"]["status"] == "applied", report
    assert operator._driver_memory == needed
    expected = mysql_digests(big_mysql, f"{db}.t")
    assert sorted(expected) == [1, 3, 4, 11, 12]
    assert iceberg_digests(tmp_path / "warehouse", db, "t") == expected


@pytest.mark.spark
@pytest.mark.airflow
@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("MYSQL_CDC_SLOW_TESTS") != "1", reason="takes minutes and several GB of disk: MYSQL_CDC_SLOW_TESTS=1"
)
def test_a_1_gib_transaction_is_captured_in_bounded_memory_and_applied(
    big_mysql: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, name, rows, size = "bigtx", "bigtx", 64, 16 * MIB
    big_mysql.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v LONGBLOB, note VARCHAR(20))",
    )
    frontier = str(big_mysql.execute("SELECT @@GLOBAL.gtid_executed")[0][0]).replace("\n", "")
    big_mysql.execute(  # one transaction of 64 rows of 16 MiB (1 KiB of random bytes repeated)
        f"INSERT INTO {db}.t SELECT n, REPEAT(RANDOM_BYTES(1024), {size // 1024}), 'tx' FROM "
        f"(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {rows}) SELECT n FROM s) AS k"
    )
    capture = run_in_child(
        big_mysql,
        tmp_path,
        "capture",
        name=name,
        tables=[f"{db}.*"],
        run_id="run-1",
        overrides={"initial_frontier": frontier, "replica_server_id": 4_700_002},
    )
    assert capture["result"]["op_counts"] == {"r": 0, "c": rows, "u": 0, "d": 0}
    bound = capture_rss_bound_mb(capture["rss_after_imports_mb"], DEFAULT_ROW_GROUP_BYTES, size)
    assert capture["peak_rss_mb"] < bound, (capture, bound)

    manifest = Staging(str(tmp_path / "staging"), name).read_window_manifest(1)
    assert manifest is not None
    staged: Digests = {}
    for staged_file in manifest.files:
        parquet = pq.ParquetFile(tmp_path / "staging" / name / "windows" / "00000001" / staged_file.path)
        assert parquet.metadata.num_row_groups >= rows * size // DEFAULT_ROW_GROUP_BYTES  # row groups stay bounded
        for group in range(parquet.metadata.num_row_groups):  # one row group at a time
            for row in parquet.read_row_group(group, columns=["id", "v", "note"]).to_pylist():
                staged[row["id"]] = (hashlib.sha256(row["v"]).hexdigest(), len(row["v"]), row["note"])
    expected = mysql_digests(big_mysql, f"{db}.t")
    assert staged == expected

    # Applied with the memory the operator sizes from the largest row (16 MiB), not the transaction's size:
    # the Iceberg writer checks its row group from the first row on (merge_sql.TARGET_PROPERTIES).
    operator = apply_operator(tmp_path, name, monkeypatch)
    report = operator.execute({"run_id": "apply-1"})
    assert report["tables"][f"{db}.t"]["status"] == "applied", report
    assert operator._driver_memory == spark_memory(heap_needed(max(f.max_row_bytes for f in manifest.files), 2))
    assert iceberg_digests(tmp_path / "warehouse", db, "t") == expected
