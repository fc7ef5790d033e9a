"""Secrets never leave the connection (invariant 6).

The example DAG runs end to end with a MySQL account whose password the test knows: a successful run
(preflight, purge headroom, snapshot, capture, and the apply as a real spark-submit), then a run whose
snapshot plan fails while connected with that password (``resnapshot`` names a table that does not
exist), and a run whose preflight is refused a wrong password. Every place the runs write to is then
searched for both passwords, plain and URL-quoted: the task logs (``dag.test()`` prints them,
spark-submit's output included, to the console; files under the Airflow home's ``logs`` too, if any),
every XCom and rendered template field in the Airflow database and the database files themselves,
the metadata store, every file under staging and the warehouse (manifests, Parquet, apply specs and
reports, Iceberg metadata), and the argv and environment of every process of the apply job
(spark-submit, its JVM, its Python driver), read from ``/proc`` while they run. The connection
reaches the Airflow worker as ``AIRFLOW_CONN_*`` in its environment, as it often does in production.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests.integration.test_airflow_dag import _forget_earlier_runs, _run_example, _states
from tests.mysql_servers import MySqlTestServer
from tests.process_watch import ProcessWatch, watching

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.airflow]

#: The apply job's script: spark-submit, its JVM and its Python driver all carry it in their argv.
APPLY_SCRIPT = "spark_job.py"


@pytest.fixture
def watch_spark_submit() -> Iterator[ProcessWatch]:
    with watching(ProcessWatch(script=APPLY_SCRIPT.encode())) as watch:
        yield watch


def airflow_db_values() -> dict[str, list[str]]:
    """Every XCom value and rendered template field of the example DAG, as stored."""
    from airflow.utils.session import create_session
    from sqlalchemy import text

    with create_session() as session:
        xcoms = session.execute(text("SELECT value FROM xcom WHERE dag_id = 'mysql_cdc_example'")).all()
        rendered = session.execute(
            text("SELECT rendered_fields FROM rendered_task_instance_fields WHERE dag_id = 'mysql_cdc_example'")
        ).all()
    return {"xcom": [str(row[0]) for row in xcoms], "rendered": [str(row[0]) for row in rendered]}


def file_bytes(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots if root.exists() for p in root.rglob("*") if p.is_file()}


def test_no_password_anywhere(
    airflow_home: Path,
    mysql_server: MySqlTestServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    watch_spark_submit: ProcessWatch,
) -> None:
    token = secrets.token_hex(8)
    password = f"H4-secret/{token}#%@:&=+"
    wrong_password = f"H4-wrong/{secrets.token_hex(8)}#%@"
    needles = tuple(
        form.encode()
        for secret in (password, wrong_password)
        for form in {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}
    )
    watch_spark_submit.needles = needles
    watch_spark_submit.marker = str(tmp_path / "staging").encode()
    user, database = "h4_secret", "h4secret"
    mysql_server.execute(
        f"DROP USER IF EXISTS '{user}'@'%'",
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%'",
        f"GRANT SELECT, LOCK TABLES ON {database}.* TO '{user}'@'%'",
        f"DROP DATABASE IF EXISTS {database}",
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO {database}.t VALUES (1, 'a'), (2, 'b')",
    )
    conn = mysql_server.airflow_conn_json(mysql_server.account(user, password))
    wrong_conn = mysql_server.airflow_conn_json(mysql_server.account(user, wrong_password))
    conf = {
        "pipeline": "h4secret",
        "staging_uri": str(tmp_path / "staging"),
        "warehouse": str(tmp_path / "warehouse"),
        "cutoff": "catch_up",
    }
    db_values: dict[str, list[str]] = {"xcom": [], "rendered": []}
    states = []
    try:
        _forget_earlier_runs()
        for run_conn, run_conf in (
            (conn, conf),  # preflight, headroom, snapshot, capture, apply (spark-submit loads the snapshot)
            # the snapshot plan fails while connected with the password: it is asked to snapshot again a
            # table the server does not have
            (conn, {**conf, "resnapshot": [f"{database}.missing"]}),
            (wrong_conn, conf),  # preflight is refused the wrong password
        ):
            run = _run_example(monkeypatch, run_conn, [f"{database}.*"], **run_conf)
            states.append((run.state, _states(run)))
            for kind, values in airflow_db_values().items():
                db_values[kind] += values
            _forget_earlier_runs()  # each run starts a fresh pipeline history
    finally:
        mysql_server.execute(f"DROP USER IF EXISTS '{user}'@'%'")
    console = capfd.readouterr()

    # The runs went as planned: a success (with a real apply), then the two failures.
    assert [state for state, _ in states] == ["success", "failed", "failed"], states
    assert states[0][1][("apply", -1)] == "success"
    assert states[1][1][("snapshot_plan", -1)] == "failed"
    assert states[2][1][("preflight", -1)] == "failed"

    haystacks: dict[str, list[bytes]] = {
        # dag.test() logs every task (and the spark-submit output) to the console.
        "task logs (console)": [console.out.encode(), console.err.encode()],
        "airflow log files": list(file_bytes(airflow_home / "logs").values()),
        "xcom values": [value.encode() for value in db_values["xcom"]],
        "rendered template fields": [value.encode() for value in db_values["rendered"]],
        "airflow and metadata databases": [
            (airflow_home / name).read_bytes()
            for name in ("airflow.db", "mysql_cdc_metadata.db")
            if (airflow_home / name).exists()
        ],
        "staging and warehouse files": list(file_bytes(tmp_path / "staging", tmp_path / "warehouse").values()),
        "apply reports": list(file_bytes(tmp_path / "staging" / "h4secret" / "apply-reports").values()),
        "apply specs": list(file_bytes(tmp_path / "staging" / "h4secret" / "apply-specs").values()),
        "spark-submit argv": ["\0".join(argv).encode() for argv in watch_spark_submit.argvs],
    }
    # Nothing is searched vacuously: each haystack holds what it is expected to hold.
    expectations = {
        "task logs (console)": b"ConfigurationError: resnapshot names 'h4secret.missing', which matches no",
        "airflow log files": b"",
        "xcom values": b"window_id",
        "rendered template fields": b"h4secret",
        "airflow and metadata databases": b"h4secret",
        "staging and warehouse files": b"_manifest",
        "apply reports": b'"pipeline": "h4secret"',
        "apply specs": b'"spec_format": 1',
        "spark-submit argv": b"--spec",
    }
    for name, chunks in haystacks.items():
        if name == "airflow log files" and not any(chunks):
            continue  # dag.test() writes no log files; on a worker the same lines go there
        assert chunks and any(expectations[name] in chunk for chunk in chunks), f"{name}: nothing to search"
    task_logs = b"".join(haystacks["task logs (console)"])
    assert f"MySqlAuthenticationError: MySQL rejected {user}@".encode() in task_logs
    assert b"apply table=h4secret.t status=applied windows=[] rows={'r': 2}" in task_logs  # spark-submit's output
    assert len(haystacks["spark-submit argv"]) >= 1
    hits = {
        name: sorted({needle.decode() for needle in needles for chunk in chunks if needle in chunk})
        for name, chunks in haystacks.items()
    }
    assert hits == {name: [] for name in haystacks}
    # The apply processes' environments were read (the local spark-submit gets PYSPARK_PYTHON), and the
    # worker's connections (AIRFLOW_CONN_*, which hold the password) are not in them.
    assert "PYSPARK_PYTHON" in watch_spark_submit.environ_names
    assert not [name for name in watch_spark_submit.environ_names if name.startswith("AIRFLOW_CONN_")]
    assert watch_spark_submit.environ_hits == set()
    print(  # shown with -s: what was searched
        f"searched: { {name: (len(chunks), sum(map(len, chunks))) for name, chunks in haystacks.items()} }; "
        f"spark-submit processes seen: {len(watch_spark_submit.argvs)}; "
        f"environment variables of the apply processes: {len(watch_spark_submit.environ_names)}"
    )
