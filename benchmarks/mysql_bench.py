"""Helpers shared by the benchmarks: their own local MySQL instance, or an existing server.

The benchmarks run as scripts (``.venv/bin/python benchmarks/<name>.py``), so this folder is
``sys.path[0]`` and they import this module as ``mysql_bench``. It finds the :mod:`testbed.mysql`
package by putting the repository root on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # the testbed package (a script's sys.path[0] is its own folder)

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig  # noqa: E402
from testbed.mysql import (  # noqa: E402
    CDC_PASSWORD_ENV,
    CDC_USER,
    DEFAULT_CDC_PASSWORD,
    LocalMySQL,
    LocalMySQLError,
    install,
    parse_server_url,
)

#: How long one phase (a child interpreter) may run.
PHASE_TIMEOUT_SECONDS = 3_600


class BenchmarkError(RuntimeError):
    """The benchmark could not run or its results are wrong."""


@dataclass(frozen=True)
class Server:
    """The server under test: an admin account for loading (changing, dumping), the ``cdc`` account for reading."""

    admin: MySqlConnectionConfig
    cdc: MySqlConnectionConfig
    description: str


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def execute(config: MySqlConnectionConfig, *statements: str) -> list[tuple[Any, ...]]:
    """Run statements on one autocommit connection; return the last one's rows."""
    rows: list[tuple[Any, ...]] = []
    connection = pymysql.connect(**config.pymysql_kwargs(), autocommit=True)
    try:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
                rows = list(cursor.fetchall())
    finally:
        connection.close()
    return rows


def peak_rss_mb() -> float:
    """This process's peak RSS in megabytes (``getrusage(RUSAGE_SELF).ru_maxrss``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def cpu_seconds() -> float:
    """CPU seconds (user + system) this process has used (``getrusage(RUSAGE_SELF)``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def local_server(name: str, settings: Mapping[str, str], port: int | None = None) -> Iterator[Server]:
    """A fresh local MySQL instance ``name`` with server options ``settings`` on ``port`` (default: a free
    one), destroyed (stopped by PID, data deleted) on exit."""
    install()
    LocalMySQL(name, port=free_port()).destroy()  # leftovers of an interrupted run
    instance = LocalMySQL(name, port=port or free_port(), settings=settings)
    try:
        instance.start()
        admin = MySqlConnectionConfig(instance.host, instance.port, "root", instance.root_password)
        cdc = MySqlConnectionConfig(instance.host, instance.port, CDC_USER, instance.cdc_password)
        yield Server(admin, cdc, f"local instance {name!r} on {instance.host}:{instance.port}")
    finally:
        instance.destroy()


@contextlib.contextmanager
def existing_server(url: str, database: str) -> Iterator[Server]:
    """The server named by ``mysql://USER:PASSWORD@HOST:PORT`` (an admin account), with a ``cdc`` account
    that may read ``database``."""
    parts = parse_server_url(url)
    if parts.scheme != "mysql":
        raise BenchmarkError(f"--mysql-url must look like mysql://root:PASSWORD@HOST:PORT, not {parts.scheme}://...")
    admin = MySqlConnectionConfig(host=parts.host, port=parts.port, user=parts.user, password=parts.password)
    cdc_password = os.environ.get(CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD)
    execute(
        admin,
        f"CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY '{cdc_password}'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%'",
        f"GRANT SELECT, LOCK TABLES ON {database}.* TO 'cdc'@'%'",
    )
    cdc = MySqlConnectionConfig(admin.host, admin.port, CDC_USER, cdc_password)
    yield Server(admin, cdc, f"existing server {admin.address}")


def cdc_config(spec: Mapping[str, Any]) -> MySqlConnectionConfig:
    """The ``cdc`` account a phase's parameters name (``host``, ``port``, ``user``, ``password``)."""
    return MySqlConnectionConfig(spec["host"], int(spec["port"]), spec["user"], spec["password"])


def run_phase_child(phase: str, phases: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> int:
    """Child side of ``--phase``: parameters from stdin, one JSON result line (with its peak RSS) on stdout."""
    spec = json.loads(sys.stdin.read())
    if phase not in phases:
        raise BenchmarkError(f"unknown phase {phase!r}")
    result = phases[phase](spec)
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result), flush=True)
    return 0


def run_phase(script: str, phase: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one phase of ``script`` in a fresh interpreter (so its peak RSS is its own); its stderr passes
    through."""
    completed = subprocess.run(
        [sys.executable, script, "--phase", phase],
        input=json.dumps(spec),
        stdout=subprocess.PIPE,
        text=True,
        timeout=PHASE_TIMEOUT_SECONDS,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise BenchmarkError(f"phase {phase!r} failed with exit code {completed.returncode}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def print_summary(server_context: contextlib.AbstractContextManager[Server], benchmark: Callable[[Server], str]) -> int:
    """Run ``benchmark`` on the server; print its summary line last (exit 0), or why it failed (exit 1)."""
    try:
        with server_context as server:
            summary = benchmark(server)
    except (BenchmarkError, LocalMySQLError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    sys.stderr.flush()
    print(summary, flush=True)
    return 0
