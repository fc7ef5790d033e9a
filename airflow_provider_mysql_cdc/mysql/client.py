"""Open PyMySQL connections and turn driver errors into the package's exceptions (without secrets)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pymysql
from pymysql.connections import Connection

from airflow_provider_mysql_cdc.core.connection import MYSQL_SESSION_START, MySqlConnectionConfig, SslMode
from airflow_provider_mysql_cdc.errors import (
    MySqlAuthenticationError,
    MySqlQueryError,
    MySqlUnreachableError,
    TerminalCdcError,
)

#: MySQL client/server error codes that mean "who you are is not accepted".
_AUTH_ERRORS = {1044, 1045, 1698, 2059, 2061}
#: Error codes that mean "could not reach / lost the server".
_UNREACHABLE_ERRORS = {2002, 2003, 2005, 2006, 2013, 2055}


def error_code(exc: BaseException) -> int | None:
    """The MySQL error number of a driver exception, or None."""
    args: tuple[Any, ...] = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def error_text(exc: BaseException, config: MySqlConnectionConfig) -> str:
    """The driver exception's message, with the connection's password masked."""
    args: tuple[Any, ...] = getattr(exc, "args", ())
    text = str(args[1]) if len(args) > 1 else str(exc)
    if config.password:
        text = text.replace(config.password, "***")
    return text


def connect(config: MySqlConnectionConfig, **overrides: Any) -> Connection[Any]:
    """Open a connection; raise :class:`MySqlAuthenticationError` or :class:`MySqlUnreachableError`."""
    try:
        connection: Connection[Any] = pymysql.connect(**{**config.pymysql_kwargs(), "autocommit": True, **overrides})
    except pymysql.err.OperationalError as exc:
        code = error_code(exc)
        detail = error_text(exc, config)
        if code in _AUTH_ERRORS:
            raise MySqlAuthenticationError(
                f"MySQL rejected {config.address}: {detail}. Check the connection's login and password "
                "(and that the account exists for this client host)."
            ) from None
        if code in _UNREACHABLE_ERRORS or code is None:
            raise MySqlUnreachableError(
                f"cannot reach MySQL at {config.address}: {detail}. Check host, port, firewall and that "
                "the server is running."
            ) from None
        raise MySqlQueryError(f"connecting to {config.address} failed: [{code}] {detail}") from None
    except OSError as exc:
        raise MySqlUnreachableError(f"cannot reach MySQL at {config.address}: {exc}") from None
    try:
        query(connection, config, MYSQL_SESSION_START)
        if config.ssl_mode is not SslMode.DISABLED and config.ssl_mode is not SslMode.PREFERRED:
            status = query(connection, config, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            if not status or not status[0][1]:
                raise TerminalCdcError(
                    f"ssl_mode {config.ssl_mode.value} but the connection to {config.address} is not encrypted: "
                    "enable TLS on the server or lower ssl_mode"
                )
    except BaseException:
        connection.close()
        raise
    return connection


@contextlib.contextmanager
def connection_to(config: MySqlConnectionConfig, **overrides: Any) -> Iterator[Connection[Any]]:
    """``with connection_to(config) as conn:`` opens and always closes a connection."""
    connection = connect(config, **overrides)
    try:
        yield connection
    finally:
        connection.close()


def query(connection: Connection[Any], config: MySqlConnectionConfig, sql: str) -> list[tuple[Any, ...]]:
    """Run one statement and return all rows; driver errors become :class:`MySqlQueryError`."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())
    except pymysql.err.OperationalError as exc:
        code = error_code(exc)
        if code in _UNREACHABLE_ERRORS:
            raise MySqlUnreachableError(f"lost MySQL at {config.address}: {error_text(exc, config)}") from None
        raise MySqlQueryError(f"{sql!r} failed on {config.address}: [{code}] {error_text(exc, config)}") from None
    except pymysql.err.MySQLError as exc:
        code = error_code(exc)
        raise MySqlQueryError(f"{sql!r} failed on {config.address}: [{code}] {error_text(exc, config)}") from None


def query_value(connection: Connection[Any], config: MySqlConnectionConfig, sql: str) -> Any:
    """First column of the first row, or ``None``."""
    rows = query(connection, config, sql)
    return rows[0][0] if rows else None
