"""The staging format (pure): window and snapshot manifests, sequence numbers, deterministic JSON.

Where staged files and manifests live, and every read and write of them, belongs to
:class:`airflow_provider_mysql_cdc.staging.Staging`. A window exists only once its manifest is
published; the manifest lists every file (its path relative to the manifest's directory) with its row
count, size and SHA-256, so readers never list directories and never see partial windows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.schema_events import SchemaEvent
from airflow_provider_mysql_cdc.errors import CorruptStagingError, MySqlCdcError

MANIFEST_NAME = "_manifest.json"
#: 2: column identities in schema versions, ``schema_events``, ``rebuilds_pending``, the ``_cdc_partial``
#: column and ``StagedFile.partial_rows``; ``StagedFile.max_row_bytes`` is optional (0 where absent).
#: Version 1 manifests are still read.
MANIFEST_FORMAT_VERSION = 2
READABLE_FORMAT_VERSIONS = frozenset({1, 2})
#: ``_cdc_seq = window_id << SEQ_BITS | position``: strictly increasing in binlog order within a
#: window and across windows (2**40 changes per window, 2**23 windows).
SEQ_BITS = 40
OPS = ("r", "c", "u", "d")


#: Key of a manifest's own checksum: the SHA-256 of the manifest's JSON without that key. A manifest
#: whose content does not match it was edited and is refused (manifests written before it existed
#: have none and are read as they are).
MANIFEST_CHECKSUM_KEY = "manifest_sha256"


def _canonical_json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, indent=2) + "\n"


def _sealed_json(data: Mapping[str, Any]) -> str:
    """Deterministic JSON of ``data`` with its checksum (see :data:`MANIFEST_CHECKSUM_KEY`)."""
    checksum = hashlib.sha256(_canonical_json(data).encode("utf-8")).hexdigest()
    return _canonical_json({**data, MANIFEST_CHECKSUM_KEY: checksum})


def _unsealed(text: str) -> tuple[dict[str, Any], str | None]:
    """A manifest's JSON object without its checksum, and the checksum it records (None: none)."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    recorded = data.pop(MANIFEST_CHECKSUM_KEY, None)
    return data, None if recorded is None else str(recorded)


def _check_seal(data: Mapping[str, Any], recorded: str | None) -> None:
    """ValueError when ``data`` does not match the checksum its manifest recorded (it was edited)."""
    if recorded is not None and recorded != hashlib.sha256(_canonical_json(data).encode("utf-8")).hexdigest():
        raise ValueError(f"its content does not match its {MANIFEST_CHECKSUM_KEY}: it was edited")


def cdc_seq(window_id: int, position: int) -> int:
    """The ``_cdc_seq`` of the ``position``-th change (0-based) of a window."""
    if not 0 <= position < 2**SEQ_BITS:
        raise ValueError(f"window {window_id} holds more than 2**{SEQ_BITS} changes")
    return (window_id << SEQ_BITS) | position


@dataclass(frozen=True)
class StagedFile:
    """One Parquet file of a window: a table's changes in one schema version."""

    path: str
    database: str
    table: str
    schema_version: int
    rows: int
    bytes: int
    sha256: str
    op_counts: Mapping[str, int]
    first_seq: int
    last_seq: int
    #: Rows whose ``_cdc_partial`` is set (row images without every column, JSON diffs).
    partial_rows: int = 0
    #: Bytes of the file's largest row, what the apply sizes Spark's memory from: for a window, the row's
    #: share of its binlog row event; for a snapshot chunk, 8 per column plus the lengths of its text
    #: and binary values. 0 when the writer did not record it (manifests written before it existed).
    max_row_bytes: int = 0


@dataclass(frozen=True)
class SchemaVersionInfo:
    """A table schema as staged: version number, fingerprint and columns (name, MySQL type, Arrow type)."""

    database: str
    table: str
    schema_version: int
    fingerprint: str
    columns: tuple[Mapping[str, Any], ...]
    primary_key: tuple[str, ...]


@dataclass(frozen=True)
class TruncateMarker:
    """``TRUNCATE TABLE`` at a position in the window: rows with a smaller ``_cdc_seq`` are gone."""

    database: str
    table: str
    seq: int
    gtid: str


