"""Snapshot chunks: key ranges of a table, their SQL and Python-side membership (pure).

A table is split on its primary key (or a unique ``NOT NULL`` key) into half-open ranges planned
from the data: boundary keys are sampled from the table in key order (:func:`boundary_query`, or
:func:`next_boundary_query` repeated) or, for a large table with a dense integer key, computed from
its lowest and highest key (:func:`even_boundaries`); :func:`plan_chunks` turns them into contiguous ranges that
cover the whole key space, and each range becomes a :class:`SnapshotChunk` read by its own mapped
task with its own GTID frontier. Binlog capture later asks :func:`chunk_of` which chunk a row
event's key falls in, to skip the events that chunk's snapshot already holds.

Key values are what PyMySQL returns for the key columns and what binlog decoding yields for them:
``int``, ``str``, ``bytes``, ``Decimal``, ``date``, ``datetime`` and ``timedelta`` (``TIME``).
Boundaries and event keys must use the same representation (e.g. select ``TIMESTAMP`` keys in a
session with ``time_zone = '+00:00'`` when events carry UTC instants): a key that Python cannot
compare with a bound raises :class:`ConfigurationError` rather than guessing.

Generated SQL follows PyMySQL's ``%s`` paramstyle. Composite-key predicates are written in the
expanded form ``a > %s OR (a = %s AND b >= %s)`` rather than as the row constructor
``(a, b) >= (%s, %s)``: MySQL (checked with 9.7) evaluates a row-constructor inequality as a filter
over a full index scan, but turns the expanded form into an index range scan, which is what makes
each chunk read only its own part of the table.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, TypeAlias

from airflow_provider_mysql_cdc.errors import ConfigurationError

#: A value of one key column.
KeyValue: TypeAlias = int | str | bytes | Decimal | date | datetime | timedelta
#: A key: one value per key column, in the key's column order.
Key: TypeAlias = tuple[KeyValue, ...]

#: JSON tags of the key values that JSON cannot hold as themselves (int and str stay plain).
_TAG_BYTES = "bytes"
_TAG_DECIMAL = "decimal"
_TAG_DATE = "date"
_TAG_DATETIME = "datetime"
_TAG_TIME = "time"

_SUPPORTED = "int, str, bytes, Decimal, date, datetime or timedelta"


# ---------------------------------------------------------------------------------------------
# Key values: validation, comparison, JSON
# ---------------------------------------------------------------------------------------------


def _check_value(value: object, where: str) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is a supported key value."""
    if isinstance(value, bool) or not isinstance(value, int | str | bytes | Decimal | date | timedelta):
        raise ConfigurationError(
            f"{where}: key value {value!r} of type {type(value).__name__} is not supported; key columns must "
            f"hold {_SUPPORTED} values (use another unique NOT NULL key, or snapshot the table as one chunk)"
        )
    if isinstance(value, Decimal) and not value.is_finite():
        raise ConfigurationError(f"{where}: key value {value!r} is not a finite decimal; MySQL keys never hold one")


def _check_key(key: object, where: str, arity: int | None = None) -> Key:
    """Validate a key (a non-empty tuple of supported values, of ``arity`` values when given)."""
    if not isinstance(key, tuple):
        raise ConfigurationError(f"{where}: a key must be a tuple of column values, got {type(key).__name__}")
    if not key:
        raise ConfigurationError(f"{where}: a key must hold at least one column value")
    if arity is not None and len(key) != arity:
        raise ConfigurationError(f"{where}: key {key!r} has {len(key)} values, expected {arity} (one per key column)")
    for value in key:
        _check_value(value, where)
    return key


def compare_keys(left: Key, right: Key) -> int | None:
    """Compare two keys of the same arity in MySQL's order: -1, 0, 1, or None when undecidable.

    Components are compared left to right, as MySQL compares rows. Integers, decimals, dates,
    datetimes, times and bytes order the same way in MySQL and in Python. Strings do not: MySQL
    compares them with the column's collation (case- and accent-insensitive rules, PAD SPACE,
    ...). Identical strings are equal under every collation, so they are passed over; the first
    pair of different strings makes the result None ("ask the server"), unless an earlier
    component already decided it.

    Raises :class:`ConfigurationError` when the arities differ or two components cannot be
    compared (e.g. ``int`` with ``bytes``, ``date`` with ``datetime``, naive with aware datetimes).
    """
    if len(left) != len(right):
        raise ConfigurationError(
            f"keys {left!r} and {right!r} have different numbers of columns; compare keys of the same table key"
        )
    for a, b in zip(left, right, strict=True):
        if isinstance(a, str) or isinstance(b, str):
            if not (isinstance(a, str) and isinstance(b, str)):
                raise _incomparable(a, b)
            if a == b:
                continue
            return None
        try:
            if a < b:  # type: ignore[operator]
                return -1
            if b < a:  # type: ignore[operator]
                return 1
        except TypeError:
            raise _incomparable(a, b) from None
    return 0


