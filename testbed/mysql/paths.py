"""Where the local MySQL test bed keeps everything, and the file locks that serialize its users.

Layout under ``<repo>/.cache/mysql`` (or ``$MYSQL_CDC_LOCAL_MYSQL_DIR``): ``prefix/`` (the unpacked
packages and the install stamp), ``debs/`` (downloaded ``.deb`` files), ``apt/`` (the private apt
state), ``instances/NAME/`` (one directory per instance) and ``locks/``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
LOCAL_MYSQL_DIR_ENV: Final = "MYSQL_CDC_LOCAL_MYSQL_DIR"


def cache_dir() -> Path:
    """Root of everything the test bed writes: ``$MYSQL_CDC_LOCAL_MYSQL_DIR`` or ``<repo>/.cache/mysql``."""
    override = os.environ.get(LOCAL_MYSQL_DIR_ENV)
    return Path(override).resolve() if override else REPO_ROOT / ".cache" / "mysql"


def prefix_dir() -> Path:
    """Directory the ``.deb`` files are unpacked into."""
    return cache_dir() / "prefix"


def debs_dir() -> Path:
    """Directory the downloaded ``.deb`` files are kept in."""
    return cache_dir() / "debs"


def apt_dir() -> Path:
    """Directory of the private apt sources list, package lists and cache."""
    return cache_dir() / "apt"


def instances_dir() -> Path:
    """Directory holding one sub-directory per instance."""
    return cache_dir() / "instances"


def stamp_path() -> Path:
    """The install stamp: written last by ``install``, its presence (and recipe) means installed."""
    return prefix_dir() / ".local_mysql_installed.json"


@contextlib.contextmanager
def file_lock(name: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<cache>/locks/<name>.lock`` (serializes parallel callers)."""
    lock_dir = cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"{name}.lock").open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
