"""The type map, the staged schema, schema fingerprints and value conversion, without a server.

Expected JSON texts were printed by MySQL 9.7 (``CAST(... AS JSON)`` then ``CAST(j AS CHAR)``);
the integration test ``test_type_roundtrip`` checks the same code against a live server.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pytest

from airflow_provider_mysql_cdc.core.types import (
    CDC_COLUMN_NAMES,
    INVALID_VALUES_COLUMN,
    PARTIAL_COLUMN,
    ColumnSpec,
    arrow_schema,
    arrow_type,
    schema_fingerprint,
)
from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter, columns_only
from airflow_provider_mysql_cdc.decoding.binlog_values import read_date, read_datetime2, read_time2, read_timestamp2
from airflow_provider_mysql_cdc.decoding.json_text import json_binary_to_text, mysql_double_text, mysql_json_text
from airflow_provider_mysql_cdc.decoding.values import InvalidValue, decode_decimal
from airflow_provider_mysql_cdc.errors import TerminalCdcError

# -- arrow types ----------------------------------------------------------------------------------

ARROW_TYPES = [
    (ColumnSpec("c", "tinyint"), pa.int8()),
    (ColumnSpec("c", "tinyint", unsigned=True), pa.uint8()),
    (ColumnSpec("c", "smallint"), pa.int16()),
    (ColumnSpec("c", "smallint", unsigned=True), pa.uint16()),
    (ColumnSpec("c", "mediumint"), pa.int32()),
    (ColumnSpec("c", "mediumint", unsigned=True), pa.int32()),
    (ColumnSpec("c", "int"), pa.int32()),
    (ColumnSpec("c", "int", unsigned=True), pa.uint32()),
    (ColumnSpec("c", "bigint"), pa.int64()),
    (ColumnSpec("c", "bigint", unsigned=True), pa.uint64()),
    (ColumnSpec("c", "decimal", precision=10, scale=2), pa.decimal128(10, 2)),
    (ColumnSpec("c", "decimal", precision=38, scale=0), pa.decimal128(38, 0)),
    (ColumnSpec("c", "decimal", precision=39, scale=0), pa.string()),
    (ColumnSpec("c", "decimal", precision=65, scale=30), pa.string()),
    (ColumnSpec("c", "float"), pa.float32()),
    (ColumnSpec("c", "double"), pa.float64()),
    (ColumnSpec("c", "bit", bits=1), pa.bool_()),
    (ColumnSpec("c", "bit", bits=2), pa.binary()),
    (ColumnSpec("c", "bit", bits=64), pa.binary()),
    (ColumnSpec("c", "year"), pa.int16()),
    (ColumnSpec("c", "date"), pa.date32()),
    (ColumnSpec("c", "datetime", fsp=0), pa.timestamp("us")),
    (ColumnSpec("c", "datetime", fsp=6), pa.timestamp("us")),
    (ColumnSpec("c", "timestamp", fsp=3), pa.timestamp("us", tz="UTC")),
    (ColumnSpec("c", "time", fsp=1), pa.duration("us")),
    (ColumnSpec("c", "char", charset="latin1", max_length=10), pa.string()),
    (ColumnSpec("c", "varchar", charset="utf8mb4", max_length=400), pa.string()),
    (ColumnSpec("c", "tinytext", charset="utf8mb4"), pa.string()),
    (ColumnSpec("c", "longtext", charset="utf8mb4"), pa.string()),
    (ColumnSpec("c", "binary", charset="binary", max_length=16), pa.binary()),
    (ColumnSpec("c", "varbinary", charset="binary", max_length=16), pa.binary()),
    (ColumnSpec("c", "longblob", charset="binary"), pa.binary()),
    (ColumnSpec("c", "enum", charset="utf8mb4", enum_values=("a", "b")), pa.string()),
    (ColumnSpec("c", "set", charset="utf8mb4", set_values=("a", "b")), pa.string()),
    (ColumnSpec("c", "json"), pa.string()),
    (ColumnSpec("c", "geometry"), pa.binary()),
    (ColumnSpec("c", "vector", dimensions=3), pa.list_(pa.float32())),
]


@pytest.mark.parametrize(("spec", "expected"), ARROW_TYPES, ids=[spec.sql_type for spec, _ in ARROW_TYPES])
def test_arrow_type_of_every_mysql_type(spec: ColumnSpec, expected: pa.DataType) -> None:
    assert arrow_type(spec) == expected


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="unknown MySQL type"):
        ColumnSpec("c", "nvarchar2")
    with pytest.raises(ValueError, match="precision and scale"):
        ColumnSpec("c", "decimal")
    with pytest.raises(ValueError, match="number of bits"):
        ColumnSpec("c", "bit")


def test_sql_type_and_describe() -> None:
    assert ColumnSpec("c", "decimal", precision=65, scale=30).sql_type == "decimal(65,30)"
    assert ColumnSpec("c", "bigint", unsigned=True).sql_type == "bigint unsigned"
    assert ColumnSpec("c", "varchar", charset="latin1", max_length=80).sql_type == "varchar(80 bytes) latin1"
    assert ColumnSpec("c", "enum", charset="utf8mb4", enum_values=("a", "b")).sql_type == "enum(2 values) utf8mb4"
    described = ColumnSpec("id", "int", primary_key=True, nullable=False).describe()
    assert described == {
        "name": "id",
        "mysql_type": "int",
        "arrow_type": "int32",
        "nullable": False,
        "primary_key": True,
    }
    json.dumps(described)


# -- schema and fingerprint -----------------------------------------------------------------------

SPECS = (
    ColumnSpec("id", "bigint", unsigned=True, primary_key=True, nullable=False),
    ColumnSpec("name", "varchar", charset="utf8mb4", max_length=400),
    ColumnSpec("state", "enum", charset="utf8mb4", enum_values=("new", "done")),
    ColumnSpec("created", "datetime", fsp=6),
)


def test_schema_has_table_columns_then_cdc_columns() -> None:
    schema = arrow_schema(SPECS)
    assert schema.names == ["id", "name", "state", "created", *CDC_COLUMN_NAMES]
    assert CDC_COLUMN_NAMES == (
        INVALID_VALUES_COLUMN,
        PARTIAL_COLUMN,
        "_cdc_op",
        "_cdc_gtid",
        "_cdc_seq",
        "_cdc_commit_ts",
    )
    assert schema.field("_cdc_op").type == pa.string() and not schema.field("_cdc_op").nullable
    assert schema.field("_cdc_seq").type == pa.int64() and not schema.field("_cdc_seq").nullable
    assert schema.field("_cdc_commit_ts").type == pa.timestamp("us", tz="UTC")
    assert schema.field(INVALID_VALUES_COLUMN).type == pa.map_(pa.string(), pa.string())
    assert schema.field(PARTIAL_COLUMN).type == pa.map_(pa.string(), pa.string())
    assert all(schema.field(spec.name).nullable for spec in SPECS)


def test_schema_rejects_colliding_names() -> None:
    with pytest.raises(ValueError, match="collides"):
        arrow_schema([ColumnSpec("_cdc_op", "int")])
    with pytest.raises(ValueError, match="twice"):
        arrow_schema([ColumnSpec("a", "int"), ColumnSpec("A", "int")])


def test_column_names_with_the_reserved_prefixes_are_refused_by_name_in_any_case() -> None:
    from airflow_provider_mysql_cdc.core.types import require_unreserved_column_names
    from airflow_provider_mysql_cdc.errors import UnsupportedNameError

    require_unreserved_column_names("shop.t", [ColumnSpec("cdc_op", "int"), ColumnSpec("x_cdc_", "int")])
    for name in ("_cdc_note", "_CDC_OP", "__cdc_rank", "__Cdc_"):
        with pytest.raises(UnsupportedNameError, match=rf"^shop\.t: the column name\(s\) \['{name}'\]"):
            require_unreserved_column_names("shop.t", [ColumnSpec("id", "int"), ColumnSpec(name, "int")])


def test_iceberg_metadata_column_names_are_refused_by_name_in_any_case() -> None:
    from airflow_provider_mysql_cdc.core.types import require_unreserved_column_names
    from airflow_provider_mysql_cdc.errors import UnsupportedNameError

    key = ColumnSpec("id", "int", primary_key=True)
    require_unreserved_column_names(
        "shop.t", [ColumnSpec(n, "int") for n in ("file", "_files", "pos_", "_change_type")]
    )
    require_unreserved_column_names("shop.t", [key, *(ColumnSpec(n, "int") for n in ("_deleted", "_ROW_ID"))])
    for name in ("_file", "_POS", "_Spec_Id", "_partition"):
        for specs in ([key, ColumnSpec(name, "int")], [ColumnSpec("id", "int"), ColumnSpec(name, "int")]):
            with pytest.raises(UnsupportedNameError, match=rf"^shop\.t: the column name\(s\) \['{name}'\] are names"):
                require_unreserved_column_names("shop.t", specs)
    for name in ("_deleted", "_Row_Id", "_last_updated_sequence_number"):  # only without a key
        with pytest.raises(UnsupportedNameError, match=r"in a table without a key"):
            require_unreserved_column_names("shop.t", [ColumnSpec("id", "int"), ColumnSpec(name, "int")])


def test_fingerprint_is_stable() -> None:
    # A constant: the fingerprint names staging directories and schema history rows across runs.
    assert schema_fingerprint(SPECS) == schema_fingerprint(list(SPECS))
    assert len(schema_fingerprint(SPECS)) == 16
    assert schema_fingerprint(SPECS) == "48b3877486d3dd6b"
    assert schema_fingerprint(SPECS, (1, 2, 3, 4)) != schema_fingerprint(SPECS, (1, 3, 2, 4))  # identities count


def test_fingerprint_follows_names_order_and_types_only() -> None:
    base = schema_fingerprint(SPECS)
    same_arrow = (
        SPECS[0],
        ColumnSpec("name", "varchar", charset="latin1", max_length=20, nullable=False),
        ColumnSpec("state", "enum", charset="utf8mb4", enum_values=("new", "done", "archived")),
        ColumnSpec("created", "datetime", fsp=3),
    )
    assert schema_fingerprint(same_arrow) == base
    assert schema_fingerprint((*SPECS, ColumnSpec("extra", "int"))) != base
    assert schema_fingerprint((SPECS[1], SPECS[0], *SPECS[2:])) != base
    assert schema_fingerprint((ColumnSpec("id", "bigint"), *SPECS[1:])) != base
    assert schema_fingerprint((ColumnSpec("ID", "bigint", unsigned=True), *SPECS[1:])) != base


# -- JSON text ------------------------------------------------------------------------------------

DOUBLES = [
    (1e300, "1e300"),
    (-1.5e-20, "-1.5e-20"),
    (0.1, "0.1"),
    (100.0, "100.0"),
    (1e16, "1e16"),
    (1e15, "1e15"),
    (123456789012345678.0, "1.2345678901234568e17"),
    (1234567890123456.7, "1234567890123456.8"),
    (3.0, "3.0"),
    (-0.0, "-0.0"),
    (1.7976931348623157e308, "1.7976931348623157e308"),
    (5e-324, "5e-324"),
    (1e-14, "0.00000000000001"),
    (1.5e-15, "0.0000000000000015"),
    (1e-15, "0.000000000000001"),
    (1e-16, "1e-16"),
    (1.5e-16, "1.5e-16"),
    (0.000123, "0.000123"),
    (-2.5, "-2.5"),
]


@pytest.mark.parametrize(("value", "text"), DOUBLES, ids=[text for _, text in DOUBLES])
def test_doubles_as_mysql_prints_them(value: float, text: str) -> None:
    assert mysql_double_text(value) == text


def test_json_text_of_python_values() -> None:
    # As the library decodes JSON: bytes keys and strings, keys already in MySQL's order.
    library_value = {b"a": [1.5, 2, b'x"y'], b"b": 1, b"big": 18446744073709551615}
    assert mysql_json_text(library_value) == '{"a": [1.5, 2, "x\\"y"], "b": 1, "big": 18446744073709551615}'
    # Hand-written: keys are put in MySQL's order (shorter first, then bytewise).
    assert (
        mysql_json_text({"zz": None, "é": True, "b": False, "a": {}}) == '{"a": {}, "b": false, "zz": null, "é": true}'
    )
    assert mysql_json_text([[], [[1]], "", -9223372036854775808]) == '[[], [[1]], "", -9223372036854775808]'
    escaped = mysql_json_text('q" b\\ \t\n\r\b\f \x01\x1f \x7f 😀 é /')
    assert escaped == '"q\\" b\\\\ \\t\\n\\r\\b\\f \\u0001\\u001f \x7f 😀 é /"'
    assert mysql_json_text(Decimal("-12.500")) == "-12.500"
    assert mysql_json_text(dt.date(2024, 1, 15)) == '"2024-01-15"'
    assert mysql_json_text(dt.datetime(2024, 1, 15, 10, 11, 12)) == '"2024-01-15 10:11:12.000000"'
    assert mysql_json_text(-dt.timedelta(hours=838, minutes=59, seconds=59)) == '"-838:59:59.000000"'
    assert mysql_json_text(dt.time(12, 0, 0, 250000)) == '"12:00:00.250000"'
    with pytest.raises(TypeError):
        mysql_json_text(object())


def _packed_datetime(year: int, month: int, day: int, *, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    ymd = ((year * 13 + month) << 5) | day
    return ((ymd << 17) | (hour << 12) | (minute << 6) | second) << 24


def _opaque(field_type: int, payload: bytes) -> bytes:
    return bytes([15, field_type, len(payload)]) + payload


def test_binary_json_to_text() -> None:
    assert json_binary_to_text(b"") == "null"
    assert json_binary_to_text(bytes([4, 1])) == "true"
    assert json_binary_to_text(bytes([5]) + struct.pack("<h", -5)) == "-5"
    assert json_binary_to_text(bytes([10]) + struct.pack("<Q", 2**64 - 1)) == "18446744073709551615"
    assert json_binary_to_text(bytes([11]) + struct.pack("<d", 100.0)) == "100.0"
    assert json_binary_to_text(bytes([12, 3]) + b'a"b') == '"a\\"b"'
    # [1, "x"]: small array, int16 inlined, string at offset 10
    array = bytes([2]) + struct.pack("<HH", 2, 12) + bytes([5]) + struct.pack("<h", 1) + bytes([12])
    assert json_binary_to_text(array + struct.pack("<H", 10) + bytes([1]) + b"x") == '[1, "x"]'
    # {"a": null}: small object, key entry (offset 11, length 1), literal inlined
    obj = bytes([0]) + struct.pack("<HH", 1, 12) + struct.pack("<HH", 11, 1) + bytes([4]) + struct.pack("<H", 0)
    assert json_binary_to_text(obj + b"a") == '{"a": null}'
    # opaque values: DATE, DATETIME, TIME (negative, > 24h), DECIMAL, other types as base64
    date = struct.pack("<q", _packed_datetime(2024, 1, 15))
    assert json_binary_to_text(_opaque(10, date)) == '"2024-01-15"'
    datetime_ = struct.pack("<q", _packed_datetime(2024, 1, 15, hour=10, minute=11, second=12) + 500000)
    assert json_binary_to_text(_opaque(12, datetime_)) == '"2024-01-15 10:11:12.500000"'
    time_ = struct.pack("<q", -((((838 << 12) | (59 << 6) | 59) << 24) + 500000))
    assert json_binary_to_text(_opaque(11, time_)) == '"-838:59:59.500000"'
    decimal = bytes([14, 4]) + bytes.fromhex("810DFB38D204D2")
    assert json_binary_to_text(_opaque(246, decimal)) == "1234567890.1234"
    assert json_binary_to_text(_opaque(252, b"\x00\xff")) == '"base64:type252:AP8="'
    long_blob = json_binary_to_text(bytes([15, 15, 100]) + bytes(100))
    assert long_blob == '"base64:type15:' + "A" * 76 + "\\n" + "A" * 58 + "=" * 2 + '"'


def test_decimal_from_mysql_binary() -> None:
    # The examples of MySQL's strings/decimal.cc (decimal2bin).
    assert decode_decimal(bytes.fromhex("810DFB38D204D2"), 14, 4) == Decimal("1234567890.1234")
    assert decode_decimal(bytes.fromhex("7EF204C72DFB2D"), 14, 4) == Decimal("-1234567890.1234")
    assert str(decode_decimal(bytes.fromhex("8000"), 4, 2)) == "0.00"


# -- reading values and converting rows -----------------------------------------------------------


class FakePacket:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int) -> bytes:
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk


def _read(reader: Any, hex_bytes: str, **column: Any) -> Any:
    packet = FakePacket(bytes.fromhex(hex_bytes))
    value = reader(packet, SimpleNamespace(**column))
    assert packet.data == b"", "every byte consumed"
    return value


def test_temporal_readers() -> None:
    # -00:00:01.5 as TIME(1): int part -2, reversed fraction 0xCE (the library reads -00:00:02.5 + ...)
    assert _read(read_time2, "7FFFFECE", fsp=1) == -dt.timedelta(seconds=1.5)
    assert _read(read_time2, "800000", fsp=0) == dt.timedelta(0)
    assert _read(read_time2, "B46EFB", fsp=0) == dt.timedelta(hours=838, minutes=59, seconds=59)
    assert _read(read_date, "000000") == InvalidValue("0000-00-00")
    assert _read(read_date, (((2024 << 9) | 15).to_bytes(3, "little")).hex()) == InvalidValue("2024-00-15")
    zero_datetime = _read(read_datetime2, "8000000000" + "0000", fsp=3)
    assert type(zero_datetime) is InvalidValue and zero_datetime == "0000-00-00 00:00:00.000"
    zero_timestamp = _read(read_timestamp2, "00000000" + "000000", fsp=6)
    assert zero_timestamp == InvalidValue("0000-00-00 00:00:00.000000")
    assert _read(read_timestamp2, "00000001", fsp=0) == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)


def test_row_converter() -> None:
    specs = (
        ColumnSpec("id", "int"),
        ColumnSpec("name", "varchar", charset="utf8mb4", max_length=40),
        ColumnSpec("l1", "char", charset="latin1", max_length=8),
        ColumnSpec("bin", "binary", charset="binary", max_length=4),
        ColumnSpec("state", "enum", charset="utf8mb4", enum_values=("new", "done")),
        ColumnSpec("tags", "set", charset="utf8mb4", set_values=("a", "b", "c")),
        ColumnSpec("flag", "bit", bits=1),
        ColumnSpec("mask", "bit", bits=12),
        ColumnSpec("doc", "json"),
        ColumnSpec("shape", "geometry"),
        ColumnSpec("emb", "vector", dimensions=2),
        ColumnSpec("day", "date"),
    )
    converter = RowConverter(specs)
    point = struct.pack("<I", 4326) + bytes.fromhex("0101000000000000000000F03F0000000000000040")
    values = {
        "id": 1,
        "name": "😀 é".encode(),
        "l1": bytes([0x81, 0xE9, 0x80]),
        "bin": b"a",
        "state": 2,
        "tags": 0b101,
        "flag": b"\x01",
        "mask": b"\x0f\xff",
        "doc": '{"a": 1}',
        "shape": point,
        "emb": struct.pack("<2f", 1.5, -2.0),
        "day": InvalidValue("0000-00-00"),
    }
    row = converter.convert(values)
    assert row == (
        1,
        "😀 é",
        "\x81é€",
        b"a\x00\x00\x00",
        "done",
        "a,c",
        True,
        b"\x0f\xff",
        '{"a": 1}',
        point[4:],
        [1.5, -2.0],
        None,
        {"day": "0000-00-00"},
    )
    empty = converter.convert({**dict.fromkeys(values), "state": 0, "tags": 0, "doc": [1, {b"k": None}]})
    assert empty[4:6] == ("", "")
    assert empty[8] == '[1, {"k": null}]'
    assert empty[-1] is None
    schema = arrow_schema(specs)
    table = pa.Table.from_pylist([dict(zip(schema.names, (*row, None, "c", "gtid", 1, None), strict=True))], schema)
    assert table.column(INVALID_VALUES_COLUMN).to_pylist() == [[("day", "0000-00-00")]]
    with pytest.raises(TerminalCdcError, match="columns"):
        converter.convert({"id": 1})
    with pytest.raises(TerminalCdcError, match=r"'name'.*decoded_rows"):
        converter.convert({**values, "name": "text as the library decodes it"})


def test_the_spare_bits_of_a_columns_present_bitmap_are_not_columns() -> None:
    # A multi-table UPDATE's before image under NOBLOB (MySQL 9.7.4, 9 columns, 2 of them BLOB/TEXT):
    # the bits past column 9 are set, the same statement on one table leaves them clear.
    assert columns_only(bytes.fromhex("dbff"), 9) == bytes.fromhex("db01")
    assert columns_only(bytes.fromhex("db01"), 9) == bytes.fromhex("db01")
    assert columns_only(bytes.fromhex("ffff"), 16) == bytes.fromhex("ffff")  # no spare bits
    assert columns_only(bytes.fromhex("ff") * 48 + b"\xff", 385)[-1] == 0x01
