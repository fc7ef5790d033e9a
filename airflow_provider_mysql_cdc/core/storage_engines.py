"""Storage engines the binlog cannot replicate from, and what a window can know of a created table's
engine (pure).

A table in ``BLACKHOLE`` logs its inserts as row events but keeps no row, so no target can equal it.
A CREATE TABLE that names no engine takes its session's ``default_storage_engine`` (``CREATE ... LIKE``:
its source's engine), which the binlog does not carry: the capture asks the server, whose answer holds
for the CREATE only while no later DDL changed the table.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Storage engines whose rows the table's own row events do not describe, and why: ``BLACKHOLE`` keeps
#: no rows (ALTER TABLE ... ENGINE=BLACKHOLE discards the table's data); a ``MERGE`` table (the engine
#: ``MRG_MYISAM``) shows the rows of the MyISAM tables of its ``UNION``; a ``FEDERATED`` table the rows
#: of a table on another server (not built into the packaged servers, so only checked by its text).
UNFOLLOWABLE_ENGINES = {
    "BLACKHOLE": "keeps no rows (its inserts reach only the binlog)",
    "MRG_MYISAM": (
        "shows the rows of the tables of its UNION (a write to one of them is logged as that table's row, "
        "a write through the MERGE table as the MERGE table's)"
    ),
    "FEDERATED": "shows the rows of a table on another server, whose changes this server's binlog does not hold",
}
#: Other names of those engines in ``ENGINE=``.
_ENGINE_ALIASES = {"MERGE": "MRG_MYISAM"}


def unfollowable_engine(engine: str) -> str | None:
    """``engine`` (as written or as the server names it) when it is one of :data:`UNFOLLOWABLE_ENGINES`."""
    name = _ENGINE_ALIASES.get(engine.upper(), engine.upper())
    return name if name in UNFOLLOWABLE_ENGINES else None


def unfollowable_engine_reason(table_name: str, engine: str) -> str:
    """Why a table stored in one of :data:`UNFOLLOWABLE_ENGINES` cannot be replicated, and the fix."""
    why = UNFOLLOWABLE_ENGINES.get(unfollowable_engine(engine) or "", "keeps no rows")
    return (
        f"ENGINE={engine} {why}, so no target can equal it: leave it out of the pipeline "
        f"(exclude_tables=[{table_name!r}]) or give it an engine that keeps its own rows"
    )


def merge_member_reason(table_name: str, merge_table: str) -> str:
    """Why a table of a MERGE table's ``UNION`` cannot be replicated, and the fix."""
    return (
        f"it is in the UNION of the MERGE table {merge_table}, and rows written through {merge_table} are "
        f"logged as {merge_table}'s, not as this table's: drop {merge_table} (or take this table out of its "
        f"UNION), or leave this table out of the pipeline (exclude_tables=[{table_name!r}])"
    )


@dataclass(frozen=True)
class TableEngine:
    """A table's storage engine as the server has it now; ``changed_at``: its ``CREATE_TIME`` (epoch
    seconds), which every DDL of the table moves (None where the server keeps none)."""

    engine: str
    changed_at: int | None


#: The start of the reasons given when the engine a CREATE TABLE gave its table is not known.
UNKNOWN_ENGINE_REASON = "the engine its CREATE TABLE gave it is not known"
#: The starts of every reason :func:`created_engine_problem` and :func:`unknown_engine_reason` give.
CREATED_ENGINE_REASONS = ("ENGINE=", UNKNOWN_ENGINE_REASON)


def unknown_engine_reason(since: str) -> str:
    """Why a table whose CREATE named no engine cannot be followed once ``since`` may have changed its
    engine: the rows it took before may have been in one that keeps none."""
    return (
        f"{UNKNOWN_ENGINE_REASON}: the statement names none (the session's default_storage_engine or a LIKE "
        f"source's engine chose it, and the binlog carries neither), and {since}"
    )


def created_engine_problem(table_name: str, now: TableEngine | None, window_end_us: int) -> str | None:
    """Why a table made in a window by a CREATE TABLE that names no engine cannot be followed, or None
    when it can; ``now``: the table as the server has it now (None: gone); ``window_end_us``: when the
    window ends (no later transaction is in it).

    The engine the server has now is the one the CREATE gave unless a statement changed the table since.
    Those inside the window are read (an ``ALTER ... ENGINE=`` there re-builds the table); one after it
    shows only in the table's ``CREATE_TIME`` (whole seconds), which every DDL moves: a CREATE_TIME in a
    later second than the window's end makes the engine unknown. A DDL after the end in that same second
    is not seen."""
    if now is None:
        return unknown_engine_reason("the table is gone from the server")
    if unfollowable_engine(now.engine) is not None:
        return unfollowable_engine_reason(table_name, now.engine)
    if now.changed_at is not None and now.changed_at > window_end_us // 1_000_000:
        return unknown_engine_reason("a statement after the window changed the table (its CREATE_TIME is later)")
    return None
