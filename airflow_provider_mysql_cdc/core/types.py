"""The MySQL -> Arrow type map of the staged Parquet files, and the ``_cdc_*`` columns.

One :class:`ColumnSpec` describes one source column as the binlog's table map (with
``binlog_row_metadata=FULL``) describes it; :func:`arrow_type` maps it to the Arrow type its values
are staged as; :func:`arrow_schema` is a staged file's schema (the table's columns in table order,
then :data:`CDC_COLUMNS`); :func:`schema_fingerprint` names a schema version. The map, with the
Spark/Iceberg types the columns land as, is documented in docs/type-map.md "Type map".

Staged values are lossless where Arrow can hold them. Where MySQL stores a value that has no Arrow
counterpart (zero and partial dates such as ``0000-00-00`` or ``2024-00-15``), the typed column is
NULL and the value's text, as ``CAST(col AS CHAR)`` prints it, is kept in the row's
``_cdc_invalid_values`` map under the column name. A NULL typed value whose column is absent from
that map is a real SQL NULL.

This module is pure: no Airflow, Spark, network or python-mysql-replication import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_mysql_cdc.errors import UnsupportedNameError

#: Integer types: MySQL name -> (signed Arrow type, unsigned Arrow type).
INTEGER_TYPES: dict[str, tuple[pa.DataType, pa.DataType]] = {
    "tinyint": (pa.int8(), pa.uint8()),
    "smallint": (pa.int16(), pa.uint16()),
    # MEDIUMINT UNSIGNED (< 2**24) fits int32; Spark reads int32 as INT, uint32 as BIGINT.
    "mediumint": (pa.int32(), pa.int32()),
    "int": (pa.int32(), pa.uint32()),
    "bigint": (pa.int64(), pa.uint64()),
}
#: Character types (staged as text decoded from the column's character set).
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
#: Binary string types (staged as the bytes SELECT returns).
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
#: Temporal types with fractional seconds.
FSP_TYPES = frozenset({"datetime", "timestamp", "time"})
#: Largest DECIMAL precision that fits Arrow's decimal128, Spark's DecimalType and Iceberg's decimal.
#: Wider DECIMALs are staged as their exact text (what ``CAST(col AS CHAR)`` prints).
DECIMAL128_MAX_PRECISION = 38

_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "float": pa.float32(),
    "double": pa.float64(),
    "year": pa.int16(),
    "date": pa.date32(),
    "datetime": pa.timestamp("us"),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "time": pa.duration("us"),
    "enum": pa.string(),
    "set": pa.string(),
    "json": pa.string(),
    "geometry": pa.binary(),
    "vector": pa.list_(pa.float32()),
    **dict.fromkeys(TEXT_TYPES, pa.string()),
    **dict.fromkeys(BINARY_TYPES, pa.binary()),
}

#: Every MySQL type name a :class:`ColumnSpec` may carry.
MYSQL_TYPES = frozenset({*INTEGER_TYPES, *_SIMPLE_TYPES, "decimal", "bit"})

#: Name of the per-row map ``column name -> original text`` of values the typed column cannot hold.
INVALID_VALUES_COLUMN = "_cdc_invalid_values"
#: Name of the per-row map of a partial row image (``binlog_row_image`` MINIMAL or NOBLOB, partial JSON):
#: ``column name -> ""`` for a column the image lacks (its previous value stays), or the JSON diffs to
#: apply to the previous value (``decoding.json_diff.diffs_to_text``); NULL for a complete image.
PARTIAL_COLUMN = "_cdc_partial"

#: The columns every staged row carries after the table's own columns, in this order.
#: ``_cdc_invalid_values`` comes first: the row converter returns the table's values followed by it.
CDC_COLUMNS: tuple[pa.Field, ...] = (
    # NULL when every value fitted its typed column.
    pa.field(INVALID_VALUES_COLUMN, pa.map_(pa.string(), pa.string())),
    # NULL for a complete row image.
    pa.field(PARTIAL_COLUMN, pa.map_(pa.string(), pa.string())),
    # r: snapshot read, c: insert, u: update (after image), d: delete (before image).
    pa.field("_cdc_op", pa.string(), nullable=False),
    # The transaction's GTID (``uuid[:tag]:n``); NULL for snapshot rows.
    pa.field("_cdc_gtid", pa.string()),
    # Strictly increasing in binlog order across a whole window.
    pa.field("_cdc_seq", pa.int64(), nullable=False),
    # The transaction's commit time (UTC, microseconds); NULL for snapshot rows.
    pa.field("_cdc_commit_ts", pa.timestamp("us", tz="UTC")),
)
CDC_COLUMN_NAMES: tuple[str, ...] = tuple(field.name for field in CDC_COLUMNS)
#: Valid ``_cdc_op`` values.
CDC_OPS = frozenset({"r", "c", "u", "d"})


@dataclass(frozen=True)
class ColumnSpec:
    """One source column, as far as its staged type and value conversion depend on it."""

    #: Column name as MySQL reports it.
    name: str
    #: Lower-case MySQL type name, one of :data:`MYSQL_TYPES` (every spatial type is ``geometry``;
    #: ``BOOL`` is ``tinyint``: the binlog does not carry the display width).
    mysql_type: str
    #: ``UNSIGNED`` integer (DECIMAL/FLOAT/DOUBLE UNSIGNED are staged as their signed types).
    unsigned: bool = False
    #: DECIMAL(precision, scale).
    precision: int | None = None
    scale: int | None = None
    #: Fractional-second digits (0-6) of DATETIME, TIMESTAMP and TIME.
    fsp: int | None = None
    #: MySQL character set name (``utf8mb4``, ``latin1``, ``binary``...) of string, ENUM and SET columns.
    charset: str | None = None
    #: ENUM labels / SET members in definition order.
    enum_values: tuple[str, ...] = ()
    set_values: tuple[str, ...] = ()
    #: Maximum length in bytes of CHAR, VARCHAR, BINARY and VARBINARY.
    max_length: int | None = None
    #: BIT(n): n.
    bits: int | None = None
    #: VECTOR(n): n, when the binlog says it.
    dimensions: int | None = None
    #: Whether the column accepts NULL (None when unknown).
    nullable: bool | None = None
    #: Part of the primary key.
    primary_key: bool = False

    def __post_init__(self) -> None:
        if self.mysql_type not in MYSQL_TYPES:
            raise ValueError(f"column {self.name!r}: unknown MySQL type {self.mysql_type!r}")
        if self.mysql_type == "decimal" and (self.precision is None or self.scale is None):
            raise ValueError(f"column {self.name!r}: DECIMAL needs precision and scale")
        if self.mysql_type == "bit" and not self.bits:
            raise ValueError(f"column {self.name!r}: BIT needs its number of bits")

    @property
    def sql_type(self) -> str:
        """The type as far as the binlog tells it, e.g. ``decimal(65,30)``, ``datetime(6)``,
        ``bigint unsigned``, ``varchar(1020 bytes) utf8mb4``, ``enum(3 values) latin1``."""
        text = self.mysql_type
        if self.mysql_type == "decimal":
            text += f"({self.precision},{self.scale})"
        elif self.mysql_type in FSP_TYPES and self.fsp:
            text += f"({self.fsp})"
        elif self.mysql_type == "bit":
            text += f"({self.bits})"
        elif self.mysql_type == "vector" and self.dimensions is not None:
            text += f"({self.dimensions})"
        elif self.max_length is not None:
            text += f"({self.max_length} bytes)"
        elif self.mysql_type in ("enum", "set"):
            text += f"({len(self.enum_values or self.set_values)} values)"
        if self.unsigned:
            text += " unsigned"
        if self.charset is not None and self.charset != "binary":
            text += f" {self.charset}"
        return text

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for the schema history: name, MySQL type, Arrow type, key, nullability."""
        return {
            "name": self.name,
            "mysql_type": self.sql_type,
            "arrow_type": str(arrow_type(self)),
            "nullable": self.nullable,
            "primary_key": self.primary_key,
        }


