"""Pure logic of table maintenance: the procedure calls, what expiration keeps, the spec and report
contract, when a run maintains, the operator's failure mapping and the factory option."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_mysql_cdc.apply import maintenance_sql
from airflow_provider_mysql_cdc.apply.contract import MaintenanceReport, MaintenanceSpec, TableMaintenance
from airflow_provider_mysql_cdc.errors import (
    ApplyContractError,
    ConfigurationError,
    TerminalCdcError,
    TransientCdcError,
    WarehouseUnreachableError,
)
from airflow_provider_mysql_cdc.operators.maintenance import IcebergMaintenanceOperator, maintenance_due
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

NOON = datetime(2026, 3, 1, 12, 0, 0, 123456)


def test_procedure_calls_name_the_catalog_quote_the_table_and_escape_literals() -> None:
    assert maintenance_sql.rewrite_data_files("lake", "shop.orders", {"min-input-files": "2", "a": "b"}) == (
        "CALL `lake`.system.rewrite_data_files(table => '`shop`.`orders`', "
        "options => map('a', 'b', 'min-input-files', '2'))"
    )
    assert maintenance_sql.rewrite_position_delete_files("lake", "shop.o", {}) == (
        "CALL `lake`.system.rewrite_position_delete_files(table => '`shop`.`o`')"  # an empty map is left out
    )
    assert maintenance_sql.expire_snapshots("lake", "shop.o", NOON, 3) == (
        "CALL `lake`.system.expire_snapshots(table => '`shop`.`o`', "
        "older_than => TIMESTAMP '2026-03-01 12:00:00.123456', retain_last => 3)"
    )
    # A part with a dot is given in backquotes (as discovery names such a table), and stays one part.
    assert maintenance_sql.rewrite_position_delete_files("lake", "shop.`t.x`", {}) == (
        "CALL `lake`.system.rewrite_position_delete_files(table => '`shop`.`t.x`')"
    )
    assert maintenance_sql.remove_orphan_files("lake", "it's.a`b", NOON).startswith(
        "CALL `lake`.system.remove_orphan_files(table => '`it\\'s`.`a``b`', older_than => TIMESTAMP"
    )


def test_expiration_keeps_every_snapshot_back_to_the_newest_apply_commit() -> None:
    # current = compaction, then the delete rewrite's commit, then the apply's commit of the last window
    assert maintenance_sql.snapshots_to_keep([False, False, True, True], retain_last=1) == 3
    assert maintenance_sql.snapshots_to_keep([True, False, True], retain_last=1) == 1
    assert maintenance_sql.snapshots_to_keep([False, True], retain_last=5) == 5
    assert maintenance_sql.snapshots_to_keep([False, False], retain_last=1) == 1  # no apply commit: not ours
    assert maintenance_sql.snapshots_to_keep([], retain_last=2) == 2


def test_the_delete_rewrite_is_skipped_on_tables_with_map_or_array_columns() -> None:
    assert maintenance_sql.position_delete_rewrite_skipped(["int", "string", "map<string,string>"])
    assert maintenance_sql.position_delete_rewrite_skipped(["struct<a:array<int>>"])
    assert maintenance_sql.position_delete_rewrite_skipped(["int", "string", "decimal(10,2)"]) == ""


def test_the_spec_and_report_round_trip_and_bad_settings_are_named() -> None:
    spec = MaintenanceSpec("shop", targets=("shop.orders",), retain_last=2, report_uri="/s/r.json")
    assert MaintenanceSpec.from_json(spec.to_json(), "spec.json") == spec
    assert spec.rewrite_data_options["delete-file-threshold"] == "1"
    with pytest.raises(ConfigurationError, match="at least 24, got 6"):  # Iceberg's procedure refuses it
        MaintenanceSpec("shop", orphan_file_age_hours=6)
    with pytest.raises(ConfigurationError, match="retain_last"):
        MaintenanceSpec("shop", retain_last=0)
    with pytest.raises(ConfigurationError, match=r"namespace\.table"):
        MaintenanceSpec("shop", targets=("orders",))
    with pytest.raises(ConfigurationError, match="unclosed backquote"):
        MaintenanceSpec("shop", targets=("shop.`t.x",))
    with pytest.raises(ApplyContractError, match="format"):
        MaintenanceSpec.from_json(spec.to_json().replace('"spec_format": 1', '"spec_format": 9'), "spec.json")
    table = TableMaintenance("`lake`.`shop`.`orders`", window_id=4, orphan_files_removed=["file:/w/x"], notes=["n"])
    report = MaintenanceReport("shop", {"shop.orders": table})
    assert MaintenanceReport.from_json(report.to_json(), "report.json") == report


def test_a_daily_maintenance_runs_in_one_hourly_run_a_day_and_in_manual_runs() -> None:
    start = datetime(2026, 3, 1, 5, tzinfo=UTC)
    intervals = [(start + timedelta(hours=h), start + timedelta(hours=h + 1)) for h in range(48)]
    due = [end for begin, end in intervals if maintenance_due(begin, end, timedelta(days=1))]
    assert due == [datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC)]
    assert maintenance_due(None, None, timedelta(days=1))  # a manual run without a data interval
    assert maintenance_due(start, start, timedelta(days=1))
    assert maintenance_due(start, start + timedelta(hours=1), None)


def test_a_run_that_is_not_due_is_skipped_without_spark() -> None:
    operator = IcebergMaintenanceOperator(task_id="m", pipeline="p", staging_uri="/s", every=timedelta(days=1))
    context = {
        "run_id": "r",
        "data_interval_start": datetime(2026, 3, 1, 5, tzinfo=UTC),
        "data_interval_end": datetime(2026, 3, 1, 6, tzinfo=UTC),
    }
    with pytest.raises(AirflowSkipException, match="once every 1 day"):
        operator.execute(context)  # type: ignore[arg-type]


def test_the_operator_turns_its_arguments_into_the_spec() -> None:
    operator = IcebergMaintenanceOperator(
        task_id="m",
        pipeline="p",
        staging_uri="/s",
        targets=["shop.orders"],
        snapshot_retention=timedelta(days=2),
        orphan_file_age=timedelta(hours=30),
        retain_last=3,
    )
    spec = operator.maintenance_spec("/s/report.json")
    assert (spec.targets, spec.snapshot_retention_hours, spec.orphan_file_age_hours) == (("shop.orders",), 48.0, 30.0)
    assert spec.retain_last == 3 and spec.report_uri == "/s/report.json"
    defaults = IcebergMaintenanceOperator(task_id="d", pipeline="p", staging_uri="/s").maintenance_spec("")
    assert defaults == MaintenanceSpec("p")


def test_failed_tables_fail_the_task_transient_unless_every_one_is_terminal() -> None:
    operator = IcebergMaintenanceOperator(task_id="m", pipeline="p", staging_uri="/s")
    busy = TableMaintenance("a", status="failed", error="lost a race", error_class="TableMaintenanceError")
    foreign = TableMaintenance("b", status="failed", error="not ours", error_class="ForeignTableError")
    assert isinstance(operator._failure(MaintenanceReport("p", {"a": busy, "b": foreign})), TransientCdcError)
    assert isinstance(operator._failure(MaintenanceReport("p", {"b": foreign})), TerminalCdcError)
    unreachable = MaintenanceReport("p", {}, error="down", error_class="WarehouseUnreachableError")
    assert isinstance(operator._failure(unreachable), WarehouseUnreachableError)


def test_the_factory_adds_maintenance_after_verify_only_when_asked() -> None:
    params = mysql_cdc_params(pipeline="shop", tables=["shop.*"], staging_uri="/s", warehouse="/w")
    schedule = {"schedule": timedelta(hours=1), "start_date": datetime(2026, 1, 1), "params": params}
    with DAG("plain", render_template_as_native_obj=True, **schedule) as dag:  # type: ignore[arg-type]
        assert mysql_cdc_pipeline().maintenance is None
    assert "maintenance" not in dag.task_ids
    with DAG("maintained", render_template_as_native_obj=True, **schedule) as dag:  # type: ignore[arg-type]
        tasks = mysql_cdc_pipeline(maintenance=timedelta(days=1), maintenance_kwargs={"retain_last": 4})
    assert tasks.maintenance is not None and "maintenance" in dag.get_task("verify").downstream_task_ids
    assert tasks.maintenance.every == timedelta(days=1) and tasks.maintenance.retain_last == 4  # type: ignore[attr-defined]
    with DAG("no_verify", render_template_as_native_obj=True, **schedule) as dag:  # type: ignore[arg-type]
        mysql_cdc_pipeline(maintenance=timedelta(days=1), verify_sample_fraction=None)
    assert "maintenance" in dag.get_task("apply").downstream_task_ids


def test_the_factory_refuses_maintenance_with_staging_on_s3_naming_the_way_out() -> None:
    params = mysql_cdc_params(pipeline="shop", tables=["shop.*"], staging_uri="s3://lake/s", warehouse="s3://lake/w")
    schedule = {"schedule": timedelta(hours=1), "start_date": datetime(2026, 1, 1), "params": params}
    with DAG("on_s3", render_template_as_native_obj=True, **schedule):  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=r"maintenance does not read staging on S3.*pass no maintenance"):
            mysql_cdc_pipeline(
                object_store_conn_id="lake_s3", verify_sample_fraction=None, maintenance=timedelta(days=1)
            )
        assert mysql_cdc_pipeline(object_store_conn_id="lake_s3", verify_sample_fraction=None).maintenance is None
