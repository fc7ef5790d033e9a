"""Recovery from the UI, run by real Airflow services (api-server, scheduler, dag-processor, triggerer):
the approval step in front of a re-build answered through the REST API the UI's "Required actions"
page calls, and what marking a failed apply as success does (the next apply stops the table it left
behind by name; clearing the marked task recovers). Iceberg is compared with MySQL by pyiceberg."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_services import AirflowServices, airflow_services
from tests.exactness.comparison import compare_table
from tests.mysql_servers import MySqlTestServer, free_port

pytestmark = [pytest.mark.airflow, pytest.mark.mysql, pytest.mark.spark, pytest.mark.long]

DAG_ID = "approval_cdc"
DB = "appr"
DAG_FILE = """
import os
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
         render_template_as_native_obj=True,
         params=mysql_cdc_params(pipeline={dag_id!r}, tables=[{tables!r}], staging_uri={staging!r},
                                 warehouse={warehouse!r})):
    mysql_cdc_pipeline(approve_rebuilds=True, verify_sample_fraction=None,
                       retry_args={{"retries": 0}}, jars=os.environ["MYSQL_CDC_ICEBERG_JARS"])
"""


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, mysql_server: MySqlTestServer
) -> Iterator[tuple[AirflowServices, Path, Path]]:
    from tests.spark_session import iceberg_jars

    root = tmp_path_factory.mktemp("approval")
    warehouse = root / "warehouse"
    connections = {
        "mysql_cdc_default": mysql_server.airflow_conn_json(),
        "spark_default": json.dumps({"conn_type": "spark", "host": "local[1]"}),
    }
    settings = {
        "MYSQL_CDC_ICEBERG_JARS": ",".join(str(jar) for jar in iceberg_jars()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    }
    with airflow_services(root / "home", connections, settings) as running:
        dag_file = DAG_FILE.format(
            dag_id=DAG_ID, tables=f"{DB}.*", staging=str(root / "staging"), warehouse=str(warehouse)
        )
        (running.dags_folder / f"{DAG_ID}.py").write_text(textwrap.dedent(dag_file))
        running.wait_for_dag(DAG_ID)
        running.api.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False})
        yield running, warehouse, root / "staging"


def _trigger(services: AirflowServices, **conf: Any) -> str:
    """A manual run without a logical date: Airflow gives it no data interval, and its window (cutoff
    ``data_interval``) ends when it was triggered."""
    run = services.api.call("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})
    return str(run["dag_run_id"])


def _states(services: AirflowServices, run_id: str) -> dict[str, str | None]:
    return {ti["task_id"]: ti["state"] for ti in services.api.task_instances(DAG_ID, run_id) if ti["map_index"] < 1}


def _finished(services: AirflowServices, run_id: str, state: str = "success") -> None:
    run = services.wait_for_run(DAG_ID, run_id, timeout=420)
    assert run["state"] == state, (_states(services, run_id), services.task_log(DAG_ID, run_id, "apply"))


def _question(services: AirflowServices, run_id: str) -> dict[str, Any]:
    """Wait until the approval step waits for an answer; the question as the Required actions page reads it."""
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approve_rebuild/-1/hitlDetails"

    # Airflow 3.3.2 fails the step when the answer comes before the scheduler has seen the parked
    # process end (it then finds the resumed task queued and the process "succeeded"); a person never
    # answers that fast, a test must wait for it.
    parked = (
        "Received executor event with state success for task instance TaskInstanceKey("
        f"dag_id='{DAG_ID}', task_id='approve_rebuild', run_id='{run_id}'"
    )

    def waiting() -> dict[str, Any] | None:
        state = _states(services, run_id).get("approve_rebuild")
        assert state not in ("failed", "upstream_failed", "success"), _states(services, run_id)
        if state not in ("awaiting_input", "deferred"):
            return None
        if parked not in services.log_file("scheduler").read_text(errors="replace"):
            return None
        return dict(services.api.get(path))

    return services.wait_for(f"the approval question of run {run_id}", waiting, 300)


def _answer(services: AirflowServices, run_id: str, chosen: str, params_input: dict[str, Any] | None) -> None:
    body: dict[str, Any] = {"chosen_options": [chosen]}
    if params_input is not None:
        body["params_input"] = params_input
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approve_rebuild/-1/hitlDetails"
    services.api.call("PATCH", path, json=body)


def _apply_tables(services: AirflowServices, run_id: str) -> dict[str, Any]:
    return dict(services.api.xcom(DAG_ID, run_id, "apply")["tables"])


def _apply_errors(staging: Path, run_id: str) -> dict[str, str]:
    """Table -> ``ErrorClass: message`` of the tables a run's apply stopped (its report is written even when
    the task fails, which pushes no XCom)."""
    prefix = "".join(c if c.isalnum() or c in "_.-" else "_" for c in run_id)
    reports = sorted((staging / DAG_ID / "apply-reports").glob(f"{prefix}-try*.json"))
    assert reports, f"no apply report of run {run_id}"
    report = json.loads(reports[-1].read_text())
    return {
        name: f"{report['tables'][name]['error_class']}: {report['tables'][name]['error']}" for name in report["failed"]
    }


def _equal(server: MySqlTestServer, warehouse: Path, table: str) -> None:
    comparison = compare_table(server, warehouse, DB, table)
    assert comparison.equal, comparison.describe()


def test_a_person_approves_holds_or_rejects_each_rebuild_through_the_required_actions_api(
    services: tuple[AirflowServices, Path, Path], mysql_server: MySqlTestServer
) -> None:
    running, warehouse, staging = services
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.keyed (id INT PRIMARY KEY, v VARCHAR(10) NOT NULL)",
        f"CREATE TABLE {DB}.other (id INT PRIMARY KEY, n INT)",
        f"INSERT INTO {DB}.keyed VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        f"INSERT INTO {DB}.other VALUES (1, 10), (2, 20)",
    )
    # Run 1: first snapshots need no approval; the step passes without asking.
    first = _trigger(running)
    _finished(running, first)
    assert running.api.xcom(DAG_ID, first, "approve_rebuild")["decision"] is None
    for table in ("keyed", "other"):
        _equal(mysql_server, warehouse, table)

    # Run 2: a primary key change the target cannot follow leaves keyed waiting for a rebuild.
    mysql_server.execute(
        f"UPDATE {DB}.keyed SET v = 'a2' WHERE id = 1",
        f"ALTER TABLE {DB}.keyed DROP PRIMARY KEY, ADD PRIMARY KEY (v, id)",
        f"INSERT INTO {DB}.keyed VALUES (4, 'd')",
        f"UPDATE {DB}.other SET n = 11 WHERE id = 1",
    )
    second = _trigger(running)
    _finished(running, second)
    assert "primary key changed" in _apply_tables(running, second)[f"{DB}.keyed"]["rebuild"]
    _equal(mysql_server, warehouse, "other")

    # Run 3 asks about both tables (one pending rebuild, one resnapshot); only other is approved.
    mysql_server.execute(f"UPDATE {DB}.other SET n = 12 WHERE id = 2", f"DELETE FROM {DB}.keyed WHERE id = 2")
    third = _trigger(running, resnapshot=[f"{DB}.other"])
    question = _question(running, third)
    assert question["options"] == ["Approve", "Reject"] and question["defaults"] == ["Reject"]
    assert f"`{DB}.keyed`: rebuild asked by window" in question["body"]
    assert f"`{DB}.other`: named in resnapshot" in question["body"]
    assert question["params"]["rebuild_tables"]["value"] == [f"{DB}.keyed", f"{DB}.other"]
    _answer(running, third, "Approve", {"rebuild_tables": [f"{DB}.other"]})
    # keyed, held, cannot follow its window: the apply applies other and stops keyed by name.
    _finished(running, third, "failed")
    assert _states(running, third)["apply"] == "failed"
    assert _apply_errors(staging, third)[f"{DB}.keyed"].startswith(f"RebuildPendingError: {DB}.keyed waits for a fresh")
    answer = running.api.xcom(DAG_ID, third, "approve_rebuild")
    assert (answer["decision"], answer["approved"], answer["held"]) == ("Approve", [f"{DB}.other"], [f"{DB}.keyed"])
    assert answer["responded_by"] == "admin"
    assert [chunk["chunk"]["table"] for chunk in running.api.xcom(DAG_ID, third, "snapshot_plan")] == ["other"]
    _equal(mysql_server, warehouse, "other")

    # Run 4: asked again about keyed; Reject re-builds nothing, the run goes on.
    fourth = _trigger(running)
    assert f"`{DB}.keyed`" in _question(running, fourth)["body"]
    _answer(running, fourth, "Reject", None)
    _finished(running, fourth, "failed")
    assert running.api.xcom(DAG_ID, fourth, "snapshot_plan") == []
    assert set(_apply_errors(staging, fourth)) == {f"{DB}.keyed"}

    # Run 5: Approve without a list (as a REST client may): every table asked about is re-built.
    mysql_server.execute(f"INSERT INTO {DB}.keyed VALUES (5, 'e')")
    fifth = _trigger(running)
    _question(running, fifth)
    _answer(running, fifth, "Approve", None)
    _finished(running, fifth)
    assert running.api.xcom(DAG_ID, fifth, "approve_rebuild")["approved"] == [f"{DB}.keyed"]
    for table in ("keyed", "other"):
        _equal(mysql_server, warehouse, table)


MARKED_DAG = "marked_cdc"
MARKED_DB = "marked"
MARKED_DAG_FILE = """
import os
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_mysql_cdc.pipeline import mysql_cdc_params, mysql_cdc_pipeline

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1,
         render_template_as_native_obj=True,
         params=mysql_cdc_params(pipeline={dag_id!r}, tables=[{tables!r}], staging_uri={staging!r},
                                 warehouse={warehouse!r}, cutoff="catch_up")):
    mysql_cdc_pipeline(spark_conn_id="spark_switch", verify_sample_fraction=None, retry_args={{"retries": 0}},
                       jars=os.environ["MYSQL_CDC_ICEBERG_JARS"])
