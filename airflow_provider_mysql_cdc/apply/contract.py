"""The apply contract: what the Spark job is asked to do (:class:`ApplySpec`) and what it reports back
(:class:`ApplyReport`), each with a versioned JSON form; the same for the table maintenance job
(:class:`MaintenanceSpec`, :class:`MaintenanceReport`).

``SparkApplyOperator`` renders its arguments into an :class:`ApplySpec`, writes it to the pipeline's
staging (:meth:`~airflow_provider_mysql_cdc.staging.Staging.apply_spec_path`) and submits the job
with ``--spec <URI>``; the job reads it back, applies, and writes the :class:`ApplyReport` to
``spec.report_uri``, which the operator reads. The apply's settings are these fields, defined once.

A spec holds no credential. The catalog's properties (``catalog_conf``: a REST token, a JDBC catalog's
password, storage keys) and Spark's memory settings stay Spark properties given to spark-submit (the
JVM needs them before the session exists, and a staging file would keep a secret on disk): ``--conf``,
except those that hold a secret, which go in a properties file only this user can read, deleted after
the job (:mod:`airflow_provider_mysql_cdc.core.spark_properties`). The spec only names the catalog.

Pure: no Spark, Airflow or pyarrow import.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from airflow_provider_mysql_cdc.apply.partitioning import parse_partitioning
from airflow_provider_mysql_cdc.apply.plan import target_table
from airflow_provider_mysql_cdc.core.lineage import identifier_parts
from airflow_provider_mysql_cdc.core.schema_events import SCHEMA_CHANGE_REBUILD, require_schema_change_policy
from airflow_provider_mysql_cdc.errors import ApplyContractError, ConfigurationError

#: Version of :meth:`ApplySpec.to_json`'s document; a job refuses a spec of a version it does not know.
APPLY_SPEC_FORMAT = 1
#: Version of :meth:`ApplyReport.to_json`'s document.
APPLY_REPORT_FORMAT = 1

#: What a reader of another version is told to do.
_SAME_VERSION = (
    "install the same airflow-provider-mysql-cdc version on the Spark driver as on the Airflow worker, "
    "then re-run the apply task"
)


def parse_windows(text: str) -> tuple[int, int]:
    """``"5"`` or ``"3-5"`` -> (first, last)."""
    try:
        first, _, last = text.strip().partition("-")
        return int(first), int(last or first)
    except ValueError:
        raise ConfigurationError(f"windows must be N or N-M (window ids), got {text!r}") from None


def _document(text: str, source: str, what: str, version_key: str, known: int) -> dict[str, Any]:
    """The JSON object of a contract file, after checking its format version."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ApplyContractError(f"the {what} at {source} is not valid JSON ({exc}); {_SAME_VERSION}") from None
    if not isinstance(document, dict):
        raise ApplyContractError(f"the {what} at {source} is not a JSON object; {_SAME_VERSION}")
    version = document.pop(version_key, None)
    if version != known:
        raise ApplyContractError(
            f"the {what} at {source} has format {version!r}, this provider reads format {known}; {_SAME_VERSION}"
        )
    return document


