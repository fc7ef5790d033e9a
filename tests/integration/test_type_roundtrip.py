"""Every MySQL column type through the real binlog and Parquet, compared with what SELECT returns.

For each case a table is created, rows are inserted (snapshot S1 is then SELECTed), updated (S2)
and deleted. The binlog of those statements is read with python-mysql-replication directly,
decoded with :func:`decoded_rows`, converted with :class:`RowConverter`, written to Parquet with
:func:`arrow_schema` and read back. Every staged image must equal the server's row: insert images
and update before-images equal S1, update after-images and delete images equal S2. Expected values
come from SELECT through a separate, simple mapping (``CAST(x AS CHAR)`` for temporal values and
JSON, ``HEX()`` for bytes, ``ST_AsWKB`` for geometry), never from the code under test.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest
from pymysqlreplication.row_event import DeleteRowsEvent, PartialUpdateRowsEvent, UpdateRowsEvent, WriteRowsEvent

from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.types import INVALID_VALUES_COLUMN, ColumnSpec, arrow_schema
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter, decoded_rows
from airflow_provider_mysql_cdc.decoding.json_diff import apply_json_diffs, diffs_from_text
from airflow_provider_mysql_cdc.decoding.table_map import column_specs_from_table_map
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.integration.library_stream import library_events
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

DATABASE = "types_roundtrip"
_server_ids = itertools.count(7301)


# -- expected values from SELECT ------------------------------------------------------------------

Expected = tuple[Any, str | None]  # (typed value, text kept in _cdc_invalid_values)


def _plain(value: Any) -> Expected:
    return value, None


def _hex(value: str | None) -> Expected:
    return (None if value is None else bytes.fromhex(value)), None


def _bit1(value: int | None) -> Expected:
    return (None if value is None else bool(value)), None


def _temporal(parse: Callable[[str], Any]) -> Callable[[str | None], Expected]:
    def expected(text: str | None) -> Expected:
        if text is None:
            return None, None
        try:
            return parse(text), None
        except ValueError:  # zero or partial date: NULL, text kept
            return None, text

    return expected


def _utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)


def _time(text: str | None) -> Expected:
    if text is None:
        return None, None
    match = re.fullmatch(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d+))?", text)
    assert match, text
    sign, hours, minutes, seconds, fraction = match.groups()
    value = dt.timedelta(
        hours=int(hours), minutes=int(minutes), seconds=int(seconds), microseconds=int((fraction or "").ljust(6, "0"))
    )
    return (-value if sign else value), None


def _floats(value: str | None) -> Expected:
    if value is None:
        return None, None
    raw = bytes.fromhex(value)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw)), None


#: How a column is SELECTed ({c} is the column) and how that result maps to the staged value.
KINDS: dict[str, tuple[str, Callable[[Any], Expected]]] = {
    "plain": ("{c}", _plain),
    "float": ("CAST({c} AS DOUBLE)", _plain),  # FLOAT widened exactly; the text form is rounded
    "hex": ("HEX({c})", _hex),
    "bits": ("HEX(CAST({c} AS BINARY))", _hex),  # HEX(bit) would print the number
    "bit1": ("{c} + 0", _bit1),
    "date": ("CAST({c} AS CHAR)", _temporal(dt.date.fromisoformat)),
    "datetime": ("CAST({c} AS CHAR)", _temporal(dt.datetime.fromisoformat)),
    "timestamp": ("CAST({c} AS CHAR)", _temporal(_utc)),  # the session time zone is +00:00
    "time": ("CAST({c} AS CHAR)", _time),
    "json": ("CAST({c} AS CHAR)", _plain),
    "text": ("CAST({c} AS CHAR)", _plain),
    "wkb": ("HEX(ST_AsWKB({c}, 'axis-order=long-lat'))", _hex),
    "vector": ("HEX({c})", _floats),
}


@dataclass(frozen=True)
class Col:
    name: str
    ddl: str
    kind: str = "plain"


@dataclass(frozen=True)
class Case:
    """A table (``id INT PRIMARY KEY`` + columns), its rows and the changes made to them."""

    name: str
    columns: tuple[Col, ...]
    #: Values of the columns (SQL text) per row; the row id is the position + 1.
    rows: tuple[str, ...]
    #: (id, SET clause)
    updates: tuple[tuple[int, str], ...] = ()
    deletes: tuple[int, ...] = (2,)
    sql_mode: str = "STRICT_TRANS_TABLES"
    #: Session time zone of the writes (reads always use +00:00).
    write_time_zone: str = "+00:00"
    #: Expected (mysql_type, arrow type) per column, checked against the specs.
    types: dict[str, tuple[str, pa.DataType]] = field(default_factory=dict)


INTS = Case(
    "ints",
    (
        Col("ti", "TINYINT"),
        Col("tiu", "TINYINT UNSIGNED"),
        Col("si", "SMALLINT"),
        Col("siu", "SMALLINT UNSIGNED"),
        Col("mi", "MEDIUMINT"),
        Col("miu", "MEDIUMINT UNSIGNED"),
        Col("i", "INT"),
        Col("iu", "INT UNSIGNED"),
        Col("bi", "BIGINT"),
        Col("biu", "BIGINT UNSIGNED"),
        Col("bo", "BOOL"),
    ),
    (
        "-128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, 0",
        "127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, "
        "18446744073709551615, 1",
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
        "-1, 1, -1, 1, -1, 1, -1, 1, -1, 9223372036854775808, 42",
    ),
    updates=((1, "ti = 7, biu = 18446744073709551614, bo = TRUE"), (3, "i = 0, biu = 1"), (4, "bo = NULL")),
    types={
        "tiu": ("tinyint", pa.uint8()),
        "miu": ("mediumint", pa.int32()),
        "biu": ("bigint", pa.uint64()),
        "bo": ("tinyint", pa.int8()),
    },
)

NUMBERS = Case(
    "numbers",
    (
        Col("d65", "DECIMAL(65,30)", "text"),
        Col("d65_0", "DECIMAL(65,0)", "text"),
        Col("d38", "DECIMAL(38,10)"),
        Col("d10", "DECIMAL(10,0)"),
        Col("d5_5", "DECIMAL(5,5)"),
        Col("du", "DECIMAL(12,4) UNSIGNED"),
        Col("f", "FLOAT", "float"),
        Col("fd", "DOUBLE"),
        Col("b1", "BIT(1)", "bit1"),
        Col("b10", "BIT(10)", "bits"),
        Col("b64", "BIT(64)", "bits"),
        Col("y", "YEAR"),
    ),
    (
        "'99999999999999999999999999999999999.999999999999999999999999999999', "
        f"{'9' * 65}, '9999999999999999999999999999.9999999999', 9999999999, 0.99999, 99999999.9999, "
        "3.40282e38, 1.7976931348623157e308, 1, b'1111111111', 18446744073709551615, 2155",
        "'-99999999999999999999999999999999999.999999999999999999999999999999', "
        f"-{'9' * 65}, '-9999999999999999999999999999.9999999999', -9999999999, -0.99999, 0, "
        "-1.17549e-38, -2.2250738585072014e-308, 0, b'0', b'0', 1901",
        "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
        "'0.000000000000000000000000000001', 0, '-0.0000000001', 0, 0.00001, 0.0001, "
        "0.1, 0.1, 1, b'1000000001', b'1000000000000000000000000000000000000000000000000000000000000001', 0",
        "'-12345678901234567890123456789012345.123456789012345678901234567890', 1, 1.5, 1, 0.5, 1.5, "
        "-0.0, 5e-324, 0, b'0000000001', 255, 1999",
    ),
    updates=((1, "d65 = 0, f = 1.1, fd = 0.30000000000000004, b10 = b'0101010101', y = 0"), (3, "d65 = -1.5")),
    types={
        "d65": ("decimal", pa.string()),
        "d65_0": ("decimal", pa.string()),
        "d38": ("decimal", pa.decimal128(38, 10)),
        "f": ("float", pa.float32()),
        "b1": ("bit", pa.bool_()),
        "b10": ("bit", pa.binary()),
        "y": ("year", pa.int16()),
    },
)

_FSPS = range(7)


def _fraction(digits: str) -> str:
    return f".{digits}" if digits else ""


TEMPORAL = Case(
    "temporal",
    (
        Col("d", "DATE", "date"),
        *(Col(f"dt{fsp}", f"DATETIME({fsp})", "datetime") for fsp in _FSPS),
        *(Col(f"ts{fsp}", f"TIMESTAMP({fsp}) NULL", "timestamp") for fsp in _FSPS),
        *(Col(f"t{fsp}", f"TIME({fsp})", "time") for fsp in _FSPS),
    ),
    (
        "'1000-01-01', "
        + ", ".join(["'1000-01-01 00:00:00'"] * 7 + ["'1970-01-01 05:30:01'"] * 7 + ["'-838:59:59'"] * 7),
        "'9999-12-31', "
        + ", ".join(
            [f"'9999-12-31 23:59:59{_fraction('9' * fsp)}'" for fsp in _FSPS]
            + [f"'2038-01-19 08:44:07{_fraction('9' * fsp)}'" for fsp in _FSPS]
            + ["'838:59:59'"] * 7
        ),
        "'0000-00-00', "
        + ", ".join(["'0000-00-00 00:00:00'"] * 7 + ["'0000-00-00 00:00:00'"] * 7 + ["'00:00:00'"] * 7),
        "'2024-00-15', "
        + ", ".join(
            ["'2024-02-00 10:11:12.123456'"] * 7 + ["'2024-02-29 12:00:00.654321'"] * 7 + ["'-00:00:00.000001'"] * 7
        ),
        "NULL, " + ", ".join(["NULL"] * 21),
        "'2024-02-30', "
        + ", ".join(
            ["'0000-01-01 00:00:00'"] * 7
            + ["'2024-06-30 23:59:59.5'"] * 7
            + ["'-12:34:56.7'", "'-12:34:56.7'", "'-00:00:01.05'", "'-100:00:00.123'", "'-1:2:3.0001'"]
            + ["'-0:0:0.00001'", "'-838:59:58.999999'"]
        ),
    ),
    updates=(
        (1, "d = '2024-01-15', dt6 = '2024-01-15 10:11:12.000001', ts3 = '2001-09-09 07:16:40.5', t6 = '-00:00:00.5'"),
        (4, "d = '0000-00-00', t1 = '-838:59:59.9'"),
        (6, "dt0 = '2024-13-01 00:00:00'"),
    ),
    deletes=(2, 5),
    sql_mode="ALLOW_INVALID_DATES",
    write_time_zone="+05:30",
    types={
        "d": ("date", pa.date32()),
        "dt3": ("datetime", pa.timestamp("us")),
        "ts6": ("timestamp", pa.timestamp("us", tz="UTC")),
        "t0": ("time", pa.duration("us")),
    },
)

_TEXT_TYPES = ("CHAR(20)", "VARCHAR(300)", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT")
_BLOB_TYPES = ("BINARY(4)", "VARBINARY(300)", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")
STRINGS = Case(
    "strings",
    (
        *(Col(f"u_{i}", f"{ddl} CHARACTER SET utf8mb4") for i, ddl in enumerate(_TEXT_TYPES)),
        *(Col(f"l_{i}", f"{ddl} CHARACTER SET latin1") for i, ddl in enumerate(_TEXT_TYPES)),
        *(Col(f"b_{i}", ddl, "hex") for i, ddl in enumerate(_BLOB_TYPES)),
        Col("e", "ENUM('a','😀','é b','')"),
        Col("el", "ENUM('é','ü','x') CHARACTER SET latin1"),
        Col("s", "SET('x','y','😀','z')"),
        Col("sl", "SET('é','ß','c') CHARACTER SET latin1"),
        Col("a", "VARCHAR(10) CHARACTER SET ascii"),
        Col("u16", "VARCHAR(10) CHARACTER SET utf16"),
    ),
    (
        ", ".join(["'😀 emoji é 中'"] * 6 + ["'é€ŠœŸ'"] * 6)
        + ", x'61000000', x'0000', x'', x'00ff', x'ff00', x'00'"
        + ", 'é b', 'ü', 'z,x', 'c,é', 'plain', '😀é'",
        ", ".join(["'trailing  '"] * 6 + ["_latin1 x'818d8f909d80e9ff'"] * 6)
        + ", x'00000000', x'6100', x'ff', x'', x'00', x'0000'"
        + ", '', 'x', '', '', '', ''",
        ", ".join(["NULL"] * 24),
        ", ".join(["''"] * 12)
        + ", x'01020304', REPEAT(x'ab', 300), REPEAT(x'00', 255), x'', REPEAT(x'cd', 70000), REPEAT(x'ef', 5)"
        + ", 'a', 'é', 'x,y,😀,z', 'é,ß,c', 'A\\tB', 'x'",
    ),
    updates=(
        (1, "u_1 = REPEAT('é', 300), l_3 = REPEAT('ÿ', 1000), b_0 = x'00', e = '😀', s = 'y', el = 'x'"),
        (3, "u_0 = '', b_1 = x'00', e = '', sl = 'ß', a = NULL"),
    ),
    sql_mode="",
    types={
        "u_0": ("char", pa.string()),
        "l_5": ("longtext", pa.string()),
        "b_0": ("binary", pa.binary()),
        "b_3": ("blob", pa.binary()),
        "e": ("enum", pa.string()),
        "s": ("set", pa.string()),
    },
)


def _sql(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


_JSON_DOCS = (
    r'{"b": 1, "a": [1.5, 2, "x\"y"], "big": 18446744073709551615, "neg": -9223372036854775808}',
    r"[1e300, -1.5e-20, 0.1, 100.0, 1e16, 123456789012345678, 3.0, -0.0, 1.7976931348623157e308, 5e-324]",
    r'{"s": "quote \" backslash \\ tab \t nl \n ctl \u0001 del \u007f emoji 😀 é \u00e9", "": {}, "e": []}',
    '"scalar string"',
    "null",
    "true",
    "-42",
    '[[[[["deep"]]]], {"k": {"k": {"k": null}}}, false]',
)
JSON = Case(
    "json",
    (Col("j", "JSON", "json"), Col("j2", "JSON", "json")),
    (
        *(f"CAST({_sql(doc)} AS JSON), NULL" for doc in _JSON_DOCS),
        "JSON_ARRAY(CAST('2024-01-15' AS DATE), CAST('2024-01-15 10:11:12.5' AS DATETIME(6)), "
        "CAST('-838:59:59' AS TIME), CAST('12:00:00.25' AS TIME(2)), CAST(-12.50 AS DECIMAL(10,2)), "
        "CAST(x'00ff' AS BINARY), CAST(REPEAT(x'ab', 100) AS BINARY), b'101', CAST(1.5 AS FLOAT)), "
        "JSON_OBJECT('big', REPEAT('x', 70000), 'arr', JSON_ARRAY(1, 2))",
        "CAST(CONCAT('[', REPEAT('1,', 40000), '2]') AS JSON), JSON_OBJECT(REPEAT('k', 300), 1, 'a', 2, 'bb', 3)",
    ),
    updates=((1, "j = JSON_SET(j, '$.b', 'changed', '$.new', 1.25)"), (3, "j2 = CAST('[]' AS JSON)")),
    types={"j": ("json", pa.string())},
)

_SRS = "SRID 4326"
SPATIAL = Case(
    "spatial",
    (
        Col("g", "GEOMETRY", "wkb"),
        Col("p", f"POINT {_SRS}", "wkb"),
        Col("ls", "LINESTRING", "wkb"),
        Col("pg", "POLYGON", "wkb"),
        Col("mp", "MULTIPOINT", "wkb"),
        Col("gc", "GEOMETRYCOLLECTION", "wkb"),
    ),
    (
        "ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(45 -120)', 4326), "
        "ST_GeomFromText('LINESTRING(0 0, 1 1, 2 5)'), ST_GeomFromText('POLYGON((0 0, 4 0, 4 4, 0 4, 0 0))'), "
        "ST_GeomFromText('MULTIPOINT(1 1, 2 2)'), "
        "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))')",
        "ST_GeomFromText('POINT(-1.5 2.25)', 3857), ST_GeomFromText('POINT(0 0)', 4326), NULL, NULL, NULL, NULL",
        "NULL, NULL, NULL, NULL, NULL, NULL",
    ),
    updates=((1, "g = ST_GeomFromText('LINESTRING(1 1, 2 2)', 4326), p = ST_GeomFromText('POINT(-89.5 179)', 4326)"),),
    types={"g": ("geometry", pa.binary())},
)

VECTOR = Case(
    "vector",
    (Col("v", "VECTOR(3)", "vector"), Col("after_v", "VARCHAR(10)")),
    (
        "STRING_TO_VECTOR('[1.5, -2, 3e-7]'), 'é'",
        "STRING_TO_VECTOR('[0, 3.4028234e38, -1.17549435e-38]'), 'x'",
        "NULL, NULL",
    ),
    updates=((1, "v = STRING_TO_VECTOR('[1, 2, 3]')"),),
    types={"v": ("vector", pa.list_(pa.float32())), "after_v": ("varchar", pa.string())},
)

GENERATED = Case(
    "generated",
    (
        Col("a", "INT"),
        Col("st", "INT AS (a * 2) STORED"),
        Col("vi", "VARCHAR(20) AS (CONCAT('v', a)) VIRTUAL"),
        Col("vj", "JSON AS (JSON_OBJECT('a', a)) VIRTUAL", "json"),
        Col("inv", "INT INVISIBLE"),
    ),
    ("1, DEFAULT, DEFAULT, DEFAULT, 10", "2, DEFAULT, DEFAULT, DEFAULT, 20", "NULL, DEFAULT, DEFAULT, DEFAULT, NULL"),
    updates=((1, "a = 5"), (3, "a = 7, inv = 70")),
)

#: (DDL, kind, value of row r in column i) of the wide table's repeating column types.
_WIDE_TYPES: tuple[tuple[str, str, Callable[[int, int], str]], ...] = (
    ("TINYINT", "plain", lambda i, r: str((i * r) % 128 - (r % 2) * 128)),
    ("VARCHAR(2) CHARACTER SET latin1", "text", lambda i, r: f"'{(i + r) % 10}é'"),
    ("BIT(3)", "bits", lambda i, r: f"b'{(i + r) % 8:03b}'"),
    ("DATE", "date", lambda i, r: f"'20{(i + r) % 100:02d}-0{1 + r % 9}-{1 + i % 28:02d}'"),
    ("DOUBLE", "plain", lambda i, r: f"{i}.25e{r % 7}"),
    ("SMALLINT UNSIGNED", "plain", lambda i, r: str((i * 211 + r) % 65536)),
)
_WIDE_COLUMNS = 300  # past 250 (the table map's column count takes three bytes) and a 38-byte null bitmap


def _wide_row(r: int) -> str:
    """Row ``r`` of the wide table: every seventh value NULL, in a pattern that moves with ``r``."""
    values = ("NULL" if (i + r) % 7 == 0 else _WIDE_TYPES[i % len(_WIDE_TYPES)][2](i, r) for i in range(_WIDE_COLUMNS))
    return ", ".join(values)


WIDE = Case(
    "wide",
    tuple(
        Col(f"c{i}", _WIDE_TYPES[i % len(_WIDE_TYPES)][0], _WIDE_TYPES[i % len(_WIDE_TYPES)][1])
        for i in range(_WIDE_COLUMNS)
    ),
    tuple(_wide_row(r) for r in range(1, 5)),
    updates=((1, "c0 = NULL, c253 = 'x', c299 = 7"), (3, "c1 = NULL, c250 = NULL, c298 = 1.5")),
)

CASES = (INTS, NUMBERS, TEMPORAL, STRINGS, JSON, SPATIAL, VECTOR, GENERATED, WIDE)


# -- the round trip -------------------------------------------------------------------------------


@dataclass
class Staged:
    specs: tuple[ColumnSpec, ...]
    rows: list[dict[str, Any]]  # read back from Parquet
    expected: list[tuple[str, int]]  # per staged row: (snapshot name, id)


def _binlog_position(server: MySqlTestServer) -> tuple[str, int]:
    row = server.execute("SHOW BINARY LOG STATUS")[0]
    return str(row[0]), int(row[1])


def _snapshot(server: MySqlTestServer, case: Case) -> dict[int, dict[str, Expected]]:
    selects = ", ".join(KINDS[col.kind][0].format(c=f"`{col.name}`") for col in case.columns)
    rows = server.execute("SET time_zone = '+00:00'", f"SELECT id, {selects} FROM `{DATABASE}`.`{case.name}`")
    snapshot: dict[int, dict[str, Expected]] = {}
    for row in rows:
        snapshot[int(row[0])] = {
            col.name: KINDS[col.kind][1](value) for col, value in zip(case.columns, row[1:], strict=True)
        }
    return snapshot


def _binlog_events(
    server: MySqlTestServer, table: str, start: tuple[str, int], database: str = DATABASE
) -> Iterator[Any]:
    """The row events of ``database.table`` written after ``start``, read with the library directly
    (with this project's fixes installed, as ``BinlogReader`` installs them)."""
    return library_events(
        server,
        start,
        [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[database],
        only_tables=[table],
    )


def _images(event: Any, row: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(op, snapshot the image must equal, image) of one decoded row."""
    if isinstance(event, WriteRowsEvent):
        return [("c", "s1", row["values"])]
    if isinstance(event, UpdateRowsEvent):
        return [("u", "s1", row["before_values"]), ("u", "s2", row["after_values"])]
    return [("d", "s2", row["values"])]


def _name(col: Col) -> str:
    """The column name as it goes between backquotes."""
    return col.name.replace("`", "``")


def create_table(server: MySqlTestServer, case: Case, database: str = DATABASE) -> str:
    """(Re)create the case's table in ``database``; return its quoted name."""
    table = f"`{database}`.`{case.name}`"
    columns = ", ".join(f"`{_name(col)}` {col.ddl}" for col in case.columns)
    server.execute(
        f"CREATE DATABASE IF NOT EXISTS `{database}`",
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} (id INT PRIMARY KEY, {columns})",
    )
    return table


def write_session(case: Case) -> tuple[str, str]:
    """The session settings the case's writes run under."""
    return (f"SET sql_mode = '{case.sql_mode}'", f"SET time_zone = '{case.write_time_zone}'")


def insert_rows(server: MySqlTestServer, case: Case, table: str) -> None:
    """Insert the case's rows (ids 1..n) under :func:`write_session`."""
    names = ", ".join(f"`{_name(col)}`" for col in case.columns)
    server.execute(
        *write_session(case),
        *(f"INSERT INTO {table} (id, {names}) VALUES ({i}, {values})" for i, values in enumerate(case.rows, 1)),
    )


def roundtrip(server: MySqlTestServer, case: Case, tmp_path: Path) -> tuple[Staged, dict[str, dict[int, Any]]]:
    table = create_table(server, case)
    start = _binlog_position(server)
    session = write_session(case)
    insert_rows(server, case, table)
    snapshots = {"s1": _snapshot(server, case)}
    server.execute(*session, *(f"UPDATE {table} SET {sets} WHERE id = {i}" for i, sets in case.updates))
    snapshots["s2"] = _snapshot(server, case)
    server.execute(*(f"DELETE FROM {table} WHERE id = {i}" for i in case.deletes))

    specs: tuple[ColumnSpec, ...] = ()
    staged: list[tuple[Any, ...]] = []
    expected: list[tuple[str, int]] = []
    for event in _binlog_events(server, case.name, start):
        specs = column_specs_from_table_map(event)
        converter = RowConverter(specs)
        for row in decoded_rows(event):
            for op, phase, image in _images(event, row):
                staged.append((*converter.convert(image), None, op, None, len(staged), None))
                expected.append((phase, int(image["id"])))
    schema = arrow_schema(specs)
    path = tmp_path / f"{case.name}.parquet"
    pq.write_table(pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in staged], schema), path)
    back = pq.read_table(path)
    assert back.schema.equals(schema)
    return Staged(specs, back.to_pylist(), expected), snapshots


