"""The approval step in front of a re-build: which tables it asks about, what an answer approves, where the
factory puts it (pure logic and DAG construction; the answer through a real api-server is in
tests/integration/test_recovery_from_the_ui.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from airflow.sdk import DAG, Context

from airflow_provider_mysql_cdc.operators.approval import (
    APPROVE,
    APPROVED_XCOM_KEY,
    ASKED_XCOM_KEY,
    REJECT,
    TABLES_FIELD,
    MySqlCdcRebuildApprovalOperator,
    approval_body,
    approved_tables,
)
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline
from airflow_provider_mysql_cdc.snapshot.planning import choose_snapshot_tables

EXISTING = ["shop.new", "shop.orders", "shop.users", "shop.items"]
SNAPSHOTTED = {"shop.orders", "shop.users", "shop.items"}
PENDING = {"shop.orders": "rebuild asked by window 4 (GTID u:9): primary key changed"}


def test_without_an_approval_step_every_table_asked_for_again_is_taken() -> None:
    choice = choose_snapshot_tables(EXISTING, SNAPSHOTTED, PENDING, ["shop.u*"], None)
    assert choice.tables == ["shop.new", "shop.orders", "shop.users"]
    assert choice.again == {"shop.orders": PENDING["shop.orders"], "shop.users": "named in resnapshot"}
    assert choice.held == {}


def test_with_an_approval_step_only_approved_tables_are_taken_again_and_first_snapshots_never_wait() -> None:
    choice = choose_snapshot_tables(EXISTING, SNAPSHOTTED, PENDING, ["shop.u*"], ["shop.users", "shop.items"])
    assert choice.tables == ["shop.new", "shop.users"]  # shop.items was approved but nothing asks for it
    assert choice.held == {"shop.orders": PENDING["shop.orders"]}
    nothing = choose_snapshot_tables(EXISTING, SNAPSHOTTED, PENDING, ["shop.u*"], [])
    assert nothing.tables == ["shop.new"] and set(nothing.held) == {"shop.orders", "shop.users"}


ASKED = {"shop.orders": "rebuild asked by window 4", "shop.users": "named in resnapshot"}


@pytest.mark.parametrize(
    ("chosen", "form", "approved"),
    [
        (REJECT, ["shop.orders", "shop.users"], []),
        (APPROVE, ["shop.orders", "shop.users"], ["shop.orders", "shop.users"]),
        (APPROVE, ["shop.users"], ["shop.users"]),  # a table removed from the list is held
        (APPROVE, ["shop.users", "shop.other"], ["shop.users"]),  # a name nobody asked about is ignored
        (APPROVE, "shop.orders", ["shop.orders"]),  # a form field of one text
        (APPROVE, None, ["shop.orders", "shop.users"]),  # an answer without the list (REST): all asked
        (APPROVE, [], []),
    ],
)
def test_an_answer_approves_the_tables_asked_about_and_left_in_the_list(
    chosen: str, form: Any, approved: list[str]
) -> None:
    assert approved_tables(ASKED, chosen, form) == approved


def test_the_question_lists_each_table_and_why() -> None:
    body = approval_body("shop", ASKED)
    assert "Pipeline **shop**" in body
    assert "- `shop.orders`: rebuild asked by window 4" in body
    assert "- `shop.users`: named in resnapshot" in body
    assert f"`{TABLES_FIELD}`" in body


class _TaskInstance:
    """The two XCom calls the step makes (the real ones go through the Task SDK's supervisor)."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored

    def xcom_push(self, key: str, value: Any) -> None:
        self.stored[key] = value

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        return self.stored.get(key)


def _context(ti: _TaskInstance) -> Context:
    return cast(Context, {"ti": ti})


def _answer(chosen: str, params_input: dict[str, Any], user: dict[str, str] | None) -> dict[str, Any]:
    return {
        "chosen_options": [chosen],
        "params_input": params_input,
        "responded_at": datetime(2026, 11, 25, tzinfo=UTC),
        "responded_by_user": user,
    }


def test_the_answer_is_pushed_for_the_plan_and_returned_with_who_answered() -> None:
    step = MySqlCdcRebuildApprovalOperator(task_id="approve_rebuild", pipeline="shop")
    ti = _TaskInstance({ASKED_XCOM_KEY: ASKED})
    answer = _answer(APPROVE, {TABLES_FIELD: ["shop.orders"]}, {"id": "7", "name": "ana"})
    returned = step.execute_complete(_context(ti), answer)
    assert ti.stored[APPROVED_XCOM_KEY] == ["shop.orders"]
    assert returned == {
        "asked": ASKED,
        "decision": APPROVE,
        "approved": ["shop.orders"],
        "held": ["shop.users"],
        "responded_by": "ana",
    }
    # The timeout takes the default answer, Reject: nothing is re-built.
    ti = _TaskInstance({ASKED_XCOM_KEY: ASKED})
    returned = step.execute_complete(_context(ti), _answer(REJECT, {TABLES_FIELD: sorted(ASKED)}, None))
    assert ti.stored[APPROVED_XCOM_KEY] == [] and returned["held"] == sorted(ASKED)
    assert step.defaults == [REJECT] and step.response_timeout == timedelta(hours=1)


def test_an_answer_outside_the_options_is_refused() -> None:
    step = MySqlCdcRebuildApprovalOperator(task_id="approve_rebuild", pipeline="shop")
    with pytest.raises(ValueError, match="not in"):
        step.execute_complete(_context(_TaskInstance({})), _answer("Maybe", {}, None))


PARAMS = mysql_cdc_params(pipeline="shop", tables=["shop.*"], staging_uri="/s", warehouse="/w")


def test_the_factory_puts_the_step_between_the_headroom_check_and_the_plan_only_when_asked() -> None:
    start = datetime(2026, 1, 1)
    with DAG("plain", schedule=None, start_date=start, params=PARAMS, render_template_as_native_obj=True) as plain:
        tasks = mysql_cdc_pipeline()
    assert tasks.approve_rebuild is None and "approve_rebuild" not in plain.task_ids
    assert tasks.snapshot_plan.approved_rebuilds is None  # type: ignore[attr-defined]

    with DAG("gated", schedule=None, start_date=start, params=PARAMS, render_template_as_native_obj=True) as gated:
        tasks = mysql_cdc_pipeline(group_id="shop", approve_rebuilds=True, approval_kwargs={"response_timeout": None})
    step = tasks.approve_rebuild
    assert isinstance(step, MySqlCdcRebuildApprovalOperator) and step.task_id == "shop.approve_rebuild"
    assert step.upstream_task_ids == {"shop.purge_headroom"}
    assert step.downstream_task_ids == {"shop.snapshot_plan"}
    assert step.trigger_rule == "none_failed" and step.response_timeout is None
    assert step.resnapshot == "{{ params.resnapshot }}" and step.tables == "{{ params.tables }}"
    # The plan reads the step's answer; none (the step marked success by hand) approves nothing.
    approved = tasks.snapshot_plan.approved_rebuilds  # type: ignore[attr-defined]
    assert approved == "{{ ti.xcom_pull(task_ids='shop.approve_rebuild', key='approved_rebuilds') or [] }}"
    assert "shop.snapshot_plan" in gated.task_ids
