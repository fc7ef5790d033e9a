"""How much memory the apply's Spark needs for a run of windows, from what their manifests say.

Spark holds a whole row in one contiguous buffer, several times over while a MERGE reads, sorts,
shuffles and writes it, and each task that runs at the same time does so for its own rows: the heap
a run needs grows with the largest staged row times the tasks that run at once, not with the
window's total bytes (the rest spills). Measured on ``local[2]`` (two tasks at once) with LONGBLOB
values staged by snapshot, an ``INSERT ... SELECT`` copy, UPDATEs and a DELETE
(``tests/integration/test_big_values.py``): 64 MiB values died with ``OutOfMemoryError`` at 2304 MiB of
driver heap and passed at 2816 MiB; 128 MiB values died at 3584 MiB and passed at 4864 MiB; one task
at a time, 64 MiB values passed at 1536 MiB and 128 MiB died at 2560 MiB. Those windows held two or
three big rows. A window of many (``test_a_one_gigabyte_transaction``: sixteen 64 MiB rows inserted
in one transaction) needs more, since Spark's sorts hold rows in its managed memory until that fills
and only then spill, leaving less room for the copies outside it: at 2816 MiB it died in five runs
of seven, and it passed at 3072 MiB and above. :func:`heap_needed` covers them all with a step to
spare: :data:`BASE_HEAP_BYTES` plus :data:`ROW_HEAP_FACTOR` times the largest row per task (a row is
held whole several times over: read, sorted for the last change per key, shuffled, joined, buffered
by the Iceberg writer, and the JVM needs room to place such large arrays), 3328 MiB for 64 MiB rows on
``local[2]``. The rest of a window is not held at once: the reader's batches are bounded by bytes
here, the sorts spill, and the targets check their row group's size from the first row
(``write.parquet.row-group-check-min-record-count``, ``merge_sql.TARGET_PROPERTIES``); a 1 GiB
transaction of 16 MiB rows applies in the 1280 MiB that the line through the first measurements
gave for a 16 MiB row (this gives 1536 MiB).

:func:`plan_spark_memory` turns it into settings before the job is submitted: for a local master it
raises the driver's memory when needed (nothing changes for windows of ordinary rows) and bounds the
Parquet reader's batches by bytes; when the memory is the user's (a setting too small, or a cluster
master, whose executors' memory this side cannot see) it raises :class:`SparkMemoryTooSmallError`
naming the window, the table, the largest row and the exact setting and value to use.

:func:`staged_footprint` reads the manifests through :class:`~airflow_provider_mysql_cdc.staging.Staging`
(windows, and the snapshots whose hand-off window is among them: those are loaded by the same run).
:func:`plan_apply_memory` does both for a run of windows; ``SparkApplyOperator`` calls it before it
submits the job. No Spark or Airflow import.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.core.staging import StagingManifest
from airflow_provider_mysql_cdc.errors import ConfigurationError, SparkMemoryTooSmallError

if TYPE_CHECKING:  # the caller opens the staging (pyarrow); this module is pure
    from airflow_provider_mysql_cdc.staging import Staging

MIB = 1 << 20
GIB = 1 << 30
#: Spark's default driver and executor memory (``1g``).
SPARK_DEFAULT_MEMORY = GIB
#: Heap the apply needs besides its rows: Spark's reserved 300 MiB, Iceberg, the plans, the JVM.
BASE_HEAP_BYTES = 768 * MIB
#: Heap per running task per byte of the largest staged row (measured: 16 fits windows of a few big
#: rows exactly, a window of many big rows needed 18; see the module docstring).
ROW_HEAP_FACTOR = 20
#: Bytes of rows one Parquet reader batch may hold (Spark's default is 4,096 rows whatever their size).
READ_BATCH_BYTES = 64 * MIB
#: Spark's default rows per vectorized Parquet reader batch.
SPARK_READ_BATCH_ROWS = 4096
#: Memory settings are rounded up to this step.
MEMORY_STEP = 256 * MIB

_MEMORY = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": MIB, "k": 1 << 10, "m": MIB, "g": GIB, "t": 1 << 40, "p": 1 << 50}
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


@dataclass(frozen=True)
class LargestRow:
    """The largest staged row of a run: its bytes (see ``StagedFile.max_row_bytes``), table and where."""

    bytes: int
    table: str
    where: str


@dataclass(frozen=True)
class StagedFootprint:
    """What the staged files a run of windows reads hold: their bytes on disk and the largest row."""

    pipeline: str
    windows: str
    staged_bytes: int = 0
    files: int = 0
    largest: LargestRow | None = None

    def add(self, manifest: StagingManifest, where: str) -> StagedFootprint:
        """This footprint with ``manifest``'s files (``where`` names the window or snapshot chunk)."""
        largest = self.largest
        for staged in manifest.files:
            if staged.max_row_bytes and (largest is None or staged.max_row_bytes > largest.bytes):
                largest = LargestRow(staged.max_row_bytes, f"{staged.database}.{staged.table}", where)
        return StagedFootprint(
            self.pipeline,
            self.windows,
            self.staged_bytes + sum(f.bytes for f in manifest.files),
            self.files + len(manifest.files),
            largest,
        )