def _version(server: MySqlTestServer) -> tuple[int, ...]:
    text = str(server.execute("SELECT VERSION()")[0][0])
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_staged_value_equals_select(mysql_server: MySqlTestServer, case: Case, tmp_path: Path) -> None:
    if case is VECTOR and _version(mysql_server) < (9, 0):
        pytest.skip("VECTOR needs MySQL 9")
    staged, snapshots = roundtrip(mysql_server, case, tmp_path)

    n_inserts, n_updates, n_deletes = len(case.rows), len(case.updates), len(case.deletes)
    assert len(staged.rows) == n_inserts + 2 * n_updates + n_deletes
    assert [spec.name for spec in staged.specs] == ["id", *(col.name for col in case.columns)]
    by_name = {spec.name: spec for spec in staged.specs}
    assert by_name["id"].primary_key and by_name["id"].nullable is False
    for name, (mysql_type, arrow) in case.types.items():
        assert by_name[name].mysql_type == mysql_type, name
        assert arrow_schema(staged.specs).field(name).type == arrow, name

    mismatches = []
    for row, (phase, row_id) in zip(staged.rows, staged.expected, strict=True):
        snapshot = snapshots[phase][row_id]
        invalid = dict(row[INVALID_VALUES_COLUMN] or [])
        for col in case.columns:
            value, text = snapshot[col.name]
            if row[col.name] != value or invalid.get(col.name) != text:
                mismatches.append(
                    (row["_cdc_op"], phase, row_id, col.name, row[col.name], invalid.get(col.name), value, text)
                )
        if not any(text for _, text in snapshot.values()):
            assert row[INVALID_VALUES_COLUMN] is None
    assert not mismatches, "\n".join(map(repr, mismatches))


