"""WindowStagingWriter on the local filesystem: bounded buffering, atomic publish, discard."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from airflow_provider_mysql_cdc.capture.staging_writer import WindowStagingWriter, read_manifest, verify_manifest_files
from airflow_provider_mysql_cdc.core.staging import StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema

SCHEMA = arrow_schema([ColumnSpec("id", "int", primary_key=True)])


def _manifest(writer: WindowStagingWriter) -> StagingManifest:
    return StagingManifest(
        pipeline="p",
        window_id=writer.window_id,
        lower="",
        upper="",
        cutoff_rule="catch_up",
        cutoff_value="",
        transactions=0,
        first_commit_ts_us=None,
        last_commit_ts_us=None,
        files=tuple(writer.finish()),
    )


def test_rows_in_memory_stay_under_the_budget_across_tables(tmp_path: Path) -> None:
    writer = WindowStagingWriter(str(tmp_path), "p", 3, row_group_rows=10)
    peak = 0
    for position in range(95):
        table = f"t{position % 3}"
        writer.add("db", table, 1, SCHEMA, (position, None, "c", "u:1", cdc_seq(3, position), None), "c", position)
        peak = max(peak, sum(staged.buffered_rows() for staged in writer._files.values()))
    assert peak <= 10
    uri = writer.publish(_manifest(writer))
    assert uri.endswith("p/windows/00000003/_manifest.json")
    manifest = read_manifest(str(tmp_path), "p", 3)
    assert manifest is not None
    verify_manifest_files(str(tmp_path), manifest)
    ids: list[int] = []
    for staged in manifest.files:
        parquet = pq.ParquetFile(tmp_path / "p" / "windows" / "00000003" / staged.path)
        assert parquet.metadata.num_row_groups > 1
        ids += parquet.read().column("id").to_pylist()
    assert sorted(ids) == list(range(95))
    assert sum(staged.rows for staged in manifest.files) == 95
    assert not list((tmp_path / "p" / "windows" / "_tmp").iterdir())


def test_nothing_is_visible_before_publish_and_discard_leaves_no_trace(tmp_path: Path) -> None:
    writer = WindowStagingWriter(str(tmp_path), "p", 1)
    writer.add("db", "t", 1, SCHEMA, (1, None, "c", "u:1", cdc_seq(1, 0), None), "c", 0)
    files = writer.finish()
    assert read_manifest(str(tmp_path), "p", 1) is None
    assert not (tmp_path / "p" / "windows" / "00000001").exists()
    assert files[0].rows == 1
    writer.discard()
    assert not list((tmp_path / "p" / "windows" / "_tmp").iterdir())
    assert read_manifest(str(tmp_path), "p", 1) is None


def test_a_new_attempt_deletes_the_debris_of_a_crashed_one(tmp_path: Path) -> None:
    crashed = WindowStagingWriter(str(tmp_path), "p", 2)
    crashed.add("db", "t", 1, SCHEMA, (1, None, "c", "u:1", cdc_seq(2, 0), None), "c", 0)
    crashed.finish()  # the process "dies" here: no publish, no discard
    other_window = WindowStagingWriter(str(tmp_path), "p", 20)
    WindowStagingWriter(str(tmp_path), "p", 2)
    names = sorted(path.name for path in (tmp_path / "p" / "windows" / "_tmp").iterdir())
    assert len(names) == 2
    assert names[0].startswith("00000002-") and names[0] != Path(crashed.tmp_dir).name
    assert names[1] == Path(other_window.tmp_dir).name
