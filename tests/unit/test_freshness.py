"""The freshness figures of the apply's Asset events (``core/freshness.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_provider_mysql_cdc.core.freshness import freshness, newest_commit, rows_by_op


def test_lag_runs_from_the_newest_applied_commit_to_the_apply() -> None:
    committed = datetime(2026, 11, 24, 10, 0, 0, 250_000, tzinfo=UTC)
    applied = datetime(2026, 11, 24, 10, 1, 30, tzinfo=UTC)
    figures = freshness(int(committed.timestamp() * 1_000_000), applied)
    assert figures == {"last_commit_time": "2026-11-24T10:00:00.250000+00:00", "lag_seconds": 89.75}
    assert freshness(None, applied) == {"last_commit_time": None, "lag_seconds": None}
    # a source clock ahead of the worker's never gives a negative lag
    assert freshness(int(applied.timestamp() * 1_000_000) + 5_000_000, applied)["lag_seconds"] == 0.0


def test_the_newest_commit_skips_windows_without_transactions() -> None:
    assert newest_commit([None, 5, 9, None, 7]) == 9
    assert newest_commit([None, None]) is None


def test_rows_by_op_sum_over_tables() -> None:
    assert rows_by_op([{"c": 2, "d": 1}, {"u": 3, "c": 1}, {}]) == {"c": 3, "d": 1, "u": 3}
