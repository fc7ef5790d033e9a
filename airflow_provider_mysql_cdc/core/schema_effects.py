"""What a copy of a MySQL table (the Iceberg target) must do to stay equal after a DDL statement (pure).

:func:`~airflow_provider_mysql_cdc.core.table_schema.apply_statement` returns these effects, each naming
its table (and column ids, which survive renames). This module also decides the two questions where
exactness is at stake:

* :func:`backfill_for`: the value MySQL gives existing rows for an added column (:class:`Known`, the
  staged Python value; see :mod:`~airflow_provider_mysql_cdc.core.ddl_values`) or :class:`Unknown`.
  ADD COLUMN writes no row events, so a target can only fill old rows from this.
  On MySQL 9.7: no DEFAULT and nullable -> NULL; DEFAULT NULL -> NULL; a constant DEFAULT -> that
  constant converted to the column type; NOT NULL without DEFAULT -> the implicit default
  (see ``ddl_values``); ``DEFAULT (expression)`` -> evaluated per row (``(a*2)`` differs row by row,
  ``(UUID())``/``(RAND())`` are refused as unsafe for replication); ``CURRENT_TIMESTAMP`` -> the
  ALTER's time for every row; generated columns (VIRTUAL or STORED) -> computed from each row;
  AUTO_INCREMENT -> numbered 1..n; FIRST/AFTER change nothing about the values.
* :func:`values_preserved`: whether a MODIFY/CHANGE can have changed stored values (or the staged Arrow
  type in a way that is not a lossless widening). On MySQL 9.7 (default sql_mode / ``sql_mode=''``):
  VARCHAR shrink: error if a value is longer / cut (trailing spaces too); VARCHAR -> CHAR drops trailing
  spaces in both; charset change converts characters (utf8mb4 -> latin1: error / ``?``); INT ->
  TINYINT, signed <-> unsigned, DECIMAL fewer integer digits, BIT narrower: error / clipped to the range;
  DECIMAL fewer decimals, DATETIME/TIME/TIMESTAMP smaller fsp: rounded in both modes (a Note);
  FLOAT -> DOUBLE keeps the float's exact binary value (1.1f -> 1.100000023841858), DOUBLE -> FLOAT
  rounds; ENUM labels are converted by text (reordering and inserting keep values, a removed label:
  error / ``''``, a renamed label takes the row's value with it), SET values are printed in the new
  definition order (reordering members changes the text); NULL -> NOT NULL: error / implicit default;
  DATETIME -> TIMESTAMP goes through the session time zone.

Also seen on 9.7: ``ADD COLUMN ts TIMESTAMP NOT NULL`` succeeds under the default (strict, NO_ZERO_DATE)
sql_mode and leaves the zero TIMESTAMP in existing rows (DATE/DATETIME NOT NULL fail there), after which
a table-copying ALTER (e.g. one adding an expression default) fails on those rows; a NOT NULL GEOMETRY
with an expression default fails on a table with rows while a nullable one gets the expression's value;
``ALTER COLUMN c SET DEFAULT ('z')`` stores a literal default, ``ADD COLUMN c INT DEFAULT (5)`` an
expression one; ``information_schema.COLUMNS.COLUMN_DEFAULT`` prints FLOAT defaults with 6 digits, cuts
binary defaults at their first 0x00 byte and shows characters beyond the BMP as ``?``; row events of a
FULL row image carry VIRTUAL generated and INVISIBLE columns, in table order.

Everything else in this module is data: frozen dataclasses, no network, Airflow, Spark or pyarrow import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from airflow_provider_mysql_cdc.core.ddl_charsets import max_bytes_per_char
from airflow_provider_mysql_cdc.core.ddl_columns import LOB_BYTES, parse_literal
from airflow_provider_mysql_cdc.core.ddl_statements import (
    BYTE_TYPES,
    CHARACTER_TYPES,
    INTEGER_RANKS,
    ColumnDefinition,
    TableRef,
)
from airflow_provider_mysql_cdc.core.ddl_tokens import TokenCursor, tokenize
from airflow_provider_mysql_cdc.core.ddl_values import (
    DECIMAL_MAX_STAGED_PRECISION,
    InvalidStaged,
    implicit_value,
    literal_value,
)
from airflow_provider_mysql_cdc.errors import DdlSyntaxError, NotExact

# -- backfill ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Known:
    """Existing rows hold exactly ``value`` (the staged Python value; None for NULL).

    ``invalid_text`` set: the value has no typed form (a zero date): the typed column is NULL and the
    row's ``_cdc_invalid_values`` maps the column name to this text.
    """

    value: Any
    invalid_text: str | None = None


@dataclass(frozen=True)
class Unknown:
    """The value of existing rows cannot be stated exactly here (``reason`` says why)."""

    reason: str


Backfill: TypeAlias = Known | Unknown


def backfill_for(column: ColumnDefinition, *, truncate_fractions: bool | None = None) -> Backfill:
    """The value MySQL gives the existing rows of a table when ``column`` is added to it.

    ``truncate_fractions``: whether the ALTER ran with ``TIME_TRUNCATE_FRACTIONAL`` (None: unknown).
    """
    if column.generated is not None:
        return Unknown(f"generated column: computed from each row ({column.generated.expression})")
    if column.auto_increment:
        return Unknown("AUTO_INCREMENT column: existing rows are numbered in an order MySQL chooses")
    default = column.default
    try:
        if default is None:
            value = None if column.nullable else implicit_value(column)
        elif default.kind == "expression":
            value = _literal_expression_value(column, default.text, truncate_fractions)
        else:
            value = literal_value(column, default, truncate_fractions=truncate_fractions)
    except NotExact as exc:
        return Unknown(str(exc))
    if isinstance(value, InvalidStaged):
        return Known(None, value.text)
    return Known(value)


def _literal_expression_value(column: ColumnDefinition, text: str, truncate_fractions: bool | None) -> Any:
    """``DEFAULT ('literal')`` / ``DEFAULT (5)``: a parenthesized single literal (not for JSON)."""
    if column.mysql_type == "json":
        raise NotExact("a JSON expression default is normalized by MySQL")
    try:
        cursor = TokenCursor(text, tokenize(text))
        cursor.expect_punct("(")
        literal = parse_literal(cursor)
        cursor.expect_punct(")")
        if not cursor.at_end():
            raise NotExact(f"expression default {text}: evaluated by MySQL")
    except DdlSyntaxError as exc:
        raise NotExact(f"expression default {text}: evaluated by MySQL") from exc
    return literal_value(column, literal, truncate_fractions=truncate_fractions)


# -- retype classification --------------------------------------------------------------------------

#: Character set changes that keep every character (MySQL's latin1 is cp1252 plus the five C1 controls
#: cp1252 leaves undefined, all in the BMP; capture decodes latin1 with that same table).
_WIDENING_CHARSETS = {
    ("utf8mb3", "utf8mb4"),
    ("ascii", "utf8mb4"),
    ("ascii", "utf8mb3"),
    ("ascii", "latin1"),
    ("latin1", "utf8mb4"),
    ("latin1", "utf8mb3"),
}


def _max_bytes_after(old: ColumnDefinition, new: ColumnDefinition) -> int | None:
    """The largest byte length a value of ``old`` has in ``new``'s character set (None: unknown)."""
    if old.mysql_type in ("char", "varchar"):
        per_char = max_bytes_per_char(new.charset)
        return None if per_char is None or old.length is None else old.length * per_char
    # same bytes for the same charset, utf8mb3 -> utf8mb4 and ascii -> *; latin1 -> UTF-8 up to 3 bytes (€)
    growth = 3 if old.charset == "latin1" and new.charset in ("utf8mb3", "utf8mb4") else 1
    return LOB_BYTES[old.mysql_type] * growth


