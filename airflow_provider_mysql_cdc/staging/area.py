"""The staging area of one pipeline: every path under ``{staging_uri}/{pipeline}/`` and every read,
write, move and delete there, on one pyarrow filesystem opened once.

Layout under ``{staging_uri}/``::

    {pipeline}/windows/{window_id:08d}/{db}.{table}/v{schema_version}/part-{n:05d}.parquet
    {pipeline}/windows/{window_id:08d}/_manifest.json
    {pipeline}/windows/_tmp/{window_id:08d}-{token}/...                  (an attempt, until it publishes)
    {pipeline}/snapshots/{snapshot_id}/{db}.{table}/chunk-{chunk_no:05d}-{attempt}/{db}.{table}/v{n}/part-00000.parquet
    {pipeline}/snapshots/{snapshot_id}/{db}.{table}/chunk-{chunk_no:05d}-{attempt}/_manifest.json
    {pipeline}/snapshots/{snapshot_id}/{db}.{table}/_manifest.json        (the table's chunks, once all are finished)
    {pipeline}/snapshots/_tmp/{snapshot_id}.{db}.{table}.{chunk_no:05d}-{attempt}/...
    {pipeline}/apply-specs/{run_id}-try{n}.json                            (what the apply job is asked to do)
    {pipeline}/apply-reports/{run_id}-try{n}.json                          (what it did)

Paths handed around are relative to the staging root (they start with the pipeline), as the table
manifests record them. A snapshot chunk is published under a directory of its own attempt; the
metadata store (and the table manifest written once every chunk is finished) names the attempt that
counts, so two racing attempts at one chunk never mix their files.

A window exists only once its manifest is published; the manifest lists every file with its row
count, size and SHA-256, so readers never list directories and never see partial windows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings, is_s3_uri, s3_path
from airflow_provider_mysql_cdc.core.staging import MANIFEST_NAME, SnapshotTableManifest, StagedFile, StagingManifest
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    CorruptStagingError,
    MetadataStoreMismatchError,
    StagingWriteError,
)

log = logging.getLogger(__name__)

#: The directory of a kind of staged unit that holds the temporary directories of its attempts.
ATTEMPTS_DIR_NAME = "_tmp"
#: The pipeline registration a staging root was written under (``{pipeline}/_registration.json``).
REGISTRATION_FILE_NAME = "_registration.json"


def open_filesystem(uri: str, object_store: ObjectStoreSettings | None = None) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and root path of a URI (local path, ``file://``, ``s3://``, ...).

    With ``object_store``, an ``s3://`` (or ``s3a://``) URI is opened with its keys, endpoint and region;
    without, pyarrow's defaults apply (the AWS credential chain, or options in the URI's query).
    """
    try:
        if object_store is not None and is_s3_uri(uri):
            return _s3_filesystem(object_store), s3_path(uri)
        filesystem, root = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise ConfigurationError(f"staging URI {uri!r} is not usable: {exc}") from None
    return filesystem, root.rstrip("/")


def _s3_filesystem(settings: ObjectStoreSettings) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem on ``settings`` (buckets are never created: a missing one is an error)."""
    options: dict[str, Any] = {"allow_bucket_creation": False, "allow_bucket_deletion": False}
    if settings.access_key:
        options.update(access_key=settings.access_key, secret_key=settings.secret_key)
    if settings.endpoint_url:
        options["endpoint_override"] = settings.endpoint_url
    if settings.region:
        options["region"] = settings.region
    return pafs.S3FileSystem(**options)


def new_attempt_token() -> str:
    """A random token naming one attempt's directories."""
    return uuid.uuid4().hex[:12]


def sha256_of(filesystem: pafs.FileSystem, path: str) -> str:
    """SHA-256 of a file, streamed."""
    digest = hashlib.sha256()
    with filesystem.open_input_stream(path) as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomically(filesystem: pafs.FileSystem, final: str, text: str) -> None:
    """Write a small file under a temporary name next to ``final`` and move it into place."""
    tmp = f"{final}.tmp-{new_attempt_token()}"
    try:
        filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
        with filesystem.open_output_stream(tmp) as stream:
            stream.write(text.encode("utf-8"))
        filesystem.move(tmp, final)
    except OSError as exc:
        raise StagingWriteError(f"cannot write {final}: {exc}") from None


