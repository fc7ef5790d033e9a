"""The apply of a table without a key: its rows are a multiset (no Airflow import).

MySQL logs a change to such a table with whole row images: an insert adds one copy of its row, a
delete takes away one copy of its before image, an update does both (capture stages it as ``d`` of
the before image and ``c`` of the after image). A window's effect on one *row identity* (the values
of every table column) is therefore its count of ``c`` (and snapshot ``r``) rows minus its count of
``d`` rows, whatever their order:

* a positive net adds that many copies: the window's newest inserts of that identity;
* a negative net takes that many copies away from the target: the copies with the highest
  ``_cdc_seq`` (identical in every table column, so which ones does not matter to readers);
* the target holding fewer copies than a net takes away, or two candidate copies sharing a
  ``_cdc_seq`` (one MERGE could not tell them apart), stops the table with ``TargetDivergedError``.

Identities compare as the staged values do, not as Spark's joins would: a FLOAT or DOUBLE is
compared by its text (``-0.0`` and ``0.0`` are two rows in MySQL), and ``_cdc_invalid_values`` (the
text of zero and invalid dates, which are staged as NULL) by its sorted entries.

This module builds SQL text only; :class:`~.table_applier.TableApplier` runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_mysql_cdc.apply.plan import quote

#: Staging columns a target keeps that tell which change wrote a copy: not part of a row's identity.
COPY_COLUMNS = frozenset({"_cdc_gtid", "_cdc_seq", "_cdc_commit_ts"})
#: Spark types compared by their text.
_FLOATING = frozenset({"float", "double"})


def identity_columns(target_columns: Sequence[tuple[str, str]], staged: Sequence[str]) -> list[tuple[str, str]]:
    """The (name, Spark type) of the target columns that make a row's identity: the table columns
    the staged rows have, and ``_cdc_invalid_values``. A column the target keeps after MySQL dropped it
    (``drop_dropped_columns=False``) is not staged, so it is not part of the identity."""
    present = {name.lower() for name in staged}
    return [(name, kind) for name, kind in target_columns if name not in COPY_COLUMNS and name.lower() in present]


def canonical(expression: str, spark_type: str) -> str:
    """``expression`` (of ``spark_type``) as a value that is equal exactly when MySQL's values are."""
    if spark_type in _FLOATING:
        return f"CAST({expression} AS STRING)"
    if spark_type in ("array<float>", "array<double>"):
        return f"transform({expression}, x -> CAST(x AS STRING))"
    if spark_type.startswith("map<"):
        return f"array_sort(map_entries({expression}))"
    return expression


