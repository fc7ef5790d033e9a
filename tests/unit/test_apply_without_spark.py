"""The Hadoop-catalog metadata reader of ``apply.without_spark`` on metadata folders laid out by hand
(the versions, hints and compressions Iceberg's HadoopTableOperations reads), and which Spark
properties make a Hadoop catalog. Files the apply job really wrote are read in
tests/integration/test_apply_without_spark.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from airflow_provider_mysql_cdc.apply.plan import AppliedState
from airflow_provider_mysql_cdc.apply.without_spark import (
    MetadataUnreadable,
    read_hadoop_table,
    target_location,
)
from airflow_provider_mysql_cdc.operators.apply import apply_spark_conf, hadoop_warehouse

TARGET = "`lake`.`shop`.`orders`"
APPLIED = AppliedState(
    "shop", window_id=4, upper="u:1-9", snapshot_id="000001", snapshot_chunks_loaded=2, snapshot_chunks=2
)


def _metadata(current: int | None, snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format-version": 2, "current-snapshot-id": -1 if current is None else current, "snapshots": snapshots}


def _snapshot(snapshot_id: int, parent: int | None, summary: dict[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {"snapshot-id": snapshot_id, "summary": {"operation": "overwrite", **summary}}
    if parent is not None:
        found["parent-snapshot-id"] = parent
    return found


def _write(folder: Path, name: str, metadata: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps(metadata).encode()
    (folder / name).write_bytes(gzip.compress(data) if ".gz" in name else data)


def _read(warehouse: Path) -> Any:
    return read_hadoop_table(pafs.LocalFileSystem(), str(warehouse), TARGET)


def test_the_table_lives_under_its_namespace_in_the_warehouse() -> None:
    assert target_location("/wh/", TARGET) == "/wh/shop/orders"
    assert target_location("bucket/wh", "lake.a.b.t") == "bucket/wh/a/b/t"
    with pytest.raises(MetadataUnreadable):
        target_location("/wh", "lake.orders")


def test_no_metadata_folder_or_no_version_is_no_table(tmp_path: Path) -> None:
    assert not _read(tmp_path).exists
    (tmp_path / "shop" / "orders" / "metadata").mkdir(parents=True)
    assert not _read(tmp_path).exists


def test_versions_past_the_hint_are_read_and_gzip_files_too(tmp_path: Path) -> None:
    folder = tmp_path / "shop" / "orders" / "metadata"
    _write(folder, "v1.metadata.json", _metadata(None, []))
    _write(folder, "v2.metadata.json", _metadata(10, [_snapshot(10, None, {"other": "x"})]))
    _write(
        folder, "v3.gz.metadata.json", _metadata(11, [_snapshot(10, None, {}), _snapshot(11, 10, APPLIED.to_summary())])
    )
    (folder / "version-hint.text").write_text("2\n")
    read = _read(tmp_path)
    assert read.exists and read.state == APPLIED


def test_without_a_hint_the_highest_version_counts(tmp_path: Path) -> None:
    folder = tmp_path / "shop" / "orders" / "metadata"
    _write(folder, "v1.metadata.json", _metadata(10, [_snapshot(10, None, APPLIED.to_summary())]))
    _write(folder, "v7.metadata.json.gz", _metadata(None, []))
    read = _read(tmp_path)
    assert read.exists and read.state is None


def test_commits_without_cdc_properties_on_top_are_passed(tmp_path: Path) -> None:
    folder = tmp_path / "shop" / "orders" / "metadata"
    snapshots = [
        _snapshot(1, None, APPLIED.to_summary()),
        _snapshot(2, 1, {"operation": "replace"}),
        _snapshot(3, 2, {"operation": "replace"}),
    ]
    _write(folder, "v1.metadata.json", _metadata(3, snapshots))
    assert _read(tmp_path).state == APPLIED


def test_an_expired_apply_commit_or_a_broken_hint_is_left_to_the_job(tmp_path: Path) -> None:
    folder = tmp_path / "shop" / "orders" / "metadata"
    _write(folder, "v1.metadata.json", _metadata(3, [_snapshot(3, 2, {"operation": "replace"})]))
    with pytest.raises(MetadataUnreadable, match="expired"):
        _read(tmp_path)
    (folder / "version-hint.text").write_text("5")
    with pytest.raises(MetadataUnreadable, match="version 5"):
        _read(tmp_path)
    _write(
        folder,
        "v5.metadata.json",
        {"current-snapshot-id": 1, "snapshots": [_snapshot(1, None, {"cdc.pipeline": "shop"})]},
    )
    with pytest.raises(MetadataUnreadable, match="unreadable"):
        _read(tmp_path)
    _write(folder, "v6.metadata.json", {"current-snapshot-id": 1, "snapshots": [{"summary": {}}]})
    with pytest.raises(MetadataUnreadable, match="KeyError"):
        _read(tmp_path)


def test_only_a_hadoop_catalog_is_read_without_spark() -> None:
    assert hadoop_warehouse("lake", apply_spark_conf("lake", "/data/wh", None)) == "/data/wh"
    assert (
        hadoop_warehouse("lake", apply_spark_conf("lake", None, {"type": "hadoop", "warehouse": "s3a://b/wh"}))
        == "s3a://b/wh"
    )
    assert hadoop_warehouse("lake", apply_spark_conf("lake", None, {"type": "rest", "uri": "http://c"})) is None
    assert hadoop_warehouse("other", apply_spark_conf("lake", "/data/wh", None)) is None
    custom = apply_spark_conf("lake", None, {"type": "hadoop", "warehouse": "/wh", "catalog-impl": "x.Catalog"})
    assert hadoop_warehouse("lake", custom) is None
