"""The comparison's normalization, value by value (pure: no server)."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pytest

from tests.exactness.comparison import MySqlColumn, canonical_iceberg, canonical_mysql, column_kind, format_row


def column(data_type: str, column_type: str, digits: int = 0) -> MySqlColumn:
    return MySqlColumn("c", column_type, column_kind(data_type, column_type), digits)


def same(col: MySqlColumn, mysql_value: object, iceberg_value: object, invalid: str | None = None) -> bool:
    return canonical_mysql(col, mysql_value) == canonical_iceberg(col, iceberg_value, invalid)


@pytest.mark.parametrize(
    ("col", "mysql_value", "iceberg_value"),
    [
        (column("bigint", "bigint unsigned"), 18446744073709551615, decimal.Decimal("18446744073709551615")),
        (column("tinyint", "tinyint(1)"), 1, 1),
        (column("year", "year"), 0, 0),
        (column("decimal", "decimal(10,2)", 2), "-0.50", decimal.Decimal("-0.50")),
        (column("decimal", "decimal(5,5)", 5), "0.00000", decimal.Decimal("0E-5")),
        (
            column("decimal", "decimal(65,30)", 30),
            "1.500000000000000000000000000000",
            "1.500000000000000000000000000000",
        ),
        (column("float", "float"), 0.10000000149011612, struct.unpack("f", struct.pack("f", 0.1))[0]),
        (column("double", "double"), -0.0, -0.0),
        (column("bit", "bit(1)"), 1, True),
        (column("bit", "bit(10)"), "0155", b"\x01\x55"),
        (column("binary", "binary(4)"), "61000000", b"a\x00\x00\x00"),
        (column("date", "date"), "0999-01-02", dt.date(999, 1, 2)),
        (column("datetime", "datetime(3)", 3), "2024-01-02 03:04:05.120", dt.datetime(2024, 1, 2, 3, 4, 5, 120000)),
        (column("datetime", "datetime", 0), "2024-01-02 03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5)),
        (
            column("timestamp", "timestamp(6)", 6),
            "2038-01-19 03:14:07.999999",
            dt.datetime(2038, 1, 19, 4, 14, 7, 999999, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        ),
        (column("time", "time(6)", 6), "-838:59:59.000000", -(838 * 3600 + 59 * 60 + 59) * 1_000_000),
        (column("time", "time(1)", 1), "-00:00:00.5", -500_000),
        (column("set", "set('x','y')"), "x,y", "x,y"),
        (column("json", "json"), '{"a": 1}', '{"a": 1}'),
        (column("point", "point"), "E6100000" + "0101000000" + "00" * 16, bytes.fromhex("0101000000" + "00" * 16)),
        (column("vector", "vector(2)"), struct.pack("<2f", 1.5, -2.0).hex(), [1.5, -2.0]),
    ],
)
def test_equal_values_are_equal(col: MySqlColumn, mysql_value: object, iceberg_value: object) -> None:
    assert same(col, mysql_value, iceberg_value)


@pytest.mark.parametrize(
    ("col", "mysql_value", "iceberg_value"),
    [
        (column("double", "double"), -0.0, 0.0),  # a key of -0.0 written back as 0.0 is a difference
        (column("float", "float"), 0.10000000149011612, 0.1),  # the double 0.1 is not the stored float
        (column("decimal", "decimal(6,1)", 1), "123.5", decimal.Decimal("123.45")),  # another scale
        (column("int", "int"), 7, "7"),  # a column left as text after MODIFY ... INT
        (column("int", "int"), 1, True),
        (column("binary", "binary(4)"), "61000000", b"a"),  # padding lost
        (column("datetime", "datetime", 0), "2024-01-02 03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5, 1)),
        (column("datetime", "datetime(6)", 6), "2024-01-02 03:04:05.000000", dt.date(2024, 1, 2)),
        (column("timestamp", "timestamp", 0), "2024-01-02 03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5)),
        (column("varchar", "varchar(5)"), "a", "a "),
        (column("json", "json"), '{"a": 1}', '{"a":1}'),
    ],
)
def test_different_values_differ(col: MySqlColumn, mysql_value: object, iceberg_value: object) -> None:
    assert not same(col, mysql_value, iceberg_value)


def test_an_invalid_date_is_null_plus_its_text() -> None:
    date = column("date", "date")
    assert same(date, "0000-00-00", None, "0000-00-00")
    assert not same(date, "0000-00-00", None)  # a NULL without its text is a real NULL
    assert same(date, None, None)
    datetime3 = column("datetime", "datetime(3)", 3)
    assert same(datetime3, "2024-02-00 10:11:12.123", None, "2024-02-00 10:11:12.123")
    assert not same(datetime3, "2024-02-00 10:11:12.123", None, "2024-02-00 10:11:12")
    assert not same(column("int", "int"), 0, None, "0")  # only temporal columns keep text


def test_rows_are_shown_compactly() -> None:
    row = (("int", 1), ("text", "x" * 100), None, ("bytes", b"\x00" * 64), ("unexpected str", "007"))
    shown = format_row(row)
    assert shown.startswith("(1, 'xxxx") and "...(102 chars)" in shown and "NULL" in shown
    assert "...(64 bytes)" in shown and "<unexpected str: 007>" in shown
