"""OpenLineage names of MySQL tables, staging locations and Iceberg tables (the naming spec), what each
task describes, and how that becomes the OpenLineage provider's ``OperatorLineage``."""

from __future__ import annotations

import json
import os

import pytest

from airflow_provider_mysql_cdc.core.lineage import (
    AppliedTable,
    DatasetName,
    IcebergTableNames,
    MySqlServer,
    apply_lineage,
    capture_lineage,
    iceberg_table_names,
    identifier_parts,
    location_dataset,
    mysql_dataset,
    snapshot_chunk_lineage,
    verify_lineage,
)
from tests.fresh_interpreter import run_json


@pytest.mark.parametrize(
    ("host", "port", "namespace"),
    [
        ("db.example.com", 3306, "mysql://db.example.com:3306"),
        ("DB.Example.COM", 3307, "mysql://db.example.com:3307"),
        ("", 3306, "mysql://localhost:3306"),  # a Unix socket connection
        ("::1", 3306, "mysql://[::1]:3306"),
    ],
)
def test_mysql_tables_are_named_by_server_and_database_table(host: str, port: int, namespace: str) -> None:
    assert mysql_dataset(host, port, "shop.orders") == DatasetName(namespace, "shop.orders")


@pytest.mark.parametrize(
    ("location", "namespace", "name"),
    [
        ("/data/staging/demo/windows", "file", "/data/staging/demo/windows"),
        ("/data/staging//demo/windows/", "file", "/data/staging/demo/windows"),
        ("file:///data/staging/demo", "file", "/data/staging/demo"),
        ("file://nas01/data/staging", "file://nas01", "/data/staging"),
        ("s3://lake-bucket/staging/demo/windows", "s3://lake-bucket", "staging/demo/windows"),
        ("s3a://lake-bucket/staging", "s3://lake-bucket", "staging"),
        ("gs://lake-bucket/wh/demo/orders", "gs://lake-bucket", "wh/demo/orders"),
        ("hdfs://namenode:8020/warehouse/demo/orders", "hdfs://namenode:8020", "/warehouse/demo/orders"),
        (
            "abfss://lake@account.dfs.core.windows.net/staging",
            "abfss://lake@account.dfs.core.windows.net",
            "/staging",
        ),
    ],
)
def test_storage_locations_follow_the_naming_spec(location: str, namespace: str, name: str) -> None:
    assert location_dataset(location) == DatasetName(namespace, name)


def test_a_location_never_names_a_user_password_or_query() -> None:
    named = location_dataset("s3://AKIAKEY:s3cr3t@lake-bucket/staging?X-Amz-Signature=abc#frag")
    assert named == DatasetName("s3://lake-bucket", "staging")
    assert location_dataset("hdfs://hdfs:pw@namenode:8020/wh") == DatasetName("hdfs://namenode:8020", "/wh")


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("lake.demo.orders", ["lake", "demo", "orders"]),
        ("`lake`.`demo`.`orders`", ["lake", "demo", "orders"]),
        ("`lake`.`my.db`.`odd``name`", ["lake", "my.db", "odd`name"]),
        ("shop.`t.x`", ["shop", "t.x"]),
        ("`a``.b`.c.`d`", ["a`.b", "c", "d"]),
        ("orders", ["orders"]),
    ],
)
def test_identifier_parts(identifier: str, parts: list[str]) -> None:
    assert identifier_parts(identifier) == parts


@pytest.mark.parametrize("identifier", ["shop.`t.x", "`a`b.c", "`a``"])
def test_identifier_parts_refuses_a_malformed_name(identifier: str) -> None:
    with pytest.raises(ValueError, match="backquote"):
        identifier_parts(identifier)


def test_a_hadoop_catalog_table_is_its_location_with_its_table_name_as_symlink() -> None:
    local = iceberg_table_names("`lake`.`demo`.`orders`", "/data/warehouse/")
    assert local == IcebergTableNames(
        DatasetName("file", "/data/warehouse/demo/orders"), DatasetName("file:///data/warehouse", "demo.orders")
    )
    on_s3 = iceberg_table_names("lake.demo.orders", None, {"type": "hadoop", "warehouse": "s3://lake-bucket/wh"})
    assert on_s3 == IcebergTableNames(
        DatasetName("s3://lake-bucket", "wh/demo/orders"), DatasetName("s3://lake-bucket/wh", "demo.orders")
    )
    nested = iceberg_table_names("lake.a.b.t", "hdfs://nn:8020/wh")
    assert nested.dataset == DatasetName("hdfs://nn:8020", "/wh/a/b/t")
    assert nested.table == DatasetName("hdfs://nn:8020/wh", "a.b.t")


def test_other_catalogs_are_named_by_their_service_without_credentials() -> None:
    hive = iceberg_table_names("lake.demo.orders", None, {"type": "hive", "uri": "thrift://metastore:9083"})
    assert hive == IcebergTableNames(DatasetName("hive://metastore:9083", "demo.orders"))
    rest = iceberg_table_names(
        "lake.demo.orders",
        None,
        {"type": "rest", "uri": "https://user:pw@catalog.example.com:8181/api/v1?token=t", "credential": "id:secret"},
    )
    assert rest == IcebergTableNames(DatasetName("https://catalog.example.com:8181", "demo.orders"))
    glue = iceberg_table_names(
        "lake.demo.orders", None, {"catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog", "warehouse": "s3://b/w"}
    )
    assert glue == IcebergTableNames(DatasetName("iceberg://lake", "demo.orders"))


