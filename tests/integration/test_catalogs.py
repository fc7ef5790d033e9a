"""The apply into catalogs other than Hadoop's, each served by a real server started here, with the
catalog's secret never leaving the private properties file.

* **JDBC**: ``catalog_conf`` ``type=jdbc`` (``uri`` ``jdbc:mysql://...``, ``jdbc.user``, ``jdbc.password``,
  a local ``warehouse``), the catalog's tables in a database of the test MySQL server, reached with the
  MariaDB Connector/J jar (``scripts/jdbc_jars.py``, from Debian); read back by pyiceberg's
  ``SqlCatalog`` (SQLAlchemy and PyMySQL).
* **REST**: SeaweedFS's Iceberg REST catalog (``testbed/object_store.py``, an S3 Tables bucket as its
  warehouse), signed in with OAuth2 client credentials (``credential``); the data files on the same
  store's S3, written by Iceberg's ``HadoopFileIO`` through Hadoop's S3A with the object store's Airflow
  connection; read back by pyiceberg's ``RestCatalog``.

For each, a snapshot and two windows of two tables are applied by ``SparkApplyOperator`` as a real
spark-submit (local master) through the Spark provider's connection; the reader (nothing of Spark or
this package) finds each table's current metadata through the catalog, and the tables are compared
with MySQL value by value. The applied frontier is in the table's own commit (the ``cdc.*`` snapshot
properties), so a second apply of the same windows finds every table up to date. The verify reads the
targets through the same catalog in its own Spark JVM. While the apply and the verify run, ``/proc`` is
watched: the secret is in no argv or environment of their processes, and in no file left in staging.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.operators.apply import SparkApplyOperator, apply_spark_conf
from airflow_provider_mysql_cdc.verify.child import SparkSettings, run_verify_child
from testbed.object_store import LocalObjectStore, ObjectStoreAddress
from tests.exactness.comparison import compare_table, describe_differences
from tests.exactness.iceberg_reader import IcebergContents, read_iceberg_metadata
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.integration.test_object_store import aws_connection_json, pyiceberg_properties, s3_jars
from tests.mysql_servers import MySqlTestServer
from tests.process_watch import ProcessWatch, watching
from tests.spark_session import iceberg_jars, load_script_module

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

#: The driver on the loopback address; the UI, shuffle partitions and JVM options come from the test
#: suite's ``spark-defaults.conf`` (``TEST_SPARK_DEFAULTS``), which the private properties file starts with.
SPARK_CONF = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}


def jdbc_driver() -> Path:
    """MariaDB Connector/J (``scripts/jdbc_jars.py``, cached in ``<repo>/.cache/jars/jdbc``)."""
    module = load_script_module("jdbc_jars")
    try:
        return Path(module.ensure_jdbc_driver())
    except module.JarAssemblyError as exc:
        pytest.fail(f"could not fetch the JDBC driver: {exc}")


def catalog_reader(catalog: Any, properties: dict[str, str]) -> Callable[[str, str], IcebergContents | None]:
    """``reader(database, table)`` for :func:`compare_table`: the pyiceberg ``catalog`` finds the table's
    current metadata file, read with ``properties``; None when the catalog has no such table."""
    from pyiceberg.exceptions import NoSuchTableError

    def read(database: str, table: str) -> IcebergContents | None:
        try:
            location = catalog.load_table(f"{database}.{table}").metadata_location
        except NoSuchTableError:
            return None
        return read_iceberg_metadata(location, properties)

    return read


def sql_catalog_reader(uri: str) -> Callable[[str, str], IcebergContents | None]:
    """pyiceberg's SQL catalog on the database of ``uri`` (SQLAlchemy), files on this machine."""
    from pyiceberg.catalog.sql import SqlCatalog

    return catalog_reader(SqlCatalog("lake", uri=uri), {})


def rest_catalog_reader(store: ObjectStoreAddress, warehouse: str) -> Callable[[str, str], IcebergContents | None]:
    """pyiceberg's REST catalog on the store's Iceberg REST endpoint (OAuth2 client credentials: the
    store's keys), files read from its S3 with the same keys."""
    from pyiceberg.catalog.rest import RestCatalog

    properties = {**pyiceberg_properties(store), "s3.force-virtual-addressing": "false"}
    credential = f"{store.access_key}:{store.secret_key}"
    catalog = RestCatalog("lake", uri=store.iceberg_rest_url, warehouse=warehouse, credential=credential, **properties)
    return catalog_reader(catalog, properties)


