"""A Spark standalone cluster on this machine: one master and its workers, from the installed pyspark.

The daemons are Spark's own launcher classes (``org.apache.spark.deploy.master.Master`` and
``...deploy.worker.Worker``) run by ``java`` on the class path of pyspark's ``jars/`` directory, with
``SPARK_HOME`` set to the pyspark package (the workers build their executors' class path from it).
Everything binds to 127.0.0.1 on free ports; logs, the workers' work directories (one directory per
application and executor, holding its ``stdout``/``stderr`` and fetched jars) and Spark's scratch
space go to the directory the caller gives. The cluster is ready when the master's JSON status page
(``http://127.0.0.1:<webui>/json/``) lists every worker ALIVE. Each daemon runs in its own process
group, so that stopping it (SIGTERM, then SIGKILL, by its PID) stops the executors it started.

Python API::

    from testbed.spark_cluster import running_cluster
    with running_cluster(tmp_path / "spark") as cluster:
        cluster.master_url          # spark://127.0.0.1:<port>
        cluster.status()            # the master's JSON: workers, activeapps, completedapps

Command line (``python -m testbed.spark_cluster start|stop|status [--dir DIR]``; the default
directory is ``<repo>/.cache/spark-cluster``, its ``cluster.json`` remembers the PIDs and ports).
Sized for a small shared machine: each worker offers 1 core and 1 GiB to executors, each daemon's
own heap is 256 MiB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
DEFAULT_DIR: Final = REPO_ROOT / ".cache" / "spark-cluster"
HOST: Final = "127.0.0.1"
MASTER_CLASS: Final = "org.apache.spark.deploy.master.Master"
WORKER_CLASS: Final = "org.apache.spark.deploy.worker.Worker"
#: Heap of each daemon (the master and a worker schedule; the executors get the worker's ``memory``).
DAEMON_HEAP: Final = "256m"
STATE_FILE: Final = "cluster.json"
POLL_SECONDS: Final = 0.25


class SparkClusterError(RuntimeError):
    """Raised when the local cluster cannot start, or is not there; the message says why (and holds
    the daemon's log tail)."""


def log(message: str) -> None:
    """One progress line on stderr (stdout stays free for command output)."""
    print(f"[testbed.spark_cluster] {message}", file=sys.stderr, flush=True)


def pyspark_home() -> Path:
    """The installed pyspark package: its ``jars/`` holds Spark, and it serves as ``SPARK_HOME``."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "jars").is_dir():
        raise SparkClusterError(f"{home} has no jars/ directory: install pyspark 3.5 (pip install pyspark)")
    return home


def java_binary() -> str:
    """``$JAVA_HOME/bin/java``, or ``java`` on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise SparkClusterError("no java found: Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Daemon:
    """One started daemon: its name (``master``, ``worker-1``...), PID and log file."""

    name: str
    pid: int
    log_file: str


@dataclass(frozen=True)
class StandaloneCluster:
    """A started cluster: where it is, its ports and its daemons (the master first)."""

    directory: str
    master_port: int
    webui_port: int
    workers: int
    daemons: tuple[Daemon, ...]

    @property
    def master_url(self) -> str:
        """The master URL spark-submit and the Spark connection take."""
        return f"spark://{HOST}:{self.master_port}"

    @property
    def status_url(self) -> str:
        """The master's JSON status page."""
        return f"http://{HOST}:{self.webui_port}/json/"

    def worker_dirs(self) -> list[Path]:
        """The workers' work directories (``<app id>/<executor id>/`` per executor they ran)."""
        return [Path(self.directory) / "work" / f"worker-{n}" for n in range(1, self.workers + 1)]

    def status(self) -> dict[str, Any]:
        """The master's JSON status (``workers``, ``activeapps``, ``completedapps``, ...)."""
        status = master_status(self.status_url)
        if status is None:
            raise SparkClusterError(f"the master does not answer at {self.status_url}")
        return status

    def alive_workers(self) -> int:
        """Workers the master lists as ALIVE (0 when it does not answer)."""
        status = master_status(self.status_url)
        return 0 if status is None else sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def save(self) -> Path:
        """Write ``cluster.json`` into the directory (what ``stop`` and ``status`` read)."""
        path = Path(self.directory) / STATE_FILE
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, directory: Path) -> StandaloneCluster:
        """The cluster recorded in ``directory/cluster.json``."""
        try:
            data = json.loads((directory / STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise SparkClusterError(f"no cluster recorded in {directory / STATE_FILE}") from exc
        daemons = tuple(Daemon(**daemon) for daemon in data.pop("daemons"))
        return cls(**data, daemons=daemons)


def master_status(url: str) -> dict[str, Any] | None:
    """The master's JSON status page, or None while it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return dict(json.load(response))
    except (OSError, ValueError, urllib.error.URLError):
        return None


def scala_version(home: Path) -> str:
    """The Scala version of the installed Spark (``2.12``), from its ``spark-core_<scala>-*.jar``."""
    for jar in sorted((home / "jars").glob("spark-core_*.jar")):
        return jar.name.removeprefix("spark-core_").split("-", 1)[0]
    raise SparkClusterError(f"no spark-core jar in {home / 'jars'}: the pyspark installation is incomplete")


def daemon_environment(home: Path, directory: Path) -> dict[str, str]:
    """The daemons' environment: this one, with ``SPARK_HOME`` the pyspark package, loopback only,
    scratch space under ``directory`` and this Python for the executors' Python workers.

    ``SPARK_SCALA_VERSION`` is what Spark's shell scripts would have set: without it a worker's
    launcher looks for a source build and every executor fails with "Cannot find any build directories"."""
    return {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_SCALA_VERSION": scala_version(home),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(directory / "local"),
        "SPARK_LOG_DIR": str(directory / "logs"),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }


def _daemon_argv(home: Path, main_class: str, arguments: Sequence[str]) -> list[str]:
    return [java_binary(), f"-Xmx{DAEMON_HEAP}", "-cp", str(home / "jars" / "*"), main_class, *arguments]


def _spawn(name: str, argv: Sequence[str], directory: Path, env: Mapping[str, str]) -> Daemon:
    log_file = directory / "logs" / f"{name}.log"
    with log_file.open("ab") as sink:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=directory,
            start_new_session=True,  # its own process group: its executors are stopped with it
        )
    _CHILDREN[process.pid] = process
    return Daemon(name, process.pid, str(log_file))


# Daemons started by this Python process, reaped once they exit (not left as zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def process_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (reaping it if this process started it)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] not in {"Z", "X", "x"}


def _is_spark_daemon(pid: int) -> bool:
    """True when ``pid`` runs a Spark master or worker (a recorded PID may have been reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(part.decode(errors="replace") in (MASTER_CLASS, WORKER_CLASS) for part in cmdline)


def _tail(path: str, lines: int = 30) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} does not exist)"


def stop_daemon(daemon: Daemon, grace: float = 20.0) -> None:
    """SIGTERM the daemon's process group (the daemon and the executors it started), wait up to ``grace``
    seconds for the daemon to exit, then SIGKILL whatever is left of the group."""
    if not process_alive(daemon.pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(daemon.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while process_alive(daemon.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(daemon.pid, signal.SIGKILL)  # the executors a stopped worker left, or a stuck daemon
    deadline = time.monotonic() + 10
    while process_alive(daemon.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    _CHILDREN.pop(daemon.pid, None)
    if process_alive(daemon.pid):
        raise SparkClusterError(f"{daemon.name} (pid {daemon.pid}) survived SIGKILL")


def stop_cluster(cluster: StandaloneCluster) -> None:
    """Stop the workers, then the master, each by its PID."""
    for daemon in reversed(cluster.daemons):
        stop_daemon(daemon)


def wait_until_ready(cluster: StandaloneCluster, timeout: float) -> None:
    """Wait until the master lists every worker ALIVE; a daemon that exits, or the deadline, fails the
    wait with the daemons' log tails."""
    deadline = time.monotonic() + timeout
    while cluster.alive_workers() < cluster.workers:
        dead = [daemon for daemon in cluster.daemons if not process_alive(daemon.pid)]
        expired = time.monotonic() >= deadline
        if dead or expired:
            what = f"{', '.join(d.name for d in dead)} exited" if dead else f"not ready after {timeout:.0f} s"
            tails = "\n".join(f"--- {d.name} ---\n{_tail(d.log_file)}" for d in cluster.daemons)
            raise SparkClusterError(f"Spark standalone cluster at {cluster.master_url}: {what}\n{tails}")
        time.sleep(POLL_SECONDS)


def start_cluster(
    directory: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 120.0
) -> StandaloneCluster:
    """Start a master and ``workers`` workers (each offering ``cores`` cores and ``memory`` to executors)
    with everything under ``directory``; return once the master lists every worker ALIVE. On failure
    every daemon started is stopped again."""
    home = pyspark_home()
    directory = directory.resolve()
    for sub in ("logs", "local", "work"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    env = daemon_environment(home, directory)
    master_port, webui_port = free_port(), free_port()
    master_args = ["--host", HOST, "--port", str(master_port), "--webui-port", str(webui_port)]
    daemons = [_spawn("master", _daemon_argv(home, MASTER_CLASS, master_args), directory, env)]
    for number in range(1, workers + 1):
        work_dir = directory / "work" / f"worker-{number}"
        work_dir.mkdir(parents=True, exist_ok=True)
        worker_args = [
            f"spark://{HOST}:{master_port}",
            *("--host", HOST, "--port", str(free_port()), "--webui-port", str(free_port())),
            *("--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir)),
        ]
        daemons.append(_spawn(f"worker-{number}", _daemon_argv(home, WORKER_CLASS, worker_args), directory, env))
    cluster = StandaloneCluster(str(directory), master_port, webui_port, workers, tuple(daemons))
    try:
        wait_until_ready(cluster, timeout)
    except BaseException:
        stop_cluster(cluster)
        raise
    log(f"master {cluster.master_url} (status {cluster.status_url}) with {workers} workers ALIVE")
    return cluster


@contextlib.contextmanager
def running_cluster(directory: Path, **settings: Any) -> Iterator[StandaloneCluster]:
    """A started cluster (see :func:`start_cluster`), stopped by PID when the context ends."""
    cluster = start_cluster(directory, **settings)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


# -- command line ----------------------------------------------------------------------------------------


def _recorded(directory: Path) -> StandaloneCluster | None:
    try:
        return StandaloneCluster.load(directory)
    except SparkClusterError:
        return None


def _running(cluster: StandaloneCluster) -> list[Daemon]:
    return [d for d in cluster.daemons if process_alive(d.pid) and _is_spark_daemon(d.pid)]


def _cmd_start(args: argparse.Namespace) -> int:
    recorded = _recorded(args.dir)
    if recorded is not None and _running(recorded):
        print(f"already running: {recorded.master_url} (status {recorded.status_url})")
        return 0
    cluster = start_cluster(args.dir, workers=args.workers, cores=args.cores, memory=args.memory, timeout=args.timeout)
    cluster.save()
    _CHILDREN.clear()  # detached: they outlive this command (own sessions), `stop` ends them
    print(f"{cluster.master_url} (status {cluster.status_url})")
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    recorded = _recorded(args.dir)
    if recorded is None:
        log(f"no cluster recorded in {args.dir}")
        return 0
    running = _running(recorded)
    for daemon in reversed(running):
        stop_daemon(daemon)
    log(f"stopped: {', '.join(d.name for d in running)}" if running else "nothing was running")
    (args.dir / STATE_FILE).unlink(missing_ok=True)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    recorded = _recorded(args.dir)
    if recorded is None or not _running(recorded):
        print(f"not running (directory {args.dir})")
        return 1
    status = master_status(recorded.status_url) or {}
    workers = [f"{w.get('host')}:{w.get('port')} {w.get('state')}" for w in status.get("workers", [])]
    print(f"{recorded.master_url} status {recorded.status_url}: {status.get('status', 'no answer')}")
    print(f"workers: {', '.join(workers) or '-'}")
    running, completed = len(status.get("activeapps", [])), len(status.get("completedapps", []))
    print(f"applications: {running} running, {completed} completed")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(
        prog="python -m testbed.spark_cluster", description="A local Spark standalone master and workers."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in (("start", "start a master and workers"), ("stop", "stop them by PID"), ("status", "show")):
        command = sub.add_parser(name, help=text)
        command.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"state, logs, work (default {DEFAULT_DIR})")
        if name == "start":
            command.add_argument("--workers", type=int, default=2)
            command.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
            command.add_argument("--memory", default="1g", help="memory each worker offers (default 1g)")
            command.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the workers")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    commands = {"start": _cmd_start, "stop": _cmd_stop, "status": _cmd_status}
    try:
        return commands[args.command](args)
    except SparkClusterError as exc:
        print(f"testbed.spark_cluster: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
