"""Docker-free local MySQL servers for development, tests, the demo and the benchmarks.

Debian sid's ``mysql-server-core`` and ``mysql-client-core`` (MySQL 9.x) are unpacked with their
library closure into ``<repo>/.cache/mysql/prefix/`` and run through that prefix's own dynamic
loader; named instances live in ``<repo>/.cache/mysql/instances/NAME/`` and listen on 127.0.0.1
only. One owner per concern:

* :mod:`~testbed.mysql.installer`: download, unpack, the install stamp; ``tool_argv``/``tool_env``
  run the bundled binaries (with :mod:`~testbed.mysql.apt` for the private apt and
  :mod:`~testbed.mysql.elf` for the shared-library closure);
* :mod:`~testbed.mysql.instance`: :class:`LocalMySQL`, one server's configuration, directory,
  process and clients (with :mod:`~testbed.mysql.settings` for its server options,
  :mod:`~testbed.mysql.access` for its address, accounts and passwords, and
  :mod:`~testbed.mysql.process` for PIDs and sockets);
* :mod:`~testbed.mysql.fleet`: every instance at once; :mod:`~testbed.mysql.urls`: URLs of
  existing servers; :mod:`~testbed.mysql.paths`: the on-disk layout and locks;
* :mod:`~testbed.mysql.cli`: ``python -m testbed.mysql install|start|stop|stop-all|status|...``.

Python API::

    from testbed import mysql
    prefix = mysql.install()                 # Path of the unpacked prefix
    server = mysql.LocalMySQL("primary", port=33061, settings={"binlog_format": "STATEMENT"})
    server.start()                           # installs, initializes, starts, creates the users
    pymysql.connect(**server.connection_kwargs("cdc"))
    subprocess.run([*server.mysql_client_argv(), "-e", "SELECT 1"], env=mysql.tool_env())
    server.stop()

Environment variables: ``MYSQL_CDC_TEST_ROOT_PASSWORD``, ``MYSQL_CDC_TEST_CDC_PASSWORD`` (the
accounts' passwords, see :mod:`~testbed.mysql.access`), ``MYSQL_CDC_LOCAL_MYSQL_DIR`` (another
directory instead of ``<repo>/.cache/mysql``), ``MYSQL_CDC_DEBIAN_MIRROR`` (default: the Debian
mirror the system's apt sources use) and ``MYSQL_CDC_DEBIAN_SUITE`` (default ``sid``).
"""

from __future__ import annotations

from testbed.mysql.access import (
    CDC_PASSWORD_ENV,
    CDC_USER,
    DEFAULT_CDC_PASSWORD,
    DEFAULT_ROOT_PASSWORD,
    HOST,
    ROOT_PASSWORD_ENV,
    ROOT_USER,
)
from testbed.mysql.errors import LocalMySQLError
from testbed.mysql.fleet import list_instances, stop_all
from testbed.mysql.installer import charsets_dir, install, is_installed, server_version, tool_argv, tool_env
from testbed.mysql.instance import LocalMySQL
from testbed.mysql.paths import cache_dir, instances_dir, prefix_dir
from testbed.mysql.settings import DEFAULT_SETTINGS
from testbed.mysql.urls import ServerUrl, parse_server_url

__all__ = [
    "CDC_PASSWORD_ENV",
    "CDC_USER",
    "DEFAULT_CDC_PASSWORD",
    "DEFAULT_ROOT_PASSWORD",
    "DEFAULT_SETTINGS",
    "HOST",
    "ROOT_PASSWORD_ENV",
    "ROOT_USER",
    "LocalMySQL",
    "LocalMySQLError",
    "ServerUrl",
    "cache_dir",
    "charsets_dir",
    "install",
    "instances_dir",
    "is_installed",
    "list_instances",
    "parse_server_url",
    "prefix_dir",
    "server_version",
    "stop_all",
    "tool_argv",
    "tool_env",
]
