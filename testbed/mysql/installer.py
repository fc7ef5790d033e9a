"""Install MySQL from Debian packages into the prefix, and run its binaries.

Debian bookworm ships no MySQL; sid ships ``mysql-server-core`` and ``mysql-client-core`` (MySQL
9.x), built against sid's libraries. :func:`install` downloads those two packages plus the shared
libraries they need from sid (:class:`~testbed.mysql.apt.PrivateApt`), unpacks them with ``dpkg -x``
into the prefix and :func:`tool_argv` runs every binary through that prefix's own dynamic loader
(``ld-linux-x86-64.so.2 --library-path <prefix libs> <binary> ...``). Nothing is installed
system-wide and no root-only path is written.

Which libraries are needed is found, not listed: starting from the two MySQL packages, the
``DT_NEEDED`` entries of :data:`TARGET_BINARIES` (and, transitively, of the libraries they load)
are resolved inside the prefix; every soname still missing is looked up among the library packages
that the packages unpacked so far depend on, and only packages that provide a missing soname are
unpacked. With sid's 9.7.4 that closure is ``libc6 libgcc-s1 libstdc++6 libssl3t64 libicu78
libprotobuf-lite32t64 libzstd1 zlib1g liblz4-1 libxxhash0 libaio1t64 libnuma1
libgoogle-perftools4t64 libunwind8 liblzma5 libedit2 libbsd0 libmd0 libtinfo6`` (21 packages with
the two MySQL ones; none of ``mysql-server-core``'s other dependencies, such as libcurl, libfido2,
libmecab, krb5 or perl, is linked by those binaries).

A JSON stamp written last (``prefix/.local_mysql_installed.json``: recipe, version, client,
mirror, suite, packages, installed_at) marks a complete install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from testbed.mysql.apt import PrivateApt, deb_file_names
from testbed.mysql.elf import library_dirs, loader_path, missing_sonames
from testbed.mysql.errors import LocalMySQLError, log
from testbed.mysql.paths import apt_dir, debs_dir, file_lock, prefix_dir, stamp_path
from testbed.mysql.process import run

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
NOT_INSTALLED: Final = "MySQL is not installed: run `python -m testbed.mysql install`"


def _read_stamp() -> dict[str, Any] | None:
    try:
        stamp = json.loads(stamp_path().read_text(encoding="utf-8"))
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
    with file_lock("install"):
        if not force and is_installed():
            return prefix_dir()
        for tool in ("apt-get", "apt-cache", "dpkg", "dpkg-deb"):
            if shutil.which(tool) is None:
                raise LocalMySQLError(f"{tool} not found: installing MySQL this way needs a Debian-based system")
        started = time.monotonic()
        prefix = prefix_dir()
        debs = debs_dir()
        log(f"installing MySQL from Debian packages into {prefix}")
        shutil.rmtree(prefix, ignore_errors=True)
        if force:
            shutil.rmtree(debs, ignore_errors=True)
        prefix.mkdir(parents=True)
        apt = PrivateApt(apt_dir())
        apt.update()
        used = _unpack_closure(apt, prefix, debs)
        version = _query_version(prefix)
        client = run([*tool_argv("mysql", prefix=prefix), "--version"], env=tool_env()).stdout.strip()
        _write_stamp(
            {
                "recipe": RECIPE,
                "version": version,
                "client": client,
                "mirror": apt.mirror,
                "suite": apt.suite,
                "packages": {name: deb.name for name, deb in sorted(used.items())},
                "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        )
        log(f"installed MySQL {version} ({len(used)} packages) in {time.monotonic() - started:.1f} s")
        return prefix


def _write_stamp(stamp: Mapping[str, Any]) -> None:
    stamp_path().write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")


def _unpack_closure(apt: PrivateApt, prefix: Path, debs: Path) -> dict[str, Path]:
    """Unpack the root packages, then every library package needed to resolve all sonames."""

    def unpack(name: str, deb: Path) -> None:
        log(f"  unpacking {deb.name}")
        run(["dpkg", "-x", str(deb), str(prefix)], what=f"dpkg -x {deb.name}")
        used[name] = deb

    log(f"downloading {', '.join(ROOT_PACKAGES)} ...")
    used: dict[str, Path] = {}
    for name, deb in apt.download(ROOT_PACKAGES, debs).items():
        unpack(name, deb)
    considered: set[str] = set(ROOT_PACKAGES)
    expanded: set[str] = set()
    pool: dict[str, tuple[Path, frozenset[str]]] = {}  # downloaded, not (yet) needed
    while True:
        missing = missing_sonames(prefix, TARGET_BINARIES)
        if not missing:
            for deb, _files in pool.values():  # downloaded to look inside, not needed
                deb.unlink(missing_ok=True)
            return used
        log(f"missing shared libraries: {' '.join(sorted(missing))}")
        to_expand = set(used) - expanded
        expanded |= to_expand
        candidates: set[str] = set()
        for dependencies in apt.depends(to_expand).values():
            candidates.update(dep for dep in dependencies if dep not in considered and dep.startswith(("lib", "zlib")))
        considered |= candidates
        if candidates:
            log(f"downloading candidate library packages: {' '.join(sorted(candidates))}")
            for name, deb in apt.download(candidates, debs).items():
                pool[name] = (deb, deb_file_names(deb))
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
        raise LocalMySQLError(NOT_INSTALLED)
    binary = next((root / sub / tool for sub in ("usr/bin", "usr/sbin") if (root / sub / tool).is_file()), None)
    if binary is None:
        raise LocalMySQLError(f"{tool} is not part of the installed MySQL packages")
    library_path = ":".join(str(path) for path in library_dirs(root))
    return [str(loader_path(root)), "--library-path", library_path, str(binary)]


def charsets_dir() -> Path:
    """The bundled character-set definitions (``--character-sets-dir`` of the server and clients)."""
    return prefix_dir() / "usr/share/mysql/charsets"


def _query_version(prefix: Path) -> str:
    output = run([*tool_argv("mysqld", prefix=prefix), "--version"], env=tool_env(), what="mysqld --version").stdout
    match = re.search(r"\bVer\s+(\S+)", output)
    if not match:
        raise LocalMySQLError(f"cannot parse the output of mysqld --version: {output.strip()!r}")
    return match.group(1)


def server_version() -> str:
    """The bundled server's version as ``mysqld --version`` prints it (e.g. ``9.7.4-2``)."""
    if not is_installed():
        raise LocalMySQLError(NOT_INSTALLED)
    stamp = _read_stamp() or {}
    version = stamp.get("version")
    return version if isinstance(version, str) else _query_version(prefix_dir())
