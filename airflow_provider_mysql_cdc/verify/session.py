"""The SparkSession a verification runs in, when it is not given one (no Airflow import)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_mysql_cdc.core.spark_properties import (
    secret_properties_file,
    spark_defaults_path,
    split_secret_properties,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def verify_session(
    app_name: str,
    master: str,
    conf: Mapping[str, str],
    jars: Sequence[str] = (),
    packages: Sequence[str] = (),
) -> SparkSession:
    """A SparkSession whose driver runs in this process (``master``: ``local[*]``, ``spark://...``,
    ``yarn``), with ``conf`` (the catalog's properties) and the Iceberg runtime from ``jars`` (paths)
    or ``packages`` (Maven coordinates), which only reach a JVM this call starts.

    pyspark starts that JVM with every builder property as ``--conf`` in its argv, so the secret ones (a
    catalog's password or token) reach it in a private properties file instead, named in
    ``PYSPARK_SUBMIT_ARGS`` while the JVM starts, then deleted."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    starts_jvm = SparkContext._active_spark_context is None
    public, secrets = split_secret_properties(conf) if starts_jvm else (dict(conf), {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in public.items():
        builder = builder.config(key, value)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    if not secrets:
        return builder.getOrCreate()
    given = os.environ.get("PYSPARK_SUBMIT_ARGS")
    with secret_properties_file(secrets, spark_defaults_path(os.environ)) as path:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(path)} {given or 'pyspark-shell'}"
        try:
            return builder.getOrCreate()
        finally:
            if given is None:
                os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
            else:
                os.environ["PYSPARK_SUBMIT_ARGS"] = given
