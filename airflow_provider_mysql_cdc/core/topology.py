"""Server identity and history guards: may the server the connection reaches continue a pipeline?

Pure logic (no Airflow, no MySQL I/O). ``mysql.server_state`` reads a :class:`ServerObservation`
once per run; the metadata store keeps one per window and per snapshot chunk (``cdc_server_observations``);
:func:`history_problem` compares the two before a capture or a snapshot reads anything.

A GTID frontier says what has been read, not from whom. Two rules decide:

1. **Containment.** Every transaction the pipeline already holds (its capture frontier and the
   frontiers of its finished snapshot chunks) must be in the server's ``gtid_executed``. A server
   that lacks some would never send them, and the pipeline would carry on as if they did not exist:
   a lagging replica, a server restored from an older backup, a reset server. The error is
   :class:`ServerChangedError` when the server's ``server_uuid`` differs from the last run's,
   :class:`FrontierNotOnServerError` otherwise.
2. **History** (only when the same ``server_uuid`` was read before): a server's history only grows.
   ``gtid_executed`` and ``gtid_purged`` never lose a GTID; binlog files are added at the end and
   purged at the start, so the first file's number never goes down and its ``Previous_gtids`` only
   grows, the last file's number never goes down, and a file listed at both reads was started at the
   same moment both times. ``RESET BINARY LOGS AND GTIDS`` breaks these; after it, new transactions
   get GTIDs the frontier already holds, which containment alone would not see once there are enough
   of them. The error is :class:`ServerHistoryResetError`. Binlog files that started over are
   accepted when the server had executed nothing at the last read, and when ``gtid_purged`` now
   holds everything the server had executed at the last read and more than the pipeline holds (a
   server re-provisioned from a backup with ``SET GLOBAL gtid_purged``): no file can then hold a
   reused GTID the pipeline would skip, and capture's purge check stops with ``BinlogPurgedError``,
   whose recovery (a re-snapshot) such a server needs.

What never fires: a purge (``gtid_purged`` grows, the first file moves on), a restart or ``FLUSH
BINARY LOGS`` (a new last file), a renamed binlog base name (files are compared by number only
under the same base name), a promoted replica or a server whose ``server_uuid`` changed, as long as
it holds the frontier (rule 2 compares a server only with itself).

Not detectable from the server's state alone: a reset followed, between two runs, by more writes
than the last run had seen, binlog rotations past every file the last run saw, and a purge of every
file the last run saw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.errors import (
    FrontierNotOnServerError,
    ServerChangedError,
    ServerHistoryError,
    ServerHistoryResetError,
)

_NUMBERED_FILE = re.compile(r"(?P<base>.*)\.(?P<number>[0-9]+)")

#: The documentation section the guard errors point to.
DOCS_SECTION = "docs/concepts.md 'Server identity and history guards'"


def binlog_number(name: str) -> tuple[str, int] | None:
    """``("binlog", 12)`` for ``binlog.000012``; None for a name without a numeric extension."""
    match = _NUMBERED_FILE.fullmatch(name)
    if match is None:
        return None
    return match.group("base"), int(match.group("number"))


@dataclass(frozen=True)
class ServerObservation:
    """What one run saw of the server it reads: who it is (``server_uuid``, address) and its history.

    ``binlog_files`` are the names ``SHOW BINARY LOGS`` listed, oldest first (empty when they could not
    be read: binary logging off, a missing privilege); ``binlog_created_us`` holds when some of them were
    started (the server's clock, microseconds), at least the first and the last.
    """

    address: str
    server_uuid: str
    gtid_executed: GtidSet
    gtid_purged: GtidSet
    binlog_files: tuple[str, ...] = ()
    first_binlog_previous_gtids: GtidSet | None = None
    binlog_created_us: Mapping[str, int] = field(default_factory=dict)

    @property
    def first_binlog(self) -> str | None:
        """The oldest binlog file, or None."""
        return self.binlog_files[0] if self.binlog_files else None

    @property
    def last_binlog(self) -> str | None:
        """The newest (active) binlog file, or None."""
        return self.binlog_files[-1] if self.binlog_files else None

    def describe(self) -> str:
        """``127.0.0.1:3306 (server_uuid 3e11...)`` for messages."""
        return f"{self.address} (server_uuid {self.server_uuid})"


@dataclass(frozen=True)
class RecordedObservation:
    """An observation as the metadata store keeps it: which run made it (``unit``, e.g. ``window 7``) and
    when. Only the first and the last binlog file are kept."""

    unit: str
    observed_at: datetime | None
    observation: ServerObservation

    def describe(self) -> str:
        """``window 7 (2026-01-02T03:04:05Z)``."""
        if self.observed_at is None:
            return self.unit
        moment = self.observed_at.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        return f"{self.unit} ({moment})"


def _file_rewrites(before: ServerObservation, now: ServerObservation) -> list[str]:
    """Why the binlog files of ``now`` cannot be the files of ``before`` continued (same base name only)."""
    reasons: list[str] = []
    first_before, first_now = before.first_binlog, now.first_binlog
    if first_before is None or first_now is None:
        return reasons
    first_numbers = binlog_number(first_before), binlog_number(first_now)
    if first_numbers[0] is not None and first_numbers[1] is not None and first_numbers[0][0] == first_numbers[1][0]:
        previous_before, previous_now = before.first_binlog_previous_gtids, now.first_binlog_previous_gtids
        if first_numbers[1][1] < first_numbers[0][1]:
            reasons.append(f"the first binlog file was {first_before}, it is {first_now} now (numbering started over)")
        elif previous_before is not None and previous_now is not None:
            if first_before == first_now and previous_before != previous_now:
                reasons.append(
                    f"binlog {first_now} began after {previous_before or '(nothing)'}, it begins after "
                    f"{previous_now or '(nothing)'} now (the file was written again)"
                )
            elif not previous_before <= previous_now:
                reasons.append(
                    f"the first binlog file {first_now} begins after {previous_now or '(nothing)'}, which lacks "
                    f"{previous_before - previous_now} that {first_before} began after"
                )
    last_before, last_now = before.last_binlog, now.last_binlog
    last_numbers = binlog_number(last_before or ""), binlog_number(last_now or "")
    if (
        last_numbers[0] is not None
        and last_numbers[1] is not None
        and last_numbers[0][0] == last_numbers[1][0]
        and last_numbers[1][1] < last_numbers[0][1]
    ):
        reasons.append(f"the newest binlog file was {last_before}, it is {last_now} now (numbering started over)")
    listed = set(now.binlog_files)
    for name, started_before in sorted(before.binlog_created_us.items()):
        started_now = now.binlog_created_us.get(name)
        if name in listed and started_now is not None and started_now != started_before:
            reasons.append(
                f"binlog {name} was started at {_iso(started_before)}, the file of that name now at {_iso(started_now)}"
            )
    return reasons


def _iso(timestamp_us: int) -> str:
    return datetime.fromtimestamp(timestamp_us // 1_000_000, tz=UTC).isoformat().replace("+00:00", "Z")


def _new_files_may_reuse(before: ServerObservation, now: ServerObservation, frontier: GtidSet) -> bool:
    """Whether binlog files that started over may hold GTIDs of the history ``before`` saw: not when that
    history was empty, nor when ``gtid_purged`` now holds all of it and more than the pipeline holds
    (capture's purge check then stops first and asks for a re-snapshot)."""
    if not before.gtid_executed:
        return False
    return not (before.gtid_executed <= now.gtid_purged and not now.gtid_purged <= frontier)


def history_rewrites(before: ServerObservation, now: ServerObservation, frontier: GtidSet) -> list[str]:
    """Why ``now`` cannot be the history of the server ``before`` saw continued (rule 2 of the module
    docstring; ``frontier``: what the pipeline holds); empty when it can. Both must be observations of
    the same ``server_uuid``."""
    reasons: list[str] = []
    lost_executed = before.gtid_executed - now.gtid_executed
    if lost_executed:
        reasons.append(
            f"gtid_executed went backwards: it was {before.gtid_executed}, it is {now.gtid_executed or '(empty)'} "
            f"now, without {lost_executed}"
        )
    lost_purged = before.gtid_purged - now.gtid_purged
    if lost_purged:
        reasons.append(
            f"gtid_purged shrank: it was {before.gtid_purged}, it is {now.gtid_purged or '(empty)'} now, "
            f"without {lost_purged}"
        )
    if _new_files_may_reuse(before, now, frontier):
        reasons.extend(_file_rewrites(before, now))
    return reasons


def _required_text(capture_frontier: GtidSet, snapshot_frontiers: GtidSet) -> str:
    extra = snapshot_frontiers - capture_frontier
    text = f"its capture frontier {capture_frontier or '(empty)'}"
    return f"{text} and its finished snapshot chunks' frontiers (beyond it: {extra})" if extra else text


def _choices(server: ServerObservation, required: GtidSet, previous: RecordedObservation | None) -> str:
    back = ""
    if previous is not None and previous.observation.server_uuid != server.server_uuid:
        back = f" (such as the one {previous.describe()} read: {previous.observation.describe()})"
    return (
        "Choices: (1) if this server is a replica that is behind, wait until it has applied them "
        f"(SELECT GTID_SUBSET('{required}', @@GLOBAL.gtid_executed) returns 1 on it) and re-run; (2) point "
        f"the connection at a server that holds them{back}; (3) to continue from this server's history "
        "instead, re-snapshot under a new pipeline: a new pipeline name (and target tables), which snapshots "
        f"every table from this server. See {DOCS_SECTION}"
    )


def _missing_message(
    pipeline: str,
    unit: str,
    server: ServerObservation,
    missing: GtidSet,
    capture_frontier: GtidSet,
    snapshot_frontiers: GtidSet,
    last: RecordedObservation | None,
) -> str:
    required = capture_frontier | snapshot_frontiers
    changed = ""
    if last is not None and last.observation.server_uuid != server.server_uuid:
        changed = (
            f"the connection now reaches another server than {last.describe()} read "
            f"({last.observation.describe()}), and "
        )
    return (
        f"pipeline {pipeline!r} {unit}: {changed}the server at {server.describe()} lacks {len(missing)} "
        f"transaction(s) the pipeline already holds: {missing}. The pipeline holds "
        f"{_required_text(capture_frontier, snapshot_frontiers)}; the server's gtid_executed is "
        f"{server.gtid_executed or '(empty)'}. Reading from it would lose them or mix two histories; nothing "
        f"was staged or recorded and the frontier is unchanged. {_choices(server, required, last)}"
    )


def _reset_message(
    pipeline: str, unit: str, server: ServerObservation, before: RecordedObservation, reasons: list[str]
) -> str:
    return (
        f"pipeline {pipeline!r} {unit}: the history of the server at {server.describe()} was reset or rewritten "
        f"since {before.describe()} read it: {'; '.join(reasons)}. Transactions written since then may reuse GTIDs "
        "the pipeline already holds, and capture would skip them; nothing was staged or recorded and the "
        "frontier is unchanged. Choices: (1) if the connection should reach another server (this one was "
        "reset or restored by mistake), point it there; (2) to continue from this server's new history, "
        "re-snapshot under a new pipeline: a new pipeline name (and target tables), which snapshots every "
        f"table from this server. The pipeline's GTID frontier cannot follow a history that starts over. See "
        f"{DOCS_SECTION}"
    )


def history_problem(
    pipeline: str,
    unit: str,
    server: ServerObservation,
    *,
    capture_frontier: GtidSet | None,
    snapshot_frontiers: GtidSet | None = None,
    last: RecordedObservation | None = None,
    last_on_server: RecordedObservation | None = None,
) -> ServerHistoryError | None:
    """The error that must stop a capture or snapshot of ``pipeline`` on ``server``, or None.

    ``unit`` names the run in messages (``window 7``); ``capture_frontier`` is None for a pipeline not
    registered yet; ``snapshot_frontiers`` is the union of its finished snapshot chunks' frontiers;
    ``last`` is the newest recorded observation of the pipeline and ``last_on_server`` the newest one
    of ``server``'s ``server_uuid``. History rules (rule 2) come first: after a reset, "wait for the
    replica" would be the wrong advice.
    """
    frontier = capture_frontier or GtidSet()
    snapshots = snapshot_frontiers or GtidSet()
    missing = (frontier | snapshots) - server.gtid_executed
    if last_on_server is not None and last_on_server.observation.server_uuid == server.server_uuid:
        reasons = history_rewrites(last_on_server.observation, server, frontier | snapshots)
        if reasons:
            message = _reset_message(pipeline, unit, server, last_on_server, reasons)
            return ServerHistoryResetError(message, str(missing))
    if not missing:
        return None
    message = _missing_message(pipeline, unit, server, missing, frontier, snapshots, last)
    if last is not None and last.observation.server_uuid != server.server_uuid:
        return ServerChangedError(message, str(missing))
    return FrontierNotOnServerError(message, str(missing))


def require_continuable(
    pipeline: str,
    unit: str,
    server: ServerObservation,
    *,
    capture_frontier: GtidSet | None,
    snapshot_frontiers: GtidSet | None = None,
    last: RecordedObservation | None = None,
    last_on_server: RecordedObservation | None = None,
) -> None:
    """Raise :func:`history_problem`'s error, if there is one."""
    problem = history_problem(
        pipeline,
        unit,
        server,
        capture_frontier=capture_frontier,
        snapshot_frontiers=snapshot_frontiers,
        last=last,
        last_on_server=last_on_server,
    )
    if problem is not None:
        raise problem
