"""Which key ranges a verification checks, and which of them it compares row by row (pure).

A table's rows are split into ``ranges`` hash buckets of their key (each row's bucket is a hash of its
key columns, the same on both sides). Every checked range gets a checksum on each side (its row count
and the sum of its rows' hashes); only the ranges whose checksums differ are compared row by row, as
many as the row budget allows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_mysql_cdc.errors import ConfigurationError

#: Rows per range a table is split into by default.
DEFAULT_ROWS_PER_RANGE = 10_000
#: Most ranges a table is split into.
MAX_RANGES = 4096
#: Rows compared row by row per table at most (both sides counted), by default.
DEFAULT_ROW_BUDGET = 1_000_000


@dataclass(frozen=True)
class RangePlan:
    """The ranges of one table and the ones a verification checks."""

    ranges: int
    checked: tuple[int, ...]
    fraction: float
    seed: int

    @property
    def sampled(self) -> bool:
        """True when only some of the ranges are checked."""
        return len(self.checked) < self.ranges


def range_count(rows: int, rows_per_range: int = DEFAULT_ROWS_PER_RANGE, max_ranges: int = MAX_RANGES) -> int:
    """How many hash ranges a table of ``rows`` rows is split into: about ``rows_per_range`` rows each,
    at least 1, at most ``max_ranges``."""
    if rows_per_range < 1 or max_ranges < 1:
        raise ConfigurationError("rows_per_range and max_ranges must be at least 1")
    return max(1, min(max_ranges, math.ceil(rows / rows_per_range)))


def plan_ranges(ranges: int, fraction: float = 1.0, seed: int = 0) -> RangePlan:
    """Check every range (``fraction`` 1.0) or a seeded random sample of ``ceil(fraction * ranges)`` of
    them (at least one); the same seed picks the same ranges."""
    if ranges < 1:
        raise ConfigurationError(f"a table has at least one range, got {ranges}")
    if not 0.0 < fraction <= 1.0:
        raise ConfigurationError(f"sample_fraction must be in (0, 1], got {fraction!r}")
    if fraction >= 1.0:
        return RangePlan(ranges, tuple(range(ranges)), 1.0, seed)
    chosen = random.Random(seed).sample(range(ranges), max(1, math.ceil(fraction * ranges)))
    return RangePlan(ranges, tuple(sorted(chosen)), fraction, seed)


@dataclass(frozen=True)
class RangeChecksum:
    """One side's checksum of one range: its row count and the sum of its rows' 64-bit hashes."""

    range_id: int
    rows: int
    digest: int


def differing_ranges(
    checked: Sequence[int], source: Mapping[int, RangeChecksum], target: Mapping[int, RangeChecksum]
) -> tuple[int, ...]:
    """The checked ranges whose checksums differ (a range absent on one side has no rows there)."""
    empty = RangeChecksum(-1, 0, 0)
    return tuple(
        range_id
        for range_id in checked
        if (source.get(range_id, empty).rows, source.get(range_id, empty).digest)
        != (target.get(range_id, empty).rows, target.get(range_id, empty).digest)
    )


def within_budget(
    differing: Sequence[int],
    source: Mapping[int, RangeChecksum],
    target: Mapping[int, RangeChecksum],
    row_budget: int,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Split the differing ranges into those compared row by row and those left over: ranges are taken
    in order while their rows (both sides) fit ``row_budget``; the first one is always taken, so a
    difference is always named."""
    if row_budget < 1:
        raise ConfigurationError(f"row_budget must be at least 1, got {row_budget}")
    compared: list[int] = []
    used = 0
    for index, range_id in enumerate(differing):
        cost = sum(side[range_id].rows for side in (source, target) if range_id in side)
        if compared and used + cost > row_budget:
            return tuple(compared), tuple(differing[index:])
        compared.append(range_id)
        used += cost
    return tuple(compared), ()
