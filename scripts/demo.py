#!/usr/bin/env python3
"""The demo behind ``make demo``: a local MySQL under load, three runs of the example DAG, a check.

1. Start clean: the demo's Airflow home ``.airflow-home`` (Airflow's metadata database, the CDC
   metadata, staging and the Iceberg warehouse) is deleted and the ``demo`` database re-created.
2. Start (or reuse) the local MySQL instance ``demo`` on 127.0.0.1, or use ``MYSQL_CDC_EXTERNAL_URL``,
   and load the sample schema ``demo``: a small shop (customers, products, orders, order_items) and
   ``demo.all_types``, one column of every type of the type map with tricky rows.
3. Preflight, ``airflow db migrate``, then a background workload (a thread with its own connection)
   inserts, updates and deletes rows in every demo table, including primary-key changes and
   deletes followed by re-inserts of the same key.
4. ``airflow dags test mysql_cdc_example <now>`` three times in a row (default cut-off
   ``data_interval``: each window holds what was committed before its run's logical date); the
   workload stops before the last one so that the last window holds everything. After each run: the run's state,
   its window (rows by op and table), what the apply did, lag and binlog headroom, read from the
   XComs in Airflow's metadata database.
5. Every Iceberg table ``lake.demo.*`` is compared with its MySQL table
   (:mod:`airflow_provider_mysql_cdc.apply.verify`); the demo fails on any difference. Then it prints
   how to query the tables with pyspark and stops the local MySQL (``DEMO_KEEP_MYSQL=1`` keeps it).

Credentials travel only in the ``AIRFLOW_CONN_MYSQL_CDC_DEFAULT`` environment variable (and the
workload's in-process connection), never on a command line or in the output. Logs of every Airflow
and Spark step are kept in ``.airflow-home/demo-*.log``.

Internal entry points, run by the demo itself in the demo's environment: ``demo.py --read-run
LOGICAL_DATE`` (one run's state and XComs as JSON) and ``demo.py --verify`` (the final check).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# scripts/ (this script's folder) is sys.path[0] already; the repository root holds the testbed package.
sys.path.insert(0, str(REPO_ROOT))

import iceberg_jars  # noqa: E402
import pymysql  # noqa: E402

from testbed.mysql import CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD, LocalMySQL, parse_server_url  # noqa: E402

DAG_ID = "mysql_cdc_example"
DEMO_PORT = int(os.environ.get("DEMO_MYSQL_PORT", "33306"))
AIRFLOW_HOME = REPO_ROOT / ".airflow-home"
VENV_BIN = Path(sys.executable).parent
WAREHOUSE = AIRFLOW_HOME / "mysql_cdc" / "warehouse"
RUNS = 3
#: A run that takes longer than this is stuck (e.g. ``depends_on_past`` waiting on a failed run).
RUN_TIMEOUT_SECONDS = 30 * 60
#: Seconds between two workload transactions (a modest rate: a few transactions per second).
WORKLOAD_PAUSE_SECONDS = 0.25
RESULT_MARKER = "DEMO-RESULT-JSON: "
CDC_CONN_ENV = "AIRFLOW_CONN_MYSQL_CDC_DEFAULT"


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


# -- the sample schema ----------------------------------------------------------------------------

SHOP_SCHEMA = (
    """CREATE TABLE demo.customers (
        id INT PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200),
        country CHAR(2),
        created_at DATETIME(6) NOT NULL
    )""",
    """CREATE TABLE demo.products (
        sku VARCHAR(20) PRIMARY KEY,
        title VARCHAR(200) NOT NULL,
        price DECIMAL(10, 2) NOT NULL,
        stock INT UNSIGNED NOT NULL,
        tags SET('new', 'sale', 'eco', 'gift')
    )""",
    """CREATE TABLE demo.orders (
        id BIGINT PRIMARY KEY AUTO_INCREMENT,
        customer_id INT NOT NULL,
        status ENUM('new', 'paid', 'shipped') NOT NULL DEFAULT 'new',
        amount DECIMAL(12, 2) NOT NULL,
        payload JSON,
        updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
    )""",
    """CREATE TABLE demo.order_items (
        order_id BIGINT NOT NULL,
        line SMALLINT NOT NULL,
        sku VARCHAR(20) NOT NULL,
        qty INT NOT NULL,
        PRIMARY KEY (order_id, line)
    )""",
)


@dataclass(frozen=True)
class Column:
    """A column of ``demo.all_types``: its DDL, the placeholder its value is written with and a random value."""

    name: str
    ddl: str
    random: Callable[[random.Random], Any] | None  # None: a generated column (never written)
    placeholder: str = "%s"


def _text(rng: random.Random, alphabet: str, longest: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


def _time_text(microseconds: int) -> str:
    """A TIME literal (``-838:59:59.999999`` .. ``838:59:59.999999``)."""
    seconds, fraction = divmod(abs(microseconds), 1_000_000)
    sign = "-" if microseconds < 0 else ""
    return f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}"


_WORDS = "abcdefghijklmnopqrstuvwxyz éüß中文😀 \t"
ALL_TYPES_COLUMNS = (
    # integers, signed and unsigned (BOOL is TINYINT(1))
    Column("ti", "TINYINT", lambda r: r.randint(-128, 127)),
    Column("tiu", "TINYINT UNSIGNED", lambda r: r.randint(0, 255)),
    Column("si", "SMALLINT", lambda r: r.randint(-32768, 32767)),
    Column("siu", "SMALLINT UNSIGNED", lambda r: r.randint(0, 65535)),
    Column("mi", "MEDIUMINT", lambda r: r.randint(-8388608, 8388607)),
    Column("miu", "MEDIUMINT UNSIGNED", lambda r: r.randint(0, 16777215)),
    Column("i", "INT", lambda r: r.randint(-(2**31), 2**31 - 1)),
    Column("iu", "INT UNSIGNED", lambda r: r.randint(0, 2**32 - 1)),
    Column("bi", "BIGINT", lambda r: r.randint(-(2**63), 2**63 - 1)),
    Column("biu", "BIGINT UNSIGNED", lambda r: r.randint(0, 2**64 - 1)),
    Column("flag", "BOOL", lambda r: r.randint(0, 1)),
    # exact and approximate numbers, bits, years
    Column("price", "DECIMAL(10,2)", lambda r: f"{r.randint(-(10**10) + 1, 10**10 - 1) / 100:.2f}"),
    Column(
        "wide", "DECIMAL(65,30)", lambda r: f"{r.randint(-(10**35) + 1, 10**35 - 1)}.{r.randint(0, 10**30 - 1):030d}"
    ),
    Column("f", "FLOAT", lambda r: r.uniform(-1e6, 1e6)),
    Column("dbl", "DOUBLE", lambda r: r.uniform(-1e300, 1e300)),
    Column("bit1", "BIT(1)", lambda r: r.randint(0, 1)),
    Column("bits", "BIT(10)", lambda r: r.randint(0, 1023)),
    Column("yr", "YEAR", lambda r: r.randint(1901, 2155)),
    # dates and times, with fractional seconds
    Column("day", "DATE", lambda r: (datetime(1000, 1, 1) + timedelta(days=r.randint(0, 3_286_000))).date()),
    Column("wall", "DATETIME(6)", lambda r: datetime(1000, 1, 1) + timedelta(microseconds=r.randint(0, 283 * 10**15))),
    Column(
        "instant",
        "TIMESTAMP(3) NULL",
        lambda r: datetime(1970, 1, 2) + timedelta(milliseconds=r.randint(0, 2_140_000_000_000)),
    ),
    Column("dur", "TIME(6)", lambda r: _time_text(r.randint(-3_020_399_999_999, 3_020_399_999_999))),
    # strings and bytes
    Column("code", "CHAR(8)", lambda r: _text(r, "ABCXYZ019 ", 8).rstrip()),
    Column("title", "VARCHAR(100)", lambda r: _text(r, _WORDS, 40)),
    Column("body", "TEXT", lambda r: _text(r, _WORDS + "\n\"'\\", 300)),
    Column("latin", "VARCHAR(20) CHARACTER SET latin1", lambda r: _text(r, "abcé€ŠÿÆ ", 20)),
    Column("fixed", "BINARY(4)", lambda r: r.randbytes(r.randint(0, 4))),
    Column("bytes", "VARBINARY(16)", lambda r: r.randbytes(r.randint(0, 16))),
    Column("blob_", "BLOB", lambda r: r.randbytes(r.randint(0, 2000))),
    Column("size", "ENUM('small','medium','large')", lambda r: r.choice(["small", "medium", "large"])),
    Column(
        "colors", "SET('red','green','blue')", lambda r: ",".join(r.sample(["red", "green", "blue"], r.randint(0, 3)))
    ),
    Column(
        "doc", "JSON", lambda r: json.dumps({"n": r.randint(-9, 2**64 - 1), "x": r.random(), "s": _text(r, _WORDS, 8)})
    ),
    # spatial (WKT; POINT with SRID 4326 takes latitude first)
    Column(
        "shape", "GEOMETRY", lambda r: f"POINT({r.uniform(-1e3, 1e3)} {r.uniform(-1e3, 1e3)})", "ST_GeomFromText(%s)"
    ),
    Column(
        "location",
        "POINT SRID 4326",
        lambda r: f"POINT({r.uniform(-90, 90)} {r.uniform(-180, 180)})",
        "ST_GeomFromText(%s, 4326)",
    ),
    # generated columns: in every row image, staged like the others
    Column("i_twice", "BIGINT AS (i * 2) STORED", None),
    Column("title_upper", "VARCHAR(100) AS (UPPER(title)) VIRTUAL", None),
)
#: MySQL 9 only.
VECTOR_COLUMN = Column(
    "embedding", "VECTOR(3)", lambda r: json.dumps([r.uniform(-1, 1) for _ in range(3)]), "STRING_TO_VECTOR(%s)"
)

#: The tricky rows of ``demo.all_types``, one line per column (a column not listed is NULL): ids 1 to 5
#: hold (smallest values, largest values, all NULL, unicode and odd values, invalid dates). They are
#: inserted with sql_mode ALLOW_INVALID_DATES so that a zero date and an impossible date are stored:
#: those are staged as NULL with their text kept in ``_cdc_invalid_values``.
TRICKY_ROWS: dict[str, tuple[Any, Any, Any, Any, Any]] = {
    "ti": (-128, 127, None, 0, None),
    "tiu": (0, 255, None, None, None),
    "si": (-32768, 32767, None, None, None),
    "siu": (0, 65535, None, None, None),
    "mi": (-8388608, 8388607, None, None, None),
    "miu": (0, 16777215, None, None, None),
    "i": (-(2**31), 2**31 - 1, None, 0, 5),
    "iu": (0, 2**32 - 1, None, None, None),
    "bi": (-(2**63), 2**63 - 1, None, None, None),
    "biu": (0, 2**64 - 1, None, None, None),
    "flag": (0, 1, None, None, None),
    "price": ("-99999999.99", "99999999.99", None, "0.01", None),
    "wide": ("-" + "9" * 35 + "." + "9" * 30, "9" * 35 + "." + "9" * 30, None, "0." + "0" * 29 + "1", None),
    "f": (-3.40282e38, 3.40282e38, None, -0.0, None),
    "dbl": (-1.7976931348623157e308, 1.7976931348623157e308, None, 5e-324, None),
    "bit1": (0, 1, None, None, None),
    "bits": (0, 1023, None, None, None),
    "yr": (1901, 2155, None, 0, None),
    "day": ("1000-01-01", "9999-12-31", None, None, "0000-00-00"),
    "wall": ("1000-01-01 00:00:00", "9999-12-31 23:59:59.999999", None, "2024-02-29 12:00:00.5", "2024-02-30 10:00:00"),
    "instant": ("1970-01-01 00:00:01", "2038-01-19 03:14:07.999", None, "2024-06-30 23:59:59.5", None),
    "dur": ("-838:59:59", "838:59:59", None, "-00:00:00.000001", None),
    "code": ("", "ZZZZZZZZ", None, "ñ  ", None),
    "title": ("", "x" * 100, None, "Grüße, 世界 😀", "invalid dates"),
    "body": ("", "long " * 2000, None, "tab\there\nnew line 'quoted' \"double\" back\\slash \x01", None),
    "latin": ("", "ÿ" * 20, None, "café € Š", None),
    "fixed": (b"\x00" * 4, b"\xff" * 4, None, b"a\x00", None),
    "bytes": (b"", b"\xff" * 16, None, None, None),
    "blob_": (b"", bytes(range(256)) * 200, None, None, None),
    "size": ("small", "large", None, "medium", None),
    "colors": ("", "red,green,blue", None, "blue,red", None),
    "doc": (
        "{}",
        '{"big": 18446744073709551615, "deep": [[[{"k": null}]]], "d": 1e300}',
        None,
        '{"emoji": "😀", "esc": "q\\"b\\\\ \\n", "neg": -0.0, "dec": 12.50}',
        None,
    ),
    "shape": (
        "POINT(0 0)",
        "POLYGON((0 0, 4 0, 4 4, 0 4, 0 0))",
        None,
        "GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))",
        None,
    ),
    "location": ("POINT(-90 -180)", "POINT(90 180)", None, None, None),
    "embedding": ("[-1.5, 0, 3e-7]", "[3.4028234e38, -1.17549435e-38, 1]", None, None, None),
}


def all_types_columns(vector: bool) -> tuple[Column, ...]:
    return (*ALL_TYPES_COLUMNS, VECTOR_COLUMN) if vector else ALL_TYPES_COLUMNS


def all_types_ddl(columns: Sequence[Column]) -> str:
    return (
        "CREATE TABLE demo.all_types (\n    id INT PRIMARY KEY,\n    "
        + ",\n    ".join(f"`{c.name}` {c.ddl}" for c in columns)
        + "\n)"
    )


def insert_all_types(cursor: Any, columns: Sequence[Column], row_id: int, values: dict[str, Any]) -> None:
    written = [c for c in columns if c.random is not None]
    names = ", ".join(f"`{c.name}`" for c in written)
    placeholders = ", ".join("%s" if values.get(c.name) is None else c.placeholder for c in written)
    cursor.execute(
        f"INSERT INTO demo.all_types (id, {names}) VALUES (%s, {placeholders})",
        [row_id, *(values.get(c.name) for c in written)],
    )


def load_sample_schema(connection: Any, vector: bool, rng: random.Random) -> dict[str, int]:
    """Re-create the ``demo`` database with its sample rows; returns the row count per table."""
    columns = all_types_columns(vector)
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION time_zone = '+00:00'")
        cursor.execute("DROP DATABASE IF EXISTS demo")
        cursor.execute("CREATE DATABASE demo")
        for statement in (*SHOP_SCHEMA, all_types_ddl(columns)):
            cursor.execute(statement)
        countries = ["DE", "FR", "JP", "US", "BR", None]
        for customer in range(1, 51):
            cursor.execute(
                "INSERT INTO demo.customers VALUES (%s, %s, %s, %s, %s)",
                (
                    customer,
                    f"Customer {customer} {rng.choice(['Ada', 'Grace', 'Zoë', '李'])}",
                    None if customer % 9 == 0 else f"c{customer}@example.com",
                    rng.choice(countries),
                    datetime(2026, 1, 1)
                    + timedelta(seconds=rng.randint(0, 10**7), microseconds=rng.randint(0, 999_999)),
                ),
            )
        for product in range(1, 21):
            cursor.execute(
                "INSERT INTO demo.products VALUES (%s, %s, %s, %s, %s)",
                (
                    f"SKU-{product:04d}",
                    f"Product {product}",
                    f"{rng.randint(100, 99_999) / 100:.2f}",
                    rng.randint(0, 500),
                    ",".join(rng.sample(["new", "sale", "eco", "gift"], rng.randint(0, 2))),
                ),
            )
        for order in range(1, 201):
            lines = rng.randint(1, 3)
            cursor.execute(
                "INSERT INTO demo.orders (id, customer_id, status, amount, payload) VALUES (%s, %s, %s, %s, %s)",
                (
                    order,
                    rng.randint(1, 50),
                    rng.choice(["new", "paid", "shipped"]),
                    f"{rng.randint(100, 500_000) / 100:.2f}",
                    json.dumps({"lines": lines, "gift": rng.random() < 0.1}),
                ),
            )
            for line in range(1, lines + 1):
                cursor.execute(
                    "INSERT INTO demo.order_items VALUES (%s, %s, %s, %s)",
                    (order, line, f"SKU-{rng.randint(1, 20):04d}", rng.randint(1, 5)),
                )
        cursor.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
        for row in range(5):
            insert_all_types(cursor, columns, row + 1, {name: values[row] for name, values in TRICKY_ROWS.items()})
        cursor.execute("SET SESSION sql_mode = DEFAULT")
        for row_id in range(6, 31):
            insert_all_types(cursor, columns, row_id, {c.name: c.random(rng) for c in columns if c.random})
        connection.commit()
        counts = {}
        for table in DEMO_TABLES:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")
            counts[table] = int(cursor.fetchone()[0])
    return counts


DEMO_TABLES = ("demo.customers", "demo.products", "demo.orders", "demo.order_items", "demo.all_types")


# -- the background workload -----------------------------------------------------------------------


NEW_NAMES = ("Émile", "Søren", "佐藤", "O'Brien")


#: The ids of the tricky rows: updated by the workload, never deleted.
TRICKY_IDS = frozenset(range(1, 6))


class _NothingToDo(Exception):
    """The operation has no row to work on (e.g. every order was cancelled)."""


class Workload(threading.Thread):
    """Random transactions on the demo tables at a modest rate, on its own connection, until stopped.

    Keeps the keys that exist (it is the only writer), so every statement hits a real row; the model
    is changed only once a transaction has committed.
    """

    def __init__(self, connect: Callable[[], Any], vector: bool, seed: int = 7) -> None:
        super().__init__(name="demo-workload", daemon=True)
        self._connect = connect
        self._columns = all_types_columns(vector)
        self._rng = random.Random(seed)
        self._stop_event = threading.Event()
        self.transactions: Counter[str] = Counter()
        self.errors: list[str] = []
        self.started_at = self.stopped_at = 0.0
        self._customers: set[int] = set()
        self._products: set[str] = set()
        self._orders: dict[int, int] = {}  # order id -> number of lines
        self._all_types: set[int] = set()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=60)

    def summary(self) -> str:
        seconds = (self.stopped_at or time.monotonic()) - self.started_at
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.transactions.items()))
        errors = f"; {len(self.errors)} failed (last: {self.errors[-1]})" if self.errors else "; none failed"
        return f"{sum(self.transactions.values())} transactions in {seconds:.0f} s ({kinds}){errors}"

    def run(self) -> None:
        self.started_at = time.monotonic()
        connection = self._connect()
        try:
            self._load_keys(connection)
            operations = [getattr(self, name) for name in dir(self) if name.startswith("_op_")]
            while not self._stop_event.wait(WORKLOAD_PAUSE_SECONDS):
                operation = self._rng.choice(operations)
                try:
                    with connection.cursor() as cursor:
                        on_commit = operation(cursor)
                    connection.commit()
                except _NothingToDo:
                    connection.rollback()
                    continue
                except pymysql.MySQLError as exc:
                    connection.rollback()
                    self.errors.append(f"{operation.__name__}: {exc}")
                    if len(self.errors) > 50:
                        return
                    continue
                on_commit()
                self.transactions[operation.__name__.removeprefix("_op_")] += 1
        except Exception as exc:  # reported by summary(); the final check then shows what is missing
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.stopped_at = time.monotonic()
            connection.close()

    def _load_keys(self, connection: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id FROM demo.customers")
            self._customers = {int(row[0]) for row in cursor.fetchall()}
            cursor.execute("SELECT sku FROM demo.products")
            self._products = {str(row[0]) for row in cursor.fetchall()}
            cursor.execute("SELECT order_id, COUNT(*) FROM demo.order_items GROUP BY order_id")
            self._orders = {int(row[0]): int(row[1]) for row in cursor.fetchall()}
            cursor.execute("SELECT id FROM demo.all_types")
            self._all_types = {int(row[0]) for row in cursor.fetchall()}
        connection.commit()

    def _pick(self, keys: Collection[Any]) -> Any:
        if not keys:
            raise _NothingToDo
        return self._rng.choice(sorted(keys))

    # Each operation runs in one transaction and returns what to change in the model once it commits.

    def _op_new_order(self, cursor: Any) -> Callable[[], None]:
        lines = self._rng.randint(1, 3)
        cursor.execute(
            "INSERT INTO demo.orders (customer_id, amount, payload) VALUES (%s, %s, %s)",
            (self._pick(self._customers), f"{self._rng.randint(100, 99_999) / 100:.2f}", json.dumps({"lines": lines})),
        )
        order_id = int(cursor.lastrowid)
        for line in range(1, lines + 1):
            cursor.execute(
                "INSERT INTO demo.order_items VALUES (%s, %s, %s, %s)",
                (order_id, line, self._pick(self._products), self._rng.randint(1, 5)),
            )
        return lambda: self._orders.__setitem__(order_id, lines)

    def _op_pay_or_ship(self, cursor: Any) -> Callable[[], None]:
        status = self._rng.choice(["paid", "shipped"])
        cursor.execute(
            "UPDATE demo.orders SET status = %s, payload = JSON_SET(payload, '$.status', %s) WHERE id = %s",
            (status, status, self._pick(self._orders)),
        )
        return lambda: None

    def _op_change_quantity(self, cursor: Any) -> Callable[[], None]:
        cursor.execute("UPDATE demo.order_items SET qty = qty + 1 WHERE order_id = %s", (self._pick(self._orders),))
        return lambda: None

    def _op_cancel_order(self, cursor: Any) -> Callable[[], None]:
        order_id = self._pick(self._orders)
        cursor.execute("DELETE FROM demo.order_items WHERE order_id = %s", (order_id,))
        cursor.execute("DELETE FROM demo.orders WHERE id = %s", (order_id,))

        def on_commit() -> None:
            del self._orders[order_id]

        return on_commit

    def _op_new_customer(self, cursor: Any) -> Callable[[], None]:
        customer = max(self._customers, default=0) + 1
        cursor.execute(
            "INSERT INTO demo.customers VALUES (%s, %s, %s, %s, NOW(6))",
            (customer, f"New {customer} {self._rng.choice(NEW_NAMES)}", None, "FR"),
        )
        return lambda: self._customers.add(customer)

    def _op_rename_customer(self, cursor: Any) -> Callable[[], None]:
        email = None if self._rng.random() < 0.2 else f"x{self._rng.randint(0, 999)}@example.org"
        cursor.execute("UPDATE demo.customers SET email = %s WHERE id = %s", (email, self._pick(self._customers)))
        return lambda: None

    def _op_customer_key_change(self, cursor: Any) -> Callable[[], None]:
        """A primary-key change (staged as a delete of the old key and an insert of the new one)."""
        old, new = self._pick(self._customers), max(self._customers) + 1000
        cursor.execute("UPDATE demo.customers SET id = %s WHERE id = %s", (new, old))
        cursor.execute("UPDATE demo.orders SET customer_id = %s WHERE customer_id = %s", (new, old))

        def on_commit() -> None:
            self._customers.remove(old)
            self._customers.add(new)

        return on_commit

    def _op_relist_product(self, cursor: Any) -> Callable[[], None]:
        """A delete and a re-insert of the same key in one transaction."""
        sku = self._pick(self._products)
        cursor.execute("DELETE FROM demo.products WHERE sku = %s", (sku,))
        cursor.execute(
            "INSERT INTO demo.products VALUES (%s, %s, %s, %s, 'new')",
            (sku, f"Relisted {sku}", f"{self._rng.randint(100, 9_999) / 100:.2f}", self._rng.randint(0, 50)),
        )
        return lambda: None

    def _op_sale(self, cursor: Any) -> Callable[[], None]:
        """One statement, many rows."""
        cursor.execute(
            "UPDATE demo.products SET price = GREATEST(price - 1, 0.50), "
            "tags = CONCAT_WS(',', NULLIF(tags, ''), 'sale') WHERE stock > %s",
            (self._rng.randint(0, 500),),
        )
        return lambda: None

    def _op_all_types_insert(self, cursor: Any) -> Callable[[], None]:
        row_id = max(self._all_types, default=0) + 1
        insert_all_types(cursor, self._columns, row_id, self._random_values())
        return lambda: self._all_types.add(row_id)

    def _op_all_types_update(self, cursor: Any) -> Callable[[], None]:
        chosen = self._rng.sample([c for c in self._columns if c.random], 4)
        values = [None if self._rng.random() < 0.15 else c.random(self._rng) for c in chosen if c.random]
        sets = ", ".join(
            f"`{c.name}` = " + ("%s" if v is None else c.placeholder) for c, v in zip(chosen, values, strict=True)
        )
        cursor.execute(f"UPDATE demo.all_types SET {sets} WHERE id = %s", [*values, self._pick(self._all_types)])
        return lambda: None

    def _op_all_types_delete(self, cursor: Any) -> Callable[[], None]:
        row_id = self._pick(self._all_types - TRICKY_IDS)
        cursor.execute("DELETE FROM demo.all_types WHERE id = %s", (row_id,))
        return lambda: self._all_types.discard(row_id)

    def _op_all_types_key_change(self, cursor: Any) -> Callable[[], None]:
        old, new = self._pick(self._all_types - TRICKY_IDS), max(self._all_types) + 1
        cursor.execute("UPDATE demo.all_types SET id = %s WHERE id = %s", (new, old))

        def on_commit() -> None:
            self._all_types.remove(old)
            self._all_types.add(new)

        return on_commit

    def _op_all_types_reinsert(self, cursor: Any) -> Callable[[], None]:
        """Delete a row and insert other values under its key, in one transaction."""
        row_id = self._pick(self._all_types - TRICKY_IDS)
        cursor.execute("DELETE FROM demo.all_types WHERE id = %s", (row_id,))
        insert_all_types(cursor, self._columns, row_id, self._random_values())
        return lambda: None

    def _op_all_types_copy_tricky(self, cursor: Any) -> Callable[[], None]:
        """A copy of a tricky row under a new key: its extreme values go through the binlog too."""
        row_id, source = max(self._all_types) + 1, self._pick(TRICKY_IDS)
        names = ", ".join(f"`{c.name}`" for c in self._columns if c.random is not None)
        cursor.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")  # row 5 holds invalid dates
        try:
            cursor.execute(
                f"INSERT INTO demo.all_types (id, {names}) SELECT %s, {names} FROM demo.all_types WHERE id = %s",
                (row_id, source),
            )
        finally:
            cursor.execute("SET SESSION sql_mode = DEFAULT")
        return lambda: self._all_types.add(row_id)

    def _random_values(self) -> dict[str, Any]:
        return {c.name: None if self._rng.random() < 0.1 else c.random(self._rng) for c in self._columns if c.random}


# -- Airflow -----------------------------------------------------------------------------------------


def read_run(logical_date: str) -> dict[str, Any]:
    """One run of the example DAG as Airflow's metadata database has it: state, task states, XComs.

    Runs in a child process whose environment points AIRFLOW_HOME at the demo's (Airflow reads its
    configuration when it is first imported).
    """
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalars(
            select(DagRun).where(DagRun.dag_id == DAG_ID, DagRun.logical_date == datetime.fromisoformat(logical_date))
        ).one_or_none()
        if run is None:
            return {"state": "missing", "tasks": {}, "xcoms": {}}
        tasks: dict[str, list[str]] = {}
        for ti in session.scalars(
            select(TaskInstance)
            .where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run.run_id)
            .order_by(TaskInstance.start_date, TaskInstance.map_index)
        ):
            tasks.setdefault(ti.task_id, []).append(str(ti.state))
        xcoms: dict[str, dict[str, Any]] = {}
        for xcom in session.scalars(
            select(XComModel)
            .where(XComModel.dag_id == DAG_ID, XComModel.run_id == run.run_id)
            .order_by(XComModel.map_index)
        ):
            value = XComModel.deserialize_value(xcom)
            if xcom.map_index >= 0:  # mapped tasks: a list of their return values
                xcoms.setdefault(xcom.task_id, {}).setdefault("mapped", []).append(value)
            else:
                xcoms.setdefault(xcom.task_id, {})[xcom.key] = value
        return {"state": str(run.state), "run_id": run.run_id, "tasks": tasks, "xcoms": xcoms}


def fetch_run(env: dict[str, str], logical_date: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--read-run", logical_date], env=env, text=True, capture_output=True, check=False
    )
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return dict(json.loads(line[len(RESULT_MARKER) :]))
    print(result.stdout[-2000:] + result.stderr[-2000:], file=sys.stderr)
    return {"state": "unknown (could not read the metadata database)", "tasks": {}, "xcoms": {}}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}min"
    return f"{minutes}min {secs}s" if minutes else f"{secs}s"


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


#: The example DAG's tasks in the order they run (others, e.g. of a changed DAG, are listed after).
TASK_ORDER = ("preflight", "purge_headroom", "snapshot_plan", "snapshot", "capture", "apply")
OPS = ("r", "c", "u", "d")


def _ops(counts: dict[str, int]) -> str:
    return ", ".join(f"{op}={counts[op]}" for op in OPS if counts.get(op)) or "no rows"


def _task_rank(task_id: str) -> int:
    return TASK_ORDER.index(task_id) if task_id in TASK_ORDER else len(TASK_ORDER)


def headroom_line(facts: dict[str, Any]) -> str:
    """Lag and binlog purge headroom from the ``purge_headroom`` sensor's XCom."""
    lag, needed, seconds = facts.get("lag_seconds"), facts.get("oldest_needed_file"), facts.get("headroom_seconds")
    text = f"lag {'n/a' if lag is None else f'{float(lag):.1f} s'}; "
    if needed is None:
        text += "headroom n/a"
    elif seconds is None:
        text += f"headroom unlimited: binlogs are never purged automatically (capture resumes in {needed})"
    else:
        older = f"{facts.get('headroom_files')} older files, {_size(int(facts.get('headroom_bytes') or 0))}"
        text += (
            f"headroom {_duration(seconds)} before {needed}, where capture resumes, may be purged ({older} go first)"
        )
    status = facts.get("status")
    return text + f"; {status}" + (f": {facts.get('message')}" if status != "ok" or needed is None else "")