def captured_rows(
    server: MySqlTestServer, database: str, table: str, before: GtidSet, tmp_path: Path
) -> list[dict[str, Any]]:
    """The rows ``capture_window`` stages for ``database.table`` since ``before``, in binlog order."""
    staging = tmp_path / "staging"
    result = capture_window(
        CaptureRequest(
            pipeline=f"types-{database}-{table}",
            run_id="types",
            staging_uri=str(staging),
            cutoff=CutoffRule.CATCH_UP,
            tables=TableSelection.of(f"{database}.{table}"),
            initial_frontier=before,
            replica_server_id=next(_server_ids),
        ),
        server.cdc,
        FrontierStore.from_url(f"sqlite:///{tmp_path / 'meta.db'}"),
    )
    manifest = Staging(str(staging), result.pipeline).read_window_manifest(result.window_id)
    assert manifest is not None
    window = staging / result.pipeline / "windows" / f"{result.window_id:08d}"
    captured: list[dict[str, Any]] = []
    for staged_file in manifest.files:
        captured += pq.read_table(window / staged_file.path).to_pylist()
    return sorted(captured, key=lambda row: row["_cdc_seq"])


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_capture_engine_stages_the_values_checked_above(
    mysql_server: MySqlTestServer, case: Case, tmp_path: Path
) -> None:
    """``capture_window`` stages, for every type, exactly the images the test above checks against
    SELECT: inserts, update after-images and delete before-images, in binlog order."""
    if case is VECTOR and _version(mysql_server) < (9, 0):
        pytest.skip("VECTOR needs MySQL 9")
    before = GtidSet.parse(str(mysql_server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))
    direct, _ = roundtrip(mysql_server, case, tmp_path)
    captured = captured_rows(mysql_server, DATABASE, case.name, before, tmp_path)
    expected = [
        row
        for row, (phase, _) in zip(direct.rows, direct.expected, strict=True)
        if (row["_cdc_op"], phase) != ("u", "s1")
    ]
    columns = ["id", *(col.name for col in case.columns), INVALID_VALUES_COLUMN, "_cdc_op"]
    assert [[row[c] for c in columns] for row in captured] == [[row[c] for c in columns] for row in expected]


