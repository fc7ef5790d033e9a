"""Preflight: decide from facts read off a server whether binlog CDC can run, and say how to fix it.

Pure logic. ``airflow_provider_mysql_cdc.mysql.introspection`` reads the :class:`ServerFacts`;
:func:`evaluate` turns them into a :class:`PreflightReport` listing every problem at once, each
with the statement that fixes it.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from airflow_provider_mysql_cdc.core.foreign_keys import unlogged_cascades

#: Below this ``binlog_expire_logs_seconds`` a warning is raised: a pipeline paused over a long
#: weekend would find its binlogs purged.
DEFAULT_MIN_BINLOG_RETENTION_SECONDS = 3 * 24 * 3600

#: Server variables the preflight reads.
CHECKED_VARIABLES = (
    "gtid_mode",
    "enforce_gtid_consistency",
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_expire_logs_seconds",
    "binlog_row_value_options",
    "server_id",
    "lower_case_table_names",
    "log_replica_updates",
    "log_slave_updates",
    "innodb_native_foreign_keys",
    "binlog_error_action",
)

_SYSTEM_SCHEMAS = frozenset({"mysql", "sys", "information_schema", "performance_schema"})


class Severity(str, enum.Enum):
    """How bad a finding is: errors stop CDC, warnings are risks."""

    ERROR = "ERROR"
    WARNING = "WARNING"


@dataclass(frozen=True)
class PreflightFinding:
    """One problem: which check, what is wrong, and the statement that fixes it."""

    check: str
    severity: Severity
    problem: str
    fix: str


@dataclass(frozen=True, order=True)
class ServerVersion:
    """A server's flavour and version, parsed from ``SELECT VERSION()``."""

    major: int
    minor: int
    patch: int
    flavor: str = "mysql"

    @classmethod
    def parse(cls, version: str, version_comment: str = "") -> ServerVersion:
        """Parse ``8.0.36``, ``8.4.2-log``, ``9.7.0``, ``10.11.6-MariaDB-...``."""
        match = re.match(r"(\d+)\.(\d+)\.(\d+)", version.strip())
        if not match:
            return cls(0, 0, 0, "unknown")
        is_mariadb = "mariadb" in version.lower() or "mariadb" in version_comment.lower()
        major, minor, patch = (int(part) for part in match.groups())
        return cls(major, minor, patch, "mariadb" if is_mariadb else "mysql")

    def __str__(self) -> str:
        name = "MariaDB" if self.flavor == "mariadb" else "MySQL"
        return f"{name} {self.major}.{self.minor}.{self.patch}"

    @property
    def binlog_status_statement(self) -> str:
        """``SHOW BINARY LOG STATUS`` from MySQL 8.2 on; ``SHOW MASTER STATUS`` (removed in 8.4) before."""
        if self.flavor == "mysql" and (self.major, self.minor) >= (8, 2):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    @property
    def replica_status_statement(self) -> str:
        """``SHOW REPLICA STATUS`` from MySQL 8.0.22 on; ``SHOW SLAVE STATUS`` before."""
        if self.flavor == "mysql" and (self.major, self.minor, self.patch) >= (8, 0, 22):
            return "SHOW REPLICA STATUS"
        return "SHOW SLAVE STATUS"

    @property
    def supports_tagged_gtids(self) -> bool:
        """Tagged GTIDs (``uuid:tag:n``) exist from MySQL 8.3 on."""
        return self.flavor == "mysql" and (self.major, self.minor) >= (8, 3)


@dataclass(frozen=True)
class TableName:
    """A MySQL table ``database.table``."""

    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


