"""Capture engine against the real server: ops, key changes, TRUNCATE order, re-run equality, continuity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.mysql.client import connection_to
from airflow_provider_mysql_cdc.mysql.introspection import read_gtid_executed
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql


def staged_rows(staging: Path, pipeline: str, window_id: int) -> list[dict[str, Any]]:
    manifest = Staging(str(staging), pipeline).read_window_manifest(window_id)
    assert manifest is not None
    rows: list[dict[str, Any]] = []
    for staged in manifest.files:
        rows += pq.read_table(staging / pipeline / "windows" / f"{window_id:08d}" / staged.path).to_pylist()
    return sorted(rows, key=lambda row: row["_cdc_seq"])


def test_catch_up_windows_stage_every_change_in_order(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    mysql_server.execute(
        "DROP DATABASE IF EXISTS cap", "CREATE DATABASE cap", "CREATE TABLE cap.t (id INT PRIMARY KEY, v VARCHAR(10))"
    )
    store = FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}")
    staging = tmp_path / "staging"

    def request(run_id: str) -> CaptureRequest:
        return CaptureRequest(
            pipeline="cap",
            run_id=run_id,
            staging_uri=str(staging),
            cutoff=CutoffRule.CATCH_UP,
            tables=TableSelection.of("cap.*"),
            replica_server_id=777,
        )

    first = capture_window(request("r0"), mysql_server.cdc, store)
    assert first.transactions == 0
    mysql_server.execute(
        "INSERT INTO cap.t VALUES (1, 'a'), (2, 'b')",
        "UPDATE cap.t SET v = 'c' WHERE id = 1",
        "UPDATE cap.t SET id = 5 WHERE id = 2",
        "DELETE FROM cap.t WHERE id = 1",
        "TRUNCATE TABLE cap.t",
        "INSERT INTO cap.t VALUES (9, 'z')",
    )
    with connection_to(mysql_server.cdc) as connection:
        executed = read_gtid_executed(connection, mysql_server.cdc)
    second = capture_window(request("r1"), mysql_server.cdc, store)
    assert second.window_id == first.window_id + 1
    assert second.lower == first.upper
    assert second.upper == executed | first.upper
    assert second.transactions == 6
    rows = staged_rows(staging, "cap", second.window_id)
    assert [(r["_cdc_op"], r["id"], r["v"]) for r in rows] == [
        ("c", 1, "a"),
        ("c", 2, "b"),
        ("u", 1, "c"),
        ("d", 2, "b"),  # a primary-key change is a delete of the old key ...
        ("c", 5, "b"),  # ... plus an insert of the new one
        ("d", 1, "c"),
        ("c", 9, "z"),
    ]
    seqs = [r["_cdc_seq"] for r in rows]
    assert seqs == sorted(set(seqs))
    assert all(r["_cdc_gtid"] in second.upper - second.lower for r in rows)
    manifest = Staging(str(staging), "cap").read_window_manifest(second.window_id)
    assert manifest is not None
    (truncate,) = manifest.truncates
    assert (truncate.database, truncate.table) == ("cap", "t")
    assert rows[5]["_cdc_seq"] < truncate.seq < rows[6]["_cdc_seq"]

    published = (staging / "cap" / "windows" / f"{second.window_id:08d}" / "_manifest.json").read_bytes()
    again = capture_window(request("r1"), mysql_server.cdc, store)
    assert again.as_xcom() == second.as_xcom()
    assert (staging / "cap" / "windows" / f"{second.window_id:08d}" / "_manifest.json").read_bytes() == published

    mysql_server.execute("INSERT INTO cap.t VALUES (10, 'n')")
    third = capture_window(request("r2"), mysql_server.cdc, store)
    assert third.lower == second.upper
    assert [(r["_cdc_op"], r["id"]) for r in staged_rows(staging, "cap", third.window_id)] == [("c", 10)]
    assert isinstance(third.upper, GtidSet)
