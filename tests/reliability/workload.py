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
* ``new_<n>``: tables created by later steps (they match the include pattern ``<db>.*``);
* ``nokey_log`` (INT, VARCHAR, FLOAT, DOUBLE, MEDIUMBLOB and JSON columns) and ``nokey_bag`` (INT,
  VARCHAR, TEXT): tables without any key (:class:`KeylessTable`), whose columns take a few values each
  (NULL, ``-0.0`` and ``0.0``, JSON ``null``, 70 kB blobs), so that they hold many identical rows; the
  pipeline replicates them as multisets.

The base columns of the keyed tables keep their names and types (the concurrent writer writes them);
schema changes act on *added* columns (:class:`Column`: ``x<n>``, with or without a DEFAULT, NULL or
NOT NULL), on the primary key and on whole tables. The generator knows every table's columns as MySQL
has them, so its statements name the current columns (inserts omit a column with a DEFAULT now and
then).

Operations, counted per kind in :class:`OpCounts` (each step returns its counts, the workload keeps
the totals):

* rows: ``insert``, ``update``, ``delete``, ``pk_change`` (a row's key values changed),
  ``null_write`` (columns set to NULL), ``json_update`` (JSON_SET / JSON_REPLACE / JSON_REMOVE of
  ``doc``), ``same_key_cycle`` (one key updated, deleted and re-inserted in one window),
  ``single_table_txn``, ``multi_table_txn``, ``large_txn`` (one transaction of ``large_rows`` + rows),
  ``all_types_write``, and, from the :class:`ConcurrentWriter`, ``concurrent_txn``;
* tables without a key (random steps, transactions of their own or with keyed tables, and the
  concurrent writer): ``keyless_insert`` (rows inserted one to three times each), ``keyless_copy``
  (``INSERT ... SELECT`` of rows the table holds), ``keyless_delete_limit`` and ``keyless_update_limit``
  (``DELETE`` / ``UPDATE ... LIMIT`` of one of several identical rows), ``delete`` of every copy that
  matches; ``keyless_identical_rows`` (copies of one row inserted, then one updated and one deleted by
  ``LIMIT 1``) and ``keyless_schema_change`` (ADD COLUMN with or without a DEFAULT, DROP of an added
  column, or TRUNCATE, with rows before and after);
* columns: ``add_column`` (nullable, no default), ``add_column_default`` (a constant DEFAULT, NULL or
  NOT NULL), ``add_column_expr_default`` (``DEFAULT (expression)``), ``add_column_positioned`` (FIRST or
  AFTER a column), ``drop_column``, ``readd_column`` (DROP COLUMN, then ADD COLUMN of the same name with
  another type: in one ALTER or two), ``rename_column`` (RENAME COLUMN or CHANGE), ``swap_columns`` (two
  names swapped in one ALTER, by RENAME COLUMN or CHANGE), ``widen_column`` (INT -> BIGINT, VARCHAR(10) ->
  VARCHAR(50), larger DECIMAL precision, FLOAT -> DOUBLE: followed in place), ``retype_column`` (INT ->
  VARCHAR, DECIMAL scale cut, DATETIME(3) -> DATETIME, DOUBLE -> FLOAT, VARCHAR -> CHAR, ...: values
  may change, so capture has the table re-built from a fresh snapshot);
* keys and tables: ``primary_key_change`` (DROP PRIMARY KEY, ADD PRIMARY KEY on other columns, in one
  ALTER), ``primary_key_cycle`` (DROP PRIMARY KEY, rows written to the table without a key, ADD
  PRIMARY KEY: each key change has the table re-built, so it waits for the next window's snapshot,
  which reads it again), ``truncate``, ``truncate_commented`` (``/* ... */ TRUNCATE ...``),
  ``create_table``, ``drop_create_table`` (DROP TABLE, CREATE TABLE of the same name, rows);
* sessions (:func:`session_settings`, for every transaction of the generator and of the concurrent
  writer): ``row_image_minimal``, ``row_image_noblob`` (``binlog_row_image``), ``partial_json``
  (``binlog_row_value_options = PARTIAL_JSON`` with JSON updates in the transaction),
  ``compressed_txn`` (``binlog_transaction_compression = ON``) and ``compressed_large_txn`` (thousands
  of rows in one compressed transaction);
* XA: ``xa_two_phase`` (row changes of one or two tables in an ``XA PREPARE``, a transaction of a table
  without a key, then ``XA COMMIT``; one time in three a second one rolled back instead, its tables
  re-built).

``rows_written`` counts rows changed (as MySQL reports them). Every kind of :data:`SCHEDULED` happens
in a window the seed picks (2..windows), so every run does each one at least once; the random steps
add more of them.
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

#: One-off operations the workload schedules into windows 2..windows, so that every run does each.
SCHEDULED = (
    "add_column",
    "add_column_default",
    "add_column_expr_default",
    "add_column_positioned",
    "drop_column",
    "readd_column",
    "rename_column",
    "swap_columns",
    "widen_column",
    "retype_column",
    "primary_key_change",
    "primary_key_cycle",
    "truncate",
    "truncate_commented",
    "create_table",
    "drop_create_table",
    "same_key_cycle",
    "row_image_minimal",
    "row_image_noblob",
    "partial_json",
    "compressed_txn",
    "compressed_large_txn",
    "keyless_identical_rows",
    "keyless_schema_change",
    "xa_two_phase",
)
#: Kinds every quick run must show at least once (checked by the test).
REQUIRED_KINDS = (
    "insert",
    "update",
    "delete",
    "pk_change",
    "null_write",
    "json_update",
    "single_table_txn",
    "multi_table_txn",
    "large_txn",
    "all_types_write",
    "concurrent_txn",
    "keyless_insert",
    "keyless_copy",
    "keyless_delete_limit",
    "keyless_update_limit",
    *SCHEDULED,
)
#: Schema changes a step may add at random (on top of the scheduled ones).
RANDOM_SCHEMA_CHANGES = (
    "add_column",
    "add_column_default",
    "add_column_expr_default",
    "add_column_positioned",
    "drop_column",
    "readd_column",
    "rename_column",
    "swap_columns",
    "widen_column",
    "retype_column",
    "primary_key_change",
    "truncate_commented",
)

BASE_COLUMNS = (
    ("name", "VARCHAR(60) NOT NULL"),
    ("qty", "INT NULL"),
    ("price", "DECIMAL(12,2) NULL"),
    ("note", "TEXT NULL"),
    ("seen", "DATETIME(6) NULL"),
    ("flag", "TINYINT NULL"),
    ("doc", "JSON NULL"),
)
#: Types of added columns.
EXTRA_TYPES = ("INT", "VARCHAR(30)", "VARCHAR(10)", "DECIMAL(10,3)", "DATETIME(3)", "DOUBLE", "FLOAT", "BIGINT")
#: Changes that keep every value and widen the staged type: followed in place.
WIDENINGS = {
    "INT": "BIGINT",
    "VARCHAR(10)": "VARCHAR(50)",
    "VARCHAR(30)": "VARCHAR(80)",
    "DECIMAL(10,3)": "DECIMAL(14,3)",
    "FLOAT": "DOUBLE",
}
#: Changes that may change values (rounding, CHAR's trailing spaces) or the staged type: re-built.
RETYPES = {
    "INT": "VARCHAR(20)",
    "BIGINT": "DECIMAL(25,0)",
    "DECIMAL(10,3)": "DECIMAL(12,1)",
    "DECIMAL(14,3)": "DECIMAL(16,1)",
    "DATETIME(3)": "DATETIME",
    "DOUBLE": "FLOAT",
    "VARCHAR(10)": "CHAR(10)",
    "FLOAT": "DECIMAL(20,4)",
}
#: Constant defaults of added columns (quoted: MySQL converts them, and they stay valid across the
#: type changes above).
CONSTANT_DEFAULTS = {
    "INT": "'7'",
    "BIGINT": "'5000000000'",
    "VARCHAR(30)": "'std'",
    "VARCHAR(10)": "''",
    "DECIMAL(10,3)": "'1.5'",
    "DATETIME(3)": "'2020-01-02 03:04:05'",
    "DOUBLE": "'2.5'",
    "FLOAT": "'-0.25'",
}
#: Expression defaults of added columns (deterministic: the replica computes the same values).
EXPRESSION_DEFAULTS = (
    ("BIGINT", "(qty * 2)"),
    ("VARCHAR(80)", "(CONCAT('d-', LEFT(name, 10)))"),
    ("DECIMAL(14,3)", "(price / 4)"),
    ("INT", "(42)"),
    ("VARCHAR(30)", "('literal')"),
)
#: Primary keys a table may switch between (by key kind); the key's own columns stay unique, so the
#: generator's WHERE clauses on them still name one row.
PRIMARY_KEYS = {
    "int": (("id",), ("id", "name")),
    "big": (("id",), ("name", "id")),
    "comp": (("grp", "code"), ("code",), ("code", "grp")),
    "str": (("code",), ("code", "name")),
}
#: ``binlog_row_image`` values and their weights.
ROW_IMAGES = (("FULL", 6), ("MINIMAL", 2), ("NOBLOB", 2))
#: JSON updates of ``doc`` (PARTIAL_JSON logs them as diffs): ``{n}`` a number, ``{s}`` a string literal.
JSON_UPDATES = (
    "JSON_SET(`doc`, '$.k', {n})",
    "JSON_REPLACE(`doc`, '$.t', {s})",
    "JSON_REMOVE(`doc`, '$.a[0]')",
    "JSON_SET(`doc`, '$.new', JSON_ARRAY({n}, {s}))",
    "JSON_REPLACE(`doc`, '$.a[1]', {n})",
    "JSON_SET(JSON_REMOVE(`doc`, '$.t'), '$.t2', {s})",
    "JSON_INSERT(`doc`, '$.ins', {n})",
)

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
class Column:
    """A column added to a workload table, as MySQL has it now."""

    name: str
    type_text: str
    nullable: bool = True
    #: The DEFAULT clause's value (a quoted literal or a parenthesized expression), or None.
    default: str | None = None

    def definition(self, type_text: str | None = None) -> str:
        """The column definition after its name (for ADD, CHANGE and MODIFY), optionally of another type."""
        null = "NULL" if self.nullable else "NOT NULL"
        default = f" DEFAULT {self.default}" if self.default is not None else ""
        return f"{type_text or self.type_text} {null}{default}"


@dataclass
class Table:
    """One table of the workload and the generator's counters for it."""

    name: str
    kind: str
    extras: list[Column] = field(default_factory=list)
    next_key: int = 1
    writer_next: int = 1
    #: The current primary key (one of :data:`PRIMARY_KEYS` of the kind; empty only inside a step).
    primary_key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.primary_key = self.primary_key or self.key_columns()

    def ddl(self, database: str) -> str:
        base = ", ".join(f"{quote(name)} {ddl}" for name, ddl in BASE_COLUMNS)
        key = {
            "int": "id INT NOT NULL, {base}",
            "big": "id BIGINT UNSIGNED NOT NULL, {base}",
            "comp": "grp BIGINT NOT NULL, code VARCHAR(20) NOT NULL, {base}",
            "str": "code VARCHAR(40) NOT NULL, {base}",
        }[self.kind]
        primary = ", ".join(map(quote, self.primary_key))
        return f"CREATE TABLE {quote(database)}.{quote(self.name)} ({key.format(base=base)}, PRIMARY KEY ({primary}))"

    def key_columns(self) -> tuple[str, ...]:
        """The columns whose values identify a row for the generator (its first primary key)."""
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

    def column(self, name: str) -> Column:
        return next(column for column in self.extras if column.name == name)

    def all_columns(self) -> list[str]:
        """Every column name (key, base, added), in no particular order."""
        return [*self.key_columns(), *(name for name, _ in BASE_COLUMNS), *(c.name for c in self.extras)]


def _type_arguments(type_text: str) -> tuple[str, list[int]]:
    """``DECIMAL(10,3)`` -> ("DECIMAL", [10, 3])."""
    base, _, arguments = type_text.partition("(")
    return base, [int(part) for part in arguments.rstrip(")").split(",")] if arguments else []


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

    def extra(self, column: Column) -> Any:
        """A value of an added column (NULL now and then when it is nullable)."""
        value = self._typed(column.type_text)
        return self.maybe_null(value) if column.nullable else value

    def _typed(self, type_text: str) -> Any:
        rng = self.rng
        base, arguments = _type_arguments(type_text)
        if base == "INT":
            return rng.randint(-(2**31), 2**31 - 1)
        if base == "BIGINT":
            return rng.randint(-(2**63), 2**63 - 1)
        if base in ("VARCHAR", "CHAR"):
            return self.name()[: arguments[0]]
        if base == "DECIMAL":
            precision, scale = arguments
            return decimal.Decimal(rng.randrange(-(10**precision) + 1, 10**precision)).scaleb(-scale)
        if base == "DATETIME":
            return dt.datetime(1990, 1, 1) + dt.timedelta(milliseconds=rng.randrange(10**12))
        if base in ("DOUBLE", "FLOAT"):
            return rng.uniform(-1e6, 1e6)
        raise AssertionError(f"no values for {type_text}")

    def json_update(self) -> str:
        """A JSON_* expression updating ``doc`` in place."""
        template = self.rng.choice(JSON_UPDATES)
        return template.format(n=self.rng.randrange(-1000, 10**6), s=literal(self.name()[:20]))


def session_settings(
    rng: random.Random, image: str | None = None, partial_json: bool | None = None, compressed: bool | None = None
) -> tuple[list[str], dict[str, Any]]:
    """``SET SESSION`` statements for one transaction (row image, partial JSON, compression; random
    unless given) and the settings chosen."""
    if image is None:
        image = rng.choices([name for name, _ in ROW_IMAGES], weights=[w for _, w in ROW_IMAGES], k=1)[0]
    if partial_json is None:
        partial_json = rng.random() < 0.3
    if compressed is None:
        compressed = rng.random() < 0.2
    statements = [
        f"SET SESSION binlog_row_image = '{image}'",
        f"SET SESSION binlog_row_value_options = '{'PARTIAL_JSON' if partial_json else ''}'",
        f"SET SESSION binlog_transaction_compression = {'ON' if compressed else 'OFF'}",
    ]
    return statements, {"image": image, "partial_json": partial_json, "compressed": compressed}


def count_session(counts: OpCounts, settings: dict[str, Any], statements: Sequence[str]) -> None:
    """Count a transaction's session kinds (``partial_json`` only when it holds a JSON update)."""
    if settings["image"] == "MINIMAL":
        counts["row_image_minimal"] += 1
    elif settings["image"] == "NOBLOB":
        counts["row_image_noblob"] += 1
    if settings["compressed"]:
        counts["compressed_txn"] += 1
    if settings["partial_json"] and any(
        "JSON_" in statement and "`doc` = JSON_" in statement for statement in statements
    ):
        counts["partial_json"] += 1


# -- tables without a key ---------------------------------------------------------------------------

#: Columns of the tables without any key, each with the SQL values it takes: few of them, so that
#: identical rows are common (NULL, -0.0 next to 0.0, the JSON ``null`` next to SQL NULL, 70 kB blobs).
KEYLESS_TABLES: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "nokey_log": (
        ("a", "INT NULL", ("NULL", "1", "2", "3", "-4")),
        ("s", "VARCHAR(20) NULL", ("NULL", "'x'", "'y'", "''", "'é ü'")),
        ("f", "FLOAT NULL", ("NULL", "0.5", "-0.0", "0.0", "1.25", "-2.75")),
        ("d", "DOUBLE NULL", ("NULL", "0.5", "-0.0", "0.0", "1e300", "3.141592653589793")),
        ("b", "MEDIUMBLOB NULL", ("NULL", "''", "0x00ff", "0x00", "REPEAT(0xab, 70000)")),
        ("j", "JSON NULL", ("NULL", "'null'", "'[]'", "'{\"k\": 1}'", '\'{"k": [1, 2.5, "t"]}\'')),
    ),
    "nokey_bag": (
        ("v", "INT NULL", ("NULL", "1", "2")),
        ("w", "VARCHAR(5) NULL", ("NULL", "'a'", "'b'")),
        ("t", "TEXT NULL", ("NULL", "''", "'text'", "REPEAT('long ', 300)")),
    ),
}
#: Columns of a table without a key that conditions of its UPDATEs and DELETEs compare (exact types).
KEYLESS_CONDITION_COLUMNS = ("a", "s", "v", "w")
#: Columns added to a table without a key (``keyless_schema_change``): type and values.
KEYLESS_ADDED = (
    ("INT NOT NULL DEFAULT 7", ("7", "8")),
    ("VARCHAR(8) NULL DEFAULT 'dflt'", ("NULL", "'dflt'", "'z'")),
    ("DOUBLE NULL", ("NULL", "-0.0", "2.5")),
)


