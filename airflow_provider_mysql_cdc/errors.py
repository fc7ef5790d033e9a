"""Every exception of the package, in one module.

Every error raised on purpose by this package derives from :class:`MySqlCdcError` and from exactly
one of its two branches:

* :class:`TerminalCdcError`: retrying the same task will fail the same way; a person has to change
  something (a server setting, a grant, a connection, an input).
* :class:`TransientCdcError`: the same task may succeed when retried (network, server restart).

Airflow retries decide by type, never by message. Messages name the pipeline, window, table, server
setting or GTID set involved and the fix, and never credentials. The last section holds the signals
that one part of the package raises and another catches nearby (they never reach a task); they sit on
the same branches so that one that escapes by mistake still fails the task the right way.

No import: every other module may import this one.
"""

from __future__ import annotations


class MySqlCdcError(Exception):
    """Raised for any failure this package detects; the base of all its exceptions."""


class TerminalCdcError(MySqlCdcError):
    """Raised when a retry cannot help until someone changes configuration, data or grants."""


class TransientCdcError(MySqlCdcError):
    """Raised when the same operation may succeed if it is retried later."""


# -- arguments, configuration, versions ---------------------------------------------------------------


class InvalidGtidSetError(TerminalCdcError, ValueError):
    """Raised when a text is not a valid MySQL GTID set or GTID; the message quotes the text."""


class ConfigurationError(TerminalCdcError, ValueError):
    """Raised when an argument or connection setting of this package is invalid."""


class UnsupportedNameError(ConfigurationError):
    """Raised when a selected table's name or a column's cannot be followed: a database name with a dot
    (the package names a table ``database.table``, so it would be read as another database's table), a
    slash in a database or table name, a column with the staging prefix or named like one of Iceberg's
    metadata columns Spark cannot merge into a target with."""


class MissingDependencyError(TerminalCdcError, ImportError):
    """Raised when an optional Python package needed for the requested work is not installed."""


class ApplyContractError(TerminalCdcError):
    """Raised when an apply spec or report file cannot be read: not JSON, another format version, or
    fields this provider does not know (the Spark driver runs another provider version)."""


# -- the MySQL server: access, settings, privileges ---------------------------------------------------


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


class MissingReplicationPrivilegeError(PreflightFailedError):
    """Raised when the account lacks REPLICATION CLIENT or REPLICATION SLAVE; names the GRANT to run."""


class BinlogFileGoneError(TransientCdcError):
    """Raised when a listed binlog file was purged while its header was being read."""


# -- the metadata store ---------------------------------------------------------------------------------


class FrontierConflictError(TransientCdcError):
    """Raised when a compare-and-set lost a race: someone else advanced the same record first."""


class FrontierStoreError(TerminalCdcError):
    """Raised when the metadata tables are missing, newer than this code, or hold invalid data."""


class UnknownPipelineError(TerminalCdcError):
    """Raised when a pipeline is used before it was registered with an initial frontier."""


# -- windows and binlog capture ---------------------------------------------------------------------------


class WindowOrderError(TerminalCdcError):
    """Raised when a new window is requested while an earlier one is still unpublished."""


class WindowNotClosedError(TransientCdcError):
    """Raised when a ``data_interval`` window is captured before its interval has ended on the server."""


class WindowIncompleteError(TransientCdcError):
    """Raised when transactions inside a window's bound did not arrive from the server in time."""


class CaptureDivergedError(TerminalCdcError):
    """Raised when re-capturing a published window gives different content than its manifest."""


class SnapshotInProgressError(TransientCdcError):
    """Raised when a window would need the hand-off of a snapshot whose chunks are not all finished."""


class BinlogPurgedError(TerminalCdcError):
    """Raised when binlogs holding transactions after the reader's start set are already purged."""


class BinlogConnectionLostError(TransientCdcError):
    """Raised when the binlog stream's connection is lost; the message names the last GTID read."""


class BinlogStreamError(TerminalCdcError):
    """Raised when the server ends the stream with an error or sends what cannot be read safely."""


class TransactionPayloadError(TerminalCdcError):
    """Raised when a ``Transaction_payload_event`` cannot be read exactly: a malformed header, an
    unknown compression type, a corrupt or truncated payload, or inner events that do not add up."""


class UnmappableTextError(TerminalCdcError):
    """Raised for a text value holding a byte sequence MySQL itself has no Unicode character for (a
    client reading it through ``utf8mb4`` gets ``?``), or, in a primary key, one whose character
    another sequence also has (two keys MySQL keeps apart would be one in the target)."""


# -- snapshots ------------------------------------------------------------------------------------------


class TableWithoutKeyError(TerminalCdcError):
    """Raised for a target whose recorded state says its table lost its primary key (states written before
    tables without a key were replicated as multisets); a fresh snapshot of the table ends it."""


class SnapshotLockTimeoutError(TransientCdcError):
    """Raised when ``LOCK TABLES ... READ`` waited too long behind running transactions."""


class SnapshotNotPlannedError(TerminalCdcError):
    """Raised when a chunk is run that the metadata store does not know."""


# -- staging, decoding, tracked schemas -------------------------------------------------------------------


class CorruptStagingError(TerminalCdcError):
    """Raised when a manifest or staged file is unreadable, edited, truncated or fails its checksum."""


