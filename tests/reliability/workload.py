"""A seeded workload for the randomized differential test.

:class:`Workload` owns one database (``rel_s<seed>`` by default) and writes to it one *step* per
window; every decision comes from ``random.Random(seed)``, so a step sequence is replayed exactly
by its seed (the concurrent writer's interleaving with the snapshot and the capture is timing, not
seed). The generator never reads the server: keys are drawn from counters it keeps, and statements
are written so that they are valid whatever the rows are (an UPDATE or DELETE of a key that a
concurrent writer already deleted changes nothing, fresh keys never collide).

Tables (all with the base columns ``name, qty, price, note, seen, flag, doc`` unless noted):

* ``t_int``: ``id INT`` primary key;
* ``t_big``: ``id BIGINT UNSIGNED`` primary key, keys on both sides of 2^63 (staged as decimal(20,0));
* ``t_comp``: composite key ``(grp BIGINT, code VARCHAR(20))``, negative ``grp`` values too;
* ``t_str``: ``code VARCHAR(40)`` key in the case-insensitive default collation; half of its key
  changes only change the case (``k000042`` -> ``K000042``: the same key for MySQL, another for Spark);
* ``bulk``: ``id INT`` key, target of the large (>= ``large_rows``) transactions, later deleted and truncated;
* ``all_types``: every column of every case of ``tests/integration/test_type_roundtrip.py`` in one
  table, written with the cases' own row values (zero dates, invalid dates, 70 kB blobs, ...);
* ``new_<n>``: tables created by later steps (they match the include pattern ``<db>.*``).

Operations, counted per kind in :class:`OpCounts` (each step returns its counts, the workload keeps
the totals): ``insert``, ``update``, ``delete``, ``pk_change``, ``null_write`` (columns set to NULL),
``same_key_cycle`` (one key updated, deleted and re-inserted in one window), ``single_table_txn``,
``multi_table_txn``, ``large_txn`` (one transaction of ``large_rows`` + rows), ``add_column``,
``drop_column``, ``widen_column`` (INT -> BIGINT, a longer VARCHAR, larger DECIMAL precision: the
changes the apply evolves in place), ``truncate``, ``create_table``, ``all_types_write``, and, from
the :class:`ConcurrentWriter`, ``concurrent_txn``. ``rows_written`` counts rows changed (as MySQL
reports them). ADD COLUMN always adds a nullable column without a default, each name used once,
and rows of the table are written after it in the same window: a default would give old rows a
value no binlog event carries, a re-added dropped name would meet the old values the target keeps
(README "What one apply does", step 3), and the target learns a new column only from staged rows
that carry it. Each of the three is a difference the apply does not handle today.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pymysql.converters

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.mysql.client import connect
from tests.integration.test_type_roundtrip import CASES, GENERATED, VECTOR, Case, Col

#: Kinds every quick run must show at least once (checked by the test).
REQUIRED_KINDS = (
    "insert",
    "update",
    "delete",
    "pk_change",
    "null_write",
    "same_key_cycle",
    "single_table_txn",
    "multi_table_txn",
    "large_txn",
    "add_column",
    "drop_column",
    "widen_column",
    "truncate",
    "create_table",
    "all_types_write",
    "concurrent_txn",
)
#: One-off operations the workload schedules into distinct windows, so that every run does each.
SCHEDULED = ("add_column", "drop_column", "widen_column", "truncate", "create_table", "same_key_cycle")

BASE_COLUMNS = (
    ("name", "VARCHAR(60) NOT NULL"),
    ("qty", "INT NULL"),
    ("price", "DECIMAL(12,2) NULL"),
    ("note", "TEXT NULL"),
    ("seen", "DATETIME(6) NULL"),
    ("flag", "TINYINT NULL"),
    ("doc", "JSON NULL"),
)
#: Types of added columns, and what each may be widened to.
EXTRA_TYPES = ("INT", "VARCHAR(30)", "DECIMAL(10,3)", "DATETIME(3)", "DOUBLE", "BIGINT")
WIDENINGS = {"INT": "BIGINT", "VARCHAR(30)": "VARCHAR(80)", "DECIMAL(10,3)": "DECIMAL(14,3)"}

KEY_KINDS = ("int", "big", "comp", "str")
_BIG_BASE = 2**63 - 700  # keys 1.. cross 2^63 after 100 keys (step 7)
_WRITER_KEYS = {"int": 1_500_000_000, "big": 18_446_744_073_000_000_000, "comp": 10**12, "str": 0}

Statement = str


class OpCounts(Counter[str]):
    """Operations done, by kind (``Counter``: missing kinds are 0)."""

    def line(self) -> str:
        """``kind=n`` pairs in a stable order, for the per-window log line."""
        return " ".join(f"{kind}={self[kind]}" for kind in sorted(self) if self[kind])


def literal(value: Any) -> str:
    """A SQL literal (PyMySQL's escaping, utf8mb4)."""
    return str(pymysql.converters.escape_item(value, "utf8mb4"))


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


@dataclass
class Table:
    """One table of the workload and the generator's counters for it."""

    name: str
    kind: str
    extras: list[tuple[str, str]] = field(default_factory=list)
    next_key: int = 1
    writer_next: int = 1

    def ddl(self, database: str) -> str:
        base = ", ".join(f"{quote(name)} {ddl}" for name, ddl in BASE_COLUMNS)
        key = {
            "int": "id INT NOT NULL, {base}, PRIMARY KEY (id)",
            "big": "id BIGINT UNSIGNED NOT NULL, {base}, PRIMARY KEY (id)",
            "comp": "grp BIGINT NOT NULL, code VARCHAR(20) NOT NULL, {base}, PRIMARY KEY (grp, code)",
            "str": "code VARCHAR(40) NOT NULL, {base}, PRIMARY KEY (code)",
        }[self.kind]
        return f"CREATE TABLE {quote(database)}.{quote(self.name)} ({key.format(base=base)})"

    def key_columns(self) -> tuple[str, ...]:
        return {"int": ("id",), "big": ("id",), "comp": ("grp", "code"), "str": ("code",)}[self.kind]

    def key_values(self, n: int, writer: bool = False) -> tuple[Any, ...]:
        """The key of the n-th row (of the main generator, or of the concurrent writer's own range)."""
        if self.kind == "int":
            return ((_WRITER_KEYS["int"] if writer else 0) + n,)
        if self.kind == "big":
            return ((_WRITER_KEYS["big"] + n) if writer else (_BIG_BASE + 7 * n),)
        if self.kind == "comp":
            return ((_WRITER_KEYS["comp"] + n) if writer else (n // 5 - 20), f"{'w' if writer else 'c'}{n:06d}")
        return (f"{'w' if writer else 'k'}{n:06d}",)

    def where(self, key: tuple[Any, ...]) -> str:
        return " AND ".join(f"{quote(c)} = {literal(v)}" for c, v in zip(self.key_columns(), key, strict=True))


class Values:
    """Random column values (NULL now and then), from the workload's generator."""

    TEXTS = ("plain", "é accent", "emoji 😀", "quote ' and \\ backslash", "", "tab\tnl\n", "中文", "  spaces  ")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def maybe_null(self, value: Any, p: float = 0.15) -> Any:
        return None if self.rng.random() < p else value

    def name(self) -> str:
        return self.rng.choice(self.TEXTS) + f" #{self.rng.randrange(10**6)}"

    def base(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "name": self.name()[:60],
            "qty": self.maybe_null(rng.randint(-(2**31), 2**31 - 1)),
            "price": self.maybe_null(decimal.Decimal(rng.randrange(-(10**12) + 1, 10**12)) / 100),
            "note": self.maybe_null(rng.choice(self.TEXTS) * rng.randint(0, 30)),
            "seen": self.maybe_null(
                dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randrange(10**9), microseconds=rng.randrange(10**6))
            ),
            "flag": self.maybe_null(rng.randint(-128, 127)),
            "doc": self.maybe_null(json.dumps({"k": rng.randrange(1000), "t": rng.choice(self.TEXTS), "a": [1, 2.5]})),
        }

    def extra(self, type_text: str) -> Any:
        rng = self.rng
        if type_text in ("INT",):
            return self.maybe_null(rng.randint(-(2**31), 2**31 - 1))
        if type_text == "BIGINT":
            return self.maybe_null(rng.randint(-(2**63), 2**63 - 1))
        if type_text.startswith("VARCHAR"):
            return self.maybe_null(self.name()[:30])
        if type_text.startswith("DECIMAL"):
            return self.maybe_null(decimal.Decimal(rng.randrange(-(10**10) + 1, 10**10)) / 1000)
        if type_text.startswith("DATETIME"):
            return self.maybe_null(dt.datetime(1990, 1, 1) + dt.timedelta(milliseconds=rng.randrange(10**12)))
        return self.maybe_null(rng.uniform(-1e6, 1e6))


# -- the every-type table, built from the type round trip's cases -------------------------------------


@dataclass(frozen=True)
class AllTypes:
    """``all_types``: every column of every type case (name clashes get the case name as prefix), and
    row templates that are the cases' rows side by side (a shorter case pads with NULL/DEFAULT)."""

    case: Case
    #: Columns that may be written (generated columns excluded).
    writable: tuple[str, ...]
    #: Writable columns that accept NULL.
    nullable: tuple[str, ...]
    session: tuple[str, ...] = ("SET sql_mode = 'ALLOW_INVALID_DATES'", "SET time_zone = '+05:30'")

    @classmethod
    def build(cls, with_vector: bool) -> AllTypes:
        # GENERATED first: its expressions name its own columns (``a``), so those keep their names.
        cases = [GENERATED, *(case for case in CASES if case is not GENERATED and (with_vector or case is not VECTOR))]
        columns: list[Col] = []
        seen: set[str] = set()
        for case in cases:
            for col in case.columns:
                name = col.name if col.name.lower() not in seen else f"{case.name}_{col.name}"
                seen.add(name.lower())
                columns.append(Col(name, col.ddl, col.kind))
        rows = []
        for i in range(max(len(case.rows) for case in cases)):
            parts = []
            for case in cases:
                if i < len(case.rows):
                    parts.append(case.rows[i])
                else:
                    parts.append(", ".join("DEFAULT" if " AS (" in col.ddl else "NULL" for col in case.columns))
            rows.append(", ".join(parts))
        generated = {col.name for col in columns if " AS (" in col.ddl}
        writable = tuple(col.name for col in columns if col.name not in generated)
        nullable = tuple(name for name in writable if "NOT NULL" not in dict((c.name, c.ddl) for c in columns)[name])
        return cls(Case("all_types", tuple(columns), tuple(rows), sql_mode="ALLOW_INVALID_DATES"), writable, nullable)

    def ddl(self, database: str) -> str:
        columns = ", ".join(f"{quote(col.name)} {col.ddl}" for col in self.case.columns)
        return f"CREATE TABLE {quote(database)}.`all_types` (id INT PRIMARY KEY, {columns})"

    def insert(self, database: str, key: int, template: int) -> str:
        names = ", ".join(quote(col.name) for col in self.case.columns)
        return f"INSERT INTO {quote(database)}.`all_types` (id, {names}) VALUES ({key}, {self.case.rows[template]})"

    def copy_row(self, database: str, target: int, source: int) -> str:
        sets = ", ".join(f"x.{quote(name)} = y.{quote(name)}" for name in self.writable)
        table = f"{quote(database)}.`all_types`"
        return f"UPDATE {table} AS x JOIN {table} AS y ON y.id = {source} SET {sets} WHERE x.id = {target}"

    def null_row(self, database: str, key: int) -> str:
        sets = ", ".join(f"{quote(name)} = NULL" for name in self.nullable)
        return f"UPDATE {quote(database)}.`all_types` SET {sets} WHERE id = {key}"


# -- the generator ----------------------------------------------------------------------------------------


@dataclass
class WorkloadSize:
    """How much one run writes."""

    initial_rows: int = 300
    #: Transactions per step (a random number up to this).
    transactions: int = 6
    #: Rows of the large transaction (one per run).
    large_rows: int = 100_000
    #: Rows inserted into each new table.
    new_table_rows: int = 40


class Workload:
    """The seeded generator for one database; :meth:`step` writes one window's worth."""

    def __init__(self, seed: int, windows: int, database: str | None = None, size: WorkloadSize | None = None) -> None:
        if windows < 4:
            raise ValueError("the workload needs at least 4 windows (large transaction, its delete, its truncate)")
        self.seed = seed
        self.windows = windows
        self.database = database or f"rel_s{seed}"
        self.size = size or WorkloadSize()
        self.rng = random.Random(seed)
        self.values = Values(self.rng)
        self.tables: list[Table] = []
        self.all_types: AllTypes | None = None
        self.types_next = 1
        self.new_tables = 0
        self.extra_columns = 0
        self.totals = OpCounts()
        self.rows_written = 0
        # One-off operations in distinct windows 2..windows; the large transaction in 2..windows-2,
        # its big DELETE in the next window and the TRUNCATE of ``bulk`` in the one after.
        later = list(range(2, windows + 1))
        self.large_window = self.rng.randint(2, windows - 2)
        self.schedule: dict[int, list[str]] = {}
        for kind in SCHEDULED:
            self.schedule.setdefault(self.rng.choice(later), []).append(kind)

    def qualified(self, table: str) -> str:
        return f"{quote(self.database)}.{quote(table)}"

    def table_names(self) -> list[str]:
        names = [table.name for table in self.tables]
        return [*names, "all_types"] if self.all_types else names

    # -- running statements ------------------------------------------------------------------------

    def _run(self, connection: pymysql.connections.Connection[Any], statements: Sequence[str]) -> int:
        changed = 0
        with connection.cursor() as cursor:
            for statement in statements:
                changed += max(cursor.execute(statement), 0)
        return changed

    def _transaction(
        self, connection: pymysql.connections.Connection[Any], statements: Sequence[str], counts: OpCounts
    ) -> None:
        session = self.all_types.session if self.all_types else ()
        rows = self._run(connection, [*session, "START TRANSACTION", *statements, "COMMIT"])
        counts["transactions"] += 1
        self.rows_written += rows

    # -- steps ------------------------------------------------------------------------------------

    def step(self, config: MySqlConnectionConfig, window: int, with_vector: bool = True) -> OpCounts:
        """Write the workload of ``window`` (1-based). Window 1 creates the database and its tables."""
        counts = OpCounts()
        connection = connect(config)
        try:
            if window == 1:
                self._setup(connection, counts, with_vector)
            scheduled = self.schedule.get(window, [])
            if window == self.large_window:
                self._large_transaction(connection, counts)
            elif window == self.large_window + 1:
                self._large_delete(connection, counts)
            elif window == self.large_window + 2:
                self._truncate(connection, counts, self._table("bulk"))
            operations: dict[str, Callable[[Any, OpCounts], object]] = {
                "add_column": self._add_column,
                "drop_column": self._drop_column,
                "widen_column": self._widen_column,
                "truncate": self._truncate,
                "create_table": self._create_table,
                "same_key_cycle": self._same_key_cycle,
            }
            for kind in scheduled:
                operations[kind](connection, counts)
            for _ in range(self.rng.randint(1, self.size.transactions)):
                self._random_transaction(connection, counts)
            if self.rng.random() < 0.15:  # more schema changes than the scheduled ones
                operations[self.rng.choice(["add_column", "drop_column", "widen_column"])](connection, counts)
        finally:
            connection.close()
        self.totals.update(counts)
        return counts

    def _table(self, name: str) -> Table:
        return next(table for table in self.tables if table.name == name)

    def _setup(self, connection: Any, counts: OpCounts, with_vector: bool) -> None:
        db = quote(self.database)
        self._run(connection, [f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
        self.tables = [Table("t_int", "int"), Table("t_big", "big"), Table("t_comp", "comp"), Table("t_str", "str")]
        self.tables.append(Table("bulk", "int"))
        self.all_types = AllTypes.build(with_vector)
        self._run(connection, [table.ddl(self.database) for table in self.tables] + [self.all_types.ddl(self.database)])
        for table in self.tables:
            rows = self.size.initial_rows if table.name != "bulk" else 50
            for start in range(0, rows, 100):
                self._transaction(connection, [self._insert(table, min(100, rows - start))], counts)
            counts["insert"] += 1
        templates = len(self.all_types.case.rows)
        self._transaction(
            connection,
            [self.all_types.insert(self.database, self._types_key(), i % templates) for i in range(2 * templates)],
            counts,
        )
        counts["all_types_write"] += 1

    def _types_key(self) -> int:
        key = self.types_next
        self.types_next += 1
        return key

    # -- statements ---------------------------------------------------------------------------------

    def _row(self, table: Table, key: tuple[Any, ...]) -> dict[str, Any]:
        row = dict(zip(table.key_columns(), key, strict=True))
        row.update(self.values.base())
        for name, type_text in table.extras:
            row[name] = self.values.extra(type_text)
        return row

    def _insert_rows(self, table: Table, rows: Sequence[dict[str, Any]]) -> str:
        columns = list(rows[0])
        values = ", ".join("(" + ", ".join(literal(row[c]) for c in columns) + ")" for row in rows)
        return f"INSERT INTO {self.qualified(table.name)} ({', '.join(map(quote, columns))}) VALUES {values}"

    def _insert(self, table: Table, n: int) -> str:
        rows = []
        for _ in range(n):
            rows.append(self._row(table, table.key_values(table.next_key)))
            table.next_key += 1
        return self._insert_rows(table, rows)

    def _some_key(self, table: Table) -> tuple[Any, ...]:
        return table.key_values(self.rng.randrange(1, max(table.next_key, 2)))

    def _update(self, table: Table, key: tuple[Any, ...]) -> str:
        row = self.values.base()
        chosen = self.rng.sample(sorted(row), self.rng.randint(1, len(row)))
        sets = {name: row[name] for name in chosen}
        for name, type_text in table.extras:
            if self.rng.random() < 0.7:
                sets[name] = self.values.extra(type_text)
        assignments = ", ".join(f"{quote(name)} = {literal(value)}" for name, value in sets.items())
        return f"UPDATE {self.qualified(table.name)} SET {assignments} WHERE {table.where(key)}"

    def _table_ops(self, table: Table, counts: OpCounts) -> list[str]:
        """1..4 random row operations on one base table."""
        statements = []
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.choices(
                ["insert", "update", "delete", "pk_change", "null_write"], weights=[4, 5, 2, 1, 1], k=1
            )[0]
            counts[op] += 1
            if op == "insert":
                statements.append(self._insert(table, self.rng.randint(1, 15)))
            elif op == "update":
                keys = [self._some_key(table) for _ in range(self.rng.randint(1, 6))]
                statements += [self._update(table, key) for key in keys]
            elif op == "delete":
                keys = [self._some_key(table) for _ in range(self.rng.randint(1, 4))]
                condition = " OR ".join(f"({table.where(k)})" for k in keys)
                statements.append(f"DELETE FROM {self.qualified(table.name)} WHERE {condition}")
            elif op == "pk_change":
                statements.append(self._pk_change(table))
            else:
                nullable = [name for name, _ in BASE_COLUMNS[1:]] + [name for name, _ in table.extras]
                chosen = self.rng.sample(nullable, self.rng.randint(1, len(nullable)))
                statements.append(
                    f"UPDATE {self.qualified(table.name)} SET "
                    + ", ".join(f"{quote(c)} = NULL" for c in chosen)
                    + f" WHERE {table.where(self._some_key(table))}"
                )
        return statements

    def _pk_change(self, table: Table) -> str:
        old = self._some_key(table)
        target = self.qualified(table.name)
        if table.kind == "str" and self.rng.random() < 0.5:
            # Only the case changes: the same key for the collation, another one byte for byte.
            return f"UPDATE {target} SET code = UPPER(code) WHERE {table.where(old)}"
        new = table.key_values(table.next_key)
        table.next_key += 1
        if table.kind == "comp" and self.rng.random() < 0.5:
            return f"UPDATE {target} SET code = {literal(new[1])} WHERE {table.where(old)}"
        sets = ", ".join(f"{quote(c)} = {literal(v)}" for c, v in zip(table.key_columns(), new, strict=True))
        return f"UPDATE {target} SET {sets} WHERE {table.where(old)}"

    def _types_ops(self, counts: OpCounts) -> list[str]:
        assert self.all_types is not None
        types, db = self.all_types, self.database
        templates = len(types.case.rows)
        statements = []
        for _ in range(self.rng.randint(1, 3)):
            op = self.rng.choice(["insert", "copy", "null", "delete", "pk_change"])
            counts["all_types_write"] += 1
            some = self.rng.randrange(1, self.types_next)
            if op == "insert":
                statements.append(types.insert(db, self._types_key(), self.rng.randrange(templates)))
                counts["insert"] += 1
            elif op == "copy":
                statements.append(types.copy_row(db, some, self.rng.randrange(1, self.types_next)))
                counts["update"] += 1
            elif op == "null":
                statements.append(types.null_row(db, some))
                counts["null_write"] += 1
            elif op == "delete":
                statements.append(f"DELETE FROM {self.qualified('all_types')} WHERE id = {some}")
                counts["delete"] += 1
            else:
                new = self._types_key()
                statements.append(f"UPDATE {self.qualified('all_types')} SET id = {new} WHERE id = {some}")
                counts["pk_change"] += 1
        return statements

    def _random_transaction(self, connection: Any, counts: OpCounts) -> None:
        candidates = [t for t in self.tables if t.name != "bulk"]
        many = self.rng.random() < 0.4
        chosen = self.rng.sample(candidates, self.rng.randint(2, 3)) if many else [self.rng.choice(candidates)]
        statements: list[str] = []
        for table in chosen:
            statements += self._table_ops(table, counts)
        if self.all_types and self.rng.random() < 0.3:
            statements += self._types_ops(counts)
            many = True
        counts["multi_table_txn" if many else "single_table_txn"] += 1
        self._transaction(connection, statements, counts)

    # -- scheduled and rarer operations ---------------------------------------------------------------

    def _same_key_cycle(self, connection: Any, counts: OpCounts) -> None:
        """One key updated twice, deleted and re-inserted in this window: in one transaction, or spread."""
        table = self.rng.choice([t for t in self.tables if t.name != "bulk"])
        key = self._some_key(table)
        statements = [
            self._update(table, key),
            self._update(table, key),
            f"DELETE FROM {self.qualified(table.name)} WHERE {table.where(key)}",
            self._insert_rows(table, [self._row(table, key)]),
            self._update(table, key),
        ]
        if self.rng.random() < 0.5:
            self._transaction(connection, statements, counts)
        else:
            for statement in statements:
                self._transaction(connection, [statement], counts)
        counts["same_key_cycle"] += 1

    def _large_transaction(self, connection: Any, counts: OpCounts) -> None:
        """``large_rows`` rows inserted by one INSERT ... SELECT from a recursive CTE, some of them
        updated and deleted again, and a change of another table: all one transaction."""
        table, n = self._table("bulk"), self.size.large_rows
        base = table.next_key
        table.next_key += n
        target = self.qualified(table.name)
        insert = (
            f"INSERT INTO {target} (id, name, qty, price, note, seen, flag, doc) "
            f"WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < {n - 1}) "
            f"SELECT {base} + n, CONCAT('bulk-', n), IF(n % 11 = 0, NULL, n % 1000), n / 100, "
            "IF(n % 7 = 0, NULL, REPEAT('x', n % 50)), TIMESTAMPADD(MICROSECOND, n * 1001, '2024-01-01'), "
            "n % 100, IF(n % 13 = 0, NULL, JSON_OBJECT('n', n)) FROM seq"
        )
        statements = [
            "SET SESSION cte_max_recursion_depth = 10000000",
            insert,
            f"UPDATE {target} SET qty = -qty, note = 'updated in the large transaction' "
            f"WHERE id BETWEEN {base} AND {base + n // 50}",
            f"DELETE FROM {target} WHERE id BETWEEN {base + n // 100} AND {base + n // 100 + n // 200}",
            *self._table_ops(self.rng.choice([t for t in self.tables if t.name != "bulk"]), counts),
        ]
        self._transaction(connection, statements, counts)
        counts["large_txn"] += 1
        counts["multi_table_txn"] += 1

    def _large_delete(self, connection: Any, counts: OpCounts) -> None:
        self._transaction(connection, [f"DELETE FROM {self.qualified('bulk')} WHERE id % 4 <> 0"], counts)
        counts["delete"] += 1
        counts["large_txn"] += 1

    def _truncate(self, connection: Any, counts: OpCounts, table: Table | None = None) -> None:
        """TRUNCATE with changes of the table before and after it in the same window."""
        table = table or self.rng.choice([t for t in self.tables if t.name != "bulk"])
        self._transaction(connection, [self._insert(table, 3), self._update(table, self._some_key(table))], counts)
        self._run(connection, [f"TRUNCATE TABLE {self.qualified(table.name)}"])
        self._transaction(connection, [self._insert(table, self.rng.randint(1, 20))], counts)
        counts["truncate"] += 1
        counts["insert"] += 2

    def _create_table(self, connection: Any, counts: OpCounts) -> None:
        self.new_tables += 1
        table = Table(f"new_{self.new_tables}", self.rng.choice(KEY_KINDS))
        self._run(connection, [table.ddl(self.database)])
        self.tables.append(table)
        rows = self.size.new_table_rows
        self._transaction(connection, [self._insert(table, rows)], counts)
        counts["create_table"] += 1
        counts["insert"] += 1

    def _add_column(self, connection: Any, counts: OpCounts, type_text: str | None = None) -> Table:
        table = self.rng.choice([t for t in self.tables if t.name != "bulk"])
        self.extra_columns += 1
        name, type_text = f"x{self.extra_columns}", type_text or self.rng.choice(EXTRA_TYPES)
        self._run(connection, [f"ALTER TABLE {self.qualified(table.name)} ADD COLUMN {quote(name)} {type_text} NULL"])
        table.extras.append((name, type_text))
        # Rows written after the ALTER carry the column (the target learns columns from staged rows).
        self._transaction(connection, [self._insert(table, 3), self._update(table, self._some_key(table))], counts)
        counts["add_column"] += 1
        return table

    def _drop_column(self, connection: Any, counts: OpCounts) -> None:
        with_extras = [t for t in self.tables if t.extras]
        if not with_extras:
            self._add_column(connection, counts)
            with_extras = [t for t in self.tables if t.extras]
        table = self.rng.choice(with_extras)
        name, _ = table.extras.pop(self.rng.randrange(len(table.extras)))
        self._run(connection, [f"ALTER TABLE {self.qualified(table.name)} DROP COLUMN {quote(name)}"])
        self._transaction(connection, [self._insert(table, 2), self._update(table, self._some_key(table))], counts)
        counts["drop_column"] += 1

    def _widen_column(self, connection: Any, counts: OpCounts) -> None:
        widenable = [(t, i) for t in self.tables for i, (_, kind) in enumerate(t.extras) if kind in WIDENINGS]
        if not widenable:
            table = self._add_column(connection, counts, self.rng.choice(sorted(WIDENINGS)))
            widenable = [(table, len(table.extras) - 1)]
        table, index = self.rng.choice(widenable)
        name, kind = table.extras[index]
        wider = WIDENINGS[kind]
        self._run(connection, [f"ALTER TABLE {self.qualified(table.name)} MODIFY {quote(name)} {wider} NULL"])
        table.extras[index] = (name, wider)
        self._transaction(connection, [self._insert(table, 2), self._update(table, self._some_key(table))], counts)
        counts["widen_column"] += 1


# -- the concurrent writer --------------------------------------------------------------------------------


class ConcurrentWriter:
    """Small random transactions on the base tables from a thread with its own connection, while
    the snapshot and the capture run (:meth:`start` / :meth:`stop`). Inserts use a key range of
    their own; updates and deletes hit keys of the main generator's range."""

    def __init__(self, workload: Workload, config: MySqlConnectionConfig, window: int) -> None:
        self.workload = workload
        self.config = config
        self.rng = random.Random(f"{workload.seed}-writer-{window}")
        self.values = Values(self.rng)
        self.counts = OpCounts()
        self.rows = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"writer-{window}", daemon=True)
        self._error: BaseException | None = None
        # The tables (and their columns) as they are now: the main generator does not run meanwhile.
        self._tables = [t for t in workload.tables if t.name != "bulk"]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> OpCounts:
        """Stop the thread; raise what it raised."""
        self._stop.set()
        self._thread.join(timeout=120)
        if self._thread.is_alive():
            raise RuntimeError("the concurrent writer did not stop within 120 s")
        if self._error is not None:
            raise RuntimeError(f"the concurrent writer failed: {self._error!r}") from self._error
        return self.counts

    def _statements(self) -> list[str]:
        rng, values, db = self.rng, self.values, self.workload.database
        table = rng.choice(self._tables)
        target = f"{quote(db)}.{quote(table.name)}"
        statements = []
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(["insert", "update", "delete"])
            if op == "insert":
                row = dict(zip(table.key_columns(), table.key_values(table.writer_next, writer=True), strict=True))
                table.writer_next += 1
                row.update(values.base())
                names = ", ".join(map(quote, row))
                statements.append(
                    f"INSERT INTO {target} ({names}) VALUES ({', '.join(literal(v) for v in row.values())})"
                )
            else:
                pick = rng.random() < 0.5 and table.writer_next > 1
                n = rng.randrange(1, table.writer_next) if pick else rng.randrange(1, max(table.next_key, 2))
                key = table.key_values(n, writer=bool(pick))
                if op == "update":
                    sets = {k: v for k, v in values.base().items() if rng.random() < 0.5} or {"name": values.name()}
                    assignments = ", ".join(f"{quote(c)} = {literal(v)}" for c, v in sets.items())
                    statements.append(f"UPDATE {target} SET {assignments} WHERE {table.where(key)}")
                else:
                    statements.append(f"DELETE FROM {target} WHERE {table.where(key)}")
            self.counts[op] += 1
        return statements

    def _loop(self) -> None:
        try:
            connection = connect(self.config)
            try:
                while not self._stop.is_set():
                    with connection.cursor() as cursor:
                        cursor.execute("START TRANSACTION")
                        for statement in self._statements():
                            self.rows += max(cursor.execute(statement), 0)
                        cursor.execute("COMMIT")
                    self.counts["concurrent_txn"] += 1
                    self._stop.wait(self.rng.uniform(0.0, 0.02))
            finally:
                connection.close()
        except BaseException as exc:  # reported by stop()
            self._error = exc