def print_window(number: int, logical_date: str, seconds: float, log_path: Path, run: dict[str, Any]) -> None:
    """One block per run: state, tasks, the window's rows by op and table, the apply, lag and headroom."""
    xcoms: dict[str, dict[str, Any]] = run["xcoms"]
    print(f"-- run {number} of {RUNS}: {logical_date}  state {run['state']}  ({seconds:.0f} s, log {log_path.name})")
    tasks = sorted(run["tasks"].items(), key=lambda item: _task_rank(item[0]))
    print(
        "   tasks: "
        + ", ".join(
            f"{task} {states[0]}" if len(states) == 1 else f"{task} {len(states)}x {'/'.join(sorted(set(states)))}"
            for task, states in tasks
        )
    )
    headroom = xcoms.get("purge_headroom", {})
    facts = headroom.get("return_value") if isinstance(headroom.get("return_value"), dict) else headroom
    print("   " + (headroom_line(facts) if facts and "headroom_seconds" in facts else "lag n/a; headroom n/a"))
    chunks = xcoms.get("snapshot", {}).get("mapped", [])
    if chunks:
        rows: Counter[str] = Counter()
        for chunk in chunks:
            rows[chunk["table"]] += int(chunk["rows"])
        print(f"   snapshot: {len(chunks)} chunks, " + ", ".join(f"{t} {n} rows" for t, n in sorted(rows.items())))
    capture = xcoms.get("capture", {}).get("return_value") or {}
    if "window_id" in capture:
        print(
            f"   window {capture['window_id']}: {capture.get('transactions')} transactions, "
            f"rows by op {_ops(capture.get('rows_by_op') or {})}"
        )
        print(f"     GTIDs {capture.get('lower') or '(empty)'}  ->  {capture.get('upper')}")
        by_table: dict[str, dict[str, int]] = capture.get("rows_by_table") or {}
        if by_table:
            print(f"     {'rows by table':<20}" + "".join(f"{op:>7}" for op in OPS[1:]))
            for table, counts in sorted(by_table.items()):
                print(f"     {table:<20}" + "".join(f"{counts.get(op, 0):>7}" for op in OPS[1:]))
    elif capture:
        print(f"   capture: {capture}")
    apply = xcoms.get("apply", {}).get("return_value") or {}
    for table, report in sorted((apply.get("tables") or {}).items()):
        print(f"   apply {table:<18} {report['status']:<10} {_ops(report.get('rows') or {})}")


