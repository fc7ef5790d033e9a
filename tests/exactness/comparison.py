"""Value-by-value comparison of a MySQL table with its Iceberg target, as multisets of rows.

Both sides are brought to one canonical form per MySQL column type, written here from docs/type-map.md's
type map (not from the provider's code):

| MySQL type | read from MySQL as | Iceberg value | canonical |
|---|---|---|---|
| integer types, YEAR | the value | int (BIGINT UNSIGNED: decimal(20,0)) | int |
| DECIMAL(p,s) | ``CAST(c AS CHAR)`` | Decimal with scale s (p > 38: the same text) | the plain text, s digits |
| FLOAT | ``CAST(c AS DOUBLE)`` (the stored single-precision value, exactly) | float | ``repr`` of the float |
| DOUBLE | the value | double | ``repr`` (``-0.0`` differs from ``0.0``) |
| BIT(1) | ``c + 0`` | boolean | 0 or 1 |
| BIT(n) | ``HEX(CAST(c AS BINARY))``: ceil(n/8) bytes, big-endian | binary | bytes |
| DATE, DATETIME, TIMESTAMP | ``CAST(c AS CHAR)`` at time zone +00:00 | date / timestamp / timestamptz | MySQL's text |
| TIME | ``CAST(c AS CHAR)`` | long (microseconds) | microseconds |
| CHAR..LONGTEXT, ENUM, SET | str | string | str |
| BINARY, VARBINARY, BLOBs | ``HEX(c)`` (BINARY(n) padded with 0x00) | binary | bytes |
| JSON | ``CAST(c AS CHAR)`` | string | str |
| geometry types | ``HEX(c)``: 4-byte SRID + WKB | binary: WKB | the WKB (MySQL's bytes without the SRID) |
| VECTOR | ``HEX(c)``: little-endian float32 | list<float> | tuple of floats |

An invalid date (zero, partial or impossible) is NULL in the typed Iceberg column and its text, as
``CAST(c AS CHAR)`` prints it, under the column's name in ``_cdc_invalid_values``: canonically the
same as MySQL's text. Iceberg columns MySQL does not have (``_cdc_*``, dropped columns the target
keeps) are ignored; a MySQL column the target lacks is a difference. A table dropped in MySQL must
be absent or empty in Iceberg.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.exactness.iceberg_reader import IcebergContents, read_iceberg_table
from tests.mysql_servers import MySqlTestServer

INVALID_VALUES_COLUMN = "_cdc_invalid_values"

_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year"})
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})
_BYTES_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_SPATIAL_TYPES = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    }
)
_TEMPORAL_KINDS = frozenset({"date", "datetime", "timestamp"})
#: How each kind of column is selected from MySQL ({c} is the quoted column name).
_SELECT = {
    "decimal": "CAST({c} AS CHAR)",
    "float": "CAST({c} AS DOUBLE)",
    "date": "CAST({c} AS CHAR)",
    "datetime": "CAST({c} AS CHAR)",
    "timestamp": "CAST({c} AS CHAR)",
    "time": "CAST({c} AS CHAR)",
    "json": "CAST({c} AS CHAR)",
    # Bytes travel as hex: PyMySQL decodes some binary result columns (VECTOR) as text.
    "bit1": "{c} + 0",
    "bits": "HEX(CAST({c} AS BINARY))",  # HEX of a BIT column would print its number
    "bytes": "HEX({c})",
    "geometry": "HEX({c})",
    "vector": "HEX({c})",
}

#: The tag of an Iceberg value shown as it is (a target that has no column in common with MySQL).
RAW = "raw"
#: A canonical value: None (SQL NULL) or (kind tag, value).
Canonical = tuple[str, Any] | None
Row = tuple[Canonical, ...]


def quote_name(name: str) -> str:
    """A MySQL identifier between backquotes."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A MySQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True)
class MySqlColumn:
    """A column of the MySQL table as information_schema describes it now."""

    name: str
    column_type: str
    kind: str
    #: Fractional-second digits (temporal kinds) or decimal scale.
    digits: int

    @property
    def select(self) -> str:
        """The expression that reads this column for the comparison."""
        return _SELECT.get(self.kind, "{c}").format(c=quote_name(self.name))


