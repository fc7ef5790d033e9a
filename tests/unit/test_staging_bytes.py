"""The staging writer's byte budget: big rows are written soon, as row groups of bounded bytes, and each
file records its largest row for the apply (rows: the ``approx_bytes`` they were added with; snapshot
batches: their ``row_sizes``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.core.staging import MANIFEST_FORMAT_VERSION, StagedFile, StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.staging import Staging, StagingWriter, WindowStagingWriter
from airflow_provider_mysql_cdc.staging.writer import row_group_slices, row_sizes
from tests.unit.staging_manifests import finished_manifest

SPECS = [ColumnSpec("id", "int", primary_key=True), ColumnSpec("v", "longblob", charset="binary")]
SCHEMA = arrow_schema(SPECS)
KIB = 1 << 10
#: What a row of ``_row`` holds besides its value, as ``row_sizes`` counts it: 8 per column, "c", "u:1".
ROW_OVERHEAD = 8 * len(SCHEMA) + len("c") + len("u:1")


def _row(position: int, size: int) -> tuple[object, ...]:
    """id, v, _cdc_invalid_values, _cdc_partial, _cdc_op, _cdc_gtid, _cdc_seq, _cdc_commit_ts."""
    return (position, bytes([position % 251]) * size, None, None, "c", "u:1", cdc_seq(1, position), None)


def test_buffered_bytes_stay_under_the_budget_plus_one_row_and_row_groups_are_bounded(tmp_path: Path) -> None:
    writer = WindowStagingWriter(Staging(str(tmp_path), "p"), 1, row_group_rows=1_000, row_group_bytes=64 * KIB)
    sizes = [(position * 7919) % (40 * KIB) + 1 for position in range(60)]
    peak = 0
    for position, size in enumerate(sizes):
        table = f"t{position % 2}"
        writer.add("db", table, 1, SCHEMA, _row(position, size), "c", cdc_seq(1, position), approx_bytes=size)
        peak = max(peak, writer._buffered_bytes)
        assert writer._buffered_bytes == sum(staged.buffered_bytes() for staged in writer._files.values())
    assert peak < 64 * KIB + max(sizes)
    manifest = finished_manifest(writer)
    writer.publish(manifest)
    values: dict[int, bytes] = {}
    for staged in manifest.files:
        parquet = pq.ParquetFile(tmp_path / "p" / "windows" / "00000001" / staged.path)
        assert parquet.metadata.num_row_groups > 1
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.read_row_group(group, columns=["id", "v"]).to_pylist()
            assert len(rows) == 1 or sum(len(row["v"]) for row in rows) <= 64 * KIB
            values.update({row["id"]: row["v"] for row in rows})
        expected = max(size for position, size in enumerate(sizes) if f"t{position % 2}" == staged.table)
        assert staged.max_row_bytes == expected  # the largest approx_bytes of a row added
    assert values == {position: _row(position, size)[1] for position, size in enumerate(sizes)}


def test_a_row_larger_than_the_budget_is_a_row_group_of_its_own(tmp_path: Path) -> None:
    writer = WindowStagingWriter(Staging(str(tmp_path), "p"), 1, row_group_bytes=16 * KIB)
    images = [_row(position, size)[:3] for position, size in enumerate([100, 50 * KIB, 200, 300])]
    writer.add_images("db", "t", 1, SCHEMA, images, ("c", "u:1", cdc_seq(1, 0), None), approx_bytes=51 * KIB)
    assert writer._buffered_bytes == 0  # over the budget: written at once
    manifest = finished_manifest(writer)
    writer.publish(manifest)
    parquet = pq.ParquetFile(tmp_path / "p" / "windows" / "00000001" / manifest.files[0].path)
    groups = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
    assert groups == [1, 1, 2]
    assert parquet.read(columns=["id"]).column("id").to_pylist() == [0, 1, 2, 3]
    assert manifest.files[0].max_row_bytes == 51 * KIB // 4  # each row's share of approx_bytes


def test_snapshot_batches_are_written_once_their_bytes_reach_the_budget(tmp_path: Path) -> None:
    writer = StagingWriter(
        Staging(str(tmp_path), "p"), "final", "tmp", "a-", label="chunk", row_group_rows=1_000, row_group_bytes=32 * KIB
    )
    written = 0
    for number in range(6):
        rows = [_row(number * 2 + i, 10 * KIB) for i in range(2)]
        batch = pa.RecordBatch.from_pylist([dict(zip(SCHEMA.names, row, strict=True)) for row in rows], schema=SCHEMA)
        writer.add_batch("db", "t", 1, SCHEMA, batch, "r", cdc_seq(0, number * 2 + 1))
        assert writer._buffered_bytes < 32 * KIB + batch.nbytes
        written += 2
    (staged,) = writer.finish()
    assert staged.rows == written
    assert staged.max_row_bytes == 10 * KIB + ROW_OVERHEAD
    parquet = pq.ParquetFile(tmp_path / "tmp" / f"a-{writer.attempt}" / staged.path)
    assert parquet.metadata.num_row_groups >= 3
    writer.discard()


def test_text_and_binary_columns_have_no_statistics(tmp_path: Path) -> None:
    writer = WindowStagingWriter(Staging(str(tmp_path), "p"), 1)
    writer.add("db", "t", 1, SCHEMA, _row(1, 100), "c", cdc_seq(1, 1), approx_bytes=100)
    manifest = finished_manifest(writer)
    writer.publish(manifest)
    metadata = pq.ParquetFile(tmp_path / "p" / "windows" / "00000001" / manifest.files[0].path).metadata
    columns = {metadata.schema.column(i).name: metadata.row_group(0).column(i) for i in range(metadata.num_columns)}
    assert columns["v"].statistics is None or not columns["v"].statistics.has_min_max
    assert columns["_cdc_op"].statistics is None or not columns["_cdc_op"].statistics.has_min_max
    assert columns["_cdc_seq"].statistics.has_min_max and columns["id"].statistics.has_min_max


def test_row_sizes_and_slices() -> None:
    table = pa.table({"id": [1, 2, 3, 4], "v": [b"a" * 10, None, b"b" * 30, b"c" * 5]})
    assert row_sizes(table).to_pylist() == [26, 16, 46, 21]
    assert row_group_slices(table, 1_000) == [(0, 4)]
    assert row_group_slices(table, 45) == [(0, 2), (2, 1), (3, 1)]


def test_budgets_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="row_group_bytes"):
        WindowStagingWriter(Staging(str(tmp_path), "p"), 1, row_group_bytes=0)


def _without_max_row_bytes(text: str) -> str:
    """A manifest's JSON as a writer before ``max_row_bytes`` wrote it: no such key, sealed again."""
    data = json.loads(text)
    del data["manifest_sha256"]
    for staged in data["files"]:
        del staged["max_row_bytes"]
    canonical = json.dumps(data, sort_keys=True, indent=2) + "\n"
    return (
        json.dumps(
            {**data, "manifest_sha256": hashlib.sha256(canonical.encode()).hexdigest()}, sort_keys=True, indent=2
        )
        + "\n"
    )


def test_manifests_without_max_row_bytes_are_read_and_compare_equal_once_it_is_left_out() -> None:
    staged = StagedFile("db.t/v1/part-00000.parquet", "db", "t", 1, 2, 100, "0" * 64, {"c": 2}, 5, 6, 0, 4096)
    manifest = StagingManifest("p", 1, "", "", "catch_up", "", 1, None, None, (staged,))
    assert manifest.records_max_row_bytes()
    old = StagingManifest.from_json(_without_max_row_bytes(manifest.to_json()), "old.json")
    assert old.format_version == MANIFEST_FORMAT_VERSION == 2
    assert old.files[0].max_row_bytes == 0 and not old.records_max_row_bytes()
    assert old.to_json() != manifest.to_json()
    assert old.to_json() == manifest.without_max_row_bytes().to_json()
