"""The staging writers on the local filesystem: bounded buffering, atomic publish, discard, snapshot chunks."""

from __future__ import annotations

import errno
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.core.staging import StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.errors import CorruptStagingError, StagingWriteError
from airflow_provider_mysql_cdc.staging import SnapshotChunkWriter, Staging, WindowStagingWriter, new_attempt_token
from tests.unit.staging_manifests import finished_manifest

SCHEMA = arrow_schema([ColumnSpec("id", "int", primary_key=True)])


def test_rows_in_memory_stay_under_the_budget_across_tables(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    writer = WindowStagingWriter(staging, 3, row_group_rows=10)
    peak = 0
    for position in range(95):
        table = f"t{position % 3}"
        writer.add(
            "db", table, 1, SCHEMA, (position, None, None, "c", "u:1", cdc_seq(3, position), None), "c", position
        )
        peak = max(peak, sum(staged.buffered_rows() for staged in writer._files.values()))
    assert peak <= 10
    uri = writer.publish(finished_manifest(writer))
    assert uri.endswith("p/windows/00000003/_manifest.json")
    manifest = staging.read_window_manifest(3)
    assert manifest is not None
    staging.verify_files(manifest)
    ids: list[int] = []
    for staged in manifest.files:
        parquet = pq.ParquetFile(tmp_path / "p" / "windows" / "00000003" / staged.path)
        assert parquet.metadata.num_row_groups > 1
        ids += parquet.read().column("id").to_pylist()
    assert sorted(ids) == list(range(95))
    assert sum(staged.rows for staged in manifest.files) == 95
    assert not list((tmp_path / "p" / "windows" / "_tmp").iterdir())


def test_nothing_is_visible_before_publish_and_discard_leaves_no_trace(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    writer = WindowStagingWriter(staging, 1)
    writer.add("db", "t", 1, SCHEMA, (1, None, None, "c", "u:1", cdc_seq(1, 0), None), "c", 0)
    files = writer.finish()
    assert staging.read_window_manifest(1) is None
    assert not (tmp_path / "p" / "windows" / "00000001").exists()
    assert files[0].rows == 1
    writer.discard()
    assert not list((tmp_path / "p" / "windows" / "_tmp").iterdir())
    assert staging.read_window_manifest(1) is None


def test_a_new_attempt_deletes_the_debris_of_a_crashed_one(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    crashed = WindowStagingWriter(staging, 2)
    crashed.add("db", "t", 1, SCHEMA, (1, None, None, "c", "u:1", cdc_seq(2, 0), None), "c", 0)
    crashed.finish()  # the process "dies" here: no publish, no discard
    other_window = WindowStagingWriter(staging, 20)
    WindowStagingWriter(Staging(str(tmp_path), "p"), 2)
    names = sorted(path.name for path in (tmp_path / "p" / "windows" / "_tmp").iterdir())
    assert len(names) == 2
    assert names[0].startswith("00000002-") and names[0] != Path(crashed.tmp_dir).name
    assert names[1] == Path(other_window.tmp_dir).name


def test_a_snapshot_chunk_publishes_batches_under_its_attempt_directory(tmp_path: Path) -> None:
    attempt = new_attempt_token()
    staging = Staging(str(tmp_path), "p")
    final = staging.chunk_dir("000001", "db", "t", 2, attempt)
    writer = SnapshotChunkWriter(staging, "000001", "db", "t", 2, label="chunk", attempt=attempt)
    assert writer.tmp_dir == f"{tmp_path}/p/snapshots/_tmp/000001.db.t.00002-{attempt}"
    ids = pa.array(range(5), pa.int32())
    batch = pa.RecordBatch.from_arrays(
        [
            ids,
            pa.nulls(5, SCHEMA.field("_cdc_invalid_values").type),
            pa.nulls(5, SCHEMA.field("_cdc_partial").type),
            pa.array(["r"] * 5),
            pa.nulls(5, pa.string()),
            pa.array(range(5), pa.int64()),
            pa.nulls(5, pa.timestamp("us", tz="UTC")),
        ],
        schema=SCHEMA,
    )
    writer.row_group_rows = 8
    for last_seq in (4, 9, 14):
        writer.add_batch("db", "t", 1, SCHEMA, batch, "r", last_seq)
    writer.add_batch("db", "t", 1, SCHEMA, batch.slice(0, 0), "r", 14)  # an empty batch is ignored
    files = writer.finish()
    assert [(f.rows, f.first_seq, f.last_seq, dict(f.op_counts)["r"]) for f in files] == [(15, 0, 14, 15)]
    manifest = StagingManifest(
        pipeline="p",
        window_id=0,
        lower="",
        upper="",
        cutoff_rule="snapshot",
        cutoff_value="000001",
        transactions=0,
        first_commit_ts_us=None,
        last_commit_ts_us=None,
        files=tuple(files),
        kind="snapshot",
        snapshot_id="000001",
        chunk={"database": "db", "table": "t", "chunk_no": 2},
        attempt=attempt,
        handoff_window=1,
    )
    uri = writer.publish(manifest)
    assert uri == f"{tmp_path}/p/snapshots/000001/db.t/chunk-00002-{attempt}/_manifest.json"
    published = staging.read_manifest_in(final)
    assert published == StagingManifest.from_json(manifest.to_json(), "here")
    staging.verify_files(manifest)
    assert pq.read_table(tmp_path / final / files[0].path).column("id").to_pylist() == list(range(5)) * 3
    # Batches are grouped into row groups of at least row_group_rows rows, whatever their size.
    metadata = pq.ParquetFile(tmp_path / final / files[0].path).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [10, 5]


def test_a_snapshot_manifest_without_its_chunk_identity_is_corrupt() -> None:
    text = StagingManifest("p", 0, "", "", "snapshot", "1", 0, None, None, kind="snapshot").to_json()
    with pytest.raises(CorruptStagingError, match="lacks its chunk identity"):
        StagingManifest.from_json(text, "m.json")
    with pytest.raises(CorruptStagingError, match="unknown manifest kind"):
        StagingManifest.from_json(text.replace('"kind": "snapshot"', '"kind": "mystery"'), "m.json")


class _FullDisk(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow.fs is untyped
    """The local filesystem, except that a Parquet file takes ``room`` bytes and then fails as a full
    disk does: the fault a write in the writer's thread must report (a real disk cannot be filled here)."""

    def __init__(self, room: int) -> None:
        self.local = pafs.LocalFileSystem()
        self.room = room

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        if not path.endswith(".parquet"):
            return self.local.open_output_stream(path)
        return pa.PythonFile(_FillingFile(open(path, "wb"), self.room), mode="w")  # the stream closes it

    def get_type_name(self) -> str:
        return "full-disk"

    def equals(self, other: Any) -> bool:
        return self is other

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return list(self.local.get_file_info(paths))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self.local.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.local.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("not here")

    def delete_file(self, path: str) -> None:
        self.local.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.local.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.local.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.local.open_input_stream(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self.local.open_input_file(path)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.local.open_append_stream(path)


class _FillingFile(io.RawIOBase):
    def __init__(self, file: io.BufferedWriter, room: int) -> None:
        self.file, self.room = file, room

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.file.write(data)

    def close(self) -> None:
        self.file.close()
        super().close()


def test_a_row_group_the_writing_thread_cannot_write_fails_the_window_and_discard_leaves_no_trace(
    tmp_path: Path,
) -> None:
    staging = Staging(str(tmp_path), "p")
    staging._opened = (pafs.PyFileSystem(_FullDisk(room=2_000)), staging.root)
    writer = WindowStagingWriter(staging, 1, row_group_rows=1_000)
    assert writer.background_writes
    with pytest.raises(StagingWriteError, match=r"cannot write .*\.parquet: .*No space left on device"):
        for position in range(5_000):  # the first row groups go to the thread; its error comes back
            row = (position, None, None, "c", "u:1", cdc_seq(1, position), None)
            writer.add("db", "t", 1, SCHEMA, row, "c", position)
        writer.finish()
    writer.discard()
    assert writer._writing is None
    assert not list((tmp_path / "p" / "windows" / "_tmp").iterdir())
    assert staging.read_window_manifest(1) is None
