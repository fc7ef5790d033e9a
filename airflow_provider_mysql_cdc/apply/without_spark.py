"""A run of windows that changes no target table, planned without Spark.

Most scheduled runs of a quiet pipeline capture a window with no change of any selected table. The
apply job would then start spark-submit, a JVM and a Spark session (seconds to tens of seconds) only
to find that every table already holds what the windows bring. :func:`report_without_spark` makes
the same decision in the worker: it reads each target's applied state from the table's own Iceberg
metadata (:func:`read_hadoop_table`, a Hadoop catalog's ``metadata/v<N>.metadata.json``) and runs
the job's own planner (:func:`~airflow_provider_mysql_cdc.apply.plan.plan_table`) on it. Only when
every table has no step (and no changelog step) is the run reported as the job would report it, every
table ``up_to_date``; anything else, including anything this module cannot read or does not know
(another catalog type, an unreadable or expired history, a table waiting for a rebuild, a gap), is
left to the Spark job, which decides and reports as before. Skipping is therefore never a third way:
the windows are in the tables already, or Spark applies them.

No Spark, no Airflow import.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow.fs as pafs

from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec, TableReport
from airflow_provider_mysql_cdc.apply.plan import (
    AppliedState,
    SnapshotLink,
    newest_applied_state,
    plan_table,
    tables_in_windows,
)
from airflow_provider_mysql_cdc.core.lineage import hadoop_table_location, identifier_parts
from airflow_provider_mysql_cdc.core.staging import SnapshotTableManifest, StagingManifest
from airflow_provider_mysql_cdc.errors import MySqlCdcError
from airflow_provider_mysql_cdc.staging import Staging

__all__ = [
    "MetadataUnreadable",
    "TargetTable",
    "read_hadoop_table",
    "report_without_spark",
    "target_location",
]

_VERSION_HINT = "version-hint.text"
#: A metadata file's name in a Hadoop table's ``metadata`` folder: plain, or gzip (both namings).
_METADATA_NAME = re.compile(r"v(\d+)(\.gz)?\.metadata\.json(\.gz)?")


class MetadataUnreadable(Exception):
    """The table's metadata is not what this module reads with certainty: leave the run to Spark."""


@dataclass(frozen=True)
class TargetTable:
    """What a target table holds, as its current Iceberg metadata records it."""

    exists: bool
    #: The newest applied state of its current history (None: no apply commit, or no table).
    state: AppliedState | None = None


def target_location(warehouse_root: str, target: str) -> str:
    """Where a Hadoop catalog keeps ``catalog.namespace...table`` (:func:`hadoop_table_location`);
    raises :class:`MetadataUnreadable` for a name that is not such a path."""
    parts = identifier_parts(target)
    if len(parts) < 3 or any(not part or "/" in part for part in parts):
        raise MetadataUnreadable(f"{target} is not a catalog.namespace.table name a Hadoop catalog keeps as a path")
    return hadoop_table_location(warehouse_root, parts[1:])