def write_text_to_uri(uri: str, text: str, object_store: ObjectStoreSettings | None = None) -> None:
    """Write a small file atomically at any pyarrow filesystem URI (the apply job's report)."""
    directory, name = uri.rstrip("/").rsplit("/", 1)
    filesystem, root = open_filesystem(directory, object_store)
    _write_atomically(filesystem, f"{root}/{name}", text)


def read_text_from_uri(uri: str, object_store: ObjectStoreSettings | None = None) -> str | None:
    """The text of a small file at any pyarrow filesystem URI (the apply job's spec), or None when there
    is no such file."""
    filesystem, path = open_filesystem(uri, object_store)
    if filesystem.get_file_info(path).type != pafs.FileType.File:
        return None
    with filesystem.open_input_stream(path) as stream:
        return bytes(stream.read()).decode("utf-8")


def spark_uri(uri: str) -> str:
    """The form Spark reads a staging URI in: ``s3://`` becomes Hadoop's ``s3a://``, a local path ``file://``."""
    root = uri.rstrip("/")
    if "://" not in root:
        return "file://" + root
    if root.startswith("s3://"):
        return "s3a://" + root[len("s3://") :]
    return root


class Staging:
    """One pipeline's staging area under ``uri``: it names every staged path and does every staging IO.

    The pyarrow filesystem is opened on first use (with ``object_store``'s keys and endpoint when the URI
    is on S3) and kept. Methods returning paths give them
    relative to the staging root (see the module docstring); :meth:`uri_of`, :meth:`spark_path` and
    :meth:`path_of` turn them into a URI, the path Spark reads and the filesystem's own path.
    """

    def __init__(self, uri: str, pipeline: str, object_store: ObjectStoreSettings | None = None) -> None:
        #: The staging URI as given (messages quote it so).
        self.uri = uri
        self._base = uri.rstrip("/")
        self.pipeline = pipeline
        #: How to reach the object store the URI is in (None: pyarrow's defaults).
        self.object_store = object_store
        self._opened: tuple[pafs.FileSystem, str] | None = None

    def __repr__(self) -> str:
        return f"Staging({self.uri!r}, {self.pipeline!r})"

    # -- the filesystem -----------------------------------------------------------------------------

    def _open(self) -> tuple[pafs.FileSystem, str]:
        if self._opened is None:
            self._opened = open_filesystem(self.uri, self.object_store)
        return self._opened

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem of the staging URI (opened once, on first use)."""
        return self._open()[0]

    @property
    def root(self) -> str:
        """The staging root as a path of :attr:`filesystem` (no trailing slash)."""
        return self._open()[1]

    # -- paths (relative to the staging root) ------------------------------------------------------

    def pipeline_dir(self) -> str:
        """Everything this pipeline staged."""
        return self.pipeline

    def windows_dir(self) -> str:
        """Every window of the pipeline (its lineage dataset: what capture writes and apply reads)."""
        return f"{self.pipeline}/windows"

    def snapshots_dir(self) -> str:
        """Every snapshot of the pipeline (its lineage dataset: what snapshot chunks write and apply reads)."""
        return f"{self.pipeline}/snapshots"

    def window_dir(self, window_id: int) -> str:
        """Directory of one window."""
        return f"{self.pipeline}/windows/{window_id:08d}"

    def window_attempts_dir(self) -> str:
        """Where attempts at windows write before they publish."""
        return f"{self.pipeline}/windows/{ATTEMPTS_DIR_NAME}"

    @staticmethod
    def window_attempt_prefix(window_id: int) -> str:
        """Start of the names of the attempt directories of one window."""
        return f"{window_id:08d}-"

    def snapshot_dir(self, snapshot_id: str) -> str:
        """Directory of one snapshot."""
        return f"{self.pipeline}/snapshots/{snapshot_id}"

    def snapshot_attempts_dir(self) -> str:
        """Where attempts at snapshot chunks write before they publish."""
        return f"{self.pipeline}/snapshots/{ATTEMPTS_DIR_NAME}"

    def snapshot_table_dir(self, snapshot_id: str, database: str, table: str) -> str:
        """Directory of one table's chunks in a snapshot (holds the table manifest)."""
        return f"{self.snapshot_dir(snapshot_id)}/{database}.{table}"

    def chunk_dir(self, snapshot_id: str, database: str, table: str, chunk_no: int, attempt: str) -> str:
        """Directory of one published attempt at one snapshot chunk."""
        return f"{self.snapshot_table_dir(snapshot_id, database, table)}/{_chunk_dir_name(chunk_no, attempt)}"

    @staticmethod
    def chunk_attempt_prefix(snapshot_id: str, database: str, table: str, chunk_no: int) -> str:
        """Start of the names of the temporary directories of attempts at one snapshot chunk."""
        return f"{snapshot_id}.{database}.{table}.{chunk_no:05d}-"

    @staticmethod
    def attempt_dir(attempts_dir: str, prefix: str, attempt: str) -> str:
        """The temporary directory of one attempt."""
        return f"{attempts_dir}/{prefix}{attempt}"

    def unit_dir(self, manifest: StagingManifest) -> str:
        """The directory a manifest is published in (a window's, or its snapshot chunk attempt's)."""
        if manifest.pipeline != self.pipeline:
            raise CorruptStagingError(
                f"a manifest of pipeline {manifest.pipeline!r} was found in the staging of pipeline "
                f"{self.pipeline!r} under {self.uri}; restore the pipeline's own staging directory"
            )
        if manifest.kind == "window":
            return self.window_dir(manifest.window_id)
        snapshot_id, database, table, chunk_no, attempt = manifest.chunk_identity()
        return self.chunk_dir(snapshot_id, database, table, chunk_no, attempt)

    @staticmethod
    def manifest_path(unit_dir: str) -> str:
        """The manifest of a unit (window, chunk attempt, snapshot table) directory."""
        return f"{unit_dir}/{MANIFEST_NAME}"

    def window_manifest_path(self, window_id: int) -> str:
        """A window's manifest."""
        return self.manifest_path(self.window_dir(window_id))

    def snapshot_table_manifest_path(self, snapshot_id: str, database: str, table: str) -> str:
        """A table's snapshot manifest."""
        return self.manifest_path(self.snapshot_table_dir(snapshot_id, database, table))

    @staticmethod
    def data_file_name(database: str, table: str, schema_version: int, part: int) -> str:
        """A data file's path relative to its unit's directory."""
        return f"{database}.{table}/v{schema_version}/part-{part:05d}.parquet"

    @staticmethod
    def file_in(directory: str, name: str) -> str:
        """A file (or directory) ``name`` inside ``directory``."""
        return f"{directory}/{name}"

    def apply_report_path(self, run_id: str, try_number: int) -> str:
        """The report of one try of an apply task (``apply.contract.ApplyReport``)."""
        return f"{self.pipeline}/apply-reports/{_apply_file_name(run_id, try_number)}"

    def apply_spec_path(self, run_id: str, try_number: int) -> str:
        """What one try of an apply task asks the Spark job to do (``apply.contract.ApplySpec``)."""
        return f"{self.pipeline}/apply-specs/{_apply_file_name(run_id, try_number)}"

    def maintenance_report_path(self, run_id: str, try_number: int) -> str:
        """The report of one try of a maintenance task (``apply.contract.MaintenanceReport``)."""
        return f"{self.pipeline}/maintenance-reports/{_apply_file_name(run_id, try_number)}"

    def maintenance_spec_path(self, run_id: str, try_number: int) -> str:
        """What one try of a maintenance task asks the Spark job to do (``apply.contract.MaintenanceSpec``)."""
        return f"{self.pipeline}/maintenance-specs/{_apply_file_name(run_id, try_number)}"

    @staticmethod
    def write_probe_path(directory: str) -> str:
        """A fresh name for the probe file :meth:`require_writable` writes in ``directory``."""
        return f"{directory}/.write-probe-{new_attempt_token()}"

    # -- forms of a path ------------------------------------------------------------------------------

    def uri_of(self, relative: str) -> str:
        """The URI of a staged path (under the staging URI as given)."""
        return f"{self._base}/{relative}"

    def path_of(self, relative: str) -> str:
        """A staged path as a path of :attr:`filesystem`."""
        return f"{self.root}/{relative}"

    def spark_path(self, relative: str) -> str:
        """The path Spark reads a staged file from (``s3://`` as ``s3a://``, a local path as ``file://``)."""
        return f"{spark_uri(self._base)}/{relative}"

    def relative_path(self, uri: str) -> str:
        """A URI under the staging root as a staged path (returned unchanged when it is not under it)."""
        return uri.removeprefix(self._base + "/")

    def manifest_dir_of(self, manifest_uri: str) -> str | None:
        """The unit directory of a manifest URI, or None when the URI is no manifest under this staging root."""
        prefix, suffix = self._base + "/", "/" + MANIFEST_NAME
        if not (manifest_uri.startswith(prefix) and manifest_uri.endswith(suffix)):
            return None
        return manifest_uri[len(prefix) : -len(suffix)]

    def window_manifest_uri(self, window_id: int) -> str:
        """The URI of a window's manifest."""
        return self.uri_of(self.window_manifest_path(window_id))

    def spark_files(
        self, manifest: StagingManifest, files: Sequence[StagedFile] | None = None
    ) -> list[tuple[str, StagedFile]]:
        """The Spark path of each file of a manifest (or of ``files``, some of them), with the file."""
        unit = self.unit_dir(manifest)
        return [(self.spark_path(self.file_in(unit, f.path)), f) for f in (manifest.files if files is None else files)]

    # -- small files and manifests ----------------------------------------------------------------------

    def read_text(self, relative: str) -> tuple[str, str] | None:
        """The text of a staged file and its full path, or None when there is no such file."""
        path = self.path_of(relative)
        if self.filesystem.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.filesystem.open_input_stream(path) as stream:
            return stream.read().decode("utf-8", errors="replace"), path

    def write_text(self, relative: str, text: str) -> str:
        """Write a small file under a temporary name and move it into place; returns its URI."""
        _write_atomically(self.filesystem, self.path_of(relative), text)
        return self.uri_of(relative)

    def read_manifest_in(self, unit_dir: str) -> StagingManifest | None:
        """The manifest published in a unit directory, or None."""
        found = self.read_text(self.manifest_path(unit_dir))
        return None if found is None else StagingManifest.from_json(*found)

    def read_window_manifest(self, window_id: int) -> StagingManifest | None:
        """The published manifest of a window, or None when the window has none."""
        return self.read_manifest_in(self.window_dir(window_id))

    def read_chunk_manifest(self, entry: Mapping[str, Any]) -> StagingManifest | None:
        """The chunk manifest a snapshot table manifest's chunk entry names, or None when it is gone."""
        return self.read_manifest_in(str(entry["manifest"]).rsplit("/", 1)[0])

    def read_snapshot_table_manifest(self, snapshot_id: str, database: str, table: str) -> SnapshotTableManifest | None:
        """A table's published snapshot manifest, or None while a chunk is unfinished."""
        found = self.read_text(self.snapshot_table_manifest_path(snapshot_id, database, table))
        return None if found is None else SnapshotTableManifest.from_json(*found)

    def publish_snapshot_table_manifest(self, manifest: SnapshotTableManifest) -> str:
        """Publish a table's snapshot manifest unless the same bytes are there already; returns its URI."""
        relative = self.snapshot_table_manifest_path(manifest.snapshot_id, manifest.database, manifest.table)
        existing = self.read_text(relative)
        text = manifest.to_json()
        if existing is None or existing[0] != text:
            self.write_text(relative, text)
        return self.uri_of(relative)

    def verify_files(self, manifest: StagingManifest) -> None:
        """Check every file of a manifest exists with its size and checksum; raise CorruptStagingError."""
        filesystem = self.filesystem
        base = self.path_of(self.unit_dir(manifest))
        for staged in manifest.files:
            path = f"{base}/{staged.path}"
            info = filesystem.get_file_info(path)
            if (
                info.type != pafs.FileType.File
                or info.size != staged.bytes
                or sha256_of(filesystem, path) != staged.sha256
            ):
                if manifest.kind == "snapshot":
                    raise CorruptStagingError(
                        f"staged file {path} of snapshot {manifest.snapshot_id} is missing, truncated or changed; "
                        "re-snapshot the table (a finished chunk is never rewritten)"
                    )
                raise CorruptStagingError(
                    f"staged file {path} of window {manifest.window_id} is missing, truncated or changed; "
                    "delete the window's staging directory and re-run its capture task"
                )

    def publish(self, manifest: StagingManifest, attempt_dir: str, final_dir: str, label: str) -> str:
        """Move a unit's files from its attempt directory to ``final_dir``, then its manifest (written in the
        attempt directory and moved last: the unit exists from that move on); returns the manifest's URI."""
        filesystem = self.filesystem
        tmp_dir, final = self.path_of(attempt_dir), self.path_of(final_dir)
        try:
            for staged in manifest.files:
                target = f"{final}/{staged.path}"
                filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
                filesystem.move(f"{tmp_dir}/{staged.path}", target)
            tmp_manifest = self.path_of(self.manifest_path(attempt_dir))
            with filesystem.open_output_stream(tmp_manifest) as stream:
                stream.write(manifest.to_json().encode("utf-8"))
            filesystem.create_dir(final, recursive=True)
            filesystem.move(tmp_manifest, self.path_of(self.manifest_path(final_dir)))
        except OSError as exc:
            raise StagingWriteError(f"publishing {label} to {final} failed: {exc}") from None
        return self.uri_of(self.manifest_path(self.unit_dir(manifest)))

    # -- the registration this staging root belongs to ------------------------------------------------

    def require_registration(self, registration: Mapping[str, str] | None, store_location: str) -> None:
        """Check that the metadata store's registration of the pipeline (``registration``; None: the store
        has none) is the one this staging root was written under, and record it here the first time.

        Raises :class:`MetadataStoreMismatchError` when the store has no registration but the staging root
        has one, or a different one: the task runs with another metadata store than the runs that staged
        and applied the pipeline's windows (each worker's own default SQLite store under a distributed
        executor; a reset or replaced database). Nothing is recorded or staged then."""
        relative = f"{self.pipeline}/{REGISTRATION_FILE_NAME}"
        found = self.read_text(relative)
        recorded = None if found is None else dict(json.loads(found[0]))
        if registration is not None and recorded is None:
            self.write_text(relative, json.dumps(dict(registration), sort_keys=True, indent=1) + "\n")
            return
        if recorded is None or recorded == dict(registration or {}):
            return
        held = (
            f"its staging root {self.root}/{self.pipeline} holds the pipeline registered at "
            f"{recorded.get('registered_at')} with initial frontier {recorded.get('initial_frontier')!r}"
        )
        mine = (
            "has no record of it"
            if registration is None
            else f"registered it at {registration.get('registered_at')} with initial frontier "
            f"{registration.get('initial_frontier')!r}"
        )
        raise MetadataStoreMismatchError(
            f"pipeline {self.pipeline!r}: the metadata store {store_location} {mine}, but {held}. This task runs "
            "with another metadata store than the runs that staged and applied its windows; going on would "
            "number windows again over them. On a distributed executor (Celery, Kubernetes) every worker has "
            "its own default SQLite store: give every task of the pipeline metadata_conn_id, a database all "
            'workers reach (docs/concepts.md "Metadata database"). Nothing was recorded or staged. To start '
            "the pipeline over instead, give it a new name or a new staging_uri"
        )

    # -- probes and deletes -------------------------------------------------------------------------------

    def require_writable(self, directory: str) -> None:
        """Create ``directory`` and write and delete a small probe file in it: a task checks this before it
        records anything, so an unwritable staging URI fails the run at once with :class:`StagingWriteError`
        instead of leaving a planned window or snapshot behind."""
        filesystem = self.filesystem
        path = self.path_of(directory)
        probe = self.path_of(self.write_probe_path(directory))
        try:
            filesystem.create_dir(path, recursive=True)
            with filesystem.open_output_stream(probe) as stream:
                stream.write(b"probe")
            filesystem.delete_file(probe)
        except OSError as exc:
            raise StagingWriteError(
                f"staging URI {self.uri!r} is not writable ({exc}); nothing was recorded. Fix the path, its "
                "permissions or the filesystem credentials (e.g. the bucket policy), then re-run the task"
            ) from None

    def create_dir(self, relative: str) -> None:
        """Create a directory (and its parents); raise :class:`StagingWriteError` when refused."""
        try:
            self.filesystem.create_dir(self.path_of(relative), recursive=True)
        except OSError as exc:
            raise StagingWriteError(f"cannot write to staging {self.uri!r}: {exc}") from None

    def delete_abandoned_attempts(self, attempts_dir: str, prefix: str, label: str) -> None:
        """Delete the temporary directories named ``{prefix}...`` in ``attempts_dir``: attempts that crashed
        left them, and they are never published."""
        parent = self.path_of(attempts_dir)
        try:
            infos = self.filesystem.get_file_info(pafs.FileSelector(parent, allow_not_found=True))
        except OSError as exc:
            raise StagingWriteError(f"cannot list staging {parent}: {exc}") from None
        for info in infos:
            if info.type == pafs.FileType.Directory and info.base_name.startswith(prefix):
                log.info("deleting files of an abandoned attempt at %s: %s", label, info.path)
                self.filesystem.delete_dir(info.path)

    def discard_attempt(self, attempt_dir: str) -> None:
        """Delete an attempt's temporary directory (nothing published is touched); failures are logged."""
        path = self.path_of(attempt_dir)
        try:
            self.filesystem.delete_dir(path)
        except (FileNotFoundError, OSError) as exc:
            log.debug("could not delete %s: %s", path, exc)

    def delete_published(self, manifest: StagingManifest) -> None:
        """Delete a published unit (a chunk attempt that lost the race to finish); failures are logged."""
        relative = self.unit_dir(manifest)
        try:
            self.filesystem.delete_dir(self.path_of(relative))
        except OSError as exc:
            log.warning("could not delete %s/%s: %s", self.root, relative, exc)

    def delete_unreferenced_chunk_attempts(
        self, snapshot_id: str, database: str, table: str, referenced_manifests: Iterable[str]
    ) -> None:
        """Delete the chunk directories of a table's snapshot that no finished chunk's manifest is in (a
        crash between publish and finish, a lost race): once the table is complete nothing refers to them."""
        filesystem, root = self.filesystem, self.root
        keep = {manifest.rsplit("/", 1)[0] for manifest in referenced_manifests}
        table_dir = self.path_of(self.snapshot_table_dir(snapshot_id, database, table))
        for info in filesystem.get_file_info(pafs.FileSelector(table_dir, allow_not_found=True)):
            relative = info.path[len(root) + 1 :]
            if info.type == pafs.FileType.Directory and _is_chunk_dir_name(info.base_name) and relative not in keep:
                log.info("deleting %s: no finished chunk refers to it", info.path)
                filesystem.delete_dir(info.path)

    def delete_pipeline(self) -> None:
        """Delete everything the pipeline staged (a throwaway pipeline's); raises OSError when refused."""
        self.filesystem.delete_dir(self.path_of(self.pipeline_dir()))


_CHUNK_DIR_PREFIX = "chunk-"


def _apply_file_name(run_id: str, try_number: int) -> str:
    """A safe file name for one try of an apply task of an Airflow run."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id) + f"-try{try_number}.json"


def _chunk_dir_name(chunk_no: int, attempt: str) -> str:
    return f"{_CHUNK_DIR_PREFIX}{chunk_no:05d}-{attempt}"


def _is_chunk_dir_name(name: str) -> bool:
    return name.startswith(_CHUNK_DIR_PREFIX)