def arrow_type(spec: ColumnSpec) -> pa.DataType:
    """The Arrow type a column's values are staged as (see docs/type-map.md "Type map")."""
    if spec.mysql_type in INTEGER_TYPES:
        signed, unsigned = INTEGER_TYPES[spec.mysql_type]
        return unsigned if spec.unsigned else signed
    if spec.mysql_type == "decimal":
        assert spec.precision is not None and spec.scale is not None  # checked in __post_init__
        if spec.precision <= DECIMAL128_MAX_PRECISION:
            return pa.decimal128(spec.precision, spec.scale)
        return pa.string()  # exact text: no engine downstream (Spark 3.5, Iceberg) holds precision > 38
    if spec.mysql_type == "bit":
        return pa.bool_() if spec.bits == 1 else pa.binary()
    return _SIMPLE_TYPES[spec.mysql_type]


#: Prefixes no table column may have: the staged bookkeeping columns' (:data:`CDC_COLUMNS`) and the
#: apply's working columns' in Spark (which compares names case-insensitively).
RESERVED_COLUMN_PREFIXES = ("_cdc_", "__cdc_")

#: Names of Iceberg's metadata columns (``MetadataColumns``) no table column may have, in any case.
#: Seen with Spark 3.5 and Iceberg 1.10 on the apply's merge-on-read targets: every MERGE or DELETE into
#: a target with a column ``_file`` or ``_pos`` fails ("Row ID attributes cannot be nullable"), with
#: ``_spec_id`` or ``_partition`` too ("Provided metadata schema is incompatible").
ICEBERG_METADATA_COLUMN_NAMES = ("_file", "_pos", "_spec_id", "_partition")
#: The other metadata column names, which a table without a key may not have either: its apply fails
#: with any of them ("Table column names conflict with names reserved for Iceberg metadata columns");
#: a table with a key takes them.
ICEBERG_METADATA_COLUMN_NAMES_WITHOUT_KEY = ("_deleted", "_row_id", "_last_updated_sequence_number")


