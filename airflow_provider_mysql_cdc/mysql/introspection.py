"""Read what preflight and capture need to know from a live server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.core.chunks import quote_identifier
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.ddl_parser import parse_ddl
from airflow_provider_mysql_cdc.core.ddl_statements import UnparsedDdl
from airflow_provider_mysql_cdc.core.foreign_keys import ROW_CHANGING_RULES
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.preflight import (
    CHECKED_VARIABLES,
    DEFAULT_MIN_BINLOG_RETENTION_SECONDS,
    Grants,
    PreflightReport,
    ServerFacts,
    ServerVersion,
    TableName,
    evaluate,
    sql_account,
)
from airflow_provider_mysql_cdc.core.storage_engines import UNFOLLOWABLE_ENGINES, TableEngine, unfollowable_engine
from airflow_provider_mysql_cdc.core.windows import TableSelection
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    MissingPrivilegeError,
    MySqlQueryError,
    PreflightFailedError,
)
from airflow_provider_mysql_cdc.mysql.client import connection_to, query, query_value

if TYPE_CHECKING:
    from pymysql.connections import Connection


def read_server_facts(connection: Connection[Any], config: MySqlConnectionConfig, *, with_tables: bool) -> ServerFacts:
    """Version, account, binlog/GTID variables, grants and (optionally) the visible base tables."""
    version, comment, current_user = query(connection, config, "SELECT VERSION(), @@version_comment, CURRENT_USER()")[0]
    names = ", ".join(f"'{name}'" for name in CHECKED_VARIABLES)
    variables = {
        str(name).lower(): (None if value is None else str(value))
        for name, value in query(connection, config, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    }
    grants = Grants.parse(str(row[0]) for row in query(connection, config, "SHOW GRANTS"))
    tables: tuple[TableName, ...] = ()
    children: tuple[TableName, ...] = ()
    if with_tables:
        rows = query(
            connection,
            config,
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            "AND TABLE_SCHEMA NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema') "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME",
        )
        tables = tuple(TableName(str(db), str(table)) for db, table in rows)
        children = tuple(sorted(cascading_foreign_key_children(connection, config), key=str))
    server = ServerVersion.parse(str(version), str(comment or ""))
    do_db, ignore_db = _binlog_filters(connection, config, server)
    return ServerFacts(
        str(version),
        str(comment or ""),
        str(current_user),
        variables,
        grants,
        tables,
        do_db,
        ignore_db,
        _replica_channels(connection, config, server),
        children,
    )


def _replica_channels(connection: Connection[Any], config: MySqlConnectionConfig, server: ServerVersion) -> int:
    """How many replication channels the server replicates through (0 without the privilege to know)."""
    try:
        return len(query(connection, config, server.replica_status_statement))
    except MySqlQueryError:
        return 0


def _binlog_filters(
    connection: Connection[Any], config: MySqlConnectionConfig, server: ServerVersion
) -> tuple[str, str]:
    """``Binlog_Do_DB`` and ``Binlog_Ignore_DB`` of the binlog status (empty without a binlog or the
    privilege to read it: the preflight then reports that instead)."""
    try:
        rows = query(connection, config, server.binlog_status_statement)
    except MySqlQueryError:
        return "", ""
    if not rows:
        return "", ""
    return str(rows[0][2] or ""), str(rows[0][3] or "")


@dataclass(frozen=True)
class BinaryLogFile:
    """One binlog file as ``SHOW BINARY LOGS`` lists it."""

    name: str
    size_bytes: int


@dataclass(frozen=True)
class BinlogInventory:
    """The server's binlog position, GTID state and files."""

    server_uuid: str
    current_file: str
    current_position: int
    gtid_executed: GtidSet
    gtid_purged: GtidSet
    files: tuple[BinaryLogFile, ...]

    def as_xcom(self) -> dict[str, Any]:
        """Small JSON-safe summary for XCom and logs."""
        return {
            "server_uuid": self.server_uuid,
            "current_file": self.current_file,
            "current_position": self.current_position,
            "gtid_executed": str(self.gtid_executed),
            "gtid_purged": str(self.gtid_purged),
            "binlog_files": len(self.files),
            "binlog_bytes": sum(f.size_bytes for f in self.files),
        }


