"""Which data-interval runs have nothing left to capture (pure logic of the capture planner)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_provider_mysql_cdc.capture.engine import interval_already_covered
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.store.frontier_store import WindowRecord, WindowStatus

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _window(window_id: int, rule: str, cutoff: str, planned_at: datetime) -> WindowRecord:
    return WindowRecord(
        pipeline="p",
        window_id=window_id,
        run_id=f"run-{window_id}",
        lower=GtidSet(),
        upper=GtidSet(),
        cutoff_rule=rule,
        cutoff_value=cutoff,
        status=WindowStatus.PUBLISHED,
        planned_at=planned_at,
    )


WINDOWS = [
    _window(1, "data_interval", (T0 + timedelta(hours=1)).isoformat(), T0 + timedelta(hours=1, minutes=5)),
    _window(2, "data_interval", (T0 + timedelta(hours=2)).isoformat(), T0 + timedelta(hours=2, minutes=5)),
]


def test_an_interval_ending_before_registration_is_covered_by_the_initial_frontier() -> None:
    reason = interval_already_covered(T0 - timedelta(hours=3), T0, WINDOWS)
    assert reason is not None and "before the pipeline was registered" in reason
    assert interval_already_covered(T0, T0, WINDOWS) is not None  # the registration moment itself


def test_an_interval_inside_a_later_window_names_that_window() -> None:
    reason = interval_already_covered(T0 + timedelta(hours=1, minutes=30), T0, WINDOWS)
    assert reason is not None and "window 2 (run 'run-2')" in reason
    assert interval_already_covered(T0 + timedelta(hours=2), T0, WINDOWS) is not None  # ends at the cut-off


def test_the_next_interval_is_not_covered() -> None:
    assert interval_already_covered(T0 + timedelta(hours=3), T0, WINDOWS) is None
    assert interval_already_covered(T0 + timedelta(hours=3), None, []) is None


def test_a_catch_up_window_reaches_the_moment_it_was_planned() -> None:
    catch_up = _window(3, "catch_up", "uuid:1-5", T0 + timedelta(hours=4))
    reason = interval_already_covered(T0 + timedelta(hours=3, minutes=30), T0, [*WINDOWS, catch_up])
    assert reason is not None and "window 3" in reason
    assert interval_already_covered(T0 + timedelta(hours=4, seconds=1), T0, [*WINDOWS, catch_up]) is None
