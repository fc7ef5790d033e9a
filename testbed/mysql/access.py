"""How clients reach a local instance: the address it binds, the accounts it gets on first start,
their passwords and the client option files that carry them.

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
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from testbed.mysql.errors import LocalMySQLError

HOST: Final = "127.0.0.1"
ROOT_USER: Final = "root"
CDC_USER: Final = "cdc"
ROOT_PASSWORD_ENV: Final = "MYSQL_CDC_TEST_ROOT_PASSWORD"
CDC_PASSWORD_ENV: Final = "MYSQL_CDC_TEST_CDC_PASSWORD"
DEFAULT_ROOT_PASSWORD: Final = "root-test-pw"
DEFAULT_CDC_PASSWORD: Final = "cdc-test-pw"


def root_password() -> str:
    """Root password: ``$MYSQL_CDC_TEST_ROOT_PASSWORD`` or ``root-test-pw``."""
    return os.environ.get(ROOT_PASSWORD_ENV, DEFAULT_ROOT_PASSWORD)


def cdc_password() -> str:
    """Password of the ``cdc`` user: ``$MYSQL_CDC_TEST_CDC_PASSWORD`` or ``cdc-test-pw``."""
    return os.environ.get(CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD)


def password_for(user: str) -> str:
    """The password of one of the two managed accounts."""
    if user == ROOT_USER:
        return root_password()
    if user == CDC_USER:
        return cdc_password()
    raise LocalMySQLError(f"unknown user {user!r}: the test bed manages {ROOT_USER!r} and {CDC_USER!r}")


def sql_string(value: str) -> str:
    """A SQL string literal for ``value``."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def accounts_sql() -> str:
    """The statements that create (or reset) the ``root`` and ``cdc`` accounts, without binlogging them."""
    root = sql_string(root_password())
    cdc = sql_string(cdc_password())
    return f"""
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


def option_value(value: str) -> str:
    """Quote a value for a MySQL option file."""
    if "\n" in value or ('"' in value and "'" in value):
        raise LocalMySQLError("passwords with newlines or both quote characters are not supported")
    if '"' in value:
        return "'" + value + "'"
    return '"' + value.replace("\\", "\\\\") + '"'


def write_client_options(path: Path, user: str, socket_path: Path, port: int, charsets: Path) -> Path:
    """Write (mode 0600) a ``[client]`` option file for ``user`` (with its password); ``path``."""
    content = (
        "[client]\n"
        f"user={user}\n"
        f"password={option_value(password_for(user))}\n"
        f"socket={socket_path}\n"
        f"port={port}\n"
        f"character-sets-dir={charsets}\n"
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(content)
    return path
