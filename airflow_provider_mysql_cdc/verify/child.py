"""A verification in a child process of its own: its Spark driver (a JVM) never lives in the Airflow
worker's process. No Airflow import.

The parent writes one JSON document to the child's stdin (the source connection, password included:
never argv or the environment; the request; the Spark settings) and gives it its environment without
Airflow's connections, variables and settings, as the spark-submit jobs get it
(:func:`~airflow_provider_mysql_cdc.core.spark_properties.job_environment`); the child runs
:func:`~airflow_provider_mysql_cdc.verify.engine.verify_targets` and prints the report (or the named
error it stopped with) as the last line of its stdout. Its log goes to stderr, which the parent passes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_mysql_cdc import errors
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig, SslMode
from airflow_provider_mysql_cdc.core.spark_properties import job_environment
from airflow_provider_mysql_cdc.verify.report import VerifyReport

MODULE = "airflow_provider_mysql_cdc.verify.child"


@dataclasses.dataclass(frozen=True)
class SparkSettings:
    """The child's SparkSession: master, properties and the Iceberg runtime (jar paths or packages)."""

    master: str
    conf: Mapping[str, str]
    jars: Sequence[str] = ()
    packages: Sequence[str] = ()


def _source_json(source: MySqlConnectionConfig) -> dict[str, Any]:
    return {**dataclasses.asdict(source), "ssl_mode": source.ssl_mode.value}


def _source_from_json(data: Mapping[str, Any]) -> MySqlConnectionConfig:
    return MySqlConnectionConfig(**{**data, "ssl_mode": SslMode(data["ssl_mode"])})


def run_verify_child(
    source: MySqlConnectionConfig, request: Mapping[str, Any], spark: SparkSettings, timeout: float | None = None
) -> VerifyReport:
    """Run the verification (``request``: the keyword arguments of
    :class:`~airflow_provider_mysql_cdc.verify.engine.VerifyRequest`) in a child process; its report.
    A named error of the child is raised again here, with its class and message."""
    document = {"source": _source_json(source), "request": dict(request), "spark": dataclasses.asdict(spark)}
    done = subprocess.run(
        [sys.executable, "-m", MODULE],
        input=json.dumps(document),
        env=job_environment(os.environ),
        stdout=subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    if "report" in answer:
        return VerifyReport.from_xcom(answer["report"])
    if answer.get("error_class"):
        raise errors.error_named(str(answer["error_class"]), str(answer.get("message")), errors.TerminalCdcError)
    raise errors.TerminalCdcError(
        f"the verification process exited with code {done.returncode} without a report; see its log above"
    )


def main() -> int:
    """The child: read the document from stdin, verify, print the answer."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    document = json.loads(sys.stdin.read())
    from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets
    from airflow_provider_mysql_cdc.verify.session import verify_session

    settings = document["request"]
    request = VerifyRequest(**{**settings, "tables": tuple(settings["tables"])})
    spark_settings = document["spark"]
    try:
        spark = verify_session(
            f"mysql-cdc-verify-{request.pipeline}",
            spark_settings["master"],
            spark_settings["conf"],
            spark_settings["jars"],
            spark_settings["packages"],
        )
        try:
            report = verify_targets(spark, _source_from_json(document["source"]), request)
        finally:
            spark.stop()
    except errors.MySqlCdcError as exc:
        print(json.dumps({"error_class": type(exc).__name__, "message": str(exc)}))
        return 1
    print(json.dumps({"report": report.as_xcom()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
