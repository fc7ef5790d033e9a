"""OpenLineage events of the example DAG, emitted by Airflow's OpenLineage provider through a file transport.

Two runs of ``airflow dags test mysql_cdc_example`` (real Airflow on the test suite's SQLite home, real
MySQL, local Spark): the first snapshots a table and loads it into Iceberg, the second captures a window
of changes and merges it. Each run is its own ``airflow`` process with OpenLineage enabled (the rest of
the suite runs with it disabled, see ``tests/conftest.py``). The COMPLETE events must name the MySQL
table, the staged snapshots and windows and the Iceberg table by the naming spec, carry the apply's
column lineage, the apply's spark-submit must have been given the task's run as its OpenLineage parent,
and no event or log line may hold the connection's password.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_airflow_dag import _forget_earlier_runs
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.airflow

OL_NAMESPACE = "mysql_cdc_lineage_test"


def _dags_test(env: dict[str, str], logical_date: Any, conf: dict[str, Any]) -> str:
    """``airflow dags test mysql_cdc_example <date> --conf ...``; its output (the tasks' logs)."""
    airflow = Path(sys.executable).with_name("airflow")
    argv = [str(airflow), "dags", "test", "mysql_cdc_example", logical_date.isoformat(), "--conf", json.dumps(conf)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    return output


def _complete_events(path: Path) -> list[dict[str, dict[str, Any]]]:
    """The task COMPLETE events of the file transport, per DAG run (in run order), by task id
    (``task[i]`` for map index ``i``)."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        airflow = event["run"]["facets"].get("airflow")
        if event["eventType"] != "COMPLETE" or airflow is None or "task" not in airflow:
            continue
        task_id, map_index = airflow["task"]["task_id"], airflow["taskInstance"].get("map_index")
        key = task_id if map_index in (-1, None) else f"{task_id}[{map_index}]"
        runs.setdefault(airflow["dagRun"]["run_id"], {})[key] = event
    return list(runs.values())


def _names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(dataset["namespace"], dataset["name"]) for dataset in datasets]


@pytest.mark.mysql
@pytest.mark.spark
@pytest.mark.long
def test_the_example_dag_emits_datasets_column_lineage_and_the_spark_parent_run(
    airflow_home: Path, mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    from tests.spark_session import iceberg_jars

    _forget_earlier_runs()
    mysql_server.execute(
        "DROP DATABASE IF EXISTS lineage",
        "CREATE DATABASE lineage",
        "CREATE TABLE lineage.orders (id INT PRIMARY KEY, status VARCHAR(10), amount DECIMAL(10,2))",
        "INSERT INTO lineage.orders VALUES (1, 'new', 10.50), (2, 'new', 3.25)",
    )
    events_file = tmp_path / "events.jsonl"
    staging, warehouse = tmp_path / "staging", tmp_path / "warehouse"
    env = {
        **os.environ,
        "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": mysql_server.airflow_conn_json(),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "MYSQL_CDC_ICEBERG_JARS": ",".join(str(jar) for jar in iceberg_jars()),
        "AIRFLOW__OPENLINEAGE__DISABLED": "False",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": OL_NAMESPACE,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
    }
    conf = {
        "tables": ["lineage.*"],
        "pipeline": "lin",
        "staging_uri": str(staging),
        "warehouse": str(warehouse),
        "cutoff": "catch_up",
    }
    first_date = mysql_server.utc_now()
    first_output = _dags_test(env, first_date, conf)
    mysql_server.execute(
        "UPDATE lineage.orders SET status = 'paid' WHERE id = 1",
        "INSERT INTO lineage.orders VALUES (3, 'new', 7.00)",
        "DELETE FROM lineage.orders WHERE id = 2",
    )
    second_output = _dags_test(env, first_date + timedelta(seconds=1), conf)

    text = events_file.read_text()
    for output in (text, first_output, second_output):
        assert mysql_server.cdc.password not in output
    first, second = _complete_events(events_file)

    source = (f"mysql://{mysql_server.cdc.host}:{mysql_server.cdc.port}", "lineage.orders")
    snapshots = ("file", f"{staging}/lin/snapshots")
    windows = ("file", f"{staging}/lin/windows")
    target = ("file", f"{warehouse}/lineage/orders")

    # Run 1: the plan read the table's keys; its one chunk staged the rows; the apply loaded them.
    assert _names(first["snapshot_plan"]["inputs"]) == [source]
    chunk = first["snapshot[0]"]
    assert _names(chunk["inputs"]) == [source] and _names(chunk["outputs"]) == [snapshots]
    assert chunk["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    loaded = first["apply"]
    assert _names(loaded["inputs"]) == [windows, snapshots, source]
    schema = loaded["inputs"][2]["facets"]["schema"]["fields"]  # the staged schema's MySQL types
    assert [field["name"] for field in schema] == ["id", "status", "amount"]
    assert [field["type"].split("(")[0] for field in schema] == ["int", "varchar", "decimal"]
    (output,) = loaded["outputs"]
    assert (output["namespace"], output["name"]) == target
    assert output["facets"]["symlinks"]["identifiers"] == [
        {"namespace": f"file://{warehouse}", "name": "lineage.orders", "type": "TABLE"}
    ]
    lineage = output["facets"]["columnLineage"]["fields"]
    assert {column: [_names([field]) for field in lineage[column]["inputFields"]] for column in lineage} == {
        column: [[source]] for column in ("id", "status", "amount")
    }
    assert {field["field"] for column in lineage.values() for field in column["inputFields"]} == set(lineage)
    assert _names(first["verify"]["inputs"]) == [source, target]

    # Run 2: the capture staged the window's changes of the table; the apply merged them.
    captured = second["capture"]
    assert _names(captured["inputs"]) == [source] and _names(captured["outputs"]) == [windows]
    assert captured["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    merged = second["apply"]
    assert _names(merged["inputs"]) == [windows, source]
    assert _names(merged["outputs"]) == [target]
    assert merged["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert set(merged["outputs"][0]["facets"]["columnLineage"]["fields"]) == {"id", "status", "amount"}

    # The apply's spark-submit was given each apply task's run as the parent of the Spark job's run.
    _assert_spark_parent(first_output, first["apply"])
    _assert_spark_parent(second_output, second["apply"])


def _assert_spark_parent(output: str, apply_event: dict[str, Any]) -> None:
    """The spark-submit command in a run's log names the apply task's OpenLineage run as the parent and
    the DAG run as the root, and passes no transport setting."""
    submitted = re.search(r"Spark-Submit cmd: (.*)", output)
    assert submitted is not None, output[-3000:]
    command = submitted.group(1)
    assert f"spark.openlineage.parentRunId={apply_event['run']['runId']}" in command
    assert "spark.openlineage.parentJobName=mysql_cdc_example.apply" in command
    assert f"spark.openlineage.parentJobNamespace={OL_NAMESPACE}" in command
    root = apply_event["run"]["facets"]["parent"]["root"]["run"]["runId"]
    assert f"spark.openlineage.rootParentRunId={root}" in command
    assert "spark.openlineage.transport" not in command
