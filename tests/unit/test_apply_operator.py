"""SparkApplyOperator's spark-submit arguments and Spark properties (pure; the real spark-submit runs
in the example DAG test)."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.apply.spark_job import parse_args
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.operators.apply import (
    ICEBERG_EXTENSIONS,
    SparkApplyOperator,
    apply_spark_conf,
)
from airflow_provider_mysql_cdc.staging import Staging


def test_hadoop_catalog_on_a_warehouse() -> None:
    conf = apply_spark_conf("lake", "/data/wh", None)
    assert conf["spark.sql.extensions"] == ICEBERG_EXTENSIONS
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert conf["spark.sql.catalog.lake.warehouse"] == "/data/wh"
    assert conf["spark.sql.catalog.lake.cache.expiration-interval-ms"] == "-1"


def test_catalog_properties_replace_the_hadoop_default() -> None:
    conf = apply_spark_conf("prod", None, {"type": "rest", "uri": "https://catalog.example.com"})
    assert conf["spark.sql.catalog.prod.type"] == "rest"
    assert conf["spark.sql.catalog.prod.uri"] == "https://catalog.example.com"
    assert "spark.sql.catalog.prod.warehouse" not in conf


def test_a_catalog_needs_a_warehouse_or_properties() -> None:
    with pytest.raises(ConfigurationError, match="needs a warehouse"):
        apply_spark_conf("lake", None, None)


def test_the_job_arguments_round_trip_through_its_parser() -> None:
    operator = SparkApplyOperator(
        task_id="apply",
        pipeline="shop",
        staging_uri="s3://bucket/staging",
        windows="3-5",
        warehouse="/wh",
        history=["shop.orders", "shop.items"],
        drop_dropped_columns=True,
        target_template="raw_{database}.{table}",
    )
    args = operator.application_arguments("s3://bucket/staging/shop/apply-reports/r.json")
    config = parse_args(args)
    assert (config.pipeline, config.staging_uri, config.first_window, config.last_window) == (
        "shop",
        "s3://bucket/staging",
        3,
        5,
    )
    assert config.history == ("shop.orders", "shop.items") and config.drop_dropped_columns
    assert config.target("shop.orders") == "`lake`.`raw_shop`.`orders`"
    assert config.report_uri.endswith("/r.json")


def test_report_names_are_safe_file_names() -> None:
    staging = Staging("s3://bucket/staging", "shop")
    path = staging.apply_report_path("scheduled__2026-01-01T00:00:00+00:00", 2)
    assert path == "shop/apply-reports/scheduled__2026-01-01T00_00_00_00_00-try2.json"


def test_target_tables_are_assets_named_after_the_iceberg_table() -> None:
    from airflow_provider_mysql_cdc.operators.apply import iceberg_table_asset

    quoted = iceberg_table_asset("`lake`.`shop`.`order``lines`")
    assert (quoted.name, quoted.uri) == ("lake.shop.order`lines", "iceberg://lake/shop/order`lines")
    plain = iceberg_table_asset("lake.shop.orders")
    assert (plain.name, plain.uri) == ("lake.shop.orders", "iceberg://lake/shop/orders")


def test_the_apply_emits_through_an_asset_alias_and_skips_spark_without_a_window() -> None:
    from airflow.sdk import AssetAlias

    operator = SparkApplyOperator(task_id="apply", pipeline="p", staging_uri="/s", windows=None, warehouse="/w")
    assert AssetAlias("mysql_cdc_iceberg_tables") in operator.outlets
    # No window (the capture found the run's interval covered): no spark-submit, an empty report.
    assert operator.execute({"run_id": "r"})["tables"] == {}
    assert SparkApplyOperator(task_id="a", pipeline="p", staging_uri="/s", windows=1, asset_alias=None).outlets == []