def files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(path) for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]


@dataclass
class CatalogCase:
    """One catalog: its properties, jars, independent reader and the secret that must stay private."""

    catalog_conf: dict[str, str]
    jars: list[Path]
    reader: Callable[[str, str], IcebergContents | None]
    secret: str
    #: Where the catalog puts the tables' files.
    location: str
    #: The Airflow ``aws`` connection of the store holding the files (its S3A settings reach Spark).
    object_store_conn_id: str | None = None
    #: Spark properties the verify's own session needs besides the catalog's (the store's S3A settings).
    verify_conf: dict[str, str] = field(default_factory=dict)


def make_source(server: MySqlTestServer, db: str, tmp_path: Path) -> None:
    """Two tables of ``db`` snapshotted, then two windows of changes captured into ``tmp_path/staging``."""
    server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.orders (id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, amount DECIMAL(12,2), "
        "placed DATETIME(6), doc JSON, payload VARBINARY(16))",
        f"INSERT INTO {db}.orders VALUES "
        + ", ".join(
            f"({i}, 'c{i % 7}', {i}.{i % 100:02d}, '2025-03-{1 + i % 28:02d} 08:00:00.{i:06d}', "
            f"JSON_OBJECT('n', {i}), UNHEX('{i:04x}ff'))"
            for i in range(1, 61)
        ),
        f"CREATE TABLE {db}.notes (k VARCHAR(20) PRIMARY KEY, body TEXT)",
        f"INSERT INTO {db}.notes VALUES ('a', 'first'), ('b', NULL)",
    )
    pipeline = SnapshotPipeline(server, tmp_path, db, TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    server.execute(
        f"UPDATE {db}.orders SET amount = amount * 2, doc = JSON_SET(doc, '$.paid', true) WHERE id <= 20",
        f"DELETE FROM {db}.orders WHERE id BETWEEN 30 AND 35",
        f"UPDATE {db}.orders SET id = 1001 WHERE id = 1",
        f"INSERT INTO {db}.notes VALUES ('c', 'third')",
    )
    assert pipeline.capture("run-1").window_id == 1
    server.execute(
        f"INSERT INTO {db}.orders VALUES (500, 'new', NULL, NULL, NULL, NULL)",
        f"UPDATE {db}.notes SET body = 'changed' WHERE k = 'b'",
        f"DELETE FROM {db}.notes WHERE k = 'a'",
    )
    assert pipeline.capture("run-2").window_id == 2


def apply_and_check(
    case: CatalogCase, server: MySqlTestServer, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Apply windows 1-2 of ``db`` into the catalog, compare, apply them again, verify, and check that the
    secret stayed out of every process's argv and environment and out of staging."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))

    def apply(run_id: str) -> dict[str, Any]:
        operator = SparkApplyOperator(
            task_id="apply",
            pipeline=db,
            staging_uri=str(tmp_path / "staging"),
            windows="1-2",
            catalog_conf=case.catalog_conf,
            object_store_conn_id=case.object_store_conn_id,
            jars=",".join(str(jar) for jar in case.jars),
            asset_alias=None,
            mysql_cdc_conn_id=None,
            openlineage_inject_parent_job_info=False,
            conf={**SPARK_CONF, "spark.local.dir": str(tmp_path / "spark-local")},
        )
        return dict(operator.execute({"run_id": run_id}))

    needle = case.secret.encode()
    marker = str(tmp_path / "staging").encode()
    with watching(ProcessWatch(marker=marker, needles=(needle,), script=b"spark_job.py")) as apply_watch:
        report = apply("apply-1")
    for table in ("orders", "notes"):
        state = report["tables"][f"{db}.{table}"]
        assert state["status"] == "applied" and state["windows_applied"] == [1, 2], report
        assert state["snapshot_chunks_loaded"] == 1, report

    comparisons = [compare_table(server, Path(), db, table, reader=case.reader) for table in ("orders", "notes")]
    assert all(c.equal and c.mysql_rows for c in comparisons), describe_differences(comparisons)
    # The frontier is in the table's own commit, wherever the catalog keeps the table.
    orders = case.reader(db, "orders")
    assert orders is not None
    assert orders.summary["cdc.pipeline"] == db and orders.summary["cdc.window-id"] == "2", orders.summary
    assert str(orders.metadata_file).startswith(case.location), orders.metadata_file

    again = apply("apply-2")  # the same windows again: the commits say they are in
    assert {t["status"] for t in again["tables"].values()} == {"up_to_date"}, again

    conf = {**apply_spark_conf("lake", None, case.catalog_conf), **case.verify_conf, **SPARK_CONF}
    request = {"pipeline": db, "tables": [f"{db}.*"], "staging_uri": str(tmp_path / "staging")}
    jars = [str(jar) for jar in case.jars]
    verify_marker = case.catalog_conf["uri"].encode()
    with watching(ProcessWatch(marker=verify_marker, needles=(needle,), script=b"pyspark-shell")) as verify_watch:
        verified = run_verify_child(server.cdc, request, SparkSettings("local[1]", conf, jars))
    assert not verified.differing and not verified.unverified, verified.describe()
    assert sorted(t.table for t in verified.tables) == [f"{db}.notes", f"{db}.orders"], verified.describe()

    for name, watch in (("apply", apply_watch), ("verify", verify_watch)):
        assert watch.argvs, f"no {name} process was seen: the watch checked nothing"
        assert not [argv for argv in watch.argvs if any(case.secret in part for part in argv)], watch.argvs
        assert watch.environ_hits == set(), (name, watch.environ_hits)
    assert files_holding(tmp_path / "staging", needle) == []


def test_the_apply_into_a_jdbc_catalog_on_mysql_is_exact_and_keeps_its_password_private(
    mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, catalog_db, user = "jdbc_catalog_src", "jdbc_catalog_meta", "jdbc_catalog"
    password = f"Jd8c-{secrets.token_hex(8)}/+="
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {catalog_db}",
        f"CREATE DATABASE {catalog_db}",
        f"DROP USER IF EXISTS '{user}'@'%'",
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT ALL ON {catalog_db}.* TO '{user}'@'%'",
    )
    make_source(mysql_server, db, tmp_path)
    host, port = mysql_server.admin.host, mysql_server.admin.port
    catalog_conf = {
        "type": "jdbc",
        "uri": f"jdbc:mysql://{host}:{port}/{catalog_db}?useSSL=true&trustServerCertificate=true",
        "jdbc.user": user,
        "jdbc.password": password,
        # Spark asks a catalog for views too when it looks a table up: Iceberg's JDBC catalog answers
        # only with its schema version V1 (V0, the default, raises UnsupportedOperationException).
        "jdbc.schema-version": "V1",
        "warehouse": str(tmp_path / "warehouse"),
    }
    case = CatalogCase(
        catalog_conf,
        [*iceberg_jars(), jdbc_driver()],
        sql_catalog_reader(f"mysql+pymysql://{user}:{quote_plus(password)}@{host}:{port}/{catalog_db}"),
        password,
        location=str(tmp_path / "warehouse"),
    )
    apply_and_check(case, mysql_server, db, tmp_path, monkeypatch)


def test_the_apply_into_a_rest_catalog_is_exact_and_keeps_its_credential_private(
    mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, table_bucket = "rest_catalog_src", "tables"
    make_source(mysql_server, db, tmp_path)
    with LocalObjectStore(tmp_path / "object-store", bucket="lake", table_bucket=table_bucket) as store:
        monkeypatch.setenv("AIRFLOW_CONN_REST_STORE", aws_connection_json(store))
        catalog_conf = {
            "type": "rest",
            "uri": store.iceberg_rest_url,
            "warehouse": f"s3://{table_bucket}/",
            "credential": f"{store.access_key}:{store.secret_key}",
            # Iceberg's S3FileIO needs the AWS SDK v2, which no package reachable here carries.
            "io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        }
        settings = ObjectStoreSettings(store.access_key, store.secret_key, store.endpoint_url, store.region)
        case = CatalogCase(
            catalog_conf,
            [*iceberg_jars(), *s3_jars()],
            rest_catalog_reader(store, f"s3://{table_bucket}/"),
            store.secret_key,
            location=f"s3://{table_bucket}/",
            object_store_conn_id="rest_store",
            verify_conf=settings.spark_properties(),
        )
        apply_and_check(case, mysql_server, db, tmp_path, monkeypatch)
