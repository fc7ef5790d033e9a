"""The staging area: every staged path, its URI and Spark forms, one filesystem, atomic writes, cleanup."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings
from airflow_provider_mysql_cdc.core.staging import SnapshotTableManifest, StagedFile, StagingManifest, cdc_seq
from airflow_provider_mysql_cdc.core.types import ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.errors import ConfigurationError, CorruptStagingError, StagingWriteError
from airflow_provider_mysql_cdc.staging import (
    SnapshotChunkWriter,
    Staging,
    WindowStagingWriter,
    write_text_to_uri,
)
from airflow_provider_mysql_cdc.staging import area as staging_area

SCHEMA = arrow_schema([ColumnSpec("id", "int", primary_key=True)])


def _window_manifest(pipeline: str, window_id: int, files: tuple[StagedFile, ...] = ()) -> StagingManifest:
    return StagingManifest(pipeline, window_id, "", "", "catch_up", "", 0, None, None, files=files)


def _chunk_manifest(pipeline: str, attempt: str, files: tuple[StagedFile, ...] = ()) -> StagingManifest:
    return StagingManifest(
        pipeline=pipeline,
        window_id=0,
        lower="",
        upper="",
        cutoff_rule="snapshot",
        cutoff_value="000001",
        transactions=0,
        first_commit_ts_us=None,
        last_commit_ts_us=None,
        files=files,
        kind="snapshot",
        snapshot_id="000001",
        chunk={"database": "db", "table": "t", "chunk_no": 7},
        attempt=attempt,
        handoff_window=1,
    )


def _files(tmp_path: Path) -> list[str]:
    return sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file())


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URIs the staging module opened a filesystem for, in order."""
    calls: list[str] = []
    real = staging_area.open_filesystem

    def counting(uri: str, object_store: ObjectStoreSettings | None = None) -> tuple[pafs.FileSystem, str]:
        calls.append(uri)
        return real(uri, object_store)

    monkeypatch.setattr(staging_area, "open_filesystem", counting)
    return calls


def test_every_kind_of_staged_path() -> None:
    staging = Staging("/data/staging", "shop")
    assert staging.pipeline_dir() == "shop"
    assert staging.window_dir(42) == "shop/windows/00000042"
    assert staging.window_manifest_path(42) == "shop/windows/00000042/_manifest.json"
    assert staging.window_attempts_dir() == "shop/windows/_tmp"
    assert staging.window_attempt_prefix(42) == "00000042-"
    assert staging.attempt_dir("shop/windows/_tmp", "00000042-", "abc") == "shop/windows/_tmp/00000042-abc"
    assert staging.snapshot_dir("000003") == "shop/snapshots/000003"
    assert staging.snapshot_attempts_dir() == "shop/snapshots/_tmp"
    assert staging.snapshot_table_dir("000003", "db", "t") == "shop/snapshots/000003/db.t"
    assert staging.snapshot_table_manifest_path("000003", "db", "t") == "shop/snapshots/000003/db.t/_manifest.json"
    assert staging.chunk_dir("000003", "db", "t", 12, "abc") == "shop/snapshots/000003/db.t/chunk-00012-abc"
    assert staging.chunk_attempt_prefix("000003", "db", "t", 12) == "000003.db.t.00012-"
    assert staging.data_file_name("db", "t", 4, 2) == "db.t/v4/part-00002.parquet"
    assert staging.file_in("shop/windows/00000042", "db.t/v4/part-00002.parquet") == (
        "shop/windows/00000042/db.t/v4/part-00002.parquet"
    )
    assert staging.apply_report_path("manual__2026-01-01T00:00:00+00:00", 3) == (
        "shop/apply-reports/manual__2026-01-01T00_00_00_00_00-try3.json"
    )
    probe = staging.write_probe_path("shop/windows/_tmp")
    assert probe.startswith("shop/windows/_tmp/.write-probe-")
    assert probe != staging.write_probe_path("shop/windows/_tmp")


def test_a_manifest_names_its_own_directory() -> None:
    staging = Staging("/data/staging", "shop")
    assert staging.unit_dir(_window_manifest("shop", 5)) == "shop/windows/00000005"
    assert staging.unit_dir(_chunk_manifest("shop", "abc")) == "shop/snapshots/000001/db.t/chunk-00007-abc"
    with pytest.raises(CorruptStagingError, match="a manifest of pipeline 'other' was found in the staging of"):
        staging.unit_dir(_window_manifest("other", 5))


