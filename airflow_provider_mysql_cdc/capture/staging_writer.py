"""Write a window's (or snapshot chunk's) Parquet files and publish its manifest last and atomically,
on any pyarrow filesystem.

Files are first written under a temporary directory of the attempt (for windows
``{pipeline}/windows/_tmp/{window_id}-{token}/``) and moved to their final names only at publish
time, right before the manifest (itself written to a temporary name
and moved). Memory is bounded whatever the window size and the number of tables: at most
``row_group_rows`` rows are held in memory across all open files; past that, the file holding the
most rows writes them as a row group.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_provider_mysql_cdc.core.staging import (
    MANIFEST_NAME,
    CorruptStagingError,
    OpCounter,
    StagedFile,
    StagingManifest,
    data_file_name,
    window_dir,
)
from airflow_provider_mysql_cdc.errors import ConfigurationError, TransientCdcError

log = logging.getLogger(__name__)

DEFAULT_ROW_GROUP_ROWS = 50_000


class StagingWriteError(TransientCdcError):
    """Raised when the staging filesystem refuses a write (permissions, network, quota)."""


def open_staging(staging_uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and root path of a staging URI (local path, ``file://``, ``s3://``, ...)."""
    try:
        filesystem, root = pafs.FileSystem.from_uri(staging_uri)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise ConfigurationError(f"staging URI {staging_uri!r} is not usable: {exc}") from None
    return filesystem, root.rstrip("/")


def require_writable_staging(staging_uri: str, relative_dir: str) -> None:
    """Create ``relative_dir`` under the staging root and write and delete a small probe file in it:
    a task checks this before it records anything, so an unwritable staging URI fails the run at once
    with :class:`StagingWriteError` instead of leaving a planned window or snapshot behind."""
    filesystem, root = open_staging(staging_uri)
    directory = f"{root}/{relative_dir}"
    probe = f"{directory}/.write-probe-{new_attempt_token()}"
    try:
        filesystem.create_dir(directory, recursive=True)
        with filesystem.open_output_stream(probe) as stream:
            stream.write(b"probe")
        filesystem.delete_file(probe)
    except OSError as exc:
        raise StagingWriteError(
            f"staging URI {staging_uri!r} is not writable ({exc}); nothing was recorded. Fix the path, its "
            "permissions or the filesystem credentials (e.g. the bucket policy), then re-run the task"
        ) from None


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns a staged file dictionary-encodes: text and binary ones (``_cdc_op``, ``_cdc_gtid``, status
    and code columns repeat values). Numbers and timestamps rarely repeat, and trying a dictionary on them
    first costs about half of the Parquet writer's time before it falls back to plain encoding."""
    return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)]


def new_attempt_token() -> str:
    """A random token naming one attempt's directories."""
    return uuid.uuid4().hex[:12]


def manifest_uri(staging_uri: str, pipeline: str, window_id: int) -> str:
    """The URI of a window's manifest."""
    return f"{staging_uri.rstrip('/')}/{window_dir(pipeline, window_id)}/{MANIFEST_NAME}"


def read_manifest(staging_uri: str, pipeline: str, window_id: int) -> StagingManifest | None:
    """The published manifest of a window, or None when the window has none."""
    return read_manifest_in(staging_uri, window_dir(pipeline, window_id))


def read_text(staging_uri: str, relative_path: str) -> tuple[str, str] | None:
    """The text of a staged file and its full path, or None when there is no such file."""
    filesystem, root = open_staging(staging_uri)
    path = f"{root}/{relative_path}"
    if filesystem.get_file_info(path).type != pafs.FileType.File:
        return None
    with filesystem.open_input_stream(path) as stream:
        return stream.read().decode("utf-8", errors="replace"), path


def read_manifest_in(staging_uri: str, relative_dir: str) -> StagingManifest | None:
    """The manifest published in a directory (relative to the staging root), or None."""
    found = read_text(staging_uri, f"{relative_dir}/{MANIFEST_NAME}")
    return None if found is None else StagingManifest.from_json(*found)