def _build(cls: type[Any], document: Mapping[str, Any], source: str, what: str) -> Any:
    """``cls(**document)``, an unknown or missing field named in an :class:`ApplyContractError`."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(document) - names)
    if unknown:
        raise ApplyContractError(f"the {what} at {source} has unknown fields {unknown}; {_SAME_VERSION}")
    try:
        return cls(**document)
    except TypeError as exc:
        raise ApplyContractError(f"the {what} at {source} is incomplete ({exc}); {_SAME_VERSION}") from None


@dataclass(frozen=True)
class ApplySpec:
    """One run of the apply job: the windows of one pipeline to MERGE into one catalog's tables."""

    pipeline: str
    #: The staging URI the windows were captured to (any pyarrow filesystem URI).
    staging_uri: str
    #: First and last window id to apply (inclusive).
    first_window: int
    last_window: int
    #: The Spark catalog of the targets (configured by Spark properties, see the module docstring).
    catalog: str = "lake"
    #: Target table name inside the catalog: ``{database}`` and ``{table}`` are the MySQL names.
    target_template: str = "{database}.{table}"
    #: ``db.table`` patterns (fnmatch) of the tables that also get a changelog table.
    history: tuple[str, ...] = ()
    history_suffix: str = "_changelog"
    #: Drop target columns that were dropped in MySQL (by default they stay, NULL from then on).
    drop_dropped_columns: bool = False
    #: A table whose window holds a change its target cannot follow: ``rebuild`` (it waits for the fresh
    #: snapshot the next run takes; reported, not failed) or ``stop`` (reported failed until re-snapshotted).
    schema_change_policy: str = SCHEMA_CHANGE_REBUILD
    #: Snapshot chunks merged per Iceberg commit when a snapshot is loaded.
    chunks_per_commit: int = 8
    #: Tables applied at the same time, each from its own thread of the one Spark session (1: one after
    #: the other). A small table's apply waits on the driver far more than it computes; the tasks of all
    #: of them share the session's executors.
    parallel_tables: int = 4
    #: Where the job writes its :class:`ApplyReport` (a pyarrow filesystem URI); nothing when empty.
    report_uri: str = ""
    #: ``db.table`` patterns -> the targets' Iceberg partition fields (``bucket(16, id)``, ``days(created)``;
    #: see :mod:`~airflow_provider_mysql_cdc.apply.partitioning`); a table no pattern names keeps its target's.
    partitioning: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "history", tuple(self.history))
        parse_partitioning(self.partitioning)  # a field written wrong fails here, before any Spark
        object.__setattr__(self, "partitioning", {str(k): list(v) for k, v in dict(self.partitioning).items()})
        if not 1 <= self.first_window <= self.last_window:
            raise ConfigurationError(f"windows {self.first_window}..{self.last_window} are not a valid range")
        require_schema_change_policy(self.schema_change_policy)
        if self.parallel_tables < 1:
            raise ConfigurationError(f"parallel_tables must be at least 1, not {self.parallel_tables}")
        for key in ("{database}", "{table}"):
            if key not in self.target_template:
                raise ConfigurationError(f"target name template {self.target_template!r} must contain {key}")

    @classmethod
    def for_windows(cls, pipeline: str, staging_uri: str, windows: str | int, **settings: Any) -> ApplySpec:
        """The spec of ``windows`` (a window id, or ``first-last``) with the other fields from ``settings``."""
        first, last = parse_windows(str(windows))
        return cls(pipeline, staging_uri, first, last, **settings)

    @property
    def window_ids(self) -> list[int]:
        """Every window id of the run, in order."""
        return list(range(self.first_window, self.last_window + 1))

    def target(self, table_name: str, suffix: str = "") -> str:
        """The Iceberg table (``catalog.namespace.table``) of a MySQL ``db.table``, quoted."""
        return target_table(self.catalog, self.target_template, table_name, suffix)

    def keeps_history(self, table_name: str) -> bool:
        """Whether the table also gets a changelog table."""
        return any(fnmatch.fnmatchcase(table_name, pattern) for pattern in self.history)

    def to_json(self) -> str:
        """The spec as the job reads it (:meth:`from_json`)."""
        document = {"spec_format": APPLY_SPEC_FORMAT, **asdict(self), "history": list(self.history)}
        return json.dumps(document, sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> ApplySpec:
        """The spec in ``text`` (read from ``source``, which messages name)."""
        document = _document(text, source, "apply spec", "spec_format", APPLY_SPEC_FORMAT)
        spec: ApplySpec = _build(cls, document, source, "apply spec")
        return spec


@dataclass
class TableReport:
    """What the job did to one table (filled in while the job applies it)."""

    target: str
    status: str = "up_to_date"  # up_to_date | applied | failed
    windows_applied: list[int] = field(default_factory=list)
    snapshot_chunks_loaded: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    schema_changes: list[str] = field(default_factory=list)
    #: The table's applied state after the run (:class:`~airflow_provider_mysql_cdc.apply.plan.AppliedState`).
    state: dict[str, Any] = field(default_factory=dict)
    changelog_windows: list[int] = field(default_factory=list)
    conflicts_retried: int = 0
    seconds: float = 0.0
    error: str = ""
    #: The exception class's name when the table failed (e.g. ``UnsupportedSchemaChangeError``).
    error_class: str = ""
    #: Set when a change the target could not follow leaves the table waiting for a fresh snapshot.
    rebuild: str = ""

    @property
    def failed(self) -> bool:
        """True when the table could not be applied (the other tables were)."""
        return self.status == "failed"


@dataclass(frozen=True)
class ApplyReport:
    """What one run of the apply job did, per table; the job writes it to ``ApplySpec.report_uri``."""

    pipeline: str
    first_window: int
    last_window: int
    #: The upper GTID set of the last window.
    upper: str
    tables: Mapping[str, TableReport]
    #: Set when the job stopped before applying any table (catalog or warehouse unreachable, a window
    #: without a manifest): the message, and the exception class's name that decides retries.
    error: str = ""
    error_class: str = ""

    @property
    def failed(self) -> list[str]:
        """The tables that could not be applied, sorted."""
        return sorted(name for name, table in self.tables.items() if table.failed)

    def to_json(self) -> str:
        """The report as the operator reads it (:meth:`from_json`); ``failed`` is written for readers."""
        document = {
            "report_format": APPLY_REPORT_FORMAT,
            "pipeline": self.pipeline,
            "first_window": self.first_window,
            "last_window": self.last_window,
            "upper": self.upper,
            "tables": {name: asdict(table) for name, table in self.tables.items()},
            "failed": self.failed,
            "error": self.error,
            "error_class": self.error_class,
        }
        return json.dumps(document, sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> ApplyReport:
        """The report in ``text`` (read from ``source``, which messages name)."""
        document = _document(text, source, "apply report", "report_format", APPLY_REPORT_FORMAT)
        document.pop("failed", None)  # derived from the tables
        tables = document.get("tables")
        if not isinstance(tables, dict):
            raise ApplyContractError(f"the apply report at {source} has no tables; {_SAME_VERSION}")
        document["tables"] = {name: _build(TableReport, t, source, "apply report") for name, t in tables.items()}
        report: ApplyReport = _build(cls, document, source, "apply report")
        return report


#: Version of :meth:`MaintenanceSpec.to_json`'s document.
MAINTENANCE_SPEC_FORMAT = 1
#: Version of :meth:`MaintenanceReport.to_json`'s document.
MAINTENANCE_REPORT_FORMAT = 1

#: ``rewrite_data_files`` options: bin-pack any two or more small files, rewrite every data file that has
#: position deletes (applying them), and drop the deletes older than every data file. Rewriting the
#: files with deletes is what applies a merge-on-read target's deletes: Iceberg 1.10's
#: ``rewrite_position_delete_files`` fails on tables with a map column, and every target has one
#: (``_cdc_invalid_values``; apache/iceberg#15080). The newest delete files, which point at rewritten
#: files, stay live (their sequence number is the rewrite's starting one).
DEFAULT_REWRITE_DATA_OPTIONS: Mapping[str, str] = {
    "min-input-files": "2",
    "delete-file-threshold": "1",
    "remove-dangling-deletes": "true",
}
#: ``rewrite_position_delete_files`` options: compact any two or more delete files.
DEFAULT_REWRITE_DELETE_OPTIONS: Mapping[str, str] = {"min-input-files": "2"}


#: The youngest unreferenced file age Iceberg's ``remove_orphan_files`` procedure accepts.
MIN_ORPHAN_FILE_AGE_HOURS = 24


@dataclass(frozen=True)
class MaintenanceSpec:
    """One run of the maintenance job: Iceberg's maintenance procedures on the tables one pipeline
    applies to (compact data files, rewrite position deletes, expire snapshots, remove orphan files).

    Expiration always keeps every snapshot from the current one back to the newest commit of the apply
    (the one whose summary records the applied window and GTID set): the apply reads that commit, walking
    back over the commits the compaction made, to skip windows the table already has.
    """

    pipeline: str
    #: The Spark catalog of the targets (configured by Spark properties, as for the apply).
    catalog: str = "lake"
    #: Tables inside the catalog (``namespace.table``) to maintain; empty: every table of the catalog
    #: whose newest apply commit is this pipeline's (tables nobody applied to are never touched).
    targets: tuple[str, ...] = ()
    #: Options of ``rewrite_data_files`` (bin-pack).
    rewrite_data_options: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_REWRITE_DATA_OPTIONS))
    #: Options of ``rewrite_position_delete_files``.
    rewrite_delete_options: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_REWRITE_DELETE_OPTIONS))
    #: Snapshots older than this many hours are expired (Iceberg's default: 5 days), except the kept ones.
    snapshot_retention_hours: float = 120.0
    #: At least this many of the newest snapshots are kept (more when the newest apply commit is further back).
    retain_last: int = 1
    #: Files in a table's location that no snapshot references and older than this many hours are deleted.
    #: A younger unreferenced file may belong to a commit in progress (a running apply), so at least 1 hour.
    orphan_file_age_hours: float = 72.0
    #: Where the job writes its :class:`MaintenanceReport`; nothing when empty.
    report_uri: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))
        object.__setattr__(self, "rewrite_data_options", dict(self.rewrite_data_options))
        object.__setattr__(self, "rewrite_delete_options", dict(self.rewrite_delete_options))
        if self.retain_last < 1:
            raise ConfigurationError(f"retain_last must be at least 1 (the current snapshot), got {self.retain_last}")
        if self.snapshot_retention_hours < 0:
            raise ConfigurationError(
                f"snapshot_retention_hours must not be negative, got {self.snapshot_retention_hours}"
            )
        if self.orphan_file_age_hours < MIN_ORPHAN_FILE_AGE_HOURS:
            raise ConfigurationError(
                f"orphan_file_age_hours must be at least {MIN_ORPHAN_FILE_AGE_HOURS}, "
                f"got {self.orphan_file_age_hours}: "
                "Iceberg's remove_orphan_files refuses a younger age, since a file no snapshot references yet may "
                "belong to a commit in progress, and deleting it would break that commit"
            )
        for target in self.targets:
            try:
                parts = identifier_parts(target)
            except ValueError as exc:
                raise ConfigurationError(f"maintenance target {target!r}: {exc}") from None
            if len(parts) < 2:
                raise ConfigurationError(
                    f"maintenance target {target!r} must be namespace.table inside the catalog (a part with a "
                    "dot in backquotes: shop.`t.x`)"
                )

    def to_json(self) -> str:
        """The spec as the job reads it (:meth:`from_json`)."""
        document = {"spec_format": MAINTENANCE_SPEC_FORMAT, **asdict(self), "targets": list(self.targets)}
        return json.dumps(document, sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> MaintenanceSpec:
        """The spec in ``text`` (read from ``source``, which messages name)."""
        document = _document(text, source, "maintenance spec", "spec_format", MAINTENANCE_SPEC_FORMAT)
        spec: MaintenanceSpec = _build(cls, document, source, "maintenance spec")
        return spec


@dataclass
class TableMaintenance:
    """What the maintenance job did to one table (files and snapshots of its current snapshot)."""

    target: str
    status: str = "maintained"  # maintained | failed
    #: The window and GTID set of the newest apply commit, which expiration kept.
    window_id: int = 0
    upper: str = ""
    data_files_before: int = 0
    delete_files_before: int = 0
    data_files_after: int = 0
    delete_files_after: int = 0
    data_files_rewritten: int = 0
    data_files_added: int = 0
    delete_files_rewritten: int = 0
    delete_files_added: int = 0
    snapshots_before: int = 0
    snapshots_after: int = 0
    snapshots_expired: int = 0
    #: How many of the newest snapshots expiration was told to keep (``retain_last``, or more to reach
    #: the newest apply commit).
    snapshots_kept: int = 0
    #: Files deleted with the expired snapshots (data, delete, manifest and manifest-list files).
    expired_files_deleted: int = 0
    orphan_files_removed: list[str] = field(default_factory=list)
    #: Steps left out and why (``rewrite_position_delete_files`` on a table Iceberg 1.10 cannot run it on).
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    error_class: str = ""

    @property
    def failed(self) -> bool:
        """True when a step failed (the steps before it were committed, the ones after it not run)."""
        return self.status == "failed"


@dataclass(frozen=True)
class MaintenanceReport:
    """What one run of the maintenance job did, per table; written to ``MaintenanceSpec.report_uri``."""

    pipeline: str
    tables: Mapping[str, TableMaintenance]
    #: Set when the job stopped before maintaining any table (catalog unreachable...), with the class name.
    error: str = ""
    error_class: str = ""

    @property
    def failed(self) -> list[str]:
        """The tables a step failed on, sorted."""
        return sorted(name for name, table in self.tables.items() if table.failed)

    def to_json(self) -> str:
        """The report as the operator reads it (:meth:`from_json`)."""
        document = {
            "report_format": MAINTENANCE_REPORT_FORMAT,
            "pipeline": self.pipeline,
            "tables": {name: asdict(table) for name, table in self.tables.items()},
            "failed": self.failed,
            "error": self.error,
            "error_class": self.error_class,
        }
        return json.dumps(document, sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> MaintenanceReport:
        """The report in ``text`` (read from ``source``, which messages name)."""
        document = _document(text, source, "maintenance report", "report_format", MAINTENANCE_REPORT_FORMAT)
        document.pop("failed", None)
        tables = document.get("tables")
        if not isinstance(tables, dict):
            raise ApplyContractError(f"the maintenance report at {source} has no tables; {_SAME_VERSION}")
        document["tables"] = {
            name: _build(TableMaintenance, t, source, "maintenance report") for name, t in tables.items()
        }
        report: MaintenanceReport = _build(cls, document, source, "maintenance report")
        return report