@pytest.mark.parametrize(
    ("uri", "spark_root"),
    [
        ("/data/staging", "file:///data/staging"),
        ("/data/staging/", "file:///data/staging"),
        ("file:///data/staging", "file:///data/staging"),
        ("s3://bucket/cdc", "s3a://bucket/cdc"),
        ("s3://bucket/cdc/", "s3a://bucket/cdc"),
        ("s3a://bucket/cdc", "s3a://bucket/cdc"),
        ("gs://bucket/cdc", "gs://bucket/cdc"),
        ("hdfs://namenode:8020/cdc", "hdfs://namenode:8020/cdc"),
    ],
)
def test_uri_and_spark_forms(uri: str, spark_root: str, opened: list[str]) -> None:
    staging = Staging(uri, "shop")
    base = uri.rstrip("/")
    relative = staging.file_in(staging.window_dir(3), "db.t/v1/part-00000.parquet")
    assert staging.uri_of(relative) == f"{base}/shop/windows/00000003/db.t/v1/part-00000.parquet"
    assert staging.spark_path(relative) == f"{spark_root}/shop/windows/00000003/db.t/v1/part-00000.parquet"
    assert staging.window_manifest_uri(3) == f"{base}/shop/windows/00000003/_manifest.json"
    chunk_manifest_uri = staging.uri_of(staging.manifest_path(staging.chunk_dir("000001", "db", "t", 0, "abc")))
    assert staging.manifest_dir_of(chunk_manifest_uri) == "shop/snapshots/000001/db.t/chunk-00000-abc"
    assert staging.relative_path(chunk_manifest_uri) == "shop/snapshots/000001/db.t/chunk-00000-abc/_manifest.json"
    assert staging.manifest_dir_of("s3://elsewhere/shop/windows/00000003/_manifest.json") is None
    assert staging.manifest_dir_of(staging.uri_of("shop/windows/00000003/data.json")) is None
    assert staging.relative_path("gs://elsewhere/x") == "gs://elsewhere/x"
    manifest = _chunk_manifest("shop", "abc")
    assert staging.spark_files(manifest) == []
    assert opened == []  # naming paths never touches the filesystem


def test_the_filesystem_is_opened_once(tmp_path: Path, opened: list[str]) -> None:
    staging = Staging(str(tmp_path), "p")
    staging.require_writable(staging.window_attempts_dir())
    writer = WindowStagingWriter(staging, 1)
    writer.add("db", "t", 1, SCHEMA, (1, None, None, "c", "u:1", cdc_seq(1, 0), None), "c", 0)
    uri = writer.publish(_window_manifest("p", 1, tuple(writer.finish())))
    manifest = staging.read_window_manifest(1)
    assert manifest is not None
    staging.verify_files(manifest)
    staging.write_text(staging.apply_report_path("run", 1), "{}\n")
    assert staging.read_text(staging.apply_report_path("run", 1)) is not None
    assert uri == staging.window_manifest_uri(1)
    assert staging.path_of("p") == f"{tmp_path}/p"
    assert opened == [str(tmp_path)]


def test_an_unusable_uri_fails_on_first_use_with_a_configuration_error() -> None:
    staging = Staging("nosuchscheme://bucket/cdc", "p")
    assert staging.window_dir(1) == "p/windows/00000001"
    with pytest.raises(ConfigurationError, match="staging URI 'nosuchscheme://bucket/cdc' is not usable"):
        staging.read_window_manifest(1)