# -- the final check ------------------------------------------------------------------------------


def spark_settings(jars: str) -> dict[str, str]:
    """The Spark settings of a local session that reads the demo's warehouse as catalog ``lake``."""
    return {
        "spark.jars": jars,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": str(WAREHOUSE),
    }


def verify_tables() -> int:
    """Child process: compare every demo table with its Iceberg table; 0 when all are equal."""
    from pyspark.sql import SparkSession

    from airflow_provider_mysql_cdc.apply.verify import compare_with_mysql
    from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

    conn = json.loads(os.environ[CDC_CONN_ENV])
    source = MySqlConnectionConfig(
        host=conn["host"], port=int(conn["port"]), user=conn["login"], password=conn["password"]
    )
    builder = SparkSession.builder.master("local[2]").appName("mysql-cdc-demo-verify")
    settings = {
        **spark_settings(os.environ["MYSQL_CDC_ICEBERG_JARS"]),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        results = compare_with_mysql(spark, source, DEMO_TABLES, catalog="lake")
    finally:
        spark.stop()
    for result in results:
        print(("   " if result.equal else " ! ") + result.describe(), flush=True)
    return 0 if all(result.equal for result in results) else 1


def pyspark_hint(jars: str) -> str:
    options = [
        f"--conf {key}={shlex.quote(value)}" for key, value in spark_settings(jars).items() if key != "spark.jars"
    ]
    command = " \\\n    ".join(
        [
            f"SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON={shlex.quote(sys.executable)} "
            f"{shlex.quote(str(VENV_BIN / 'pyspark'))} --master 'local[2]'",
            f"--jars {shlex.quote(jars)}",
            *options,
        ]
    )
    return (
        f"{command}\n"
        "then, at the >>> prompt:\n"
        '    spark.sql("SHOW TABLES IN lake.demo").show()\n'
        '    spark.sql("SELECT status, count(*), sum(amount) FROM lake.demo.orders GROUP BY status").show()\n'
        '    spark.sql("SELECT id, wide, dur, title, doc, _cdc_invalid_values FROM lake.demo.all_types '
        'WHERE id <= 5 ORDER BY id").show(truncate=24)\n'
        "    spark.sql(\"SELECT committed_at, summary['cdc.window-id'] AS window FROM lake.demo.orders.snapshots\")"
        ".show(truncate=False)"
    )


# -- main -------------------------------------------------------------------------------------------


def start_clean() -> None:
    """Delete what an earlier demo left in its Airflow home (databases, staging, warehouse, logs)."""
    if AIRFLOW_HOME.exists():
        assert AIRFLOW_HOME.parent == REPO_ROOT and AIRFLOW_HOME.name == ".airflow-home", AIRFLOW_HOME
        shutil.rmtree(AIRFLOW_HOME)
    AIRFLOW_HOME.mkdir()


def demo_env(host: str, port: int, cdc_password: str, jars: str) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Spark in local mode on this machine, Iceberg from the jar `make jars` assembled (no Maven).
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "MYSQL_CDC_ICEBERG_JARS": jars,
        CDC_CONN_ENV: json.dumps(
            {
                "conn_type": "mysql_cdc",
                "host": host,
                "port": port,
                "login": "cdc",
                "password": cdc_password,
                "extra": {"server_id": 4242},
            }
        ),
    }


