"""A warm Spark session for the apply: one long-lived spark-submit driver that applies run after run.

Every apply job pays for spark-submit, a JVM and a Spark session before it reads a row (about 5 to 15
seconds here), which is most of a small window's apply. With a warm service the first apply starts
this module as a spark-submit application, with exactly the command line the job would get (master,
jars, catalog properties, memory, the private properties file with the object store's keys); the
driver creates its session once and then serves apply requests on a Unix socket in a private folder
(``0700``; the socket ``0600``). Each request names an :class:`~.contract.ApplySpec` URI; the service
applies it with the job's own code (:func:`~.spark_job.apply_in_session`), streams the job's log lines
back and answers the job's exit code. Later applies with the same command line find the socket and
skip the start. After its first request the service rehearses the apply's MERGE once on a scratch table
(:mod:`.rehearsal`), so that the next window does not pay for a cold JVM's first MERGE.

Stopped cleanly, by itself: after ``idle_seconds`` without a request it stops its session, removes
its socket and pid file and exits; after an error that is not one of this package's named errors (a
Spark or JVM failure, which may leave the session unusable) it answers that request and exits, so the
next apply starts a fresh one. ``stop`` (a request, or ``python -m
airflow_provider_mysql_cdc.apply.warm_service stop <folder>``) stops every service of a folder now.

What a warm service does not change: the job's plan, commits and report are the same code as a
spark-submit's; an apply killed half-way (the service's process dies) is re-run like a failed job,
and re-planning from the tables' own commits makes it exactly once. Services are keyed by the whole
command line and the environment's Python, so a different catalog, jar set, memory or object store
gets its own service.

The client side (:class:`WarmApplyClient`) imports no Spark; neither side imports Airflow.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.errors import ConfigurationError, MySqlCdcError, TransientCdcError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("airflow_provider_mysql_cdc.apply")

#: The spark-submit application of the service (this file).
SERVICE_APPLICATION = str(Path(__file__).resolve())
#: How long a client waits for a new service to listen (its JVM and Spark session start).
DEFAULT_START_TIMEOUT = 300.0
_PROPERTIES_FLAG = "--properties-file"
_POLL_SECONDS = 0.2
#: Longest path of a Unix socket (Linux's ``sun_path`` holds 108 bytes with the closing NUL).
_SOCKET_PATH_LIMIT = 107


@dataclass(frozen=True)
class ServicePaths:
    """Where one service (``key``) of ``folder`` keeps its socket, pid file, start lock and log."""

    folder: Path
    key: str

    @property
    def socket(self) -> Path:
        return self.folder / f"{self.key}.sock"

    @property
    def pid(self) -> Path:
        return self.folder / f"{self.key}.pid"

    @property
    def lock(self) -> Path:
        return self.folder / f"{self.key}.lock"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.key}.log"


def private_folder(folder: Path) -> Path:
    """``folder``, created ``0700`` when missing; refused when others may write or read it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigurationError(
            f"the warm Spark folder {folder} must belong to this user and be private (mode 0700): its socket "
            "runs applies with the catalog's and object store's credentials"
        )
    return folder


def service_key(command: Sequence[str], environment: Mapping[str, str], startup: bytes = b"") -> str:
    """A name for the service of ``command`` (spark-submit's argv without the application's arguments):
    the properties file's path is replaced by a digest of its content (its keys; the file itself is
    temporary), and the Python the driver runs counts too, as does what the service reads on its stdin
    when it starts (``startup``, by digest)."""
    parts = list(command)
    for index, part in enumerate(parts[:-1]):
        if part == _PROPERTIES_FLAG:
            parts[index + 1] = "sha256:" + hashlib.sha256(Path(parts[index + 1]).read_bytes()).hexdigest()
    parts += [environment.get("PYSPARK_PYTHON", ""), environment.get("PYSPARK_DRIVER_PYTHON", "")]
    if startup:
        parts.append("startup:" + hashlib.sha256(startup).hexdigest())
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


