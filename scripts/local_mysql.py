#!/usr/bin/env python3
"""Docker-free local MySQL servers for development and tests.

Debian bookworm ships no MySQL. Debian sid ships ``mysql-server-core`` and ``mysql-client-core``
(MySQL 9.x), built against sid's libraries. This module downloads those two packages plus the
shared libraries they need from sid (``apt-get download`` with a private sources list, private
package lists and a private cache, so the system's apt setup is never touched), unpacks them with
``dpkg -x`` into ``<repo>/.cache/mysql/prefix/`` and runs every binary through that prefix's own
dynamic loader (``ld-linux-x86-64.so.2 --library-path <prefix libs> <binary> ...``). Nothing is
installed system-wide and no root-only path is written.

``mysqld`` and ``mysqlbinlog`` come from ``mysql-server-core``; ``mysql``, ``mysqladmin`` and
``mysqldump`` from ``mysql-client-core``. Which libraries are needed is found, not listed: starting
from the two MySQL packages, the ``DT_NEEDED`` entries of those five binaries (and, transitively,
of the libraries they load) are resolved inside the prefix; every soname still missing is looked
up among the library packages that the packages unpacked so far depend on, and only packages that
provide a missing soname are unpacked. With sid's 9.7.4 that closure is
``libc6 libgcc-s1 libstdc++6 libssl3t64 libicu78 libprotobuf-lite32t64 libzstd1 zlib1g liblz4-1
libxxhash0 libaio1t64 libnuma1 libgoogle-perftools4t64 libunwind8 liblzma5 libedit2 libbsd0 libmd0
libtinfo6`` (21 packages with the two MySQL ones; none of ``mysql-server-core``'s other
dependencies, such as libcurl, libfido2, libmecab, krb5 or perl, is linked by those binaries).

Command line (``python scripts/local_mysql.py COMMAND``)::

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
defaults below plus the ``--set`` overrides (``--port`` is then required for a new instance, and
``--server-id`` defaults to the port). ``start`` on a running instance with the same configuration
prints its details and exits 0; with a different configuration it fails (stop it first).

Python API::

    import local_mysql                       # with scripts/ on sys.path
    prefix = local_mysql.install()           # Path of the unpacked prefix
    server = local_mysql.LocalMySQL("primary", port=33061, settings={"binlog_format": "STATEMENT"})
    server.start()                           # installs, initializes, starts, creates the users
    pymysql.connect(**server.connection_kwargs("cdc"))
    subprocess.run([*server.mysql_client_argv(), "-e", "SELECT 1"], env=local_mysql.tool_env())
    server.stop()

Also: ``LocalMySQL.load(name)`` (the configuration an instance was last started with),
``.is_running()``, ``.running_pid()``, ``.destroy()``, ``.describe()``, ``.mysqlbinlog_argv()``,
``.mysqld_argv()``, ``.socket_path``, ``.error_log_path``, ``.datadir``, ``.root_password``,
``.cdc_password``, ``list_instances()``, ``stop_all()``, ``server_version()``, ``is_installed()``,
``tool_argv(tool)`` and ``tool_env()`` (the environment to run bundled binaries with).

Instances live in ``<repo>/.cache/mysql/instances/NAME/``: ``data/`` (the datadir; binlogs are
``data/binlog.NNNNNN``), ``error.log``, ``mysqld.pid``, ``mysqld.sock`` (moved to a short path
under the temp directory when the instance path is too long for a unix socket), ``instance.json``
(the last configuration started) and per-user client option files. Each instance listens on
127.0.0.1 only. Several instances run side by side when they differ in name and port.

Server defaults (each can be overridden with ``--set``/``settings``): ``gtid_mode=ON``,
``enforce_gtid_consistency=ON``, ``log_bin=ON`` (``OFF`` becomes ``--disable-log-bin``; any other
value is the binlog basename), ``binlog_format=ROW``, ``binlog_row_image=FULL``,
``binlog_row_metadata=FULL`` (without it, row events carry no column names),
``innodb_buffer_pool_size=128M``, ``performance_schema=OFF``, ``mysqlx=OFF``,
``secure_file_priv=NULL`` (the compiled-in default directory does not exist, so mysqld would refuse
to start; ``NULL`` disables file import/export) and ``skip_name_resolve=ON``. ``server_id`` may
also be given in the settings (e.g. ``server_id=0`` to test a misconfigured server). The paths,
port and bind address are managed here and cannot be overridden.

Accounts created on an instance's first start (over the unix socket, with ``sql_log_bin=0`` so that
they leave no binlog events and no GTIDs behind):

* ``root@localhost`` and ``root@127.0.0.1``, all privileges (including dynamic ones such as
  ``TRANSACTION_GTID_TAG``), password from ``MYSQL_CDC_TEST_ROOT_PASSWORD`` (default
  ``root-test-pw``);
* ``cdc@'%'`` with exactly ``REPLICATION SLAVE, REPLICATION CLIENT ON *.*`` and
  ``SELECT, LOCK TABLES ON *.*``, password from ``MYSQL_CDC_TEST_CDC_PASSWORD`` (default
  ``cdc-test-pw``). ``'%'`` is safe because the server only listens on 127.0.0.1 and a local
  socket, and it matches both. MySQL 9.7 still accepts ``REPLICATION SLAVE`` without a warning
  (there is no ``REPLICATION REPLICA`` privilege name).

The passwords are read from the environment when the instance is first started; changing the
variables later does not change the accounts.

Authentication findings (MySQL 9.7.4, PyMySQL 2.2.8): the server plugin ``mysql_native_password``
is gone (``mysql_native_password.so`` in the package is not loadable as a server plugin), so the
accounts use the default ``caching_sha2_password``. ``--initialize-insecure`` generates TLS
certificates, and PyMySQL 2.x negotiates TLS by default whenever the server offers it, so
``pymysql.connect(host="127.0.0.1", port=PORT, user=..., password=...)`` works with or without the
``cryptography`` package, even right after a restart (empty authentication cache). Only with
``ssl_disabled=True`` does the first login after a restart need the RSA key exchange, and that
needs ``cryptography`` (without it PyMySQL raises "'cryptography' package is required for
sha256_password or caching_sha2_password auth methods"); once a login has succeeded, the server's
cache lets later logins through without either.

Other MySQL 9.x notes: ``RESET MASTER`` is gone (use ``RESET BINARY LOGS AND GTIDS``), and the
server's ``@@mysqlx`` variable does not exist once the X plugin is off.

Environment variables: ``MYSQL_CDC_TEST_ROOT_PASSWORD``, ``MYSQL_CDC_TEST_CDC_PASSWORD`` (see
above), ``MYSQL_CDC_LOCAL_MYSQL_DIR`` (use another directory instead of ``<repo>/.cache/mysql``),
``MYSQL_CDC_DEBIAN_MIRROR`` (default: the Debian mirror the system's apt sources use) and
``MYSQL_CDC_DEBIAN_SUITE`` (default ``sid``).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple
from urllib.parse import unquote, urlsplit

__all__ = [
    "CDC_USER",
    "DEFAULT_SETTINGS",
    "HOST",
    "ROOT_USER",
    "LocalMySQL",
    "LocalMySQLError",
    "cache_dir",
    "install",
    "is_installed",
    "list_instances",
    "prefix_dir",
    "server_version",
    "stop_all",
    "tool_argv",
    "tool_env",
]

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
HOST: Final = "127.0.0.1"
ROOT_USER: Final = "root"
CDC_USER: Final = "cdc"
ROOT_PASSWORD_ENV: Final = "MYSQL_CDC_TEST_ROOT_PASSWORD"
CDC_PASSWORD_ENV: Final = "MYSQL_CDC_TEST_CDC_PASSWORD"
DEFAULT_ROOT_PASSWORD: Final = "root-test-pw"
DEFAULT_CDC_PASSWORD: Final = "cdc-test-pw"

#: Bump to make every existing install stale (``install`` then starts from scratch).
RECIPE: Final = 1
ROOT_PACKAGES: Final = ("mysql-server-core", "mysql-client-core")
#: Binaries whose full shared-library closure must resolve inside the prefix.
TARGET_BINARIES: Final = (
    "usr/sbin/mysqld",
    "usr/bin/mysql",
    "usr/bin/mysqladmin",
    "usr/bin/mysqlbinlog",
    "usr/bin/mysqldump",
)
DEFAULT_SUITE: Final = "sid"
FALLBACK_MIRROR: Final = "http://deb.debian.org/debian"
DEFAULT_KEYRING: Final = "/usr/share/keyrings/debian-archive-keyring.gpg"

#: machine -> (multiarch triplet, dynamic loader file name)
_ARCHES: Final[dict[str, tuple[str, str]]] = {
    "x86_64": ("x86_64-linux-gnu", "ld-linux-x86-64.so.2"),
    "aarch64": ("aarch64-linux-gnu", "ld-linux-aarch64.so.1"),
}

DEFAULT_SETTINGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "gtid_mode": "ON",
        "enforce_gtid_consistency": "ON",
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "innodb_buffer_pool_size": "128M",
        "performance_schema": "OFF",
        "mysqlx": "OFF",
        "secure_file_priv": "NULL",
        "skip_name_resolve": "ON",
    }
)
#: Options this module sets itself; ``--set`` may not override them.
MANAGED_OPTIONS: Final = frozenset(
    {
        "basedir",
        "bind_address",
        "character_sets_dir",
        "datadir",
        "lc_messages_dir",
        "log_error",
        "pid_file",
        "plugin_dir",
        "port",
        "socket",
        "user",
    }
)
#: Options that must already be given to ``--initialize`` (they fix on-disk formats).
_INITIALIZE_OPTIONS: Final = frozenset(
    {
        "lower_case_table_names",
        "innodb_page_size",
        "innodb_data_file_path",
        "innodb_checksum_algorithm",
        "innodb_undo_directory",
        "innodb_log_group_home_dir",
    }
)
_OFF_VALUES: Final = frozenset({"OFF", "0", "FALSE", "NO", "DISABLED"})
_ON_VALUES: Final = frozenset({"ON", "1", "TRUE", "YES", "ENABLED"})
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MAX_SOCKET_PATH: Final = 100  # sun_path holds 108 bytes; mysqld also creates "<socket>.lock"

# mysqld processes started by this Python process, so that exited ones get reaped (not left as zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class LocalMySQLError(RuntimeError):
    """A local MySQL install or instance operation failed; the message says why and what to do."""


def _log(message: str) -> None:
    print(f"[local_mysql] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Paths and locks
# --------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Root of everything this module writes: ``$MYSQL_CDC_LOCAL_MYSQL_DIR`` or ``<repo>/.cache/mysql``."""
    override = os.environ.get("MYSQL_CDC_LOCAL_MYSQL_DIR")
    return Path(override).resolve() if override else REPO_ROOT / ".cache" / "mysql"