def staged_footprint(staging: Staging, first_window: int, last_window: int) -> StagedFootprint:
    """The footprint of windows ``first_window..last_window`` of ``staging``'s pipeline and of the
    snapshots they refer to whose hand-off window is among them (the run loads those). Missing
    manifests are skipped: the job reports them."""
    footprint = StagedFootprint(staging.pipeline, f"{first_window}..{last_window}")
    snapshots: set[tuple[str, str]] = set()
    for window_id in range(first_window, last_window + 1):
        manifest = staging.read_window_manifest(window_id)
        if manifest is None:
            continue
        footprint = footprint.add(manifest, f"window {window_id}")
        snapshots.update((snapshot_id, table) for table, snapshot_id in manifest.snapshots.items())
    for snapshot_id, table_name in sorted(snapshots):
        database, table = table_name.split(".", 1)
        table_manifest = staging.read_snapshot_table_manifest(snapshot_id, database, table)
        if table_manifest is None or not first_window <= table_manifest.handoff_window <= last_window:
            continue
        for chunk in table_manifest.chunks:
            chunk_manifest = staging.read_chunk_manifest(chunk)
            if chunk_manifest is not None:
                where = f"snapshot {snapshot_id} chunk {chunk['chunk']['chunk_no']}"
                footprint = footprint.add(chunk_manifest, where)
    return footprint


def heap_needed(largest_row_bytes: int, concurrent_tasks: int) -> int:
    """Bytes of heap a JVM running ``concurrent_tasks`` apply tasks at once needs for rows of
    ``largest_row_bytes``, rounded up to :data:`MEMORY_STEP`."""
    needed = BASE_HEAP_BYTES + ROW_HEAP_FACTOR * largest_row_bytes * max(concurrent_tasks, 1)
    return math.ceil(needed / MEMORY_STEP) * MEMORY_STEP


