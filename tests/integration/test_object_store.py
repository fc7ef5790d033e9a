"""Staging and the Iceberg warehouse on a real S3-compatible object store (SeaweedFS, ``testbed.object_store``).

The example DAG runs under real Airflow (``dag.test()``) with ``staging_uri`` and ``warehouse`` on
``s3://`` and an Airflow ``aws`` connection holding the store's keys and endpoint, as a user would
give them for AWS: the snapshot and capture write Parquet and manifests with pyarrow's S3 filesystem,
the apply is a real spark-submit that reads staging through Hadoop's S3A (``scripts/s3_jars.py``) and
MERGEs into a Hadoop-catalog warehouse on S3. pyiceberg then reads the tables from S3 and they equal
MySQL. While the apply runs, the argv and environment of every process of the job are read from
``/proc``: the secret key is in none of them (it reaches Spark in a ``0600`` properties file, deleted
after the run), nor in the task logs.
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from testbed.object_store import LocalObjectStore, ObjectStoreAddress
from tests.exactness.comparison import compare_table, describe_differences
from tests.exactness.iceberg_reader import IcebergContents, read_iceberg_metadata
from tests.integration.test_airflow_dag import REPO_ROOT, _forget_earlier_runs, _states, _xcom
from tests.mysql_servers import MySqlTestServer
from tests.process_watch import ProcessWatch
from tests.spark_session import iceberg_jars, load_script_module

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.airflow]

OBJECT_STORE_CONN_ID = "object_store"


def s3_jars() -> list[Path]:
    """Hadoop's S3A jars (``scripts/s3_jars.py``, cached in ``<repo>/.cache/jars/s3``)."""
    module = load_script_module("s3_jars")
    try:
        return list(module.ensure_s3_jars())
    except module.JarAssemblyError as exc:
        pytest.fail(f"could not assemble the S3A jars: {exc}")


@pytest.fixture(scope="module")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStoreAddress]:
    with LocalObjectStore(tmp_path_factory.mktemp("object-store"), bucket="lake") as address:
        yield address


def aws_connection_json(address: ObjectStoreAddress) -> str:
    """The store as an Airflow ``aws`` connection: the fields a user gives for AWS."""
    return json.dumps(
        {
            "conn_type": "aws",
            "login": address.access_key,
            "password": address.secret_key,
            "extra": {"endpoint_url": address.endpoint_url, "region_name": address.region},
        }
    )


def pyiceberg_properties(address: ObjectStoreAddress) -> dict[str, str]:
    return {
        "s3.endpoint": address.endpoint_url,
        "s3.access-key-id": address.access_key,
        "s3.secret-access-key": address.secret_key,
        "s3.region": address.region,
    }


def s3_table_reader(address: ObjectStoreAddress, warehouse: str) -> Any:
    """``reader(database, table)`` for :func:`compare_table`: the newest metadata file of the table in the
    Hadoop warehouse on S3, read by pyiceberg with the store's keys."""
    filesystem = address.pyarrow_filesystem()

    def read(database: str, table: str) -> IcebergContents | None:
        metadata = f"{warehouse.removeprefix('s3://')}/{database}/{table}/metadata"
        if filesystem.get_file_info(metadata).type != pafs.FileType.Directory:
            return None
        versions = [
            int(info.base_name[1 : -len(".metadata.json")])
            for info in filesystem.get_file_info(pafs.FileSelector(metadata))
            if info.base_name.startswith("v") and info.base_name.endswith(".metadata.json")
        ]
        return read_iceberg_metadata(f"s3://{metadata}/v{max(versions)}.metadata.json", pyiceberg_properties(address))

    return read


def _example_dag_environment(
    monkeypatch: pytest.MonkeyPatch, mysql_server: MySqlTestServer, object_store: ObjectStoreAddress
) -> None:
    """The connections (MySQL, Spark local, the object store) and jars of the example DAG on S3."""
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_CDC_DEFAULT", mysql_server.airflow_conn_json())
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv(f"AIRFLOW_CONN_{OBJECT_STORE_CONN_ID.upper()}", aws_connection_json(object_store))
    monkeypatch.setenv("MYSQL_CDC_OBJECT_STORE_CONN_ID", OBJECT_STORE_CONN_ID)
    monkeypatch.setenv("MYSQL_CDC_ICEBERG_JARS", ",".join(str(jar) for jar in [*iceberg_jars(), *s3_jars()]))


def _names(filesystem: pafs.FileSystem, folder: str) -> list[str]:
    return [info.base_name for info in filesystem.get_file_info(pafs.FileSelector(folder))]


def test_the_store_refuses_a_wrong_secret_key(object_store: ObjectStoreAddress) -> None:
    wrong = pafs.S3FileSystem(
        access_key=object_store.access_key,
        secret_key=object_store.secret_key + "x",
        endpoint_override=object_store.endpoint_url,
        region=object_store.region,
    )
    with pytest.raises(OSError):
        wrong.get_file_info(pafs.FileSelector(object_store.bucket))
    assert object_store.pyarrow_filesystem().get_file_info(object_store.bucket).type == pafs.FileType.Directory


