"""The server observations of the metadata tables (``cdc_server_observations``) on a real SQLite file, and
the guard that reads them: a store of version 4 gains the table and keeps its records."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.topology import ServerObservation
from airflow_provider_mysql_cdc.errors import FrontierNotOnServerError, ServerChangedError, ServerHistoryResetError
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from airflow_provider_mysql_cdc.store.server_history import (
    SNAPSHOT_OBSERVATION,
    WINDOW_OBSERVATION,
    require_server_continues,
)
from airflow_provider_mysql_cdc.store.tables import STORE_SCHEMA_VERSION, store_version_table

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
T0 = 1_767_225_600_000_000


def seen(
    uuid: str = A, executed: str = f"{A}:1-20", purged: str = "", files: tuple[str, ...] = ()
) -> ServerObservation:
    names = files or ("binlog.000001", "binlog.000002", "binlog.000003")
    return ServerObservation(
        address="127.0.0.1:3306" if uuid == A else "127.0.0.1:3307",
        server_uuid=uuid,
        gtid_executed=GtidSet.parse(executed),
        gtid_purged=GtidSet.parse(purged),
        binlog_files=names,
        first_binlog_previous_gtids=GtidSet.parse(purged),
        binlog_created_us={name: T0 + index for index, name in enumerate(names)},
    )


@pytest.fixture
def store(tmp_path: Path) -> FrontierStore:
    return FrontierStore.from_url(f"sqlite:///{tmp_path / 'cdc.db'}")


def test_observations_keep_identity_history_and_the_first_and_last_binlog(store: FrontierStore) -> None:
    store.record_server_observation("p", WINDOW_OBSERVATION, "7", seen())
    store.record_server_observation("p", SNAPSHOT_OBSERVATION, "000002:db.t:3", seen(B, f"{A}:1-20,{B}:1-2"))
    store.record_server_observation("p", SNAPSHOT_OBSERVATION, "000003", seen(B, f"{A}:1-20,{B}:1-5"))
    store.record_server_observation("other", WINDOW_OBSERVATION, "1", seen())
    units = [recorded.unit for recorded in store.server_observations("p")]
    assert units == ["window 7", "snapshot 000002 (db.t chunk 3)", "snapshot 000003"]
    first = store.server_observations("p")[0]
    assert first.observed_at is not None and first.observed_at.tzinfo is not None
    assert first.observation == ServerObservation(
        address="127.0.0.1:3306",
        server_uuid=A,
        gtid_executed=GtidSet.parse(f"{A}:1-20"),
        gtid_purged=GtidSet(),
        binlog_files=("binlog.000001", "binlog.000003"),
        first_binlog_previous_gtids=GtidSet(),
        binlog_created_us={"binlog.000001": T0, "binlog.000003": T0 + 2},
    )
    last = store.last_server_observation("p")
    assert last is not None and last.unit == "snapshot 000003"
    of_a = store.last_server_observation("p", A)
    assert of_a is not None and of_a.unit == "window 7"
    assert store.last_server_observation("p", "00000000-0000-0000-0000-000000000000") is None
    assert store.last_server_observation("nobody") is None


def test_a_damaged_observation_is_ignored_not_fatal(store: FrontierStore) -> None:
    store.record_server_observation("p", WINDOW_OBSERVATION, "1", seen())
    store.record_server_observation("p", WINDOW_OBSERVATION, "2", seen(executed=f"{A}:1-21"))
    with store.engine.begin() as connection:
        connection.execute(sa.text("UPDATE cdc_server_observations SET gtid_executed = 'garbage' WHERE ref = '2'"))
    last = store.last_server_observation("p")
    assert last is not None and last.unit == "window 1"


def test_the_guard_reads_the_frontier_the_newest_snapshots_and_the_observations(store: FrontierStore) -> None:
    assert store.server_history_problem("p", "window 1", seen(executed="")) is None  # not registered yet
    store.register_pipeline("p", GtidSet.parse(f"{A}:1-20"))
    assert store.server_history_problem("p", "window 1", seen()) is None
    lagging = seen(B, f"{A}:1-17")
    found = store.server_history_problem("p", "window 1", lagging)
    assert type(found) is FrontierNotOnServerError and found.missing_gtids == f"{A}:18-20"
    store.record_server_observation("p", WINDOW_OBSERVATION, "1", seen())
    assert type(store.server_history_problem("p", "window 2", lagging)) is ServerChangedError
    with pytest.raises(ServerChangedError, match=r"pipeline 'p' window 2: the connection now reaches another server"):
        require_server_continues(store, "p", "window 2", lagging)
    reset = seen(executed=f"{A}:1-3", files=("binlog.000001",))
    assert type(store.server_history_problem("p", "window 2", reset)) is ServerHistoryResetError

    # a snapshot chunk's frontier beyond the capture frontier counts, an older snapshot of the table not
    store.plan_snapshot("p", "run-s1", ["db.t"], 1)
    store.plan_snapshot_table("p", "000001", "db.t", ["{}"])
    chunk = store.plan_snapshot_table("p", "000001", "db.t", ["{}"])[0]
    store.finish_snapshot_chunk(chunk, GtidSet.parse(f"{A}:1-25"), "file:///m", 1)
    found = store.server_history_problem("p", "window 2", seen(executed=f"{A}:1-24"))
    assert type(found) is FrontierNotOnServerError and found.missing_gtids == f"{A}:25"
    store.plan_snapshot("p", "run-s2", ["db.t"], 2)
    newer = store.plan_snapshot_table("p", "000002", "db.t", ["{}"])[0]
    store.finish_snapshot_chunk(newer, GtidSet.parse(f"{A}:1-20"), "file:///n", 1)
    assert store.server_history_problem("p", "window 2", seen(executed=f"{A}:1-24")) is None


def test_a_version_4_store_gains_the_observations_table_and_keeps_its_records(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    old_tables = [t for name, t in store_version_table.metadata.tables.items() if name != "cdc_server_observations"]
    store_version_table.metadata.create_all(engine, tables=old_tables)
    with engine.begin() as connection:
        connection.execute(store_version_table.insert().values(version=4, installed_at=datetime.now(UTC)))
    with engine.begin() as connection:
        now = datetime.now(UTC)
        connection.execute(
            sa.text(
                "INSERT INTO cdc_pipelines VALUES ('p', :frontier, :frontier, 0, :now, :now)",
            ),
            {"frontier": f"{A}:1-20", "now": now},
        )
    store = FrontierStore.from_url(url)
    record = store.get_pipeline("p")
    assert record is not None and record.capture_frontier == GtidSet.parse(f"{A}:1-20")
    assert store.last_server_observation("p") is None  # an old pipeline: containment only
    assert store.server_history_problem("p", "window 9", seen()) is None
    store.record_server_observation("p", WINDOW_OBSERVATION, "9", seen())
    assert store.last_server_observation("p") is not None
    with engine.begin() as connection:
        versions = sorted(row.version for row in connection.execute(sa.select(store_version_table.c.version)))
    assert versions == [4, STORE_SCHEMA_VERSION] and STORE_SCHEMA_VERSION == 5
