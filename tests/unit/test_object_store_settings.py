"""Object store settings: from an Airflow ``aws`` connection to pyarrow (staging) and to Hadoop S3A
properties in a private properties file (the apply job), the secret key never in a repr."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings, is_s3_uri, s3_path
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.staging.area import open_filesystem

SETTINGS = ObjectStoreSettings("AKID", "s3cr3t\\with=odd:chars", "http://127.0.0.1:8333", "eu-west-1")


def test_the_secret_key_is_not_in_the_repr() -> None:
    assert "s3cr3t" not in repr(SETTINGS) and "AKID" in repr(SETTINGS)
    assert "s3cr3t" not in repr(Staging("s3://lake/cdc", "p", SETTINGS))


def test_half_a_key_pair_or_an_endpoint_without_scheme_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="only one of access key"):
        ObjectStoreSettings(access_key="AKID")
    with pytest.raises(ConfigurationError, match="needs its scheme"):
        ObjectStoreSettings(endpoint_url="127.0.0.1:8333")


def test_s3_uris() -> None:
    assert is_s3_uri("s3://lake/cdc") and is_s3_uri("s3a://lake/cdc") and not is_s3_uri("/data/s3")
    assert s3_path("s3a://lake/cdc/") == "lake/cdc"
    with pytest.raises(ConfigurationError, match="names no bucket"):
        s3_path("s3://")


def test_spark_properties_round_trip_to_the_same_settings() -> None:
    properties = SETTINGS.spark_properties()
    assert properties["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert properties["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert properties["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert ObjectStoreSettings.from_spark_properties(properties.get) == SETTINGS
    nothing: dict[str, str] = {}
    assert ObjectStoreSettings.from_spark_properties(nothing.get) is None


def test_aws_itself_with_the_default_credential_chain_sets_no_key_or_endpoint() -> None:
    properties = ObjectStoreSettings(region="us-east-1").spark_properties()
    assert not [key for key in properties if key.endswith(("access.key", "secret.key", "endpoint"))]


def test_staging_on_s3_opens_pyarrow_s3_with_the_settings() -> None:
    filesystem, root = open_filesystem("s3://lake/cdc/", SETTINGS)
    assert isinstance(filesystem, pafs.S3FileSystem) and root == "lake/cdc"
    assert filesystem.region == "eu-west-1"
    local, path = open_filesystem("/tmp/staging", SETTINGS)  # a local staging ignores them
    assert isinstance(local, pafs.LocalFileSystem) and path == "/tmp/staging"


def test_the_properties_file_is_private_escaped_and_deleted(tmp_path: Path) -> None:
    from airflow_provider_mysql_cdc.core.spark_properties import secret_properties_file

    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text("spark.eventLog.enabled true\n")
    with secret_properties_file(SETTINGS.spark_properties(), defaults) as path:
        assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
        lines = Path(path).read_text().splitlines()
        assert lines[0] == "spark.eventLog.enabled true"
        assert "spark.hadoop.fs.s3a.secret.key=s3cr3t\\\\with=odd:chars" in lines
    assert not Path(path).exists()


def test_the_settings_come_from_an_aws_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_mysql_cdc.hooks.object_store import object_store_settings

    connection = {
        "conn_type": "aws",
        "login": "AKID",
        "password": "s3cr3t",
        "extra": {"endpoint_url": "http://127.0.0.1:8333", "region_name": "eu-west-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_TEST_OBJECT_STORE", json.dumps(connection))
    assert object_store_settings("test_object_store") == ObjectStoreSettings(
        "AKID", "s3cr3t", "http://127.0.0.1:8333", "eu-west-1"
    )
    assert object_store_settings(None) is None