def write_text_atomically(staging_uri: str, relative_path: str, text: str) -> str:
    """Write a small file under a temporary name and move it into place; returns its URI."""
    filesystem, root = open_staging(staging_uri)
    final = f"{root}/{relative_path}"
    tmp = f"{final}.tmp-{new_attempt_token()}"
    try:
        filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
        with filesystem.open_output_stream(tmp) as stream:
            stream.write(text.encode("utf-8"))
        filesystem.move(tmp, final)
    except OSError as exc:
        raise StagingWriteError(f"cannot write {final}: {exc}") from None
    return f"{staging_uri.rstrip('/')}/{relative_path}"


def sha256_of(filesystem: pafs.FileSystem, path: str) -> str:
    """SHA-256 of a file, streamed."""
    digest = hashlib.sha256()
    with filesystem.open_input_stream(path) as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify_manifest_files(staging_uri: str, manifest: StagingManifest) -> None:
    """Check every file of a manifest exists with its size and checksum; raise CorruptStagingError."""
    filesystem, root = open_staging(staging_uri)
    base = f"{root}/{manifest.relative_dir()}"
    for staged in manifest.files:
        path = f"{base}/{staged.path}"
        info = filesystem.get_file_info(path)
        if info.type != pafs.FileType.File or info.size != staged.bytes or sha256_of(filesystem, path) != staged.sha256:
            if manifest.kind == "snapshot":
                raise CorruptStagingError(
                    f"staged file {path} of snapshot {manifest.snapshot_id} is missing, truncated or changed; "
                    "re-snapshot the table (a finished chunk is never rewritten)"
                )
            raise CorruptStagingError(
                f"staged file {path} of window {manifest.window_id} is missing, truncated or changed; "
                "delete the window's staging directory and re-run its capture task"
            )


@dataclass
class _OpenFile:
    relative_path: str
    tmp_path: str
    schema: pa.Schema
    writer: pq.ParquetWriter
    database: str
    table: str
    schema_version: int
    columns: list[list[Any]]
    counter: OpCounter = field(default_factory=OpCounter)
    #: Whole batches (``add_batch``) not written yet; they precede the buffered ``columns``.
    batches: list[pa.RecordBatch] = field(default_factory=list)

    def buffered_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


