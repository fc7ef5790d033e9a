"""GTID sets as MySQL defines them, including tagged GTIDs (MySQL 8.3+).

A GTID names one transaction: ``source_uuid:number`` or, tagged, ``source_uuid:tag:number``.
A GTID set is what ``@@gtid_executed`` prints::

    3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:11-18:etl:1-3,
    4e11fa47-71ca-11e1-9e33-c80aa9429562:7

Within one source UUID the untagged intervals come first, then one ``:tag:intervals`` group per tag
in tag order; tags are case-insensitive and kept in lower case, as the server does.

Parsing is stricter than the server's in one respect, on purpose: MySQL's parser quietly drops
some malformed pieces (``uuid:5-3``, a bare ``uuid``, a tag with no numbers, empty elements between
commas) where this module raises, because a frontier that lost transactions without a word is the
one thing a CDC pipeline must never accept. Everything the server prints is accepted.

This module is pure: no Airflow, Spark, network or python-mysql-replication import (that library's
own ``GtidSet`` gets containment wrong and rejects tags).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from airflow_provider_mysql_cdc.errors import InvalidGtidSetError

#: Largest transaction number MySQL accepts in a GTID (``GNO_END - 1``).
MAX_TRANSACTION_NUMBER = 2**63 - 2

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_NUMBER = re.compile(r"[0-9]+")
_INTERVAL = re.compile(r"([0-9]+)(?:\s*-\s*([0-9]+))?")

Interval = tuple[int, int]
"""A closed range ``(first, last)`` of transaction numbers, ``1 <= first <= last``."""

SourceKey = tuple[str, str]
"""``(source_uuid, tag)`` in lower case; the tag is ``""`` for untagged GTIDs."""


def _bad(text: str, why: str) -> InvalidGtidSetError:
    return InvalidGtidSetError(f"invalid GTID set {text!r}: {why}")


def _parse_number(token: str, whole: str) -> int:
    if not _NUMBER.fullmatch(token):
        raise _bad(whole, f"{token!r} is not a transaction number")
    number = int(token)
    if not 1 <= number <= MAX_TRANSACTION_NUMBER:
        raise _bad(whole, f"transaction number {token} is outside 1..{MAX_TRANSACTION_NUMBER}")
    return number


def _normalize(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sort intervals and merge the ones that overlap or touch."""
    merged: list[list[int]] = []
    for first, last in sorted(intervals):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return tuple((first, last) for first, last in merged)


def _intersect(left: tuple[Interval, ...], right: tuple[Interval, ...]) -> tuple[Interval, ...]:
    result: list[Interval] = []
    i = j = 0
    while i < len(left) and j < len(right):
        first = max(left[i][0], right[j][0])
        last = min(left[i][1], right[j][1])
        if first <= last:
            result.append((first, last))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return tuple(result)


def _subtract(left: tuple[Interval, ...], right: tuple[Interval, ...]) -> tuple[Interval, ...]:
    result: list[Interval] = []
    j = 0
    for first, last in left:
        start = first
        while j < len(right) and right[j][1] < start:
            j += 1
        k = j
        while k < len(right) and right[k][0] <= last:
            if right[k][0] > start:
                result.append((start, right[k][0] - 1))
            start = max(start, right[k][1] + 1)
            k += 1
        if start <= last:
            result.append((start, last))
    return tuple(result)


def _format_intervals(intervals: tuple[Interval, ...]) -> str:
    return ":".join(str(a) if a == b else f"{a}-{b}" for a, b in intervals)


@dataclass(frozen=True, order=True)
class Gtid:
    """One transaction's global id: ``source_uuid[:tag]:number``."""

    source_uuid: str
    tag: str
    number: int

    @classmethod
    def parse(cls, text: str) -> Gtid:
        """Parse ``"uuid:n"`` or ``"uuid:tag:n"``; raise :class:`InvalidGtidSetError` otherwise."""
        tokens = [token.strip() for token in text.strip().split(":")]
        if len(tokens) not in (2, 3) or not _UUID.fullmatch(tokens[0]):
            raise InvalidGtidSetError(f"invalid GTID {text!r}: expected 'uuid:number' or 'uuid:tag:number'")
        tag = ""
        if len(tokens) == 3:
            if not _TAG.fullmatch(tokens[1]):
                raise InvalidGtidSetError(f"invalid GTID {text!r}: {tokens[1]!r} is not a GTID tag")
            tag = tokens[1].lower()
        return cls(tokens[0].lower(), tag, _parse_number(tokens[-1], text))

    def __str__(self) -> str:
        if self.tag:
            return f"{self.source_uuid}:{self.tag}:{self.number}"
        return f"{self.source_uuid}:{self.number}"


