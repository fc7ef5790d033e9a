"""Processes and sockets: running commands, spawning mysqld, watching and stopping PIDs.

Linux only (``/proc``). A mysqld spawned here is remembered until it exits, so that an exited one
is reaped instead of lingering as a zombie that still looks alive.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from testbed.mysql.errors import LocalMySQLError, log

# mysqld processes started by this Python process, so that exited ones get reaped (not left as zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    what: str | None = None,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 600,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing output; raise :class:`LocalMySQLError` with its output on failure."""
    try:
        result = subprocess.run(
            list(argv),
            cwd=cwd,
            input=input_text,
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise LocalMySQLError(f"{argv[0]} not found: this needs a Debian-based system with apt and dpkg") from exc
    except subprocess.TimeoutExpired as exc:
        raise LocalMySQLError(f"{what or argv[0]} timed out after {timeout} s") from exc
    if result.returncode != 0:
        output = (result.stderr.strip() or result.stdout.strip())[-4000:]
        raise LocalMySQLError(f"{what or shlex.join(argv)} failed (exit {result.returncode}):\n{output}")
    return result


def spawn_detached(argv: Sequence[str], output: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start a long-running process in its own session (stdout and stderr appended to ``output``).
    It survives the caller's terminal and process group; :func:`process_alive` reaps it once it exits."""
    with output.open("ab") as sink:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,  # not killed with the caller's terminal / process group
            close_fds=True,
        )
    _CHILDREN[process.pid] = process
    return process


def process_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (reaping it if this process started it)."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] not in {"Z", "X", "x"}


def process_cmdline(pid: int) -> list[str]:
    """The argv of a live process (empty when it is gone or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", errors="replace") for part in raw.split(b"\0") if part]


def live_pids() -> list[int]:
    """Every PID in ``/proc`` except this process's own."""
    own = os.getpid()
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and int(entry.name) != own]


def read_pid(path: Path) -> int | None:
    """The PID written in a pid file, or None when it is missing or not a number."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def terminate(pid: int, grace: float) -> None:
    """SIGTERM ``pid``, wait up to ``grace`` seconds, then SIGKILL and wait."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if process_alive(pid):
        log(f"pid {pid} still alive after {grace:.0f} s: SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if process_alive(pid):
            raise LocalMySQLError(f"pid {pid} survived SIGKILL")


def mysql_greeting(family: socket.AddressFamily, address: str | tuple[str, int]) -> bool:
    """True when a MySQL server answers at ``address`` (handshake or error packet)."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(address)
            data = b""
            while len(data) < 5:
                chunk = sock.recv(5 - len(data))
                if not chunk:
                    return False
                data += chunk
            # 10: the protocol-10 handshake; 0xFF: an error packet (e.g. "Host is not allowed" before
            # the accounts exist), which also means mysqld is up and answering.
            return data[4] in (10, 0xFF)
    except OSError:
        return False


def port_in_use(host: str, port: int) -> bool:
    """True when ``host:port`` cannot be bound (something listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a text file (or a note that it is missing or empty)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"
