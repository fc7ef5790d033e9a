"""The apply into Iceberg's JDBC catalog, kept in a real MySQL database (the test server's), with a
password that never leaves the private properties file.

``SparkApplyOperator`` gets ``catalog_conf`` ``type=jdbc`` (``uri`` ``jdbc:mysql://...``, ``jdbc.user``,
``jdbc.password``, ``warehouse``) and the MariaDB Connector/J jar (``scripts/jdbc_jars.py``, from
Debian), and applies a snapshot and two windows by a real spark-submit (local master) through the Spark
provider's connection. pyiceberg's ``SqlCatalog`` reads the same catalog tables (SQLAlchemy and
PyMySQL, nothing of Spark or the provider) to find each table's current metadata, and the tables are
compared with MySQL value by value. The applied frontier is in the table's own commit (the ``cdc.*``
snapshot properties), so a second apply of the same windows finds every table up to date. The verify
reads the targets through the same catalog in its own Spark JVM. While the apply and the verify run,
``/proc`` is watched: the catalog password is in no argv or environment of their processes, and in no
file the runs leave in staging.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest

from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.operators.apply import SparkApplyOperator, apply_spark_conf
from airflow_provider_mysql_cdc.verify.child import SparkSettings, run_verify_child
from tests.conftest import SHORT_LIVED_JVM
from tests.exactness.comparison import compare_table, describe_differences
from tests.exactness.iceberg_reader import IcebergContents, read_iceberg_metadata
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer
from tests.process_watch import ProcessWatch, watching
from tests.spark_session import REPO_ROOT, iceberg_jars

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

SPARK_CONF = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
}


def jdbc_driver() -> Path:
    """MariaDB Connector/J (``scripts/jdbc_jars.py``, cached in ``<repo>/.cache/jars/jdbc``)."""
    spec = importlib.util.spec_from_file_location("jdbc_jars", REPO_ROOT / "scripts" / "jdbc_jars.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return Path(module.ensure_jdbc_driver())
    except module.JarAssemblyError as exc:
        pytest.fail(f"could not fetch the JDBC driver: {exc}")


def catalog_reader(uri: str) -> Any:
    """``reader(database, table)`` for :func:`compare_table`: pyiceberg's SQL catalog finds the table's
    current metadata file in the catalog database; None when the catalog has no such table."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError

    catalog = SqlCatalog("lake", uri=uri)

    def read(database: str, table: str) -> IcebergContents | None:
        try:
            location = catalog.load_table(f"{database}.{table}").metadata_location
        except NoSuchTableError:
            return None
        return read_iceberg_metadata(location)

    return read


def files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(path) for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_the_apply_into_a_jdbc_catalog_on_mysql_is_exact_and_keeps_its_password_private(
    mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, catalog_db, user = "jdbc_catalog_src", "jdbc_catalog_meta", "jdbc_catalog"
    password = f"Jd8c-{secrets.token_hex(8)}/+="
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {db}",
        f"DROP DATABASE IF EXISTS {catalog_db}",
        f"CREATE DATABASE {db}",
        f"CREATE DATABASE {catalog_db}",
        f"DROP USER IF EXISTS '{user}'@'%'",
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT ALL ON {catalog_db}.* TO '{user}'@'%'",
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
    pipeline = SnapshotPipeline(mysql_server, tmp_path, db, TableSelection.of(f"{db}.*"))
    pipeline.snapshot("run-1")
    mysql_server.execute(
        f"UPDATE {db}.orders SET amount = amount * 2, doc = JSON_SET(doc, '$.paid', true) WHERE id <= 20",
        f"DELETE FROM {db}.orders WHERE id BETWEEN 30 AND 35",
        f"UPDATE {db}.orders SET id = 1001 WHERE id = 1",
        f"INSERT INTO {db}.notes VALUES ('c', 'third')",
    )
    assert pipeline.capture("run-1").window_id == 1
    mysql_server.execute(
        f"INSERT INTO {db}.orders VALUES (500, 'new', NULL, NULL, NULL, NULL)",
        f"UPDATE {db}.notes SET body = 'changed' WHERE k = 'b'",
        f"DELETE FROM {db}.notes WHERE k = 'a'",
    )
    assert pipeline.capture("run-2").window_id == 2

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
    spark_bin = str(Path(sys.executable).parent)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("PATH", spark_bin + os.pathsep + os.environ.get("PATH", ""))
    jars = [*iceberg_jars(), jdbc_driver()]

    def apply(windows: str, run_id: str) -> dict[str, Any]:
        operator = SparkApplyOperator(
            task_id="apply",
            pipeline=db,
            staging_uri=str(tmp_path / "staging"),
            windows=windows,
            catalog_conf=catalog_conf,
            jars=",".join(str(jar) for jar in jars),
            asset_alias=None,
            mysql_cdc_conn_id=None,
            openlineage_inject_parent_job_info=False,
            conf={**SPARK_CONF, "spark.local.dir": str(tmp_path / "spark-local")},
        )
        return dict(operator.execute({"run_id": run_id}))

    needle = password.encode()
    marker = str(tmp_path / "staging").encode()
    with watching(ProcessWatch(marker=marker, needles=(needle,), script=b"spark_job.py")) as apply_watch:
        report = apply("1-2", "apply-1")
    for table, chunks in (("orders", 1), ("notes", 1)):
        state = report["tables"][f"{db}.{table}"]
        assert state["status"] == "applied" and state["windows_applied"] == [1, 2], report
        assert state["snapshot_chunks_loaded"] == chunks, report

    read = catalog_reader(f"mysql+pymysql://{user}:{quote_plus(password)}@{host}:{port}/{catalog_db}")
    comparisons = [compare_table(mysql_server, Path(), db, table, reader=read) for table in ("orders", "notes")]
    assert all(c.equal and c.mysql_rows for c in comparisons), describe_differences(comparisons)
    # The frontier is in the table's own commit, wherever the catalog keeps the table.
    orders = read(db, "orders")
    assert orders is not None
    assert orders.summary["cdc.pipeline"] == db and orders.summary["cdc.window-id"] == "2", orders.summary
    assert str(orders.metadata_file).startswith(str(tmp_path / "warehouse")), orders.metadata_file

    again = apply("1-2", "apply-2")  # the same windows again: the commits say they are in
    assert {t["status"] for t in again["tables"].values()} == {"up_to_date"}, again

    conf = {**apply_spark_conf("lake", None, catalog_conf), **SPARK_CONF}
    request = {"pipeline": db, "tables": [f"{db}.*"], "staging_uri": str(tmp_path / "staging")}
    verify_marker = str(tmp_path / "warehouse").encode()
    with watching(ProcessWatch(marker=verify_marker, needles=(needle,), script=b"pyspark-shell")) as verify_watch:
        verified = run_verify_child(
            mysql_server.cdc, request, SparkSettings("local[1]", conf, [str(jar) for jar in jars])
        )
    assert not verified.differing and not verified.unverified, verified.describe()
    assert sorted(t.table for t in verified.tables) == [f"{db}.notes", f"{db}.orders"], verified.describe()

    for name, watch in (("apply", apply_watch), ("verify", verify_watch)):
        assert watch.argvs, f"no {name} process was seen: the watch checked nothing"
        assert not [argv for argv in watch.argvs if any(password in part for part in argv)], watch.argvs
        assert watch.environ_hits == set(), (name, watch.environ_hits)
    assert files_holding(tmp_path / "staging", needle) == []