# -- the client (the Airflow worker's side) -----------------------------------------------------------


def _connect(path: Path) -> socket.socket | None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
    except OSError:
        connection.close()
        return None
    return connection


def _lines(connection: socket.socket) -> Iterator[dict[str, Any]]:
    """The service's answer, one JSON document a line, until it closes the connection."""
    with connection.makefile("r", encoding="utf-8") as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


class WarmServiceClient:
    """Sends requests to the warm service of ``command`` (started when none listens).

    ``command`` is the service's argv without ``--socket`` and ``--idle-seconds`` (which the client adds),
    ``environment`` its environment; ``idle_seconds`` how long the service waits for the next request
    before it stops; ``startup`` what a starting service reads on its stdin (settings that must stay off
    its argv and environment), which also tells services apart."""

    #: What the service is, in messages.
    kind = "warm Spark service"

    def __init__(
        self,
        folder: Path,
        command: Sequence[str],
        environment: Mapping[str, str],
        idle_seconds: float,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        startup: bytes = b"",
    ) -> None:
        self.paths = ServicePaths(private_folder(folder), service_key(command, environment, startup))
        if len(os.fsencode(self.paths.socket)) > _SOCKET_PATH_LIMIT:
            raise ConfigurationError(
                f"the warm Spark folder {folder} is too deep for a Unix socket ({self.paths.socket} is longer than "
                f"{_SOCKET_PATH_LIMIT} bytes); give warm_spark_folder a shorter path"
            )
        self.command = list(command)
        self.environment = dict(environment)
        self.idle_seconds = idle_seconds
        self.start_timeout = start_timeout
        self.startup = startup

    def exchange(self, message: Mapping[str, Any], say: Callable[[str], None], what: str) -> dict[str, Any]:
        """Send one request; ``say`` gets the log lines the service streams back. Returns its answer (the
        first message that is not a log line); raises :class:`TransientCdcError` when the service went
        away before it answered (``what``: the request, for that message)."""
        connection = self._connection(say)
        with connection:
            connection.sendall((json.dumps(message) + "\n").encode())
            for answer in _lines(connection):
                if "log" in answer:
                    say(str(answer["log"]))
                else:
                    return answer
        raise TransientCdcError(
            f"the {self.kind} {self.paths.socket} ended before it answered for {what} (its log: "
            f"{self.paths.log}); the retry runs it again, in a new service"
        )

    def _connection(self, say: Callable[[str], None]) -> socket.socket:
        connection = _connect(self.paths.socket)
        if connection is not None:
            say(f"{self.kind} {self.paths.key}: reused")
            return connection
        with self.paths.lock.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one start at a time; a waiting client then finds it
            connection = _connect(self.paths.socket)
            if connection is not None:
                return connection
            return self._start(say)

    def _start(self, say: Callable[[str], None]) -> socket.socket:
        self.paths.socket.unlink(missing_ok=True)  # a service that died without cleaning up
        argv = [*self.command, "--socket", str(self.paths.socket), "--idle-seconds", str(self.idle_seconds)]
        started = time.monotonic()
        with self.paths.log.open("wb") as output:  # the current service's log only
            os.chmod(self.paths.log, 0o600)
            process = subprocess.Popen(
                argv,
                env=self.environment,
                stdin=subprocess.PIPE if self.startup else subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the task's process group
            )
        if process.stdin is not None:
            with process.stdin, contextlib.suppress(BrokenPipeError):
                process.stdin.write(self.startup)
        say(f"{self.kind} {self.paths.key}: starting (pid {process.pid}, log {self.paths.log})")
        while time.monotonic() - started < self.start_timeout:
            connection = _connect(self.paths.socket)
            if connection is not None:
                say(f"{self.kind} {self.paths.key}: listening after {time.monotonic() - started:.1f} s")
                return connection
            if process.poll() is not None:
                raise TransientCdcError(
                    f"the {self.kind} exited with code {process.returncode} before it listened; its log: "
                    f"{self.paths.log}"
                )
            time.sleep(_POLL_SECONDS)
        process.kill()
        process.wait()
        raise TransientCdcError(
            f"the {self.kind} did not listen within {self.start_timeout:.0f} s and was stopped; its log: "
            f"{self.paths.log}"
        )