def _metadata_files(filesystem: pafs.FileSystem, folder: str) -> tuple[dict[int, list[str]], str | None]:
    """One listing of the ``metadata`` folder: the files of each version (plain or gzip) and the
    version hint's text (None without one)."""
    files: dict[int, list[str]] = {}
    hint: str | None = None
    for info in filesystem.get_file_info(pafs.FileSelector(folder, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        if info.base_name == _VERSION_HINT:
            with filesystem.open_input_stream(info.path) as stream:
                hint = bytes(stream.read()).decode("utf-8", "replace").strip()
        elif match := _METADATA_NAME.fullmatch(info.base_name):
            files.setdefault(int(match.group(1)), []).append(info.path)
    return files, hint


def _current_file(files: dict[int, list[str]], hint: str | None, folder: str) -> str | None:
    """The current metadata file as the Hadoop catalog finds it: the version hint, then every next
    version that exists; without a hint, the highest version. None: no table."""
    if not files:
        return None
    if hint is None or not hint.isdigit():
        version = max(files)
    else:
        version = int(hint)
        while version + 1 in files:
            version += 1
    found = files.get(version, [])
    if not found:
        raise MetadataUnreadable(f"{folder}: version {version} of the version hint has no metadata file")
    if len(found) > 1:
        raise MetadataUnreadable(f"{folder} holds version {version} more than once: {sorted(found)}")
    return found[0]


def _applied_state(metadata: dict[str, Any], target: str) -> AppliedState | None:
    """The newest CDC state of the current snapshot's history, walked as the apply job walks it."""
    current = metadata.get("current-snapshot-id")
    snapshots = {snapshot["snapshot-id"]: snapshot for snapshot in metadata.get("snapshots", [])}

    def snapshot(snapshot_id: int) -> SnapshotLink | None:
        found = snapshots.get(snapshot_id)
        if found is None:
            return None
        summary = {str(key): str(value) for key, value in (found.get("summary") or {}).items()}
        return summary, found.get("parent-snapshot-id")

    try:
        return newest_applied_state(None if current == -1 else current, snapshot, target)
    except MySqlCdcError as exc:  # unreadable CDC properties, or an expired apply commit
        raise MetadataUnreadable(str(exc)) from None


def read_hadoop_table(filesystem: pafs.FileSystem, warehouse_root: str, target: str) -> TargetTable:
    """What the Hadoop-catalog table ``target`` holds, from its newest metadata file; raises
    :class:`MetadataUnreadable` when that cannot be told with certainty."""
    folder = target_location(warehouse_root, target) + "/metadata"
    try:
        path = _current_file(*_metadata_files(filesystem, folder), folder)
        if path is None:
            return TargetTable(exists=False)
        with filesystem.open_input_stream(path) as stream:
            data = bytes(stream.read())
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        metadata = json.loads(data)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise MetadataUnreadable(f"{folder}: {type(exc).__name__}: {exc}") from None
    if not isinstance(metadata, dict):
        raise MetadataUnreadable(f"{path} is not a JSON object")
    try:
        return TargetTable(exists=True, state=_applied_state(metadata, target))
    except (KeyError, TypeError, AttributeError) as exc:  # not laid out as Iceberg's table metadata
        raise MetadataUnreadable(f"{path}: {type(exc).__name__}: {exc}") from None


def report_without_spark(
    spec: ApplySpec, staging: Staging, read_target: Callable[[str], TargetTable]
) -> ApplyReport | None:
    """The apply job's report of ``spec`` when no table of its windows has anything to apply (every
    table ``up_to_date``, its state as read by ``read_target(target)``); None when the job must run:
    a window is not published, a table (or its changelog) has a step, waits for a rebuild, has no
    applied state, or the planner stops it with an error (the job reports that error). Raises
    :class:`MetadataUnreadable` when a target's metadata cannot be read with certainty."""
    windows = spec.window_ids
    manifests: dict[int, StagingManifest | None] = {window: staging.read_window_manifest(window) for window in windows}
    published = [manifest for manifest in manifests.values() if manifest is not None]
    if len(published) != len(windows):
        return None
    snapshots: dict[tuple[str, str], SnapshotTableManifest | None] = {}

    def read_window(window_id: int) -> StagingManifest | None:
        if window_id not in manifests:
            manifests[window_id] = staging.read_window_manifest(window_id)
        return manifests[window_id]

    def read_snapshot(snapshot_id: str, table_name: str) -> SnapshotTableManifest | None:
        if (snapshot_id, table_name) not in snapshots:
            database, table = table_name.split(".", 1)
            snapshots[snapshot_id, table_name] = staging.read_snapshot_table_manifest(snapshot_id, database, table)
        return snapshots[snapshot_id, table_name]

    tables: dict[str, TableReport] = {}
    for table_name in tables_in_windows(published):
        target = spec.target(table_name)
        state = read_target(target).state
        if state is None or state.rebuild_pending:
            return None
        try:
            if plan_table(
                table_name, spec.pipeline, state, windows, read_window, read_snapshot, spec.chunks_per_commit
            ):
                return None
            if spec.keeps_history(table_name):
                changelog = read_target(spec.target(table_name, spec.history_suffix)).state
                if changelog is None or plan_table(
                    table_name, spec.pipeline, changelog, windows, read_window, read_snapshot, load_snapshots=False
                ):
                    return None
        except MySqlCdcError:
            return None
        tables[table_name] = TableReport(target=target, state=asdict(state))
    return ApplyReport(spec.pipeline, spec.first_window, spec.last_window, published[-1].upper, tables)
