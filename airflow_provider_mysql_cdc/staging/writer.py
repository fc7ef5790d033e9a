"""Write a window's (or snapshot chunk's) Parquet files and publish its manifest last and atomically,
on any pyarrow filesystem, at the paths :class:`~airflow_provider_mysql_cdc.staging.area.Staging` names.

Files are first written under a temporary directory of the attempt (for windows
``{pipeline}/windows/_tmp/{window_id:08d}-{token}/``) and moved to their final names only at publish
time, right before the manifest (itself written to a temporary name and moved). Memory is bounded
whatever the window size and the number of tables: at most ``row_group_rows`` rows and about
``row_group_bytes`` bytes (plus the last rows added) are held in memory across all open files; past
either, the file holding the most rows (or bytes) writes them as row groups of at most
``row_group_bytes`` bytes each (a larger row is a row group of its own). A window's writer encodes and
writes them in a thread of its own while capture reads on (one set of rows at a time: the rows being
written and those filling are what it holds); a snapshot chunk's writes them itself (its chunk workers
already keep the cores busy). Statistics (min/max) are not
written for text and binary columns: the Parquet writer would keep a copy of the smallest and largest
value of each, which for values of many MiB doubles its memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_mysql_cdc.core.staging import OpCounter, StagedFile, StagingManifest
from airflow_provider_mysql_cdc.errors import ConfigurationError, StagingWriteError
from airflow_provider_mysql_cdc.staging.area import Staging, new_attempt_token, sha256_of

DEFAULT_ROW_GROUP_ROWS = 50_000
#: Bytes of rows buffered across a writer's files, and the most bytes of one row group (ordinary rows
#: reach ``row_group_rows`` long before this).
DEFAULT_ROW_GROUP_BYTES = 64 << 20


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns a staged file dictionary-encodes: text and binary ones (``_cdc_op``, ``_cdc_gtid``, status
    and code columns repeat values). Numbers and timestamps rarely repeat, and trying a dictionary on them
    first costs about half of the Parquet writer's time before it falls back to plain encoding."""
    return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)]


def statistics_columns(schema: pa.Schema) -> list[str]:
    """The columns a staged file writes min/max statistics for: all but the text and binary ones."""
    variable = set(dictionary_columns(schema))
    return [f.name for f in schema if f.name not in variable]


def row_sizes(table: pa.Table | pa.RecordBatch) -> pa.Array:
    """Approximate bytes of each row (int64): 8 per column plus the lengths of its text and binary values."""
    import pyarrow.compute as pc  # only for batches and rows of many MiB: capture's imports stay small

    sizes = pa.repeat(pa.scalar(8 * table.num_columns, pa.int64()), table.num_rows)
    for column, column_field in zip(table.columns, table.schema, strict=True):
        if pa.types.is_string(column_field.type) or pa.types.is_binary(column_field.type):
            lengths = pc.fill_null(pc.binary_length(column), 0).cast(pa.int64())
            sizes = pc.add(sizes, lengths)
    return sizes if isinstance(sizes, pa.Array) else sizes.combine_chunks()


def row_group_slices(table: pa.Table | pa.RecordBatch, max_bytes: int) -> list[tuple[int, int]]:
    """(offset, rows) of consecutive slices of ``table`` of at most ``max_bytes`` bytes each (a larger row
    is a slice of its own); one slice when the whole table fits."""
    if table.nbytes <= max_bytes or table.num_rows <= 1:
        return [(0, table.num_rows)]
    slices: list[tuple[int, int]] = []
    start, size = 0, 0
    for row, row_bytes in enumerate(row_sizes(table).to_pylist()):
        if row > start and size + row_bytes > max_bytes:
            slices.append((start, row - start))
            start, size = row, 0
        size += row_bytes
    slices.append((start, table.num_rows - start))
    return slices


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
    #: Rows with a ``_cdc_partial`` map (row images without every column).
    partial_rows: int = 0
    #: Approximate bytes of the buffered rows and batches.
    bytes: int = 0
    #: The largest row so far: the largest ``approx_bytes`` share of a row added, or of a batch's rows
    #: their :func:`row_sizes`.
    max_row_bytes: int = 0

    def buffered_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def buffered_bytes(self) -> int:
        return self.bytes


