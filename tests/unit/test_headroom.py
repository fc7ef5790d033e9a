"""Purge headroom: which binlog file a pipeline needs, when it can be purged, and what to do."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.headroom import (
    BinlogFileHeader,
    HeadroomReport,
    HeadroomStatus,
    assess_headroom,
    history_mismatch_report,
    human_duration,
    iso_utc,
)
from airflow_provider_mysql_cdc.core.topology import ServerObservation, history_problem

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
HOUR_US = 3600 * 1_000_000
T0 = 1_767_225_600 * 1_000_000  # 2026-01-01T00:00:00Z
EXECUTED = GtidSet.parse(f"{U}:1-35")

#: binlog.000001..4, started an hour apart; the last one is the active file.
FILES = (
    BinlogFileHeader("binlog.000001", 1000, T0, GtidSet()),
    BinlogFileHeader("binlog.000002", 2000, T0 + HOUR_US, GtidSet.parse(f"{U}:1-10")),
    BinlogFileHeader("binlog.000003", 4000, T0 + 2 * HOUR_US, GtidSet.parse(f"{U}:1-20")),
    BinlogFileHeader("binlog.000004", 8000, T0 + 3 * HOUR_US, GtidSet.parse(f"{U}:1-30")),
)

XCOM_KEYS = {
    "pipeline",
    "status",
    "headroom_seconds",
    "headroom_files",
    "headroom_bytes",
    "oldest_needed_file",
    "purge_forecast",
    "backlog_files",
    "backlog_bytes",
    "lag_seconds",
    "min_headroom_seconds",
    "lost_gtids",
    "missing_gtids",
    "message",
}


def assess(
    frontier: str | None,
    *,
    files: tuple[BinlogFileHeader, ...] = FILES,
    purged: str = "",
    executed: GtidSet = EXECUTED,
    expire_hours: float = 24,
    auto_purge: bool = True,
    now_us: int = T0 + 4 * HOUR_US,
    last_commit_ts_us: int | None = None,
    min_hours: float = 6,
) -> HeadroomReport:
    return assess_headroom(
        files,
        None if frontier is None else GtidSet.parse(frontier),
        GtidSet.parse(purged),
        executed,
        int(expire_hours * 3600),
        auto_purge,
        now_us,
        last_commit_ts_us,
        int(min_hours * 3600),
        pipeline="shop",
    )


def test_the_needed_file_is_the_newest_whose_previous_gtids_the_frontier_holds() -> None:
    report = assess(f"{U}:1-15")
    assert report.status is HeadroomStatus.OK
    assert report.oldest_needed_file == "binlog.000002"
    assert (report.headroom_files, report.headroom_bytes) == (1, 1000)
    assert (report.backlog_files, report.backlog_bytes) == (3, 14000)
    # binlog.000002 can go when binlog.000003 (started at T0+2h) is 24 h old; now is T0+4h.
    assert report.purge_forecast_us == T0 + 26 * HOUR_US
    assert report.headroom_seconds == pytest.approx(22 * 3600)
    assert report.purge_forecast == "2026-01-02T02:00:00Z"


def test_a_frontier_equal_to_a_files_previous_gtids_needs_that_file() -> None:
    report = assess(f"{U}:1-20")
    assert report.oldest_needed_file == "binlog.000003"
    assert report.headroom_files == 2
    assert report.purge_forecast_us == T0 + 27 * HOUR_US


def test_tagged_gtids_count_like_any_other() -> None:
    tagged = (
        BinlogFileHeader("binlog.000001", 10, T0, GtidSet()),
        BinlogFileHeader("binlog.000002", 10, T0 + HOUR_US, GtidSet.parse(f"{U}:1-3:etl:1-2")),
    )
    executed = GtidSet.parse(f"{U}:1-5:etl:1-2")
    assert assess(f"{U}:1-4:etl:1", files=tagged, executed=executed).oldest_needed_file == "binlog.000001"
    assert assess(f"{U}:1-4:etl:1-2", files=tagged, executed=executed).oldest_needed_file == "binlog.000002"


def test_the_active_file_cannot_be_purged_before_it_rotates() -> None:
    report = assess(f"{U}:1-35", now_us=T0 + 4 * HOUR_US)
    assert report.oldest_needed_file == "binlog.000004"
    assert report.headroom_seconds == 24 * 3600
    assert report.purge_forecast_us == T0 + 28 * HOUR_US
    assert (report.headroom_files, report.backlog_files, report.backlog_bytes) == (3, 1, 8000)
    assert "lower bound" in report.message
    assert report.lag_seconds == 0.0


@pytest.mark.parametrize(("expire_hours", "auto_purge"), [(0, True), (24, False)])
def test_no_automatic_purge_means_no_forecast(expire_hours: float, auto_purge: bool) -> None:
    report = assess(f"{U}:1-15", expire_hours=expire_hours, auto_purge=auto_purge, min_hours=10_000)
    assert report.status is HeadroomStatus.OK
    assert report.headroom_seconds is None
    assert report.purge_forecast is None
    assert report.oldest_needed_file == "binlog.000002"
    assert "never purges" in report.message


def test_below_the_minimum_says_how_long_when_which_file_and_what_to_do() -> None:
    # binlog.000002 goes at T0+2h+3h = T0+5h; now is T0+2h46m57s: 2h 13m 3s left, minimum 6 h.
    now = T0 + 2 * HOUR_US + (46 * 60 + 57) * 1_000_000
    report = assess(f"{U}:1-15", expire_hours=3, now_us=now)
    assert report.status is HeadroomStatus.BELOW_MINIMUM
    assert report.headroom_seconds == pytest.approx(2 * 3600 + 13 * 60 + 3)
    message = report.message
    assert "2h 13m" in message
    assert "2026-01-01T05:00:00Z" in message
    assert "binlog.000002" in message
    assert "Run capture now" in message
    # 3 h retention + (6 h - 2h13m) missing, rounded up to whole hours.
    assert "SET PERSIST binlog_expire_logs_seconds = 25200" in message
    assert "max_rows" in message


def test_an_expired_file_waits_for_the_next_rotation() -> None:
    report = assess(f"{U}:1-15", expire_hours=1, now_us=T0 + 4 * HOUR_US)
    assert report.status is HeadroomStatus.BELOW_MINIMUM
    assert report.headroom_seconds == 0.0
    assert "overdue" in report.message


def test_a_short_retention_is_below_the_minimum_even_when_caught_up() -> None:
    report = assess(f"{U}:1-35", expire_hours=2)
    assert report.status is HeadroomStatus.BELOW_MINIMUM
    assert report.headroom_seconds == 2 * 3600
    assert "SET PERSIST binlog_expire_logs_seconds = 21600" in report.message
    assert "Run capture now" not in report.message  # capture cannot move past the active file


def test_exactly_the_minimum_is_enough() -> None:
    assert assess(f"{U}:1-35", expire_hours=6).status is HeadroomStatus.OK


def test_purged_transactions_past_the_frontier_are_named_with_the_recovery() -> None:
    report = assess(f"{U}:1-10", purged=f"{U}:1-20", files=FILES[2:])
    assert report.status is HeadroomStatus.PURGED
    assert report.lost_gtids == GtidSet.parse(f"{U}:11-20")
    assert report.oldest_needed_file is None
    assert report.headroom_seconds == 0.0
    assert f"{U}:11-20" in report.message
    assert '"resnapshot": ["db.table"]' in report.message
    assert "airflow dags trigger mysql_cdc_example" in report.message
    assert "continues after the purged transactions" in report.message
    assert report.as_xcom()["lost_gtids"] == f"{U}:11-20"


def test_a_frontier_older_than_every_file_is_purged_even_if_gtid_purged_says_nothing() -> None:
    report = assess(f"{U}:1-5", purged="", files=FILES[1:])
    assert report.status is HeadroomStatus.PURGED
    assert report.lost_gtids == GtidSet.parse(f"{U}:6-10")


def test_lag_is_zero_when_caught_up_else_the_age_of_the_last_captured_commit() -> None:
    now = T0 + 4 * HOUR_US
    assert assess(f"{U}:1-35", now_us=now, last_commit_ts_us=now - HOUR_US).lag_seconds == 0.0
    assert assess(f"{U}:1-15", now_us=now, last_commit_ts_us=now - 90 * 1_000_000).lag_seconds == 90.0
    assert assess(f"{U}:1-15", now_us=now, last_commit_ts_us=None).lag_seconds is None


def test_an_unregistered_pipeline_needs_nothing_yet() -> None:
    report = assess(None)
    assert report.status is HeadroomStatus.OK
    assert report.oldest_needed_file is None
    assert report.headroom_seconds is None
    assert "not registered" in report.message


def test_as_xcom_has_exactly_the_documented_json_safe_keys() -> None:
    for report in (assess(f"{U}:1-15"), assess(f"{U}:1-10", purged=f"{U}:1-12"), assess(None)):
        xcom = report.as_xcom()
        assert set(xcom) == XCOM_KEYS
        assert json.loads(json.dumps(xcom)) == xcom
    xcom = assess(f"{U}:1-15").as_xcom()
    assert xcom["status"] == "ok"
    assert xcom["lost_gtids"] == ""
    assert xcom["min_headroom_seconds"] == 6 * 3600
    assert xcom["pipeline"] == "shop"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (60, "1m"), (8000, "2h 13m"), (7200, "2h"), (90061, "1d 1h"), (86400 * 3, "3d")],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_iso_utc() -> None:
    assert iso_utc(T0 + 1) == "2026-01-01T00:00:00Z"


def test_a_server_the_topology_guard_refuses_is_a_history_mismatch_without_lag() -> None:
    lagging = ServerObservation(
        address="127.0.0.1:3307",
        server_uuid="4e11fa47-71ca-11e1-9e33-c80aa9429562",
        gtid_executed=GtidSet.parse(f"{U}:1-17"),
        gtid_purged=GtidSet(),
    )
    problem = history_problem("shop", "purge-headroom check", lagging, capture_frontier=GtidSet.parse(f"{U}:1-20"))
    assert problem is not None
    report = history_mismatch_report("shop", problem, 6 * 3600)
    assert report.status is HeadroomStatus.HISTORY_MISMATCH
    assert report.lag_seconds is None and report.headroom_seconds is None
    assert report.missing_gtids == GtidSet.parse(f"{U}:18-20")
    assert report.message.startswith("FrontierNotOnServerError: pipeline 'shop' purge-headroom check: ")
    xcom = report.as_xcom()
    assert set(xcom) == XCOM_KEYS and json.loads(json.dumps(xcom)) == xcom
    assert xcom["status"] == "history_mismatch" and xcom["missing_gtids"] == f"{U}:18-20"
