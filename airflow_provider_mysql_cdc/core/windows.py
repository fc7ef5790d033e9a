"""Windows: cut-off rules, caps, table selection and the decision of where a window stops (pure)."""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from airflow_provider_mysql_cdc.core.ddl import DdlTarget
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet
from airflow_provider_mysql_cdc.errors import ConfigurationError, UnsupportedNameError


class CutoffRule(str, enum.Enum):
    """Where a new window ends."""

    #: upper = ``@@gtid_executed`` read when the task starts.
    CATCH_UP = "catch_up"
    #: every transaction committed before the run's ``data_interval_end`` (GTID event commit time).
    DATA_INTERVAL = "data_interval"

    @classmethod
    def parse(cls, value: str | CutoffRule) -> CutoffRule:
        """Accept the enum or its value; raise :class:`ConfigurationError` otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ConfigurationError(
                f"unknown cutoff {value!r}; use {CutoffRule.DATA_INTERVAL.value!r} or {CutoffRule.CATCH_UP.value!r}"
            ) from None


def patterns(value: Sequence[str] | str) -> tuple[str, ...]:
    """Table names or patterns given as one string or a list (templated arguments arrive as either)."""
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class WindowCaps:
    """Optional limits that end a window early, always on a transaction boundary (None: no limit).

    A cap is checked before each transaction: the transaction that crosses it is taken whole, so a
    window may exceed a cap by up to one transaction, and a transaction larger than the cap forms
    a window of its own.
    """

    #: Staged rows (a key change counts two: delete plus insert).
    max_rows: int | None = None
    #: Bytes of the binlog row events of the selected tables.
    max_bytes: int | None = None
    #: Transactions, staged or not (every transaction moves the frontier).
    max_transactions: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_rows", "max_bytes", "max_transactions"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigurationError(f"{name} must be at least 1 (or None for no limit), got {value}")

    def reached(self, rows: int, approx_bytes: int, transactions: int) -> str | None:
        """The name of the first cap reached, or None."""
        if self.max_rows is not None and rows >= self.max_rows:
            return "max_rows"
        if self.max_bytes is not None and approx_bytes >= self.max_bytes:
            return "max_bytes"
        if self.max_transactions is not None and transactions >= self.max_transactions:
            return "max_transactions"
        return None


@dataclass(frozen=True)
class TableSelection:
    """Include/exclude ``database.table`` glob patterns (case-sensitive, like MySQL on Linux)."""

    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()
    _cache: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for pattern in (*self.include, *self.exclude):
            if pattern.count(".") < 1:
                raise ConfigurationError(f"table pattern {pattern!r} must look like 'database.table' (globs allowed)")

    @classmethod
    def of(cls, include: Sequence[str] | str = ("*.*",), exclude: Sequence[str] | str = ()) -> TableSelection:
        """Build from a pattern or a list of patterns."""
        return cls(patterns(include), patterns(exclude))

    def matches_database(self, database: str) -> bool:
        """True when some include pattern can select a table of ``database``."""
        return any(fnmatch.fnmatchcase(database, pattern.split(".", 1)[0]) for pattern in self.include)

    def matches_ddl(self, targets: Sequence[DdlTarget] | None, default_database: str) -> bool:
        """True when a DDL statement naming ``targets`` (None: unrecognized form) concerns the selection."""
        if targets is None:
            return self.matches_database(default_database)
        return any(
            self.matches(target.database, target.table) if target.table else self.matches_database(target.database)
            for target in targets
        )

    def matches(self, database: str, table: str) -> bool:
        """True when the table is selected (cached: called for every row event); raises
        :class:`UnsupportedNameError` for a selected table whose database name holds a dot, or whose
        database or table name holds a slash or a backslash."""
        key = (database, table)
        cached = self._cache.get(key)
        if cached is None:
            name = f"{database}.{table}"
            cached = any(fnmatch.fnmatchcase(name, p) for p in self.include) and not any(
                fnmatch.fnmatchcase(name, p) for p in self.exclude
            )
            if cached and "." in database:
                raise UnsupportedNameError(
                    f"the table `{database}`.`{table}` is selected, but its database's name holds a dot: this "
                    f"provider names each table 'database.table', and would take it for a table of database "
                    f"{database.split('.', 1)[0]!r}. Nothing of it was read. Rename the database, or leave its "
                    f"tables out of the pipeline's selection (exclude_tables={[f'{database}.*']!r})"
                )
            if cached and ("/" in name or "\\" in name):
                raise UnsupportedNameError(
                    f"the table `{database}`.`{table}` is selected, but its name holds a slash or a backslash: "
                    "its staged files and a path-based catalog's table would be named by a path that leaves its "
                    "own directory. Nothing of it was read. Rename the table, or leave it out of the pipeline's "
                    f"selection (exclude_tables={[name]!r})"
                )
            self._cache[key] = cached
        return cached


@dataclass(frozen=True)
class WindowBound:
    """Where a window being read stops.

    * ``exact``: re-reading a published window: exactly the transactions in ``gtids`` (minus lower).
    * ``gtids``: a ``catch_up`` window: stop at the first transaction outside ``gtids``.
    * ``before_us``: a ``data_interval`` window: stop at the first transaction committed at or after it.
    """

    gtids: GtidSet | None = None
    exact: bool = False
    before_us: int | None = None

    def ends_before(self, gtid: Gtid, commit_ts_us: int) -> bool:
        """True when a transaction starting here is past the window (the window ends before it)."""
        if self.before_us is not None and commit_ts_us >= self.before_us:
            return True
        return self.gtids is not None and not self.exact and gtid not in self.gtids

    def skips(self, gtid: Gtid) -> bool:
        """True when an exact re-read must skip a transaction that is not part of the window."""
        return self.exact and self.gtids is not None and gtid not in self.gtids


def to_epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (naive ones are taken as UTC)."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
