"""The ``mysql_cdc_pipeline`` factory builds the example's shape (DAG construction only; the DAG tests run it)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import pytest
from airflow.sdk import DAG

from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

PARAMS = mysql_cdc_params(pipeline="shop", tables=["shop.*"], staging_uri="/s", warehouse="/w")


def _dag(dag_id: str, **kwargs: object) -> DAG:
    return DAG(dag_id, schedule=timedelta(hours=1), start_date=datetime(2026, 1, 1), params=PARAMS, **kwargs)  # type: ignore[arg-type]


def test_the_tasks_run_in_order_and_capture_survives_skipped_upstreams() -> None:
    with _dag("shape", render_template_as_native_obj=True) as dag:
        tasks = mysql_cdc_pipeline()
    order = ["preflight", "purge_headroom", "snapshot_plan", "snapshot", "capture", "apply", "verify"]
    assert sorted(dag.task_ids) == sorted(order)
    for upstream, downstream in itertools.pairwise(order):
        assert downstream in dag.get_task(upstream).downstream_task_ids
    assert tasks.purge_headroom.skip_below_minimum is True  # type: ignore[attr-defined]
    assert tasks.snapshot_plan.trigger_rule == "none_failed"  # after a skipped (low headroom) sensor
    assert tasks.capture.trigger_rule == "none_failed"
    # Order is kept by waiting on an unfinished previous run, not by depends_on_past (which waits
    # forever, silently, after a failure): tests/integration/test_task_retries.py
    assert not tasks.capture.depends_on_past and not tasks.apply.depends_on_past
    assert "task_ids='capture'" in tasks.apply.windows  # type: ignore[attr-defined]
    assert set(PARAMS) >= {"pipeline", "tables", "staging_uri", "warehouse", "cutoff", "resnapshot"}
    assert tasks.verify is not None and tasks.verify.sample_fraction == 0.1  # type: ignore[attr-defined]
    assert tasks.verify.fail_on_difference and not tasks.verify.fail_on_unverified  # type: ignore[attr-defined]


def test_the_verify_task_is_optional() -> None:
    with _dag("no_verify", render_template_as_native_obj=True) as dag:
        tasks = mysql_cdc_pipeline(verify_sample_fraction=None)
    assert tasks.verify is None and "verify" not in dag.task_ids


def test_a_group_prefixes_the_tasks_and_the_apply_pulls_its_own_capture() -> None:
    with _dag("grouped", render_template_as_native_obj=True) as dag:
        tasks = mysql_cdc_pipeline(group_id="shop", pipeline="shop", tables=["shop.*"], capture_kwargs={"max_rows": 10})
    assert "shop.capture" in dag.task_ids
    assert "task_ids='shop.capture'" in tasks.apply.windows  # type: ignore[attr-defined]
    assert tasks.capture.caps.max_rows == 10  # type: ignore[attr-defined]


def test_param_templates_need_native_rendering() -> None:
    with _dag("not_native"), pytest.raises(ConfigurationError, match="render_template_as_native_obj=True"):
        mysql_cdc_pipeline()


def test_every_task_retries_transient_errors_with_backoff_and_the_dag_can_take_over() -> None:
    with _dag("retries", render_template_as_native_obj=True) as dag:
        mysql_cdc_pipeline(apply_kwargs={"retries": 1})
    for task_id in ("preflight", "purge_headroom", "snapshot_plan", "capture", "verify"):
        task = dag.get_task(task_id)
        assert task.retries == 4 and task.retry_delay == timedelta(seconds=30), task_id
        assert task.retry_exponential_backoff and task.max_retry_delay == timedelta(minutes=10), task_id
    assert dag.get_task("apply").retries == 1  # the operator's own kwargs win
    assert dag.get_task("snapshot").partial_kwargs["retries"] == 4  # type: ignore[union-attr]
    with _dag("dag_retries", render_template_as_native_obj=True, default_args={"retries": 7}) as dag:
        mysql_cdc_pipeline(retry_args=None)
    assert dag.get_task("capture").retries == 7
