"""The metadata tables on a real SQLite file: windows written once, compare-and-set frontiers."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.errors import FrontierConflictError, FrontierStoreError
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from airflow_provider_mysql_cdc.store.tables import STORE_SCHEMA_VERSION, store_version_table

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cdc.db'}"


def test_pipeline_registration_is_idempotent(store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    first = store.register_pipeline("p", GtidSet.parse(f"{U}:1-5"))
    again = FrontierStore.from_url(store_url).register_pipeline("p", GtidSet.parse(f"{U}:1-99"))
    assert first == again
    assert again.capture_frontier == GtidSet.parse(f"{U}:1-5")


def test_frontier_compare_and_set_detects_a_lost_race(store_url: str) -> None:
    one, two = FrontierStore.from_url(store_url), FrontierStore.from_url(store_url)
    one.register_pipeline("p", GtidSet.parse(f"{U}:1-5"))
    one.advance_capture_frontier("p", GtidSet.parse(f"{U}:1-5"), GtidSet.parse(f"{U}:1-7"))
    with pytest.raises(FrontierConflictError, match="another capture advanced it first"):
        two.advance_capture_frontier("p", GtidSet.parse(f"{U}:1-5"), GtidSet.parse(f"{U}:1-9"))
    with pytest.raises(FrontierStoreError, match="frontiers only grow"):
        two.advance_capture_frontier("p", GtidSet.parse(f"{U}:1-7"), GtidSet.parse(f"{U}:1-3"))
    assert two.get_pipeline("p").capture_frontier == GtidSet.parse(f"{U}:1-7")  # type: ignore[union-attr]


def test_window_is_written_once_and_published_once(store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    lower = GtidSet.parse(f"{U}:1-5")
    store.register_pipeline("p", lower)
    planned = store.plan_window("p", 1, "run-a", lower, "catch_up", f"{U}:1-9")
    assert not planned.is_published
    assert store.window_for_run("p", "run-a") == planned
    with pytest.raises(FrontierConflictError):
        store.plan_window("p", 1, "run-b", lower, "catch_up", f"{U}:1-9")
    with pytest.raises(FrontierConflictError):
        store.plan_window("p", 2, "run-a", lower, "catch_up", f"{U}:1-9")
    published = store.publish_window(planned, GtidSet.parse(f"{U}:1-9"), "file:///m.json", {"rows": 3})
    assert published.is_published
    assert published.upper == GtidSet.parse(f"{U}:1-9")
    assert published.counts == {"rows": 3}
    assert store.get_pipeline("p").capture_frontier == GtidSet.parse(f"{U}:1-9")  # type: ignore[union-attr]
    with pytest.raises(FrontierConflictError):
        store.publish_window(planned, GtidSet.parse(f"{U}:1-9"), "file:///m.json", {})
    assert [w.window_id for w in store.list_windows("p")] == [1]
    assert store.last_window("p") == published


def test_schema_versions_are_stable_per_fingerprint(store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    assert store.schema_version("p", "db.t", "aaa", [{"name": "id"}], None) == 1
    assert store.schema_version("p", "db.t", "bbb", [{"name": "id"}, {"name": "v"}], f"{U}:7") == 2
    assert store.schema_version("p", "db.t", "aaa", [{"name": "id"}], None) == 1
    assert store.schema_version("p", "db.other", "bbb", [], None) == 1


def test_a_store_with_the_retired_table_frontiers_is_read_and_written_as_before(store_url: str) -> None:
    """Stores written before the applied frontier moved to the Iceberg commits have ``cdc_table_frontiers``
    (with rows): the store reads and writes them as any other, and leaves that table as it was."""
    engine = sa.create_engine(store_url)
    store_version_table.metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(
            store_version_table.insert().values(version=STORE_SCHEMA_VERSION, installed_at=datetime.now(UTC))
        )
        connection.execute(
            sa.text(
                "CREATE TABLE cdc_table_frontiers (pipeline VARCHAR(200), table_name VARCHAR(400), kind VARCHAR(32), "
                "frontier TEXT NOT NULL, revision INTEGER NOT NULL, updated_at DATETIME NOT NULL, "
                "PRIMARY KEY (pipeline, table_name, kind))"
            )
        )
        connection.execute(
            sa.text(f"INSERT INTO cdc_table_frontiers VALUES ('p', 'db.t', 'applied', '{U}:1-3', 4, '2026-01-01')")
        )
    assert "cdc_table_frontiers" not in store_version_table.metadata.tables  # no longer part of the schema
    store = FrontierStore.from_url(store_url)
    store.register_pipeline("p", GtidSet.parse(f"{U}:1-3"))
    store.plan_window("p", 1, "run-1", GtidSet.parse(f"{U}:1-3"), "catch_up", "")
    assert [w.window_id for w in store.list_windows("p")] == [1]
    with engine.begin() as connection:
        assert connection.execute(sa.text("SELECT frontier, revision FROM cdc_table_frontiers")).all() == [
            (f"{U}:1-3", 4)
        ]
        versions = [row.version for row in connection.execute(sa.select(store_version_table.c.version))]
    assert versions == [STORE_SCHEMA_VERSION]


def test_newer_store_schema_is_refused_and_bad_sets_are_reported(store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    store.register_pipeline("p", GtidSet())
    with store.engine.begin() as connection:
        connection.execute(sa.text("UPDATE cdc_pipelines SET capture_frontier = 'garbage'"))
    with pytest.raises(FrontierStoreError, match="invalid GTID set"):
        FrontierStore.from_url(store_url).get_pipeline("p")
    with store.engine.begin() as connection:
        connection.execute(store_version_table.update().values(version=STORE_SCHEMA_VERSION + 1))
    with pytest.raises(FrontierStoreError, match="newer than this provider"):
        FrontierStore.from_url(store_url).ensure_schema()
    assert "password" not in repr(FrontierStore.from_url("sqlite://"))


def test_snapshots_are_planned_once_per_run_and_numbered(store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    first = store.plan_snapshot("p", "run-1", ["db.b", "db.a"], 1)
    assert (first.snapshot_id, first.tables, first.handoff_window) == ("000001", ("db.a", "db.b"), 1)
    assert store.plan_snapshot("p", "run-1", ["db.c"], 7) == first  # a re-run gets the recorded decision
    second = store.plan_snapshot("p", "run-2", ["db.a"], 4)
    assert second.snapshot_id == "000002"
    assert store.plan_snapshot("q", "run-1", ["db.a"], 1).snapshot_id == "000001"
    assert [s.snapshot_id for s in store.list_snapshots("p")] == ["000001", "000002"]
    assert store.snapshot_for_run("p", "run-3") is None


def test_snapshot_chunks_are_planned_once_per_table_and_finished_once(store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    planned = store.plan_snapshot_table("p", "000001", "db.t", ['{"range": 0}', '{"range": 1}'])
    assert [(c.chunk_no, c.chunk, c.is_finished) for c in planned] == [
        (0, '{"range": 0}', False),
        (1, '{"range": 1}', False),
    ]
    # A second plan of the same table (e.g. a re-run after the data changed) returns the first one.
    assert store.plan_snapshot_table("p", "000001", "db.t", ['{"range": "other"}']) == planned
    finished = store.finish_snapshot_chunk(planned[0], GtidSet.parse(f"{U}:1-9"), "file:///m.json", 42)
    assert finished.is_finished
    assert (finished.frontier, finished.rows) == (GtidSet.parse(f"{U}:1-9"), 42)
    assert store.get_snapshot_chunk("p", "000001", "db.t", 0) == finished
    with pytest.raises(FrontierConflictError, match="finished by another attempt first"):
        FrontierStore.from_url(store_url).finish_snapshot_chunk(planned[0], GtidSet.parse(f"{U}:1-10"), "x", 1)
    assert [c.chunk_no for c in store.snapshot_chunks("p", "db.t")] == [0, 1]
    assert store.snapshot_chunks("p", "db.other") == []


def test_a_version_1_store_gains_the_snapshot_tables(store_url: str) -> None:
    engine = sa.create_engine(store_url)
    new_tables = ("cdc_snapshot_chunks", "cdc_snapshots")
    old_tables = [table for name, table in store_version_table.metadata.tables.items() if name not in new_tables]
    store_version_table.metadata.create_all(engine, tables=old_tables)
    with engine.begin() as connection:
        connection.execute(store_version_table.insert().values(version=1, installed_at=datetime.now(UTC)))
    store = FrontierStore.from_url(store_url)
    store.plan_snapshot("p", "run-1", ["db.t"], 1)
    store.plan_snapshot_table("p", "000001", "db.t", ["{}"])
    with engine.begin() as connection:
        versions = sorted(row.version for row in connection.execute(sa.select(store_version_table.c.version)))
    assert versions == [1, STORE_SCHEMA_VERSION] and STORE_SCHEMA_VERSION == 5


def test_parallel_writers_of_a_new_schema_agree_on_its_version(store_url: str) -> None:
    FrontierStore.from_url(store_url).ensure_schema()
    barrier = threading.Barrier(6)
    results: list[int] = []
    errors: list[BaseException] = []

    def record() -> None:
        store = FrontierStore.from_url(store_url)
        store.ensure_schema()
        barrier.wait()
        try:
            results.append(store.schema_version("p", "db.t", "f" * 64, [{"name": "id"}], None))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=record) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [1] * 6


# -- tracked schemas and rebuild requests ---------------------------------------------------------


@pytest.fixture
def store(store_url: str) -> FrontierStore:
    return FrontierStore.from_url(store_url)


def test_the_tracked_schema_at_a_window_start_is_the_last_one_before_it(store: FrontierStore) -> None:
    store.record_tracked_schema("p", "db.t", 1, 5, "table_map", '{"v": 1}')
    store.record_tracked_schema("p", "db.t", 2, 9, "ddl", '{"v": 2}')
    store.record_tracked_schema("p", "db.t", 4, -1, "snapshot:000002", '{"v": 3}')
    store.record_tracked_schema("p", "db.u", 2, 3, "ddl", None)
    assert store.tracked_schemas_before("p", 1) == {}
    assert store.tracked_schemas_before("p", 2)["db.t"].schema == '{"v": 1}'
    at3 = store.tracked_schemas_before("p", 3)
    assert at3["db.t"].schema == '{"v": 2}' and at3["db.u"].schema is None
    assert store.tracked_schemas_before("p", 4)["db.t"].source == "snapshot:000002"
    store.record_tracked_schema("p", "db.t", 2, 9, "ddl", '{"v": 22}')  # the same point again: replaced
    assert store.tracked_schemas_before("p", 3)["db.t"].schema == '{"v": 22}'


def test_a_window_re_read_from_its_start_forgets_what_its_capture_recorded(store: FrontierStore) -> None:
    store.record_tracked_schema("p", "db.t", 2, 9, "ddl", '{"v": 2}')
    store.record_tracked_schema("p", "db.t", 3, -1, "snapshot:000002", '{"v": 3}')
    store.record_tracked_schema("p", "db.t", 3, 4, "ddl", '{"v": 4}')
    store.record_rebuild_request("p", "db.t", 3, 7, "u:7", "MODIFY f2 INT")
    store.record_rebuild_request("p", "db.t", 2, 7, "u:5", "RENAME TABLE")
    store.forget_captured_schemas("p", 3)
    assert store.tracked_schemas_before("p", 4)["db.t"].source == "snapshot:000002"
    assert [r.window_id for r in store.rebuild_requests("p")] == [2]


def test_a_rebuild_request_is_recorded_once_per_window(store: FrontierStore) -> None:
    store.record_rebuild_request("p", "db.t", 3, 7, "u:7", "first")
    store.record_rebuild_request("p", "db.t", 3, 9, "u:9", "second")
    (request,) = store.rebuild_requests("p")
    assert (request.seq, request.reason) == (7, "first")
