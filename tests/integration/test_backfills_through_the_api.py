"""Backfills the way users start them, run by real Airflow services (api-server, scheduler,
dag-processor, triggerer): backfills created through ``POST /api/v2/backfills`` (what the UI's backfill
dialog calls) and ``airflow backfill create``, with each reprocess behaviour and ``max_active_runs``, then
a clear of a past range through ``clearTaskInstances`` (the UI's clear dialog). Every window must hold
exactly the transactions committed between its run's logical date and the previous run's, and the
Iceberg table (read by pyiceberg) must equal MySQL.

Commit timestamps come from the server's clock, so the intervals are seconds long (``schedule`` a
``timedelta``: Airflow 3 makes zero-width intervals, like a cron string's) and the test commits each
interval's transactions while the server's clock is inside it. The DAG's ``start_date`` is far in the
future, so the scheduler makes no run of its own: every run is one a backfill made (a backfill ignores
the DAG's ``start_date``).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.staging import Staging
from tests.airflow_services import AirflowServices, airflow_services
from tests.exactness.comparison import compare_table
from tests.exactness.iceberg_reader import current_metadata_file, table_directory
from tests.mysql_servers import MySqlTestServer, free_port

pytestmark = [pytest.mark.airflow, pytest.mark.mysql, pytest.mark.spark, pytest.mark.long]

DAG_ID = "backfilled_cdc"
DB = "bfill"
TABLE = "orders"
#: The DAG's schedule: the time between two runs' logical dates.
INTERVAL = timedelta(seconds=5)
#: How far inside an interval the test commits (the server's clock must have passed its start by this).
MARGIN = timedelta(milliseconds=500)
#: A backfill's runs each start Spark once; on a busy 2-core machine that is up to a minute or two each.
BACKFILL_TIMEOUT = 1800.0
DAG_FILE = """
import os
from datetime import UTC, datetime, timedelta
from airflow.sdk import DAG
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

with DAG({dag_id!r}, schedule=timedelta(seconds={seconds}), start_date=datetime(2100, 1, 1, tzinfo=UTC),
         catchup=False, max_active_runs=1, render_template_as_native_obj=True,
         params=mysql_cdc_params(pipeline={dag_id!r}, tables=[{tables!r}], staging_uri={staging!r},
                                 warehouse={warehouse!r})):
    mysql_cdc_pipeline(verify_sample_fraction=None, retry_args={{"retries": 0}},
                       jars=os.environ["MYSQL_CDC_ICEBERG_JARS"])
"""

#: (id, op) of a staged change: ``c`` insert, ``u`` update, ``d`` delete.
Change = tuple[int, str]


@dataclass(frozen=True)
class Interval:
    """What the test committed between two consecutive logical dates: the window of the run at ``end``
    must hold exactly these changes, each committed in ``[start, end)``."""

    start: datetime
    end: datetime
    changes: tuple[Change, ...]


@dataclass
class Lake:
    """The running services, the pipeline's staging and warehouse, and the MySQL server they read."""

    airflow: AirflowServices
    server: MySqlTestServer
    staging: Path
    warehouse: Path


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, mysql_server: MySqlTestServer) -> Iterator[Lake]:
    """Services with the DAG parsed and unpaused, and the pipeline registered by a one-run backfill of an
    interval that ended before any of the tests' transactions (its window is the first, empty one)."""
    from tests.spark_session import iceberg_jars

    root = tmp_path_factory.mktemp("backfills")
    connections = {
        "mysql_cdc_default": mysql_server.airflow_conn_json(),
        "spark_default": json.dumps({"conn_type": "spark", "host": "local[1]"}),
    }
    settings = {
        "MYSQL_CDC_ICEBERG_JARS": ",".join(str(jar) for jar in iceberg_jars()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.{TABLE} (id INT PRIMARY KEY, status VARCHAR(10) NOT NULL)",
        f"INSERT INTO {DB}.{TABLE} VALUES (1, 'old'), (2, 'old'), (3, 'old')",
    )
    with airflow_services(root / "home", connections, settings) as running:
        dag_file = DAG_FILE.format(
            dag_id=DAG_ID,
            seconds=int(INTERVAL.total_seconds()),
            tables=f"{DB}.*",
            staging=str(root / "staging"),
            warehouse=str(root / "warehouse"),
        )
        (running.dags_folder / f"{DAG_ID}.py").write_text(textwrap.dedent(dag_file))
        running.wait_for_dag(DAG_ID)
        # What the dialog's "Unpause ... on trigger" does: Airflow starts no backfill run of a paused DAG.
        running.api.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False})
        found = Lake(running, mysql_server, root / "staging", root / "warehouse")
        registration = _whole_second(mysql_server.utc_now()) - INTERVAL
        backfill = _create_backfill(found, registration, registration, max_active_runs=1)
        _completed(found, backfill)
        registered = _capture(found, _run_at(found, registration))
        assert (registered["window_id"], registered["transactions"]) == (1, 0), registered
        _assert_iceberg_equals_mysql(found)
        yield found


