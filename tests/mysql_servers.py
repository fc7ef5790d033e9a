"""MySQL servers for the test suite: local ones started by :mod:`testbed.mysql`, or an
existing server named by ``MYSQL_CDC_EXTERNAL_URL`` (``mysql://root:PASSWORD@HOST:PORT``, an
account that may create users and databases, e.g. the one from ``docker/compose.yaml``)."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from testbed.mysql import CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD, LocalMySQL, install, parse_server_url

EXTERNAL_URL_ENV = "MYSQL_CDC_EXTERNAL_URL"
CDC_USER = "cdc"
CDC_GRANTS = (
    "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%'",
    "GRANT SELECT, LOCK TABLES ON *.* TO 'cdc'@'%'",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class MySqlTestServer:
    """A running server with an admin account and the documented ``cdc`` account."""

    admin: MySqlConnectionConfig
    cdc: MySqlConnectionConfig
    local: LocalMySQL | None = None

    def execute(self, *statements: str) -> list[tuple[Any, ...]]:
        """Run statements as admin; return the last one's rows."""
        rows: list[tuple[Any, ...]] = []
        with connection_to(self.admin) as connection:
            for statement in statements:
                rows = query(connection, self.admin, statement)
        return rows

    def utc_now(self) -> datetime:
        """The server's clock (aware UTC, microseconds): what a ``data_interval`` cut-off is compared with,
        since commit timestamps come from it."""
        moment = self.execute("SELECT UTC_TIMESTAMP(6)")[0][0]
        assert isinstance(moment, datetime)
        return moment.replace(tzinfo=UTC)

    def account(self, user: str, password: str) -> MySqlConnectionConfig:
        """A config for another account on the same server."""
        return MySqlConnectionConfig(host=self.admin.host, port=self.admin.port, user=user, password=password)

    def airflow_conn_json(self, config: MySqlConnectionConfig | None = None, conn_type: str = "mysql_cdc") -> str:
        """The JSON form of an Airflow connection, for ``AIRFLOW_CONN_<ID>``."""
        import json

        chosen = config or self.cdc
        return json.dumps(
            {
                "conn_type": conn_type,
                "host": chosen.host,
                "port": chosen.port,
                "login": chosen.user,
                "password": chosen.password,
                "extra": {"server_id": 4242},
            }
        )


def external_server() -> MySqlTestServer | None:
    """The server named by ``MYSQL_CDC_EXTERNAL_URL``, with the ``cdc`` account ensured; else None."""
    url = os.environ.get(EXTERNAL_URL_ENV)
    if not url:
        return None
    parts = parse_server_url(url)
    admin = MySqlConnectionConfig(host=parts.host, port=parts.port, user=parts.user, password=parts.password)
    cdc_password = os.environ.get(CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD)
    server = MySqlTestServer(admin, MySqlConnectionConfig(admin.host, admin.port, CDC_USER, cdc_password))
    server.execute(f"CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY '{cdc_password}'", *CDC_GRANTS)
    return server


def start_local(name: str, settings: dict[str, str] | None = None) -> MySqlTestServer:
    """Start a fresh local server (its old data, if any, is deleted first)."""
    install()
    stale = LocalMySQL(name, port=free_port())
    stale.destroy()
    server = LocalMySQL(name, port=free_port(), settings=settings or {})
    server.start()
    admin = MySqlConnectionConfig(host=server.host, port=server.port, user="root", password=server.root_password)
    cdc = MySqlConnectionConfig(host=server.host, port=server.port, user=CDC_USER, password=server.cdc_password)
    return MySqlTestServer(admin, cdc, server)


def stop_local(servers: Sequence[MySqlTestServer]) -> None:
    """Stop local servers by PID and delete their data."""
    for server in servers:
        if server.local is not None:
            server.local.destroy()


@contextlib.contextmanager
def running_local(name: str, settings: dict[str, str] | None = None) -> Iterator[MySqlTestServer]:
    """A fresh local server for the duration of the ``with`` block."""
    server = start_local(name, settings)
    try:
        yield server
    finally:
        stop_local([server])