def test_small_files_are_written_atomically(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    relative = staging.apply_report_path("run-1", 1)
    assert staging.read_text(relative) is None
    assert staging.write_text(relative, "first\n") == f"{tmp_path}/p/apply-reports/run-1-try1.json"
    assert staging.write_text(relative, "second\n") == f"{tmp_path}/p/apply-reports/run-1-try1.json"
    assert staging.read_text(relative) == ("second\n", f"{tmp_path}/p/apply-reports/run-1-try1.json")
    write_text_to_uri(f"{tmp_path}/elsewhere/report.json", "third\n")
    assert (tmp_path / "elsewhere" / "report.json").read_text() == "third\n"
    assert _files(tmp_path) == ["elsewhere/report.json", "p/apply-reports/run-1-try1.json"]  # no temporary names


def test_publish_leaves_no_temporary_file(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    writer = SnapshotChunkWriter(staging, "000001", "db", "t", 7, label="chunk 7")
    writer.add("db", "t", 1, SCHEMA, (1, None, None, "r", None, cdc_seq(0, 0), None), "r", 0)
    manifest = _chunk_manifest("p", writer.attempt, tuple(writer.finish()))
    uri = writer.publish(manifest)
    chunk_dir = staging.chunk_dir("000001", "db", "t", 7, writer.attempt)
    assert uri == staging.uri_of(staging.manifest_path(chunk_dir))
    assert _files(tmp_path) == [f"{chunk_dir}/_manifest.json", f"{chunk_dir}/db.t/v1/part-00000.parquet"]
    assert list((tmp_path / "p" / "snapshots" / "_tmp").iterdir()) == []
    assert staging.read_manifest_in(chunk_dir) == StagingManifest.from_json(manifest.to_json(), "here")
    (spark_file,) = staging.spark_files(manifest)
    assert spark_file == (f"file://{tmp_path}/{chunk_dir}/db.t/v1/part-00000.parquet", manifest.files[0])

    # The table manifest names the chunk manifest relative to the staging root; readers follow it.
    entry = {"chunk": {}, "frontier": "", "manifest": staging.relative_path(uri), "rows": 1}
    table = SnapshotTableManifest("p", "000001", "db", "t", 1, (entry,))
    table_uri = staging.publish_snapshot_table_manifest(table)
    assert table_uri == staging.uri_of(staging.snapshot_table_manifest_path("000001", "db", "t"))
    published = tmp_path / staging.snapshot_table_manifest_path("000001", "db", "t")
    stamp = published.stat().st_mtime_ns
    assert staging.publish_snapshot_table_manifest(table) == table_uri  # the same bytes are not rewritten
    assert published.stat().st_mtime_ns == stamp
    assert staging.read_snapshot_table_manifest("000001", "db", "t") == table
    assert staging.read_chunk_manifest(entry) == staging.read_manifest_in(chunk_dir)
    assert not [name for name in _files(tmp_path) if ".tmp-" in name]


def test_abandoned_attempts_and_unreferenced_chunks_are_deleted(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path), "p")
    attempts = tmp_path / staging.window_attempts_dir()
    for name in ("00000002-crashed1", "00000002-crashed2", "00000020-running"):
        (attempts / name / "db.t" / "v1").mkdir(parents=True)
        (attempts / name / "db.t" / "v1" / "part-00000.parquet").write_bytes(b"partial")
    staging.delete_abandoned_attempts(staging.window_attempts_dir(), staging.window_attempt_prefix(2), "window 2")
    assert sorted(path.name for path in attempts.iterdir()) == ["00000020-running"]

    kept, lost = (staging.chunk_dir("000001", "db", "t", 7, token) for token in ("kept", "lost"))
    for chunk_dir in (kept, lost):
        (tmp_path / chunk_dir).mkdir(parents=True)
        (tmp_path / chunk_dir / "_manifest.json").write_text("{}")
    staging.write_text(staging.snapshot_table_manifest_path("000001", "db", "t"), "{}")
    staging.delete_unreferenced_chunk_attempts("000001", "db", "t", [staging.manifest_path(kept)])
    assert sorted(path.name for path in (tmp_path / staging.snapshot_table_dir("000001", "db", "t")).iterdir()) == [
        "_manifest.json",
        "chunk-00007-kept",
    ]

    staging.delete_published(_chunk_manifest("p", "kept"))
    assert not (tmp_path / kept).exists()
    staging.delete_pipeline()
    assert not (tmp_path / "p").exists()


def test_require_writable_probes_and_leaves_nothing(tmp_path: Path) -> None:
    staging = Staging(str(tmp_path / "staging"), "p")
    staging.require_writable(staging.snapshot_attempts_dir())
    assert (tmp_path / "staging" / "p" / "snapshots" / "_tmp").is_dir()
    assert _files(tmp_path) == []
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    unwritable = Staging(str(blocker / "staging"), "p")
    with pytest.raises(StagingWriteError, match="is not writable"):
        unwritable.require_writable(unwritable.window_attempts_dir())


def test_a_staging_root_belongs_to_one_registration_of_its_pipeline(tmp_path: Path) -> None:
    from airflow_provider_mysql_cdc.errors import MetadataStoreMismatchError

    staging = Staging(str(tmp_path), "shop")
    first = {"pipeline": "shop", "initial_frontier": "u:1-5", "registered_at": "2026-11-25T06:00:00+00:00"}
    staging.require_registration(None, "sqlite:///a.db")  # a new pipeline: nothing recorded yet
    assert not (tmp_path / "shop" / "_registration.json").exists()
    staging.require_registration(first, "sqlite:///a.db")  # registered: recorded
    staging.require_registration(first, "sqlite:///a.db")  # the same store again: fine
    with pytest.raises(MetadataStoreMismatchError, match=r"sqlite:///b\.db has no record of it, but its staging root"):
        staging.require_registration(None, "sqlite:///b.db")
    again = {**first, "registered_at": "2026-11-25T07:00:00+00:00", "initial_frontier": "u:1-9"}
    with pytest.raises(MetadataStoreMismatchError, match=r"registered it at 2026-11-25T07:00:00\+00:00 with initial"):
        staging.require_registration(again, "postgresql://cdc:***@db/meta")
    assert json.loads((tmp_path / "shop" / "_registration.json").read_text()) == first  # never overwritten