class StagingWriteError(TransientCdcError):
    """Raised when the staging filesystem refuses a write (permissions, network, quota)."""


class RowPacketError(TerminalCdcError):
    """Raised when a result's row packets do not have the shape the column definitions announce."""


class SchemaModelError(TerminalCdcError):
    """Raised when a table definition cannot be read into a tracked schema (the message says why)."""


# -- apply ------------------------------------------------------------------------------------------------


class ApplyGapError(TerminalCdcError):
    """Raised when a table would skip a window that holds its changes (windows apply in order)."""


class ForeignTableError(TerminalCdcError):
    """Raised when the target table is written by another pipeline."""


class SnapshotNotReadyError(TransientCdcError):
    """Raised when a window's governing snapshot has no published table manifest yet."""


class UnsupportedSchemaChangeError(TerminalCdcError):
    """Raised when a table's staged schema changed in a way the target table cannot follow."""


class TargetDivergedError(TerminalCdcError):
    """Raised when a window takes away copies of a row of a table without a key that its target does not
    hold (or cannot tell apart): the target no longer equals MySQL before the window; re-snapshot it."""


class RebuildPendingError(TerminalCdcError):
    """Raised when a table waits for the fresh snapshot a change it could not follow asked for, and the
    window to apply is not governed by one."""


class SparkMemoryTooSmallError(TerminalCdcError):
    """Raised before the apply job is submitted when the memory Spark is given cannot hold the largest
    staged row of the run's windows; names the setting and the value to use."""


class WarehouseUnreachableError(TransientCdcError):
    """Raised when the apply's Iceberg catalog (REST service, metastore) or its warehouse storage cannot
    be reached; nothing is applied."""


class AppliedStateExpiredError(TerminalCdcError):
    """Raised when a target's snapshot history was expired past its newest apply commit, so which windows
    it holds cannot be read (a snapshot expiration that did not keep that commit)."""


class TableMaintenanceError(TransientCdcError):
    """Raised when an Iceberg maintenance procedure failed on a table (a concurrent commit, storage);
    the table's data is unchanged by the failed step and the next run does it again."""


# -- signals caught inside the package ----------------------------------------------------------------------


class DdlSyntaxError(TerminalCdcError, ValueError):
    """Raised when a statement cannot be tokenized or parsed; the parser turns it into ``UnparsedDdl``."""


class NotExact(TerminalCdcError, ValueError):
    """Raised when the value MySQL stores for a DDL literal cannot be stated exactly; the message says
    why (the schema effects turn it into a rebuild of the table)."""


class ModelMismatch(TerminalCdcError):
    """Raised inside ``core.table_schema.apply_statement`` when a statement MySQL accepted does not fit
    the tracked schema (the model is stale): the table becomes unknown."""


class JsonDiffError(TerminalCdcError, ValueError):
    """Raised when a partial JSON diff list or a document cannot be read, or a diff does not fit its
    document; capture names the table and GTID when it stops on one."""


class BinlogReconnectRefusedError(TransientCdcError):
    """Raised inside the binlog reader when python-mysql-replication starts its silent reconnect (which
    would replay from the first position); the reader turns it into :class:`BinlogConnectionLostError`."""


class StaleApplyStateError(TransientCdcError):
    """Raised when a target table's applied state changed between planning and a step (another apply
    committed); the apply re-reads the state and plans the table again."""


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


# -- verify: targets compared with the source as of one GTID set -------------------------------------


class TargetDiffersError(TerminalCdcError):
    """Raised by the verify operator when a target table differs from its MySQL table as of the GTID set
    of the verification's consistent read; the message names the pipeline, tables, GTID set, a few keys
    and the fix (re-snapshot the table)."""


class TargetNotVerifiableError(TransientCdcError):
    """Raised when a target cannot be brought to the source's GTID set in memory right now (no apply
    has written it yet, a snapshot is still being loaded, a schema change lies between its frontier and
    the source's read); retrying after the next apply usually succeeds."""


class TargetAheadOfSourceError(TerminalCdcError):
    """Raised when a target's applied frontier holds transactions the source's consistent read does not
    (the connection reaches another server or history than the one the pipeline applied from)."""


def error_class(class_name: str) -> type[MySqlCdcError] | None:
    """This module's exception class named ``class_name`` (as another process reported it); None for
    any other name (a Spark or Python exception)."""
    found = globals().get(class_name)
    return found if isinstance(found, type) and issubclass(found, MySqlCdcError) else None


def error_named(class_name: str, message: str, fallback: type[MySqlCdcError]) -> MySqlCdcError:
    """The exception another process reported by class name (a Spark job's report, a child's answer):
    this module's ``class_name`` with ``message``, or ``fallback`` when there is no such class or it
    needs more than a message to be built. Its type still decides retries in the task that raises it."""
    found = error_class(class_name)
    if found is not None:
        try:
            return found(message)
        except TypeError:
            pass
    return fallback(message)


class MetadataStoreMismatchError(TerminalCdcError):
    """Raised when the metadata store a task reads does not hold the pipeline registration its staging root
    was written under: another store (a worker-local SQLite file under a distributed executor, a reset or
    replaced database). Going on would number windows again over the ones already staged and applied."""
