"""A verification in a child process of its own: its Spark driver (a JVM) never lives in the Airflow
worker's process. No Airflow import.

The parent writes one JSON document to the child's stdin (the source connection, password included:
never argv or the environment; the request; the Spark settings) and gives it its environment without
Airflow's connections, variables and settings, as the spark-submit jobs get it
(:func:`~airflow_provider_mysql_cdc.core.spark_properties.job_environment`); the child runs
:func:`~airflow_provider_mysql_cdc.verify.engine.verify_targets` and prints the report (or the named
error it stopped with) as the last line of its stdout. Its log goes to stderr, which the parent passes on.

A **warm verify service** (:class:`WarmVerifyClient`, the operator's ``warm_spark_idle_timeout``) is
the same child kept running: started with ``--socket`` and ``--idle-seconds``, it reads the Spark
settings on its stdin, creates its session once and then serves verifications on a private Unix
socket (the warm apply service's folder, lifecycle and stop, :mod:`~airflow_provider_mysql_cdc.apply.warm_service`).
Each request carries the source connection and the request; the password travels only over that
socket (``0600``, in a ``0700`` folder). Services are keyed by their Spark settings (a digest of them)
and the Python they run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc import errors
from airflow_provider_mysql_cdc.apply.warm_service import WarmServiceClient
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig, SslMode
from airflow_provider_mysql_cdc.core.spark_properties import job_environment
from airflow_provider_mysql_cdc.verify.report import VerifyReport

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    return _report_from(answer, f"the verification process exited with code {done.returncode} without a report")


def _report_from(answer: Mapping[str, Any], without_report: str) -> VerifyReport:
    """The report of an answer; a named error of the verification is raised again here, with its class
    and message; ``without_report``: what went wrong when the answer holds neither."""
    if "report" in answer:
        return VerifyReport.from_xcom(answer["report"])
    if answer.get("error_class"):
        raise errors.error_named(str(answer["error_class"]), str(answer.get("message")), errors.TerminalCdcError)
    raise errors.TerminalCdcError(f"{without_report}; see its log above")


class WarmVerifyClient(WarmServiceClient):
    """Runs verifications in the warm verify service of ``spark`` (started when none listens), this
    interpreter running this module; ``idle_seconds``: how long the service waits for the next one."""

    kind = "warm verify service"

    def __init__(
        self, folder: Path, spark: SparkSettings, idle_seconds: float, environment: Mapping[str, str] | None = None
    ) -> None:
        settings = json.dumps(dataclasses.asdict(spark), sort_keys=True).encode()
        super().__init__(
            folder,
            [sys.executable, "-m", MODULE],
            job_environment(os.environ if environment is None else environment),
            idle_seconds,
            startup=settings,
        )

    def verify(
        self, source: MySqlConnectionConfig, request: Mapping[str, Any], say: Callable[[str], None]
    ) -> VerifyReport:
        """Verify ``request`` (as for :func:`run_verify_child`) in the service; its report, or its named error."""
        message = {"verify": {"source": _source_json(source), "request": dict(request)}}
        answer = self.exchange(message, say, f"the verification of pipeline {request.get('pipeline')!r}")
        return _report_from(answer, f"the {self.kind} answered without a report (its log: {self.paths.log})")


def _session(spark_settings: Mapping[str, Any], pipeline: str) -> SparkSession:
    from airflow_provider_mysql_cdc.verify.session import verify_session

    return verify_session(
        f"mysql-cdc-verify-{pipeline}",
        spark_settings["master"],
        spark_settings["conf"],
        spark_settings["jars"],
        spark_settings["packages"],
    )


def _verify(spark: SparkSession, document: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to one verification (``document``: the source and the request): the report, or the
    named error it stopped with."""
    from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets

    try:
        settings = document["request"]
        request = VerifyRequest(**{**settings, "tables": tuple(settings["tables"])})
        report = verify_targets(spark, _source_from_json(document["source"]), request)
    except errors.MySqlCdcError as exc:
        return {"error_class": type(exc).__name__, "message": str(exc)}
    return {"report": report.as_xcom()}


def _serve_verify(spark: SparkSession, request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> bool:
    """One request of the warm verify service; False when the service must stop afterwards (a failure
    that is not a named error may have broken the session)."""
    from airflow_provider_mysql_cdc.apply.warm_service import package_log_to

    with package_log_to(send):
        if not isinstance(request.get("verify"), dict):
            send({"error_class": "ConfigurationError", "message": "the request names no verification"})
            return True
        try:
            send(_verify(spark, request["verify"]))
        except Exception as exc:
            logging.getLogger(__name__).exception("the verification failed; the service stops")
            send(
                {
                    "error_class": "TransientCdcError",
                    "message": f"the verification failed in the warm service ({type(exc).__name__}); the service "
                    "stopped and a retry starts a new one",
                }
            )
            return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """The child: read the document from stdin, verify, print the answer. With ``--socket`` and
    ``--idle-seconds``: the warm verify service (the Spark settings on stdin)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(prog=MODULE)
    parser.add_argument("--socket", type=Path)
    parser.add_argument("--idle-seconds", type=float)
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if (options.socket is None) != (options.idle_seconds is None):
        parser.error("--socket and --idle-seconds go together")
    document = json.loads(sys.stdin.read())
    if options.socket is not None:
        from airflow_provider_mysql_cdc.apply.warm_service import serve

        spark = _session(document, "warm")
        return serve(options.socket, options.idle_seconds, spark, _serve_verify)
    try:
        spark = _session(document["spark"], str(document["request"].get("pipeline")))
    except errors.MySqlCdcError as exc:
        print(json.dumps({"error_class": type(exc).__name__, "message": str(exc)}))
        return 1
    try:
        answer = _verify(spark, document)
    finally:
        spark.stop()
    print(json.dumps(answer))
    return 0 if "report" in answer else 1


if __name__ == "__main__":
    sys.exit(main())