def parse_memory(text: str, setting: str) -> int:
    """Bytes of a Spark memory setting (``1g``, ``1536m``, ``2048`` = MiB)."""
    match = _MEMORY.match(str(text))
    if not match:
        raise ConfigurationError(f"{setting}={text!r} is not a Spark memory size (e.g. 2g or 1536m)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def spark_memory(size: int) -> str:
    """A byte count as a Spark memory setting, in MiB (``2048m``)."""
    return f"{math.ceil(size / MIB)}m"


def local_cores(master: str) -> int | None:
    """Task slots of a local master (``local`` 1, ``local[4]`` 4, ``local[*]`` the machine's cores), or
    None for any other master."""
    match = _LOCAL.match(master.strip())
    if match is None:
        return None
    slots = match.group(1)
    if slots is None:
        return 1
    return (os.cpu_count() or 1) if slots == "*" else int(slots)


def machine_memory() -> int | None:
    """Bytes of this machine's memory (``/proc/meminfo``), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _positive_int(text: str, setting: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigurationError(f"{setting}={text!r} is not a positive integer")
    return value


def read_batch_rows(largest_row_bytes: int) -> int:
    """Rows per Parquet reader batch so that a batch holds about :data:`READ_BATCH_BYTES` at most."""
    return max(1, min(SPARK_READ_BATCH_ROWS, READ_BATCH_BYTES // max(largest_row_bytes, 1)))


def _describe(footprint: StagedFootprint, largest: LargestRow, needed: int, tasks: int) -> str:
    return (
        f"windows {footprint.windows} of pipeline {footprint.pipeline!r}: the largest staged row is "
        f"{largest.bytes / MIB:.1f} MiB ({largest.table}, {largest.where}); applying it with {tasks} task(s) "
        f"at a time needs about {spark_memory(needed)} of heap"
    )


def plan_spark_memory(
    footprint: StagedFootprint,
    master: str,
    conf: Mapping[str, str],
    *,
    driver_memory: str | None = None,
    executor_memory: str | None = None,
    physical_memory: int | None = None,
) -> dict[str, str]:
    """Spark settings the apply job needs for ``footprint`` (added to the job's conf); raises
    :class:`SparkMemoryTooSmallError` when the memory is the user's and too small.

    ``driver_memory``/``executor_memory`` are what the operator was given (they win over ``conf``).
    Windows whose largest row fits Spark's default memory change nothing. For a local master the
    driver runs every task: ``spark.driver.memory`` is raised to :func:`heap_needed` for its task slots
    unless the user set it (then it must be at least that), and must fit ``physical_memory``. For other
    masters the executors run the tasks: ``spark.executor.memory`` must be set to at least the need of
    ``spark.executor.cores`` tasks (default 1). Either way Parquet reader batches are bounded by bytes.
    """
    largest = footprint.largest
    if largest is None:
        return {}
    settings: dict[str, str] = {}
    batch_rows = read_batch_rows(largest.bytes)
    if batch_rows < SPARK_READ_BATCH_ROWS and "spark.sql.parquet.columnarReaderBatchSize" not in conf:
        settings["spark.sql.parquet.columnarReaderBatchSize"] = str(batch_rows)
    slots = local_cores(master)
    if slots is not None:
        setting, given = "spark.driver.memory", driver_memory or conf.get("spark.driver.memory")
        tasks = slots
    else:
        setting, given = "spark.executor.memory", executor_memory or conf.get("spark.executor.memory")
        tasks = _positive_int(conf.get("spark.executor.cores", "1"), "spark.executor.cores")
    needed = heap_needed(largest.bytes, tasks)
    if given is None and needed <= SPARK_DEFAULT_MEMORY:
        return settings
    described = _describe(footprint, largest, needed, tasks)
    if given is not None:
        if parse_memory(given, setting) >= needed:
            return settings
        raise SparkMemoryTooSmallError(
            f"{described}, but {setting} is {given}: set {setting}={spark_memory(needed)} for the apply "
            "(the operator's conf, or its driver_memory/executor_memory argument), or stage smaller rows"
        )
    if slots is None:
        raise SparkMemoryTooSmallError(
            f"{described}, more than Spark's default executor memory (1g), and the executors' memory on master "
            f"{master!r} is not set: set spark.executor.memory={spark_memory(needed)} in the apply's conf"
        )
    if physical_memory is not None and needed > physical_memory:
        raise SparkMemoryTooSmallError(
            f"{described}, more than this machine's {spark_memory(physical_memory)}: apply these windows on a "
            f"cluster master with spark.executor.memory={spark_memory(heap_needed(largest.bytes, 1))} and "
            "spark.executor.cores=1, or on a machine with more memory"
        )
    settings["spark.driver.memory"] = spark_memory(needed)
    return settings


def plan_apply_memory(
    staging: Staging,
    first_window: int,
    last_window: int,
    master: str,
    conf: Mapping[str, str],
    *,
    driver_memory: str | None = None,
    executor_memory: str | None = None,
) -> tuple[StagedFootprint, dict[str, str]]:
    """The footprint of windows ``first_window..last_window`` and the Spark settings :func:`plan_spark_memory`
    gives for it on ``master`` on this machine; raises :class:`SparkMemoryTooSmallError` as it does."""
    footprint = staged_footprint(staging, first_window, last_window)
    settings = plan_spark_memory(
        footprint,
        master,
        conf,
        driver_memory=driver_memory,
        executor_memory=executor_memory,
        physical_memory=machine_memory(),
    )
    return footprint, settings