@dataclass(frozen=True)
class Grants:
    """Privileges from ``SHOW GRANTS``: global, per database (LIKE patterns) and per table."""

    global_privileges: frozenset[str] = frozenset()
    database_privileges: Mapping[str, frozenset[str]] = field(default_factory=dict)
    table_privileges: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    role_grants: tuple[str, ...] = ()

    @classmethod
    def parse(cls, lines: Iterable[str]) -> Grants:
        """Parse the lines ``SHOW GRANTS`` prints (MySQL 8.0+ syntax)."""
        global_privileges: set[str] = set()
        databases: dict[str, set[str]] = {}
        tables: dict[tuple[str, str], set[str]] = {}
        roles: list[str] = []
        for line in lines:
            match = _GRANT_LINE.match(line.strip())
            if not match:
                role = _ROLE_GRANT_LINE.match(line.strip())
                if role:
                    roles.append(role.group("roles"))
                continue
            privileges = _split_privileges(match.group("privileges"))
            target = match.group("target")
            if target.upper().startswith(("PROCEDURE ", "FUNCTION ")):
                continue
            if target == "*.*":
                global_privileges |= privileges
                continue
            names = _IDENTIFIER.findall(target)
            database = _unquote(names[0]) if names else target.split(".", 1)[0]
            if target.endswith(".*"):
                databases.setdefault(database, set()).update(privileges)
            elif len(names) == 2:
                tables.setdefault((database, _unquote(names[1])), set()).update(privileges)
        return cls(
            frozenset(global_privileges),
            {name: frozenset(privs) for name, privs in databases.items()},
            {name: frozenset(privs) for name, privs in tables.items()},
            tuple(roles),
        )

    def allows(self, privilege: str, table: TableName | None = None) -> bool:
        """True when ``privilege`` is held globally, or on the table's database or the table itself."""
        wanted = _privilege_aliases(privilege)
        if _holds(self.global_privileges, wanted):
            return True
        if table is None:
            return False
        for pattern, privileges in self.database_privileges.items():
            if _database_pattern_matches(pattern, table.database) and _holds(privileges, wanted):
                return True
        return _holds(self.table_privileges.get((table.database, table.table), frozenset()), wanted)


_GRANT_LINE = re.compile(r"^GRANT\s+(?P<privileges>.+?)\s+ON\s+(?P<target>.+?)\s+TO\s+", re.IGNORECASE | re.DOTALL)
_ROLE_GRANT_LINE = re.compile(r"^GRANT\s+(?P<roles>`.+?)\s+TO\s+", re.IGNORECASE)
_IDENTIFIER = re.compile(r"`((?:[^`]|``)*)`")


def _unquote(name: str) -> str:
    return name.replace("``", "`")


def _split_privileges(text: str) -> set[str]:
    privileges: set[str] = set()
    for raw in re.split(r",(?![^(]*\))", text):
        item = raw.strip().upper()
        if "(" in item:  # column-level privileges do not cover whole tables
            continue
        item = re.sub(r"\s+", " ", item)
        privileges.add("ALL PRIVILEGES" if item == "ALL" else item)
    return privileges


def _privilege_aliases(privilege: str) -> frozenset[str]:
    upper = privilege.upper()
    aliases = {upper, "ALL PRIVILEGES"}
    if upper == "REPLICATION SLAVE":
        aliases.add("REPLICATION REPLICA")
    return frozenset(aliases)


def _holds(held: frozenset[str], wanted: frozenset[str]) -> bool:
    return not held.isdisjoint(wanted)


def _database_pattern_matches(pattern: str, database: str) -> bool:
    """Database-level grants use LIKE wildcards (``%``, ``_``), escaped with a backslash."""
    regex = ""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            regex += re.escape(pattern[index + 1])
            index += 2
            continue
        regex += ".*" if char == "%" else "." if char == "_" else re.escape(char)
        index += 1
    return re.fullmatch(regex, database, re.IGNORECASE) is not None


@dataclass(frozen=True)
class ServerFacts:
    """What the preflight needs to know about a server, as read from it."""

    version: str
    version_comment: str
    current_user: str
    variables: Mapping[str, str | None]
    grants: Grants
    visible_tables: tuple[TableName, ...] = ()
    #: The binlog's database filters (``binlog-do-db``, ``binlog-ignore-db`` as ``SHOW BINARY LOG STATUS``
    #: lists them, comma-separated); empty when none is set or the status cannot be read.
    binlog_do_db: str = ""
    binlog_ignore_db: str = ""
    #: Replication channels this server replicates through (``SHOW REPLICA STATUS`` rows; 0 when it is
    #: no replica or the status cannot be read).
    replica_channels: int = 0
    #: The visible tables with a foreign key whose ``ON DELETE``/``ON UPDATE`` changes their rows (read
    #: with the tables).
    cascading_children: tuple[TableName, ...] = ()

    @property
    def unlogged_cascades(self) -> str | None:
        """Why this server's binlog leaves out the rows foreign-key cascades change, or None when it logs
        them (:func:`~airflow_provider_mysql_cdc.core.foreign_keys.unlogged_cascades`)."""
        server = ServerVersion.parse(self.version, self.version_comment)
        return unlogged_cascades(server, self.variables.get("innodb_native_foreign_keys"))