@dataclass
class KeylessColumn:
    """A column of a table without a key, as MySQL has it now, and the SQL values the generator writes."""

    name: str
    ddl: str
    values: tuple[str, ...]


@dataclass
class KeylessTable:
    """A table without a primary key or unique key: its rows are a multiset."""

    name: str
    columns: list[KeylessColumn]

    @classmethod
    def of(cls, name: str) -> KeylessTable:
        return cls(name, [KeylessColumn(*column) for column in KEYLESS_TABLES[name]])

    def ddl(self, database: str) -> str:
        columns = ", ".join(f"{quote(c.name)} {c.ddl}" for c in self.columns)
        return f"CREATE TABLE {quote(database)}.{quote(self.name)} ({columns})"

    def row(self, rng: random.Random) -> list[str]:
        """One row's SQL values, in column order."""
        return [rng.choice(column.values) for column in self.columns]

    def condition(self, rng: random.Random) -> str:
        """A condition on one or two of its columns (``<=>``: NULL matches NULL), usually true of several
        identical rows."""
        usable = [c for c in self.columns if c.name in KEYLESS_CONDITION_COLUMNS]
        chosen = rng.sample(usable, rng.randint(1, min(2, len(usable))))
        return " AND ".join(f"{quote(c.name)} <=> {rng.choice(c.values)}" for c in chosen)

    def statements(self, rng: random.Random, database: str, counts: OpCounts) -> list[str]:
        """1..4 random row operations: inserts of identical rows, copies of rows it holds, and
        ``DELETE`` / ``UPDATE ... LIMIT`` of one (or two) of several identical rows."""
        target = f"{quote(database)}.{quote(self.name)}"
        names = ", ".join(quote(c.name) for c in self.columns)
        statements = []
        for _ in range(rng.randint(1, 4)):
            op = rng.choices(
                ["keyless_insert", "keyless_copy", "keyless_delete_limit", "keyless_update_limit", "delete"],
                weights=[4, 2, 3, 3, 1],
                k=1,
            )[0]
            counts[op] += 1
            if op == "keyless_insert":
                rows = [self.row(rng) for _ in range(rng.randint(1, 3))]
                copies = [row for row in rows for _ in range(rng.randint(1, 3))]
                values = ", ".join("(" + ", ".join(row) + ")" for row in copies)
                statements.append(f"INSERT INTO {target} ({names}) VALUES {values}")
            elif op == "keyless_copy":
                limit = rng.randint(1, 3)
                statements.append(
                    f"INSERT INTO {target} ({names}) SELECT {names} FROM {target} "
                    f"WHERE {self.condition(rng)} LIMIT {limit}"
                )
            elif op == "keyless_delete_limit":
                statements.append(f"DELETE FROM {target} WHERE {self.condition(rng)} LIMIT {rng.choice((1, 1, 2))}")
            elif op == "keyless_update_limit":
                statements.append(f"UPDATE {target} SET {self.assignment(rng)} WHERE {self.condition(rng)} LIMIT 1")
            else:  # every copy that matches
                statements.append(f"DELETE FROM {target} WHERE {self.condition(rng)}")
        return statements

    def assignment(self, rng: random.Random) -> str:
        """``col = value`` for an UPDATE (a JSON column sometimes changed in place)."""
        column = rng.choice(self.columns)
        if column.name == "j" and rng.random() < 0.5:
            return f"`j` = JSON_SET(COALESCE(`j`, JSON_OBJECT()), '$.k', {rng.randrange(-5, 5)})"
        return f"{quote(column.name)} = {rng.choice(column.values)}"


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
    #: Rows of the compressed transaction (``compressed_large_txn``).
    compressed_rows: int = 5_000
    #: Distinct rows first inserted into each table without a key (each one up to three times).
    keyless_rows: int = 60


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
        self.keyless: list[KeylessTable] = []
        self.all_types: AllTypes | None = None
        self.types_next = 1
        self.new_tables = 0
        self.extra_columns = 0
        self.totals = OpCounts()
        self.rows_written = 0
        #: Session settings the next transaction must use (the scheduled session kinds).
        self._forced: dict[str, Any] = {}
        # One-off operations in windows 2..windows; the large transaction in 2..windows-2, its big
        # DELETE in the next window and the TRUNCATE of ``bulk`` in the one after.
        later = list(range(2, windows + 1))
        self.large_window = self.rng.randint(2, windows - 2)
        self.schedule: dict[int, list[str]] = {}
        for kind in SCHEDULED:
            self.schedule.setdefault(self.rng.choice(later), []).append(kind)
        self.operations: dict[str, Callable[[Any, OpCounts], object]] = {
            "add_column": self._add_column,
            "add_column_default": self._add_column_default,
            "add_column_expr_default": self._add_column_expr_default,
            "add_column_positioned": self._add_column_positioned,
            "drop_column": self._drop_column,
            "readd_column": self._readd_column,
            "rename_column": self._rename_column,
            "swap_columns": self._swap_columns,
            "widen_column": self._widen_column,
            "retype_column": self._retype_column,
            "primary_key_change": self._primary_key_change,
            "primary_key_cycle": self._primary_key_cycle,
            "truncate": self._truncate,
            "truncate_commented": self._truncate_commented,
            "create_table": self._create_table,
            "drop_create_table": self._drop_create_table,
            "same_key_cycle": self._same_key_cycle,
            "row_image_minimal": self._forced_session("row_image_minimal", image="MINIMAL"),
            "row_image_noblob": self._forced_session("row_image_noblob", image="NOBLOB"),
            "partial_json": self._partial_json,
            "compressed_txn": self._forced_session("compressed_txn", compressed=True),
            "compressed_large_txn": self._compressed_large_transaction,
            "keyless_identical_rows": self._keyless_identical_rows,
            "keyless_schema_change": self._keyless_schema_change,
            "xa_two_phase": self._xa_two_phase,
        }
        self.xa_next = 1

    def qualified(self, table: str) -> str:
        return f"{quote(self.database)}.{quote(table)}"

    def table_names(self) -> list[str]:
        names = [table.name for table in self.tables] + [table.name for table in self.keyless]
        return [*names, "all_types"] if self.all_types else names

    # -- running statements ------------------------------------------------------------------------

    def _run(self, connection: pymysql.connections.Connection[Any], statements: Sequence[str]) -> int:
        changed = 0
        with connection.cursor() as cursor:
            for statement in statements:
                changed += max(cursor.execute(statement), 0)
        return changed

    def _transaction(
        self,
        connection: pymysql.connections.Connection[Any],
        statements: Sequence[str],
        counts: OpCounts,
        *,
        begin: Sequence[str] = ("START TRANSACTION",),
        end: Sequence[str] = ("COMMIT",),
        **settings: Any,
    ) -> None:
        """One transaction (``begin``, the statements, ``end``) in a session with random (or the given, or
        the forced) settings."""
        chosen = {**self._forced, **settings}
        self._forced = {}
        session, used = session_settings(self.rng, **chosen)
        types_session = self.all_types.session if self.all_types else ()
        rows = self._run(connection, [*types_session, *session, *begin, *statements, *end])
        count_session(counts, used, statements)
        counts["transactions"] += 1
        self.rows_written += rows

    def _ddl(self, connection: pymysql.connections.Connection[Any], *statements: str) -> None:
        """DDL in a session with the server's defaults (FULL images, no compression)."""
        self._run(connection, [*session_settings(self.rng, "FULL", False, False)[0], *statements])

    # -- steps ------------------------------------------------------------------------------------

    def step(self, config: MySqlConnectionConfig, window: int, with_vector: bool = True) -> OpCounts:
        """Write the workload of ``window`` (1-based). Window 1 creates the database and its tables."""
        counts = OpCounts()
        connection = connect(config)
        try:
            if window == 1:
                self._setup(connection, counts, with_vector)
            if window == self.large_window:
                self._large_transaction(connection, counts)
            elif window == self.large_window + 1:
                self._large_delete(connection, counts)
            elif window == self.large_window + 2:
                self._truncate(connection, counts, self._table("bulk"))
            for kind in self.schedule.get(window, []):
                self.operations[kind](connection, counts)
            for _ in range(self.rng.randint(1, self.size.transactions)):
                self._random_transaction(connection, counts)
            if window > 1 and self.rng.random() < 0.5:  # a transaction of a table without a key alone
                table = self.rng.choice(self.keyless)
                self._transaction(connection, table.statements(self.rng, self.database, counts), counts)
                counts["single_table_txn"] += 1
            if window > 1 and self.rng.random() < 0.3:  # more schema changes than the scheduled ones
                self.operations[self.rng.choice(RANDOM_SCHEMA_CHANGES)](connection, counts)
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
        self.keyless = [KeylessTable.of(name) for name in KEYLESS_TABLES]
        self._ddl(connection, *(table.ddl(self.database) for table in self.keyless))
        for keyless in self.keyless:
            distinct = [keyless.row(self.rng) for _ in range(self.size.keyless_rows)]
            copies = [row for row in distinct for _ in range(self.rng.randint(1, 3))]
            self._transaction(connection, [self._keyless_insert(keyless, copies)], counts)
            counts["keyless_insert"] += 1

    def _types_key(self) -> int:
        key = self.types_next
        self.types_next += 1
        return key

    def _row_tables(self) -> list[Table]:
        """The tables random row operations and schema changes pick from (not ``bulk``)."""
        return [t for t in self.tables if t.name != "bulk"]

    # -- statements ---------------------------------------------------------------------------------

    def _row(self, table: Table, key: tuple[Any, ...]) -> dict[str, Any]:
        row = dict(zip(table.key_columns(), key, strict=True))
        row.update(self.values.base())
        for column in table.extras:
            if column.default is None or self.rng.random() < 0.6:  # else the DEFAULT fills it
                row[column.name] = self.values.extra(column)
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
        # One INSERT names one column list: rows keep the columns of the first.
        first = list(rows[0])
        for row in rows[1:]:
            for name in first:
                if name not in row:
                    row[name] = self.values.extra(table.column(name))
            for name in [name for name in row if name not in first]:
                del row[name]
        return self._insert_rows(table, rows)

    def _some_key(self, table: Table) -> tuple[Any, ...]:
        return table.key_values(self.rng.randrange(1, max(table.next_key, 2)))

    def _update(self, table: Table, key: tuple[Any, ...]) -> str:
        row = self.values.base()
        chosen = self.rng.sample(sorted(row), self.rng.randint(1, len(row)))
        sets = {name: literal(row[name]) for name in chosen}
        for column in table.extras:
            if self.rng.random() < 0.7:
                sets[column.name] = literal(self.values.extra(column))
        if "doc" in sets and self.rng.random() < 0.3:
            sets["doc"] = self.values.json_update()
        assignments = ", ".join(f"{quote(name)} = {value}" for name, value in sets.items())
        return f"UPDATE {self.qualified(table.name)} SET {assignments} WHERE {table.where(key)}"

    def _json_update(self, table: Table, key: tuple[Any, ...]) -> str:
        """``doc`` changed in place (JSON_SET / JSON_REPLACE / JSON_REMOVE ...), with another column now and then."""
        sets = [f"`doc` = {self.values.json_update()}"]
        if self.rng.random() < 0.3:
            sets.append(f"`qty` = {literal(self.values.base()['qty'])}")
        return f"UPDATE {self.qualified(table.name)} SET {', '.join(sets)} WHERE {table.where(key)}"

    def _table_ops(self, table: Table, counts: OpCounts) -> list[str]:
        """1..4 random row operations on one base table."""
        statements = []
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.choices(
                ["insert", "update", "delete", "pk_change", "null_write", "json_update"],
                weights=[4, 5, 2, 1, 1, 2],
                k=1,
            )[0]
            counts[op] += 1
            if op == "insert":
                statements.append(self._insert(table, self.rng.randint(1, 15)))
            elif op == "update":
                keys = [self._some_key(table) for _ in range(self.rng.randint(1, 6))]
                statements += [self._update(table, key) for key in keys]
            elif op == "json_update":
                keys = [self._some_key(table) for _ in range(self.rng.randint(1, 4))]
                statements += [self._json_update(table, key) for key in keys]
            elif op == "delete":
                keys = [self._some_key(table) for _ in range(self.rng.randint(1, 4))]
                condition = " OR ".join(f"({table.where(k)})" for k in keys)
                statements.append(f"DELETE FROM {self.qualified(table.name)} WHERE {condition}")
            elif op == "pk_change":
                statements.append(self._pk_change(table))
            else:
                nullable = [name for name, _ in BASE_COLUMNS[1:]] + [c.name for c in table.extras if c.nullable]
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
        candidates = self._row_tables()
        many = self.rng.random() < 0.4
        chosen = self.rng.sample(candidates, self.rng.randint(2, 3)) if many else [self.rng.choice(candidates)]
        statements: list[str] = []
        for table in chosen:
            statements += self._table_ops(table, counts)
        if self.all_types and self.rng.random() < 0.3:
            statements += self._types_ops(counts)
            many = True
        if self.keyless and self.rng.random() < 0.3:
            statements += self.rng.choice(self.keyless).statements(self.rng, self.database, counts)
            many = True
        counts["multi_table_txn" if many else "single_table_txn"] += 1
        self._transaction(connection, statements, counts)

    def _rows_after(self, connection: Any, table: Table, counts: OpCounts, p: float = 0.7) -> None:
        """Rows of ``table`` after a schema change, in the same window (usually)."""
        if self.rng.random() < p:
            statements = [self._insert(table, self.rng.randint(1, 3)), self._update(table, self._some_key(table))]
            self._transaction(connection, statements, counts)
            counts["insert"] += 1
            counts["update"] += 1

    # -- scheduled and rarer operations ---------------------------------------------------------------

    def _forced_session(self, kind: str, **settings: Any) -> Callable[[Any, OpCounts], None]:
        """An operation: one random transaction with the given session settings."""

        def run(connection: Any, counts: OpCounts) -> None:
            before = counts[kind]
            self._forced = settings
            self._random_transaction(connection, counts)
            assert counts[kind] > before, (kind, settings)

        return run

    def _partial_json(self, connection: Any, counts: OpCounts) -> None:
        """JSON updates of one table under PARTIAL_JSON (with a random row image)."""
        table = self.rng.choice(self._row_tables())
        statements = [self._json_update(table, self._some_key(table)) for _ in range(self.rng.randint(2, 6))]
        self._transaction(connection, statements, counts, partial_json=True)
        counts["json_update"] += 1

    def _xa_two_phase(self, connection: Any, counts: OpCounts) -> None:
        """Two-phase XA transactions of the row tables: prepared, a transaction of a table without a key
        (other rows: the prepared one holds its row locks), then committed; one time in three a second
        one is rolled back instead."""
        for outcome in ("COMMIT", self.rng.choice(("COMMIT", "COMMIT", "ROLLBACK"))):
            chosen = self.rng.sample(self._row_tables(), self.rng.randint(1, 2))
            statements = [statement for table in chosen for statement in self._table_ops(table, counts)]
            xid = f"'rel{self.seed}', 'x{self.xa_next}'"
            self.xa_next += 1
            end = (f"XA END {xid}", f"XA PREPARE {xid}")
            self._transaction(connection, statements, counts, begin=(f"XA START {xid}",), end=end)
            keyless = self.rng.choice(self.keyless)
            self._transaction(connection, keyless.statements(self.rng, self.database, counts), counts)
            self._run(connection, [f"XA {outcome} {xid}"])
            counts["transactions"] += 1  # the XA COMMIT or ROLLBACK (the prepare is counted above)
            counts["xa_two_phase"] += 1

    def _same_key_cycle(self, connection: Any, counts: OpCounts) -> None:
        """One key updated twice, deleted and re-inserted in this window: in one transaction, or spread."""
        table = self.rng.choice(self._row_tables())
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
        updated and deleted again, and a change of another table: all one transaction (compressed or
        not, with a random row image)."""
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
            *self._table_ops(self.rng.choice(self._row_tables()), counts),
        ]
        self._transaction(connection, statements, counts)
        counts["large_txn"] += 1
        counts["multi_table_txn"] += 1

    def _compressed_large_transaction(self, connection: Any, counts: OpCounts) -> None:
        """``compressed_rows`` rows into ``bulk``, a JSON update of each tenth and deletes, plus rows of
        another table: one compressed transaction (with a random row image and partial JSON or not)."""
        table, n = self._table("bulk"), self.size.compressed_rows
        base = table.next_key
        table.next_key += n
        target = self.qualified(table.name)
        other = self.rng.choice(self._row_tables())
        statements = [
            "SET SESSION cte_max_recursion_depth = 10000000",
            f"INSERT INTO {target} (id, name, qty, price, note, seen, flag, doc) "
            f"WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < {n - 1}) "
            f"SELECT {base} + n, CONCAT('zipped-', n), n, n / 7, REPEAT('z', n % 90), NULL, n % 3, "
            "JSON_OBJECT('n', n, 't', REPEAT('j', n % 40), 'a', JSON_ARRAY(n, 2)) FROM seq",
            f"UPDATE {target} SET `doc` = JSON_SET(`doc`, '$.n', -1), flag = 9 "
            f"WHERE id BETWEEN {base} AND {base + n - 1} AND id % 10 = 0",
            f"DELETE FROM {target} WHERE id BETWEEN {base + n // 3} AND {base + n // 3 + n // 20}",
            *self._table_ops(other, counts),
        ]
        self._transaction(connection, statements, counts, compressed=True)
        counts["compressed_large_txn"] += 1
        counts["multi_table_txn"] += 1

    def _large_delete(self, connection: Any, counts: OpCounts) -> None:
        self._transaction(connection, [f"DELETE FROM {self.qualified('bulk')} WHERE id % 4 <> 0"], counts)
        counts["delete"] += 1
        counts["large_txn"] += 1

    def _truncate(
        self, connection: Any, counts: OpCounts, table: Table | None = None, statement: str = "TRUNCATE TABLE {t}"
    ) -> None:
        """TRUNCATE with changes of the table before and after it in the same window (usually)."""
        table = table or self.rng.choice(self._row_tables())
        self._transaction(connection, [self._insert(table, 3), self._update(table, self._some_key(table))], counts)
        self._ddl(connection, statement.replace("{t}", self.qualified(table.name)))
        if table.name == "bulk" or self.rng.random() < 0.8:
            self._transaction(connection, [self._insert(table, self.rng.randint(1, 20))], counts)
        counts["truncate"] += 1
        counts["insert"] += 2

    def _truncate_commented(self, connection: Any, counts: OpCounts) -> None:
        """TRUNCATE written with a comment in front (as applications and tools tag their statements)."""
        form = self.rng.choice(
            [
                "/* app:reset */ TRUNCATE TABLE {t}",
                "/* x */ TRUNCATE {t}",
                "-- nightly\nTRUNCATE TABLE {t}",
                "/* a */ /* b */ truncate table {t} /* trailing */",
            ]
        )
        self._truncate(connection, counts, statement=form)
        counts["truncate_commented"] += 1

    def _create_table(self, connection: Any, counts: OpCounts) -> None:
        self.new_tables += 1
        table = Table(f"new_{self.new_tables}", self.rng.choice(KEY_KINDS))
        self._ddl(connection, table.ddl(self.database))
        self.tables.append(table)
        rows = self.size.new_table_rows
        self._transaction(connection, [self._insert(table, rows)], counts)
        counts["create_table"] += 1
        counts["insert"] += 1

    def _drop_create_table(self, connection: Any, counts: OpCounts) -> None:
        """DROP TABLE and CREATE TABLE of the same name (a ``new_<n>`` may come back with another key
        kind), rows before the drop and into the new table, in one window."""
        table = self.rng.choice(self._row_tables())
        self._transaction(connection, [self._update(table, self._some_key(table))], counts)
        kind = self.rng.choice(KEY_KINDS) if table.name.startswith("new_") else table.kind
        fresh = Table(table.name, kind)
        self._ddl(connection, f"DROP TABLE {self.qualified(table.name)}", fresh.ddl(self.database))
        self.tables[self.tables.index(table)] = fresh
        self._transaction(connection, [self._insert(fresh, self.rng.randint(5, 30))], counts)
        counts["drop_create_table"] += 1
        counts["insert"] += 1

    # -- columns ------------------------------------------------------------------------------------

    def _new_column_name(self) -> str:
        self.extra_columns += 1
        return f"x{self.extra_columns}"

    def _add(self, connection: Any, counts: OpCounts, column: Column, position: str = "") -> Table:
        table = self.rng.choice(self._row_tables())
        clause = f"ADD COLUMN {quote(column.name)} {column.definition()}{position}"
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} {clause}")
        table.extras.append(column)
        self._rows_after(connection, table, counts)
        return table

    def _add_column(self, connection: Any, counts: OpCounts, type_text: str | None = None) -> Table:
        column = Column(self._new_column_name(), type_text or self.rng.choice(EXTRA_TYPES))
        table = self._add(connection, counts, column)
        counts["add_column"] += 1
        return table

    def _add_column_default(self, connection: Any, counts: OpCounts) -> None:
        type_text = self.rng.choice(sorted(CONSTANT_DEFAULTS))
        nullable = self.rng.random() < 0.4
        self._add(
            connection, counts, Column(self._new_column_name(), type_text, nullable, CONSTANT_DEFAULTS[type_text])
        )
        counts["add_column_default"] += 1

    def _add_column_expr_default(self, connection: Any, counts: OpCounts) -> None:
        type_text, expression = self.rng.choice(EXPRESSION_DEFAULTS)
        self._add(connection, counts, Column(self._new_column_name(), type_text, True, expression))
        counts["add_column_expr_default"] += 1

    def _add_column_positioned(self, connection: Any, counts: OpCounts) -> None:
        table = self.rng.choice(self._row_tables())
        type_text = self.rng.choice(EXTRA_TYPES)
        default = CONSTANT_DEFAULTS.get(type_text) if self.rng.random() < 0.5 else None
        column = Column(self._new_column_name(), type_text, default is None or self.rng.random() < 0.5, default)
        after = self.rng.choice([None, *table.all_columns()])
        position = " FIRST" if after is None else f" AFTER {quote(after)}"
        clause = f"ADD COLUMN {quote(column.name)} {column.definition()}{position}"
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} {clause}")
        table.extras.append(column)
        self._rows_after(connection, table, counts)
        counts["add_column_positioned"] += 1

    def _with_extras(self, connection: Any, counts: OpCounts, wanted: int = 1) -> Table:
        """A table with at least ``wanted`` added columns (columns are added when none has them)."""
        tables = [t for t in self._row_tables() if len(t.extras) >= wanted]
        if tables:
            return self.rng.choice(tables)
        table = self.rng.choice(self._row_tables())
        while len(table.extras) < wanted:
            column = Column(self._new_column_name(), self.rng.choice(EXTRA_TYPES))
            self._ddl(
                connection,
                f"ALTER TABLE {self.qualified(table.name)} ADD COLUMN {quote(column.name)} {column.definition()}",
            )
            table.extras.append(column)
            counts["add_column"] += 1
        return table

    def _drop_column(self, connection: Any, counts: OpCounts) -> None:
        table = self._with_extras(connection, counts)
        column = table.extras.pop(self.rng.randrange(len(table.extras)))
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} DROP COLUMN {quote(column.name)}")
        self._rows_after(connection, table, counts)
        counts["drop_column"] += 1

    def _readd_column(self, connection: Any, counts: OpCounts) -> None:
        """DROP COLUMN, then ADD COLUMN of the same name with another type: in one ALTER, or in two with
        rows between them."""
        table = self._with_extras(connection, counts)
        index = self.rng.randrange(len(table.extras))
        old = table.extras[index]
        type_text = self.rng.choice([t for t in EXTRA_TYPES if t != old.type_text])
        default = CONSTANT_DEFAULTS[type_text] if self.rng.random() < 0.4 else None
        new = Column(old.name, type_text, True, default)
        target = self.qualified(table.name)
        add = f"ADD COLUMN {quote(new.name)} {new.definition()}"
        if self.rng.random() < 0.4:
            self._ddl(connection, f"ALTER TABLE {target} DROP COLUMN {quote(old.name)}, {add}")
        else:
            self._ddl(connection, f"ALTER TABLE {target} DROP COLUMN {quote(old.name)}")
            del table.extras[index]
            self._rows_after(connection, table, counts)
            self._ddl(connection, f"ALTER TABLE {target} {add}")
        table.extras = [column for column in table.extras if column.name != old.name] + [new]
        self._rows_after(connection, table, counts)
        counts["readd_column"] += 1

    def _rename_column(self, connection: Any, counts: OpCounts) -> None:
        """RENAME COLUMN, CHANGE to a new name with the same definition, or CHANGE with a wider type."""
        table = self._with_extras(connection, counts)
        column = self.rng.choice(table.extras)
        old_name, new_name = column.name, self._new_column_name()
        form = self.rng.choice(["rename", "change", "change_wider"])
        if form == "change_wider" and column.type_text not in WIDENINGS:
            form = "change"
        if form == "rename":
            clause = f"RENAME COLUMN {quote(old_name)} TO {quote(new_name)}"
        else:
            if form == "change_wider":
                column.type_text = WIDENINGS[column.type_text]
            clause = f"CHANGE {quote(old_name)} {quote(new_name)} {column.definition()}"
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} {clause}")
        column.name = new_name
        self._rows_after(connection, table, counts)
        counts["rename_column"] += 1

    def _swap_columns(self, connection: Any, counts: OpCounts) -> None:
        """Two added columns swap names in one ALTER (each keeps its values and type)."""
        table = self._with_extras(connection, counts, wanted=2)
        first, second = self.rng.sample(table.extras, 2)
        a, b = quote(first.name), quote(second.name)
        if self.rng.random() < 0.5:
            clause = f"RENAME COLUMN {a} TO {b}, RENAME COLUMN {b} TO {a}"
        else:
            clause = f"CHANGE {a} {b} {first.definition()}, CHANGE {b} {a} {second.definition()}"
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} {clause}")
        first.name, second.name = second.name, first.name
        self._rows_after(connection, table, counts)
        counts["swap_columns"] += 1

    def _modify(self, connection: Any, counts: OpCounts, changes: dict[str, str], kind: str) -> None:
        """MODIFY an added column to the type ``changes`` maps its type to (one is added when none fits)."""
        candidates = [(t, c) for t in self._row_tables() for c in t.extras if c.type_text in changes]
        if not candidates:
            table = self._add_column(connection, counts, self.rng.choice(sorted(changes)))
            candidates = [(table, table.extras[-1])]
        table, column = self.rng.choice(candidates)
        new_type = changes[column.type_text]
        clause = f"MODIFY {quote(column.name)} {column.definition(new_type)}"
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} {clause}")
        column.type_text = new_type
        self._rows_after(connection, table, counts)
        counts[kind] += 1

    def _widen_column(self, connection: Any, counts: OpCounts) -> None:
        self._modify(connection, counts, WIDENINGS, "widen_column")

    def _retype_column(self, connection: Any, counts: OpCounts) -> None:
        self._modify(connection, counts, RETYPES, "retype_column")

    # -- primary keys -------------------------------------------------------------------------------

    def _other_key(self, table: Table) -> tuple[str, ...]:
        return self.rng.choice([key for key in PRIMARY_KEYS[table.kind] if key != table.primary_key])

    def _primary_key_change(self, connection: Any, counts: OpCounts) -> None:
        """DROP PRIMARY KEY, ADD PRIMARY KEY on other columns, in one ALTER; rows before and after it."""
        table = self.rng.choice(self._row_tables())
        self._transaction(connection, [self._update(table, self._some_key(table))], counts)
        key = self._other_key(table)
        columns = ", ".join(map(quote, key))
        self._ddl(connection, f"ALTER TABLE {self.qualified(table.name)} DROP PRIMARY KEY, ADD PRIMARY KEY ({columns})")
        table.primary_key = key
        self._rows_after(connection, table, counts)
        counts["primary_key_change"] += 1

    def _primary_key_cycle(self, connection: Any, counts: OpCounts) -> None:
        """DROP PRIMARY KEY, rows written to the table without a key, ADD PRIMARY KEY (the same or another)."""
        table = self.rng.choice(self._row_tables())
        target = self.qualified(table.name)
        self._ddl(connection, f"ALTER TABLE {target} DROP PRIMARY KEY")
        self._transaction(connection, [self._insert(table, 2), self._update(table, self._some_key(table))], counts)
        key = self.rng.choice(PRIMARY_KEYS[table.kind])
        self._ddl(connection, f"ALTER TABLE {target} ADD PRIMARY KEY ({', '.join(map(quote, key))})")
        table.primary_key = key
        self._rows_after(connection, table, counts)
        counts["primary_key_cycle"] += 1
        counts["insert"] += 1
        counts["update"] += 1

    # -- tables without a key ------------------------------------------------------------------------

    def _keyless_insert(self, table: KeylessTable, rows: Sequence[Sequence[str]]) -> str:
        names = ", ".join(quote(c.name) for c in table.columns)
        values = ", ".join("(" + ", ".join(row) + ")" for row in rows)
        return f"INSERT INTO {self.qualified(table.name)} ({names}) VALUES {values}"

    def _keyless_identical_rows(self, connection: Any, counts: OpCounts) -> None:
        """Copies of one row inserted into a table without a key, then ``UPDATE ... LIMIT 1`` and ``DELETE
        ... LIMIT 1`` of one of them: in one transaction, or each in its own."""
        table = self.rng.choice(self.keyless)
        row = table.row(self.rng)
        # Every column but JSON (a JSON value never equals a string literal) names the copies.
        same = " AND ".join(
            f"{quote(c.name)} <=> {value}" for c, value in zip(table.columns, row, strict=True) if "JSON" not in c.ddl
        )
        target = self.qualified(table.name)
        statements = [
            self._keyless_insert(table, [row] * self.rng.randint(2, 4)),
            f"UPDATE {target} SET {table.assignment(self.rng)} WHERE {same} LIMIT 1",
            f"DELETE FROM {target} WHERE {same} LIMIT 1",
        ]
        if self.rng.random() < 0.5:
            self._transaction(connection, statements, counts)
        else:
            for statement in statements:
                self._transaction(connection, [statement], counts)
        for kind in ("keyless_identical_rows", "keyless_insert", "keyless_update_limit", "keyless_delete_limit"):
            counts[kind] += 1

    def _keyless_schema_change(self, connection: Any, counts: OpCounts) -> None:
        """A table without a key gets a column (a DEFAULT fills every copy it holds), loses an added one
        (copies that differed only in it become identical), or is truncated; rows before and after."""
        table = self.rng.choice(self.keyless)
        target = self.qualified(table.name)
        self._transaction(connection, table.statements(self.rng, self.database, counts), counts)
        added = [c for c in table.columns if c.name not in {name for name, _, _ in KEYLESS_TABLES[table.name]}]
        change = self.rng.choice(["add", "drop", "truncate"] if added else ["add", "truncate"])
        if change == "add":
            ddl, values = self.rng.choice(KEYLESS_ADDED)
            column = KeylessColumn(self._new_column_name(), ddl, values)
            self._ddl(connection, f"ALTER TABLE {target} ADD COLUMN {quote(column.name)} {ddl}")
            table.columns.append(column)
        elif change == "drop":
            column = self.rng.choice(added)
            self._ddl(connection, f"ALTER TABLE {target} DROP COLUMN {quote(column.name)}")
            table.columns.remove(column)
        else:
            self._ddl(connection, f"TRUNCATE TABLE {target}")
        self._transaction(connection, table.statements(self.rng, self.database, counts), counts)
        counts["keyless_schema_change"] += 1


# -- the concurrent writer --------------------------------------------------------------------------------


class ConcurrentWriter:
    """Small random transactions on the base tables from a thread with its own connection, while
    the snapshot and the capture run (:meth:`start` / :meth:`stop`), each in a session with random
    settings (row image, partial JSON, compression). Inserts use a key range of their own; updates
    and deletes hit keys of the main generator's range."""

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
        self._keyless = list(workload.keyless)

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
        if self._keyless and rng.random() < 0.2:  # identical rows come and go while the snapshot reads them
            return rng.choice(self._keyless).statements(rng, db, self.counts)
        table = rng.choice(self._tables)
        target = f"{quote(db)}.{quote(table.name)}"
        statements = []
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(["insert", "update", "delete", "json_update"])
            if op == "insert":
                row = dict(zip(table.key_columns(), table.key_values(table.writer_next, writer=True), strict=True))
                table.writer_next += 1
                row.update(values.base())
                for column in table.extras:
                    if column.default is None or rng.random() < 0.5:
                        row[column.name] = values.extra(column)
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
                elif op == "json_update":
                    statements.append(f"UPDATE {target} SET `doc` = {values.json_update()} WHERE {table.where(key)}")
                else:
                    statements.append(f"DELETE FROM {target} WHERE {table.where(key)}")
            self.counts[op] += 1
        return statements

    def _loop(self) -> None:
        try:
            connection = connect(self.config)
            try:
                while not self._stop.is_set():
                    statements = self._statements()
                    session, settings = session_settings(self.rng)
                    with connection.cursor() as cursor:
                        for statement in session:
                            cursor.execute(statement)
                        cursor.execute("START TRANSACTION")
                        for statement in statements:
                            self.rows += max(cursor.execute(statement), 0)
                        cursor.execute("COMMIT")
                    count_session(self.counts, settings, statements)
                    self.counts["concurrent_txn"] += 1
                    self._stop.wait(self.rng.uniform(0.0, 0.02))
            finally:
                connection.close()
        except BaseException as exc:  # reported by stop()
            self._error = exc
