"""Spark properties that hold a secret, the private properties file that carries them, and the
environment a Spark process gets.

spark-submit takes properties as ``--conf key=value`` (in the argv of spark-submit and of the JVM it
starts: any user of the machine reads them in ``/proc``) or from a ``--properties-file``. A property
whose name says it holds a secret (:data:`SECRET_PROPERTY`: Spark's own default redaction pattern,
``spark.redaction.regex``, widened to credentials, access keys and authorization headers) goes into a
properties file readable by this user only and deleted after the job: a JDBC catalog's
``jdbc.password``, a REST catalog's ``token`` or ``credential``, S3A's ``fs.s3a.secret.key``. A Spark
process (spark-submit of a job, the verify's child) gets the worker's environment without Airflow's
connections, variables and settings (:func:`job_environment`).

Pure: no Airflow or Spark import.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

#: Prefixes of the worker's environment variables that a Spark process is not given: Airflow's
#: connections, variables and settings. They can hold passwords, keys and database URLs, and the job
#: needs none of them.
WITHHELD_PREFIXES = ("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AIRFLOW__")
#: Other variables a Spark process is not given (the MySQL client's password).
WITHHELD_NAMES = frozenset({"MYSQL_PWD"})

#: Names of properties that hold a secret (searched anywhere in the name, case-insensitively).
SECRET_PROPERTY = re.compile(r"(?i)secret|password|token|credential|access[.-]key|authorization")


def is_secret_property(name: str) -> bool:
    """Whether the property ``name`` holds a secret and must never be in argv."""
    return SECRET_PROPERTY.search(name) is not None


def split_secret_properties(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``conf`` as (the properties argv may carry, the secret ones)."""
    public = {key: value for key, value in conf.items() if not is_secret_property(key)}
    secret = {key: value for key, value in conf.items() if is_secret_property(key)}
    return public, secret


def _properties_line(key: str, value: str) -> str:
    """One line of a Java properties file (``key=value``, the value escaped as ``Properties.load`` reads it)."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"{key}={escaped}\n"


def spark_defaults_path(environ: Mapping[str, str]) -> Path | None:
    """The ``spark-defaults.conf`` spark-submit reads when given no properties file (``$SPARK_CONF_DIR``,
    else ``$SPARK_HOME/conf``), when there is one."""
    conf_dir = environ.get("SPARK_CONF_DIR") or (
        str(Path(environ["SPARK_HOME"]) / "conf") if environ.get("SPARK_HOME") else ""
    )
    path = Path(conf_dir) / "spark-defaults.conf" if conf_dir else None
    return path if path is not None and path.is_file() else None


@contextlib.contextmanager
def secret_properties_file(properties: Mapping[str, str], base: Path | None) -> Iterator[str]:
    """A properties file for ``spark-submit --properties-file`` holding ``properties`` (secrets) after the
    lines of ``base`` (the user's properties file, or the ``spark-defaults.conf`` that
    ``--properties-file`` replaces), readable by this user only and deleted afterwards. Its path may be
    in argv; its contents never are."""
    descriptor, path = tempfile.mkstemp(prefix="mysql-cdc-secrets-", suffix=".properties")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            if base is not None:
                out.write(base.read_text(encoding="utf-8").rstrip("\n") + "\n")
            for key, value in properties.items():
                out.write(_properties_line(key, value))
        yield path
    finally:
        Path(path).unlink(missing_ok=True)


def job_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment as a Spark process gets it: without Airflow's connections, variables and
    settings, and without ``MYSQL_PWD``."""
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith(WITHHELD_PREFIXES) and name not in WITHHELD_NAMES
    }