def _string_grows(old: ColumnDefinition, new: ColumnDefinition) -> bool:
    """Every value of ``old`` fits ``new`` unchanged (same staged text), both character types whose
    character sets are equal or widening."""
    if old.mysql_type in ("char", "varchar") and new.mysql_type in ("char", "varchar"):
        if new.mysql_type == "char" and old.mysql_type == "varchar":
            return False  # CHAR drops trailing spaces
        return (old.length or 0) <= (new.length or 0)
    if new.mysql_type in LOB_BYTES:
        needed = _max_bytes_after(old, new)
        return needed is not None and needed <= LOB_BYTES[new.mysql_type]
    return False


def _bytes_grow(old: ColumnDefinition, new: ColumnDefinition) -> bool:
    old_capacity = LOB_BYTES.get(old.mysql_type, old.length)
    new_capacity = LOB_BYTES.get(new.mysql_type, new.length)
    if old_capacity is None or new_capacity is None or new.mysql_type == "binary":
        return old.mysql_type == new.mysql_type == "binary" and old.length == new.length
    return old_capacity <= new_capacity


def _integer_widens(old: ColumnDefinition, new: ColumnDefinition) -> bool:
    old_rank, new_rank = INTEGER_RANKS[old.mysql_type], INTEGER_RANKS[new.mysql_type]
    if old.unsigned == new.unsigned:
        return new_rank >= old_rank
    return old.unsigned and not new.unsigned and new_rank > old_rank


