"""Compare a pipeline's Iceberg targets with MySQL exactly as of one GTID set, while MySQL is written to
(no Airflow import).

Per table:

1. The target's applied frontier ``F`` and the Iceberg snapshot holding exactly it are read from the
   target's own history (the apply records ``F`` in each commit), before anything else.
2. The source is read in one consistent snapshot with the provider's snapshot engine (one chunk, so
   one GTID set ``S``), staged into scratch staging; ``F`` must be inside ``S`` (it was executed before
   the read started), else :class:`~airflow_provider_mysql_cdc.errors.TargetAheadOfSourceError`.
3. The changes between ``F`` and ``S`` are captured into the scratch staging with the capture engine
   (a throwaway pipeline starting at ``F``, its window ending at exactly ``S``); each key's last change
   is applied to the target's rows in Spark, in memory: that is the target as of ``S``.
4. Both sides are split into hash ranges of the key (:mod:`.ranges`); the checked ranges (all, or a
   seeded sample) are compared by checksum, and the ranges that differ row by row, within a row budget.

The throwaway pipelines live in a temporary SQLite store and are deleted from the scratch staging
afterwards. Nothing writes a target table.
"""

from __future__ import annotations

import glob
import logging
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.apply.iceberg_session import table_exists
from airflow_provider_mysql_cdc.apply.plan import AppliedState
from airflow_provider_mysql_cdc.apply.staged_rows import read_versions
from airflow_provider_mysql_cdc.apply.table_applier import read_applied_state
from airflow_provider_mysql_cdc.apply.verify import (
    StagedSnapshotTable,
    align_to_target,
    read_staged_snapshot,
    snapshot_tables,
    target_name,
)
from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.errors import ConfigurationError, TargetAheadOfSourceError
from airflow_provider_mysql_cdc.mysql.client import connection_to
from airflow_provider_mysql_cdc.mysql.introspection import selected_tables
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from airflow_provider_mysql_cdc.verify import DEFAULT_VERIFY_SERVER_ID
from airflow_provider_mysql_cdc.verify.ranges import (
    DEFAULT_ROW_BUDGET,
    DEFAULT_ROWS_PER_RANGE,
    differing_ranges,
    plan_ranges,
    range_count,
    within_budget,
)
from airflow_provider_mysql_cdc.verify.report import (
    DEFAULT_MAX_KEYS,
    TableVerification,
    VerifyReport,
    key_differences,
)
from airflow_provider_mysql_cdc.verify.spark_checks import (
    COPIES,
    ROW_IDENTITY,
    multiset_rows,
    range_checksums,
    row_differences,
    target_at,
    with_ranges,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerifyRequest:
    """What to verify and how much of it."""

    pipeline: str
    #: MySQL ``db.table`` names or glob patterns (``shop.*``: every table MySQL has that matches).
    tables: tuple[str, ...]
    #: The pipeline's staging: a target that holds a one-chunk snapshot and no window with changes of
    #: the table yet is verified from that chunk's GTID set. None: such targets are not verified.
    staging_uri: str | None = None
    catalog: str = "lake"
    target_template: str = "{database}.{table}"
    #: Staging URI of the throwaway snapshot and window (Spark must read it); None: a local temporary dir.
    scratch_uri: str | None = None
    key_columns: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Fraction of each table's key ranges to check (1.0: all of them).
    sample_fraction: float = 1.0
    seed: int = 0
    rows_per_range: int = DEFAULT_ROWS_PER_RANGE
    #: Most rows per table compared row by row (both sides counted).
    row_budget: int = DEFAULT_ROW_BUDGET
    #: Most differing keys listed per table.
    max_keys: int = DEFAULT_MAX_KEYS
    replica_server_id: int = DEFAULT_VERIFY_SERVER_ID

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigurationError(f"pipeline {self.pipeline!r}: name at least one table to verify")
        plan_ranges(1, self.sample_fraction, self.seed)  # validates the fraction
        if self.row_budget < 1 or self.rows_per_range < 1 or self.max_keys < 0:
            raise ConfigurationError("row_budget and rows_per_range must be at least 1, max_keys at least 0")


def verify_targets(spark: SparkSession, source: MySqlConnectionConfig, request: VerifyRequest) -> VerifyReport:
    """Verify each table of the request; see the module docstring. ``source`` needs what a snapshot and
    a capture need (SELECT, LOCK TABLES, REPLICATION CLIENT and SLAVE)."""
    run = uuid.uuid4().hex[:12]
    results: list[TableVerification] = []
    with tempfile.TemporaryDirectory(prefix="mysql-cdc-verify-") as tmp:
        staging_uri = request.scratch_uri or str(Path(tmp) / "staging")
        scratch = _Scratch(staging_uri, Path(tmp) / "verify.db", run)
        try:
            for index, name in enumerate(resolve_tables(source, request.tables)):
                results.append(_verify_table(spark, source, request, name, scratch, index))
                log.info("%s", results[-1].describe())
        finally:
            scratch.delete()
    return VerifyReport(request.pipeline, tuple(results), request.sample_fraction, request.seed, request.row_budget)


@dataclass
class _Scratch:
    """Where a verification stages its throwaway snapshots and windows."""

    staging_uri: str
    store_path: Path
    run: str
    pipelines: list[str] = field(default_factory=list)

    def pipeline(self, kind: str, index: int) -> str:
        name = f"verify-{self.run}-{kind}-{index}"
        self.pipelines.append(name)
        return name

    def delete(self) -> None:
        for pipeline in self.pipelines:
            try:
                Staging(self.staging_uri, pipeline).delete_pipeline()
            except OSError as exc:
                log.warning("could not delete the verification's staging %s/%s: %s", self.staging_uri, pipeline, exc)


def resolve_tables(source: MySqlConnectionConfig, tables: Sequence[str]) -> list[str]:
    """The ``db.table`` names: plain names as given, patterns expanded to the tables MySQL has."""
    names: list[str] = []
    for entry in tables:
        if any(char in entry for char in "*?["):
            with connection_to(source) as connection:
                found = selected_tables(connection, source, TableSelection.of([entry]))
        else:
            found = [entry]
        names += [name for name in found if name not in names]
    return names


def _snapshot_frontier(request: VerifyRequest, name: str, state: AppliedState) -> GtidSet | None:
    """The GTID set of a target that holds a one-chunk snapshot and no window with changes of the table
    since: its chunk's frontier (read from the pipeline's staging); None when not known."""
    if request.staging_uri is None or not state.snapshot_id:
        return None
    database, table = name.split(".", 1)
    manifest = Staging(request.staging_uri, request.pipeline).read_snapshot_table_manifest(
        state.snapshot_id, database, table
    )
    if manifest is None or len(manifest.chunks) != 1:
        return None
    return GtidSet.parse(manifest.chunks[0]["frontier"])


def _unverifiable(state: AppliedState | None, pipeline: str, target: str) -> str:
    """Why ``target`` cannot be brought to a GTID set now, or ""."""
    if state is None:
        return f"no apply of pipeline {pipeline!r} has written {target} yet; verify after its first apply"
    if state.pipeline != pipeline:
        return f"{target} was written by pipeline {state.pipeline!r}, not {pipeline!r}"
    if state.loading:
        return f"{target} is loading snapshot {state.snapshot_id}; verify after the apply finished loading it"
    if state.rebuild_pending:
        return f"{target} waits for a rebuild ({state.rebuild_pending}); re-snapshot it, then verify"
    return ""


def _verify_table(
    spark: SparkSession,
    source: MySqlConnectionConfig,
    request: VerifyRequest,
    name: str,
    scratch: _Scratch,
    index: int,
) -> TableVerification:
    target = target_name(name, request.catalog, request.target_template)
    if not table_exists(spark, target):
        return TableVerification(name, target, problem=f"{target} does not exist")
    iceberg_snapshot, state = read_applied_state(spark, target)
    problem = _unverifiable(state, request.pipeline, target)
    if problem:
        return TableVerification(name, target, problem=problem)
    assert state is not None and iceberg_snapshot is not None
    frontier = GtidSet.parse(state.upper) if state.upper else _snapshot_frontier(request, name, state)
    if frontier is None:
        return TableVerification(
            name,
            target,
            problem=f"{target} holds snapshot {state.snapshot_id} and no applied window with changes of the table "
            "yet; its GTID set is known only for a one-chunk snapshot read from the pipeline's staging (give "
            "staging_uri), else verify after the apply of a window that changes the table",
        )
    staged = snapshot_tables(
        source,
        [name],
        scratch.staging_uri,
        scratch.pipeline("snapshot", index),
        scratch.store_path,
        request.key_columns,
        one_chunk_per_table=True,
    ).get(name)
    if staged is None:
        return TableVerification(name, target, target_frontier=str(frontier), problem="no such table in MySQL")
    (read_at,) = staged.frontiers
    if not frontier <= read_at:
        raise TargetAheadOfSourceError(
            f"pipeline {request.pipeline!r}: {target} holds transactions {frontier - read_at} that the source's "
            f"consistent read of {name} (GTID set {read_at}) lacks: the connection reaches another server or "
            "history than the one the pipeline applied from; point the verification at that server"
        )
    changes = _changes_between(spark, source, request, name, frontier, read_at, scratch, index)
    if changes is not None and not staged.primary_key:
        changes = (
            f"{name} has no primary key and changed between the target's frontier {frontier} and the source's read "
            f"{read_at}: its rows are compared as a multiset once the apply has taken those changes; verify then"
        )
    if isinstance(changes, str):
        return TableVerification(name, target, str(read_at), str(frontier), problem=changes)
    rows = spark.sql(f"SELECT * FROM {target} VERSION AS OF {iceberg_snapshot}")
    return _compare(request, name, target, staged, rows, changes, str(frontier))


def _changes_between(
    spark: SparkSession,
    source: MySqlConnectionConfig,
    request: VerifyRequest,
    name: str,
    frontier: GtidSet,
    read_at: GtidSet,
    scratch: _Scratch,
    index: int,
) -> DataFrame | str | None:
    """The staged changes of ``name`` between ``frontier`` and ``read_at`` (None when there are none),
    or why they cannot be applied in memory."""
    if not read_at - frontier:
        return None
    pipeline = scratch.pipeline("window", index)
    capture = CaptureRequest(
        pipeline=pipeline,
        run_id="verify",
        staging_uri=scratch.staging_uri,
        cutoff=CutoffRule.CATCH_UP,
        tables=TableSelection.of([glob.escape(name)]),
        initial_frontier=frontier,
        replica_server_id=request.replica_server_id,
        upper_bound=read_at,
    )
    result = capture_window(capture, source, FrontierStore.from_url(f"sqlite:///{scratch.store_path}"))
    if result.upper != read_at | frontier:
        return f"the changes after {frontier} were read to {result.upper}, not to {read_at}; retry"
    staging = Staging(scratch.staging_uri, pipeline)
    manifest = staging.read_window_manifest(result.window_id)
    assert manifest is not None
    files = [f for f in manifest.files if f"{f.database}.{f.table}" == name]
    schema_changes = [e for e in manifest.schema_events if e.table_name == name]
    if schema_changes or any(f"{t.database}.{t.table}" == name for t in manifest.truncates):
        return (
            f"a schema change or TRUNCATE of {name} lies between the target's frontier {frontier} and the "
            f"source's read {read_at}; verify after the apply has taken it"
        )
    if any(f.partial_rows for f in files):
        return f"changes of {name} after {frontier} hold partial row images; verify after the apply has taken them"
    paths: dict[int, list[str]] = {}
    for path, staged_file in staging.spark_files(manifest, files):
        paths.setdefault(staged_file.schema_version, []).append(path)
    return read_versions(spark, paths)


def _compare(
    request: VerifyRequest,
    name: str,
    target: str,
    staged: StagedSnapshotTable,
    target_rows: DataFrame,
    changes: DataFrame | None,
    frontier: str,
) -> TableVerification:
    keys = list(staged.key_columns)
    aligned = align_to_target(read_staged_snapshot(target_rows.sparkSession, staged.paths), target_rows)
    columns = list(aligned.columns)
    source_rows, target_rows = aligned.source, target_at(aligned.target, changes, keys)
    if not staged.primary_key:  # a multiset (no changes to bring in: see _verify_table): distinct rows, counted
        source_rows, target_rows = multiset_rows(source_rows, columns), multiset_rows(target_rows, columns)
        keys, columns = [ROW_IDENTITY], [*columns, COPIES]
    plan = plan_ranges(range_count(staged.rows, request.rows_per_range), request.sample_fraction, request.seed)
    source = with_ranges(source_rows, keys, plan.ranges)
    at_read = with_ranges(target_rows, keys, plan.ranges)
    checked = plan.checked if plan.sampled else None
    source_sums = range_checksums(source, columns, checked)
    target_sums = range_checksums(at_read, columns, checked)
    differing = differing_ranges(plan.checked, source_sums, target_sums)
    compared, over_budget = within_budget(differing, source_sums, target_sums, request.row_budget)
    rows = row_differences(source, at_read, keys, columns, compared, request.max_keys) if compared else None
    return TableVerification(
        table=name,
        target=target,
        gtid_set=str(staged.frontiers[0]),
        target_frontier=frontier,
        changes_applied=0 if changes is None else changes.count(),
        ranges=plan.ranges,
        ranges_checked=plan.checked,
        ranges_differing=differing,
        ranges_over_budget=over_budget,
        source_rows_checked=sum(c.rows for c in source_sums.values()),
        target_rows_checked=sum(c.rows for c in target_sums.values()),
        missing_rows=0 if rows is None else rows.missing,
        extra_rows=0 if rows is None else rows.extra,
        changed_rows=0 if rows is None else rows.changed,
        differences=() if rows is None else key_differences(rows.first, keys),
        missing_columns=aligned.missing_columns,
    )