@dataclass(frozen=True)
class MultisetSql:
    """The statements of one multiset step, over temporary views.

    ``staged_view`` holds the step's rows that count, as the target's columns plus ``_cdc_op``;
    ``target_view`` the target's rows with ``identity_overrides`` applied (a column the window adds
    holds, in every row the target has, the value MySQL gave it)."""

    identity: Sequence[tuple[str, str]]
    staged_view: str
    target_view: str

    def _keys(self, alias: str = "", overrides: Mapping[str, str] | None = None) -> list[str]:
        prefix = f"{alias}." if alias else ""
        return [
            canonical((overrides or {}).get(name.lower(), f"{prefix}{quote(name)}"), kind)
            for name, kind in self.identity
        ]

    def _key_select(self, alias: str = "", overrides: Mapping[str, str] | None = None) -> str:
        return ", ".join(f"{key} AS `__cdc_k{i}`" for i, key in enumerate(self._keys(alias, overrides)))

    def _key_names(self, alias: str = "") -> str:
        prefix = f"{alias}." if alias else ""
        return ", ".join(f"{prefix}`__cdc_k{i}`" for i in range(len(self.identity)))

    def _keys_match(self, left: str, right: str) -> str:
        return " AND ".join(f"{left}.`__cdc_k{i}` <=> {right}.`__cdc_k{i}`" for i in range(len(self.identity)))

    def counted(self) -> str:
        """Every staged row with its identity's net count and how many inserts of it are newer."""
        return (
            f"SELECT *, SUM(`__cdc_delta`) OVER (PARTITION BY {self._key_names()}) AS `__cdc_net`, "
            f"SUM(CASE WHEN `__cdc_delta` > 0 THEN 1 ELSE 0 END) OVER (PARTITION BY {self._key_names()} "
            "ORDER BY `_cdc_seq` DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS `__cdc_newer` "
            f"FROM (SELECT *, {self._key_select()}, CASE WHEN `_cdc_op` = 'd' THEN -1 ELSE 1 END AS `__cdc_delta` "
            f"FROM {self.staged_view})"
        )

    def inserts(self, columns: Sequence[str]) -> str:
        """The copies a window adds (the newest inserts of each identity with a positive net)."""
        names = ", ".join(quote(c) for c in columns)
        return (
            f"SELECT {names}, 'c' AS `_cdc_op` FROM ({self.counted()}) "
            "WHERE `__cdc_delta` > 0 AND `__cdc_newer` <= `__cdc_net`"
        )

    def deficits(self) -> str:
        """One row per identity with a negative net: how many copies go (``needed``) and the GTID of
        its newest delete (for the error message)."""
        return (
            f"SELECT {self._key_names()}, -MIN(`__cdc_net`) AS `__cdc_needed`, "
            "MAX_BY(`_cdc_gtid`, `_cdc_seq`) AS `__cdc_gtid` "
            f"FROM ({self.counted()}) WHERE `__cdc_net` < 0 AND `_cdc_op` = 'd' GROUP BY {self._key_names()}"
        )

    def candidates(self, overrides: Mapping[str, str]) -> str:
        """The target's copies of each deficit identity, newest ``_cdc_seq`` first, with how many there
        are and how many share their ``_cdc_seq``."""
        keys = self._key_names("t")
        return (
            "SELECT t.*, d.`__cdc_needed`, d.`__cdc_gtid`, "
            f"ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY t.`_cdc_seq` DESC) AS `__cdc_rank`, "
            f"COUNT(*) OVER (PARTITION BY {keys}) AS `__cdc_available`, "
            f"COUNT(*) OVER (PARTITION BY {keys}, t.`_cdc_seq`) AS `__cdc_same_seq` "
            f"FROM (SELECT *, {self._key_select('', overrides)} FROM {self.target_view}) t "
            f"JOIN ({self.deficits()}) d ON {self._keys_match('t', 'd')}"
        )

    def shortfalls(self, candidates: str) -> str:
        """Deficits the target cannot meet: fewer copies than needed, or copies a MERGE cannot tell
        apart. Empty when the step is exact. ``candidates``: a view of :meth:`candidates`."""
        return (
            f"SELECT d.`__cdc_needed` AS needed, COALESCE(c.available, 0) AS available, "
            "COALESCE(c.ambiguous, 0) AS ambiguous, d.`__cdc_gtid` AS gtid "
            f"FROM ({self.deficits()}) d LEFT JOIN ("
            f"SELECT {self._key_names()}, MAX(`__cdc_available`) AS available, "
            "MAX(CASE WHEN `__cdc_rank` <= `__cdc_needed` AND `__cdc_same_seq` > 1 THEN 1 ELSE 0 END) AS ambiguous "
            f"FROM {candidates} GROUP BY {self._key_names()}"
            f") c ON {self._keys_match('d', 'c')} "
            "WHERE COALESCE(c.available, 0) < d.`__cdc_needed` OR COALESCE(c.ambiguous, 0) = 1"
        )

    @staticmethod
    def deletes(columns: Sequence[str], candidates: str) -> str:
        """The target copies a window takes away, as the target has them (``_cdc_op`` ``d``).
        ``candidates``: a view of :meth:`candidates`."""
        names = ", ".join(quote(c) for c in columns)
        return f"SELECT {names}, 'd' AS `_cdc_op` FROM {candidates} WHERE `__cdc_rank` <= `__cdc_needed`"

    def copy_match(self, target: str = "t", source: str = "s") -> str:
        """The MERGE's ``ON``: a ``d`` source row is the target copy with its ``_cdc_seq`` and identity
        (both as the target holds them)."""
        pairs = zip(self._keys(target), self._keys(source), strict=True)
        same = " AND ".join(f"{left} <=> {right}" for left, right in pairs)
        return f"{source}.`_cdc_op` = 'd' AND {target}.`_cdc_seq` <=> {source}.`_cdc_seq` AND {same}"