class StagingWriter:
    """Collects rows per table and schema version into Parquet files of one staged unit (a window or
    one attempt at a snapshot chunk) and publishes them under ``final_dir`` with their manifest.

    ``tmp_parent`` holds the temporary directories of attempts, named ``{attempt_prefix}{token}``;
    those of earlier attempts with the same prefix were abandoned by crashes and are deleted.
    """

    def __init__(
        self,
        staging_uri: str,
        final_dir: str,
        tmp_parent: str,
        attempt_prefix: str,
        *,
        label: str,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        attempt: str | None = None,
    ) -> None:
        self.staging_uri = staging_uri
        self.label = label
        self.row_group_rows = row_group_rows
        self.filesystem, self.root = open_staging(staging_uri)
        self.attempt = attempt or new_attempt_token()
        self.final_dir = f"{self.root}/{final_dir}"
        self._tmp_parent = f"{self.root}/{tmp_parent}"
        self._attempt_prefix = attempt_prefix
        self.tmp_dir = f"{self._tmp_parent}/{attempt_prefix}{self.attempt}"
        self._files: dict[tuple[str, str, int], _OpenFile] = {}
        self._finished: list[StagedFile] = []
        self._buffered_rows = 0
        self._delete_abandoned_attempts()
        try:
            self.filesystem.create_dir(self.tmp_dir, recursive=True)
        except OSError as exc:
            raise StagingWriteError(f"cannot write to staging {staging_uri!r}: {exc}") from None

    def _delete_abandoned_attempts(self) -> None:
        """Earlier attempts that crashed left temporary files: they are never published."""
        selector = pafs.FileSelector(self._tmp_parent, allow_not_found=True)
        try:
            infos = self.filesystem.get_file_info(selector)
        except OSError as exc:
            raise StagingWriteError(f"cannot list staging {self._tmp_parent}: {exc}") from None
        for info in infos:
            if info.type == pafs.FileType.Directory and info.base_name.startswith(self._attempt_prefix):
                log.info("deleting files of an abandoned attempt at %s: %s", self.label, info.path)
                self.filesystem.delete_dir(info.path)

    def add(
        self,
        database: str,
        table: str,
        schema_version: int,
        schema: pa.Schema,
        values: Sequence[Any],
        op: str,
        seq: int,
    ) -> None:
        """Append one row (table columns then the ``_cdc_*`` columns, in schema order)."""
        key = (database, table, schema_version)
        staged = self._files.get(key)
        if staged is None:
            staged = self._open(database, table, schema_version, schema)
        for column, value in zip(staged.columns, values, strict=True):
            column.append(value)
        staged.counter.add(op, seq)
        self._buffered(1)

    def add_images(
        self,
        database: str,
        table: str,
        schema_version: int,
        schema: pa.Schema,
        images: Sequence[tuple[Any, ...]],
        cdc: tuple[str, str, int, int | None],
    ) -> None:
        """Append rows of one op in one transaction: ``images`` hold the table columns and
        ``_cdc_invalid_values``; ``cdc`` is (``_cdc_op``, ``_cdc_gtid``, the first row's ``_cdc_seq``,
        ``_cdc_commit_ts``), the next rows' sequence numbers following the first one's."""
        if not images:
            return
        key = (database, table, schema_version)
        staged = self._files.get(key) or self._open(database, table, schema_version, schema)
        op, gtid, first_seq, commit_ts = cdc
        count = len(images)
        width = len(images[0])
        columns = staged.columns
        if len(columns) != width + 4:  # then _cdc_op, _cdc_gtid, _cdc_seq, _cdc_commit_ts
            raise ValueError(f"rows of {width} values for {len(columns)} columns of {staged.relative_path}")
        for column, values in zip(columns, zip(*images, strict=True), strict=False):
            column.extend(values)
        columns[width].extend([op] * count)
        columns[width + 1].extend([gtid] * count)
        columns[width + 2].extend(range(first_seq, first_seq + count))
        columns[width + 3].extend([commit_ts] * count)
        staged.counter.add(op, first_seq + count - 1, count)
        self._buffered(count)

    def _buffered(self, count: int) -> None:
        """Count ``count`` rows just buffered; past ``row_group_rows`` rows in memory, the file holding the
        most writes them as a row group."""
        self._buffered_rows += count
        if self._buffered_rows >= self.row_group_rows:
            self._flush(max(self._files.values(), key=_OpenFile.buffered_rows))

    def add_batch(
        self,
        database: str,
        table: str,
        schema_version: int,
        schema: pa.Schema,
        batch: pa.RecordBatch,
        op: str,
        seq: int,
    ) -> None:
        """Add a whole record batch (``schema``'s columns) of rows of one op whose ``_cdc_seq`` values
        are consecutive and end at ``seq``. Batches are written together as row groups of about
        ``row_group_rows`` rows, after any rows added before them to the same file."""
        if batch.num_rows == 0:
            return
        key = (database, table, schema_version)
        staged = self._files.get(key) or self._open(database, table, schema_version, schema)
        if staged.buffered_rows():
            self._flush(staged)  # rows added before the batch go first
        staged.batches.append(batch)
        staged.counter.add(op, seq, batch.num_rows)
        if sum(b.num_rows for b in staged.batches) >= self.row_group_rows:
            self._write_batches(staged)

    def _write_batches(self, staged: _OpenFile) -> None:
        if not staged.batches:
            return
        try:
            staged.writer.write_table(pa.Table.from_batches(staged.batches, schema=staged.schema).combine_chunks())
        except OSError as exc:
            raise StagingWriteError(f"cannot write {staged.tmp_path}: {exc}") from None
        staged.batches = []

    def ensure_file(self, database: str, table: str, schema_version: int, schema: pa.Schema) -> None:
        """Make sure a file of this table and schema version is staged, even without rows (a snapshot of
        an empty table still tells readers the table's schema)."""
        if (database, table, schema_version) not in self._files:
            self._open(database, table, schema_version, schema)

    def _open(self, database: str, table: str, schema_version: int, schema: pa.Schema) -> _OpenFile:
        relative = data_file_name(database, table, schema_version, 0)
        tmp_path = f"{self.tmp_dir}/{relative}"
        try:
            self.filesystem.create_dir(tmp_path.rsplit("/", 1)[0], recursive=True)
            writer = pq.ParquetWriter(
                tmp_path,
                schema,
                filesystem=self.filesystem,
                compression="zstd",
                use_dictionary=dictionary_columns(schema),
            )
        except OSError as exc:
            raise StagingWriteError(f"cannot write {tmp_path}: {exc}") from None
        staged = _OpenFile(relative, tmp_path, schema, writer, database, table, schema_version, [[] for _ in schema])
        self._files[(database, table, schema_version)] = staged
        return staged

    def _flush(self, staged: _OpenFile) -> None:
        self._write_batches(staged)
        if not staged.buffered_rows():
            return
        arrays = [pa.array(column, type=f.type) for column, f in zip(staged.columns, staged.schema, strict=True)]
        staged.writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=staged.schema))
        self._buffered_rows -= staged.buffered_rows()
        staged.columns = [[] for _ in staged.schema]

    def finish(self) -> list[StagedFile]:
        """Close every file and describe it (rows, bytes, checksum); files stay in the temporary place."""
        for staged in self._files.values():
            self._flush(staged)
            staged.writer.close()
            info = self.filesystem.get_file_info(staged.tmp_path)
            counter = staged.counter
            if counter.first_seq is None or counter.last_seq is None:  # an empty file: no sequence numbers
                counter.first_seq, counter.last_seq = 0, -1
            self._finished.append(
                StagedFile(
                    path=staged.relative_path,
                    database=staged.database,
                    table=staged.table,
                    schema_version=staged.schema_version,
                    rows=counter.rows,
                    bytes=int(info.size or 0),
                    sha256=sha256_of(self.filesystem, staged.tmp_path),
                    op_counts=dict(counter.ops),
                    first_seq=counter.first_seq,
                    last_seq=counter.last_seq,
                )
            )
        self._files.clear()
        return sorted(self._finished, key=lambda f: f.path)

    def publish(self, manifest: StagingManifest) -> str:
        """Move the files to their final names, then write the manifest atomically; returns its URI."""
        try:
            for staged in manifest.files:
                final = f"{self.final_dir}/{staged.path}"
                self.filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
                self.filesystem.move(f"{self.tmp_dir}/{staged.path}", final)
            tmp_manifest = f"{self.tmp_dir}/{MANIFEST_NAME}"
            with self.filesystem.open_output_stream(tmp_manifest) as stream:
                stream.write(manifest.to_json().encode("utf-8"))
            self.filesystem.create_dir(self.final_dir, recursive=True)
            self.filesystem.move(tmp_manifest, f"{self.final_dir}/{MANIFEST_NAME}")
        except OSError as exc:
            raise StagingWriteError(f"publishing {self.label} to {self.final_dir} failed: {exc}") from None
        self.discard()
        return f"{self.staging_uri.rstrip('/')}/{manifest.relative_dir()}/{MANIFEST_NAME}"

    def discard(self) -> None:
        """Delete the temporary files (nothing published is touched)."""
        for staged in self._files.values():
            staged.writer.close()
        self._files.clear()
        try:
            self.filesystem.delete_dir(self.tmp_dir)
        except (FileNotFoundError, OSError) as exc:
            log.debug("could not delete %s: %s", self.tmp_dir, exc)


class WindowStagingWriter(StagingWriter):
    """The staging writer of one window: ``{pipeline}/windows/{window_id:08d}/``."""

    def __init__(
        self, staging_uri: str, pipeline: str, window_id: int, *, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    ) -> None:
        self.pipeline = pipeline
        self.window_id = window_id
        super().__init__(
            staging_uri,
            window_dir(pipeline, window_id),
            f"{pipeline}/windows/_tmp",
            f"{window_id:08d}-",
            label=f"window {window_id}",
            row_group_rows=row_group_rows,
        )