class StagingWriter:
    """Collects rows per table and schema version into Parquet files of one staged unit (a window or
    one attempt at a snapshot chunk) and publishes them under ``final_dir`` with their manifest.

    ``attempts_dir`` holds the temporary directories of attempts, named ``{attempt_prefix}{token}``;
    those of earlier attempts with the same prefix were abandoned by crashes and are deleted.
    Directories are relative to the staging root; :class:`WindowStagingWriter` and
    :class:`SnapshotChunkWriter` take them from :class:`Staging`.
    """

    def __init__(
        self,
        staging: Staging,
        final_dir: str,
        attempts_dir: str,
        attempt_prefix: str,
        *,
        label: str,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        attempt: str | None = None,
        background_writes: bool = False,
    ) -> None:
        if row_group_rows < 1 or row_group_bytes < 1:
            raise ConfigurationError("row_group_rows and row_group_bytes must be positive")
        self.staging = staging
        self.label = label
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.filesystem = staging.filesystem
        self.attempt = attempt or new_attempt_token()
        self.final_dir = final_dir
        self.attempt_dir = staging.attempt_dir(attempts_dir, attempt_prefix, self.attempt)
        #: The attempt's temporary directory as a path of the filesystem.
        self.tmp_dir = staging.path_of(self.attempt_dir)
        self._files: dict[tuple[str, str, int], _OpenFile] = {}
        self._finished: list[StagedFile] = []
        self._buffered_rows = 0
        self._buffered_bytes = 0
        #: Whether row groups are encoded and written by a thread of their own while the next rows are
        #: read (Parquet's encoding and compression release the GIL), and that thread and its rows.
        self.background_writes = background_writes
        self._writing: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None
        staging.delete_abandoned_attempts(attempts_dir, attempt_prefix, label)
        staging.create_dir(self.attempt_dir)

    def add(
        self,
        database: str,
        table: str,
        schema_version: int,
        schema: pa.Schema,
        values: Sequence[Any],
        op: str,
        seq: int,
        *,
        approx_bytes: int = 0,
        partial: bool = False,
    ) -> None:
        """Append one row (table columns then the ``_cdc_*`` columns, in schema order) of about
        ``approx_bytes`` bytes (what the byte budget counts); ``partial``: its ``_cdc_partial`` is set
        (counted in the file's ``partial_rows``)."""
        key = (database, table, schema_version)
        staged = self._files.get(key)
        if staged is None:
            staged = self._open(database, table, schema_version, schema)
        for column, value in zip(staged.columns, values, strict=True):
            column.append(value)
        staged.counter.add(op, seq)
        staged.partial_rows += int(partial)
        staged.bytes += approx_bytes
        staged.max_row_bytes = max(staged.max_row_bytes, approx_bytes)
        self._buffered(1, approx_bytes)

    def add_images(
        self,
        database: str,
        table: str,
        schema_version: int,
        schema: pa.Schema,
        images: Sequence[tuple[Any, ...]],
        cdc: tuple[str, str, int, int | None],
        *,
        approx_bytes: int = 0,
        partial: Sequence[Mapping[str, str] | None] | None = None,
    ) -> None:
        """Append rows of one op in one transaction: ``images`` hold the table columns and
        ``_cdc_invalid_values``; ``partial`` each row's ``_cdc_partial`` (None: every image is
        complete); ``cdc`` is (``_cdc_op``, ``_cdc_gtid``, the first row's ``_cdc_seq``,
        ``_cdc_commit_ts``), the next rows' sequence numbers following the first one's.
        ``approx_bytes``: about how many bytes the rows hold (what the byte budget counts)."""
        if not images:
            return
        key = (database, table, schema_version)
        staged = self._files.get(key) or self._open(database, table, schema_version, schema)
        op, gtid, first_seq, commit_ts = cdc
        count = len(images)
        width = len(images[0])
        columns = staged.columns
        if len(columns) != width + 5:  # then _cdc_partial, _cdc_op, _cdc_gtid, _cdc_seq, _cdc_commit_ts
            raise ValueError(f"rows of {width} values for {len(columns)} columns of {staged.relative_path}")
        for column, values in zip(columns, zip(*images, strict=True), strict=False):
            column.extend(values)
        columns[width].extend(partial if partial is not None else [None] * count)
        columns[width + 1].extend([op] * count)
        columns[width + 2].extend([gtid] * count)
        columns[width + 3].extend(range(first_seq, first_seq + count))
        columns[width + 4].extend([commit_ts] * count)
        if partial is not None:
            staged.partial_rows += sum(1 for entry in partial if entry is not None)
        staged.counter.add(op, first_seq + count - 1, count)
        staged.bytes += approx_bytes
        staged.max_row_bytes = max(staged.max_row_bytes, approx_bytes // count)
        self._buffered(count, approx_bytes)

    def _buffered(self, count: int, approx_bytes: int) -> None:
        """Count ``count`` rows of ``approx_bytes`` bytes just buffered; past ``row_group_rows`` rows (or
        ``row_group_bytes`` bytes) in memory, the file holding the most rows (bytes) writes them."""
        self._buffered_rows += count
        self._buffered_bytes += approx_bytes
        if self._buffered_rows >= self.row_group_rows:
            self._flush(max(self._files.values(), key=_OpenFile.buffered_rows))
        if self._buffered_bytes >= self.row_group_bytes:
            self._flush(max(self._files.values(), key=_OpenFile.buffered_bytes))

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
        ``row_group_rows`` rows (at most ``row_group_bytes`` bytes), after any rows added before them to
        the same file."""
        if batch.num_rows == 0:
            return
        key = (database, table, schema_version)
        staged = self._files.get(key) or self._open(database, table, schema_version, schema)
        if staged.buffered_rows():
            self._flush(staged)  # rows added before the batch go first
        staged.batches.append(batch)
        staged.counter.add(op, seq, batch.num_rows)
        staged.bytes += batch.nbytes
        self._buffered_bytes += batch.nbytes
        if (
            sum(b.num_rows for b in staged.batches) >= self.row_group_rows
            or sum(b.nbytes for b in staged.batches) >= self.row_group_bytes
        ):
            self._write_batches(staged)

    def _write_batches(self, staged: _OpenFile) -> None:
        if not staged.batches:
            return
        import pyarrow.compute as pc

        rows = pa.Table.from_batches(staged.batches, schema=staged.schema).combine_chunks()
        staged.max_row_bytes = max(staged.max_row_bytes, int(pc.max(row_sizes(rows)).as_py()))
        self._write(staged, rows)
        batch_bytes = sum(b.nbytes for b in staged.batches)
        staged.bytes -= batch_bytes
        self._buffered_bytes -= batch_bytes
        staged.batches = []

    def _write(self, staged: _OpenFile, rows: pa.Table | pa.RecordBatch) -> None:
        """Write ``rows``; with ``background_writes``, in the writing thread, once it has written the rows
        handed to it before (so at most one set of rows is being encoded while the next one fills)."""
        self._wait_for_writes()
        if not self.background_writes:
            self._write_now(staged, rows)
            return
        if self._writing is None:
            self._writing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mysql-cdc-parquet")
        self._pending = self._writing.submit(self._write_now, staged, rows)

    def _wait_for_writes(self) -> None:
        """Wait until the rows handed to the writing thread are written; raise its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _stop_writing(self) -> None:
        self._pending = None
        if self._writing is not None:
            self._writing.shutdown(wait=True)
            self._writing = None

    def _write_now(self, staged: _OpenFile, rows: pa.Table | pa.RecordBatch) -> None:
        """Write ``rows`` as row groups of at most ``row_group_bytes`` bytes."""
        try:
            for offset, count in row_group_slices(rows, self.row_group_bytes):
                part = rows.slice(offset, count)
                staged.writer.write_table(part if isinstance(part, pa.Table) else pa.Table.from_batches([part]))
        except OSError as exc:
            raise StagingWriteError(f"cannot write {staged.tmp_path}: {exc}") from None

    def ensure_file(self, database: str, table: str, schema_version: int, schema: pa.Schema) -> None:
        """Make sure a file of this table and schema version is staged, even without rows (a snapshot of
        an empty table still tells readers the table's schema)."""
        if (database, table, schema_version) not in self._files:
            self._open(database, table, schema_version, schema)

    def _open(self, database: str, table: str, schema_version: int, schema: pa.Schema) -> _OpenFile:
        relative = self.staging.data_file_name(database, table, schema_version, 0)
        tmp_path = self.staging.path_of(self.staging.file_in(self.attempt_dir, relative))
        try:
            self.filesystem.create_dir(tmp_path.rsplit("/", 1)[0], recursive=True)
            writer = pq.ParquetWriter(
                tmp_path,
                schema,
                filesystem=self.filesystem,
                compression="zstd",
                use_dictionary=dictionary_columns(schema),
                write_statistics=statistics_columns(schema),
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
        staged.columns = [[] for _ in staged.schema]  # the Python values can go while Parquet is written
        self._buffered_rows -= len(arrays[0])
        self._buffered_bytes -= staged.bytes
        staged.bytes = 0
        self._write(staged, pa.RecordBatch.from_arrays(arrays, schema=staged.schema))

    def finish(self) -> list[StagedFile]:
        """Close every file and describe it (rows, bytes, checksum); files stay in the temporary place."""
        try:
            for staged in self._files.values():
                self._flush(staged)
            self._wait_for_writes()
        finally:
            self._stop_writing()
        for staged in self._files.values():
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
                    partial_rows=staged.partial_rows,
                    max_row_bytes=staged.max_row_bytes,
                )
            )
        self._files.clear()
        return sorted(self._finished, key=lambda f: f.path)

    def publish(self, manifest: StagingManifest) -> str:
        """Move the files to their final names, then write the manifest atomically; returns its URI."""
        uri = self.staging.publish(manifest, self.attempt_dir, self.final_dir, self.label)
        self.discard()
        return uri

    def discard(self) -> None:
        """Delete the temporary files (nothing published is touched)."""
        self._stop_writing()  # a write that failed has raised already; its error is not raised again
        for staged in self._files.values():
            staged.writer.close()
        self._files.clear()
        self.staging.discard_attempt(self.attempt_dir)