def read_binlog_inventory(connection: Connection[Any], config: MySqlConnectionConfig) -> BinlogInventory:
    """Current binlog file/position, ``gtid_executed``/``gtid_purged`` and the binlog files."""
    version, comment = query(connection, config, "SELECT VERSION(), @@version_comment")[0]
    server = ServerVersion.parse(str(version), str(comment or ""))
    status = query(connection, config, server.binlog_status_statement)
    current_file, position = (str(status[0][0]), int(status[0][1])) if status else ("", 0)
    files = tuple(BinaryLogFile(str(row[0]), int(row[1])) for row in query(connection, config, "SHOW BINARY LOGS"))
    executed, purged, uuid = query(
        connection, config, "SELECT @@GLOBAL.gtid_executed, @@GLOBAL.gtid_purged, @@server_uuid"
    )[0]
    return BinlogInventory(
        server_uuid=str(uuid),
        current_file=current_file,
        current_position=position,
        gtid_executed=GtidSet.parse(str(executed or "")),
        gtid_purged=GtidSet.parse(str(purged or "")),
        files=files,
    )


def read_gtid_executed(connection: Connection[Any], config: MySqlConnectionConfig) -> GtidSet:
    """``@@GLOBAL.gtid_executed`` as a :class:`GtidSet`."""
    return GtidSet.parse(str(query_value(connection, config, "SELECT @@GLOBAL.gtid_executed") or ""))


def run_preflight(
    config: MySqlConnectionConfig,
    table_patterns: Sequence[str] = (),
    *,
    min_binlog_retention_seconds: int = DEFAULT_MIN_BINLOG_RETENTION_SECONDS,
) -> PreflightReport:
    """Connect, read the server's facts and evaluate them (see :func:`core.preflight.evaluate`)."""
    with connection_to(config) as connection:
        facts = read_server_facts(connection, config, with_tables=bool(table_patterns))
    return evaluate(facts, table_patterns, min_binlog_retention_seconds=min_binlog_retention_seconds)


def require_server_settings(config: MySqlConnectionConfig) -> None:
    """Refuse a server whose binlog/GTID settings or replication grants do not fit CDC (the
    preflight's server checks, one connection); the error's message is the preflight report."""
    with connection_to(config) as connection:
        facts = read_server_facts(connection, config, with_tables=False)
    require_settings_fit(facts)


def require_settings_fit(facts: ServerFacts) -> None:
    """:func:`require_server_settings` on facts already read (a run's
    :class:`~airflow_provider_mysql_cdc.mysql.server_state.ServerState`)."""
    report = evaluate(facts)
    if not report.ok:
        raise PreflightFailedError(report.format())


def _visible_tables(connection: Connection[Any], source: MySqlConnectionConfig) -> list[tuple[str, str]]:
    rows = query(
        connection,
        source,
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
        "AND TABLE_SCHEMA NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema')",
    )
    return [(str(db), str(table)) for db, table in rows]


def tables_in_unfollowable_engines(connection: Connection[Any], source: MySqlConnectionConfig) -> dict[TableName, str]:
    """Table -> engine, for every base table on the server stored in an engine of
    :data:`~airflow_provider_mysql_cdc.core.storage_engines.UNFOLLOWABLE_ENGINES`."""
    engines = ", ".join(f"'{engine}'" for engine in UNFOLLOWABLE_ENGINES)
    rows = query(
        connection,
        source,
        "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM information_schema.TABLES "
        f"WHERE TABLE_TYPE = 'BASE TABLE' AND UPPER(ENGINE) IN ({engines}) ORDER BY TABLE_SCHEMA, TABLE_NAME",
    )
    return {TableName(str(db), str(table)): str(engine) for db, table, engine in rows}


def merge_members(
    connection: Connection[Any], source: MySqlConnectionConfig, engines: Mapping[TableName, str]
) -> dict[str, str]:
    """``db.table`` -> the MERGE table (``db.table``) whose ``UNION`` names it, for every MERGE table among
    ``engines`` (as :func:`tables_in_unfollowable_engines` gives them; read from each one's
    ``SHOW CREATE TABLE``)."""
    members: dict[str, str] = {}
    for merge, engine in engines.items():
        if unfollowable_engine(engine) != "MRG_MYISAM":
            continue
        show = f"SHOW CREATE TABLE {quote_identifier(merge.database)}.{quote_identifier(merge.table)}"
        statement = parse_ddl(str(query(connection, source, show)[0][1]), merge.database)
        for member in (statement.tables or ())[1:] if isinstance(statement, UnparsedDdl) else ():
            members.setdefault(str(member), str(merge))
    return members


