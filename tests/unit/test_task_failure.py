"""Errors decide Airflow's retries: every terminal error of the package fails the task without retries
(it is also an ``AirflowFailException``, Airflow's no-retry signal), keeping its own class, message and
attributes; transient errors stay retryable. The apply's failures are classified the same way from
the job's report. The real task runner's reaction is tested in tests/integration/test_task_retries.py."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_mysql_cdc import errors
from airflow_provider_mysql_cdc.apply.contract import ApplyReport, TableReport
from airflow_provider_mysql_cdc.errors import (
    FrontierNotOnServerError,
    MySqlCdcError,
    TerminalCdcError,
    TransientCdcError,
    WarehouseUnreachableError,
    error_class,
    error_named,
)
from airflow_provider_mysql_cdc.operators.apply import SparkApplyOperator
from airflow_provider_mysql_cdc.task_failure import as_task_failure, terminal_errors_fail_task

TERMINAL = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, TerminalCdcError)]
TRANSIENT = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, TransientCdcError)]


def _raise(error: Exception) -> None:
    raise error


@pytest.mark.parametrize("error_class", TERMINAL, ids=lambda c: c.__name__)
def test_every_terminal_error_fails_the_task_and_keeps_its_class(error_class: type[TerminalCdcError]) -> None:
    failing = terminal_errors_fail_task(_raise)
    with pytest.raises(AirflowFailException) as raised:
        failing(error_class("pipeline 'shop' window 4: what happened; what to do"))
    assert isinstance(raised.value, error_class)
    assert type(raised.value).__name__ == error_class.__name__
    assert str(raised.value) == "pipeline 'shop' window 4: what happened; what to do"
    # Airflow serialises task errors by class path: the package's class, importable
    assert raised.value.serialize()[0] == f"airflow_provider_mysql_cdc.errors.{error_class.__name__}"  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("error_class", TRANSIENT, ids=lambda c: c.__name__)
def test_transient_errors_stay_retryable(error_class: type[TransientCdcError]) -> None:
    failing = terminal_errors_fail_task(_raise)
    with pytest.raises(error_class) as raised:
        failing(error_class("server restarting"))
    assert not isinstance(raised.value, AirflowFailException)


def test_other_exceptions_and_results_pass_unchanged() -> None:
    with pytest.raises(KeyError) as raised:
        terminal_errors_fail_task(_raise)(KeyError("x"))
    assert not isinstance(raised.value, AirflowFailException)
    assert terminal_errors_fail_task(lambda value: value * 2)(21) == 42


def test_attributes_cause_and_identity_survive() -> None:
    cause = OSError("no route")
    error = FrontierNotOnServerError("lacks transactions", missing_gtids="uuid:5-9")
    error.__cause__ = cause
    failing = as_task_failure(error)
    assert failing is error and error.missing_gtids == "uuid:5-9" and error.__cause__ is cause
    assert isinstance(error, AirflowFailException) and as_task_failure(error) is error
    assert type(as_task_failure(FrontierNotOnServerError("again"))) is type(error)  # one class per error class


def test_error_named_rebuilds_the_reported_class_or_the_fallback() -> None:
    assert type(error_named("WarehouseUnreachableError", "down", TerminalCdcError)) is WarehouseUnreachableError
    assert type(error_named("Py4JJavaError", "boom", TransientCdcError)) is TransientCdcError
    assert type(error_named("", "boom", MySqlCdcError)) is MySqlCdcError
    assert str(error_named("MissingPrivilegeError", "GRANT SELECT", TransientCdcError)) == "GRANT SELECT"
    assert error_class("TargetDivergedError") is errors.TargetDivergedError
    assert error_class("Py4JJavaError") is None and error_class("ConfigurationError") is errors.ConfigurationError


def _operator(tmp_path: Path) -> SparkApplyOperator:
    return SparkApplyOperator(task_id="apply", pipeline="shop", staging_uri=str(tmp_path), windows=4, warehouse="/wh")


def _failed(error_class: str) -> TableReport:
    return TableReport("t", status="failed", error="it broke", error_class=error_class)


def test_an_apply_whose_failed_tables_are_all_terminal_fails_without_retries(tmp_path: Path) -> None:
    report = ApplyReport("shop", 4, 4, "", {"shop.a": _failed("TargetDivergedError"), "shop.b": TableReport("t")})
    failure = _operator(tmp_path)._failure(report)
    assert isinstance(failure, TerminalCdcError)
    assert "pipeline 'shop' windows 4..4" in str(failure) and "shop.a: TargetDivergedError: it broke" in str(failure)


def test_an_apply_with_a_transient_or_unknown_table_failure_is_retried(tmp_path: Path) -> None:
    for other in ("StaleApplyStateError", "Py4JJavaError"):
        tables = {"shop.a": _failed("TargetDivergedError"), "shop.b": _failed(other)}
        failure = _operator(tmp_path)._failure(ApplyReport("shop", 4, 4, "", tables))
        assert isinstance(failure, TransientCdcError) and "the retry applies them again" in str(failure), other


def test_a_job_that_stopped_before_the_tables_reports_its_own_error(tmp_path: Path) -> None:
    report = ApplyReport("shop", 4, 5, "", {}, "cannot reach the Iceberg catalog 'lake'", "WarehouseUnreachableError")
    assert ApplyReport.from_json(report.to_json(), "report.json") == report
    failure = _operator(tmp_path)._failure(report)
    assert type(failure) is WarehouseUnreachableError
    assert str(failure) == "pipeline 'shop' windows 4..5: cannot reach the Iceberg catalog 'lake'"