def run_logged(argv: list[str], env: dict[str, str], log_path: Path, timeout: float | None = None) -> int:
    """Run a command with its output in ``log_path``; returns its exit code (-9 after a timeout)."""
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    with log_path.open("w") as log:
        try:
            return subprocess.run(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            print(f"demo: timed out after {timeout:.0f} s", file=sys.stderr)
            return -9


def prepare_airflow(env: dict[str, str]) -> bool:
    """The preflight CLI, then Airflow's metadata database; False (after printing why) on a failure."""
    step("preflight (python -m airflow_provider_mysql_cdc preflight)")
    preflight = subprocess.run(
        [sys.executable, "-m", "airflow_provider_mysql_cdc", "preflight", "--tables", "demo.*"],
        env=env,
        text=True,
        capture_output=True,
        check=False,
    )
    print(preflight.stdout + preflight.stderr)
    if preflight.returncode != 0:
        print("demo: preflight found problems (see above)", file=sys.stderr)
        return False
    step("Airflow metadata database on SQLite (.airflow-home)")
    log_path = AIRFLOW_HOME / "demo-db-migrate.log"
    if run_logged([str(VENV_BIN / "airflow"), "db", "migrate"], env, log_path) != 0:
        print(log_path.read_text()[-4000:], file=sys.stderr)
        return False
    return True


def run_windows(env: dict[str, str], workload: Workload) -> bool:
    """Three consecutive runs of the example DAG, the workload stopped before the last one."""
    # Each run's logical date is the moment it starts, so its data interval ends there: the default
    # cut-off `data_interval`
    # gives window k exactly the transactions committed between the starts of runs k-1 and k (the
    # first window starts at the pipeline's registration, after which the snapshot was read).
    for number in range(1, RUNS + 1):
        if number == RUNS:
            workload.stop()
            step(f"workload stopped before the last run: {workload.summary()}")
        logical_date = datetime.now(UTC).isoformat()
        step(f"run {number} of {RUNS}: airflow dags test {DAG_ID} {logical_date}")
        log_path = AIRFLOW_HOME / f"demo-run-{number}.log"
        run_started = time.monotonic()
        code = run_logged(
            [str(VENV_BIN / "airflow"), "dags", "test", DAG_ID, logical_date],
            env,
            log_path,
            timeout=RUN_TIMEOUT_SECONDS,
        )
        run = fetch_run(env, logical_date)
        print_window(number, logical_date, time.monotonic() - run_started, log_path, run)
        if code != 0 or run["state"] != "success":
            print(log_path.read_text()[-4000:], file=sys.stderr)
            print(f"demo: run {number} did not succeed (full log: {log_path})", file=sys.stderr)
            return False
    return True


def final_check(env: dict[str, str]) -> bool:
    """Every Iceberg table against its MySQL table, in a child process (Spark's output goes to a log)."""
    step("check: every Iceberg table equals its MySQL table (a fresh snapshot compared through Spark)")
    log_path = AIRFLOW_HOME / "demo-verify.log"
    with log_path.open("w") as log:
        verify = subprocess.run([sys.executable, __file__, "--verify"], env=env, stderr=log, check=False)
    if verify.returncode != 0:
        print(log_path.read_text()[-3000:], file=sys.stderr)
        print("demo: an Iceberg table differs from its MySQL table (see above)", file=sys.stderr)
        return False
    return True


def main() -> int:
    started = time.monotonic()
    step("starting clean: deleting .airflow-home (Airflow and CDC metadata, staging, Iceberg warehouse)")
    start_clean()
    external = os.environ.get("MYSQL_CDC_EXTERNAL_URL")
    server: LocalMySQL | None = None
    workload: Workload | None = None
    if external:
        step("using the MySQL server from MYSQL_CDC_EXTERNAL_URL")
        parts = parse_server_url(external)
        host, port = parts.host, parts.port
        admin = {"user": parts.user, "password": parts.password}
        cdc_password = os.environ.get(CDC_PASSWORD_ENV, DEFAULT_CDC_PASSWORD)
    else:
        step(f"starting the local MySQL instance 'demo' on 127.0.0.1:{DEMO_PORT}")
        server = LocalMySQL("demo", port=DEMO_PORT)
        server.start()
        host, port = server.host, server.port
        admin = {"user": "root", "password": server.root_password}
        cdc_password = server.cdc_password

    def connect() -> Any:
        return pymysql.connect(
            host=host,
            port=port,
            user=admin["user"],
            password=admin["password"],
            autocommit=False,
            init_command="SET time_zone = '+00:00'",  # TIMESTAMP values are written as UTC
        )

    try:
        with connect() as connection:
            with connection.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                version = str(cursor.fetchone()[0])
            vector = int(version.split(".", maxsplit=1)[0]) >= 9
            step(f"loading the sample schema 'demo' (MySQL {version}; VECTOR column: {'yes' if vector else 'no'})")
            counts = load_sample_schema(connection, vector, random.Random(42))
        print(", ".join(f"{table} {n} rows" for table, n in counts.items()))
        jars = ",".join(str(jar) for jar in iceberg_jars.ensure_jars(python=sys.executable))
        env = demo_env(host, port, cdc_password, jars)
        if not prepare_airflow(env):
            return 1
        step("starting the background workload (inserts, updates, deletes, key changes on every demo table)")
        workload = Workload(connect, vector)
        workload.start()
        if not run_windows(env, workload) or not final_check(env):
            return 1
        step("query the Iceberg tables with pyspark (they stay in .airflow-home/mysql_cdc/warehouse)")
        print(pyspark_hint(jars))
        print(f"\ndemo: done in {time.monotonic() - started:.0f} s: {RUNS} windows applied, every table equal")
        return 0
    finally:
        if workload is not None:
            workload.stop()
        if server is not None and os.environ.get("DEMO_KEEP_MYSQL") != "1":
            step("stopping the local MySQL instance 'demo' (DEMO_KEEP_MYSQL=1 keeps it running)")
            server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--read-run"]:
        print(RESULT_MARKER + json.dumps(read_run(sys.argv[2]), default=str), flush=True)
        raise SystemExit(0)
    if sys.argv[1:] == ["--verify"]:
        raise SystemExit(verify_tables())
    raise SystemExit(main())