def _incomparable(a: object, b: object) -> ConfigurationError:
    return ConfigurationError(
        f"cannot compare key values {a!r} ({type(a).__name__}) and {b!r} ({type(b).__name__}); boundaries and "
        "event keys must be read with the same types (and, for datetimes, the same time zone handling)"
    )


def value_to_json(value: KeyValue) -> Any:
    """A JSON-safe form of a key value: int and str as themselves, the others as a tagged object.

    ``bytes`` -> ``{"bytes": base64}``, ``Decimal`` -> ``{"decimal": text}`` (exponent and scale
    kept), ``datetime`` / ``date`` -> ``{"datetime"|"date": ISO 8601}`` (microseconds and UTC
    offset kept), ``timedelta`` -> ``{"time": microseconds}``.
    """
    _check_value(value, "key value")
    if isinstance(value, int | str):
        return value
    if isinstance(value, bytes):
        return {_TAG_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, Decimal):
        return {_TAG_DECIMAL: str(value)}
    if isinstance(value, datetime):
        return {_TAG_DATETIME: value.isoformat()}
    if isinstance(value, date):
        return {_TAG_DATE: value.isoformat()}
    delta: timedelta = value
    return {_TAG_TIME: (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds}


def value_from_json(data: Any) -> KeyValue:
    """The key value :func:`value_to_json` encoded; raise :class:`ConfigurationError` on anything else."""
    if isinstance(data, str) or (isinstance(data, int) and not isinstance(data, bool)):
        return data
    if isinstance(data, Mapping) and len(data) == 1:
        ((tag, text),) = data.items()
        try:
            if tag == _TAG_BYTES and isinstance(text, str):
                return base64.b64decode(text.encode("ascii"), validate=True)
            if tag == _TAG_DECIMAL and isinstance(text, str):
                decoded = Decimal(text)
                _check_value(decoded, "key value")
                return decoded
            if tag == _TAG_DATETIME and isinstance(text, str):
                return datetime.fromisoformat(text)
            if tag == _TAG_DATE and isinstance(text, str):
                return date.fromisoformat(text)
            if tag == _TAG_TIME and isinstance(text, int) and not isinstance(text, bool):
                return timedelta(microseconds=text)
        except (ValueError, InvalidOperation, binascii.Error, UnicodeEncodeError, OverflowError):
            pass
    raise ConfigurationError(
        f"{data!r} is not a serialized key value; pass what KeyRange.to_json / SnapshotChunk.to_json produced"
    )


def _key_to_json(key: Key | None) -> list[Any] | None:
    return None if key is None else [value_to_json(value) for value in key]


def _key_from_json(data: Any, where: str) -> Key | None:
    if data is None:
        return None
    if not isinstance(data, list | tuple):
        raise ConfigurationError(f"{where}: expected a list of key values or null, got {data!r}")
    return tuple(value_from_json(item) for item in data)


# ---------------------------------------------------------------------------------------------
# Ranges and plans
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRange:
    """A half-open interval ``[lower, upper)`` of keys in the table's key order.

    ``lower`` is inclusive (None: no lower bound), ``upper`` exclusive (None: no upper bound).
    Bounds are tuples with one value per key column.
    """

    lower: Key | None = None
    upper: Key | None = None

    def __post_init__(self) -> None:
        arity = None
        if self.lower is not None:
            arity = len(_check_key(self.lower, "KeyRange.lower"))
        if self.upper is not None:
            _check_key(self.upper, "KeyRange.upper", arity)
        if self.lower is not None and self.upper is not None and compare_keys(self.lower, self.upper) in (0, 1):
            raise ConfigurationError(
                f"KeyRange lower {self.lower!r} must be below upper {self.upper!r}; the range would be empty"
            )

    @property
    def arity(self) -> int | None:
        """Number of key columns of the bounds (None for the unbounded range)."""
        bound = self.lower if self.lower is not None else self.upper
        return None if bound is None else len(bound)

    def contains(self, key: Key) -> bool | None:
        """Whether ``key`` lies in the range, decided in Python; None when only MySQL can decide.

        Exact for keys whose MySQL order is Python's tuple order: integers, ``Decimal``, ``date``,
        ``datetime``, ``timedelta`` (``TIME``) and ``bytes`` (binary strings compare bytewise in
        MySQL too; ``BINARY(n)`` values must carry their trailing ``0x00`` padding, as both
        ``SELECT`` and this provider's binlog decoding give them).

        Strings are not: MySQL compares ``CHAR``/``VARCHAR``/``TEXT`` by the column's collation
        (case-insensitive, accent-insensitive, PAD SPACE, ...), which Python cannot mirror. When
        the answer depends on comparing a ``str`` component with a different string of a bound,
        the result is None: ask the server (e.g. ``SELECT`` the key with :func:`range_predicate`).
        A ``str`` component does not matter when an earlier component decides (``(5, 'x')`` is
        outside ``[(7, 'a'), (9, 'a'))``) or when it is identical to the bound's.

        Raises :class:`ConfigurationError` when the key has the wrong number of values or
        values of a type that cannot be compared with the bounds'.
        """
        _check_key(key, "KeyRange.contains", self.arity)
        below_upper: bool | None = True
        if self.upper is not None:
            order = compare_keys(key, self.upper)
            below_upper = None if order is None else order < 0
            if below_upper is False:
                return False
        if self.lower is not None:
            order = compare_keys(key, self.lower)
            if order is None:
                return None
            if order < 0:
                return False
        return below_upper

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (XCom-safe) that :meth:`from_json` turns back into an equal range."""
        return {"lower": _key_to_json(self.lower), "upper": _key_to_json(self.upper)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeyRange:
        """Rebuild a range from :meth:`to_json`; raise :class:`ConfigurationError` when malformed."""
        if not isinstance(data, Mapping) or set(data) != {"lower", "upper"}:
            raise ConfigurationError(
                f"{data!r} is not a serialized KeyRange (expected keys 'lower' and 'upper'); pass KeyRange.to_json()"
            )
        return cls(_key_from_json(data["lower"], "KeyRange.lower"), _key_from_json(data["upper"], "KeyRange.upper"))


def plan_chunks(boundaries: Sequence[Sequence[KeyValue]]) -> tuple[KeyRange, ...]:
    """Contiguous ranges covering the whole key space, cut at ``boundaries``.

    ``boundaries`` are distinct keys in increasing key order (as :func:`boundary_query` returns
    them); the result is ``(-inf, b1), [b1, b2), ..., [bn, +inf)``, and a single unbounded range
    when there are none. Every key lies in exactly one of the ranges.

    Raises :class:`ConfigurationError` when a boundary is malformed, boundaries differ in arity,
    or two consecutive boundaries are not strictly increasing where Python can tell (string
    components are trusted to be in the server's collation order).
    """
    keys: list[Key] = []
    for position, boundary in enumerate(boundaries):
        if isinstance(boundary, str | bytes) or not isinstance(boundary, Sequence):
            raise ConfigurationError(
                f"boundary {position} ({boundary!r}) must be a tuple of key column values, e.g. a row "
                "of the boundary query"
            )
        key = _check_key(tuple(boundary), f"boundary {position}", len(keys[0]) if keys else None)
        if keys:
            order = compare_keys(keys[-1], key)
            if order is not None and order >= 0:
                raise ConfigurationError(
                    f"boundaries must be strictly increasing in key order, but boundary {position} ({key!r}) "
                    f"is not above boundary {position - 1} ({keys[-1]!r}); sort them by the key and drop duplicates"
                )
        keys.append(key)
    lowers: list[Key | None] = [None, *keys]
    uppers: list[Key | None] = [*keys, None]
    return tuple(KeyRange(lower, upper) for lower, upper in zip(lowers, uppers, strict=True))


def chunk_of(ranges: Sequence[KeyRange], key: Key) -> int | None:
    """The index of the range of ``ranges`` that holds ``key``, or None when only MySQL can decide.

    ``ranges`` must be contiguous and cover the key space in order, as :func:`plan_chunks` returns
    them (not re-checked: this runs for every row event). A binary search over the lower bounds,
    with :func:`compare_keys`: the answer is exact when it is not None (see
    :meth:`KeyRange.contains` for when strings make it undecidable).
    """
    if not ranges or ranges[0].lower is not None or ranges[-1].upper is not None:
        raise ConfigurationError("chunk_of needs the contiguous ranges of plan_chunks(), from -inf to +inf")
    _check_key(key, "chunk_of", ranges[0].arity)
    # Find the last range whose lower bound is <= key: ranges[lo].lower <= key < ranges[hi].lower.
    lo, hi = 0, len(ranges)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lower = ranges[mid].lower
        assert lower is not None  # only the first range is unbounded below
        order = compare_keys(key, lower)
        if order is None:
            return None
        if order < 0:
            hi = mid
        else:
            lo = mid
    return lo


# ---------------------------------------------------------------------------------------------
# SQL
# ---------------------------------------------------------------------------------------------


def quote_identifier(name: str) -> str:
    """A MySQL identifier in backquotes, inner backquotes doubled."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ConfigurationError(f"{name!r} is not a valid MySQL identifier (empty, not a string, or holds NUL)")
    return "`" + name.replace("`", "``") + "`"


def _columns(key_columns: Sequence[str]) -> list[str]:
    if isinstance(key_columns, str) or not key_columns:
        raise ConfigurationError(
            f"key_columns must be a non-empty list of column names in key order, got {key_columns!r}"
        )
    if len(set(key_columns)) != len(key_columns):
        raise ConfigurationError(f"key_columns {list(key_columns)!r} name a column twice")
    return [quote_identifier(column) for column in key_columns]


def _table(database: str, table: str) -> str:
    return f"{quote_identifier(database)}.{quote_identifier(table)}"


def _chunk_rows(chunk_rows: int) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ConfigurationError(f"chunk_rows must be a positive integer (rows per chunk), got {chunk_rows!r}")
    return chunk_rows


def key_order(key_columns: Sequence[str]) -> str:
    """The key's ``ORDER BY`` list (without the keyword): ``` `a`, `b` ```."""
    return ", ".join(_columns(key_columns))


def _bound_condition(columns: Sequence[str], bound: Key, strict: str, last: str) -> tuple[str, list[Any]]:
    """``(c1, ..., cn) <last> bound`` in expanded, index-range-friendly form.

    ``strict`` is ``>`` or ``<``; ``last`` the operator on the last column (``>=`` or ``<``):
    ``c1 > v1 OR (c1 = v1 AND (c2 > v2 OR (c2 = v2 AND c3 >= v3)))``.
    """
    column, value = columns[-1], bound[-1]
    text, params = f"{column} {last} %s", [value]
    for column, value in zip(reversed(columns[:-1]), reversed(bound[:-1]), strict=True):
        text = f"{column} {strict} %s OR ({column} = %s AND ({text}))"
        params = [value, value, *params]
    return text, params


def range_predicate(key_columns: Sequence[str], key_range: KeyRange) -> tuple[str, list[Any]]:
    """A ``WHERE`` fragment selecting the rows of ``key_range``, and its parameters (``%s`` style).

    Single column: ``` `a` >= %s AND `a` < %s ```. Composite keys use the expanded form of the
    row comparison ``(a, b) >= (%s, %s) AND (a, b) < (%s, %s)``, which MySQL turns into an index
    range scan (it does not for the row constructor), each bound in parentheses:
    ``` (`a` > %s OR (`a` = %s AND (`b` >= %s))) AND (`a` < %s OR (`a` = %s AND (`b` < %s))) ```.
    The unbounded range gives ``TRUE`` and no parameters.

    ``%`` in column names is doubled, so always pass the returned list to ``cursor.execute``
    (even when empty: PyMySQL only interpolates when given parameters).
    """
    columns = [column.replace("%", "%%") for column in _columns(key_columns)]
    if key_range.arity is not None and key_range.arity != len(columns):
        raise ConfigurationError(
            f"key range {key_range!r} has {key_range.arity} values per bound but key_columns "
            f"{list(key_columns)!r} name {len(columns)} columns"
        )
    parts: list[str] = []
    params: list[Any] = []
    for bound, strict, last in ((key_range.lower, ">", ">="), (key_range.upper, "<", "<")):
        if bound is None:
            continue
        text, values = _bound_condition(columns, bound, strict, last)
        parts.append(text if len(columns) == 1 else f"({text})")
        params.extend(values)
    return (" AND ".join(parts) if parts else "TRUE"), params


def boundary_query(database: str, table: str, key_columns: Sequence[str], chunk_rows: int) -> str:
    """One statement returning every ``chunk_rows``-th key (rows ``chunk_rows + 1``, ``2 * chunk_rows + 1``, ...).

    Fed to :func:`plan_chunks`, the boundaries give chunks of exactly ``chunk_rows`` rows (the
    last one fewer) as of the moment the query reads the table. The statement has no parameters:
    execute it without arguments.

    Cost on MySQL 8+/9 (checked with ``EXPLAIN FORMAT=TREE`` on 9.7): one covering index scan
    that reads only the key columns, then a sort of all keys and a materialized temporary table
    holding every key (the window function does not use index order). That is fine for millions
    of rows; for very large tables prefer :func:`next_boundary_query`, which reads the index in
    order with no sort and no temporary table.
    """
    columns = key_order(key_columns)
    every = _chunk_rows(chunk_rows)
    return (
        f"SELECT {columns} FROM (SELECT {columns}, ROW_NUMBER() OVER (ORDER BY {columns}) AS `_cdc_rn` "
        f"FROM {_table(database, table)}) AS `_cdc_keys` "
        f"WHERE `_cdc_rn` > 1 AND MOD(`_cdc_rn` - 1, {every}) = 0 ORDER BY {columns}"
    )


#: An integer key is cut into equal-width ranges (:func:`even_boundaries`) only when the table holds
#: at least this many rows by the server's estimate: below it, reading the key's index for exact
#: boundaries costs about a second or less (731,000 to 875,000 keys a second measured here).
EVEN_SPLIT_MIN_ROWS = 500_000
#: ... and only when its keys are spread at most this many times wider than that estimate (key span
#: over rows): sparser keys are read off the index, since equal widths would give uneven chunks.
EVEN_SPLIT_MAX_SPREAD = 10


def even_boundaries(
    lowest: int, highest: int, estimated_rows: int | None, chunk_rows: int
) -> tuple[tuple[int], ...] | None:
    """Boundaries cutting a unique integer key's values ``lowest..highest`` into equal-width ranges
    of about ``chunk_rows`` rows each, without reading the table; None when they should be read off
    the index instead (:func:`next_boundary_query`).

    The width is ``chunk_rows`` times the spread (key span over ``estimated_rows``, the server's
    estimate of the table's rows), and never below ``chunk_rows``: a unique key holds at most
    ``chunk_rows`` rows in a range that narrow, however wrong the estimate. None when the estimate is
    missing or below :data:`EVEN_SPLIT_MIN_ROWS`, or the spread is above :data:`EVEN_SPLIT_MAX_SPREAD`.
    The boundaries only balance the chunks: any increasing boundaries cover every key once
    (:func:`plan_chunks`).
    """
    every = _chunk_rows(chunk_rows)
    if not estimated_rows or estimated_rows < EVEN_SPLIT_MIN_ROWS or highest < lowest:
        return None
    span = highest - lowest + 1
    if span > EVEN_SPLIT_MAX_SPREAD * estimated_rows:
        return None
    width = max(every, -(-span * every // estimated_rows))
    return tuple((boundary,) for boundary in range(lowest + width, highest + 1, width))


def next_boundary_query(
    database: str, table: str, key_columns: Sequence[str], chunk_rows: int, after: Key | None
) -> tuple[str, list[Any]]:
    """The boundary ``chunk_rows`` rows past ``after`` (None: from the start), and its parameters.

    Run it repeatedly, passing the previous result as ``after``, until it returns no row: the
    keys found are the same boundaries :func:`boundary_query` returns. Each run is an index range
    scan in key order that stops after ``chunk_rows + 1`` entries (``LIMIT 1 OFFSET chunk_rows``;
    no sort, no temporary table), so the whole plan reads the key's index once. It takes one round
    trip per chunk, and the boundaries are not read at a single point in time; both are harmless
    for planning, since the snapshot reads each chunk's rows later anyway.
    """
    columns = key_order(key_columns)
    every = _chunk_rows(chunk_rows)
    where, params = range_predicate(key_columns, KeyRange(lower=after))
    escaped = _table(database, table).replace("%", "%%")
    return (
        f"SELECT {columns.replace('%', '%%')} FROM {escaped} WHERE {where} "
        f"ORDER BY {columns.replace('%', '%%')} LIMIT 1 OFFSET {every}",
        params,
    )


# ---------------------------------------------------------------------------------------------
# Mapped-task argument
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotChunk:
    """One chunk of a table's snapshot: what a mapped snapshot task reads (XCom-safe via JSON)."""

    database: str
    table: str
    #: The primary key (or unique NOT NULL key) columns, in key order; for a table without one, the
    #: ``key_columns`` the user named to cut it into chunks, or () for a table read as one chunk.
    key_columns: tuple[str, ...]
    #: 0-based position of the chunk in the table's plan.
    chunk_no: int
    key_range: KeyRange

    def __post_init__(self) -> None:
        quote_identifier(self.database)
        quote_identifier(self.table)
        if not isinstance(self.key_columns, tuple):
            raise ConfigurationError(f"key_columns must be a tuple of column names, got {self.key_columns!r}")
        if self.key_columns:  # () is a table without a key, read whole: its range has no bounds (below)
            _columns(self.key_columns)
        if isinstance(self.chunk_no, bool) or not isinstance(self.chunk_no, int) or self.chunk_no < 0:
            raise ConfigurationError(f"chunk_no must be a non-negative integer, got {self.chunk_no!r}")
        if self.key_range.arity is not None and self.key_range.arity != len(self.key_columns):
            raise ConfigurationError(
                f"chunk {self.chunk_no} of {self.database}.{self.table}: the key range has "
                f"{self.key_range.arity} values per bound but the key has {len(self.key_columns)} columns"
            )

    def predicate(self) -> tuple[str, list[Any]]:
        """The chunk's ``WHERE`` fragment and parameters (:func:`range_predicate`); ``TRUE`` for a chunk
        without key columns (the whole table)."""
        if not self.key_columns:
            return "TRUE", []
        return range_predicate(self.key_columns, self.key_range)

    def select_query(
        self, columns: Sequence[str] | None = None, *, expressions: Sequence[str] | None = None
    ) -> tuple[str, list[Any]]:
        """``SELECT`` of the chunk's rows in key order, and parameters: the named ``columns``, or raw SQL
        ``expressions`` (e.g. :func:`select_expressions`), or all columns when both are None. A chunk
        without key columns reads the table in the server's order."""
        if expressions is not None:
            selected = ", ".join(expression.replace("%", "%%") for expression in expressions)
        else:
            selected = "*" if columns is None else ", ".join(quote_identifier(c).replace("%", "%%") for c in columns)
        where, params = self.predicate()
        table = _table(self.database, self.table).replace("%", "%%")
        if not self.key_columns:
            return f"SELECT {selected} FROM {table} WHERE {where}", params
        order = key_order(self.key_columns).replace("%", "%%")
        return f"SELECT {selected} FROM {table} WHERE {where} ORDER BY {order}", params

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict for XCom / mapped-task arguments; :meth:`from_json` reverses it."""
        return {
            "database": self.database,
            "table": self.table,
            "key_columns": list(self.key_columns),
            "chunk_no": self.chunk_no,
            "key_range": self.key_range.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SnapshotChunk:
        """Rebuild a chunk from :meth:`to_json`; raise :class:`ConfigurationError` when malformed."""
        expected = {"database", "table", "key_columns", "chunk_no", "key_range"}
        if not isinstance(data, Mapping) or set(data) != expected:
            raise ConfigurationError(
                f"{data!r} is not a serialized SnapshotChunk (expected keys {sorted(expected)}); "
                "pass SnapshotChunk.to_json()"
            )
        key_columns = data["key_columns"]
        if not isinstance(key_columns, list | tuple):
            raise ConfigurationError(f"key_columns must be a list of column names, got {key_columns!r}")
        return cls(
            database=data["database"],
            table=data["table"],
            key_columns=tuple(key_columns),
            chunk_no=data["chunk_no"],
            key_range=KeyRange.from_json(data["key_range"]),
        )


def plan_snapshot_chunks(
    database: str, table: str, key_columns: Sequence[str], boundaries: Sequence[Sequence[KeyValue]]
) -> tuple[SnapshotChunk, ...]:
    """The :class:`SnapshotChunk` of each range of ``plan_chunks(boundaries)``, numbered from 0."""
    columns = tuple(key_columns)
    ranges = plan_chunks(boundaries)
    if ranges[0].arity is not None and ranges[0].arity != len(columns):
        raise ConfigurationError(
            f"{database}.{table}: boundaries have {ranges[0].arity} values but key_columns {list(columns)!r} "
            f"name {len(columns)} columns"
        )
    return tuple(SnapshotChunk(database, table, columns, number, key_range) for number, key_range in enumerate(ranges))
