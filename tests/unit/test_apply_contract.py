"""The apply contract (apply/contract.py): ApplySpec and ApplyReport, validated, and their versioned
JSON forms read back as written; another version or unknown fields are refused with a named error."""

from __future__ import annotations

import json

import pytest

from airflow_provider_mysql_cdc.apply.contract import (
    APPLY_REPORT_FORMAT,
    APPLY_SPEC_FORMAT,
    ApplyReport,
    ApplySpec,
    TableReport,
    parse_windows,
)
from airflow_provider_mysql_cdc.errors import ApplyContractError, ConfigurationError, TerminalCdcError

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_windows_are_one_id_or_a_range() -> None:
    assert parse_windows("5") == (5, 5)
    assert parse_windows(" 3-5 ") == (3, 5)
    with pytest.raises(ConfigurationError, match="N or N-M"):
        parse_windows("three")
    spec = ApplySpec.for_windows("p", "/s", "2-4")
    assert (spec.first_window, spec.last_window, spec.window_ids) == (2, 4, [2, 3, 4])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"first_window": 0}, "not a valid range"),
        ({"first_window": 5, "last_window": 4}, "not a valid range"),
        ({"schema_change_policy": "ignore"}, "schema_change_policy must be one of"),
        ({"target_template": "{database}.fixed"}, "must contain {table}"),
        ({"parallel_tables": 0}, "parallel_tables must be at least 1, not 0"),
    ],
)
def test_a_spec_validates_itself(settings: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"pipeline": "p", "staging_uri": "/s", "first_window": 1, "last_window": 1}
    with pytest.raises(ConfigurationError, match=message):
        ApplySpec(**{**fields, **settings})  # type: ignore[arg-type]


def test_a_spec_round_trips_through_json() -> None:
    spec = ApplySpec(
        "shop",
        "s3://bucket/staging",
        3,
        5,
        catalog="prod",
        target_template="raw_{database}.{table}",
        history=("shop.orders", "shop.*_log"),
        history_suffix="_cl",
        drop_dropped_columns=True,
        schema_change_policy="stop",
        chunks_per_commit=2,
        parallel_tables=3,
        report_uri="s3://bucket/staging/shop/apply-reports/r-try1.json",
    )
    text = spec.to_json()
    assert json.loads(text)["spec_format"] == APPLY_SPEC_FORMAT
    assert ApplySpec.from_json(text, "spec.json") == spec
    assert spec.keeps_history("shop.audit_log") and not spec.keeps_history("shop.items")
    assert spec.target("shop.orders", "_cl") == "`prod`.`raw_shop`.`orders_cl`"


def test_a_mysql_name_with_dots_or_backquotes_stays_one_part_of_the_target_name() -> None:
    """The template's dots make the namespace levels; the names filled in are never split, so two MySQL
    tables (`a`.`b.c` and `a.b`.`c`) cannot both land in `a`.`b`.`c`."""
    spec = ApplySpec("shop", "/staging", 1, 1, catalog="lake")
    assert spec.target("shop.t.dot") == "`lake`.`shop`.`t.dot`"
    assert spec.target("shop.or`der", "_cl") == "`lake`.`shop`.`or``der_cl`"
    nested = ApplySpec("shop", "/staging", 1, 1, catalog="lake", target_template="raw.{database}.{table}_v1")
    assert nested.target("shop.t.x") == "`lake`.`raw`.`shop`.`t.x_v1`"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(spec_format=APPLY_SPEC_FORMAT + 1), "has format 2, this provider reads format 1"),
        (lambda d: d.pop("spec_format"), "has format None"),
        (lambda d: d.update(max_rows=5), r"unknown fields \['max_rows'\]"),
        (lambda d: d.pop("pipeline"), "is incomplete"),
    ],
)
def test_a_spec_of_another_version_is_refused_with_the_fix(edit: object, message: str) -> None:
    document = json.loads(ApplySpec("p", "/s", 1, 1).to_json())
    edit(document)  # type: ignore[operator]
    with pytest.raises(ApplyContractError, match=message) as raised:
        ApplySpec.from_json(json.dumps(document), "s3://b/p/apply-specs/r-try1.json")
    assert isinstance(raised.value, TerminalCdcError)
    assert "s3://b/p/apply-specs/r-try1.json" in str(raised.value)
    assert "same airflow-provider-mysql-cdc version on the Spark driver" in str(raised.value)


def test_text_that_is_no_json_object_is_refused() -> None:
    with pytest.raises(ApplyContractError, match="not valid JSON"):
        ApplySpec.from_json("{", "x")
    with pytest.raises(ApplyContractError, match="not a JSON object"):
        ApplyReport.from_json("[1]", "x")


def test_a_report_round_trips_and_names_its_failed_tables() -> None:
    applied = TableReport("`lake`.`db`.`a`", status="applied", windows_applied=[4], rows={"c": 2, "d": 1})
    applied.state = {"pipeline": "p", "window_id": 4, "upper": f"{U}:1-9"}
    failed = TableReport("`lake`.`db`.`b`", status="failed", error="copy missing", error_class="TargetDivergedError")
    waiting = TableReport("`lake`.`db`.`c`", rebuild="window 4 (GTID x): a retype")
    report = ApplyReport("p", 4, 4, f"{U}:1-9", {"db.b": failed, "db.a": applied, "db.c": waiting})
    assert report.failed == ["db.b"]
    text = report.to_json()
    document = json.loads(text)
    assert document["report_format"] == APPLY_REPORT_FORMAT
    assert document["failed"] == ["db.b"]  # written for readers of the file
    assert document["tables"]["db.a"]["rows"] == {"c": 2, "d": 1}
    assert ApplyReport.from_json(text, "report.json") == report


def test_a_report_with_an_unknown_table_field_is_refused() -> None:
    document = json.loads(ApplyReport("p", 1, 1, "", {"db.a": TableReport("t")}).to_json())
    document["tables"]["db.a"]["colour"] = "red"
    with pytest.raises(ApplyContractError, match=r"unknown fields \['colour'\]"):
        ApplyReport.from_json(json.dumps(document), "report.json")
