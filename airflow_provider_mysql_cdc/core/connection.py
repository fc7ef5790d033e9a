"""How to reach a MySQL server: a typed, frozen, secret-safe connection config."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_mysql_cdc.errors import ConfigurationError


class SslMode(str, enum.Enum):
    """The MySQL client's ``--ssl-mode`` values, with the same meaning."""

    DISABLED = "DISABLED"
    PREFERRED = "PREFERRED"
    REQUIRED = "REQUIRED"
    VERIFY_CA = "VERIFY_CA"
    VERIFY_IDENTITY = "VERIFY_IDENTITY"

    @classmethod
    def parse(cls, value: str | None) -> SslMode:
        """Accept any case and ``-``/``_``; ``None`` means PREFERRED."""
        if value is None or value == "":
            return cls.PREFERRED
        normalized = str(value).strip().upper().replace("-", "_")
        try:
            return cls(normalized)
        except ValueError:
            choices = ", ".join(mode.value for mode in cls)
            raise ConfigurationError(f"unknown ssl_mode {value!r}; use one of {choices}") from None


#: What every connection to MySQL runs first (the source's, and a metadata store's on MySQL): a
#: server-wide ``sql_select_limit`` (a session default a DBA may set) would cut every result, ``SHOW``
#: statements included, to that many rows.
MYSQL_SESSION_START = "SET SESSION sql_select_limit = 18446744073709551615"


@dataclass(frozen=True)
class MySqlConnectionConfig:
    """Everything needed to open a client or binlog connection. ``repr`` never shows the password."""

    host: str
    port: int = 3306
    user: str = "root"
    password: str = field(default="", repr=False)
    database: str | None = None
    unix_socket: str | None = None
    ssl_mode: SslMode = SslMode.PREFERRED
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = field(default=None, repr=False)
    connect_timeout: int = 10
    #: ``server_id`` this reader announces on the binlog stream; must differ from every real replica.
    replica_server_id: int | None = None

    def __post_init__(self) -> None:
        if not self.host and not self.unix_socket:
            raise ConfigurationError("MySQL connection needs a host (or a unix socket)")
        if not 0 < int(self.port) < 65536:
            raise ConfigurationError(f"MySQL port {self.port} is not between 1 and 65535")
        if self.replica_server_id is not None and not 0 < int(self.replica_server_id) < 2**32:
            raise ConfigurationError(f"replica server id {self.replica_server_id} must be in 1..4294967295")
        if self.ssl_mode in (SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY) and not self.ssl_ca:
            raise ConfigurationError(f"ssl_mode {self.ssl_mode.value} needs ssl_ca (the CA certificate file)")

    @property
    def address(self) -> str:
        """``user@host:port`` for messages (no password)."""
        return f"{self.user}@{self.unix_socket or self.host}" + ("" if self.unix_socket else f":{self.port}")

    @property
    def endpoint(self) -> str:
        """``host:port`` (or the socket path): the server, without the account."""
        return self.unix_socket or f"{self.host}:{self.port}"

    def pymysql_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` (also the binlog reader's connection settings)."""
        import ssl as ssl_module

        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": int(self.port),
            "user": self.user,
            "password": self.password,
            "connect_timeout": self.connect_timeout,
            "charset": "utf8mb4",
        }
        if self.unix_socket:
            kwargs["unix_socket"] = self.unix_socket
        if self.database:
            kwargs["database"] = self.database
        if self.ssl_mode is not SslMode.DISABLED:
            context = ssl_module.create_default_context(cafile=self.ssl_ca) if self.ssl_ca else None
            if context is None or self.ssl_mode in (SslMode.PREFERRED, SslMode.REQUIRED):
                context = context or ssl_module.SSLContext(ssl_module.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl_module.CERT_NONE
            elif self.ssl_mode is SslMode.VERIFY_CA:
                context.check_hostname = False
            if self.ssl_cert:
                context.load_cert_chain(self.ssl_cert, self.ssl_key)
            kwargs["ssl"] = context
        return kwargs
