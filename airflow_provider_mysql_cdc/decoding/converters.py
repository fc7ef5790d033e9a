"""The per-column converter: a column's stored value (as the binlog carries it) -> the staged value.

:func:`value_converter` gives, for one :class:`~airflow_provider_mysql_cdc.core.types.ColumnSpec`,
the function that turns a non-NULL value read from a row image (bytes of text in the column's
character set, an ENUM index, a SET bitmask, BIT bytes, binary JSON already as text, geometry as
SRID + WKB, VECTOR bytes) into what is staged under
:func:`~airflow_provider_mysql_cdc.core.types.arrow_schema`, or None when the value is staged as
it is. Every binlog path uses it (:class:`~airflow_provider_mysql_cdc.decoding.binlog_rows.RowConverter`,
the compiled decoders), and the text-protocol path for the types it fetches as the stored bytes
(BIT, geometry, VECTOR).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pymysqlreplication.json_binary import JsonDiff

from airflow_provider_mysql_cdc.core.types import (
    BINARY_TYPES,
    DECIMAL128_MAX_PRECISION,
    INTEGER_TYPES,
    TEXT_TYPES,
    ColumnSpec,
)
from airflow_provider_mysql_cdc.decoding.charsets import text_decoder
from airflow_provider_mysql_cdc.decoding.json_text import mysql_json_text
from airflow_provider_mysql_cdc.errors import TerminalCdcError, UnmappableTextError

__all__ = ["value_converter"]


def _set_converter(members: tuple[str, ...]) -> Callable[[int], str]:
    bits = tuple((1 << index, member) for index, member in enumerate(members))
    return lambda mask: ",".join([member for bit, member in bits if mask & bit])


def _json_converter(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, JsonDiff):
        raise TerminalCdcError("partial JSON updates are not supported: set binlog_row_value_options = ''")
    return mysql_json_text(value)


def _decimal_text(value: Decimal) -> str:
    """A DECIMAL wider than 38 digits as MySQL prints it: plain notation, every scale digit."""
    return format(value, "f")


def _vector_converter(value: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(value) // 4}f", value))


def _enum_key_converter(spec: ColumnSpec) -> Callable[[int], str]:
    """An ENUM key column with an empty label: its error value (index 0, what MySQL stores for an
    invalid value outside strict mode) and that label are two keys MySQL keeps apart, and both read as
    ``''``: either one raises :class:`UnmappableTextError` (the table waits for a snapshot, which reads
    both rows)."""
    labels = ("", *spec.enum_values)
    ambiguous = {0, labels.index("", 1)}

    def convert(index: int) -> str:
        if index in ambiguous:
            raise UnmappableTextError(
                f"{spec.name}: a key value is {'the ENUM error value' if index == 0 else 'the empty ENUM label'} "
                "(index 0 is what MySQL stores for an invalid value): the error value and the label '' both "
                f"read as '', so two keys MySQL keeps apart would be one in the target. Give the label another "
                f"text, or correct the rows holding the error value ({spec.name} + 0 = 0), or leave the table "
                "out of the pipeline"
            )
        return labels[index]

    return convert


#: Types whose decoded values are staged as they are (besides integers and binary strings).
_AS_IS_TYPES = frozenset({"decimal", "float", "double", "bit", "year", "date", "datetime", "timestamp", "time"})


def value_converter(spec: ColumnSpec) -> Callable[[Any], Any] | None:
    """The function that turns a decoded value (never None) into the staged value; None: as is."""
    kind = spec.mysql_type
    if kind in TEXT_TYPES:
        return text_decoder(spec.charset or "utf8mb4", spec.name, key=spec.primary_key)
    if kind == "binary" and spec.max_length:
        length = spec.max_length
        return lambda value: value.ljust(length, b"\0")  # the binlog strips BINARY's trailing 0x00
    if kind == "enum":
        if spec.primary_key and "" in spec.enum_values:
            return _enum_key_converter(spec)
        return ("", *spec.enum_values).__getitem__
    if kind == "set":
        return _set_converter(spec.set_values)
    if kind == "bit" and spec.bits == 1:
        return lambda value: value != b"\0"
    if kind == "json":
        return _json_converter
    if kind == "geometry":
        return lambda value: value[4:]  # MySQL's value is a 4-byte SRID, then WKB
    if kind == "vector":
        return _vector_converter
    if kind == "decimal" and (spec.precision or 0) > DECIMAL128_MAX_PRECISION:
        return _decimal_text
    assert kind in INTEGER_TYPES or kind in BINARY_TYPES or kind in _AS_IS_TYPES, kind
    return None
