"""The SparkSession a verification runs in, when it is not given one (no Airflow import)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

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
    or ``packages`` (Maven coordinates), which only reach a JVM this call starts."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    return builder.getOrCreate()