def test_capture_reads_the_tables_it_staged_changes_of_and_writes_the_staged_windows() -> None:
    lineage = capture_lineage(
        MySqlServer("db", 3306),
        {"shop.orders": {"c": 2, "u": 1, "d": 0, "r": 0}, "shop.items": {"c": 0, "u": 0, "d": 1, "r": 0}},
        "s3://bucket/staging/shop/windows",
    )
    assert [d.dataset for d in lineage.inputs] == [
        DatasetName("mysql://db:3306", "shop.items"),
        DatasetName("mysql://db:3306", "shop.orders"),
    ]
    assert [(d.dataset, d.rows) for d in lineage.outputs] == [(DatasetName("s3://bucket", "staging/shop/windows"), 4)]


def test_a_snapshot_chunk_reads_its_table_and_writes_the_staged_snapshots() -> None:
    lineage = snapshot_chunk_lineage(MySqlServer("db", 3306), "shop.orders", 250, "/stage/shop/snapshots")
    assert [d.dataset for d in lineage.inputs] == [DatasetName("mysql://db:3306", "shop.orders")]
    assert [(d.dataset, d.rows) for d in lineage.outputs] == [(DatasetName("file", "/stage/shop/snapshots"), 250)]


def test_apply_outputs_copy_each_column_of_their_mysql_table() -> None:
    columns = (("id", "int"), ("status", "varchar(10) utf8mb4"))
    lineage = apply_lineage(
        MySqlServer("db", 3306),
        [AppliedTable("shop.orders", "`lake`.`shop`.`orders`", columns, rows=3)],
        ["/stage/shop/windows"],
        "/wh",
        None,
    )
    staged, mysql = lineage.inputs
    assert staged.dataset == DatasetName("file", "/stage/shop/windows")
    assert mysql.dataset == DatasetName("mysql://db:3306", "shop.orders") and mysql.columns == columns
    (target,) = lineage.outputs
    assert target.dataset == DatasetName("file", "/wh/shop/orders")
    assert target.table == DatasetName("file:///wh", "shop.orders")
    assert target.copied_from == mysql.dataset and target.copied_columns == ("id", "status")
    assert target.rows == 3


def test_apply_without_a_known_source_names_only_staging_and_targets() -> None:
    lineage = apply_lineage(
        None, [AppliedTable("shop.orders", "lake.shop.orders", (("id", "int"),))], ["/s"], "/wh", None
    )
    assert [d.dataset.namespace for d in lineage.inputs] == ["file"]
    assert lineage.outputs[0].copied_from is None and lineage.outputs[0].copied_columns == ()


def test_verify_reads_each_table_and_its_target() -> None:
    lineage = verify_lineage(MySqlServer("db", 3306), {"shop.orders": "`lake`.`shop`.`orders`"}, "/wh", None)
    assert [d.dataset for d in lineage.inputs] == [
        DatasetName("mysql://db:3306", "shop.orders"),
        DatasetName("file", "/wh/shop/orders"),
    ]
    assert lineage.outputs == ()


def test_operator_lineage_carries_schema_symlink_column_lineage_and_row_count() -> None:
    from openlineage.client.serde import Serde

    from airflow_provider_mysql_cdc.operators.lineage import operator_lineage

    lineage = apply_lineage(
        MySqlServer("db", 3306),
        [AppliedTable("shop.orders", "lake.shop.orders", (("id", "int"), ("v", "text")), rows=5)],
        ["/stage/shop/windows"],
        "/wh",
        None,
    )
    converted = operator_lineage(lineage)
    outputs = [json.loads(Serde.to_json(dataset)) for dataset in converted.outputs]
    inputs = [json.loads(Serde.to_json(dataset)) for dataset in converted.inputs]
    assert [(f["name"], f["type"]) for f in inputs[1]["facets"]["schema"]["fields"]] == [("id", "int"), ("v", "text")]
    (target,) = outputs
    assert (target["namespace"], target["name"]) == ("file", "/wh/shop/orders")
    assert target["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "file:///wh", "name": "shop.orders", "type": "TABLE"}
    ]
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == 5
    fields = target["facets"]["columnLineage"]["fields"]
    assert set(fields) == {"id", "v"}
    (source,) = fields["v"]["inputFields"]
    assert (source["namespace"], source["name"], source["field"]) == ("mysql://db:3306", "shop.orders", "v")
    assert [(t["type"], t["subtype"]) for t in source["transformations"]] == [("DIRECT", "IDENTITY")]
    assert operator_lineage(None).inputs == operator_lineage(None).outputs == []


_WITHOUT_PROVIDER = """
import json, sys
# As if the provider were not installed: the modules the package imports from it cannot be imported.
for module in ("conf", "extractors", "utils.spark"):
    sys.modules[f"airflow.providers.openlineage.{module}"] = None
import airflow_provider_mysql_cdc.operators.apply as apply
import airflow_provider_mysql_cdc.operators.capture as capture
import airflow_provider_mysql_cdc.operators.snapshot as snapshot
import airflow_provider_mysql_cdc.operators.verify as verify
from airflow_provider_mysql_cdc.core.lineage import TaskLineage
from airflow_provider_mysql_cdc.operators.lineage import openlineage_enabled, with_parent_job_properties

operator = capture.MySqlBinlogCaptureOperator(task_id="capture", pipeline="p", staging_uri="/tmp/s")
operator._record_lineage(TaskLineage)
print(json.dumps({
    "enabled": openlineage_enabled(),
    "recorded": operator._task_lineage is not None,
    "conf": with_parent_job_properties({"spark.x": "1"}, {}),
}))
"""


def test_without_the_openlineage_provider_the_operators_work_and_record_nothing() -> None:
    environ = {**os.environ, "AIRFLOW__OPENLINEAGE__DISABLED": "False"}
    environ["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps({"type": "console"})
    assert run_json(_WITHOUT_PROVIDER, environ=environ) == {
        "enabled": False,
        "recorded": False,
        "conf": {"spark.x": "1"},
    }