def prefix_dir() -> Path:
    """Directory the ``.deb`` files are unpacked into."""
    return cache_dir() / "prefix"


def debs_dir() -> Path:
    """Directory the downloaded ``.deb`` files are kept in."""
    return cache_dir() / "debs"


def instances_dir() -> Path:
    """Directory holding one sub-directory per instance."""
    return cache_dir() / "instances"


def _stamp_path() -> Path:
    return prefix_dir() / ".local_mysql_installed.json"


@contextlib.contextmanager
def _file_lock(name: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<cache>/locks/<name>.lock`` (serializes parallel callers)."""
    lock_dir = cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{name}.lock").open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _arch() -> tuple[str, str]:
    machine = platform.machine()
    try:
        return _ARCHES[machine]
    except KeyError:
        raise LocalMySQLError(f"unsupported machine architecture {machine!r} (supported: {sorted(_ARCHES)})") from None


def _library_dirs(prefix: Path) -> list[Path]:
    triplet, _ = _arch()
    candidates = [prefix / "usr/lib" / triplet, prefix / "lib" / triplet, prefix / "usr/lib64", prefix / "lib64"]
    return [path for path in candidates if path.is_dir()]


def _loader_path(prefix: Path) -> Path:
    _, loader = _arch()
    for directory in _library_dirs(prefix):
        resolved = _resolve_in_prefix(prefix, directory / loader)
        if resolved is not None:
            return resolved
    raise LocalMySQLError(f"the dynamic loader {loader} is missing from {prefix}; run `install --force`")


# --------------------------------------------------------------------------------------------
# ELF inspection (stdlib only: binutils is not guaranteed to be installed)
# --------------------------------------------------------------------------------------------


def elf_needed(path: Path) -> list[str]:
    """The ``DT_NEEDED`` sonames of a 64-bit little-endian ELF file (empty for non-ELF files)."""
    with path.open("rb") as handle:
        header = handle.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF":
            return []
        if header[4] != 2 or header[5] != 1:
            raise LocalMySQLError(f"{path}: not a 64-bit little-endian ELF file")
        (phoff,) = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        handle.seek(phoff)
        table = handle.read(phentsize * phnum)
        loads: list[tuple[int, int, int]] = []
        dynamic: tuple[int, int] | None = None
        for index in range(phnum):
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, _memsz, _align = struct.unpack_from(
                "<IIQQQQQQ", table, index * phentsize
            )
            if p_type == 1:  # PT_LOAD
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:  # PT_DYNAMIC
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return []
        handle.seek(dynamic[0])
        entries = handle.read(dynamic[1])
        needed: list[int] = []
        strtab_address: int | None = None
        for offset in range(0, len(entries) - 15, 16):
            tag, value = struct.unpack_from("<qQ", entries, offset)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                needed.append(value)
            elif tag == 5:  # DT_STRTAB
                strtab_address = value
        if strtab_address is None:
            return []
        strtab = next(
            (
                offset + strtab_address - vaddr
                for vaddr, offset, size in loads
                if vaddr <= strtab_address < vaddr + size
            ),
            None,
        )
        if strtab is None:
            raise LocalMySQLError(f"{path}: DT_STRTAB lies outside every PT_LOAD segment")
        names: list[str] = []
        for relative in needed:
            handle.seek(strtab + relative)
            names.append(handle.read(512).split(b"\0", 1)[0].decode("ascii"))
        return names


def _resolve_in_prefix(prefix: Path, path: Path) -> Path | None:
    """Follow symlinks as if ``prefix`` were ``/``; the regular file reached, or None."""
    current = path
    for _ in range(40):
        if current.is_symlink():
            target = os.readlink(current)
            if target.startswith("/"):
                current = prefix / target.lstrip("/")
            else:
                current = Path(os.path.normpath(current.parent / target))
            continue
        return current if current.is_file() else None
    return None


def missing_sonames(prefix: Path) -> set[str]:
    """Sonames that :data:`TARGET_BINARIES` need (transitively) but the prefix does not provide."""
    lib_dirs = _library_dirs(prefix)
    queue: list[Path] = []
    for relative in TARGET_BINARIES:
        binary = prefix / relative
        if not binary.is_file():
            raise LocalMySQLError(f"{relative} is missing after unpacking {', '.join(ROOT_PACKAGES)}")
        queue.append(binary)
    seen: set[Path] = set(queue)
    missing: set[str] = set()
    while queue:
        for soname in elf_needed(queue.pop()):
            found = None
            for directory in lib_dirs:
                found = _resolve_in_prefix(prefix, directory / soname)
                if found is not None:
                    break
            if found is None:
                missing.add(soname)
            elif found not in seen:
                seen.add(found)
                queue.append(found)
    return missing


# --------------------------------------------------------------------------------------------
# apt plumbing (private sources list, lists and cache)
# --------------------------------------------------------------------------------------------


def _parse_sources() -> Iterator[tuple[list[str], list[str], list[str], list[str], str | None]]:
    """Yield ``(types, uris, suites, components, signed_by)`` for every enabled system apt source."""
    etc = Path("/etc/apt")
    files = [etc / "sources.list"]
    parts = etc / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in {".list", ".sources"})
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                key = ""
                for line in stanza.splitlines():
                    if not line.strip() or line.lstrip().startswith("#"):
                        continue
                    if line[0].isspace() and key:
                        fields[key] += " " + line.strip()
                    elif ":" in line:
                        key, _, value = line.partition(":")
                        key = key.strip().lower()
                        fields[key] = value.strip()
                if fields.get("enabled", "yes").lower() == "no":
                    continue
                signed_by = fields.get("signed-by")
                yield (
                    fields.get("types", "").split(),
                    fields.get("uris", "").split(),
                    fields.get("suites", "").split(),
                    fields.get("components", "").split(),
                    signed_by if signed_by and signed_by.startswith("/") else None,
                )
        else:
            for raw in text.splitlines():
                line = raw.split("#", 1)[0].strip()
                match = re.match(r"^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
                if not match:
                    continue
                options = dict(opt.split("=", 1) for opt in (match.group(2) or "").split() if "=" in opt)
                signed = options.get("signed-by")
                yield (
                    [match.group(1)],
                    [match.group(3)],
                    [match.group(4)],
                    match.group(5).split(),
                    signed if signed and signed.startswith("/") else None,
                )


def debian_mirror() -> tuple[str, str]:
    """``(mirror URL, keyring)``: ``$MYSQL_CDC_DEBIAN_MIRROR`` or the Debian mirror the system uses."""
    override = os.environ.get("MYSQL_CDC_DEBIAN_MIRROR")
    if override:
        return override.rstrip("/"), DEFAULT_KEYRING
    for types, uris, suites, components, signed_by in _parse_sources():
        if "deb" not in types or "main" not in components or any("security" in s for s in suites):
            continue
        for uri in uris:
            if uri.rstrip("/").endswith("/debian") and "security" not in uri:
                return uri.rstrip("/"), signed_by or DEFAULT_KEYRING
    return FALLBACK_MIRROR, DEFAULT_KEYRING


class _Apt:
    """``apt-get``/``apt-cache`` confined to a private sources list, package lists and cache."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mirror, keyring = debian_mirror()
        self.suite = os.environ.get("MYSQL_CDC_DEBIAN_SUITE", DEFAULT_SUITE)
        if not Path(keyring).is_file():
            raise LocalMySQLError(
                f"the Debian archive keyring {keyring} is missing (apt-get install debian-archive-keyring)"
            )
        arch = _run(["dpkg", "--print-architecture"]).stdout.strip()
        for sub in ("lists/partial", "cache/archives/partial"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.sources = root / f"{self.suite}.sources"
        self.sources.write_text(
            f"Types: deb\nURIs: {self.mirror}\nSuites: {self.suite}\nComponents: main\n"
            f"Architectures: {arch}\nSigned-By: {keyring}\n",
            encoding="utf-8",
        )
        self.options = [
            "-o", f"Dir::Etc::SourceList={self.sources}",
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={root / 'lists'}",
            "-o", f"Dir::Cache={root / 'cache'}",
            "-o", "Acquire::Languages=none",
            "-o", "APT::Get::Show-Versions=1",
        ]  # fmt: skip
        if os.geteuid() == 0:
            # The private download directory is not readable by the _apt sandbox user.
            self.options += ["-o", "APT::Sandbox::User=root"]

    def update(self) -> None:
        _log(f"fetching the package index of Debian {self.suite} from {self.mirror} ...")
        _run(["apt-get", *self.options, "-q", "update"], what="apt-get update (private sources list)")

    def depends(self, packages: Iterable[str]) -> dict[str, list[str]]:
        """Direct ``Depends``/``Pre-Depends`` of each package (virtual packages left out)."""
        names = sorted(set(packages))
        if not names:
            return {}
        result = _run(
            ["apt-cache", *self.options, "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
             "--no-breaks", "--no-replaces", "--no-enhances", *names],
            what="apt-cache depends",
        )  # fmt: skip
        depends: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in result.stdout.splitlines():
            if line and not line[0].isspace():
                current = depends.setdefault(line.strip(), [])
                continue
            match = re.match(r"^\s*\|?(?:Pre)?Depends:\s*(\S+)", line)
            if match and current is not None and not match.group(1).startswith("<"):
                current.append(match.group(1).split(":", 1)[0])
        return depends

    def download(self, packages: Iterable[str], destination: Path) -> dict[str, Path]:
        """Download the candidate ``.deb`` of each package into ``destination``; name -> file."""
        names = sorted(set(packages))
        if not names:
            return {}
        destination.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=destination, prefix=".download-") as tmp:
            _run(["apt-get", *self.options, "-q", "download", *names], cwd=Path(tmp), what="apt-get download")
            files: dict[str, Path] = {}
            for deb in sorted(Path(tmp).glob("*.deb")):
                name = _run(["dpkg-deb", "-f", str(deb), "Package"]).stdout.strip()
                target = destination / deb.name
                os.replace(deb, target)
                files[name] = target
        absent = set(names) - set(files)
        if absent:
            raise LocalMySQLError(f"apt-get download did not produce a .deb for: {', '.join(sorted(absent))}")
        return files


def _deb_file_names(deb: Path) -> frozenset[str]:
    """Base names of every file and symlink in a ``.deb`` (to match sonames against)."""
    listing = _run(["dpkg-deb", "-c", str(deb)]).stdout
    names: set[str] = set()
    for line in listing.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6:
            names.add(Path(parts[5].split(" -> ", 1)[0]).name)
    return frozenset(names)


def _run(
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


# --------------------------------------------------------------------------------------------
# install
# --------------------------------------------------------------------------------------------


def _read_stamp() -> dict[str, Any] | None:
    try:
        stamp = json.loads(_stamp_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def is_installed() -> bool:
    """True when a complete install of the current recipe is unpacked (checked via its stamp file)."""
    stamp = _read_stamp()
    if stamp is None or stamp.get("recipe") != RECIPE:
        return False
    prefix = prefix_dir()
    return all((prefix / relative).is_file() for relative in TARGET_BINARIES)


def install(*, force: bool = False) -> Path:
    """Download and unpack MySQL with its library closure; return the prefix. Idempotent.

    A stamp file written at the end makes later calls return at once; ``force`` starts over
    (fresh package index, fresh downloads, fresh prefix). Safe to call from parallel processes.
    """
    if not force and is_installed():
        return prefix_dir()
    with _file_lock("install"):
        if not force and is_installed():
            return prefix_dir()
        for tool in ("apt-get", "apt-cache", "dpkg", "dpkg-deb"):
            if shutil.which(tool) is None:
                raise LocalMySQLError(f"{tool} not found: installing MySQL this way needs a Debian-based system")
        started = time.monotonic()
        prefix = prefix_dir()
        debs = debs_dir()
        _log(f"installing MySQL from Debian packages into {prefix}")
        shutil.rmtree(prefix, ignore_errors=True)
        if force:
            shutil.rmtree(debs, ignore_errors=True)
        prefix.mkdir(parents=True)
        apt = _Apt(cache_dir() / "apt")
        apt.update()
        used = _unpack_closure(apt, prefix, debs)
        version = _query_version(prefix)
        client = _run([*tool_argv("mysql", prefix=prefix), "--version"], env=tool_env()).stdout.strip()
        _stamp_path().write_text(
            json.dumps(
                {
                    "recipe": RECIPE,
                    "version": version,
                    "client": client,
                    "mirror": apt.mirror,
                    "suite": apt.suite,
                    "packages": {name: deb.name for name, deb in sorted(used.items())},
                    "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        _log(f"installed MySQL {version} ({len(used)} packages) in {time.monotonic() - started:.1f} s")
        return prefix


def _unpack_closure(apt: _Apt, prefix: Path, debs: Path) -> dict[str, Path]:
    """Unpack the root packages, then every library package needed to resolve all sonames."""

    def unpack(name: str, deb: Path) -> None:
        _log(f"  unpacking {deb.name}")
        _run(["dpkg", "-x", str(deb), str(prefix)], what=f"dpkg -x {deb.name}")
        used[name] = deb

    _log(f"downloading {', '.join(ROOT_PACKAGES)} ...")
    used: dict[str, Path] = {}
    for name, deb in apt.download(ROOT_PACKAGES, debs).items():
        unpack(name, deb)
    considered: set[str] = set(ROOT_PACKAGES)
    expanded: set[str] = set()
    pool: dict[str, tuple[Path, frozenset[str]]] = {}  # downloaded, not (yet) needed
    while True:
        missing = missing_sonames(prefix)
        if not missing:
            for deb, _files in pool.values():  # downloaded to look inside, not needed
                deb.unlink(missing_ok=True)
            return used
        _log(f"missing shared libraries: {' '.join(sorted(missing))}")
        to_expand = set(used) - expanded
        expanded |= to_expand
        candidates: set[str] = set()
        for dependencies in apt.depends(to_expand).values():
            candidates.update(dep for dep in dependencies if dep not in considered and dep.startswith(("lib", "zlib")))
        considered |= candidates
        if candidates:
            _log(f"downloading candidate library packages: {' '.join(sorted(candidates))}")
            for name, deb in apt.download(candidates, debs).items():
                pool[name] = (deb, _deb_file_names(deb))
        providers = sorted(name for name, (_deb, files) in pool.items() if files & missing)
        if not providers:
            raise LocalMySQLError(
                "no dependency of the unpacked packages provides "
                f"{' '.join(sorted(missing))}; the packages in Debian {apt.suite} may have changed"
            )
        for name in providers:
            unpack(name, pool.pop(name)[0])


def tool_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for running prefix binaries: ``base`` (default ``os.environ``) without
    ``LD_PRELOAD``/``LD_LIBRARY_PATH``, which would mix the system's libraries into the prefix's."""
    env = dict(os.environ if base is None else base)
    env.pop("LD_PRELOAD", None)
    env.pop("LD_LIBRARY_PATH", None)
    return env


def tool_argv(tool: str, *, prefix: Path | None = None) -> list[str]:
    """argv that runs a bundled MySQL binary (``mysql``, ``mysqlbinlog``, ``mysqld``, ...) through
    the prefix's loader. Append the tool's own arguments. Raises if MySQL is not installed."""
    root = prefix if prefix is not None else prefix_dir()
    if prefix is None and not is_installed():
        raise LocalMySQLError("MySQL is not installed: run `python scripts/local_mysql.py install`")
    binary = next((root / sub / tool for sub in ("usr/bin", "usr/sbin") if (root / sub / tool).is_file()), None)
    if binary is None:
        raise LocalMySQLError(f"{tool} is not part of the installed MySQL packages")
    library_path = ":".join(str(path) for path in _library_dirs(root))
    return [str(_loader_path(root)), "--library-path", library_path, str(binary)]


def _query_version(prefix: Path) -> str:
    output = _run([*tool_argv("mysqld", prefix=prefix), "--version"], env=tool_env(), what="mysqld --version").stdout
    match = re.search(r"\bVer\s+(\S+)", output)
    if not match:
        raise LocalMySQLError(f"cannot parse the output of mysqld --version: {output.strip()!r}")
    return match.group(1)


def server_version() -> str:
    """The bundled server's version as ``mysqld --version`` prints it (e.g. ``9.7.4-2``)."""
    if not is_installed():
        raise LocalMySQLError("MySQL is not installed: run `python scripts/local_mysql.py install`")
    stamp = _read_stamp() or {}
    version = stamp.get("version")
    return version if isinstance(version, str) else _query_version(prefix_dir())


# --------------------------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------------------------


def _process_alive(pid: int) -> bool:
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


def _process_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", errors="replace") for part in raw.split(b"\0") if part]


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _mysql_greeting(family: socket.AddressFamily, address: str | tuple[str, int]) -> bool:
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


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _option_value(value: str) -> str:
    """Quote a value for a MySQL option file."""
    if "\n" in value or ('"' in value and "'" in value):
        raise LocalMySQLError("passwords with newlines or both quote characters are not supported")
    if '"' in value:
        return "'" + value + "'"
    return '"' + value.replace("\\", "\\\\") + '"'


def _normalize_settings(settings: Mapping[str, str | int | bool] | None) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, value in (settings or {}).items():
        name = key.strip().lower().replace("-", "_")
        if not re.fullmatch(r"[a-z][a-z0-9_.]*", name):
            raise LocalMySQLError(f"invalid server option name {key!r}")
        if name in MANAGED_OPTIONS:
            raise LocalMySQLError(f"{name} is managed by local_mysql and cannot be overridden")
        if isinstance(value, bool):
            result[name] = "ON" if value else "OFF"
        else:
            result[name] = str(value)
    return result


# --------------------------------------------------------------------------------------------
# instances
# --------------------------------------------------------------------------------------------


class LocalMySQL:
    """One local MySQL server: immutable configuration plus operations on its directory/process.

    ``name`` picks the directory ``<cache>/instances/NAME``; ``port`` the TCP port on 127.0.0.1;
    ``server_id`` defaults to the port; ``settings`` override :data:`DEFAULT_SETTINGS` (names with
    ``-`` or ``_``; ``True``/``False`` become ``ON``/``OFF``; a ``server_id`` entry wins over the
    argument). Equal configurations compare equal and hash alike.
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
        overrides = _normalize_settings(settings)
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
        """TCP port on :data:`HOST`."""
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
        """:data:`DEFAULT_SETTINGS` with :attr:`settings` applied."""
        return {**DEFAULT_SETTINGS, **self._settings}

    @property
    def host(self) -> str:
        """Always ``127.0.0.1``: the server binds to nothing else."""
        return HOST

    @property
    def root_password(self) -> str:
        """Root password: ``$MYSQL_CDC_TEST_ROOT_PASSWORD`` or ``root-test-pw``."""
        return os.environ.get(ROOT_PASSWORD_ENV, DEFAULT_ROOT_PASSWORD)

    @property
    def cdc_password(self) -> str:
        """Password of the ``cdc`` user: ``$MYSQL_CDC_TEST_CDC_PASSWORD`` or ``cdc-test-pw``."""
        return os.environ.get(CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD)

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

    # ---- client helpers -----------------------------------------------------------------

    def connection_kwargs(self, user: str = CDC_USER) -> dict[str, Any]:
        """``pymysql.connect`` keyword arguments (TCP to 127.0.0.1) for ``root`` or ``cdc``."""
        return {"host": self.host, "port": self.port, "user": user, "password": self._password_for(user)}

    def _password_for(self, user: str) -> str:
        if user == ROOT_USER:
            return self.root_password
        if user == CDC_USER:
            return self.cdc_password
        raise LocalMySQLError(f"unknown user {user!r}: local_mysql manages {ROOT_USER!r} and {CDC_USER!r}")

    def client_options_file(self, user: str = ROOT_USER) -> Path:
        """Write (mode 0600) and return a ``[client]`` option file with this instance's socket,
        port, the user and its password, for ``--defaults-file=`` of the bundled clients."""
        self.instance_dir.mkdir(parents=True, exist_ok=True)
        path = self.instance_dir / f"client-{user}.cnf"
        content = (
            "[client]\n"
            f"user={user}\n"
            f"password={_option_value(self._password_for(user))}\n"
            f"socket={self.socket_path}\n"
            f"port={self.port}\n"
            f"character-sets-dir={prefix_dir() / 'usr/share/mysql/charsets'}\n"
        )
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(content)
        return path

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
            pid = _read_pid(path)
            if pid is not None and _process_alive(pid) and marker in _process_cmdline(pid):
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
        prefix = prefix_dir()
        argv = [
            *tool_argv("mysqld"),
            "--no-defaults",
            *self._base_options(prefix),
            f"--pid-file={self.pid_file}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            f"--bind-address={HOST}",
            f"--server-id={self.server_id}",
        ]
        for key, value in self.effective_settings.items():
            if key == "log_bin":
                if value.upper() in _OFF_VALUES:
                    argv.append("--disable-log-bin")
                elif value.upper() in _ON_VALUES:
                    argv.append(f"--log-bin={self.binlog_basename}")
                else:
                    argv.append(f"--log-bin={value}")
            else:
                argv.append(f"--{key.replace('_', '-')}={value}")
        return argv

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
        with _file_lock(f"instance-{self.name}"):
            install()
            if self.is_running():
                running = LocalMySQL.load(self.name)
                if running != self:
                    raise LocalMySQLError(
                        f"instance {self.name!r} is already running as {running!r}; stop it before starting it as "
                        f"{self!r}"
                    )
                _log(f"instance {self.name!r} is already running")
                return self
            if _port_in_use(self.port):
                raise LocalMySQLError(f"port {self.port} on {HOST} is already in use")
            self.instance_dir.mkdir(parents=True, exist_ok=True)
            for stale in (self.pid_file, self._spawn_pid_file, self.socket_path, Path(f"{self.socket_path}.lock")):
                stale.unlink(missing_ok=True)
            if not self._initialized_marker.exists():
                self._initialize()
            self._launch(timeout)
            if not self._users_marker.exists():
                self._create_users()
            return self

    def _initialize(self) -> None:
        started = time.monotonic()
        _log(f"initializing the datadir of {self.name!r} (--initialize-insecure) ...")
        shutil.rmtree(self.datadir, ignore_errors=True)
        self._users_marker.unlink(missing_ok=True)
        init_options = [
            f"--{key.replace('_', '-')}={value}"
            for key, value in self.effective_settings.items()
            if key in _INITIALIZE_OPTIONS
        ]
        argv = [*tool_argv("mysqld"), "--no-defaults", *self._base_options(prefix_dir()), *init_options]
        argv.append("--initialize-insecure")
        try:
            _run(argv, env=tool_env(), timeout=600, what="mysqld --initialize-insecure")
        except LocalMySQLError as exc:
            raise LocalMySQLError(f"{exc}\n--- {self.error_log_path} ---\n{_tail(self.error_log_path)}") from exc
        self._initialized_marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z\n"), encoding="utf-8")
        _log(f"initialized in {time.monotonic() - started:.1f} s")

    def _launch(self, timeout: float) -> None:
        started = time.monotonic()
        argv = self.mysqld_argv()
        log_offset = self.error_log_path.stat().st_size if self.error_log_path.exists() else 0
        _log(f"starting {self.name!r} on {HOST}:{self.port} (server_id {self.server_id}) ...")
        with (self.instance_dir / "mysqld.out").open("ab") as output:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=tool_env(),
                start_new_session=True,  # not killed with the caller's terminal / process group
                close_fds=True,
            )
        _CHILDREN[process.pid] = process
        self._spawn_pid_file.write_text(f"{process.pid}\n", encoding="utf-8")
        self._config_file.write_text(
            json.dumps(
                {"name": self.name, "port": self.port, "server_id": self.server_id, "settings": dict(self.settings)},
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        deadline = started + timeout
        while True:
            if not _process_alive(process.pid):
                raise LocalMySQLError(
                    f"mysqld for {self.name!r} exited during startup (exit code {process.poll()}); "
                    f"log since this start:\n{self._log_since(log_offset)}"
                )
            if _mysql_greeting(socket.AF_UNIX, str(self.socket_path)) and _mysql_greeting(
                socket.AF_INET, (HOST, self.port)
            ):
                break
            if time.monotonic() > deadline:
                self._terminate(process.pid, grace=20.0)
                raise LocalMySQLError(
                    f"mysqld for {self.name!r} did not accept connections within {timeout:.0f} s (stopped it); "
                    f"log since this start:\n{self._log_since(log_offset)}"
                )
            time.sleep(0.1)
        _log(f"{self.name!r} accepts connections (pid {process.pid}, {time.monotonic() - started:.1f} s)")

    def _log_since(self, offset: int) -> str:
        try:
            with self.error_log_path.open("rb") as handle:
                handle.seek(offset)
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            text = ""
        lines = text.splitlines()[-30:]
        out = _tail(self.instance_dir / "mysqld.out", 10)
        return "\n".join(lines) + f"\n--- mysqld.out ---\n{out}"

    def _create_users(self) -> None:
        _log(f"creating the accounts on {self.name!r}")
        root = _sql_string(self.root_password)
        cdc = _sql_string(self.cdc_password)
        sql = f"""
            SET SESSION sql_log_bin = 0;
            ALTER USER 'root'@'localhost' IDENTIFIED BY {root};
            CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY {root};
            ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY {root};
            GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
            GRANT PROXY ON ''@'' TO 'root'@'127.0.0.1' WITH GRANT OPTION;
            CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY {cdc};
            ALTER USER 'cdc'@'%' IDENTIFIED BY {cdc};
            GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
            GRANT SELECT, LOCK TABLES ON *.* TO 'cdc'@'%';
        """
        mysql = tool_argv("mysql")
        attempts = [
            # A fresh datadir: root@localhost has an empty password.
            [*mysql, "--no-defaults", "--protocol=SOCKET", f"--socket={self.socket_path}", "--user=root",
             "--skip-password"],
            # A retry after a partial bootstrap: the password is already set.
            [*mysql, f"--defaults-file={self.client_options_file(ROOT_USER)}", "--protocol=SOCKET"],
        ]  # fmt: skip
        errors: list[str] = []
        for argv in attempts:
            try:
                _run([*argv, "--batch"], input_text=sql, env=tool_env(), timeout=120, what="creating accounts")
            except LocalMySQLError as exc:
                errors.append(str(exc))
                continue
            self._users_marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z\n"), encoding="utf-8")
            return
        raise LocalMySQLError("could not create the accounts:\n" + "\n".join(errors))

    def _terminate(self, pid: int, grace: float) -> None:
        """SIGTERM ``pid``, wait up to ``grace`` seconds, then SIGKILL and wait."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _process_alive(pid):
            _log(f"pid {pid} still alive after {grace:.0f} s: SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while _process_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _process_alive(pid):
                raise LocalMySQLError(f"pid {pid} survived SIGKILL")

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the server (SIGTERM; SIGKILL after ``timeout`` s). Returns whether it was running."""
        with _file_lock(f"instance-{self.name}"):
            pid = self.running_pid()
            if pid is None:
                was_running = False
            else:
                _log(f"stopping {self.name!r} (pid {pid}) ...")
                self._terminate(pid, grace=timeout)
                was_running = True
            for stale in (self.pid_file, self._spawn_pid_file, self.socket_path, Path(f"{self.socket_path}.lock")):
                stale.unlink(missing_ok=True)
            if was_running:
                _log(f"stopped {self.name!r}")
            return was_running

    def destroy(self) -> None:
        """Stop the server and delete its directory (datadir, logs, configuration)."""
        self.stop()
        with _file_lock(f"instance-{self.name}"):
            shutil.rmtree(self.instance_dir, ignore_errors=True)
            self.socket_path.unlink(missing_ok=True)
        _log(f"destroyed {self.name!r}")


class ServerUrl(NamedTuple):
    """The parts of ``mysql://USER:PASSWORD@HOST:PORT`` (an existing server's admin account)."""

    scheme: str
    host: str
    port: int
    user: str
    password: str


def parse_server_url(url: str) -> ServerUrl:
    """Split a server URL (``MYSQL_CDC_EXTERNAL_URL``, ``--mysql-url``); user and password are URL-decoded."""
    parts = urlsplit(url)
    return ServerUrl(
        scheme=parts.scheme,
        host=parts.hostname or HOST,
        port=parts.port or 3306,
        user=unquote(parts.username or ROOT_USER),
        password=unquote(parts.password or ""),
    )


def list_instances() -> list[LocalMySQL]:
    """Every instance that has been started at least once (sorted by name)."""
    root = instances_dir()
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        if (path / "instance.json").is_file():
            with contextlib.suppress(LocalMySQLError, KeyError, ValueError, TypeError):
                found.append(LocalMySQL.load(path.name))
    return found


def _stray_mysqld_pids() -> list[int]:
    """mysqld processes run from this prefix on a datadir under this cache (e.g. a deleted instance)."""
    binary = str(prefix_dir() / "usr/sbin/mysqld")
    datadir_prefix = f"--datadir={instances_dir()}/"
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            cmdline = _process_cmdline(int(entry.name))
            if binary in cmdline and any(arg.startswith(datadir_prefix) for arg in cmdline):
                pids.append(int(entry.name))
    return [pid for pid in pids if _process_alive(pid)]


def stop_all(timeout: float = 60.0) -> list[str]:
    """Stop every instance, then any stray mysqld of this prefix; the names of those stopped."""
    stopped = [instance.name for instance in list_instances() if instance.stop(timeout)]
    for pid in _stray_mysqld_pids():
        _log(f"stopping stray mysqld pid {pid}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _process_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stopped.append(f"pid {pid}")
    return stopped


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def _parse_set(values: Sequence[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LocalMySQLError(f"--set expects VAR=VALUE, got {item!r}")
        result[key.strip()] = value.strip()
    return result


def _cmd_start(args: argparse.Namespace) -> int:
    overrides = _parse_set(args.set or [])
    if args.port is None and args.server_id is None and not overrides:
        try:
            instance = LocalMySQL.load(args.name)
        except LocalMySQLError:
            raise LocalMySQLError(f"instance {args.name!r} does not exist yet: give --port") from None
    else:
        port = args.port
        if port is None:
            try:
                port = LocalMySQL.load(args.name).port
            except LocalMySQLError:
                raise LocalMySQLError(f"instance {args.name!r} does not exist yet: give --port") from None
        instance = LocalMySQL(args.name, port, args.server_id, overrides)
    instance.start(timeout=args.timeout)
    print(instance.describe())
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


def _cmd_mysql(args: argparse.Namespace) -> int:
    instance = LocalMySQL.load(args.name)
    extra = list(args.args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    return subprocess.call([*instance.mysql_client_argv(ROOT_USER), *extra], env=tool_env())


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(
        prog="local_mysql.py",
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
        if args.command == "install":
            prefix = install(force=args.force)
            print(f"MySQL {server_version()} installed in {prefix}")
            return 0
        if args.command == "start":
            return _cmd_start(args)
        if args.command == "stop":
            try:
                instance = LocalMySQL.load(args.name)
            except LocalMySQLError:
                _log(f"instance {args.name!r} does not exist")
                return 0
            if not instance.stop(args.timeout):
                _log(f"instance {args.name!r} is not running")
            return 0
        if args.command == "stop-all":
            stopped = stop_all()
            _log(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
            return 0
        if args.command == "status":
            return _cmd_status(args)
        if args.command == "destroy":
            try:
                instance = LocalMySQL.load(args.name)
            except LocalMySQLError:
                if not (instances_dir() / args.name).exists():
                    _log(f"instance {args.name!r} does not exist")
                    return 0
                shutil.rmtree(instances_dir() / args.name)
                return 0
            instance.destroy()
            return 0
        if args.command == "env":
            return _cmd_env(args)
        if args.command == "version":
            print(server_version())
            return 0
        if args.command == "mysql":
            return _cmd_mysql(args)
    except LocalMySQLError as exc:
        print(f"local_mysql: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
