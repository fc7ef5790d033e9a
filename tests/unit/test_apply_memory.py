"""Sizing the apply's Spark memory from the staged rows (pure: no Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_provider_mysql_cdc.apply.memory import (
    BASE_HEAP_BYTES,
    GIB,
    MEMORY_STEP,
    MIB,
    ROW_HEAP_FACTOR,
    LargestRow,
    StagedFootprint,
    heap_needed,
    local_cores,
    parse_memory,
    plan_spark_memory,
    read_batch_rows,
    spark_memory,
    staged_footprint,
)
from airflow_provider_mysql_cdc.core.staging import SnapshotTableManifest, StagedFile, StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.errors import ConfigurationError, SparkMemoryTooSmallError
from airflow_provider_mysql_cdc.staging import SnapshotChunkWriter, Staging, WindowStagingWriter


def _footprint(row_bytes: int | None) -> StagedFootprint:
    largest = None if row_bytes is None else LargestRow(row_bytes, "shop.files", "window 7")
    return StagedFootprint("shop", "7..7", 10 * GIB, 3, largest)


def _file(table: str, max_row_bytes: int, size: int = 1000) -> StagedFile:
    return StagedFile(
        f"shop.{table}/v1/part-00000.parquet",
        "shop",
        table,
        1,
        10,
        size,
        "0" * 64,
        {},
        0,
        9,
        max_row_bytes=max_row_bytes,
    )


def test_the_footprint_keeps_the_largest_row_and_where_it_is() -> None:
    manifest = StagingManifest("shop", 7, "", "", "catch_up", "", 1, None, None, (_file("a", 5), _file("b", 900)))
    footprint = StagedFootprint("shop", "7..8").add(manifest, "window 7")
    later = StagingManifest("shop", 8, "", "", "catch_up", "", 1, None, None, (_file("c", 0, 50),))
    footprint = footprint.add(later, "window 8")  # 0: not recorded, never the largest
    assert footprint.largest == LargestRow(900, "shop.b", "window 7")
    assert (footprint.staged_bytes, footprint.files) == (2050, 3)


SCHEMA = arrow_schema([ColumnSpec("id", "int", primary_key=True), ColumnSpec("v", "longblob", charset="binary")])


def _publish_window(staging: Staging, window_id: int, row_bytes: int, snapshot_id: str) -> None:
    writer = WindowStagingWriter(staging, window_id)
    row = (1, b"w" * row_bytes, None, None, "c", "u:1", cdc_seq(window_id, 0), None)
    writer.add("db", "t", 1, SCHEMA, row, "c", cdc_seq(window_id, 0), approx_bytes=row_bytes)
    files = tuple(writer.finish())
    manifest = StagingManifest(
        "p", window_id, "", "", "catch_up", "", 1, None, None, files, snapshots={"db.t": snapshot_id}
    )
    writer.publish(manifest)


def _publish_snapshot(staging: Staging, snapshot_id: str, handoff_window: int, value_bytes: int) -> None:
    writer = SnapshotChunkWriter(staging, snapshot_id, "db", "t", 0, label="chunk 0")
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "v": b"s" * value_bytes, "_cdc_op": "r", "_cdc_seq": cdc_seq(0, 0)}], schema=SCHEMA
    )
    writer.add_batch("db", "t", 1, SCHEMA, batch, "r", cdc_seq(0, 0))
    chunk = {"database": "db", "table": "t", "chunk_no": 0}
    manifest = StagingManifest(
        "p",
        0,
        "",
        "",
        "snapshot",
        snapshot_id,
        0,
        None,
        None,
        tuple(writer.finish()),
        kind="snapshot",
        snapshot_id=snapshot_id,
        chunk=chunk,
        attempt=writer.attempt,
        handoff_window=handoff_window,
    )
    uri = writer.publish(manifest)
    entry = {"chunk": chunk, "frontier": "", "manifest": staging.relative_path(uri), "rows": 1}
    staging.publish_snapshot_table_manifest(
        SnapshotTableManifest("p", snapshot_id, "db", "t", handoff_window, (entry,))
    )


def test_the_footprint_of_windows_counts_the_snapshots_they_load(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    _publish_snapshot(staging, "s1", 1, 5 * MIB)
    _publish_window(staging, 1, 2 * MIB, "s1")
    _publish_window(staging, 2, 3 * MIB, "s1")
    first = staged_footprint(staging, 1, 1)  # window 1 is the snapshot's hand-off: the run loads it
    assert first.largest is not None and first.largest.table == "db.t"
    assert first.largest.where == "snapshot s1 chunk 0"
    assert 5 * MIB < first.largest.bytes < 5 * MIB + 1024  # the value plus 8 bytes a column and "r"
    assert first.files == 2 and first.windows == "1..1" and first.pipeline == "p"
    second = staged_footprint(staging, 2, 3)  # the snapshot is loaded by window 1's run; window 3 is missing
    assert second.largest == LargestRow(3 * MIB, "db.t", "window 2") and second.files == 1
    assert staged_footprint(staging, 4, 5) == StagedFootprint("p", "4..5")


#: (largest row, tasks at once, heap that died, heap that passed), in MiB (see ``apply.memory``).
MEASURED = [
    (64, 1, 1280, 1536),
    (64, 2, 2304, 2816),  # a few 64 MiB rows in the window
    (64, 2, 2816, 3072),  # sixteen 64 MiB rows in one window
    (128, 2, 3584, 4864),
]


def test_heap_grows_with_the_largest_row_and_the_tasks_running_at_once() -> None:
    assert heap_needed(0, 2) == BASE_HEAP_BYTES
    assert heap_needed(64 * MIB, 1) == 2048 * MIB
    assert heap_needed(64 * MIB, 2) == 3328 * MIB
    assert heap_needed(128 * MIB, 2) == 5888 * MIB
    assert heap_needed(64 * MIB, 4) - heap_needed(64 * MIB, 2) == 2 * ROW_HEAP_FACTOR * 64 * MIB
    for row, tasks, died, passed in MEASURED:  # every measurement, with a step to spare
        assert heap_needed(row * MIB, tasks) >= passed * MIB + MEMORY_STEP > died * MIB


def test_memory_settings_parse_and_print_as_spark_writes_them() -> None:
    assert parse_memory("2g", "x") == 2 * GIB
    assert parse_memory("1536m", "x") == 1536 * MIB
    assert parse_memory("2048", "x") == 2048 * MIB  # no unit: MiB, as spark-submit reads it
    assert spark_memory(2 * GIB + 1) == "2049m"
    with pytest.raises(ConfigurationError, match=r"spark\.driver\.memory='lots'"):
        parse_memory("lots", "spark.driver.memory")


def test_local_masters_and_their_task_slots() -> None:
    assert local_cores("local") == 1
    assert local_cores("local[3]") == 3
    assert (local_cores("local[*]") or 0) >= 1
    assert local_cores("local[2, 4]") == 2
    assert local_cores("yarn") is None and local_cores("spark://h:7077") is None


def test_reader_batches_are_bounded_by_bytes() -> None:
    assert read_batch_rows(100) == 4096
    assert read_batch_rows(1 * MIB) == 64
    assert read_batch_rows(64 * MIB) == 1


def test_ordinary_rows_change_nothing() -> None:
    assert plan_spark_memory(_footprint(None), "local[2]", {}) == {}
    assert plan_spark_memory(_footprint(2_000), "local[2]", {}) == {}
    assert plan_spark_memory(_footprint(2_000), "yarn", {}) == {}


def test_a_local_master_gets_the_driver_memory_its_rows_need() -> None:
    settings = plan_spark_memory(_footprint(64 * MIB), "local[2]", {}, physical_memory=24 * GIB)
    assert settings == {
        "spark.sql.parquet.columnarReaderBatchSize": "1",
        "spark.driver.memory": spark_memory(heap_needed(64 * MIB, 2)),
    }


def test_a_user_set_memory_that_is_too_small_is_a_named_error() -> None:
    with pytest.raises(SparkMemoryTooSmallError) as raised:
        plan_spark_memory(_footprint(64 * MIB), "local[2]", {}, driver_memory="1g")
    text = str(raised.value)
    for part in ("windows 7..7", "'shop'", "64.0 MiB", "shop.files", "window 7", "spark.driver.memory is 1g"):
        assert part in text
    assert f"set spark.driver.memory={spark_memory(heap_needed(64 * MIB, 2))}" in text
    big_enough = {"spark.driver.memory": "4g"}
    assert "spark.driver.memory" not in plan_spark_memory(_footprint(64 * MIB), "local[2]", big_enough)


def test_a_cluster_master_needs_the_executor_memory_set() -> None:
    with pytest.raises(SparkMemoryTooSmallError, match=r"set spark\.executor\.memory=2048m in the apply's conf"):
        plan_spark_memory(_footprint(64 * MIB), "yarn", {})
    with pytest.raises(
        SparkMemoryTooSmallError, match=r"spark\.executor\.memory is 1536m: set spark\.executor\.memory=3328m"
    ):
        plan_spark_memory(
            _footprint(64 * MIB), "k8s://https://k:443", {"spark.executor.cores": "2"}, executor_memory="1536m"
        )
    assert plan_spark_memory(_footprint(64 * MIB), "yarn", {"spark.executor.memory": "2048m"}) == {
        "spark.sql.parquet.columnarReaderBatchSize": "1"
    }


def test_rows_larger_than_the_machine_can_hold_locally_are_a_named_error() -> None:
    with pytest.raises(
        SparkMemoryTooSmallError, match="more than this machine's 4096m: apply these windows on a cluster"
    ):
        plan_spark_memory(_footprint(512 * MIB), "local[2]", {}, physical_memory=4 * GIB)
