#!/usr/bin/env python3
"""Fetch a JDBC driver for Iceberg's JDBC catalog on MySQL: Debian's MariaDB Connector/J.

Iceberg's Spark runtime carries the JDBC catalog (``type=jdbc``), not a driver. Where Maven is
reachable, give Spark the driver by coordinates (``--packages org.mariadb.jdbc:mariadb-java-client:<v>``
or MySQL's ``com.mysql:mysql-connector-j:<v>``). Here only PyPI and Debian's archive are, so this script
takes Debian's ``libmariadb-java`` (one jar, no run-time dependencies; it speaks MySQL's protocol,
``caching_sha2_password`` included, and takes ``jdbc:mysql://`` URLs) and unpacks it into
``<repo>/.cache/jars/jdbc/`` (:func:`debian_packages.fetch_debian_package`). The tests of the JDBC
catalog keep the catalog in their MySQL test server.

Prints the jar's path; a second run reuses it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from debian_packages import fetch_debian_package
from jar_tools import CACHE_ROOT, JarAssemblyError, jar_has

PACKAGE = "libmariadb-java"
MEMBER = "usr/share/java/mariadb-java-client.jar"
DRIVER_CLASS = "org/mariadb/jdbc/Driver.class"
DEFAULT_DEST = CACHE_ROOT / "jars" / "jdbc"


def ensure_jdbc_driver(dest: Path | None = None) -> Path:
    """The MariaDB Connector/J jar under ``dest`` (default ``<repo>/.cache/jars/jdbc``), fetched on first use."""
    import fcntl

    root = (Path(dest) if dest is not None else DEFAULT_DEST).resolve()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # tests of two workers may ask at once
        jar = fetch_debian_package(PACKAGE, root, MEMBER).resolve()
    if not jar_has(jar, DRIVER_CLASS):
        raise JarAssemblyError(f"{jar} holds no {DRIVER_CLASS}.\n  What to do: delete {root} and run again.")
    return jar


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch MariaDB Connector/J from Debian for Iceberg's JDBC catalog.")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        print(ensure_jdbc_driver(args.dest))
    except JarAssemblyError as exc:
        print(f"jdbc_jars: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