@dataclass(frozen=True)
class PreflightReport:
    """Every finding of one preflight, in a stable order."""

    server: ServerVersion
    account: str
    findings: tuple[PreflightFinding, ...]
    selected_tables: tuple[TableName, ...] = ()

    @property
    def errors(self) -> tuple[PreflightFinding, ...]:
        """Findings that stop CDC."""
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[PreflightFinding, ...]:
        """Findings that are risks but do not stop CDC."""
        return tuple(f for f in self.findings if f.severity is Severity.WARNING)

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    def format(self) -> str:
        """A human-readable report: one block per finding with its fix."""
        summary = f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)"
        lines = [f"MySQL CDC preflight for {self.account} on {self.server}: {summary}"]
        for finding in self.findings:
            lines.append(f"  {finding.severity.value} [{finding.check}] {finding.problem}")
            for fix_line in finding.fix.splitlines():
                lines.append(f"      fix: {fix_line}")
        if self.ok:
            lines.append(f"  OK: {len(self.selected_tables)} selected table(s) readable; binlog settings fit CDC")
        lines.append(f"  note: {SESSION_SETTINGS_NOTE}")
        return "\n".join(lines)


def sql_account(current_user: str) -> str:
    """``cdc@%`` (as ``CURRENT_USER()`` prints it) -> ``'cdc'@'%'``."""
    user, _, host = current_user.rpartition("@")
    if not user:
        return f"'{current_user}'"
    return f"'{user}'@'{host}'"


_GTID_MODE_STEPS = ("OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE", "ON")


def _gtid_mode_fix(current: str) -> str:
    steps = ["SET PERSIST enforce_gtid_consistency = ON;"]
    start = _GTID_MODE_STEPS.index(current) + 1 if current in _GTID_MODE_STEPS else 0
    for mode in _GTID_MODE_STEPS[start:]:
        if mode == "ON":
            steps.append("-- wait until SHOW GLOBAL STATUS LIKE 'Ongoing_anonymous_transaction_count' shows 0, then:")
        steps.append(f"SET PERSIST gtid_mode = {mode};")
    return "\n".join(steps)


def _is_on(value: str | None) -> bool:
    return (value or "").strip().upper() in {"ON", "1", "TRUE"}


def select_tables(patterns: Sequence[str], visible: Iterable[TableName]) -> tuple[list[TableName], list[str]]:
    """Match ``db.table`` glob patterns against the tables the server shows; return matches and unmatched patterns."""
    candidates = [table for table in visible if table.database.lower() not in _SYSTEM_SCHEMAS]
    selected: dict[TableName, None] = {}
    unmatched: list[str] = []
    for pattern in patterns:
        if "." not in pattern:
            unmatched.append(pattern)
            continue
        database_glob, table_glob = pattern.split(".", 1)
        hits = [
            table
            for table in candidates
            if fnmatch.fnmatchcase(table.database, database_glob) and fnmatch.fnmatchcase(table.table, table_glob)
        ]
        if not hits:
            unmatched.append(pattern)
        selected.update(dict.fromkeys(hits))
    return sorted(selected, key=str), unmatched


#: What preflight cannot check, because any session can change it for itself; printed with every report.
SESSION_SETTINGS_NOTE = (
    "any session may set binlog_row_image (MINIMAL, NOBLOB), binlog_row_value_options=PARTIAL_JSON or "
    "binlog_transaction_compression=ON for itself: capture reads such transactions exactly (row images "
    "without every column are completed from the target, JSON diffs applied, compressed transactions "
    "decompressed); a key change logged without every column re-snapshots its table"
)