def _decimal_widens(old: ColumnDefinition, new: ColumnDefinition) -> bool:
    if old.scale != new.scale or (new.unsigned and not old.unsigned):
        return False
    old_precision, new_precision = old.precision or 0, new.precision or 0
    crosses_staged_text = (old_precision <= DECIMAL_MAX_STAGED_PRECISION) != (
        new_precision <= DECIMAL_MAX_STAGED_PRECISION
    )
    return new_precision >= old_precision and not crosses_staged_text


def _labels_kept(old: ColumnDefinition, new: ColumnDefinition) -> bool:
    if old.mysql_type == "enum":
        return all(label in new.enum_values for label in old.enum_values)
    old_members = [member for member in new.set_values if member in old.set_values]
    return old_members == list(old.set_values)  # same members, same relative order


def _same_family_preserves(old: ColumnDefinition, new: ColumnDefinition) -> tuple[bool, str]:
    """Type-to-type rules (the column's other attributes are checked by :func:`values_preserved`)."""
    pair = (old.mysql_type, new.mysql_type)
    if old.mysql_type in INTEGER_RANKS and new.mysql_type in INTEGER_RANKS:
        return _verdict(_integer_widens(old, new), "integer widening", "integer narrowing or sign change")
    if pair == ("decimal", "decimal"):
        return _verdict(_decimal_widens(old, new), "more integer digits", "DECIMAL scale, digits or sign changed")
    if old.mysql_type in ("float", "double") and new.mysql_type in ("float", "double"):
        exact = old.scale is None and new.scale is None and not (new.unsigned and not old.unsigned)
        widening = old.mysql_type == new.mysql_type or pair == ("float", "double")
        return _verdict(exact and widening, "FLOAT -> DOUBLE keeps the float's exact value", "floating-point rounding")
    if old.mysql_type in CHARACTER_TYPES and new.mysql_type in CHARACTER_TYPES:
        return _verdict(_string_grows(old, new), "text that still fits", "text may be cut (or CHAR's trailing spaces)")
    if old.mysql_type in BYTE_TYPES and new.mysql_type in BYTE_TYPES:
        return _verdict(_bytes_grow(old, new), "bytes that still fit", "bytes may be cut or padded")
    if pair in (("enum", "enum"), ("set", "set")):
        return _verdict(_labels_kept(old, new), "labels kept", "labels removed, renamed or (SET) reordered")
    if pair in (("datetime", "datetime"), ("time", "time"), ("timestamp", "timestamp")):
        return _verdict((new.fsp or 0) >= (old.fsp or 0), "more fractional digits", "fractional seconds rounded")
    if pair == ("bit", "bit"):
        old_bits, new_bits = old.length or 1, new.length or 1
        same_bytes = old_bits > 1 and new_bits >= old_bits and (old_bits + 7) // 8 == (new_bits + 7) // 8
        return _verdict(same_bytes or old_bits == new_bits, "BIT bytes kept", "BIT width changes the staged value")
    if old.mysql_type == new.mysql_type and old.type_text == new.type_text:
        return True, "same type"
    return False, f"{old.type_text} -> {new.type_text} converts values or changes the staged type"