class WarmApplyClient(WarmServiceClient):
    """Runs apply specs in the warm service of ``command``: spark-submit's argv up to and including the
    application (:data:`SERVICE_APPLICATION`)."""

    def run(self, spec_uri: str, say: Callable[[str], None]) -> int:
        """Apply the spec at ``spec_uri``; ``say`` gets the job's log lines. Returns the job's exit code;
        raises :class:`TransientCdcError` when the service went away before it answered."""
        answer = self.exchange({"spec": spec_uri}, say, spec_uri)
        return int(answer.get("exit_code", 1))


def stop_services(folder: Path, timeout: float = 60.0) -> list[int]:
    """Ask every service of ``folder`` to stop, wait for each to exit; returns their pids."""
    stopped: list[int] = []
    for pid_path in sorted(folder.glob("*.pid")):
        paths = ServicePaths(folder, pid_path.stem)
        try:
            pid = int(pid_path.read_text().strip())
        except (OSError, ValueError):
            continue
        connection = _connect(paths.socket)
        if connection is not None:
            with connection:
                connection.sendall(b'{"stop": true}\n')
                for _ in _lines(connection):
                    pass
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(_POLL_SECONDS)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stopped.append(pid)
    return stopped


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a service this process started and that has exited (a zombie until
    reaped, which ``kill(pid, 0)`` still finds) is reaped and counts as gone."""
    with contextlib.suppress(ChildProcessError):  # not a child of this process: kill() tells
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- the service (the Spark driver's side) ------------------------------------------------------------


class _ConnectionLog(logging.Handler):
    """Sends the package's log records of one request to its client."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        super().__init__(logging.INFO)
        self.send = send
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError):
            self.send({"log": self.format(record)})


