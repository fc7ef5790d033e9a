"""``MySqlCdcHook``: the ``mysql_cdc`` connection type (plain ``mysql`` connections work too).

PyMySQL is imported by the methods that talk to the server, not when a DAG file is parsed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig, SslMode
from airflow_provider_mysql_cdc.core.preflight import DEFAULT_MIN_BINLOG_RETENTION_SECONDS, PreflightReport
from airflow_provider_mysql_cdc.errors import ConfigurationError, MySqlCdcError

if TYPE_CHECKING:
    from pymysql.connections import Connection

    from airflow_provider_mysql_cdc.mysql.introspection import BinlogInventory


def _int_or_none(value: Any, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"connection extra {name!r} must be an integer, got {value!r}") from None


def config_from_connection_fields(
    *,
    host: str | None,
    port: int | None,
    login: str | None,
    password: str | None,
    schema: str | None,
    extra: Mapping[str, Any],
) -> MySqlConnectionConfig:
    """Translate an Airflow Connection's fields into a :class:`MySqlConnectionConfig`.

    Understands this provider's extras (``server_id``, ``ssl_mode``, ``ssl_ca``, ``ssl_cert``,
    ``ssl_key``, ``connect_timeout``, ``unix_socket``) and the MySQL provider's ``ssl`` extra
    (a dict or JSON text with ``ca``/``cert``/``key``).
    """
    ssl_extra = extra.get("ssl") or {}
    if isinstance(ssl_extra, str):
        try:
            ssl_extra = json.loads(ssl_extra)
        except json.JSONDecodeError:
            raise ConfigurationError("connection extra 'ssl' must be a JSON object with ca/cert/key") from None
    ssl_ca = extra.get("ssl_ca") or ssl_extra.get("ca")
    return MySqlConnectionConfig(
        host=host or "",
        port=int(port or 3306),
        user=login or "",
        password=password or "",
        database=schema or None,
        unix_socket=extra.get("unix_socket") or None,
        ssl_mode=SslMode.parse(extra.get("ssl_mode") or ("VERIFY_CA" if ssl_ca else None)),
        ssl_ca=ssl_ca,
        ssl_cert=extra.get("ssl_cert") or ssl_extra.get("cert"),
        ssl_key=extra.get("ssl_key") or ssl_extra.get("key"),
        connect_timeout=_int_or_none(extra.get("connect_timeout"), "connect_timeout") or 10,
        replica_server_id=_int_or_none(extra.get("server_id"), "server_id"),
    )


class MySqlCdcHook(BaseHook):
    """Talks to the MySQL source of a CDC pipeline: preflight, binlog inventory, plain queries.

    The connection form (labels, placeholders, the extras' fields) is declared once, in
    :func:`airflow_provider_mysql_cdc.get_provider_info.get_provider_info`.

    :param mysql_cdc_conn_id: an Airflow connection of type ``mysql_cdc`` or ``mysql``.
    """

    conn_name_attr = "mysql_cdc_conn_id"
    default_conn_name = "mysql_cdc_default"
    conn_type = "mysql_cdc"
    hook_name = "MySQL CDC"

    def __init__(self, mysql_cdc_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self._config: MySqlConnectionConfig | None = None

    def get_connection_config(self) -> MySqlConnectionConfig:
        """Resolve the Airflow connection (once) into a typed config."""
        if self._config is None:
            connection = self.get_connection(self.mysql_cdc_conn_id)
            self._config = config_from_connection_fields(
                host=connection.host,
                port=connection.port,
                login=connection.login,
                password=connection.password,
                schema=connection.schema,
                extra=connection.extra_dejson,
            )
        return self._config

    def get_conn(self) -> Connection[Any]:
        """A new autocommit PyMySQL connection; the caller closes it."""
        from airflow_provider_mysql_cdc.mysql.client import connect

        return connect(self.get_connection_config())

    def preflight(
        self,
        table_patterns: Sequence[str] = (),
        *,
        min_binlog_retention_seconds: int = DEFAULT_MIN_BINLOG_RETENTION_SECONDS,
    ) -> PreflightReport:
        """Check settings and privileges; the report lists every problem with its fix."""
        from airflow_provider_mysql_cdc.mysql.introspection import run_preflight

        return run_preflight(
            self.get_connection_config(),
            table_patterns,
            min_binlog_retention_seconds=min_binlog_retention_seconds,
        )

    def binlog_inventory(self) -> BinlogInventory:
        """Binlog files, current position and GTID state of the source."""
        from airflow_provider_mysql_cdc.mysql.client import connection_to
        from airflow_provider_mysql_cdc.mysql.introspection import read_binlog_inventory

        config = self.get_connection_config()
        with connection_to(config) as connection:
            return read_binlog_inventory(connection, config)

    def test_connection(self) -> tuple[bool, str]:
        """Used by the Airflow UI's Test button."""
        try:
            report = self.preflight()
        except MySqlCdcError as exc:
            return False, str(exc)
        return report.ok, report.format()