def cascading_foreign_keys(
    connection: Connection[Any], source: MySqlConnectionConfig
) -> dict[TableName, set[TableName]]:
    """Parent table -> the tables with a foreign key to it whose ``ON DELETE`` or ``ON UPDATE`` changes
    their rows (:data:`~airflow_provider_mysql_cdc.core.foreign_keys.ROW_CHANGING_RULES`)."""
    rules = ", ".join(f"'{rule}'" for rule in sorted(ROW_CHANGING_RULES))
    rows = query(
        connection,
        source,
        "SELECT UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME, CONSTRAINT_SCHEMA, TABLE_NAME "
        f"FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE DELETE_RULE IN ({rules}) OR UPDATE_RULE IN ({rules})",
    )
    children: dict[TableName, set[TableName]] = {}
    for parent_db, parent, db, table in rows:
        children.setdefault(TableName(str(parent_db), str(parent)), set()).add(TableName(str(db), str(table)))
    return children


def cascading_foreign_key_children(connection: Connection[Any], source: MySqlConnectionConfig) -> set[TableName]:
    """Every table with a foreign key whose ``ON DELETE`` or ``ON UPDATE`` changes its rows."""
    return {child for children in cascading_foreign_keys(connection, source).values() for child in children}


def table_engine(
    connection: Connection[Any], source: MySqlConnectionConfig, database: str, table: str
) -> TableEngine | None:
    """The storage engine of a base table now, and when its definition last changed (None: no such table)."""
    query(connection, source, "SET SESSION time_zone = '+00:00'")  # CREATE_TIME is shown in the session's zone
    rows = query(
        connection,
        source,
        "SELECT ENGINE, UNIX_TIMESTAMP(CREATE_TIME) FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
        f"AND TABLE_SCHEMA = {connection.escape(database)} AND TABLE_NAME = {connection.escape(table)}",
    )
    if not rows:
        return None
    engine, changed_at = rows[0]
    return TableEngine(str(engine), None if changed_at is None else int(changed_at))


def selected_tables(connection: Connection[Any], source: MySqlConnectionConfig, selection: TableSelection) -> list[str]:
    """``db.table`` of every base table the selection matches, sorted."""
    return sorted(f"{db}.{table}" for db, table in _visible_tables(connection, source) if selection.matches(db, table))


def require_named_tables(connection: Connection[Any], source: MySqlConnectionConfig, selection: TableSelection) -> None:
    """Refuse include entries written as plain names (``db.table``, no glob character) that name no base
    table the account can see: a typo would otherwise capture nothing, without a word. A pattern
    (``db.orders_*``) that matches nothing yet is accepted: tables created later that match it are
    captured from their first row.

    Raises :class:`MissingPrivilegeError` when the account holds no SELECT on a missing name (tables
    without any privilege are invisible to it), :class:`ConfigurationError` otherwise."""
    named = [pattern for pattern in selection.include if not any(char in pattern for char in "*?[")]
    if not named:
        return
    visible = {f"{db}.{table}" for db, table in _visible_tables(connection, source)}
    missing = [name for name in named if name not in visible]
    if not missing:
        return
    facts = read_server_facts(connection, source, with_tables=False)
    account = sql_account(facts.current_user)
    if not facts.grants.role_grants:  # privileges through roles are not judged (see the preflight)
        unreadable = [name for name in missing if not facts.grants.allows("SELECT", TableName(*name.split(".", 1)))]
        if unreadable:
            grants = " ".join(
                f"GRANT SELECT ON `{name.split('.', 1)[0]}`.`{name.split('.', 1)[1]}` TO {account};"
                for name in unreadable
            )
            raise MissingPrivilegeError(
                f"{account} holds no SELECT on {', '.join(unreadable)} (named in the table list), so it cannot "
                f"see or snapshot it; nothing was recorded. Grant it: {grants} (if the name is wrong instead, "
                "fix the table list)"
            )
    server = source.address.rpartition("@")[2]
    raise ConfigurationError(
        f"the table list names {', '.join(repr(name) for name in missing)}, but {account} sees no such base "
        f"table on {server}; nothing was recorded. Check the spelling (database and table names are "
        "case-sensitive) or create the table. To capture a table that does not exist yet, select it with a "
        f"pattern such as '{missing[0]}*': a pattern that matches nothing yet is accepted"
    )
