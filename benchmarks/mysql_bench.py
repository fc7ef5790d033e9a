"""Helpers shared by the benchmarks: their own local MySQL instance, or an existing server.

The benchmarks run as scripts (``.venv/bin/python benchmarks/<name>.py``), so this folder is
``sys.path[0]`` and they import this module as ``mysql_bench``. It finds the :mod:`testbed.mysql`
package by putting the repository root on ``sys.path``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
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
    charsets_dir,
    install,
    parse_server_url,
    tool_argv,
    tool_env,
)
from testbed.mysql.process import read_pid  # noqa: E402

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


def require_positive(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Exit through ``parser.error`` naming the first option of ``names`` (attribute names) below 1."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive")


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


# -- MySQL's own clients and the server's CPU ------------------------------------------------------


def server_cpu_seconds(admin: MySqlConnectionConfig) -> float | None:
    """CPU seconds (user + system) the server process has used so far, from ``/proc``; None when the
    server is not a process of this machine (``--mysql-url``) or ``/proc`` cannot be read."""
    pid = read_pid(Path(str(execute(admin, "SELECT @@pid_file")[0][0])))
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def cpu_delta_text(before: float | None, after: float | None) -> str:
    """``after - before`` as text, or ``n/a`` when either is unknown."""
    return "n/a" if before is None or after is None else f"{after - before:.2f}"


def client_argv(tool: str, admin: MySqlConnectionConfig) -> list[str]:
    """A bundled client (through the prefix's loader) connecting as ``admin`` over TCP, reading no
    option file (:func:`run_client` swaps ``--no-defaults`` for a file holding the password)."""
    return [
        *tool_argv(tool),
        "--no-defaults",  # must come first: no ~/.my.cnf
        f"--character-sets-dir={charsets_dir()}",
        "--protocol=TCP",
        f"--host={admin.host}",
        f"--port={admin.port}",
        f"--user={admin.user}",
    ]


def run_client(name: str, argv: list[str], admin: MySqlConnectionConfig, stdout: Any) -> dict[str, Any]:
    """Time a client process (the whole process) of :func:`client_argv` as ``admin``: seconds, CPU
    seconds and peak RSS (from ``wait4``) and its stderr; a failure raises :class:`BenchmarkError`.
    The password reaches the client in an option file only this user can read (``--defaults-file``,
    in place of ``--no-defaults``): never on its command line or in its environment."""
    if "--no-defaults" not in argv:
        raise BenchmarkError(f"{name}: the command line does not come from client_argv()")
    with tempfile.TemporaryDirectory(prefix="bench-client-") as private, tempfile.TemporaryFile() as errors:
        options = Path(private) / "client.cnf"
        options.touch(mode=0o600)
        options.write_text(f"[client]\npassword={admin.password}\n")
        argv = [f"--defaults-file={options}" if arg == "--no-defaults" else arg for arg in argv]
        started = time.perf_counter()
        process = subprocess.Popen(argv, env=tool_env(), stdin=subprocess.DEVNULL, stdout=stdout, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        stderr = errors.read().decode(errors="replace").strip()
    if returncode != 0:
        raise BenchmarkError(f"{name} failed with exit code {returncode}: {stderr}")
    return {
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024.0,
        "stderr": stderr,
    }


def client_phase(
    label: str,
    phase: Callable[[MySqlConnectionConfig, Path], dict[str, Any]],
    admin: MySqlConnectionConfig,
    result_file: Path,
    rows: int,
) -> float:
    """Run a client's phase (``phase(admin, result_file)``: its rows, the sum of their ``id`` values and
    :func:`run_client`'s figures) with mysqld's CPU measured around it, check that it read every row
    once (ids 1 to ``rows``), print its line and delete its file; its rows per second."""
    before = server_cpu_seconds(admin)
    result = phase(admin, result_file)
    server_cpu = cpu_delta_text(before, server_cpu_seconds(admin))
    result_file.unlink()
    if result["rows"] != rows or result["id_sum"] != rows * (rows + 1) // 2:
        raise BenchmarkError(f"{label} read {result['rows']} rows (id sum {result['id_sum']}), expected {rows}")
    rate = rows / float(result["seconds"])
    print(
        f"{label} rows={rows} seconds={result['seconds']:.2f} rows_per_s={rate:.0f} "
        + (f"dump_mb={result['dump_mb']:.1f} " if "dump_mb" in result else "")
        + f"peak_rss_mb={result['peak_rss_mb']:.1f} client_cpu_s={result['cpu_seconds']:.2f} server_cpu_s={server_cpu}"
        + (f" stderr={result['stderr']!r}" if result["stderr"] else ""),
        flush=True,
    )
    return rate
