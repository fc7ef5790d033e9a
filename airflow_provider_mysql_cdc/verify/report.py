"""What a verification found, as JSON-safe dataclasses for XCom (pure; no credentials in any field)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: Differing keys a table's report lists at most, by default.
DEFAULT_MAX_KEYS = 20
#: Keys an error message quotes.
KEYS_IN_MESSAGE = 3

MISSING = "missing"
EXTRA = "extra"
CHANGED = "changed"


def json_safe(value: Any) -> Any:
    """A key value as JSON can carry it: numbers, strings, booleans and None as they are; dates and
    times in ISO form, decimals as text, bytes as ``base64:...``; lists and maps recursively."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [json_safe(v) for v in value]
    return str(value)


@dataclass(frozen=True)
class KeyDifference:
    """One key whose row differs: ``missing`` (MySQL has it, the target not), ``extra`` (the target has
    it, MySQL not) or ``changed`` (both have it; ``columns`` names the columns whose values differ)."""

    key: dict[str, Any]
    kind: str
    columns: tuple[str, ...] = ()

    def describe(self) -> str:
        """``id=7 changed (name, total)``."""
        key = ", ".join(f"{name}={value!r}" for name, value in self.key.items())
        return f"{key} {self.kind}" + (f" ({', '.join(self.columns)})" if self.columns else "")


@dataclass(frozen=True)
class TableVerification:
    """How one target compares with its MySQL table as of ``gtid_set``."""

    table: str
    target: str
    #: The GTID set of the source's consistent read: both sides are compared as of it.
    gtid_set: str = ""
    #: The target's applied frontier (its newest apply commit's upper GTID set).
    target_frontier: str = ""
    #: Staged changes between the two that were applied to the target in memory.
    changes_applied: int = 0
    ranges: int = 0
    ranges_checked: tuple[int, ...] = ()
    ranges_differing: tuple[int, ...] = ()
    #: Differing ranges left out of the row-by-row comparison by the row budget.
    ranges_over_budget: tuple[int, ...] = ()
    source_rows_checked: int = 0
    target_rows_checked: int = 0
    missing_rows: int = 0
    extra_rows: int = 0
    changed_rows: int = 0
    #: The first differing keys (up to the report's ``max_keys``), in key order.
    differences: tuple[KeyDifference, ...] = ()
    #: Columns of the MySQL table the target lacks.
    missing_columns: tuple[str, ...] = ()
    #: Why the table could not be verified; empty when it was.
    problem: str = ""

    @property
    def sampled(self) -> bool:
        """True when only some of the table's ranges were checked."""
        return len(self.ranges_checked) < self.ranges

    @property
    def differs(self) -> bool:
        """True when a difference was found (rows, ranges or columns)."""
        return bool(self.ranges_differing or self.missing_columns or self.missing_rows or self.extra_rows) or bool(
            self.changed_rows
        )

    def describe(self) -> str:
        """One line per table, plus one indented line per listed key."""
        if self.problem:
            return f"{self.table}: NOT VERIFIED: {self.problem}"
        scope = f"{len(self.ranges_checked)} of {self.ranges} ranges"
        head = f"{self.table} as of {self.gtid_set or '(empty)'} ({scope}, {self.source_rows_checked} rows)"
        if not self.differs:
            return f"{head}: equal"
        over = len(self.ranges_over_budget)
        lines = [
            f"{head}: DIFFERENT: {self.missing_rows} missing from {self.target}, {self.extra_rows} extra, "
            f"{self.changed_rows} changed, in {len(self.ranges_differing)} ranges"
            + (f" ({over} not compared row by row: row budget)" if over else "")
            + (f"; columns missing from the target: {', '.join(self.missing_columns)}" if self.missing_columns else "")
        ]
        lines += [f"    {difference.describe()}" for difference in self.differences]
        return "\n".join(lines)


@dataclass(frozen=True)
class VerifyReport:
    """A verification of a pipeline's targets: one entry per table, in the order asked."""

    pipeline: str
    tables: tuple[TableVerification, ...]
    sample_fraction: float = 1.0
    seed: int = 0
    row_budget: int = 0
    mode: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", "full" if self.sample_fraction >= 1.0 else "sampled")

    @property
    def differing(self) -> tuple[TableVerification, ...]:
        """The tables where a difference was found."""
        return tuple(table for table in self.tables if not table.problem and table.differs)

    @property
    def unverified(self) -> tuple[TableVerification, ...]:
        """The tables that could not be verified."""
        return tuple(table for table in self.tables if table.problem)

    def as_xcom(self) -> dict[str, Any]:
        """The report as plain JSON values (lists, not tuples: Airflow's XCom keeps a tuple's class)."""
        result: dict[str, Any] = json.loads(json.dumps(asdict(self)))
        return result

    @classmethod
    def from_xcom(cls, data: Mapping[str, Any]) -> VerifyReport:
        """The report :meth:`as_xcom` returned."""
        tables = tuple(
            TableVerification(
                **{
                    **table,
                    **{name: tuple(table[name]) for name in _TUPLE_FIELDS},
                    "differences": tuple(
                        KeyDifference(d["key"], d["kind"], tuple(d["columns"])) for d in table["differences"]
                    ),
                }
            )
            for table in data["tables"]
        )
        return cls(data["pipeline"], tables, data["sample_fraction"], data["seed"], data["row_budget"])

    def describe(self) -> str:
        """The report as text, one block per table."""
        return "\n".join(table.describe() for table in self.tables)

    def difference_message(self) -> str:
        """The message of :class:`~airflow_provider_mysql_cdc.errors.TargetDiffersError`: pipeline, each
        differing table with its GTID set and a few keys, and the fix."""
        parts = []
        for table in self.differing:
            keys = "; ".join(d.describe() for d in table.differences[:KEYS_IN_MESSAGE])
            counts = f"{table.missing_rows} missing, {table.extra_rows} extra, {table.changed_rows} changed"
            columns = f", columns missing: {', '.join(table.missing_columns)}" if table.missing_columns else ""
            parts.append(
                f"{table.table} ({table.target}) as of GTID set {table.gtid_set or '(empty)'}: {counts}{columns}"
                + (f"; e.g. {keys}" if keys else "")
            )
        names = [table.table for table in self.differing]
        return (
            f"pipeline {self.pipeline!r}: target differs from MySQL: " + " | ".join(parts) + ". Re-snapshot the "
            f"table(s) (trigger a run with resnapshot={names!r}), then verify again"
        )


_TUPLE_FIELDS = ("ranges_checked", "ranges_differing", "ranges_over_budget", "missing_columns")


def key_differences(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> tuple[KeyDifference, ...]:
    """:class:`KeyDifference` of rows holding the key columns, ``kind`` and ``columns``."""
    return tuple(
        KeyDifference({k: json_safe(row[k]) for k in keys}, str(row["kind"]), tuple(row["columns"] or ()))
        for row in rows
    )