"""


def _spark_connection(services: AirflowServices, method: str, extra: dict[str, str]) -> None:
    """Create or edit the DAG's Spark connection the way the UI's connection form does."""
    body = {"connection_id": "spark_switch", "conn_type": "spark", "host": "local[1]", "extra": json.dumps(extra)}
    if method == "POST":
        services.api.call("POST", "/connections", expected=201, json=body)
    else:
        services.api.call("PATCH", "/connections/spark_switch", json=body)


def _clear(services: AirflowServices, dag_id: str, run_id: str, task_id: str) -> None:
    """Clear one task of one run as the UI's Clear does; the scheduler runs it again."""
    body = {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False}
    cleared = services.api.call("POST", f"/dags/{dag_id}/clearTaskInstances", json=body)
    assert [ti["task_id"] for ti in cleared["task_instances"]] == [task_id], cleared


def test_marking_a_failed_apply_success_stops_the_next_apply_by_name_and_clearing_it_recovers(
    services: tuple[AirflowServices, Path, Path], mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    """The runbook's "Mark success" row for the apply: the marked apply applied nothing, the next apply
    applies the other tables and stops the one it left behind (ApplyGapError naming the marked run and
    the clear command); clearing the marked apply, then the stopped one, makes the lake equal MySQL."""
    running, _, _ = services
    staging, warehouse = tmp_path / "staging", tmp_path / "warehouse"
    mysql_server.execute(
        f"DROP DATABASE IF EXISTS {MARKED_DB}",
        f"CREATE DATABASE {MARKED_DB}",
        f"CREATE TABLE {MARKED_DB}.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE {MARKED_DB}.u (id INT PRIMARY KEY, n INT)",
        f"INSERT INTO {MARKED_DB}.t VALUES (1, 'a')",
        f"INSERT INTO {MARKED_DB}.u VALUES (1, 1)",
    )
    _spark_connection(running, "POST", {})
    dag_file = MARKED_DAG_FILE.format(
        dag_id=MARKED_DAG, tables=f"{MARKED_DB}.*", staging=str(staging), warehouse=str(warehouse)
    )
    (running.dags_folder / f"{MARKED_DAG}.py").write_text(textwrap.dedent(dag_file))
    running.wait_for_dag(MARKED_DAG)
    running.api.call("PATCH", f"/dags/{MARKED_DAG}", json={"is_paused": False})

    def trigger() -> str:
        # With a logical date, as the UI's trigger form sends by default: the Task SDK finds a run's previous
        # run by logical date, and the apply's message names it.
        body = {"logical_date": datetime.now(UTC).isoformat(), "conf": {}}
        return str(running.api.call("POST", f"/dags/{MARKED_DAG}/dagRuns", json=body)["dag_run_id"])

    def finished(run_id: str) -> str:
        return str(running.wait_for_run(MARKED_DAG, run_id, timeout=420)["state"])

    def apply_state(run_id: str) -> str | None:
        return {ti["task_id"]: ti["state"] for ti in running.api.task_instances(MARKED_DAG, run_id)}.get("apply")

    first = trigger()
    assert finished(first) == "success"

    # Run 2: a connection edited wrong (cluster deploy mode on a local master) fails the apply.
    _spark_connection(running, "PATCH", {"deploy-mode": "cluster"})
    mysql_server.execute(f"INSERT INTO {MARKED_DB}.t VALUES (2, 'b')")
    second = trigger()
    assert finished(second) == "failed" and apply_state(second) == "failed"
    # Marked success by hand (the UI's "Mark as success"), and the connection fixed.
    path = f"/dags/{MARKED_DAG}/dagRuns/{second}/taskInstances/apply"
    running.api.call("PATCH", path, json={"new_state": "success"})
    assert apply_state(second) == "success"
    _spark_connection(running, "PATCH", {})

    # Run 3: u is applied; t, whose window 2 the marked apply never applied, stops by name.
    mysql_server.execute(f"INSERT INTO {MARKED_DB}.t VALUES (3, 'c')", f"UPDATE {MARKED_DB}.u SET n = 2")
    third = trigger()
    assert finished(third) == "failed" and apply_state(third) == "failed"
    prefix = "".join(c if c.isalnum() or c in "_.-" else "_" for c in third)
    report = json.loads(sorted((staging / MARKED_DAG / "apply-reports").glob(f"{prefix}-try*.json"))[-1].read_text())
    assert report["failed"] == [f"{MARKED_DB}.t"]
    assert report["tables"][f"{MARKED_DB}.t"]["error_class"] == "ApplyGapError"
    assert "window 2 holds changes the table does not have yet" in report["tables"][f"{MARKED_DB}.t"]["error"]
    assert report["tables"][f"{MARKED_DB}.u"]["status"] == "applied"
    log = running.task_log(MARKED_DAG, third, "apply")
    assert f"run '{second}' before this one shows its apply as success" in log, log[-3000:]
    assert f"airflow tasks clear {MARKED_DAG} -t '^apply$'" in log
    comparison = compare_table(mysql_server, warehouse, MARKED_DB, "u")
    assert comparison.equal, comparison.describe()
    assert not compare_table(mysql_server, warehouse, MARKED_DB, "t").equal  # rows 2 and 3 not applied

    # The way out: clear the marked apply, then the stopped one.
    _clear(running, MARKED_DAG, second, "apply")
    assert finished(second) == "success"
    _clear(running, MARKED_DAG, third, "apply")
    assert finished(third) == "success"
    for table in ("t", "u"):
        comparison = compare_table(mysql_server, warehouse, MARKED_DB, table)
        assert comparison.equal, comparison.describe()
