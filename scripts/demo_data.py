"""The demo's data (``scripts/demo.py``): the sample schema ``demo`` (a small shop and ``all_types``, one
column of every type of the type map with tricky rows) and the background workload that writes to it
while the example DAG runs."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pymysql

#: Seconds between two workload transactions (a modest rate: a few transactions per second).
WORKLOAD_PAUSE_SECONDS = 0.25

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
