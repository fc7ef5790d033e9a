"""Binlog purge headroom: how long until the server purges a binlog file a pipeline still needs.

Pure logic (no Airflow, no MySQL I/O); ``mysql.binlog_files`` reads the facts. The file a pipeline
needs first is where MySQL's auto-position would start sending: the newest file whose
``Previous_gtids`` is contained in the capture frontier. MySQL purges a file once its mtime (when
the next file was started) is older than ``binlog_expire_logs_seconds``, checked at each binlog
rotation, so the forecast below is the earliest moment the file can go.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.errors import ServerHistoryError

#: Default minimum headroom the sensor asks for.
DEFAULT_MIN_HEADROOM_SECONDS = 6 * 3600
#: XCom key of the report the purge headroom sensor pushes before it fails or is skipped.
HEADROOM_XCOM_KEY = "headroom"

RESNAPSHOT_EXAMPLE = 'airflow dags trigger mysql_cdc_example --conf \'{"resnapshot": ["db.table"]}\''


class HeadroomStatus(str, enum.Enum):
    """``ok``: enough headroom (or no automatic purge); ``below_minimum``: act soon; ``purged``: data lost;
    ``history_mismatch``: the server cannot continue the pipeline at all (the topology guard of
    :mod:`airflow_provider_mysql_cdc.core.topology`: a lagging replica, another server, a reset history)."""

    OK = "ok"
    BELOW_MINIMUM = "below_minimum"
    PURGED = "purged"
    HISTORY_MISMATCH = "history_mismatch"


@dataclass(frozen=True)
class BinlogFileHeader:
    """One binlog file: its size, when it was started (server clock) and its ``Previous_gtids``."""

    name: str
    size: int
    created_at_us: int
    previous_gtids: GtidSet


@dataclass(frozen=True)
class HeadroomReport:
    """The outcome of :func:`assess_headroom`; :meth:`as_xcom` is its JSON form."""

    pipeline: str
    status: HeadroomStatus
    headroom_seconds: float | None
    headroom_files: int
    headroom_bytes: int
    oldest_needed_file: str | None
    purge_forecast_us: int | None
    backlog_files: int
    backlog_bytes: int
    lag_seconds: float | None
    min_headroom_seconds: int
    lost_gtids: GtidSet
    message: str
    #: What the pipeline holds and the server lacks (``history_mismatch`` only).
    missing_gtids: GtidSet = field(default_factory=GtidSet)

    @property
    def purge_forecast(self) -> str | None:
        """The forecast as ISO 8601 UTC text, or None."""
        return None if self.purge_forecast_us is None else iso_utc(self.purge_forecast_us)

    def as_xcom(self) -> dict[str, Any]:
        """JSON-safe summary (the sensor's XCom; the demo and the example DAG read these keys)."""
        return {
            "pipeline": self.pipeline,
            "status": self.status.value,
            "headroom_seconds": self.headroom_seconds,
            "headroom_files": self.headroom_files,
            "headroom_bytes": self.headroom_bytes,
            "oldest_needed_file": self.oldest_needed_file,
            "purge_forecast": self.purge_forecast,
            "backlog_files": self.backlog_files,
            "backlog_bytes": self.backlog_bytes,
            "lag_seconds": self.lag_seconds,
            "min_headroom_seconds": self.min_headroom_seconds,
            "lost_gtids": str(self.lost_gtids),
            "missing_gtids": str(self.missing_gtids),
            "message": self.message,
        }


def history_mismatch_report(pipeline: str, problem: ServerHistoryError, min_headroom_seconds: int) -> HeadroomReport:
    """The report for a server the topology guard refuses: no headroom, no lag (a server that lacks the
    frontier's transactions would show ``lag 0.0 s``), the GTIDs it lacks and the guard's message."""
    return HeadroomReport(
        pipeline=pipeline,
        status=HeadroomStatus.HISTORY_MISMATCH,
        headroom_seconds=None,
        headroom_files=0,
        headroom_bytes=0,
        oldest_needed_file=None,
        purge_forecast_us=None,
        backlog_files=0,
        backlog_bytes=0,
        lag_seconds=None,
        min_headroom_seconds=min_headroom_seconds,
        lost_gtids=GtidSet(),
        message=f"{type(problem).__name__}: {problem}",
        missing_gtids=GtidSet.parse(problem.missing_gtids),
    )


def iso_utc(timestamp_us: int) -> str:
    """``2026-01-02T03:04:05Z`` for microseconds since the epoch."""
    moment = datetime.fromtimestamp(timestamp_us // 1_000_000, tz=UTC)
    return moment.isoformat().replace("+00:00", "Z")


def human_duration(seconds: float) -> str:
    """``"2h 13m"``: the largest non-zero unit of days, hours, minutes, seconds and the next one."""
    values: list[tuple[int, str]] = []
    remaining = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        values.append((count, unit))
    for index, (count, unit) in enumerate(values):
        if count:
            following = values[index + 1] if index + 1 < len(values) else (0, "")
            return f"{count}{unit} {following[0]}{following[1]}" if following[0] else f"{count}{unit}"
    return "0s"


def human_bytes(size: int) -> str:
    """``"1.5 GiB"``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _needed_index(files: Sequence[BinlogFileHeader], frontier: GtidSet) -> int | None:
    """Index of the newest file whose ``Previous_gtids`` is within the frontier (None: no such file)."""
    for index in range(len(files) - 1, -1, -1):
        if files[index].previous_gtids <= frontier:
            return index
    return None


def _suggested_expire_seconds(expire_seconds: int, headroom_seconds: float, min_headroom_seconds: int) -> int:
    """A retention that restores the minimum headroom, rounded up to whole hours."""
    needed = expire_seconds + (min_headroom_seconds - headroom_seconds)
    return max(3600, math.ceil(needed / 3600) * 3600)


def assess_headroom(
    files: Sequence[BinlogFileHeader],
    frontier: GtidSet | None,
    gtid_purged: GtidSet,
    gtid_executed: GtidSet,
    expire_seconds: int,
    auto_purge: bool,
    now_us: int,
    last_commit_ts_us: int | None,
    min_headroom_seconds: int,
    *,
    pipeline: str = "",
) -> HeadroomReport:
    """Compare a pipeline's capture frontier with the server's binlog files and expiry.

    ``files`` in ``SHOW BINARY LOGS`` order (oldest first, the last one is the active file);
    ``frontier`` is None for a pipeline that was never registered; ``last_commit_ts_us`` is the
    commit time of the last captured transaction (for the lag), when known.
    """
    name = f"pipeline {pipeline!r}"

    def report(
        status: HeadroomStatus,
        message: str,
        *,
        index: int | None = None,
        headroom: float | None = None,
        forecast_us: int | None = None,
        lag: float | None = None,
        lost: GtidSet | None = None,
    ) -> HeadroomReport:
        older = files[:index] if index is not None else ()
        backlog = files[index:] if index is not None else (files if lost else ())
        return HeadroomReport(
            pipeline=pipeline,
            status=status,
            headroom_seconds=headroom,
            headroom_files=len(older),
            headroom_bytes=sum(f.size for f in older),
            oldest_needed_file=None if index is None else files[index].name,
            purge_forecast_us=forecast_us,
            backlog_files=len(backlog),
            backlog_bytes=sum(f.size for f in backlog),
            lag_seconds=lag,
            min_headroom_seconds=min_headroom_seconds,
            lost_gtids=lost or GtidSet(),
            message=message,
        )

    if frontier is None:
        return report(HeadroomStatus.OK, f"{name} is not registered yet (no capture frontier): it needs no binlog yet.")

    lag: float | None = None
    if frontier >= gtid_executed:
        lag = 0.0
    elif last_commit_ts_us is not None:
        lag = max(0.0, (now_us - last_commit_ts_us) / 1e6)

    index = _needed_index(files, frontier)
    lost = gtid_purged - frontier
    if index is None and files:
        lost = lost | (files[0].previous_gtids - frontier)
    if lost:
        return report(
            HeadroomStatus.PURGED,
            f"{name} can no longer be captured from the binlog: the server already purged {lost} (gtid_purged "
            f"minus the capture frontier {str(frontier) or '(empty)'}); those transactions are gone. Recover by "
            f"re-snapshotting the affected tables, e.g. {RESNAPSHOT_EXAMPLE} (docs/operations.md 'Operating it'); "
            "capture then continues after the purged transactions.",
            headroom=0.0,
            lag=lag,
            lost=lost,
        )
    if index is None:
        return report(HeadroomStatus.OK, f"{name}: the server lists no binlog file; nothing can be purged.", lag=lag)

    needed = files[index].name
    backlog = (
        f"Capture still has to read {needed} and later ({_count(len(files) - index, 'file')}, "
        f"{human_bytes(sum(f.size for f in files[index:]))}; lag {'unknown' if lag is None else human_duration(lag)}); "
        f"{_count(index, 'older file')} ({human_bytes(sum(f.size for f in files[:index]))}) would be purged before it."
    )
    if expire_seconds <= 0 or not auto_purge:
        why = "binlog_expire_logs_auto_purge is OFF" if not auto_purge else "binlog_expire_logs_seconds is 0"
        return report(
            HeadroomStatus.OK,
            f"{name}: {why}, so the server never purges binlogs automatically (only PURGE BINARY LOGS does). {backlog}",
            index=index,
            lag=lag,
        )

    if index == len(files) - 1:
        headroom = float(expire_seconds)
        forecast_us = now_us + expire_seconds * 1_000_000
        when = (
            f"{needed} is the active file, which the server cannot purge sooner than {human_duration(headroom)} "
            f"after it rotates (a lower bound; {iso_utc(forecast_us)} at the earliest)"
        )
    else:
        forecast_us = files[index + 1].created_at_us + expire_seconds * 1_000_000
        headroom = max(0.0, (forecast_us - now_us) / 1e6)
        overdue = " (overdue: at the next binlog rotation)" if forecast_us <= now_us else ""
        when = f"the server may purge {needed} from {iso_utc(forecast_us)}{overdue}"
    settings = f"binlog_expire_logs_seconds = {expire_seconds}"
    if headroom >= min_headroom_seconds:
        return report(
            HeadroomStatus.OK,
            f"{name}: {human_duration(headroom)} of headroom (minimum {human_duration(min_headroom_seconds)}): "
            f"{when}; {settings}. {backlog}",
            index=index,
            headroom=headroom,
            forecast_us=forecast_us,
            lag=lag,
        )
    suggested = _suggested_expire_seconds(expire_seconds, headroom, min_headroom_seconds)
    retention = f"SET PERSIST binlog_expire_logs_seconds = {suggested};"
    advice = (
        f"Keep binlogs longer than the minimum headroom: {retention}"
        if index == len(files) - 1
        else f"Run capture now to move the frontier past {needed}, or keep binlogs longer: {retention} and size "
        "windows (schedule, max_rows/max_bytes) so that capture keeps up with the writes."
    )
    return report(
        HeadroomStatus.BELOW_MINIMUM,
        f"{name}: only {human_duration(headroom)} of headroom left, below the minimum of "
        f"{human_duration(min_headroom_seconds)}: {when}; {settings}. {backlog} {advice}",
        index=index,
        headroom=headroom,
        forecast_us=forecast_us,
        lag=lag,
    )
