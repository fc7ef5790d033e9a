"""The package's exceptions.

Every error raised on purpose by this package derives from :class:`MySqlCdcError` and from exactly
one of its two branches:

* :class:`TerminalCdcError`: retrying the same task will fail the same way; a person has to change
  something (a server setting, a grant, a connection, an input).
* :class:`TransientCdcError`: the same task may succeed when retried (network, server restart).

Messages name the pipeline, window, server setting or GTID set involved, and never credentials.
"""

from __future__ import annotations


class MySqlCdcError(Exception):
    """Raised for any failure this package detects; the base of all its exceptions."""


class TerminalCdcError(MySqlCdcError):
    """Raised when a retry cannot help until someone changes configuration, data or grants."""


class TransientCdcError(MySqlCdcError):
    """Raised when the same operation may succeed if it is retried later."""


class InvalidGtidSetError(TerminalCdcError, ValueError):
    """Raised when a text is not a valid MySQL GTID set or GTID; the message quotes the text."""


class ConfigurationError(TerminalCdcError, ValueError):
    """Raised when an argument or connection setting of this package is invalid."""


class MissingDependencyError(TerminalCdcError, ImportError):
    """Raised when an optional Python package needed for the requested work is not installed."""


class MySqlAuthenticationError(TerminalCdcError):
    """Raised when MySQL rejects the connection's user name or password."""


class MySqlUnreachableError(TransientCdcError):
    """Raised when the MySQL server cannot be reached (host, port, network, server down)."""


class MySqlQueryError(TerminalCdcError):
    """Raised when an introspection statement fails for a reason other than connectivity."""


class PreflightFailedError(TerminalCdcError):
    """Raised when preflight finds server settings or privileges that prevent CDC."""


class MissingPrivilegeError(TerminalCdcError):
    """Raised when the connection's account lacks a privilege a snapshot or capture needs; the message
    holds the GRANT statements."""


class FrontierConflictError(TransientCdcError):
    """Raised when a compare-and-set lost a race: someone else advanced the same record first."""


class TableWithoutKeyError(TerminalCdcError):
    """Raised when a table has no primary key, no unique NOT NULL key and no key columns named by the user
    (also when a table loses its primary key while it is captured)."""


class ServerHistoryError(TerminalCdcError):
    """Raised before a capture or snapshot reads anything when the server the connection reaches cannot
    continue the pipeline's history (see :mod:`airflow_provider_mysql_cdc.core.topology`); nothing was
    staged or recorded. ``missing_gtids`` is the GTID set text of what the pipeline holds and the server
    lacks (may be empty after a reset)."""

    def __init__(self, message: str, missing_gtids: str = "") -> None:
        super().__init__(message)
        self.missing_gtids = missing_gtids


class FrontierNotOnServerError(ServerHistoryError):
    """Raised when the server's ``gtid_executed`` lacks transactions the pipeline already captured or
    snapshotted (a lagging replica, a restored backup); the message lists them and the choices."""


class ServerChangedError(FrontierNotOnServerError):
    """Raised when the connection reaches another server (another ``server_uuid``) than the pipeline's
    last run read, and that server lacks transactions the pipeline already captured."""


class ServerHistoryResetError(ServerHistoryError):
    """Raised when the server's own history went backwards since the pipeline last read it (``RESET
    BINARY LOGS AND GTIDS``, a restored backup of the same server, binlog files started over)."""
