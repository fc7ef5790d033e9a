"""The warm Spark service's pure parts: which command lines share a service, and the private folder
(the service itself runs in tests/integration/test_warm_apply.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from airflow_provider_mysql_cdc.apply.warm_service import (
    SERVICE_APPLICATION,
    WarmApplyClient,
    private_folder,
    service_key,
)
from airflow_provider_mysql_cdc.errors import ConfigurationError

PYTHON = {"PYSPARK_PYTHON": "/venv/bin/python", "PYSPARK_DRIVER_PYTHON": "/venv/bin/python"}


def _command(properties: Path, *conf: str) -> list[str]:
    return ["spark-submit", "--master", "local[2]", *conf, "--properties-file", str(properties), SERVICE_APPLICATION]


def test_a_properties_file_counts_by_its_content_not_its_temporary_path(tmp_path: Path) -> None:
    first, second, other = tmp_path / "a.properties", tmp_path / "b.properties", tmp_path / "c.properties"
    first.write_text("spark.hadoop.fs.s3a.secret.key=one\n")
    second.write_text("spark.hadoop.fs.s3a.secret.key=one\n")
    other.write_text("spark.hadoop.fs.s3a.secret.key=two\n")
    assert service_key(_command(first), PYTHON) == service_key(_command(second), PYTHON)
    assert service_key(_command(first), PYTHON) != service_key(_command(other), PYTHON)


def test_another_setting_or_python_is_another_service(tmp_path: Path) -> None:
    properties = tmp_path / "p.properties"
    properties.write_text("")
    base = service_key(_command(properties), PYTHON)
    assert service_key(_command(properties, "--driver-memory", "4g"), PYTHON) != base
    assert service_key(_command(properties), {**PYTHON, "PYSPARK_PYTHON": "/other/python"}) != base


def test_the_service_folder_must_be_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    with pytest.raises(ConfigurationError, match="private"):
        private_folder(shared)
    assert stat.S_IMODE(private_folder(tmp_path / "new").stat().st_mode) == 0o700


def test_a_folder_too_deep_for_a_unix_socket_is_refused_with_the_fix(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    with pytest.raises(ConfigurationError, match="shorter path"):
        WarmApplyClient(deep, ["spark-submit", SERVICE_APPLICATION], PYTHON, idle_seconds=60)


def test_verify_services_differ_by_their_spark_settings_and_keep_them_off_argv(tmp_path: Path) -> None:
    from airflow_provider_mysql_cdc.verify.child import SparkSettings, WarmVerifyClient

    folder = tmp_path / "services"
    secret = "catalog-password-123"
    settings = SparkSettings("local[1]", {"spark.sql.catalog.lake.jdbc.password": secret}, ["/jars/iceberg.jar"])
    client = WarmVerifyClient(folder, settings, idle_seconds=60, environment=PYTHON)
    same = WarmVerifyClient(folder, settings, idle_seconds=60, environment=PYTHON)
    other_master = SparkSettings("local[2]", settings.conf, settings.jars)
    other = WarmVerifyClient(folder, other_master, idle_seconds=60, environment=PYTHON)
    assert client.paths.key == same.paths.key != other.paths.key
    assert secret.encode() in client.startup  # what the service reads on its stdin
    assert not [part for part in client.command if secret in part]
    assert not [value for value in client.environment.values() if secret in value]
    # The same command without those settings (as an apply client would send) is another service.
    assert WarmApplyClient(folder, client.command, client.environment, idle_seconds=60).paths.key != client.paths.key


def test_a_service_this_process_started_counts_as_gone_once_it_exited() -> None:
    """A child that exited stays a zombie until reaped, and ``kill(pid, 0)`` still finds it: stopping
    the services a worker started itself must not wait out its timeout for them."""
    import subprocess
    import time

    from airflow_provider_mysql_cdc.apply.warm_service import _alive

    child = subprocess.Popen(["sleep", "0.2"])
    assert _alive(child.pid)
    deadline = time.monotonic() + 10
    while _alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child.pid)
    assert not _alive(child.pid)  # asked again once reaped
