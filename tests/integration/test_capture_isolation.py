"""One table whose rows cannot be staged stops alone: the window is published with the other tables'
rows, and that table waits for a rebuild with the reason (real MySQL, real binlog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.staging import Staging
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer

pytestmark = [pytest.mark.mysql]

DB = "capture_isolation"


def test_a_table_in_a_character_set_python_cannot_decode_waits_alone(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """``swe7`` has no Python codec: that table's row events cannot be decoded. The window still holds
    the other table's rows; the undecodable table gets a rebuild event naming the character set."""
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.good (id INT PRIMARY KEY, v INT)",
    )
    pipeline = SnapshotPipeline(mysql_server, tmp_path, DB, TableSelection.of(f"{DB}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(  # created inside the window: capture meets it first
        f"CREATE TABLE {DB}.odd (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET swe7)",
        f"INSERT INTO {DB}.odd VALUES (1, 'abc')",
        f"INSERT INTO {DB}.good VALUES (1, 10), (2, 20)",
    )
    result = pipeline.capture("run-1")
    manifest = Staging(str(pipeline.staging), pipeline.name).read_window_manifest(result.window_id)
    assert manifest is not None
    rebuilds = [event for event in manifest.schema_events if event.kind == "rebuild"]
    assert [event.table_name for event in rebuilds] == [f"{DB}.odd"]
    assert "swe7" in rebuilds[0].reason and rebuilds[0].gtid
    assert sorted((row["id"], row["v"]) for row in pipeline.window_rows(result.window_id, f"{DB}.good")) == [
        (1, 10),
        (2, 20),
    ]
    assert sum(f.rows for f in manifest.files if f.table == "odd") == 0
