"""Session fixtures: real MySQL servers, an isolated Airflow home on SQLite.

Environment for Airflow and Spark is set here, before any test module imports Airflow.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests assert what holds, never how fast: Hypothesis's per-example deadline (200 ms) failed
# a pure chunk-planning test on this 2-core machine while MySQL and Spark ran beside it (250 ms once,
# 68 ms on the retry). No deadline for any of them.
settings.register_profile("cdc", deadline=None)
settings.load_profile("cdc")

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Names the local MySQL instances and the Airflow home of this run; concurrent test runs on one
#: checkout need different prefixes. Each pytest-xdist worker (``make test`` runs two) adds its name.
INSTANCE_PREFIX = "-".join(
    part
    for part in (os.environ.get("MYSQL_CDC_TEST_INSTANCE_PREFIX", "pytest"), os.environ.get("PYTEST_XDIST_WORKER"))
    if part
)
AIRFLOW_TEST_HOME = REPO_ROOT / ".cache" / f"airflow-home-{INSTANCE_PREFIX}"
#: Spark settings for the short-lived JVMs the tests start through spark-submit (the apply and
#: maintenance jobs, the verify child, the Airflow services' tasks): no UI, two shuffle partitions, and
#: only the JVM's quick compiler (a job of seconds spends a third less CPU without C2). spark-submit
#: reads them from ``$SPARK_CONF_DIR/spark-defaults.conf``; the session fixture sets its own.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
TEST_SPARK_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
    "spark.executor.extraJavaOptions": SHORT_LIVED_JVM,
}
TEST_SPARK_CONF_DIR = REPO_ROOT / ".cache" / f"spark-conf-{INSTANCE_PREFIX}"
TEST_SPARK_CONF_DIR.mkdir(parents=True, exist_ok=True)
(TEST_SPARK_CONF_DIR / "spark-defaults.conf").write_text(
    "".join(f"{key} {value}\n" for key, value in TEST_SPARK_DEFAULTS.items()), encoding="utf-8"
)

os.environ["AIRFLOW_HOME"] = str(AIRFLOW_TEST_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO_ROOT / "dags")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{AIRFLOW_TEST_HOME / 'airflow.db'}"
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["SPARK_CONF_DIR"] = str(TEST_SPARK_CONF_DIR)
# The OpenLineage provider is installed (dev extra) but emits nothing unless a test turns it on (the
# lineage test does, for its own Airflow processes), whatever the developer's environment configures.
os.environ["AIRFLOW__OPENLINEAGE__DISABLED"] = "True"

from tests.mysql_servers import MySqlTestServer, external_server, running_local  # noqa: E402

MISCONFIGURED_SETTINGS = {
    "gtid_mode": "OFF",
    "enforce_gtid_consistency": "OFF",
    "log_bin": "OFF",
    "binlog_format": "STATEMENT",
    "binlog_row_image": "MINIMAL",
    "binlog_row_metadata": "MINIMAL",
    "binlog_expire_logs_seconds": "3600",
}


@pytest.fixture(scope="session")
def mysql_server() -> Iterator[MySqlTestServer]:
    """The well-configured source server (local, or ``MYSQL_CDC_EXTERNAL_URL``)."""
    external = external_server()
    if external is not None:
        yield external
        return
    with running_local(f"{INSTANCE_PREFIX}-primary") as server:
        yield server


@pytest.fixture(scope="session")
def misconfigured_mysql() -> Iterator[MySqlTestServer]:
    """A local server with every CDC-relevant setting wrong (always local: it is started with them)."""
    with running_local(f"{INSTANCE_PREFIX}-misconfigured", MISCONFIGURED_SETTINGS) as server:
        yield server


@pytest.fixture(scope="session")
def scratch_mysql() -> Iterator[MySqlTestServer]:
    """A local server whose GTID state tests may reset at will."""
    with running_local(f"{INSTANCE_PREFIX}-scratch") as server:
        yield server


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """A fresh Airflow home with a migrated SQLite metadata database."""
    shutil.rmtree(AIRFLOW_TEST_HOME, ignore_errors=True)
    AIRFLOW_TEST_HOME.mkdir(parents=True)
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return AIRFLOW_TEST_HOME


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one local SparkSession (Iceberg catalogs ``lake`` and ``lake_other``) of the test run."""
    from tests.spark_session import iceberg_session

    yield from iceberg_session(tmp_path_factory.mktemp("iceberg-warehouse"), tmp_path_factory.mktemp("spark-warehouse"))


