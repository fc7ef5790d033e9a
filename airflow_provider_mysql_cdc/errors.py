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


class ApplyContractError(TerminalCdcError):
    """Raised when an apply spec or report file cannot be read: not JSON, another format version, or
    fields this provider does not know (the Spark driver runs another provider version)."""
