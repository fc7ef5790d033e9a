"""SparkApplyOperator's apply spec, spark-submit arguments and Spark properties (no Spark: the real
spark-submit runs in the example DAG test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.spark_job import main, parse_args, read_spec
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.operators.apply import (
    ICEBERG_EXTENSIONS,
    SparkApplyOperator,
    apply_spark_conf,
    check_deploy_mode,
)
from airflow_provider_mysql_cdc.staging import Staging


@pytest.mark.parametrize(
    ("master", "deploy_mode"),
    [
        ("spark://m:7077", "client"),
        ("spark://m:7077", None),
        ("yarn", "cluster"),
        ("k8s://https://api:6443", "cluster"),
        ("local[2]", None),
    ],
)
def test_deploy_modes_the_master_runs_python_applications_in_pass(master: str, deploy_mode: str | None) -> None:
    check_deploy_mode("shop", "spark_default", master, deploy_mode)


def test_cluster_mode_on_a_standalone_master_is_refused_with_the_fix() -> None:
    """Against a real standalone cluster: tests/integration/test_spark_cluster.py."""
    with pytest.raises(ConfigurationError) as refused:
        check_deploy_mode("shop", "spark_cluster", "spark://m1:7077,m2:7077", "cluster")
    message = str(refused.value)
    assert "pipeline 'shop'" in message and "'spark_cluster'" in message and "spark://m1:7077,m2:7077" in message
    assert '"deploy-mode" to "client"' in message


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


def test_the_spec_round_trips_to_what_the_job_reads(tmp_path: Path) -> None:
    operator = SparkApplyOperator(
        task_id="apply",
        pipeline="shop",
        staging_uri=str(tmp_path / "staging"),
        windows="3-5",
        warehouse="/wh",
        history=["shop.orders", "shop.items"],
        drop_dropped_columns=True,
        target_template="raw_{database}.{table}",
    )
    staging = Staging(str(tmp_path / "staging"), "shop")
    spec = operator.apply_spec(staging.uri_of(staging.apply_report_path("r", 1)))
    spec_uri = staging.write_text(staging.apply_spec_path("r", 1), spec.to_json())
    assert spec_uri == f"{tmp_path}/staging/shop/apply-specs/r-try1.json"
    config = read_spec(spec_uri)
    assert config == spec
    assert (config.pipeline, config.staging_uri, config.first_window, config.last_window) == (
        "shop",
        str(tmp_path / "staging"),
        3,
        5,
    )
    assert config.history == ("shop.orders", "shop.items") and config.drop_dropped_columns
    assert config.target("shop.orders") == "`lake`.`raw_shop`.`orders`"
    assert config.report_uri == f"{tmp_path}/staging/shop/apply-reports/r-try1.json"
    assert parse_args(["--spec", spec_uri]) == spec_uri


def test_the_operator_defaults_are_the_specs() -> None:
    operator = SparkApplyOperator(task_id="apply", pipeline="p", staging_uri="/s", windows=1, warehouse="/w")
    assert operator.apply_spec("") == ApplySpec("p", "/s", 1, 1)


def test_the_spec_holds_no_catalog_credential_or_spark_setting() -> None:
    """The catalog's properties (a REST token, storage keys) and the Spark conf go to spark-submit as
    Spark properties; the spec file written to staging names the catalog only."""
    secret = "s3cr3t-T0ken/with:chars@"
    operator = SparkApplyOperator(
        task_id="apply",
        pipeline="shop",
        staging_uri="s3://bucket/staging",
        windows=7,
        catalog="prod",
        catalog_conf={"type": "rest", "uri": "https://catalog.example.com", "credential": f"client:{secret}"},
        conf={"spark.hadoop.fs.s3a.secret.key": secret, "spark.driver.memory": "2g"},
    )
    text = operator.apply_spec("s3://bucket/staging/shop/apply-reports/r-try1.json").to_json()
    assert secret not in text and "credential" not in text and "spark." not in text
    assert json.loads(text)["catalog"] == "prod"


def test_a_missing_spec_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no apply spec"):
        read_spec(str(tmp_path / "nowhere.json"))
    assert main(["--spec", str(tmp_path / "nowhere.json")]) == 2


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


def test_the_apply_job_gets_no_airflow_connection_variable_or_setting() -> None:
    """Connections, variables and settings of the worker (which can hold passwords) are withheld from
    spark-submit; everything else it may need is passed on."""
    from airflow_provider_mysql_cdc.core.spark_properties import job_environment

    worker = {
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": "mysql://cdc:secret@db:3306",
        "AIRFLOW_VAR_API_TOKEN": "token",
        "AIRFLOW__CORE__FERNET_KEY": "key",
        "MYSQL_PWD": "secret",
        "PATH": "/usr/bin",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
        "AWS_SECRET_ACCESS_KEY": "for the warehouse",
        "AIRFLOW_HOME": "/opt/airflow",
    }
    assert job_environment(worker) == {
        "PATH": "/usr/bin",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
        "AWS_SECRET_ACCESS_KEY": "for the warehouse",
        "AIRFLOW_HOME": "/opt/airflow",
    }


def test_catalog_secrets_reach_spark_submit_in_a_private_properties_file_never_in_argv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A JDBC catalog's password (any property whose name says it holds a secret) goes to spark-submit
    in a properties file readable by this user only, deleted after the job; the other properties stay
    ``--conf``. What spark-submit would run is the Spark provider hook's own command line."""
    import stat

    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from airflow_provider_mysql_cdc.operators.apply import APPLY_APPLICATION

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    defaults = tmp_path / "conf" / "spark-defaults.conf"
    defaults.parent.mkdir()
    defaults.write_text("spark.eventLog.enabled false\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(defaults.parent))
    password = "jdbc-Pa55/word=x"
    catalog_conf = {
        "type": "jdbc",
        "uri": "jdbc:mysql://127.0.0.1:3306/iceberg_catalog",
        "jdbc.user": "catalog",
        "jdbc.password": password,
        "warehouse": str(tmp_path / "warehouse"),
    }
    operator = SparkApplyOperator(
        task_id="apply", pipeline="p", staging_uri=str(tmp_path), windows=1, catalog_conf=catalog_conf, jars="/i.jar"
    )
    operator.conf = {**apply_spark_conf("lake", None, catalog_conf), "spark.driver.memory": "1g"}
    seen: dict[str, object] = {}

    def submitted(self: SparkApplyOperator, context: object) -> None:
        assert self._hook is not None and self.properties_file is not None
        seen["argv"] = self._hook._build_spark_submit_command(APPLY_APPLICATION)
        seen["lines"] = Path(self.properties_file).read_text().splitlines()
        seen["mode"] = stat.S_IMODE(Path(self.properties_file).stat().st_mode)
        seen["file"] = self.properties_file

    monkeypatch.setattr(SparkSubmitOperator, "execute", submitted)
    operator.submit_job({}, str(tmp_path / "spec.json"))

    argv = list(seen["argv"])  # type: ignore[call-overload]
    assert not any(password in part for part in argv), argv
    assert "spark.sql.catalog.lake.jdbc.user=catalog" in argv and "spark.driver.memory=1g" in argv
    assert argv[argv.index("--properties-file") + 1] == seen["file"]
    # The defaults spark-submit would have read, then the secret, escaped as Java properties are.
    assert seen["lines"] == ["spark.eventLog.enabled false", "spark.sql.catalog.lake.jdbc.password=jdbc-Pa55/word=x"]
    assert seen["mode"] == 0o600
    assert not Path(str(seen["file"])).exists()
    assert operator.properties_file is None and operator.conf["spark.sql.catalog.lake.jdbc.password"] == password


def test_catalog_properties_are_rendered_when_the_task_runs() -> None:
    """A catalog password written as a template of a connection (``{{ conn.<id>.password }}``) is
    rendered at run time, not at parse time: ``catalog_conf`` is a template field of every operator
    that reaches the catalog."""
    from types import SimpleNamespace

    from airflow_provider_mysql_cdc.operators.maintenance import IcebergMaintenanceOperator
    from airflow_provider_mysql_cdc.operators.verify import MySqlCdcVerifyOperator

    catalog_conf = {"type": "jdbc", "uri": "jdbc:mysql://h/c", "jdbc.password": "{{ conn.iceberg_catalog.password }}"}
    context = {"conn": SimpleNamespace(iceberg_catalog=SimpleNamespace(password="pw-from-connection"))}
    operators: list[SparkApplyOperator | MySqlCdcVerifyOperator | IcebergMaintenanceOperator] = [
        SparkApplyOperator(task_id="apply", pipeline="p", staging_uri="/s", windows=1, catalog_conf=catalog_conf),
        MySqlCdcVerifyOperator(task_id="verify", pipeline="p", tables=["d.t"], catalog_conf=catalog_conf),
        IcebergMaintenanceOperator(task_id="maintain", pipeline="p", staging_uri="/s", catalog_conf=catalog_conf),
    ]
    for operator in operators:
        assert "catalog_conf" in operator.template_fields
        operator.render_template_fields(context)  # type: ignore[arg-type]
        assert operator.catalog_conf["jdbc.password"] == "pw-from-connection", type(operator).__name__


def test_the_partitioning_setting_reaches_the_spec_and_a_wrong_field_fails_the_dag() -> None:
    setting = {"shop.orders": ["days(created_at)", "bucket(8, id)"]}
    operator = SparkApplyOperator(
        task_id="apply", pipeline="p", staging_uri="/s", windows=1, warehouse="/w", partitioning=setting
    )
    assert operator.apply_spec("").partitioning == setting
    with pytest.raises(ConfigurationError, match=r"partition field 'bucket\(id\)' is not one of"):
        SparkApplyOperator(
            task_id="apply",
            pipeline="p",
            staging_uri="/s",
            windows=1,
            warehouse="/w",
            partitioning={"shop.t": ["bucket(id)"]},
        )