def test_timestamps_do_not_depend_on_the_local_time_zone(
    mysql_server: MySqlTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library converts TIMESTAMP with ``utcfromtimestamp``; ours with explicit UTC arithmetic.
    Decoding under other local zones gives the same values (the suite also runs under ``TZ=...``)."""
    results = []
    try:
        for zone in ("UTC", "America/New_York", "Asia/Kolkata"):
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            staged, snapshots = roundtrip(mysql_server, TEMPORAL, tmp_path)
            results.append(staged.rows)
            for row, (phase, row_id) in zip(staged.rows, staged.expected, strict=True):
                assert row["ts6"] == snapshots[phase][row_id]["ts6"][0]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert results[0] == results[1] == results[2]


def test_partial_json_updates_are_read_with_every_diff(mysql_server: MySqlTestServer) -> None:
    """With ``binlog_row_value_options=PARTIAL_JSON`` the after image holds diffs, not the document: every
    diff of the column is read (the library reads only the first), and applied to the before image they
    give the document MySQL stores."""
    table = f"`{DATABASE}`.`partial_json`"
    mysql_server.execute(
        f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`",
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} (id INT PRIMARY KEY, j JSON)",
        f"""INSERT INTO {table} VALUES (1, '{{"a": 1, "b": "xxxxxxxxxxxxxxxxxxxx", "c": [1, 2]}}')""",
    )
    start = _binlog_position(mysql_server)
    mysql_server.execute(
        "SET binlog_row_value_options = 'PARTIAL_JSON'",
        f"UPDATE {table} SET j = JSON_REMOVE(JSON_SET(j, '$.a', 2, '$.new', 'n'), '$.c[0]') WHERE id = 1",
    )
    (stored,) = mysql_server.execute(f"SELECT CAST(j AS CHAR) FROM {table} WHERE id = 1")[0]
    events = list(
        library_events(
            mysql_server,
            start,
            [UpdateRowsEvent, PartialUpdateRowsEvent],
            only_schemas=[DATABASE],
            only_tables=["partial_json"],
        )
    )
    assert [type(event) for event in events] == [PartialUpdateRowsEvent]
    converter = RowConverter(column_specs_from_table_map(events[0]))
    (row,) = decoded_rows(events[0])
    before, _ = converter.convert_partial(row["before_values"])
    assert before[:2] == (1, '{"a": 1, "b": "xxxxxxxxxxxxxxxxxxxx", "c": [1, 2]}')
    after, partial = converter.convert_partial(row["after_values"])
    assert after[1] is None and partial is not None
    diffs = diffs_from_text(partial["j"])
    assert [d.operation for d in diffs] == ["replace", "insert", "remove"]
    assert apply_json_diffs(before[1], diffs) == stored
