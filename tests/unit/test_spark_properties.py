"""Which Spark properties hold a secret (they reach spark-submit in a private file, never argv)."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.core.spark_properties import is_secret_property, split_secret_properties


@pytest.mark.parametrize(
    "name",
    [
        "spark.sql.catalog.lake.jdbc.password",
        "spark.sql.catalog.lake.token",
        "spark.sql.catalog.lake.credential",
        "spark.sql.catalog.lake.s3.secret-access-key",
        "spark.sql.catalog.lake.s3.access-key-id",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.sql.catalog.lake.header.Authorization",
        "spark.ssl.keyStorePassword",
    ],
)
def test_secret_properties_are_recognised(name: str) -> None:
    assert is_secret_property(name)


@pytest.mark.parametrize(
    "name",
    [
        "spark.sql.catalog.lake.uri",
        "spark.sql.catalog.lake.jdbc.user",
        "spark.sql.catalog.lake.warehouse",
        "spark.hadoop.fs.s3a.endpoint",
        "spark.driver.memory",
        "spark.sql.catalog.lake.type",
    ],
)
def test_other_properties_stay_on_the_command_line(name: str) -> None:
    assert not is_secret_property(name)


def test_the_split_keeps_every_property_once() -> None:
    conf = {"spark.sql.catalog.lake.uri": "jdbc:mysql://h/c", "spark.sql.catalog.lake.jdbc.password": "pw"}
    public, secret = split_secret_properties(conf)
    assert public == {"spark.sql.catalog.lake.uri": "jdbc:mysql://h/c"}
    assert secret == {"spark.sql.catalog.lake.jdbc.password": "pw"}