@contextlib.contextmanager
def package_log_to(send: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """While inside, the package's log records go to a request's client too."""
    handler = _ConnectionLog(send)
    package = logging.getLogger("airflow_provider_mysql_cdc")
    package.addHandler(handler)
    try:
        yield
    finally:
        package.removeHandler(handler)


def _serve_request(spark: SparkSession, request: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> bool:
    """Run one apply request; returns False when the service must stop afterwards."""
    from airflow_provider_mysql_cdc.apply.spark_job import apply_in_session, read_submitted_spec

    with package_log_to(send):
        try:
            config = read_submitted_spec(str(request["spec"]))
        except (KeyError, MySqlCdcError) as exc:
            log.error("bad request: %s", exc)
            send({"exit_code": 2})
            return True
        spark.sparkContext.setJobGroup(
            f"mysql-cdc-apply-{config.pipeline}", f"windows {config.first_window}..{config.last_window}"
        )
        try:
            code = apply_in_session(spark, config, lambda line: send({"log": line}))
        except Exception:
            log.exception("the apply failed in the warm session; the service stops (the next apply starts a new one)")
            send({"exit_code": 1})
            return False
        send({"exit_code": code})
        return True


def _unlink_own(socket_path: Path, bound: int) -> None:
    """Remove the socket file if it is still the one this service bound (a newer service may have taken
    the name after a client found this one unreachable)."""
    with contextlib.suppress(OSError):
        if socket_path.stat().st_ino == bound:
            socket_path.unlink()


def _requests(listener: socket.socket, socket_path: Path, bound: int, idle_seconds: float) -> Iterator[socket.socket]:
    """Connections, one at a time, until ``idle_seconds`` pass without one. Then the socket's path is
    removed first (a new client starts a new service) and the connections already queued are served."""
    listener.settimeout(idle_seconds)
    while True:
        try:
            yield listener.accept()[0]
        except TimeoutError:
            break
    log.info("no request for %.0f s: stopping", idle_seconds)
    _unlink_own(socket_path, bound)
    listener.setblocking(False)
    while True:
        try:
            connection = listener.accept()[0]
        except BlockingIOError:
            return
        connection.setblocking(True)
        yield connection


def _rehearse(spark: SparkSession, warehouse: Path) -> None:
    """Rehearse the apply's MERGE (:mod:`.rehearsal`) on a local master; a failure is logged, the service
    goes on (a session it broke fails the next request, which stops the service)."""
    from airflow_provider_mysql_cdc.apply.rehearsal import rehearse_merge

    if not str(spark.sparkContext.master).startswith("local"):
        log.info("no rehearsal of the apply's MERGE: the scratch table needs a local master")
        return
    try:
        rehearse_merge(spark, warehouse)
    except Exception:
        log.warning("the rehearsal of the apply's MERGE failed; the service goes on", exc_info=True)


def serve(
    socket_path: Path,
    idle_seconds: float,
    spark: SparkSession,
    handle: Callable[[SparkSession, dict[str, Any], Callable[[dict[str, Any]], None]], bool] = _serve_request,
    rehearse: Callable[[SparkSession, Path], None] | None = _rehearse,
) -> int:
    """The service's loop: ``handle`` serves one request at a time (it returns False when the service must
    stop: an error that may have broken the session) until a stop request, or until ``idle_seconds``
    pass without a request. After the first request served, ``rehearse`` runs once (with a scratch folder
    of the service's private folder), while the service waits for the next. The session is stopped at the
    end."""
    paths = ServicePaths(socket_path.parent, socket_path.name.removesuffix(".sock"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o077)
    try:
        listener.bind(str(socket_path))
    finally:
        os.umask(previous)
    bound = socket_path.stat().st_ino
    listener.listen(64)
    own_pid = f"{os.getpid()}\n"
    paths.pid.write_text(own_pid)
    log.info("warm service %s listening (idle timeout %.0f s)", paths.key, idle_seconds)
    try:
        for connection in _requests(listener, socket_path, bound, idle_seconds):
            served = False
            with connection, connection.makefile("rw", encoding="utf-8") as stream:
                connection.settimeout(None)

                def send(message: dict[str, Any], stream: Any = stream) -> None:
                    stream.write(json.dumps(message) + "\n")
                    stream.flush()

                line = stream.readline()
                try:
                    request = json.loads(line) if line.strip() else None
                except ValueError:
                    request = None
                if not isinstance(request, dict):
                    send({"exit_code": 2, "error_class": "ConfigurationError", "message": "not a JSON request"})
                elif request.get("stop"):
                    send({"stopping": True})
                    return 0
                elif not handle(spark, request, send):
                    return 0
                else:
                    served = True
            if served and rehearse is not None:  # the client has its answer and is gone
                rehearse(spark, paths.folder / f"{paths.key}.rehearsal")
                rehearse = None
        return 0
    finally:
        listener.close()
        # Only this service's own files: a newer service may have taken the same names meanwhile.
        _unlink_own(socket_path, bound)
        with contextlib.suppress(OSError):
            if paths.pid.read_text() == own_pid:
                paths.pid.unlink()
        spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit warm_service.py --socket PATH --idle-seconds N`` (the service), or
    ``python -m ...warm_service stop FOLDER`` (stop every service of a folder)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if arguments[:1] == ["stop"]:
        parser = argparse.ArgumentParser(prog="warm_service stop")
        parser.add_argument("folder", type=Path)
        folder = parser.parse_args(arguments[1:]).folder
        print(f"stopped: {stop_services(folder)}")
        return 0
    parser = argparse.ArgumentParser(prog="warm_service.py", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--socket", required=True, type=Path)
    parser.add_argument("--idle-seconds", required=True, type=float)
    options = parser.parse_args(arguments)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("mysql-cdc-apply-warm").getOrCreate()
    return serve(options.socket, options.idle_seconds, spark)


if __name__ == "__main__":
    sys.exit(main())