class GtidSet:
    """An immutable, hashable set of GTIDs with MySQL's text form as ``str()``.

    Build one with :meth:`parse` (anything the server prints for ``@@gtid_executed``) or
    :meth:`from_intervals`. Supports ``|``, ``&``, ``-``, ``<=``/:meth:`issubset`, ``>=``,
    ``in`` (for a :class:`Gtid` or its text), ``len()`` (number of transactions), ``==`` and ``hash``.
    """

    __slots__ = ("_hash", "_sources")

    _sources: tuple[tuple[SourceKey, tuple[Interval, ...]], ...]
    _hash: int

    def __init__(self, sources: Mapping[SourceKey, Iterable[Interval]] | None = None) -> None:
        cleaned: dict[SourceKey, tuple[Interval, ...]] = {}
        for (uuid, tag), intervals in (sources or {}).items():
            if not _UUID.fullmatch(uuid):
                raise InvalidGtidSetError(f"invalid GTID source UUID {uuid!r}")
            if tag and not _TAG.fullmatch(tag):
                raise InvalidGtidSetError(f"invalid GTID tag {tag!r}")
            checked = []
            for first, last in intervals:
                if not 1 <= first <= last <= MAX_TRANSACTION_NUMBER:
                    raise InvalidGtidSetError(f"invalid GTID interval {first}-{last} for {uuid}")
                checked.append((first, last))
            key = (uuid.lower(), tag.lower())
            merged = _normalize([*cleaned.get(key, ()), *checked])
            if merged:
                cleaned[key] = merged
        object.__setattr__(self, "_sources", tuple(sorted(cleaned.items())))
        object.__setattr__(self, "_hash", hash(self._sources))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("GtidSet is immutable")

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | None) -> GtidSet:
        """Parse MySQL's GTID-set text; raise :class:`InvalidGtidSetError` quoting bad input.

        Accepts newlines and spaces around separators, upper- or lower-case UUIDs, unsorted,
        repeated or overlapping intervals, tagged groups, and the empty string (the empty set).
        """
        if text is None:
            return cls()
        if not isinstance(text, str):
            raise InvalidGtidSetError(f"invalid GTID set {text!r}: expected a string")
        sources: dict[SourceKey, list[Interval]] = {}
        if not text.strip():
            return cls()
        for part in text.split(","):
            tokens = [token.strip() for token in part.split(":")]
            if not tokens[0]:
                raise _bad(text, "empty element (stray comma?)")
            if not _UUID.fullmatch(tokens[0]):
                raise _bad(text, f"{tokens[0]!r} is not a source UUID")
            uuid = tokens[0].lower()
            if len(tokens) == 1:
                raise _bad(text, f"source {tokens[0]!r} has no transaction numbers")
            tag = ""
            numbers_since_tag = 0
            for token in tokens[1:]:
                interval = _INTERVAL.fullmatch(token)
                if interval:
                    first = _parse_number(interval.group(1), text)
                    last = _parse_number(interval.group(2), text) if interval.group(2) else first
                    if last < first:
                        raise _bad(text, f"interval {token!r} ends before it starts")
                    sources.setdefault((uuid, tag), []).append((first, last))
                    numbers_since_tag += 1
                elif _TAG.fullmatch(token):
                    if tag and numbers_since_tag == 0:
                        raise _bad(text, f"tag {tag!r} has no transaction numbers")
                    tag = token.lower()
                    numbers_since_tag = 0
                else:
                    raise _bad(text, f"{token!r} is neither an interval nor a tag")
            if numbers_since_tag == 0:
                raise _bad(text, f"{(tag or tokens[0])!r} has no transaction numbers")
        return cls(sources)

    @classmethod
    def from_intervals(cls, sources: Mapping[SourceKey, Iterable[Interval]]) -> GtidSet:
        """Build a set from ``{(uuid, tag): [(first, last), ...]}`` (tag ``""`` when untagged)."""
        return cls(sources)

    @classmethod
    def of(cls, gtids: Iterable[Gtid | str]) -> GtidSet:
        """Build a set from single GTIDs."""
        sources: dict[SourceKey, list[Interval]] = {}
        for item in gtids:
            gtid = item if isinstance(item, Gtid) else Gtid.parse(item)
            sources.setdefault((gtid.source_uuid, gtid.tag), []).append((gtid.number, gtid.number))
        return cls(sources)

    # -- inspection -----------------------------------------------------------------------------

    @property
    def sources(self) -> dict[SourceKey, tuple[Interval, ...]]:
        """``{(uuid, tag): intervals}`` in canonical order."""
        return dict(self._sources)

    def intervals(self, source_uuid: str, tag: str = "") -> tuple[Interval, ...]:
        """The merged intervals of one source UUID and tag (empty if absent)."""
        return dict(self._sources).get((source_uuid.lower(), tag.lower()), ())

    def is_empty(self) -> bool:
        """True when the set holds no transaction."""
        return not self._sources

    def __bool__(self) -> bool:
        return bool(self._sources)

    def __len__(self) -> int:
        return sum(last - first + 1 for _, intervals in self._sources for first, last in intervals)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            item = Gtid.parse(item)
        if not isinstance(item, Gtid):
            return False
        return any(first <= item.number <= last for first, last in self.intervals(item.source_uuid, item.tag))

    def __iter__(self) -> Iterator[Gtid]:
        """Every GTID of the set in canonical order (beware of very large sets)."""
        for (uuid, tag), intervals in self._sources:
            for first, last in intervals:
                for number in range(first, last + 1):
                    yield Gtid(uuid, tag, number)

    # -- algebra --------------------------------------------------------------------------------

    def union(self, other: GtidSet) -> GtidSet:
        """Transactions in either set."""
        merged: dict[SourceKey, list[Interval]] = {}
        for key, intervals in (*self._sources, *other._sources):
            merged.setdefault(key, []).extend(intervals)
        return GtidSet(merged)

    def intersection(self, other: GtidSet) -> GtidSet:
        """Transactions in both sets."""
        theirs = dict(other._sources)
        return GtidSet({key: _intersect(mine, theirs[key]) for key, mine in self._sources if key in theirs})

    def difference(self, other: GtidSet) -> GtidSet:
        """Transactions in this set and not in ``other`` (MySQL's ``GTID_SUBTRACT``)."""
        theirs = dict(other._sources)
        return GtidSet({key: _subtract(mine, theirs.get(key, ())) for key, mine in self._sources})

    def issubset(self, other: GtidSet) -> bool:
        """True when every transaction of this set is in ``other`` (MySQL's ``GTID_SUBSET``)."""
        return self.difference(other).is_empty()

    def issuperset(self, other: GtidSet) -> bool:
        """True when every transaction of ``other`` is in this set."""
        return other.issubset(self)

    def __or__(self, other: object) -> GtidSet:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.union(other)

    def __and__(self, other: object) -> GtidSet:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.intersection(other)

    def __sub__(self, other: object) -> GtidSet:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.difference(other)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self.issubset(other)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self != other and self.issubset(other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return other.issubset(self)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self != other and other.issubset(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._sources == other._sources

    def __hash__(self) -> int:
        return self._hash

    # -- text -----------------------------------------------------------------------------------

    def _source_texts(self) -> list[str]:
        texts: list[str] = []
        current_uuid = ""
        for (uuid, tag), intervals in self._sources:
            group = f"{tag}:{_format_intervals(intervals)}" if tag else _format_intervals(intervals)
            if uuid == current_uuid:
                texts[-1] += f":{group}"
            else:
                texts.append(f"{uuid}:{group}")
                current_uuid = uuid
        return texts

    def __str__(self) -> str:
        """Canonical one-line form, e.g. ``uuid:1-5:7-9:tag:1-3,uuid2:4``."""
        return ",".join(self._source_texts())

    def to_mysql_text(self) -> str:
        """The form ``@@gtid_executed`` prints: like ``str()`` with ``",\\n"`` between sources."""
        return ",\n".join(self._source_texts())

    def __repr__(self) -> str:
        return f"GtidSet({str(self)!r})"


#: ``@@GLOBAL.gtid_owned`` gives each GTID its owner thread (``uuid:5#14:4#13``); a thread id runs
#: straight into the next source's UUID (``uuid:3#12<uuid>:tg:1#15``: MySQL 9.7 prints no comma there).
_OWNER_BEFORE_SOURCE = re.compile(rf"#[0-9]+?(?={_UUID.pattern})")
_OWNER = re.compile(r"#[0-9]+(?=\s*(?:[:,]|$))")


def parse_owned_gtids(text: str | None) -> GtidSet:
    """The GTIDs of ``@@GLOBAL.gtid_owned``'s text (owner thread ids dropped); raise
    :class:`InvalidGtidSetError` when the text is not that format."""
    plain = _OWNER.sub("", _OWNER_BEFORE_SOURCE.sub(",", text or ""))
    if "#" in plain:
        raise _bad(str(text), "an owner thread id is not where gtid_owned puts one")
    return GtidSet.parse(plain)


GtidSetLike = GtidSet | str | None


def as_gtid_set(value: GtidSetLike) -> GtidSet:
    """Accept a :class:`GtidSet`, its text, or ``None`` (the empty set)."""
    if isinstance(value, GtidSet):
        return value
    return GtidSet.parse(value)
