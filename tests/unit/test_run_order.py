"""The wait for the previous run's same task (``operators/run_order.py``), with a scripted reader in
place of Airflow's API (the real runs: tests/integration/test_task_retries.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_mysql_cdc.operators.run_order import PreviousTask, previous_run_note, wait_for_previous_run


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str, *args: Any) -> None:
        self.lines.append(text % args)

    def warning(self, text: str, *args: Any) -> None:
        self.lines.append("WARNING " + text % args)


def _reader(*states: tuple[str | None, str]) -> Any:
    answers = [PreviousTask("scheduled__2026-11-24T10:00:00+00:00", "2026-11-24T10:00:00+00:00", *s) for s in states]

    def read() -> PreviousTask:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return read


def test_the_wait_lasts_while_the_previous_task_is_unfinished() -> None:
    log, sleeps = _Log(), list[float]()
    reader = _reader(("queued", "running"), ("running", "running"), (None, "running"), ("success", "success"))
    found = wait_for_previous_run(reader, log, "pipeline 'shop' capture", sleep=sleeps.append)
    assert found is not None and found.state == "success" and len(sleeps) == 3
    assert (
        "waiting for the pipeline 'shop' capture of run 'scheduled__2026-11-24T10:00:00+00:00' (queued)" in log.lines[0]
    )


def test_a_failed_or_never_started_previous_task_is_not_waited_for() -> None:
    for state, run_state in (
        ("failed", "failed"),
        ("upstream_failed", "failed"),
        (None, "failed"),
        ("skipped", "success"),
    ):
        log, sleeps = _Log(), list[float]()
        found = wait_for_previous_run(_reader((state, run_state)), log, "apply", sleep=sleeps.append)
        assert found is not None and sleeps == [], state
        assert any("failed; this run goes on" in line for line in log.lines) == (state == "failed")
    assert wait_for_previous_run(lambda: None, _Log(), "apply") is None


def test_a_previous_task_that_never_finishes_fails_this_one_naming_it() -> None:
    with pytest.raises(AirflowFailException, match=r"waited 0:00:00 for the apply of run 'scheduled__.*' \(running\)"):
        wait_for_previous_run(_reader(("running", "running")), _Log(), "apply", max_wait=timedelta(0), sleep=print)


def test_the_note_after_a_failed_run_names_it_and_the_way_out() -> None:
    note = previous_run_note("mysql_cdc_example", "apply", _reader(("failed", "failed"))())
    assert "run 'scheduled__2026-11-24T10:00:00+00:00' ended with its apply failed" in note
    assert "airflow tasks clear mysql_cdc_example -t '^apply$' -s 2026-11-24T10:00:00+00:00" in note


def test_the_note_after_a_previous_task_marked_success_says_it_did_none_of_its_work() -> None:
    note = previous_run_note("mysql_cdc_example", "apply", _reader(("success", "success"))())
    assert "run 'scheduled__2026-11-24T10:00:00+00:00' before this one shows its apply as success" in note
    assert "if it was marked so by hand, it did none of its work" in note
    assert "airflow tasks clear mysql_cdc_example -t '^apply$' -s 2026-11-24T10:00:00+00:00" in note


def test_a_manual_run_without_a_logical_date_cuts_its_window_at_the_time_it_was_triggered() -> None:
    from types import SimpleNamespace

    from airflow_provider_mysql_cdc.operators.capture import run_cutoff_time

    end = datetime(2026, 11, 25, 10, tzinfo=UTC)
    triggered = datetime(2026, 11, 25, 10, 7, 3, tzinfo=UTC)
    run = SimpleNamespace(run_after=triggered)
    assert run_cutoff_time(cast(Context, {"data_interval_end": end, "dag_run": run})) == end
    # Airflow gives a run triggered without a logical date no data interval.
    assert run_cutoff_time(cast(Context, {"data_interval_end": None, "dag_run": run})) == triggered
    assert run_cutoff_time(cast(Context, {})) is None
