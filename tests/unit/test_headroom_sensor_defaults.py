"""The purge-headroom sensor's Airflow defaults: deferrable from the config, a short finite timeout.

Waiting and deciding against a real MySQL is in tests/integration/test_purge_headroom.py.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest
from airflow.sdk import DAG

from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline
from airflow_provider_mysql_cdc.sensors.purge_headroom import MySqlBinlogPurgeHeadroomSensor
from tests.fresh_interpreter import run_json

_DEFAULTS = """
import json
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline
from airflow_provider_mysql_cdc.sensors.purge_headroom import MySqlBinlogPurgeHeadroomSensor

params = mysql_cdc_params(pipeline="shop", tables=["shop.*"], staging_uri="/s", warehouse="/w")
with DAG("defaults", start_date=datetime(2026, 1, 1), params=params, render_template_as_native_obj=True):
    sensor = MySqlBinlogPurgeHeadroomSensor(task_id="headroom", pipeline="shop")
    tasks = mysql_cdc_pipeline(group_id="shop")
print(json.dumps({"sensor": sensor.deferrable, "pipeline": tasks.purge_headroom.deferrable}))
"""


def _deferrable_defaults(default_deferrable: str | None) -> dict[str, bool]:
    """The sensor's and the pipeline's ``deferrable`` in a fresh interpreter (the default is read at import)."""
    environ = {key: value for key, value in os.environ.items() if key != "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"}
    if default_deferrable is not None:
        environ["AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE"] = default_deferrable
    defaults: dict[str, bool] = run_json(_DEFAULTS, environ=environ)
    return defaults


@pytest.mark.parametrize(("configured", "expected"), [(None, False), ("True", True), ("False", False)])
def test_deferrable_follows_airflows_default_deferrable(configured: str | None, expected: bool) -> None:
    assert _deferrable_defaults(configured) == {"sensor": expected, "pipeline": expected}


def _dag(dag_id: str) -> DAG:
    params = mysql_cdc_params(pipeline="shop", tables=["shop.*"], staging_uri="/s", warehouse="/w")
    return DAG(dag_id, start_date=datetime(2026, 1, 1), params=params, render_template_as_native_obj=True)


def test_an_explicit_deferrable_wins_over_the_config() -> None:
    with _dag("explicit"):
        deferred = mysql_cdc_pipeline(group_id="deferred", deferrable=True)
        polled = mysql_cdc_pipeline(group_id="polled", deferrable=False)
    assert deferred.purge_headroom.deferrable is True  # type: ignore[attr-defined]
    assert polled.purge_headroom.deferrable is False  # type: ignore[attr-defined]


def test_the_default_wait_is_five_minutes_of_checks_a_minute_apart() -> None:
    with _dag("waits"):
        sensor = MySqlBinlogPurgeHeadroomSensor(task_id="headroom", pipeline="shop")
        tasks = mysql_cdc_pipeline(group_id="shop")
    for task in (sensor, tasks.purge_headroom):
        assert task.timeout == 300  # type: ignore[attr-defined]
        assert task.poke_interval == 60  # type: ignore[attr-defined]
        assert task.mode == "poke"  # type: ignore[attr-defined]
    assert MySqlBinlogPurgeHeadroomSensor(task_id="t", pipeline="p", timeout=timedelta(seconds=90)).timeout == 90


def test_soft_fail_is_the_sensors_own_and_never_fail_is_refused() -> None:
    """The base class's soft_fail/never_fail would turn a purged binlog into a skip in the deferred path."""
    sensor = MySqlBinlogPurgeHeadroomSensor(task_id="headroom", pipeline="shop", soft_fail=True)
    assert sensor.skip_below_minimum is True
    assert sensor.soft_fail is False and sensor.never_fail is False
    with pytest.raises(ConfigurationError, match=r"'headroom': never_fail.*soft_fail=True"):
        MySqlBinlogPurgeHeadroomSensor(task_id="headroom", pipeline="shop", never_fail=True)