# -- helpers -------------------------------------------------------------------------------------------


def _whole_second(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _commit_in(lake: Lake, start: datetime, end: datetime, statements: Sequence[str]) -> None:
    """Run ``statements`` (autocommit, one transaction each) once the server's clock is past
    ``start + MARGIN``; they must all have committed before ``end``."""
    lake.airflow.wait_for(
        f"the server's clock to pass {start + MARGIN}",
        lambda: lake.server.utc_now() >= start + MARGIN,
        timeout=(end - lake.server.utc_now()).total_seconds() + 60,
    )
    lake.server.execute(*statements)
    committed_by = lake.server.utc_now()
    assert committed_by < end, f"the statements for [{start}, {end}) committed only by {committed_by}"


def _intervals(lake: Lake, count: int, first_id: int) -> list[Interval]:
    """``count`` consecutive intervals starting at the next whole second, each with three transactions
    (an insert, an update, and a delete of the row the interval before inserted; the first interval
    updates row 3 instead); the server's clock is past the last one on return."""
    start = _whole_second(lake.server.utc_now()) + timedelta(seconds=1)
    intervals = []
    for k in range(count):
        low, high = start + k * INTERVAL, start + (k + 1) * INTERVAL
        new_id = first_id + k
        statements = [
            f"INSERT INTO {DB}.{TABLE} VALUES ({new_id}, 'new')",
            f"UPDATE {DB}.{TABLE} SET status = 'paid{new_id}' WHERE id = 1",
            f"DELETE FROM {DB}.{TABLE} WHERE id = {new_id - 1}"
            if k
            else f"UPDATE {DB}.{TABLE} SET status = 'seen{new_id}' WHERE id = 3",
        ]
        _commit_in(lake, low, high, statements)
        third: Change = (new_id - 1, "d") if k else (3, "u")
        intervals.append(Interval(low, high, tuple(sorted([(new_id, "c"), (1, "u"), third]))))
    last_end = intervals[-1].end
    lake.airflow.wait_for(f"the server's clock to pass {last_end}", lambda: lake.server.utc_now() > last_end, 60)
    return intervals


def _backfill_body(
    start: datetime, end: datetime, *, max_active_runs: int = 1, reprocess: str = "none"
) -> dict[str, Any]:
    """The body the UI's backfill dialog posts (from and to are logical dates, both included)."""
    return {
        "dag_id": DAG_ID,
        "from_date": _iso(start),
        "to_date": _iso(end),
        "run_backwards": False,
        "dag_run_conf": {},
        "reprocess_behavior": reprocess,
        "max_active_runs": max_active_runs,
        "run_on_latest_version": True,
    }


def _create_backfill(
    lake: Lake, start: datetime, end: datetime, *, max_active_runs: int = 1, reprocess: str = "none"
) -> int:
    body = _backfill_body(start, end, max_active_runs=max_active_runs, reprocess=reprocess)

    def created_unless_locked() -> dict[str, Any] | None:
        # On SQLite Airflow answers 503 "Database is locked" when the scheduler holds the write lock, and
        # removes what it had created: the request is sent again, as a person would press the button again.
        response = lake.airflow.api.request("POST", "/backfills", json=body)
        if response.status_code == 503 and "Database is locked" in response.text:
            return None
        assert response.status_code == 200, f"POST /backfills: {response.status_code} {response.text[:2000]}"
        return dict(response.json())

    created = lake.airflow.wait_for("Airflow to accept the backfill", created_unless_locked, 120)
    assert created["max_active_runs"] == max_active_runs and created["reprocess_behavior"] == reprocess
    return int(created["id"])


def _cli_backfill(lake: Lake, start: datetime, end: datetime, reprocess: str) -> None:
    """``airflow backfill create`` with one active run at a time (sent again while SQLite is locked)."""
    command = ["backfill", "create", "--dag-id", DAG_ID, "--from-date", _iso(start), "--to-date", _iso(end)]
    command += ["--reprocess-behavior", reprocess, "--max-active-runs", "1"]

    def created_unless_locked() -> bool:
        result = lake.airflow.cli(*command)
        output = result.stdout[-3000:] + result.stderr[-3000:]
        if result.returncode != 0 and "database is locked" in output:
            return False
        assert result.returncode == 0, output
        return True

    lake.airflow.wait_for("the command line to create the backfill", created_unless_locked, 300)


def _dry_run(lake: Lake, start: datetime, end: datetime, reprocess: str) -> list[datetime]:
    """The logical dates of the runs a backfill would create or re-run (the dialog's preview)."""
    body = _backfill_body(start, end, reprocess=reprocess)
    preview = lake.airflow.api.call("POST", "/backfills/dry_run", json=body)
    return [_parse(entry["logical_date"]) for entry in preview["backfills"]]


def _completed(lake: Lake, backfill_id: int) -> dict[str, Any]:
    return lake.airflow.wait_for_backfill(backfill_id, timeout=BACKFILL_TIMEOUT)


def _runs(lake: Lake) -> dict[datetime, dict[str, Any]]:
    """Every run of the DAG by logical date."""
    return {_parse(run["logical_date"]): run for run in lake.airflow.api.dag_runs(DAG_ID)}


def _run_at(lake: Lake, logical_date: datetime) -> str:
    run = _runs(lake)[logical_date]
    assert run["state"] == "success", (run, _task_states(lake, str(run["dag_run_id"])))
    return str(run["dag_run_id"])


def _task_states(lake: Lake, run_id: str) -> dict[str, Any]:
    return {ti["task_id"]: ti["state"] for ti in lake.airflow.api.task_instances(DAG_ID, run_id)}


def _capture_starts(lake: Lake, dates: Sequence[datetime]) -> dict[datetime, datetime]:
    """When the capture of the run at each logical date last started."""
    starts = {}
    for date in dates:
        run_id = str(_runs(lake)[date]["dag_run_id"])
        (found,) = [ti for ti in lake.airflow.api.task_instances(DAG_ID, run_id) if ti["task_id"] == "capture"]
        starts[date] = _parse(found["start_date"])
    return starts


def _ran_again(lake: Lake, before: dict[datetime, datetime]) -> list[bool]:
    """Whether the run at each logical date of ``before`` captured again since then. Asked by start time,
    not try number: when Airflow answers a backfill's creation with SQLite's 503 it deletes the runs it
    had taken over (also one it was about to re-run), and the retry then creates that run anew (same run
    id, so the same window record; first try again)."""
    return [after > before[date] for date, after in _capture_starts(lake, list(before)).items()]


def _capture(lake: Lake, run_id: str) -> dict[str, Any]:
    return dict(lake.airflow.api.xcom(DAG_ID, run_id, "capture"))


def _apply_status(lake: Lake, run_id: str) -> str:
    return str(lake.airflow.api.xcom(DAG_ID, run_id, "apply")["tables"][f"{DB}.{TABLE}"]["status"])


def _window(pushed: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a window's content: id, bounds and counts."""
    return tuple(pushed[key] for key in ("window_id", "lower", "upper", "transactions", "rows_by_table"))


def _staged(lake: Lake, window_id: int) -> list[tuple[int, str, datetime]]:
    """(id, op, commit time) of every row the published window staged, from its manifest."""
    manifest = Staging(str(lake.staging), DAG_ID).read_window_manifest(window_id)
    assert manifest is not None, f"window {window_id} has no manifest"
    window_dir = lake.staging / DAG_ID / "windows" / f"{window_id:08d}"
    rows = [row for staged in manifest.files for row in pq.read_table(window_dir / staged.path).to_pylist()]
    return [(row["id"], row["_cdc_op"], row["_cdc_commit_ts"].replace(tzinfo=UTC)) for row in rows]


def _assert_windows_hold_their_intervals(lake: Lake, intervals: Sequence[Interval]) -> list[dict[str, Any]]:
    """The runs at the intervals' ends each captured one new window, consecutive (each lower is the
    previous upper), holding exactly that interval's changes, all committed inside it; their applies
    applied them. Returns the capture XComs."""
    pushed = [_capture(lake, _run_at(lake, interval.end)) for interval in intervals]
    ids = [window["window_id"] for window in pushed]
    assert ids == list(range(ids[0], ids[0] + len(intervals))), ids
    assert [window["lower"] for window in pushed[1:]] == [window["upper"] for window in pushed[:-1]]
    for interval, window in zip(intervals, pushed, strict=True):
        staged = _staged(lake, window["window_id"])
        assert sorted((key, op) for key, op, _ in staged) == list(interval.changes), (interval, staged)
        assert all(interval.start <= committed < interval.end for _, _, committed in staged), (interval, staged)
        assert window["transactions"] == 3
        assert _apply_status(lake, _run_at(lake, interval.end)) == "applied"
    return pushed


def _assert_iceberg_equals_mysql(lake: Lake) -> None:
    comparison = compare_table(lake.server, lake.warehouse, DB, TABLE)
    assert comparison.equal, comparison.describe()


def _iceberg_version(lake: Lake) -> Path | None:
    """The table's current metadata file: a commit makes a new one."""
    return current_metadata_file(table_directory(lake.warehouse, DB, TABLE))


# -- tests ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def first_backfill(lake: Lake) -> list[Interval]:
    """Three intervals backfilled through ``POST /api/v2/backfills`` with ``max_active_runs=1``."""
    intervals = _intervals(lake, 3, first_id=10)
    dates = [interval.end for interval in intervals]
    assert _dry_run(lake, dates[0], dates[-1], "none") == dates
    backfill = _create_backfill(lake, dates[0], dates[-1], max_active_runs=1)
    _completed(lake, backfill)
    return intervals


def test_a_backfill_from_the_dialog_runs_each_past_interval_once_and_each_window_holds_its_interval(
    lake: Lake, first_backfill: list[Interval]
) -> None:
    """A backfill created the way the UI's dialog does (its dry run previews exactly the three past
    logical dates) runs them one at a time in logical-date order; each run's window holds exactly the
    transactions committed in its interval, and the Iceberg table equals MySQL."""
    runs = _runs(lake)
    ordered = [runs[interval.end] for interval in first_backfill]
    assert [run["run_type"] for run in ordered] == ["backfill"] * 3
    # max_active_runs=1: each run started after the one before it ended.
    for earlier, later in pairwise(ordered):
        assert _parse(later["start_date"]) >= _parse(earlier["end_date"]), (earlier, later)
    _assert_windows_hold_their_intervals(lake, first_backfill)
    _assert_iceberg_equals_mysql(lake)


def test_reprocess_behaviours_rerun_only_what_they_name_and_reruns_change_nothing(
    lake: Lake, first_backfill: list[Interval]
) -> None:
    """``none`` re-runs nothing; ``failed`` (through ``airflow backfill create``) re-runs only the run
    marked failed; ``completed`` re-runs a successful one. A second backfill beside a running one is
    refused by Airflow (409). Each re-run re-captures its identical window and its apply commits
    nothing; Iceberg still equals MySQL."""
    dates = [interval.end for interval in first_backfill]
    before = {date: _capture(lake, _run_at(lake, date)) for date in dates}
    version = _iceberg_version(lake)

    # The UI's "Mark as failed" on the middle run (its tasks stay successful).
    middle = _run_at(lake, dates[1])
    lake.airflow.api.call("PATCH", f"/dags/{DAG_ID}/dagRuns/{middle}", json={"state": "failed"})
    assert _dry_run(lake, dates[0], dates[-1], "none") == []
    assert _dry_run(lake, dates[0], dates[-1], "failed") == [dates[1]]
    assert _dry_run(lake, dates[0], dates[-1], "completed") == dates

    # none: Airflow records the backfill, makes no run, and marks it completed.
    started = _capture_starts(lake, dates)
    _completed(lake, _create_backfill(lake, dates[0], dates[-1], reprocess="none"))
    assert _runs(lake)[dates[1]]["state"] == "failed"
    assert _ran_again(lake, started) == [False, False, False]

    # failed, from the command line.
    _cli_backfill(lake, dates[0], dates[-1], "failed")
    backfill = max(b["id"] for b in lake.airflow.api.get("/backfills", dag_id=DAG_ID)["backfills"])
    # One backfill per DAG at a time: while this one runs, Airflow refuses another.
    assert lake.airflow.api.get(f"/backfills/{backfill}")["completed_at"] is None
    refused = lake.airflow.api.request(
        "POST", "/backfills", json=_backfill_body(dates[0], dates[-1], reprocess="completed")
    )
    assert refused.status_code == 409, refused.text
    assert f"There is already a running backfill for dag {DAG_ID}" in refused.text
    assert lake.airflow.api.get(f"/backfills/{backfill}")["completed_at"] is None
    _completed(lake, backfill)
    assert _run_at(lake, dates[1]) == middle  # the same run, run again
    assert _ran_again(lake, started) == [False, True, False]

    # completed, through the API, for the last interval only.
    started = _capture_starts(lake, dates)
    _completed(lake, _create_backfill(lake, dates[-1], dates[-1], reprocess="completed"))
    assert _ran_again(lake, started) == [False, False, True]

    for date in dates[1:]:
        assert _window(_capture(lake, _run_at(lake, date))) == _window(before[date])
        assert _apply_status(lake, _run_at(lake, date)) == "up_to_date"
    assert _iceberg_version(lake) == version  # no re-run committed anything
    _assert_windows_hold_their_intervals_again(lake, first_backfill, before)
    _assert_iceberg_equals_mysql(lake)


def _assert_windows_hold_their_intervals_again(
    lake: Lake, intervals: Sequence[Interval], before: dict[datetime, dict[str, Any]]
) -> None:
    """The published windows still hold exactly their intervals' changes (the files a re-run compared)."""
    for interval in intervals:
        staged = _staged(lake, before[interval.end]["window_id"])
        assert sorted((key, op) for key, op, _ in staged) == list(interval.changes)


def test_a_backfill_with_several_active_runs_still_applies_windows_in_logical_date_order(
    lake: Lake, first_backfill: list[Interval]
) -> None:
    """``max_active_runs=3``: the three runs are active together, yet capture and apply each wait for the
    previous run's same task, so the windows are consecutive, each holds exactly its interval, and the
    Iceberg table equals MySQL."""
    intervals = _intervals(lake, 3, first_id=20)
    dates = [interval.end for interval in intervals]
    _completed(lake, _create_backfill(lake, dates[0], dates[-1], max_active_runs=3))
    runs = [_runs(lake)[date] for date in dates]
    # The three runs overlapped (the backfill let them run together).
    assert max(_parse(run["start_date"]) for run in runs) < min(_parse(run["end_date"]) for run in runs), runs
    previous = _capture(lake, _run_at(lake, first_backfill[-1].end))
    pushed = _assert_windows_hold_their_intervals(lake, intervals)
    assert pushed[0]["window_id"] == previous["window_id"] + 1 and pushed[0]["lower"] == previous["upper"]
    _assert_iceberg_equals_mysql(lake)


def test_clearing_a_past_range_from_the_clear_dialog_reruns_it_and_keeps_its_windows(
    lake: Lake, first_backfill: list[Interval]
) -> None:
    """``clearTaskInstances`` over a range of logical dates (the UI's clear dialog: a dry run listing the
    task instances, then the clear with ``reset_dag_runs``) re-runs those runs; each re-captures its
    identical window, its apply commits nothing, and the Iceberg table still equals MySQL."""
    dates = [interval.end for interval in first_backfill[:2]]
    before = {date: _capture(lake, _run_at(lake, date)) for date in dates}
    started = _capture_starts(lake, dates)
    version = _iceberg_version(lake)
    body: dict[str, Any] = {
        "dry_run": True,
        "start_date": _iso(dates[0]),
        "end_date": _iso(dates[-1]),
        "only_failed": False,
        "reset_dag_runs": True,
    }
    path = f"/dags/{DAG_ID}/clearTaskInstances"
    preview = lake.airflow.api.call("POST", path, json=body)["task_instances"]
    run_ids = {_run_at(lake, date) for date in dates}
    assert {ti["dag_run_id"] for ti in preview} == run_ids
    assert {"capture", "apply"} <= {ti["task_id"] for ti in preview}
    lake.airflow.api.call("POST", path, json={**body, "dry_run": False})
    for run_id in run_ids:
        finished = lake.airflow.wait_for_run(DAG_ID, run_id, timeout=BACKFILL_TIMEOUT)
        assert finished["state"] == "success", _task_states(lake, run_id)
    assert _ran_again(lake, started) == [True, True]
    for date in dates:
        run_id = _run_at(lake, date)
        assert _window(_capture(lake, run_id)) == _window(before[date])
        assert _apply_status(lake, run_id) == "up_to_date"
    assert _iceberg_version(lake) == version
    _assert_windows_hold_their_intervals_again(lake, first_backfill[:2], before)
    _assert_iceberg_equals_mysql(lake)