def _private_temporary_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A temporary folder of the test's own for this process and its children (the apply's secret
    properties file goes there): the system's is shared with the other worker's tests, which write such
    files too."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _properties_file_folders(argvs: set[tuple[str, ...]]) -> set[Path]:
    """The folders of the ``--properties-file`` given to the spark-submit processes seen."""
    return {Path(argv[argv.index("--properties-file") + 1]).parent for argv in argvs if "--properties-file" in argv}


def test_example_dag_on_s3_equals_mysql_and_keeps_the_secret_key_out_of_the_job(
    airflow_home: Path,
    mysql_server: MySqlTestServer,
    object_store: ObjectStoreAddress,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    database, prefix = "s3cdc", f"run-{secrets.token_hex(4)}"
    staging_uri, warehouse = f"s3://lake/{prefix}/staging", f"s3://lake/{prefix}/warehouse"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {database}",
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2))",
        f"INSERT INTO {database}.t VALUES (1, 'a', 1.50), (2, 'b', NULL), (3, 'c', -2.25)",
    )
    _example_dag_environment(monkeypatch, mysql_server, object_store)
    dag = DagBag(dag_folder=str(REPO_ROOT / "dags")).get_dag("mysql_cdc_example")
    assert dag is not None
    conf = {"tables": [f"{database}.*"], "pipeline": database, "staging_uri": staging_uri, "warehouse": warehouse}
    conf["cutoff"] = "catch_up"
    private_tmp = _private_temporary_folder(monkeypatch, tmp_path)

    watch = ProcessWatch(marker=prefix.encode(), needles=(object_store.secret_key.encode(),), script=b"spark_job.py")
    thread = threading.Thread(target=watch.poll, daemon=True)
    thread.start()
    try:
        _forget_earlier_runs()
        first = dag.test(run_conf=conf)  # snapshot of the three rows, an empty window, the apply
        assert first.state == "success", _states(first)
        mysql_server.execute(
            f"INSERT INTO {database}.t VALUES (4, 'd', 4.00)",
            f"UPDATE {database}.t SET v = 'B', d = 9.99 WHERE id = 2",
            f"DELETE FROM {database}.t WHERE id = 1",
        )
        second = dag.test(run_conf=conf)  # a window of three changes
        assert second.state == "success", _states(second)
        captured, applied = _xcom(second, "capture"), _xcom(second, "apply")["tables"][f"{database}.t"]
        third = dag.test(run_conf=conf)  # no change: the table's state is read from its metadata on S3
        assert third.state == "success", _states(third)
        idle = _xcom(third, "apply")["tables"][f"{database}.t"]
    finally:
        watch.stop.set()
        thread.join(timeout=10)
        _forget_earlier_runs()
    console = capfd.readouterr()

    assert captured["transactions"] == 3, captured
    assert applied["status"] == "applied" and applied["windows_applied"] == [2], applied
    # Staging is on S3 (written by pyarrow on the worker), and so is the warehouse (written by Spark's S3A).
    filesystem = object_store.pyarrow_filesystem()
    staged = filesystem.get_file_info(pafs.FileSelector(f"lake/{prefix}/staging/{database}/windows", recursive=True))
    assert any(info.base_name == "_manifest.json" for info in staged)
    comparison = compare_table(mysql_server, Path(), database, "t", reader=s3_table_reader(object_store, warehouse))
    assert comparison.equal, describe_differences([comparison])
    assert comparison.iceberg_rows == 3
    # The run without a change: reported from the Hadoop catalog's metadata files on S3, no job spec written.
    assert idle["status"] == "up_to_date" and idle["windows_applied"] == [], idle
    staging_folder = f"lake/{prefix}/staging/{database}"
    assert [len(_names(filesystem, f"{staging_folder}/{kind}")) for kind in ("apply-specs", "apply-reports")] == [2, 3]

    # The apply ran as spark-submit and its processes were seen; the secret key is in no argv or environment.
    assert _properties_file_folders(watch.argvs) == {private_tmp}, watch.argvs
    assert "PYSPARK_PYTHON" in watch.environ_names
    assert not [argv for argv in watch.argvs if any(object_store.secret_key in part for part in argv)]
    assert watch.environ_hits == set()
    assert not [name for name in watch.environ_names if name.startswith("AIRFLOW_CONN_")]
    # Nor in the task logs (spark-submit's output included); the properties file is gone.
    assert "apply table=s3cdc.t status=applied" in console.out + console.err
    assert object_store.secret_key not in console.out + console.err
    assert list(private_tmp.glob("mysql-cdc-secrets-*")) == []
    print(f"spark-submit processes seen: {len(watch.argvs)}", file=sys.stderr)