def evaluate(
    facts: ServerFacts,
    table_patterns: Sequence[str] = (),
    *,
    min_binlog_retention_seconds: int = DEFAULT_MIN_BINLOG_RETENTION_SECONDS,
) -> PreflightReport:
    """Check server version, binlog/GTID settings and privileges; report every problem at once."""
    server = ServerVersion.parse(facts.version, facts.version_comment)
    account = sql_account(facts.current_user)
    findings: list[PreflightFinding] = []

    def error(check: str, problem: str, fix: str) -> None:
        findings.append(PreflightFinding(check, Severity.ERROR, problem, fix))

    if server.flavor == "mariadb":
        error(
            "server_version",
            f"{server} is not supported yet: its GTIDs are domain-server-sequence, not MySQL GTID sets",
            "Use MySQL 8.0 or later (8.4 LTS recommended).",
        )
    elif server.major < 8:
        error("server_version", f"{server} ({facts.version}) is too old", "Upgrade to MySQL 8.0 or later (8.4 LTS).")

    variables = {name.lower(): value for name, value in facts.variables.items()}
    gtid_mode = (variables.get("gtid_mode") or "OFF").upper()
    if gtid_mode != "ON":
        error("gtid_mode", f"gtid_mode is {gtid_mode}; GTID-based capture needs ON", _gtid_mode_fix(gtid_mode))
    consistency = (variables.get("enforce_gtid_consistency") or "OFF").upper()
    if consistency != "ON":
        error(
            "enforce_gtid_consistency",
            f"enforce_gtid_consistency is {consistency}; it must be ON",
            "SET PERSIST enforce_gtid_consistency = ON;",
        )
    if not _is_on(variables.get("log_bin")):
        error(
            "log_bin",
            "binary logging is off (log_bin=OFF); there is no binlog to read",
            "Restart mysqld with binary logging on: remove --skip-log-bin / --disable-log-bin and set\n"
            "[mysqld] log_bin = binlog  (in my.cnf); log_bin cannot be changed at runtime.",
        )
    binlog_format = variables.get("binlog_format")
    if binlog_format is not None and binlog_format.upper() != "ROW":
        error(
            "binlog_format",
            f"binlog_format is {binlog_format}; row events need ROW",
            "SET PERSIST binlog_format = 'ROW';  -- applies to new sessions; reconnect writers",
        )
    for name in ("binlog_row_image", "binlog_row_metadata"):
        value = variables.get(name)
        if (value or "").upper() != "FULL":
            why = (
                "every update and delete would lack unchanged columns: handled, but each key change would "
                "then re-snapshot its table"
                if name == "binlog_row_image"
                else "column names would arrive as UNKNOWN_COLn"
            )
            error(name, f"{name} is {value}; it must be FULL ({why})", f"SET PERSIST {name} = 'FULL';")
    findings += _name_and_filter_findings(facts, variables)
    expire = variables.get("binlog_expire_logs_seconds")
    if expire is not None and expire.strip().isdigit():
        seconds = int(expire)
        if 0 < seconds < min_binlog_retention_seconds:
            findings.append(
                PreflightFinding(
                    "binlog_expire_logs_seconds",
                    Severity.WARNING,
                    f"binlogs are purged after {seconds} s ({seconds / 3600:.1f} h), below the "
                    f"{min_binlog_retention_seconds} s this pipeline wants as headroom; a paused pipeline "
                    "would need a re-snapshot",
                    f"SET PERSIST binlog_expire_logs_seconds = {max(min_binlog_retention_seconds, 604800)};",
                )
            )

    role_hint = (
        f" (privileges granted through roles {', '.join(facts.grants.role_grants)} are not examined: "
        "grant directly or make the role a default role)"
        if facts.grants.role_grants
        else ""
    )
    for privilege in ("REPLICATION SLAVE", "REPLICATION CLIENT"):
        if not facts.grants.allows(privilege):
            purpose = "read the binlog stream" if privilege == "REPLICATION SLAVE" else "list binlogs and GTID state"
            error(
                "privileges",
                f"{account} lacks {privilege} (needed to {purpose}){role_hint}",
                f"GRANT {privilege} ON *.* TO {account};",
            )

    selected, unmatched = select_tables(table_patterns, facts.visible_tables)
    for pattern in unmatched:
        error(
            "tables",
            f"no table matches {pattern!r} (patterns are 'database.table' globs; tables on which {account} "
            "holds no privilege are invisible to it)",
            f"Check the name, or GRANT SELECT ON {_grant_target(pattern)} TO {account};",
        )
    for privilege in ("SELECT", "LOCK TABLES"):
        missing = [table for table in selected if not facts.grants.allows(privilege, table)]
        if not missing:
            continue
        names = ", ".join(str(table) for table in missing)
        if privilege == "SELECT":
            fix = "\n".join(f"GRANT SELECT ON `{t.database}`.`{t.table}` TO {account};" for t in missing)
        else:  # LOCK TABLES exists only at database or global level
            databases = sorted({table.database for table in missing})
            fix = "\n".join(f"GRANT LOCK TABLES ON `{database}`.* TO {account};" for database in databases)
        purpose = "to read it" if privilege == "SELECT" else "for the consistent snapshot"
        error("privileges", f"{account} lacks {privilege} on {names} ({purpose}){role_hint}", fix)

    findings += _unlogged_cascade_findings(facts, selected)
    return PreflightReport(server, account, tuple(findings), tuple(selected))


