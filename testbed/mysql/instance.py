"""One local MySQL server (:class:`LocalMySQL`): its configuration, directory, process and clients.

Instances live in ``<cache>/instances/NAME/``: ``data/`` (the datadir; binlogs are
``data/binlog.NNNNNN``), ``error.log``, ``mysqld.out``, ``mysqld.pid``, ``spawn.pid``,
``mysqld.sock`` (moved to a short path under the temp directory when the instance path is too long
for a unix socket), ``instance.json`` (the last configuration started), the markers
``.initialized`` and ``.users-created``, and per-user client option files ``client-USER.cnf``. Each
instance listens on 127.0.0.1 only; several run side by side when they differ in name and port.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from testbed.mysql import access
from testbed.mysql.access import CDC_USER, HOST, ROOT_USER
from testbed.mysql.errors import LocalMySQLError, log
from testbed.mysql.installer import charsets_dir, install, is_installed, server_version, tool_argv, tool_env
from testbed.mysql.paths import file_lock, instances_dir, prefix_dir
from testbed.mysql.process import (
    mysql_greeting,
    port_in_use,
    process_alive,
    process_cmdline,
    read_pid,
    run,
    spawn_detached,
    tail,
    terminate,
)
from testbed.mysql.settings import DEFAULT_SETTINGS, initialize_options, normalize_settings, server_options

_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MAX_SOCKET_PATH: Final = 100  # sun_path holds 108 bytes; mysqld also creates "<socket>.lock"


def _timestamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class LocalMySQL:
    """One local MySQL server: immutable configuration plus operations on its directory/process.

    ``name`` picks the directory ``<cache>/instances/NAME``; ``port`` the TCP port on 127.0.0.1;
    ``server_id`` defaults to the port; ``settings`` override
    :data:`~testbed.mysql.settings.DEFAULT_SETTINGS` (names with ``-`` or ``_``; ``True``/``False``
    become ``ON``/``OFF``; a ``server_id`` entry wins over the argument). Equal configurations
    compare equal and hash alike.
    """

    __slots__ = ("_name", "_port", "_server_id", "_settings")

    _name: str
    _port: int
    _server_id: int
    _settings: Mapping[str, str]

    def __init__(
        self,
        name: str,
        port: int,
        server_id: int | None = None,
        settings: Mapping[str, str | int | bool] | None = None,
    ) -> None:
        if not _NAME_RE.match(name):
            raise LocalMySQLError(f"invalid instance name {name!r} (letters, digits, '.', '_', '-')")
        if not 1 <= port <= 65535:
            raise LocalMySQLError(f"invalid port {port}")
        overrides = normalize_settings(settings)
        if "server_id" in overrides:
            from_settings = int(overrides.pop("server_id"))
            if server_id is not None and server_id != from_settings:
                raise LocalMySQLError(f"server_id given twice ({server_id} and {from_settings})")
            server_id = from_settings
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_port", port)
        object.__setattr__(self, "_server_id", port if server_id is None else server_id)
        object.__setattr__(self, "_settings", MappingProxyType(dict(sorted(overrides.items()))))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LocalMySQL):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"LocalMySQL(name={self.name!r}, port={self.port}, server_id={self.server_id}, "
            f"settings={dict(self.settings)!r})"
        )

    def _key(self) -> tuple[str, int, int, tuple[tuple[str, str], ...]]:
        return (self._name, self._port, self._server_id, tuple(self._settings.items()))

    # ---- configuration ------------------------------------------------------------------

    @property
    def name(self) -> str:
        """Instance name (also its directory name)."""
        return self._name

    @property
    def port(self) -> int:
        """TCP port on :data:`~testbed.mysql.access.HOST`."""
        return self._port

    @property
    def server_id(self) -> int:
        """``server_id`` the server runs with."""
        return self._server_id

    @property
    def settings(self) -> Mapping[str, str]:
        """The overrides given (normalized names), without the defaults."""
        return self._settings

    @property
    def effective_settings(self) -> dict[str, str]:
        """:data:`~testbed.mysql.settings.DEFAULT_SETTINGS` with :attr:`settings` applied."""
        return {**DEFAULT_SETTINGS, **self._settings}

    @property
    def host(self) -> str:
        """Always ``127.0.0.1``: the server binds to nothing else."""
        return HOST

    @property
    def root_password(self) -> str:
        """Root password: ``$MYSQL_CDC_TEST_ROOT_PASSWORD`` or ``root-test-pw``."""
        return access.root_password()

    @property
    def cdc_password(self) -> str:
        """Password of the ``cdc`` user: ``$MYSQL_CDC_TEST_CDC_PASSWORD`` or ``cdc-test-pw``."""
        return access.cdc_password()

    # ---- paths --------------------------------------------------------------------------

    @property
    def instance_dir(self) -> Path:
        """``<cache>/instances/NAME``."""
        return instances_dir() / self._name

    @property
    def datadir(self) -> Path:
        """The server's datadir (binlogs are ``binlog.NNNNNN`` in here)."""
        return self.instance_dir / "data"

    @property
    def binlog_basename(self) -> Path:
        """Binlog base name used for ``log_bin=ON``."""
        return self.datadir / "binlog"

    @property
    def error_log_path(self) -> Path:
        """The server's error log."""
        return self.instance_dir / "error.log"

    @property
    def pid_file(self) -> Path:
        """The pid file mysqld writes."""
        return self.instance_dir / "mysqld.pid"

    @property
    def socket_path(self) -> Path:
        """Unix socket: in the instance directory, or a short temp path if that one is too long."""
        preferred = self.instance_dir / "mysqld.sock"
        if len(str(preferred)) <= _MAX_SOCKET_PATH:
            return preferred
        digest = hashlib.sha256(str(self.instance_dir).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"local-mysql-{digest}.sock"

    @property
    def _spawn_pid_file(self) -> Path:
        return self.instance_dir / "spawn.pid"

    @property
    def _config_file(self) -> Path:
        return self.instance_dir / "instance.json"

    @property
    def _initialized_marker(self) -> Path:
        return self.instance_dir / ".initialized"

    @property
    def _users_marker(self) -> Path:
        return self.instance_dir / ".users-created"

    def _runtime_files(self) -> tuple[Path, ...]:
        """Files a running mysqld owns; stale once it is gone."""
        return (self.pid_file, self._spawn_pid_file, self.socket_path, Path(f"{self.socket_path}.lock"))

    # ---- client helpers -----------------------------------------------------------------

    def connection_kwargs(self, user: str = CDC_USER) -> dict[str, Any]:
        """``pymysql.connect`` keyword arguments (TCP to 127.0.0.1) for ``root`` or ``cdc``."""
        return {"host": self.host, "port": self.port, "user": user, "password": access.password_for(user)}

    def client_options_file(self, user: str = ROOT_USER) -> Path:
        """Write (mode 0600) and return a ``[client]`` option file with this instance's socket,
        port, the user and its password, for ``--defaults-file=`` of the bundled clients."""
        self.instance_dir.mkdir(parents=True, exist_ok=True)
        path = self.instance_dir / f"client-{user}.cnf"
        return access.write_client_options(path, user, self.socket_path, self.port, charsets_dir())

    def mysql_client_argv(self, user: str = ROOT_USER, protocol: Literal["socket", "tcp"] = "socket") -> list[str]:
        """argv running the bundled ``mysql`` client against this instance (append e.g. ``-e SQL``).

        Run it with ``env=tool_env()``. ``protocol="tcp"`` connects to 127.0.0.1:PORT instead of the
        unix socket (TLS is then used, as the server offers it).
        """
        argv = [*tool_argv("mysql"), f"--defaults-file={self.client_options_file(user)}"]
        if protocol == "tcp":
            return [*argv, "--protocol=TCP", f"--host={self.host}", f"--port={self.port}"]
        return [*argv, "--protocol=SOCKET"]

    def mysqlbinlog_argv(self, user: str = ROOT_USER) -> list[str]:
        """argv running the bundled ``mysqlbinlog`` with this instance's connection options.

        Append e.g. ``-v data/binlog.000001`` to decode a file, or
        ``--read-from-remote-server binlog.000001`` to read it from the running server.
        """
        return [*tool_argv("mysqlbinlog"), f"--defaults-file={self.client_options_file(user)}"]

    # ---- state --------------------------------------------------------------------------

    def running_pid(self) -> int | None:
        """PID of this instance's live mysqld (from its pid file, else the spawn record), or None."""
        marker = f"--datadir={self.datadir}"
        for path in (self.pid_file, self._spawn_pid_file):
            pid = read_pid(path)
            if pid is not None and process_alive(pid) and marker in process_cmdline(pid):
                return pid
        return None

    def is_running(self) -> bool:
        """True when this instance's mysqld process is alive."""
        return self.running_pid() is not None

    @classmethod
    def load(cls, name: str) -> LocalMySQL:
        """The configuration the instance ``name`` was last started with."""
        path = instances_dir() / name / "instance.json"
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LocalMySQLError(f"no instance named {name!r} (nothing at {path})") from exc
        return cls(name, int(saved["port"]), int(saved["server_id"]), dict(saved.get("settings", {})))

    def describe(self) -> str:
        """Human-readable summary: state, addresses, paths and settings."""
        pid = self.running_pid()
        state = f"running (pid {pid})" if pid else "stopped"
        overrides = " ".join(f"{key}={value}" for key, value in self.settings.items()) or "(defaults)"
        version = server_version() if is_installed() else "(not installed)"
        rows = [
            ("instance", self.name),
            ("state", state),
            ("address", f"{self.host}:{self.port}"),
            ("server_id", str(self.server_id)),
            ("socket", str(self.socket_path)),
            ("datadir", str(self.datadir)),
            ("error log", str(self.error_log_path)),
            ("overrides", overrides),
            ("version", version),
        ]
        return "\n".join(f"{key:<10} {value}" for key, value in rows)

    # ---- lifecycle ----------------------------------------------------------------------

    def mysqld_argv(self) -> list[str]:
        """Full argv that starts this instance's mysqld (through the loader)."""
        return [
            *tool_argv("mysqld"),
            "--no-defaults",
            *self._base_options(prefix_dir()),
            f"--pid-file={self.pid_file}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            f"--bind-address={HOST}",
            f"--server-id={self.server_id}",
            *server_options(self.effective_settings, self.binlog_basename),
        ]

    def _base_options(self, prefix: Path) -> list[str]:
        options = [
            f"--basedir={prefix / 'usr'}",
            f"--datadir={self.datadir}",
            f"--plugin-dir={prefix / 'usr/lib/mysql/plugin'}",
            f"--lc-messages-dir={prefix / 'usr/share/mysql'}",
            f"--character-sets-dir={prefix / 'usr/share/mysql/charsets'}",
            f"--log-error={self.error_log_path}",
        ]
        if os.geteuid() == 0:
            options.append("--user=root")  # mysqld refuses to run as root without it
        return options

    def start(self, timeout: float = 120.0) -> LocalMySQL:
        """Install if needed, initialize the datadir if missing, start mysqld, wait until it
        accepts connections and create the accounts on first start. Returns ``self``.

        Idempotent: if this instance already runs with the same configuration, nothing happens;
        with a different configuration, :class:`LocalMySQLError` is raised.
        """
        with file_lock(f"instance-{self.name}"):
            install()
            if self.is_running():
                running = LocalMySQL.load(self.name)
                if running != self:
                    raise LocalMySQLError(
                        f"instance {self.name!r} is already running as {running!r}; stop it before starting it as "
                        f"{self!r}"
                    )
                log(f"instance {self.name!r} is already running")
                return self
            if port_in_use(HOST, self.port):
                raise LocalMySQLError(f"port {self.port} on {HOST} is already in use")
            self.instance_dir.mkdir(parents=True, exist_ok=True)
            for stale in self._runtime_files():
                stale.unlink(missing_ok=True)
            if not self._initialized_marker.exists():
                self._initialize()
            self._launch(timeout)
            if not self._users_marker.exists():
                self._create_users()
            return self

    def _initialize(self) -> None:
        started = time.monotonic()
        log(f"initializing the datadir of {self.name!r} (--initialize-insecure) ...")
        shutil.rmtree(self.datadir, ignore_errors=True)
        self._users_marker.unlink(missing_ok=True)
        argv = [
            *tool_argv("mysqld"),
            "--no-defaults",
            *self._base_options(prefix_dir()),
            *initialize_options(self.effective_settings),
            "--initialize-insecure",
        ]
        try:
            run(argv, env=tool_env(), timeout=600, what="mysqld --initialize-insecure")
        except LocalMySQLError as exc:
            raise LocalMySQLError(f"{exc}\n--- {self.error_log_path} ---\n{tail(self.error_log_path)}") from exc
        self._initialized_marker.write_text(_timestamp() + "\n", encoding="utf-8")
        log(f"initialized in {time.monotonic() - started:.1f} s")

    def _save_config(self) -> None:
        config = {"name": self.name, "port": self.port, "server_id": self.server_id, "settings": dict(self.settings)}
        self._config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    def _launch(self, timeout: float) -> None:
        started = time.monotonic()
        argv = self.mysqld_argv()
        log_offset = self.error_log_path.stat().st_size if self.error_log_path.exists() else 0
        log(f"starting {self.name!r} on {HOST}:{self.port} (server_id {self.server_id}) ...")
        process = spawn_detached(argv, self.instance_dir / "mysqld.out", tool_env())
        self._spawn_pid_file.write_text(f"{process.pid}\n", encoding="utf-8")
        self._save_config()
        deadline = started + timeout
        while True:
            if not process_alive(process.pid):
                raise LocalMySQLError(
                    f"mysqld for {self.name!r} exited during startup (exit code {process.poll()}); "
                    f"log since this start:\n{self._log_since(log_offset)}"
                )
            if mysql_greeting(socket.AF_UNIX, str(self.socket_path)) and mysql_greeting(
                socket.AF_INET, (HOST, self.port)
            ):
                break
            if time.monotonic() > deadline:
                terminate(process.pid, grace=20.0)
                raise LocalMySQLError(
                    f"mysqld for {self.name!r} did not accept connections within {timeout:.0f} s (stopped it); "
                    f"log since this start:\n{self._log_since(log_offset)}"
                )
            time.sleep(0.1)
        log(f"{self.name!r} accepts connections (pid {process.pid}, {time.monotonic() - started:.1f} s)")

    def _log_since(self, offset: int) -> str:
        try:
            with self.error_log_path.open("rb") as handle:
                handle.seek(offset)
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            text = ""
        lines = text.splitlines()[-30:]
        out = tail(self.instance_dir / "mysqld.out", 10)
        return "\n".join(lines) + f"\n--- mysqld.out ---\n{out}"

    def _create_users(self) -> None:
        log(f"creating the accounts on {self.name!r}")
        mysql = tool_argv("mysql")
        attempts = [
            # A fresh datadir: root@localhost has an empty password.
            [*mysql, "--no-defaults", "--protocol=SOCKET", f"--socket={self.socket_path}", "--user=root",
             "--skip-password"],
            # A retry after a partial bootstrap: the password is already set.
            [*mysql, f"--defaults-file={self.client_options_file(ROOT_USER)}", "--protocol=SOCKET"],
        ]  # fmt: skip
        sql = access.accounts_sql()
        errors: list[str] = []
        for argv in attempts:
            try:
                run([*argv, "--batch"], input_text=sql, env=tool_env(), timeout=120, what="creating accounts")
            except LocalMySQLError as exc:
                errors.append(str(exc))
                continue
            self._users_marker.write_text(_timestamp() + "\n", encoding="utf-8")
            return
        raise LocalMySQLError("could not create the accounts:\n" + "\n".join(errors))

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the server (SIGTERM; SIGKILL after ``timeout`` s). Returns whether it was running."""
        with file_lock(f"instance-{self.name}"):
            pid = self.running_pid()
            if pid is not None:
                log(f"stopping {self.name!r} (pid {pid}) ...")
                terminate(pid, grace=timeout)
            for stale in self._runtime_files():
                stale.unlink(missing_ok=True)
            if pid is not None:
                log(f"stopped {self.name!r}")
            return pid is not None

    def destroy(self) -> None:
        """Stop the server and delete its directory (datadir, logs, configuration)."""
        self.stop()
        with file_lock(f"instance-{self.name}"):
            shutil.rmtree(self.instance_dir, ignore_errors=True)
            self.socket_path.unlink(missing_ok=True)
        log(f"destroyed {self.name!r}")
