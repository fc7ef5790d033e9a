"""A pipeline's runs through a second metadata store over the same staging and lake: what a worker-local
SQLite store under a distributed executor does (each worker has its own; a fresh one would register the
pipeline again and number windows from 1 over the ones already staged and applied, and the apply would
find its target "up to date" and skip the new changes). It must stop by name instead, with nothing
recorded or staged, and the pipeline must go on exactly through its own store."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.exactness.harness import ExactnessPipeline, WindowStopped


def test_a_second_metadata_store_over_the_same_staging_stops_by_name_and_the_first_goes_on(
    pipeline_for: Callable[..., ExactnessPipeline],
) -> None:
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')",
    )
    db, name = pipeline.databases[0], pipeline.name
    pipeline.start()
    registration = pipeline.engine.staging / name / "_registration.json"
    assert registration.is_file()
    # A staging root written before the registration file existed adopts its store's registration.
    registration.unlink()
    pipeline.sql(f"INSERT INTO `{db}`.t VALUES (3, 'c')")
    pipeline.window()
    assert registration.is_file()
    windows = sorted(path.name for path in (pipeline.engine.staging / name / "windows").iterdir())

    own_store = pipeline.engine.store
    other_store = FrontierStore.from_url(f"sqlite:///{pipeline.root / 'other-worker.db'}")
    pipeline.engine.store = other_store
    pipeline.sql(f"INSERT INTO `{db}`.t VALUES (4, 'd')", f"UPDATE `{db}`.t SET v = 'z' WHERE id = 1")
    with pytest.raises(WindowStopped) as stopped:
        pipeline.run_window()
    assert stopped.value.error_classes == {"MetadataStoreMismatchError"}
    message = stopped.value.errors[0].message
    assert (
        f"pipeline '{name}': the metadata store sqlite:///{pipeline.root / 'other-worker.db'} has no record" in message
    )
    assert "give every task of the pipeline metadata_conn_id" in message
    with pytest.raises(WindowStopped, match="MetadataStoreMismatchError"):
        pipeline.capture_next()  # capture refuses as well
    assert other_store.get_pipeline(name) is None  # nothing recorded there
    assert sorted(path.name for path in (pipeline.engine.staging / name / "windows").iterdir()) == windows

    # Back on the pipeline's own store, the rows written meanwhile arrive exactly.
    pipeline.engine.store = own_store
    pipeline.window()