def _verdict(preserved: bool, why: str, why_not: str) -> tuple[bool, str]:
    return preserved, why if preserved else why_not


def values_preserved(old: ColumnDefinition, new: ColumnDefinition, *, strict: bool | None) -> tuple[bool, str]:
    """(True, why) when MODIFY/CHANGE from ``old`` to ``new`` cannot change a stored value and the staged
    Arrow type stays the same or widens losslessly; (False, why) otherwise.

    ``strict``: whether the ALTER ran under a strict sql_mode (None: unknown). Only NULL -> NOT NULL
    depends on it: strict mode fails the ALTER when a NULL exists, so success means nothing changed.
    """
    if (old.generated is None) != (new.generated is None):
        return False, "generated <-> stored column"
    if old.generated is not None and new.generated is not None and old.generated.expression != new.generated.expression:
        return False, "generation expression changed"
    if new.auto_increment and not old.auto_increment:
        return False, "AUTO_INCREMENT added: rows holding 0 are renumbered"
    if old.nullable and not new.nullable and not strict:
        return False, "NULL -> NOT NULL outside strict mode stores the implicit default in NULL rows"
    uses_charset = old.mysql_type in CHARACTER_TYPES or old.mysql_type in ("enum", "set")
    charset_changed = (
        uses_charset and new.mysql_type in (*CHARACTER_TYPES, "enum", "set") and old.charset != new.charset
    )
    if charset_changed and (old.charset, new.charset) not in _WIDENING_CHARSETS:
        return False, f"character set {old.charset or '(unknown)'} -> {new.charset or '(unknown)'} converts text"
    return _same_family_preserves(old, new)


# -- effects ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoDataChange:
    """The statement changes no stored value and no staged type of the table (index, option, comment...)."""

    table: TableRef
    reason: str


@dataclass(frozen=True)
class ColumnAdded:
    """A new column (a new identity); every existing row holds ``backfill``."""

    table: TableRef
    column_id: int
    name: str
    backfill: Backfill


@dataclass(frozen=True)
class ColumnDropped:
    """The column and its values are gone."""

    table: TableRef
    column_id: int
    name: str


@dataclass(frozen=True)
class ColumnRenamed:
    """Same column, same values, new name."""

    table: TableRef
    column_id: int
    old_name: str
    new_name: str


@dataclass(frozen=True)
class ColumnRetyped:
    """The column's type or attributes changed; ``values_preserved`` False: stored values may have
    changed or the staged type changes in a way that is not a lossless widening (``reason``)."""

    table: TableRef
    column_id: int
    name: str
    old: ColumnDefinition
    new: ColumnDefinition
    values_preserved: bool
    reason: str


@dataclass(frozen=True)
class KeyChanged:
    """The primary key changed (added, dropped, its columns changed, renamed or retyped)."""

    table: TableRef
    old_key: tuple[str, ...]
    new_key: tuple[str, ...]


@dataclass(frozen=True)
class TableTruncated:
    """Every row is gone (TRUNCATE writes no row events)."""

    table: TableRef


@dataclass(frozen=True)
class TableDropped:
    """The table is gone."""

    table: TableRef


@dataclass(frozen=True)
class TableCreated:
    """A new table (a new identity: its column ids start again at 1)."""

    table: TableRef


@dataclass(frozen=True)
class TableRenamed:
    """The table ``old`` is now called ``new`` (same identity, same column ids)."""

    old: TableRef
    new: TableRef

    @property
    def table(self) -> TableRef:
        """The name the table had before."""
        return self.old


@dataclass(frozen=True)
class DataChangeUnknown:
    """Rows of the table may have changed in a way this model cannot state (``reason``): re-read the
    table (or stop)."""

    table: TableRef
    reason: str


SchemaEffect: TypeAlias = (
    NoDataChange
    | ColumnAdded
    | ColumnDropped
    | ColumnRenamed
    | ColumnRetyped
    | KeyChanged
    | TableTruncated
    | TableDropped
    | TableCreated
    | TableRenamed
    | DataChangeUnknown
)
