#!/usr/bin/env python3
"""The demo behind ``make demo``: a local MySQL, a sample schema, Airflow on SQLite, the example DAG.

Steps: start (or reuse) the ``demo`` MySQL instance, or use ``MYSQL_CDC_EXTERNAL_URL``; load the
sample schema ``demo``; run the preflight CLI; ``airflow db migrate`` in ``.airflow-home``;
``airflow dags test mysql_cdc_example`` (snapshot, capture, then Spark apply into the Iceberg warehouse
``.airflow-home/mysql_cdc/warehouse``, catalog ``lake``); print the run's state, the binlog inventory
and what the apply did; stop the local MySQL (``DEMO_KEEP_MYSQL=1`` keeps it running). Credentials travel only in the
``AIRFLOW_CONN_MYSQL_CDC_DEFAULT`` environment variable, never on a command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "scripts"))

import iceberg_jars  # noqa: E402
import local_mysql  # noqa: E402
import pymysql  # noqa: E402

DAG_ID = "mysql_cdc_example"
DEMO_PORT = int(os.environ.get("DEMO_MYSQL_PORT", "33306"))
AIRFLOW_HOME = REPO_ROOT / ".airflow-home"

SAMPLE_SCHEMA = (
    "CREATE DATABASE IF NOT EXISTS demo",
    """CREATE TABLE IF NOT EXISTS demo.customers (
        id INT PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200),
        created_at DATETIME(6) NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS demo.orders (
        id BIGINT PRIMARY KEY AUTO_INCREMENT,
        customer_id INT NOT NULL,
        amount DECIMAL(12, 2) NOT NULL,
        status ENUM('new', 'paid', 'shipped') NOT NULL DEFAULT 'new',
        payload JSON,
        updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
    )""",
    """INSERT IGNORE INTO demo.customers VALUES
        (1, 'Ada', 'ada@example.com', '2026-01-01 10:00:00.000001'),
        (2, 'Grace', NULL, '2026-01-02 11:30:00')""",
    """INSERT IGNORE INTO demo.orders (id, customer_id, amount, status, payload) VALUES
        (1, 1, 12.50, 'new', '{"items": 1}'), (2, 2, 99.99, 'paid', '{"items": 3}')""",
)


def step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(argv), flush=True)
    return subprocess.run(argv, env=env, text=True, capture_output=True, check=False)


def main() -> int:
    venv_bin = Path(sys.executable).parent
    external = os.environ.get("MYSQL_CDC_EXTERNAL_URL")
    server: local_mysql.LocalMySQL | None = None
    if external:
        step("using the MySQL server from MYSQL_CDC_EXTERNAL_URL")
        parts = urlsplit(external)
        host, port = parts.hostname or "127.0.0.1", parts.port or 3306
        admin = {"user": unquote(parts.username or "root"), "password": unquote(parts.password or "")}
        cdc_password = os.environ.get(local_mysql.CDC_PASSWORD_ENV, local_mysql.DEFAULT_CDC_PASSWORD)
    else:
        step(f"starting the local MySQL instance 'demo' on 127.0.0.1:{DEMO_PORT}")
        server = local_mysql.LocalMySQL("demo", port=DEMO_PORT)
        server.start()
        host, port = server.host, server.port
        admin = {"user": "root", "password": server.root_password}
        cdc_password = server.cdc_password
    try:
        step("loading the sample schema 'demo'")
        connection = pymysql.connect(
            host=host, port=port, user=admin["user"], password=admin["password"], autocommit=True
        )
        with connection, connection.cursor() as cursor:
            for statement in SAMPLE_SCHEMA:
                cursor.execute(statement)
            cursor.execute("SELECT COUNT(*) FROM demo.orders")
            print(f"demo.customers and demo.orders ready ({cursor.fetchone()} orders)")

        env = {
            **os.environ,
            "AIRFLOW_HOME": str(AIRFLOW_HOME),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            # Spark in local mode on this machine, Iceberg from the jar `make jars` assembled (no Maven).
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "MYSQL_CDC_ICEBERG_JARS": ",".join(str(jar) for jar in iceberg_jars.ensure_jars(python=sys.executable)),
            "AIRFLOW_CONN_MYSQL_CDC_DEFAULT": json.dumps(
                {
                    "conn_type": "mysql_cdc",
                    "host": host,
                    "port": port,
                    "login": "cdc",
                    "password": cdc_password,
                    "extra": {"server_id": 4242},
                }
            ),
        }

        step("preflight (python -m airflow_provider_mysql_cdc preflight)")
        preflight = run([sys.executable, "-m", "airflow_provider_mysql_cdc", "preflight", "--tables", "demo.*"], env)
        print(preflight.stdout + preflight.stderr)
        if preflight.returncode != 0:
            print("demo: preflight found problems (see above)", file=sys.stderr)
            return 1

        step("Airflow metadata database on SQLite (.airflow-home)")
        migrate = run([str(venv_bin / "airflow"), "db", "migrate"], env)
        if migrate.returncode != 0:
            print(migrate.stdout[-3000:] + migrate.stderr[-3000:], file=sys.stderr)
            return 1

        logical_date = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
        step(f"airflow dags test {DAG_ID} {logical_date}")
        dag_test = run([str(venv_bin / "airflow"), "dags", "test", DAG_ID, logical_date], env)
        log_path = AIRFLOW_HOME / "demo-dags-test.log"
        log_path.write_text(dag_test.stdout + dag_test.stderr)
        return report(dag_test, log_path)
    finally:
        if server is not None and os.environ.get("DEMO_KEEP_MYSQL") != "1":
            step("stopping the local MySQL instance 'demo' (DEMO_KEEP_MYSQL=1 keeps it running)")
            server.stop()


def report(dag_test: subprocess.CompletedProcess[str], log_path: Path) -> int:
    """Summarize ``airflow dags test``: the run's final state and the binlog inventory it recorded."""
    output = dag_test.stdout + dag_test.stderr
    finished = [line for line in output.splitlines() if "DagRun Finished:" in line]
    run_state = finished[-1].split(" state=")[1].split(",")[0] if finished else "unknown"
    returned = [line for line in output.splitlines() if "Returned value was: {'server_uuid'" in line]
    print(f"DAG run state: {run_state} (full log: {log_path.relative_to(REPO_ROOT)})")
    if returned:
        inventory = returned[-1].split("Returned value was: ")[1].rsplit(" [airflow", 1)[0]
        print(f"binlog inventory (XCom of binlog_inventory): {inventory}")
    for line in output.splitlines():
        if "apply table=" in line or "apply of windows" in line:
            print(line.split("INFO - ")[-1][:300])
    if dag_test.returncode != 0 or run_state != "success":
        print(output[-4000:], file=sys.stderr)
        print("demo: the DAG run did not succeed", file=sys.stderr)
        return 1
    print(
        "demo: the example DAG ran: preflight, snapshot, capture and apply succeeded; the Iceberg tables are "
        "lake.demo.customers and lake.demo.orders in .airflow-home/mysql_cdc/warehouse"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
