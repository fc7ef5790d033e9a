"""Every instance under the cache at once: list them, stop them all (and any stray mysqld)."""

from __future__ import annotations

import contextlib

from testbed.mysql.errors import LocalMySQLError, log
from testbed.mysql.instance import LocalMySQL
from testbed.mysql.paths import instances_dir, prefix_dir
from testbed.mysql.process import live_pids, process_alive, process_cmdline, terminate


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


def stray_mysqld_pids() -> list[int]:
    """mysqld processes run from this prefix on a datadir under this cache (e.g. a deleted instance)."""
    binary = str(prefix_dir() / "usr/sbin/mysqld")
    datadir_prefix = f"--datadir={instances_dir()}/"
    pids = []
    for pid in live_pids():
        cmdline = process_cmdline(pid)
        if binary in cmdline and any(arg.startswith(datadir_prefix) for arg in cmdline):
            pids.append(pid)
    return [pid for pid in pids if process_alive(pid)]


def stop_all(timeout: float = 60.0) -> list[str]:
    """Stop every instance, then any stray mysqld of this prefix; the names of those stopped."""
    stopped = [instance.name for instance in list_instances() if instance.stop(timeout)]
    for pid in stray_mysqld_pids():
        log(f"stopping stray mysqld pid {pid}")
        terminate(pid, grace=timeout)
        stopped.append(f"pid {pid}")
    return stopped
