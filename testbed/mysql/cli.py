"""Command line of the local MySQL test bed (``python -m testbed.mysql COMMAND``)::

    install [--force]                 download and unpack (idempotent; a stamp file makes reruns instant)
    start NAME [--port PORT] [--server-id N] [--set VAR=VALUE ...] [--timeout S]
    stop NAME [--timeout S]           SIGTERM the PID from the pid file, SIGKILL after the timeout
    stop-all                          stop every instance (and any stray mysqld run from the prefix)
    status                            list the instances
    destroy NAME                      stop, then delete the instance directory with its data
    env NAME                          print ``export MYSQL_CDC_...`` lines (never passwords)
    version                           print the bundled server version
    mysql NAME [ARGS ...]             run the bundled ``mysql`` client as root over the unix socket

``start NAME`` for an instance that exists and is given neither ``--port``, ``--server-id`` nor
``--set`` reuses the configuration it was last started with; otherwise the configuration is the
defaults plus the ``--set`` overrides (``--port`` is then required for a new instance, and
``--server-id`` defaults to the port). ``start`` on a running instance with the same configuration
prints its details and exits 0; with a different configuration it fails (stop it first).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence

from testbed.mysql.access import CDC_USER, ROOT_USER
from testbed.mysql.errors import LocalMySQLError, log
from testbed.mysql.fleet import list_instances, stop_all
from testbed.mysql.installer import install, is_installed, server_version, tool_env
from testbed.mysql.instance import LocalMySQL
from testbed.mysql.paths import instances_dir, prefix_dir


def _parse_set(values: Sequence[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LocalMySQLError(f"--set expects VAR=VALUE, got {item!r}")
        result[key.strip()] = value.strip()
    return result


def _load_existing(name: str) -> LocalMySQL:
    try:
        return LocalMySQL.load(name)
    except LocalMySQLError:
        raise LocalMySQLError(f"instance {name!r} does not exist yet: give --port") from None


def _cmd_install(args: argparse.Namespace) -> int:
    prefix = install(force=args.force)
    print(f"MySQL {server_version()} installed in {prefix}")
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    overrides = _parse_set(args.set or [])
    if args.port is None and args.server_id is None and not overrides:
        instance = _load_existing(args.name)
    else:
        port = args.port if args.port is not None else _load_existing(args.name).port
        instance = LocalMySQL(args.name, port, args.server_id, overrides)
    instance.start(timeout=args.timeout)
    print(instance.describe())
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    try:
        instance = LocalMySQL.load(args.name)
    except LocalMySQLError:
        log(f"instance {args.name!r} does not exist")
        return 0
    if not instance.stop(args.timeout):
        log(f"instance {args.name!r} is not running")
    return 0


def _cmd_stop_all(_args: argparse.Namespace) -> int:
    stopped = stop_all()
    log(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    return 0


def _cmd_status(_args: argparse.Namespace) -> int:
    if is_installed():
        print(f"MySQL {server_version()} installed in {prefix_dir()}")
    else:
        print(f"MySQL not installed (would go to {prefix_dir()})")
    instances = list_instances()
    if not instances:
        print("no instances")
        return 0
    print(f"{'NAME':<16} {'PORT':>5} {'SERVER_ID':>10}  {'STATE':<22} OVERRIDES")
    for instance in instances:
        pid = instance.running_pid()
        state = f"running (pid {pid})" if pid else "stopped"
        overrides = " ".join(f"{k}={v}" for k, v in instance.settings.items()) or "-"
        print(f"{instance.name:<16} {instance.port:>5} {instance.server_id:>10}  {state:<22} {overrides}")
    return 0


def _cmd_destroy(args: argparse.Namespace) -> int:
    try:
        instance = LocalMySQL.load(args.name)
    except LocalMySQLError:
        leftover = instances_dir() / args.name
        if not leftover.exists():
            log(f"instance {args.name!r} does not exist")
            return 0
        shutil.rmtree(leftover)
        return 0
    instance.destroy()
    return 0


def _cmd_env(args: argparse.Namespace) -> int:
    instance = LocalMySQL.load(args.name)
    values = {
        "MYSQL_CDC_HOST": instance.host,
        "MYSQL_CDC_PORT": str(instance.port),
        "MYSQL_CDC_SOCKET": str(instance.socket_path),
        "MYSQL_CDC_SERVER_ID": str(instance.server_id),
        "MYSQL_CDC_USER": CDC_USER,
        "MYSQL_CDC_ROOT_USER": ROOT_USER,
        "MYSQL_CDC_DATADIR": str(instance.datadir),
        "MYSQL_CDC_ERROR_LOG": str(instance.error_log_path),
    }
    for key, value in values.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def _cmd_version(_args: argparse.Namespace) -> int:
    print(server_version())
    return 0


def _cmd_mysql(args: argparse.Namespace) -> int:
    instance = LocalMySQL.load(args.name)
    extra = list(args.args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    return subprocess.call([*instance.mysql_client_argv(ROOT_USER), *extra], env=tool_env())


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "install": _cmd_install,
    "start": _cmd_start,
    "stop": _cmd_stop,
    "stop-all": _cmd_stop_all,
    "status": _cmd_status,
    "destroy": _cmd_destroy,
    "env": _cmd_env,
    "version": _cmd_version,
    "mysql": _cmd_mysql,
}


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(
        prog="python -m testbed.mysql",
        description="Docker-free local MySQL (Debian sid packages unpacked into <repo>/.cache/mysql).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    install_parser = sub.add_parser("install", help="download and unpack MySQL (idempotent)")
    install_parser.add_argument("--force", action="store_true", help="start over even if already installed")

    start = sub.add_parser("start", help="start an instance (initializing it if new)")
    start.add_argument("name")
    start.add_argument("--port", type=int, help="TCP port on 127.0.0.1 (required for a new instance)")
    start.add_argument("--server-id", type=int, help="server_id (default: the port)")
    start.add_argument(
        "--set", action="append", metavar="VAR=VALUE", help="override a server option (repeatable), e.g. gtid_mode=OFF"
    )
    start.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for connections (default 120)")

    stop = sub.add_parser("stop", help="stop an instance (SIGTERM, then SIGKILL)")
    stop.add_argument("name")
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds before SIGKILL (default 60)")

    sub.add_parser("stop-all", help="stop every instance")
    sub.add_parser("status", help="list instances")
    destroy = sub.add_parser("destroy", help="stop an instance and delete its data")
    destroy.add_argument("name")
    env = sub.add_parser("env", help="print shell export lines for an instance (no passwords)")
    env.add_argument("name")
    sub.add_parser("version", help="print the bundled MySQL server version")
    mysql = sub.add_parser("mysql", help="run the bundled mysql client as root over the unix socket")
    mysql.add_argument("name")
    mysql.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the mysql client")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except LocalMySQLError as exc:
        print(f"testbed.mysql: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
