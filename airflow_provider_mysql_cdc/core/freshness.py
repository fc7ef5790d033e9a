"""How fresh a pipeline's targets are, for the metadata of the apply's Asset events (pure, no I/O).

* ``last_commit_time``: the commit time (UTC) of the newest source transaction the applied windows
  hold; None when none of them held a transaction;
* ``lag_seconds``: from that commit to the end of the apply, the "behind the source" figure streaming
  tools report. An idle source makes it grow although nothing is missing: read it with the window's
  cut-off (``data_interval`` windows end at the run's interval end).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any


def freshness(last_commit_ts_us: int | None, applied_at: datetime) -> dict[str, Any]:
    """``last_commit_time`` (ISO 8601) and ``lag_seconds`` (rounded to ms) of a commit timestamp in
    microseconds since the epoch; both None when there is none."""
    if last_commit_ts_us is None:
        return {"last_commit_time": None, "lag_seconds": None}
    committed = datetime.fromtimestamp(last_commit_ts_us / 1e6, tz=UTC)
    return {
        "last_commit_time": committed.isoformat(),
        "lag_seconds": round(max((applied_at - committed).total_seconds(), 0.0), 3),
    }


def newest_commit(commit_ts_us_by_window: Iterable[int | None]) -> int | None:
    """The newest commit timestamp among windows (None for windows without a transaction)."""
    return max((ts for ts in commit_ts_us_by_window if ts is not None), default=None)


def rows_by_op(per_table: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Rows by change op (``c``, ``u``, ``d``, ``r``) summed over tables."""
    total: dict[str, int] = {}
    for rows in per_table:
        for op, count in rows.items():
            total[op] = total.get(op, 0) + count
    return dict(sorted(total.items()))