class WindowStagingWriter(StagingWriter):
    """The staging writer of one window: ``{pipeline}/windows/{window_id:08d}/``."""

    def __init__(
        self,
        staging: Staging,
        window_id: int,
        *,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    ) -> None:
        self.pipeline = staging.pipeline
        self.window_id = window_id
        super().__init__(
            staging,
            staging.window_dir(window_id),
            staging.window_attempts_dir(),
            staging.window_attempt_prefix(window_id),
            label=f"window {window_id}",
            row_group_rows=row_group_rows,
            row_group_bytes=row_group_bytes,
            background_writes=True,
        )


class SnapshotChunkWriter(StagingWriter):
    """The staging writer of one attempt at one snapshot chunk:
    ``{pipeline}/snapshots/{snapshot_id}/{db}.{table}/chunk-{chunk_no:05d}-{attempt}/``."""

    def __init__(
        self,
        staging: Staging,
        snapshot_id: str,
        database: str,
        table: str,
        chunk_no: int,
        *,
        label: str,
        attempt: str | None = None,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    ) -> None:
        attempt = attempt or new_attempt_token()
        super().__init__(
            staging,
            staging.chunk_dir(snapshot_id, database, table, chunk_no, attempt),
            staging.snapshot_attempts_dir(),
            staging.chunk_attempt_prefix(snapshot_id, database, table, chunk_no),
            label=label,
            row_group_rows=row_group_rows,
            row_group_bytes=row_group_bytes,
            attempt=attempt,
        )