def _unlogged_cascade_findings(facts: ServerFacts, selected: Sequence[TableName]) -> list[PreflightFinding]:
    """The selected tables whose rows foreign-key cascades change on a server that does not log those
    changes: they wait alone (``core.foreign_keys``)."""
    unlogged = facts.unlogged_cascades
    cascading = set(facts.cascading_children)
    children = [table for table in selected if table in cascading]
    if unlogged is None or not children:
        return []
    return [
        PreflightFinding(
            "foreign_key_cascades",
            Severity.WARNING,
            f"the binlog does not hold the rows foreign-key cascades change ({unlogged}): "
            f"{', '.join(str(table) for table in children)} have a foreign key whose ON DELETE or ON UPDATE "
            "changes their rows, so they wait alone and are not replicated",
            "Run MySQL 9.6 or later with innodb_native_foreign_keys=OFF (its default; it is read at start-up), "
            "or make those keys' ON DELETE and ON UPDATE RESTRICT, or leave the tables out (exclude_tables).",
        )
    ]


def _name_and_filter_findings(facts: ServerFacts, variables: Mapping[str, str | None]) -> list[PreflightFinding]:
    """What keeps statements on the selected tables from being matched by name or from reaching the
    binlog at all: ``lower_case_table_names=2``, binlog database filters, a replica that does not log
    what it applies, a server that stops logging on a binlog write error."""
    findings: list[PreflightFinding] = []
    if (variables.get("binlog_error_action") or "").upper() == "IGNORE_ERROR":
        findings.append(
            PreflightFinding(
                "binlog_error_action",
                Severity.WARNING,
                "binlog_error_action is IGNORE_ERROR: when a binlog write fails (a full disk), MySQL turns binary "
                "logging off and goes on committing until it is restarted, so those changes reach no binlog and no "
                "target",
                "SET PERSIST binlog_error_action = 'ABORT_SERVER';  -- the default: stop rather than lose the log",
            )
        )
    if variables.get("lower_case_table_names") == "2":
        findings.append(
            PreflightFinding(
                "lower_case_table_names",
                Severity.ERROR,
                "lower_case_table_names is 2 (names stored as written, compared in lower case; InnoDB keeps "
                "table names in lower case): the binlog's statements and table maps cannot be matched by name "
                "exactly",
                "Capture from a server initialized with lower_case_table_names = 0 or 1 (a replica of this one: "
                "the setting is fixed when the data directory is initialized).",
            )
        )
    filters = [
        f"{option}={value}"
        for option, value in (("binlog-do-db", facts.binlog_do_db), ("binlog-ignore-db", facts.binlog_ignore_db))
        if value
    ]
    if filters:
        findings.append(
            PreflightFinding(
                "binlog_filters",
                Severity.ERROR,
                f"the binlog is filtered ({', '.join(filters)}): MySQL logs the row changes of a filtered-out "
                "database nowhere, and logs DDL (ALTER, TRUNCATE, DROP, RENAME) by the session's default "
                "database, so a TRUNCATE of a selected table run while a filtered-out database is the default "
                "(or, with binlog-do-db, without one) never reaches the binlog and its target would keep the rows",
                "Remove binlog-do-db / binlog-ignore-db from the server's configuration and restart it (they "
                "cannot be changed at runtime); filter on replicas with replicate-do-db / replicate-ignore-db "
                "instead.",
            )
        )
    logs_applied = variables.get("log_replica_updates") or variables.get("log_slave_updates")
    if facts.replica_channels and logs_applied is not None and not _is_on(logs_applied):
        findings.append(
            PreflightFinding(
                "log_replica_updates",
                Severity.ERROR,
                "this server is a replica with log_replica_updates OFF: the transactions it applies from its "
                "source are in its gtid_executed but in no binlog of its own (MySQL counts them as purged), so "
                "no window could read them",
                "Restart the replica with log_replica_updates = ON (it cannot be changed at runtime), or "
                "capture from its source.",
            )
        )
    return findings


def _grant_target(pattern: str) -> str:
    if "." not in pattern:
        return f"`{pattern}`.*"
    database, table = pattern.split(".", 1)
    if any(char in table for char in "*?["):
        return f"`{database}`.*"
    return f"`{database}`.`{table}`"
