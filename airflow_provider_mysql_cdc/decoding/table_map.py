"""A binlog table map -> the :class:`~airflow_provider_mysql_cdc.core.types.ColumnSpec` of every column.

:func:`column_specs_from_table_map` reads what ``binlog_row_metadata=FULL`` puts in the table map
(names, signedness, character sets, ENUM/SET labels, primary key) plus what the library fixes add
(nullability from the null bitmap, prefix primary keys, VECTOR dimensions, labels kept as bytes):
the table map must have been parsed with them installed
(:func:`~airflow_provider_mysql_cdc.decoding.library_fixes.install_table_map_fixes`, part of
:func:`~airflow_provider_mysql_cdc.capture.binlog_library.install_library_fixes`).
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import TableMapEvent

from airflow_provider_mysql_cdc.core.types import ColumnSpec
from airflow_provider_mysql_cdc.decoding.binlog_values import VECTOR_TYPE
from airflow_provider_mysql_cdc.decoding.charsets import charset_of_collation, text_decoder
from airflow_provider_mysql_cdc.errors import TerminalCdcError

__all__ = ["column_specs_from_table_map"]

_INTEGER_NAMES = {
    FIELD_TYPE.TINY: "tinyint",
    FIELD_TYPE.SHORT: "smallint",
    FIELD_TYPE.INT24: "mediumint",
    FIELD_TYPE.LONG: "int",
    FIELD_TYPE.LONGLONG: "bigint",
}
_SIMPLE_NAMES = {
    FIELD_TYPE.FLOAT: "float",
    FIELD_TYPE.DOUBLE: "double",
    FIELD_TYPE.YEAR: "year",
    FIELD_TYPE.DATE: "date",
    FIELD_TYPE.JSON: "json",
    FIELD_TYPE.GEOMETRY: "geometry",
}
_FSP_NAMES = {
    FIELD_TYPE.DATETIME2: "datetime",
    FIELD_TYPE.DATETIME: "datetime",
    FIELD_TYPE.TIMESTAMP2: "timestamp",
    FIELD_TYPE.TIMESTAMP: "timestamp",
    FIELD_TYPE.TIME2: "time",
    FIELD_TYPE.TIME: "time",
}
_BLOB_PREFIXES = {1: "tiny", 2: "", 3: "medium", 4: "long"}


def _column_spec(column: Any, where: str) -> ColumnSpec:
    type_ = column.type
    common: dict[str, Any] = {
        "name": column.name,
        "nullable": getattr(column, "nullable", None),
        "primary_key": bool(column.is_primary),
    }
    if type_ in _INTEGER_NAMES:
        return ColumnSpec(mysql_type=_INTEGER_NAMES[type_], unsigned=bool(column.unsigned), **common)
    if type_ in _SIMPLE_NAMES:
        return ColumnSpec(mysql_type=_SIMPLE_NAMES[type_], **common)
    if type_ in _FSP_NAMES:
        return ColumnSpec(mysql_type=_FSP_NAMES[type_], fsp=int(getattr(column, "fsp", 0)), **common)
    if type_ == FIELD_TYPE.NEWDECIMAL:
        return ColumnSpec(mysql_type="decimal", precision=column.precision, scale=column.decimals, **common)
    if type_ == FIELD_TYPE.BIT:
        return ColumnSpec(mysql_type="bit", bits=column.bits, **common)
    if type_ == VECTOR_TYPE:
        return ColumnSpec(mysql_type="vector", dimensions=getattr(column, "dimensions", None), **common)
    charset = charset_of_collation(column.collation_name)
    binary = charset == "binary"
    if type_ in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        decode = text_decoder(charset, where)
        raw = (column.enum_values or [""])[1:] if type_ == FIELD_TYPE.ENUM else column.set_values or []
        labels = tuple(decode(label.encode("utf-8", "surrogateescape")) for label in raw)
        if type_ == FIELD_TYPE.ENUM:
            return ColumnSpec(mysql_type="enum", charset=charset, enum_values=labels, **common)
        return ColumnSpec(mysql_type="set", charset=charset, set_values=labels, **common)
    if type_ in (FIELD_TYPE.STRING, FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING):
        name = ("" if type_ == FIELD_TYPE.STRING else "var") + ("binary" if binary else "char")
        spec = ColumnSpec(mysql_type=name, charset=charset, max_length=column.max_length, **common)
    elif type_ == FIELD_TYPE.BLOB:
        name = _BLOB_PREFIXES[column.length_size] + ("blob" if binary else "text")
        spec = ColumnSpec(mysql_type=name, charset=charset, **common)
    else:
        raise TerminalCdcError(f"{where}: MySQL column type {type_} is not supported")
    if not binary:
        text_decoder(charset, where)  # fail now, not on the first row
    return spec


def column_specs_from_table_map(event: Any) -> tuple[ColumnSpec, ...]:
    """The specs of a table's columns, in table order, from a ``TableMapEvent`` or a row event."""
    table = event.get_table() if isinstance(event, TableMapEvent) else event.table_map[event.table_id]
    where = f"{table.schema}.{table.table}"
    columns = table.columns
    if any(not column.name or str(column.name).startswith("UNKNOWN_COL") for column in columns):
        raise TerminalCdcError(f"{where}: the binlog has no column names; set binlog_row_metadata = FULL")
    if any(not hasattr(column, "nullable") for column in columns):
        raise TerminalCdcError(
            f"{where}: the table map was parsed without the library fixes; call install_library_fixes() "
            "(capture.binlog_library; BinlogReader.open() does) before the stream starts"
        )
    return tuple(_column_spec(column, f"{where}.{column.name}") for column in columns)