@contextlib.contextmanager
def _services_folder() -> Iterator[Path]:
    """A folder for warm Spark services, short (a Unix socket's path holds at most 107 bytes; pytest's
    are long); the services left in it are stopped afterwards."""
    from airflow_provider_mysql_cdc.apply.warm_service import stop_services

    folder = Path(tempfile.mkdtemp(prefix="cdc-warm-"))
    try:
        yield folder / "services"
    finally:
        if (folder / "services").is_dir():
            stop_services(folder / "services")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def service_folder() -> Iterator[Path]:
    """A test's own folder for warm Spark services (those left in it, by a test that failed half-way,
    are stopped afterwards)."""
    with _services_folder() as folder:
        yield folder


@pytest.fixture(scope="session")
def worker_service_folder() -> Iterator[Path]:
    """The warm Spark services of this worker's example DAG tests (see :func:`warm_spark`), stopped when
    the worker ends."""
    with _services_folder() as folder:
        yield folder


def _warm(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    monkeypatch.setenv("MYSQL_CDC_WARM_SPARK_SECONDS", "600")
    monkeypatch.setenv("MYSQL_CDC_WARM_SPARK_FOLDER", str(folder))
    return folder


@pytest.fixture
def warm_spark(monkeypatch: pytest.MonkeyPatch, worker_service_folder: Path) -> Path:
    """The example DAG's apply and verify keep their Spark drivers warm between runs
    (``MYSQL_CDC_WARM_SPARK_SECONDS``) in the worker's :func:`worker_service_folder`
    (``MYSQL_CDC_WARM_SPARK_FOLDER``), which is returned: the tests of one worker that run the DAG with
    the same Spark command line (master, jars, catalog) share one apply and one verify driver, as the
    runs of one deployment do. A test about the cold path (spark-submit, a verify process per run) does
    not take this fixture."""
    return _warm(monkeypatch, worker_service_folder)


@pytest.fixture
def own_warm_spark(monkeypatch: pytest.MonkeyPatch, service_folder: Path) -> Path:
    """As :func:`warm_spark`, in the test's own folder: for a test that counts the services it started."""
    return _warm(monkeypatch, service_folder)


#: The test modules that take minutes, longest first (from ``--durations``). They run before the others so
#: that the workers of ``make test`` end together: with ``--dist loadfile --no-loadscope-reorder``
#: pytest-xdist hands out whole modules in collection order (by default, modules with most tests first).
LONGEST_MODULES = (
    "test_differential.py",
    "test_backfills_through_the_api.py",
    "test_catalogue_dag.py",
    "test_airflow_dag.py",
    "test_recovery_from_the_ui.py",
    "test_two_airflow_homes.py",
    "test_server_faults.py",
    "test_crash.py",
    "test_lineage.py",
    "test_catalogue.py",
    "test_apply.py",
    "test_table_maintenance.py",
    "test_big_values.py",
    "test_catalogue_sessions.py",
    "test_task_retries.py",
    "test_bad_input.py",
    "test_failover.py",
    "test_secrets.py",
    "test_catalogs.py",
    "test_object_store.py",
    "test_verify_exact.py",
    "test_spark_cluster.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the longest modules first (the order of tests within a module is kept)."""
    rank = {name: position for position, name in enumerate(LONGEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
