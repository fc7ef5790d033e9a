"""One local SparkSession with the Iceberg runtime for the whole test run.

The Iceberg jars come from ``scripts/iceberg_jars.py`` (cached in ``<repo>/.cache/jars``) and reach
Spark through ``spark.jars`` before the JVM starts: jars given to a later SparkContext of the same
Python process, or to a running session, never reach the driver's class loader. That is why every
Spark test shares this one session (the ``spark`` fixture in ``tests/conftest.py``).

Two Iceberg catalogs share one Hadoop warehouse: ``lake`` and ``lake_other``. Each keeps its own
table cache, so the second plays a concurrent writer (another Spark application) in race tests.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parents[1]
CATALOG = "lake"
OTHER_CATALOG = "lake_other"


def load_script_module(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` by its path (the jar scripts put ``scripts`` on sys.path for their helpers)."""
    path = REPO_ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java")) or bool(java_home and (Path(java_home) / "bin" / "java").is_file())


def iceberg_jars() -> list[Path]:
    """The Iceberg runtime jars (assembled on first use)."""
    module = load_script_module("iceberg_jars")
    try:
        return list(module.ensure_jars(python=sys.executable))
    except module.JarAssemblyError as exc:
        pytest.fail(f"could not assemble the Iceberg jars: {exc}")


def iceberg_session(warehouse: Path, session_warehouse: Path) -> Iterator[SparkSession]:
    """A local SparkSession with Iceberg's extensions and the Hadoop catalogs on ``warehouse``."""
    from pyspark import SparkContext

    if not _java_available():
        pytest.fail("no java runtime found: Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    if SparkContext._active_spark_context is not None or SparkContext._gateway is not None:
        pytest.fail("a Spark JVM was started in this process without the Iceberg jars; use the `spark` fixture")
    jars = iceberg_jars()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = (
            SparkSession.builder.master("local[2]")
            .appName("airflow-provider-mysql-cdc-tests")
            .config("spark.jars", ",".join(str(jar) for jar in jars))
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            # A long-lived JVM: the default compilers and collector, not the short-lived-JVM options of the
            # spark-defaults.conf tests/conftest.py writes.
            .config("spark.driver.extraJavaOptions", "-XX:+UseG1GC")
            # With the default 1g its old generation was full (jstat) while the randomized differential ran
            # late in a make test run; that test alone fills 1.5g of 3g (in about 12.5 minutes either way).
            .config("spark.driver.memory", "3g")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.warehouse.dir", str(session_warehouse))
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        )
        for catalog in (CATALOG, OTHER_CATALOG):
            builder = (
                builder.config(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
                .config(f"spark.sql.catalog.{catalog}.type", "hadoop")
                .config(f"spark.sql.catalog.{catalog}.warehouse", str(warehouse))
                .config(f"spark.sql.catalog.{catalog}.cache.expiration-interval-ms", "-1")
            )
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
        # pytest has closed the captured streams.
        logging.getLogger("py4j").setLevel(logging.WARNING)
        try:
            yield session
        finally:
            session.stop()
