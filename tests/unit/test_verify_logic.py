"""The verify operator's pure logic: range planning, checksum comparison, the row budget, the report."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest

from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.verify.ranges import (
    RangeChecksum,
    differing_ranges,
    plan_ranges,
    range_count,
    within_budget,
)
from airflow_provider_mysql_cdc.verify.report import (
    KeyDifference,
    TableVerification,
    VerifyReport,
    json_safe,
    key_differences,
)


def test_range_count_follows_rows_per_range_within_bounds() -> None:
    assert [range_count(rows, 100, 8) for rows in (0, 1, 100, 101, 5000)] == [1, 1, 1, 2, 8]
    with pytest.raises(ConfigurationError):
        range_count(10, 0)


def test_a_full_plan_checks_every_range_and_a_sample_is_seeded() -> None:
    assert plan_ranges(5).checked == (0, 1, 2, 3, 4) and not plan_ranges(5).sampled
    sample = plan_ranges(100, 0.1, seed=3)
    assert sample.sampled and len(sample.checked) == 10 and list(sample.checked) == sorted(set(sample.checked))
    assert plan_ranges(100, 0.1, seed=3) == sample
    assert plan_ranges(100, 0.1, seed=4).checked != sample.checked
    assert len(plan_ranges(3, 0.01).checked) == 1
    for fraction in (0.0, 1.5, -1.0):
        with pytest.raises(ConfigurationError):
            plan_ranges(4, fraction)


def _sums(*items: tuple[int, int, int]) -> dict[int, RangeChecksum]:
    return {r: RangeChecksum(r, rows, digest) for r, rows, digest in items}


def test_ranges_differ_by_count_or_digest_and_absent_ranges_are_empty() -> None:
    source = _sums((0, 3, 10), (1, 2, 5), (2, 1, 7), (4, 1, 1))
    target = _sums((0, 3, 10), (1, 2, 6), (2, 2, 7), (3, 1, 1))
    assert differing_ranges(range(5), source, target) == (1, 2, 3, 4)
    assert differing_ranges([0, 1], source, target) == (1,)


def test_the_row_budget_always_takes_the_first_range() -> None:
    source = _sums((1, 50, 0), (2, 30, 0), (3, 10, 0))
    target = _sums((1, 60, 0), (2, 30, 0))
    assert within_budget([1, 2, 3], source, target, 10) == ((1,), (2, 3))
    assert within_budget([1, 2, 3], source, target, 170) == ((1, 2), (3,))
    assert within_budget([1, 2, 3], source, target, 1000) == ((1, 2, 3), ())
    with pytest.raises(ConfigurationError):
        within_budget([1], source, target, 0)


def test_key_values_become_json_safe() -> None:
    values = [1, "a", None, 1.5, float("nan"), dt.date(2024, 1, 2), decimal.Decimal("1.50"), b"\x00\xff", {"k": [1]}]
    assert json_safe(values) == [1, "a", None, 1.5, "nan", "2024-01-02", "1.50", "base64:AP8=", {"k": [1]}]


def _table(**fields: object) -> TableVerification:
    base: dict[str, object] = {
        "table": "shop.orders",
        "target": "`lake`.`shop`.`orders`",
        "gtid_set": "u:1-20",
        "target_frontier": "u:1-12",
        "ranges": 4,
        "ranges_checked": (0, 1, 2, 3),
    }
    return TableVerification(**{**base, **fields})  # type: ignore[arg-type]


def test_the_report_round_trips_through_json_and_names_the_differences() -> None:
    differences = key_differences(
        [{"id": 7, "kind": "changed", "columns": ["total"]}, {"id": 9, "kind": "missing", "columns": []}], ["id"]
    )
    differing = _table(ranges_differing=(2,), changed_rows=1, missing_rows=1, differences=differences)
    report = VerifyReport("shop", (_table(), differing, _table(table="shop.gone", problem="no such table")), 0.5, 3, 10)
    data = report.as_xcom()
    assert data == json.loads(json.dumps(data)) and isinstance(data["tables"], list)
    assert VerifyReport.from_xcom(data) == report
    assert report.mode == "sampled" and data["mode"] == "sampled"
    assert report.differing == (differing,) and [t.table for t in report.unverified] == ["shop.gone"]
    assert differences[0] == KeyDifference({"id": 7}, "changed", ("total",))
    message = report.difference_message()
    for part in (
        "'shop'",
        "shop.orders",
        "u:1-20",
        "id=7 changed (total)",
        "id=9 missing",
        "resnapshot=['shop.orders']",
    ):
        assert part in message
    text = report.describe()
    assert "shop.orders as of u:1-20 (4 of 4 ranges, 0 rows): equal" in text
    assert "DIFFERENT: 1 missing" in text and "shop.gone: NOT VERIFIED: no such table" in text


def test_requests_refuse_what_cannot_be_verified() -> None:
    from datetime import UTC, datetime

    from airflow_provider_mysql_cdc.capture.request import CaptureRequest
    from airflow_provider_mysql_cdc.core.gtid import GtidSet
    from airflow_provider_mysql_cdc.core.windows import CutoffRule
    from airflow_provider_mysql_cdc.verify.engine import VerifyRequest

    assert VerifyRequest("shop", ("shop.orders",), sample_fraction=0.5).sample_fraction == 0.5
    for settings in ({"tables": ()}, {"sample_fraction": 0.0}, {"row_budget": 0}, {"max_keys": -1}):
        with pytest.raises(ConfigurationError):
            VerifyRequest(**{"pipeline": "shop", "tables": ("shop.orders",), **settings})  # type: ignore[arg-type]
    upper = GtidSet.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5")
    request = CaptureRequest("verify-x", "verify", "/tmp/s", cutoff=CutoffRule.CATCH_UP, upper_bound=upper)
    assert request.upper_bound == upper
    with pytest.raises(ConfigurationError, match="catch_up"):
        CaptureRequest("verify-x", "verify", "/tmp/s", data_interval_end=datetime.now(UTC), upper_bound=upper)
