"""The apply's ``partitioning`` setting: parsing, which fields a table gets, checks and evolution."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.partitioning import (
    PartitionField,
    configured_fields,
    evolution_statements,
    field_of_iceberg,
    fields_that_fit,
    parse_field,
    parse_partitioning,
    partition_clause,
    require_columns,
)
from airflow_provider_mysql_cdc.errors import ConfigurationError


@pytest.mark.parametrize(
    ("text", "field", "sql"),
    [
        ("kind", PartitionField("identity", "kind"), "`kind`"),
        ("bucket(16, id)", PartitionField("bucket", "id", 16), "bucket(16, `id`)"),
        (" BUCKET( 8 ,`a b` ) ", PartitionField("bucket", "a b", 8), "bucket(8, `a b`)"),
        ("truncate(3, name)", PartitionField("truncate", "name", 3), "truncate(3, `name`)"),
        ("years(d)", PartitionField("years", "d"), "years(`d`)"),
        ("months(d)", PartitionField("months", "d"), "months(`d`)"),
        ("days(created_at)", PartitionField("days", "created_at"), "days(`created_at`)"),
        ("hours(`x``y`)", PartitionField("hours", "x`y"), "hours(`x``y`)"),
    ],
)
def test_a_field_is_read_as_spark_sql_writes_it(text: str, field: PartitionField, sql: str) -> None:
    assert parse_field(text) == field
    assert field.sql() == sql
    assert parse_field(sql) == field


@pytest.mark.parametrize(
    "text",
    ["", "bucket(id)", "bucket(0, id)", "bucket(-1, id)", "days()", "day(d)", "foo(id)", "a b", "`open", "days(a, b)"],
)
def test_a_field_written_wrong_is_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ConfigurationError, match=r"is not one of: a column, bucket\(N, column\)"):
        parse_field(text)


def test_the_setting_maps_patterns_to_lists_of_fields() -> None:
    assert parse_partitioning({"shop.*": ["bucket(4, id)"], "shop.log": []}) == {
        "shop.*": (PartitionField("bucket", "id", 4),),
        "shop.log": (),
    }
    with pytest.raises(ConfigurationError, match="must be a list"):
        parse_partitioning({"shop.orders": "days(created)"})
    with pytest.raises(ConfigurationError, match=r"not a 'db\.table' pattern"):
        parse_partitioning({"orders": ["id"]})
    with pytest.raises(ConfigurationError, match="the same field twice"):
        parse_partitioning({"shop.orders": ["bucket(4, id)", "bucket(8, id)"]})


def test_a_table_gets_the_fields_of_the_patterns_that_name_it() -> None:
    setting = {"shop.orders": ["days(created)"], "shop.ord*": ["days(created)"], "shop.*_log": []}
    assert configured_fields(setting, "shop.orders") == (PartitionField("days", "created"),)
    assert configured_fields(setting, "shop.audit_log") == ()
    assert configured_fields(setting, "shop.customers") is None
    assert configured_fields({}, "shop.orders") is None
    with pytest.raises(ConfigurationError, match=r"matches partitioning patterns \['shop.\*', 'shop.orders'\]"):
        configured_fields({"shop.orders": ["id"], "shop.*": ["bucket(2, id)"]}, "shop.orders")


def test_fields_must_name_columns_of_a_type_their_transform_takes() -> None:
    types = {
        "id": "bigint",
        "created": "timestamp",
        "day": "date",
        "kind": "string",
        "price": "decimal(10,2)",
        "f": "double",
    }
    require_columns(
        "shop.t",
        [parse_field(t) for t in ("bucket(4, id)", "hours(created)", "days(day)", "truncate(2, price)", "f")],
        types,
    )
    with pytest.raises(
        ConfigurationError, match=r"names column 'missing', which the table does not have \(its columns: id, "
    ):
        require_columns("shop.t", [parse_field("missing")], types)
    with pytest.raises(
        ConfigurationError, match=r"hours\(`day`\) needs a column of type timestamp, timestamp_ntz; 'day' is date"
    ):
        require_columns("shop.t", [parse_field("hours(day)")], types)
    with pytest.raises(ConfigurationError, match=r"bucket\(2, `f`\) needs a column of type"):
        require_columns("shop.t", [parse_field("bucket(2, f)")], types)
    with pytest.raises(ConfigurationError, match=r"`v` needs a column of type other than array, map and struct"):
        require_columns("shop.t", [parse_field("v")], {"v": "array<float>"})
    fields = [parse_field(t) for t in ("bucket(4, id)", "days(kind)", "gone")]
    assert fields_that_fit(fields, types) == (PartitionField("bucket", "id", 4),)


def test_iceberg_fields_read_back_and_a_dropped_one_is_left_out() -> None:
    assert field_of_iceberg("bucket[16]", "id") == PartitionField("bucket", "id", 16)
    assert field_of_iceberg("truncate[4]", "name") == PartitionField("truncate", "name", 4)
    assert field_of_iceberg("day", "created") == PartitionField("days", "created")
    assert field_of_iceberg("identity", "kind") == PartitionField("identity", "kind")
    assert field_of_iceberg("void", "kind") is None


def test_evolution_drops_what_is_not_wanted_then_adds_what_is_missing() -> None:
    current = [PartitionField("bucket", "id", 4), PartitionField("days", "created")]
    wanted = [PartitionField("days", "created"), PartitionField("identity", "kind")]
    assert evolution_statements("lake.s.t", current, wanted) == [
        "ALTER TABLE lake.s.t DROP PARTITION FIELD bucket(4, `id`)",
        "ALTER TABLE lake.s.t ADD PARTITION FIELD `kind`",
    ]
    assert evolution_statements("lake.s.t", wanted, list(reversed(wanted))) == []
    assert partition_clause(wanted) == " PARTITIONED BY (days(`created`), `kind`)"
    assert partition_clause([]) == ""


def test_the_apply_spec_carries_the_setting_and_refuses_it_written_wrong() -> None:
    spec = ApplySpec("p", "/staging", 1, 2, partitioning={"shop.*": ("bucket(4, id)",)})
    assert ApplySpec.from_json(spec.to_json(), "spec.json") == spec
    assert spec.partitioning == {"shop.*": ["bucket(4, id)"]}
    assert ApplySpec("p", "/staging", 1, 1).partitioning == {}
    with pytest.raises(ConfigurationError, match="'weeks\\(created\\)' is not one of"):
        ApplySpec("p", "/staging", 1, 1, partitioning={"shop.orders": ["weeks(created)"]})
