"""Foreign keys whose cascades the binlog does not hold, and what that means for their child tables (pure).

A foreign key ``ON DELETE``/``ON UPDATE`` ``CASCADE``, ``SET NULL`` or ``SET DEFAULT`` changes rows of its
child table when its parent's rows change. Before MySQL 9.6 InnoDB makes those changes itself, and the
binlog holds only the parent's row (checked: MySQL 9.7 with ``innodb_native_foreign_keys=ON``, which keeps
that old behaviour, logs a parent's delete and none of the cascaded deletes or updates). From 9.6 on,
with ``innodb_native_foreign_keys=OFF`` (the default), the server runs cascades itself and logs their rows
before the parent's. A child table of such a key on a server that does not log its cascades cannot be
followed from the binlog: it waits alone, with :func:`cascading_child_reason` as the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_provider_mysql_cdc.core.preflight import ServerVersion

#: Referential actions that change the child table's rows (``RESTRICT`` and ``NO ACTION`` change none).
ROW_CHANGING_RULES = frozenset({"CASCADE", "SET NULL", "SET DEFAULT"})
#: The first MySQL version whose server (not InnoDB) runs foreign-key cascades and logs their rows.
CASCADES_LOGGED_FROM = (9, 6)
#: The start of every reason :func:`cascading_child_reason` gives.
UNLOGGED_CASCADE_REASON = "a foreign key's cascade changes its rows and this server's binlog does not hold them"


def unlogged_cascades(server: ServerVersion, native_foreign_keys: str | None) -> str | None:
    """Why the server's binlog leaves out the rows foreign-key cascades change, or None when it logs them
    (``native_foreign_keys``: the server's ``innodb_native_foreign_keys``, None where it has none)."""
    if server.flavor != "mysql" or (server.major, server.minor) < CASCADES_LOGGED_FROM:
        return f"{server} runs cascades inside InnoDB (MySQL logs them from 9.6 on)"
    if (native_foreign_keys or "").upper() in ("ON", "1"):
        return f"{server} runs with innodb_native_foreign_keys=ON, which runs cascades inside InnoDB"
    return None


def origin_may_not_log_cascades(original_server_version: int) -> bool:
    """Whether a transaction that originated on a server of this version (``80403``; 0: the event does not
    say) may lack the rows its foreign keys' cascades changed: MySQL before 9.6 never logs them. (One from
    9.6 or later lacks them only if that server ran with ``innodb_native_foreign_keys=ON``, which its
    events do not tell.)"""
    major, minor = CASCADES_LOGGED_FROM
    return original_server_version < major * 10000 + minor * 100


def cascading_child_reason(table_name: str, unlogged: str) -> str:
    """Why a child table of a foreign key whose cascades are not logged (``unlogged``, as
    :func:`unlogged_cascades` gives it) cannot be replicated, and the fixes."""
    return (
        f"{UNLOGGED_CASCADE_REASON} ({unlogged}), so no target can follow it: run MySQL 9.6 or later with "
        "innodb_native_foreign_keys=OFF (its default), or make the key's ON DELETE and ON UPDATE RESTRICT, "
        f"or leave the table out of the pipeline (exclude_tables=[{table_name!r}])"
    )