def column_kind(data_type: str, column_type: str) -> str:
    """The comparison kind of a MySQL column (information_schema ``DATA_TYPE``, ``COLUMN_TYPE``)."""
    data_type = data_type.lower()
    if data_type in _INTEGER_TYPES:
        return "int"
    if data_type in ("decimal", "float", "double", "date", "datetime", "timestamp", "time", "json", "vector"):
        return data_type
    if data_type == "bit":
        return "bit1" if column_type.lower() in ("bit(1)", "bit") else "bits"
    if data_type in _TEXT_TYPES:
        return "text"
    if data_type in _BYTES_TYPES:
        return "bytes"
    if data_type in _SPATIAL_TYPES:
        return "geometry"
    raise AssertionError(f"the comparison has no rule for MySQL type {column_type!r}")


def mysql_columns(server: MySqlTestServer, database: str, table: str) -> list[MySqlColumn] | None:
    """The table's columns in table order (invisible ones included); None when it does not exist."""
    rows = server.execute(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, DATETIME_PRECISION, NUMERIC_SCALE "
        "FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA = {sql_string(database)} AND TABLE_NAME = {sql_string(table)} "
        "ORDER BY ORDINAL_POSITION"
    )
    if not rows:
        return None
    columns = []
    for name, data_type, column_type, fsp, scale in rows:
        kind = column_kind(str(data_type), str(column_type))
        digits = int(fsp or 0) if kind in ("datetime", "timestamp", "time") else int(scale or 0)
        columns.append(MySqlColumn(str(name), str(column_type), kind, digits))
    return columns


# -- MySQL values ---------------------------------------------------------------------------------