def require_unreserved_column_names(table_name: str, specs: Iterable[ColumnSpec]) -> None:
    """Raise :class:`UnsupportedNameError` when a column of ``table_name`` has a reserved prefix (staged
    beside the columns this provider adds to each row, it would be taken for one of them) or the name
    of one of Iceberg's metadata columns that Spark cannot merge into a target with (some only without
    a key: no column of ``specs`` in the primary key)."""
    specs = list(specs)
    prefixed = [spec.name for spec in specs if spec.name.lower().startswith(RESERVED_COLUMN_PREFIXES)]
    if prefixed:
        raise UnsupportedNameError(
            f"{table_name}: the column name(s) {prefixed} start with {' or '.join(RESERVED_COLUMN_PREFIXES)} "
            "(in any case), the prefix of the columns this provider stages beside each row and works with in "
            "Spark; such a column would be taken for one of them. Nothing of the table was staged. Rename the "
            f"column(s), or leave the table out of the pipeline's selection (exclude_tables=[{table_name!r}])"
        )
    keyed = any(spec.primary_key for spec in specs)
    names = ICEBERG_METADATA_COLUMN_NAMES + (() if keyed else ICEBERG_METADATA_COLUMN_NAMES_WITHOUT_KEY)
    metadata = [spec.name for spec in specs if spec.name.lower() in names]
    if metadata:
        raise UnsupportedNameError(
            f"{table_name}: the column name(s) {metadata} are names Iceberg keeps for its metadata columns "
            f"({', '.join(names)} in a table {'with' if keyed else 'without'} a key; Spark compares them in "
            "any case), so Spark's MERGE and DELETE into the table's Iceberg target would fail. Nothing of the "
            "table was staged. Rename the column(s), or leave the table out of the pipeline's selection "
            f"(exclude_tables=[{table_name!r}])"
        )


def arrow_schema(specs: Iterable[ColumnSpec]) -> pa.Schema:
    """A staged file's schema: the table's columns in table order, then :data:`CDC_COLUMNS`.

    Table columns are nullable whatever the source says: a NOT NULL DATE may still hold ``0000-00-00``,
    which is staged as NULL (with its text in ``_cdc_invalid_values``).
    """
    fields = []
    seen: set[str] = set()
    for spec in specs:
        if spec.name in CDC_COLUMN_NAMES:
            raise ValueError(f"column {spec.name!r} collides with the staging column of the same name")
        if spec.name.lower() in seen:
            raise ValueError(f"column {spec.name!r} appears twice")
        seen.add(spec.name.lower())
        fields.append(pa.field(spec.name, arrow_type(spec)))
    return pa.schema([*fields, *CDC_COLUMNS])


def schema_fingerprint(specs: Iterable[ColumnSpec], column_ids: Sequence[int] | None = None) -> str:
    """A stable 16-hex-digit name of the staged schema (column names, order, Arrow types and, when
    given, the columns' identities).

    ALTERs that do not change the staged schema (a new ENUM label, a longer VARCHAR, a comment)
    keep the fingerprint; anything that changes a name, the order, a type or which column a name
    belongs to (two names swapped) changes it.
    """
    schema = arrow_schema(specs)
    canonical = "\n".join(f"{field.name}\t{field.type}\t{int(field.nullable)}" for field in schema)
    if column_ids is not None:
        canonical += "\nids\t" + ",".join(str(column_id) for column_id in column_ids)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