@dataclass(frozen=True)
class DdlStatement:
    """A DDL statement seen in the window, with its GTID and position."""

    database: str
    statement: str
    seq: int
    gtid: str


@dataclass(frozen=True)
class StagingManifest:
    """What a published window holds; the only entry point for readers of staging."""

    pipeline: str
    window_id: int
    lower: str
    upper: str
    cutoff_rule: str
    cutoff_value: str
    transactions: int
    first_commit_ts_us: int | None
    last_commit_ts_us: int | None
    files: tuple[StagedFile, ...] = ()
    schemas: tuple[SchemaVersionInfo, ...] = ()
    truncates: tuple[TruncateMarker, ...] = ()
    ddl: tuple[DdlStatement, ...] = ()
    format_version: int = MANIFEST_FORMAT_VERSION
    #: ``window``, or ``snapshot`` for one chunk of a snapshot (``window_id`` 0, ``lower`` empty,
    #: ``upper`` the chunk's frontier, rows with ``_cdc_op = 'r'``).
    kind: str = "window"
    snapshot_id: str | None = None
    #: The chunk's :meth:`SnapshotChunk.to_json` description.
    chunk: Mapping[str, Any] | None = None
    #: The attempt token of the chunk's directory.
    attempt: str | None = None
    #: Capture skips this chunk's already-snapshotted changes in windows from this id on.
    handoff_window: int | None = None
    #: Windows only: purged GTIDs past ``lower`` that every selected table's snapshot holds; the
    #: window did not read them (they are part of ``upper``).
    covered_by_snapshots: str = ""
    #: Windows only: ``db.table`` -> id of the snapshot that governs the table in this window (the
    #: state the window's changes of that table apply to); tables no snapshot governs are absent.
    snapshots: Mapping[str, str] = field(default_factory=dict)
    #: Windows only: what DDL did to the selected tables, in binlog order (see
    #: :mod:`~airflow_provider_mysql_cdc.core.schema_events`).
    schema_events: tuple[SchemaEvent, ...] = ()
    #: Windows only: ``db.table`` -> why the table still waits for a fresh snapshot (a ``rebuild``
    #: event of an earlier window); its changes are not staged until a snapshot governs it again.
    rebuilds_pending: Mapping[str, str] = field(default_factory=dict)

    def chunk_identity(self) -> tuple[str, str, str, int, str]:
        """A snapshot chunk manifest's snapshot id, database, table, chunk number and attempt token."""
        if self.snapshot_id is None or self.chunk is None or self.attempt is None:
            raise CorruptStagingError(f"snapshot manifest of pipeline {self.pipeline!r} lacks its chunk identity")
        return (
            self.snapshot_id,
            str(self.chunk["database"]),
            str(self.chunk["table"]),
            int(self.chunk["chunk_no"]),
            self.attempt,
        )

    def op_counts(self) -> dict[str, int]:
        """Rows by ``_cdc_op`` over the whole window."""
        totals = dict.fromkeys(OPS, 0)
        for staged in self.files:
            for op, count in staged.op_counts.items():
                totals[op] += count
        return totals

    def records_max_row_bytes(self) -> bool:
        """Whether its files record ``max_row_bytes`` (a manifest written before that field has only 0)."""
        return any(staged.max_row_bytes for staged in self.files)

    def without_max_row_bytes(self) -> StagingManifest:
        """This manifest as a writer that did not record ``max_row_bytes`` would have published it."""
        return replace(self, files=tuple(replace(staged, max_row_bytes=0) for staged in self.files))

    def table_counts(self) -> dict[str, dict[str, int]]:
        """Rows by op for each ``db.table``."""
        counts: dict[str, dict[str, int]] = {}
        for staged in self.files:
            table = counts.setdefault(f"{staged.database}.{staged.table}", dict.fromkeys(OPS, 0))
            for op, count in staged.op_counts.items():
                table[op] += count
        return counts

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys) with its checksum: the same window always gives the same bytes."""
        return _sealed_json(asdict(self))

    @classmethod
    def from_json(cls, text: str, where: str) -> StagingManifest:
        """Parse and validate a manifest; raise :class:`CorruptStagingError` naming ``where``."""
        fix = "delete the window's staging directory and re-run its capture task to rewrite it"
        try:
            data, recorded = _unsealed(text)
            if data.get("kind") == "snapshot":
                fix = "re-snapshot the table (a finished snapshot chunk is never rewritten)"
            if data.get("format_version") not in READABLE_FORMAT_VERSIONS:
                raise ValueError(f"unsupported format_version {data.get('format_version')!r}")
            manifest = cls(
                **{
                    **data,
                    "files": tuple(StagedFile(**item) for item in data["files"]),
                    "schemas": tuple(
                        SchemaVersionInfo(
                            **{**item, "columns": tuple(item["columns"]), "primary_key": tuple(item["primary_key"])}
                        )
                        for item in data["schemas"]
                    ),
                    "truncates": tuple(TruncateMarker(**item) for item in data["truncates"]),
                    "ddl": tuple(DdlStatement(**item) for item in data["ddl"]),
                    "schema_events": tuple(SchemaEvent(**item) for item in data.get("schema_events", ())),
                }
            )
            GtidSet.parse(manifest.lower)
            GtidSet.parse(manifest.upper)
            if manifest.kind not in ("window", "snapshot"):
                raise ValueError(f"unknown manifest kind {manifest.kind!r}")
            if manifest.kind == "snapshot":
                manifest.chunk_identity()
            elif not isinstance(manifest.window_id, int):
                raise ValueError(f"window_id {manifest.window_id!r} is not an integer")
            _check_seal(data, recorded)
        except (ValueError, TypeError, KeyError, MySqlCdcError) as exc:
            raise CorruptStagingError(f"manifest {where} is corrupt or was edited ({exc}); {fix}") from None
        return manifest


@dataclass(frozen=True)
class SnapshotTableManifest:
    """A table's finished snapshot: each chunk's key range, frontier and manifest (what apply loads).

    Published in the table's snapshot directory (:meth:`Staging.snapshot_table_manifest_path`) once every
    chunk is finished; each chunk entry holds ``chunk`` (:meth:`SnapshotChunk.to_json`), ``frontier``,
    ``manifest`` (the chunk manifest's path relative to the staging root) and ``rows``.
    """

    pipeline: str
    snapshot_id: str
    database: str
    table: str
    handoff_window: int
    chunks: tuple[Mapping[str, Any], ...]
    kind: str = "snapshot_table"

    @property
    def table_name(self) -> str:
        """``db.table``."""
        return f"{self.database}.{self.table}"

    def to_json(self) -> str:
        """Deterministic JSON: every chunk task that completes the table writes the same bytes."""
        data = {
            "kind": self.kind,
            "pipeline": self.pipeline,
            "snapshot_id": self.snapshot_id,
            "database": self.database,
            "table": self.table,
            "handoff_window": self.handoff_window,
            "chunks": list(self.chunks),
        }
        return _sealed_json(data)

    @classmethod
    def from_json(cls, text: str, where: str) -> SnapshotTableManifest:
        """Parse and validate a table manifest; raise :class:`CorruptStagingError` naming ``where``."""
        try:
            data, recorded = _unsealed(text)
            if data.get("kind") != "snapshot_table":
                raise ValueError(f"kind is {data.get('kind')!r}, not 'snapshot_table'")
            manifest = cls(**{**data, "chunks": tuple(data["chunks"])})
            for chunk in manifest.chunks:
                if not isinstance(chunk["manifest"], str) or not chunk["manifest"].endswith(MANIFEST_NAME):
                    raise ValueError(f"chunk entry {chunk!r} names no chunk manifest")
                GtidSet.parse(chunk["frontier"])
            _check_seal(data, recorded)
        except (ValueError, TypeError, KeyError, MySqlCdcError) as exc:
            raise CorruptStagingError(
                f"snapshot table manifest {where} is corrupt or was edited ({exc}); re-run the last chunk task "
                "of that snapshot to rewrite it, or re-snapshot the table"
            ) from None
        return manifest


@dataclass
class OpCounter:
    """Mutable per-file counters while a file is written."""

    rows: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))

    def add(self, op: str, seq: int, rows: int = 1) -> None:
        """Count ``rows`` rows of one op, the last one at ``seq`` (consecutive sequence numbers)."""
        self.rows += rows
        self.ops[op] += rows
        if self.first_seq is None:
            self.first_seq = seq - rows + 1
        self.last_seq = seq