def _time_microseconds(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    micros = int(fraction.ljust(6, "0")) if fraction else 0
    return sign * (((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros)


def canonical_mysql(column: MySqlColumn, value: Any) -> Canonical:
    """A value as the MySQL side reads it (see :attr:`MySqlColumn.select`), in canonical form."""
    if value is None:
        return None
    kind = column.kind
    if isinstance(value, bytearray):
        value = bytes(value)
    if kind == "int":
        return ("int", int(value))
    if kind == "decimal":
        return ("decimal", str(value))
    if kind in ("float", "double"):
        return (kind, repr(float(value)))
    if kind == "bit1":
        return ("bit", int(value))
    if kind in _TEMPORAL_KINDS:
        return ("temporal", str(value))
    if kind == "time":
        return ("time", _time_microseconds(str(value)))
    if kind in ("bits", "bytes", "geometry", "vector"):
        raw = bytes.fromhex(str(value))
        if kind == "geometry":
            return ("bytes", raw[4:])
        if kind == "vector":
            return ("vector", struct.unpack(f"<{len(raw) // 4}f", raw))
        return ("bytes", raw)
    return ("text", value if isinstance(value, str) else bytes(value).decode("utf-8"))


def read_mysql_rows(server: MySqlTestServer, database: str, table: str, columns: Sequence[MySqlColumn]) -> list[Row]:
    """Every row of the MySQL table in canonical form."""
    selects = ", ".join(column.select for column in columns)
    rows = server.execute(
        "SET time_zone = '+00:00'", f"SELECT {selects} FROM {quote_name(database)}.{quote_name(table)}"
    )
    return [tuple(canonical_mysql(c, v) for c, v in zip(columns, row, strict=True)) for row in rows]


# -- Iceberg values -------------------------------------------------------------------------------


def _unexpected(value: Any) -> Canonical:
    """An Iceberg value whose type does not fit the MySQL column's type: never equal to a MySQL value."""
    return ("unexpected " + type(value).__name__, value)


def _temporal_text(column: MySqlColumn, value: Any) -> str | None:
    if column.kind == "date":
        if type(value) is not dt.date:
            return None
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if not isinstance(value, dt.datetime):
        return None
    if column.kind == "timestamp":
        if value.tzinfo is None:
            return None
        value = value.astimezone(dt.timezone.utc)
    elif value.tzinfo is not None:
        return None
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    fraction = f"{value.microsecond:06d}"
    digits = column.digits if fraction[column.digits :].strip("0") == "" else 6  # more digits than MySQL has: shown
    return text + (f".{fraction[:digits]}" if digits else "")


def canonical_iceberg(column: MySqlColumn, value: Any, invalid_text: str | None) -> Canonical:
    """An Iceberg value of the column in canonical form; ``invalid_text`` is the column's entry in
    ``_cdc_invalid_values`` (None when absent)."""
    if value is None:
        if invalid_text is None:
            return None
        return ("temporal" if column.kind in _TEMPORAL_KINDS else "invalid text", invalid_text)
    kind = column.kind
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return ("int", value)
        if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
            return ("int", int(value))
        return _unexpected(value)
    if kind == "decimal":
        if isinstance(value, decimal.Decimal):
            return ("decimal", format(value, "f"))
        return ("decimal", value) if isinstance(value, str) else _unexpected(value)
    if kind in ("float", "double"):
        return (kind, repr(value)) if isinstance(value, float) else _unexpected(value)
    if kind == "bit1":
        return ("bit", int(value)) if isinstance(value, bool) else _unexpected(value)
    if kind in _TEMPORAL_KINDS:
        text = _temporal_text(column, value)
        return _unexpected(value) if text is None else ("temporal", text)
    if kind == "time":
        if isinstance(value, int) and not isinstance(value, bool):
            return ("time", value)
        if isinstance(value, dt.timedelta):
            return ("time", value // dt.timedelta(microseconds=1))
        return _unexpected(value)
    if kind == "vector":
        return ("vector", tuple(value)) if isinstance(value, list) else _unexpected(value)
    if kind in ("bits", "bytes", "geometry"):
        return ("bytes", bytes(value)) if isinstance(value, bytes | bytearray) else _unexpected(value)
    return ("text", value) if isinstance(value, str) else _unexpected(value)


def _find_column(names: Sequence[str], wanted: str) -> str | None:
    """The Iceberg column holding MySQL column ``wanted`` (MySQL names are case-insensitive)."""
    if wanted in names:
        return wanted
    matches = [name for name in names if name.lower() == wanted.lower()]
    return matches[0] if len(matches) == 1 else None


def _invalid_values(row: dict[str, Any]) -> dict[str, str]:
    found = row.get(INVALID_VALUES_COLUMN)
    if not found:
        return {}
    pairs = found.items() if isinstance(found, dict) else found
    return {str(k).lower(): str(v) for k, v in pairs}


def iceberg_rows(contents: IcebergContents, columns: Sequence[MySqlColumn]) -> tuple[list[Row], list[str]]:
    """The target's rows in canonical form over the MySQL columns it has, and the MySQL columns it lacks."""
    present: list[tuple[MySqlColumn, str]] = []
    missing: list[str] = []
    for column in columns:
        found = _find_column(contents.columns, column.name)
        if found is None:
            missing.append(column.name)
        else:
            present.append((column, found))
    rows = []
    for row in contents.rows:
        invalid = _invalid_values(row)
        rows.append(
            tuple(canonical_iceberg(column, row[name], invalid.get(column.name.lower())) for column, name in present)
        )
    return rows, missing


# -- the comparison -------------------------------------------------------------------------------


def _short(value: Canonical, limit: int = 60) -> str:
    if value is None:
        return "NULL"
    tag, inner = value
    if isinstance(inner, bytes) and len(inner) > 24:
        text = f"{inner[:12]!r}...({len(inner)} bytes)"
    else:
        text = repr(inner) if tag in ("text", "temporal", "decimal", "bytes", "invalid text") else str(inner)
        if len(text) > limit:
            text = f"{text[: limit - 20]}...({len(text)} chars)"
    plain = ("int", "text", "temporal", "decimal", "bytes", "float", "double", "time", "bit", RAW)
    return text if tag in plain else f"<{tag}: {text}>"


def format_row(row: Row) -> str:
    """A canonical row, compactly."""
    return "(" + ", ".join(_short(value) for value in row) + ")"


@dataclass(frozen=True)
class TableComparison:
    """MySQL's rows of one table against its Iceberg target's."""

    database: str
    table: str
    #: MySQL's column names (empty when the table does not exist in MySQL).
    columns: tuple[str, ...]
    #: Why the tables could not be compared row by row, or a table-level difference.
    problems: tuple[str, ...]
    only_mysql: tuple[tuple[Row, int], ...]
    only_iceberg: tuple[tuple[Row, int], ...]
    mysql_rows: int
    iceberg_rows: int

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def equal(self) -> bool:
        return not (self.problems or self.only_mysql or self.only_iceberg)

    def describe(self, limit: int = 12) -> str:
        """The differences, compactly: table-level problems, then the differing rows of both sides."""
        if self.equal:
            return f"{self.name}: equal ({self.mysql_rows} rows)"
        missing = sum(n for _, n in self.only_mysql)
        extra = sum(n for _, n in self.only_iceberg)
        lines = [
            f"{self.name}: {missing} row(s) only in MySQL, {extra} only in Iceberg "
            f"(MySQL {self.mysql_rows} rows, Iceberg {self.iceberg_rows}) over ({', '.join(self.columns)})"
        ]
        lines += [f"  ! {problem}" for problem in self.problems]
        for side, rows in (("MySQL  ", self.only_mysql), ("Iceberg", self.only_iceberg)):
            for row, count in rows[:limit]:
                lines.append(f"  {side} {format_row(row)}" + (f" x{count}" if count > 1 else ""))
            if len(rows) > limit:
                lines.append(f"  {side} ... {len(rows) - limit} more")
        return "\n".join(lines)


def _multiset_difference(left: list[Row], right: list[Row]) -> tuple[tuple[Row, int], ...]:
    remaining = Counter(left) - Counter(right)
    return tuple(sorted(remaining.items(), key=lambda item: repr(item[0])))


def _raw_rows(contents: IcebergContents, names: Sequence[str]) -> tuple[tuple[Row, int], ...]:
    """The target's rows over ``names`` as Python shows them, counted."""
    counted = Counter(tuple((RAW, repr(row[name])) for name in names) for row in contents.rows)
    return tuple(sorted(counted.items(), key=repr))


def compare_table(
    server: MySqlTestServer,
    warehouse: Path,
    database: str,
    table: str,
    reader: Callable[[str, str], IcebergContents | None] | None = None,
) -> TableComparison:
    """Compare ``database.table`` in MySQL with ``lake.database.table`` read by pyiceberg (from the local
    ``warehouse``, or by ``reader(database, table)``: a warehouse in an object store)."""
    columns = mysql_columns(server, database, table)
    contents = read_iceberg_table(warehouse, database, table) if reader is None else reader(database, table)
    problems: list[str] = []
    if columns is None:  # dropped in MySQL: the target must be gone or empty
        if contents is None or not contents.rows:
            return TableComparison(database, table, (), (), (), (), 0, 0)
        visible = tuple(c for c in contents.columns if not c.startswith("_cdc_"))
        return TableComparison(
            database,
            table,
            visible,
            ("the table does not exist in MySQL, but its Iceberg target has rows",),
            (),
            _raw_rows(contents, visible),
            0,
            len(contents.rows),
        )
    mysql = read_mysql_rows(server, database, table, columns)
    names = tuple(c.name for c in columns)
    if contents is None:
        problems.append(f"the Iceberg table lake.{database}.{table} does not exist")
        return TableComparison(
            database, table, names, tuple(problems), _multiset_difference(mysql, []), (), len(mysql), 0
        )
    iceberg, missing = iceberg_rows(contents, columns)
    if len(missing) == len(columns):  # nothing in common: the target's rows as they are
        visible = tuple(c for c in contents.columns if not c.startswith("_cdc_"))
        problems.append(f"no MySQL column is in Iceberg; the target has ({', '.join(visible)})")
        return TableComparison(
            database,
            table,
            names,
            tuple(problems),
            _multiset_difference(mysql, []),
            _raw_rows(contents, visible),
            len(mysql),
            len(contents.rows),
        )
    if missing:
        problems.append(f"MySQL column(s) missing in Iceberg: {', '.join(missing)} (compared without them)")
        kept = [i for i, c in enumerate(columns) if c.name not in missing]
        mysql = [tuple(row[i] for i in kept) for row in mysql]
        names = tuple(names[i] for i in kept)
    return TableComparison(
        database,
        table,
        names,
        tuple(problems),
        _multiset_difference(mysql, iceberg),
        _multiset_difference(iceberg, mysql),
        len(mysql),
        len(iceberg),
    )


def describe_differences(comparisons: Sequence[TableComparison]) -> str:
    """Every unequal table's differences, one block per table."""
    return "\n".join(c.describe() for c in comparisons if not c.equal)
