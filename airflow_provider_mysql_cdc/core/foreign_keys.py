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


#: The start of every reason :func:`cascades_not_logged_reason` gives.
CASCADES_NOT_LOGGED_REASON = "a delete or update of a table its foreign key references was logged without its cascades"


def cascades_not_logged_reason(table_name: str, parent: str, origin: str) -> str:
    """Why a child table cannot be followed past a delete or update of ``parent`` whose row event lacks
    ``USE_SQL_FOREIGN_KEY_F`` (``origin``: the MySQL version the transaction originated on), and the fixes."""
    return (
        f"{CASCADES_NOT_LOGGED_REASON} ({parent}; the transaction originated on MySQL {origin}, and its row "
        "event says the keys ran inside InnoDB: MySQL before 9.6, innodb_native_foreign_keys=ON, or a replica of "
        "such a source), so the rows the cascade changed here are in no row event: the table is snapshotted "
        "again. Should this repeat (a replica of such a source), capture from a server whose transactions all "
        "originate on MySQL 9.6 or later with innodb_native_foreign_keys=OFF, or leave the table out of the "
        f"pipeline (exclude_tables=[{table_name!r}])"
    )


def cascading_child_reason(table_name: str, unlogged: str) -> str:
    """Why a child table of a foreign key whose cascades are not logged (``unlogged``, as
    :func:`unlogged_cascades` gives it) cannot be replicated, and the fixes."""
    return (
        f"{UNLOGGED_CASCADE_REASON} ({unlogged}), so no target can follow it: run MySQL 9.6 or later with "
        "innodb_native_foreign_keys=OFF (its default), or make the key's ON DELETE and ON UPDATE RESTRICT, "
        f"or leave the table out of the pipeline (exclude_tables=[{table_name!r}])"
    )
