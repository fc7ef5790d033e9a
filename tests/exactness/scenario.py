"""Building blocks of the catalogue: a change applied three ways, allowed stops, binlog evidence.

Statements name their table ``{t}`` and their database ``{db}`` (replaced literally, so JSON braces
in statements need no escaping).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from tests.exactness.harness import ExactnessPipeline, WindowStopped
from tests.mysql_servers import MySqlTestServer

#: The tables of :func:`run_three_ways`: the change inside one window with rows before and after
#: it; the change with rows before it, and rows after it in the next window; the change alone in
#: its window (no row of the table in that window), rows after it in the next window.
INSIDE, ACROSS, QUIET = "t_inside", "t_across", "t_quiet"


def fill(statement: str, table: str = "", database: str = "") -> str:
    """``statement`` with ``{t}`` and ``{db}`` replaced (backquoted names)."""
    if database:
        statement = statement.replace("{db}", f"`{database}`")
        if table:
            statement = statement.replace("{t}", f"`{database}`.`{table}`")
    return statement


@dataclass(frozen=True)
class Change:
    """A change to one table: its definition and rows, the DML before the change (old schema), the
    change itself, and the DML after it (new schema). ``session`` runs first in every write session."""

    columns: str
    rows: Sequence[str]
    before: Sequence[str]
    change: Sequence[str]
    after: Sequence[str]
    session: Sequence[str] = ()
    #: Named errors the issue allows instead of an exact window (e.g. ``UnsupportedSchemaChangeError``).
    allowed_errors: frozenset[str] = field(default_factory=frozenset)


def drive(
    pipeline: ExactnessPipeline, steps: Sequence[Callable[[], object]], allowed_errors: frozenset[str] = frozenset()
) -> None:
    """Snapshot and compare, then for each step: run it (its writes), capture, apply and compare.
    Every window is compared even after one differed; at the end :class:`NotExact` lists all
    differences. A stop ends the windows: one of ``allowed_errors`` (and nothing else) is a pass."""
    stop = None
    allowed = False
    try:
        pipeline.snapshot()
        pipeline.check_window()
        for step in steps:
            step()
            pipeline.check_window()
    except WindowStopped as stopped:
        allowed = bool(allowed_errors) and stopped.error_classes <= allowed_errors
        stop = None if allowed else stopped
    pipeline.finish(stop, settle=not allowed)


def create_tables(pipeline: ExactnessPipeline, tables: Sequence[str], change: Change) -> None:
    """Create each table with the change's columns and rows."""
    database = pipeline.databases[0]
    statements: list[str] = []
    for table in tables:
        statements.append(fill(f"CREATE TABLE {{t}} ({change.columns})", table, database))
        if change.rows:
            statements.append(fill(f"INSERT INTO {{t}} VALUES {', '.join(change.rows)}", table, database))
    pipeline.sql(*statements, session=change.session)


def run_three_ways(new_pipeline: Callable[..., ExactnessPipeline], change: Change) -> ExactnessPipeline:
    """Snapshot the three tables, then two windows, each compared with MySQL:

    window 1: ``t_inside`` before + change + after; ``t_across`` before + change; ``t_quiet`` change only;
    window 2: ``t_across`` after; ``t_quiet`` after.

    A window that stops with one of ``change.allowed_errors`` ends the scenario (the issue allows it).
    """
    pipeline = new_pipeline()
    database = pipeline.databases[0]
    create_tables(pipeline, (INSIDE, ACROSS, QUIET), change)

    def on(table: str, statements: Sequence[str]) -> list[str]:
        return [fill(statement, table, database) for statement in statements]

    windows = [
        on(INSIDE, [*change.before, *change.change, *change.after])
        + on(ACROSS, [*change.before, *change.change])
        + on(QUIET, change.change),
        on(ACROSS, change.after) + on(QUIET, change.after),
    ]
    drive(
        pipeline,
        [partial(pipeline.sql, *statements, session=change.session) for statements in windows],
        change.allowed_errors,
    )
    return pipeline


def run_windows(
    pipeline: ExactnessPipeline,
    windows: Sequence[Sequence[str]],
    session: Sequence[str] = (),
    allowed_errors: frozenset[str] = frozenset(),
) -> None:
    """Snapshot, then one window per statement list (``{db}`` filled in), each compared (see :func:`drive`)."""
    database = pipeline.databases[0]
    steps = [
        partial(pipeline.sql, *(fill(s, database=database) for s in statements), session=session)
        for statements in windows
    ]
    drive(pipeline, steps, allowed_errors)


# -- binlog evidence ------------------------------------------------------------------------------


def binlog_position(server: MySqlTestServer) -> tuple[str, int]:
    """The server's current binlog file and position."""
    row = server.execute("SHOW BINARY LOG STATUS")[0]
    return str(row[0]), int(row[1])


def binlog_events(server: MySqlTestServer, since: tuple[str, int]) -> list[tuple[str, str]]:
    """The events written since ``since`` (across file rotations): (event type, info)."""
    files = [str(row[0]) for row in server.execute("SHOW BINARY LOGS")]
    events: list[tuple[str, str]] = []
    for name in files[files.index(since[0]) :]:
        start = f" FROM {since[1]}" if name == since[0] else ""
        # SHOW BINLOG EVENTS: Log_name, Pos, Event_type, Server_id, End_log_pos, Info
        events += [(str(row[2]), str(row[5])) for row in server.execute(f"SHOW BINLOG EVENTS IN '{name}'{start}")]
    return events


def binlog_event_types(server: MySqlTestServer, since: tuple[str, int]) -> list[str]:
    """The event types written since ``since`` (across file rotations)."""
    return [event_type for event_type, _info in binlog_events(server, since)]
