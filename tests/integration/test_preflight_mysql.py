"""Preflight against real servers: a good one, one started with every setting wrong, and a real
account lacking privileges. Also the CLI, with credentials only in the Airflow connection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.preflight import Severity
from airflow_provider_mysql_cdc.errors import MySqlAuthenticationError, MySqlUnreachableError
from airflow_provider_mysql_cdc.mysql.client import connection_to
from airflow_provider_mysql_cdc.mysql.introspection import read_binlog_inventory, run_preflight
from tests.conftest import INSTANCE_PREFIX
from tests.mysql_servers import MySqlTestServer, free_port, running_local
from tests.reliability.replica import running_replica

pytestmark = pytest.mark.mysql

LIMITED_PASSWORD = "Limited-pw-7f3a"


@pytest.fixture(scope="module")
def preflight_schema(mysql_server: MySqlTestServer) -> Iterator[MySqlTestServer]:
    """Tables ``preflight_db.allowed`` (SELECT for the limited user) and ``preflight_db.visible_only``."""
    mysql_server.execute(
        "DROP DATABASE IF EXISTS preflight_db",
        "CREATE DATABASE preflight_db",
        "CREATE TABLE preflight_db.allowed (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE preflight_db.visible_only (id INT PRIMARY KEY)",
        "DROP USER IF EXISTS 'cdc_limited'@'%'",
        f"CREATE USER 'cdc_limited'@'%' IDENTIFIED BY '{LIMITED_PASSWORD}'",
        "GRANT SELECT ON preflight_db.allowed TO 'cdc_limited'@'%'",
        "GRANT INSERT ON preflight_db.visible_only TO 'cdc_limited'@'%'",
    )
    yield mysql_server
    mysql_server.execute("DROP USER IF EXISTS 'cdc_limited'@'%'", "DROP DATABASE IF EXISTS preflight_db")


def test_well_configured_server_and_documented_account_pass(preflight_schema: MySqlTestServer) -> None:
    report = run_preflight(preflight_schema.cdc, ["preflight_db.*"])
    assert report.ok, report.format()
    assert report.errors == ()
    assert [str(t) for t in report.selected_tables] == ["preflight_db.allowed", "preflight_db.visible_only"]
    assert report.server.binlog_status_statement == "SHOW BINARY LOG STATUS"


def test_every_wrong_setting_is_reported_at_once(misconfigured_mysql: MySqlTestServer) -> None:
    report = run_preflight(misconfigured_mysql.cdc)
    checks = {finding.check: finding for finding in report.findings}
    assert set(checks) == {
        "gtid_mode",
        "enforce_gtid_consistency",
        "log_bin",
        "binlog_format",
        "binlog_row_image",
        "binlog_row_metadata",
        "binlog_expire_logs_seconds",
    }, report.format()
    assert checks["binlog_expire_logs_seconds"].severity is Severity.WARNING
    assert not report.ok


def test_the_printed_fixes_repair_the_dynamic_settings(misconfigured_mysql: MySqlTestServer) -> None:
    """Run the fix statements as an administrator; what is left is only what needs a restart."""
    report = run_preflight(misconfigured_mysql.cdc)
    statements = [
        line.strip().rstrip(";")
        for finding in report.findings
        if finding.check != "log_bin"
        for line in finding.fix.splitlines()
        if line.startswith("SET PERSIST")
    ]
    ordered = [s for s in statements if "gtid_mode" not in s and "enforce" not in s]
    ordered += [s for s in statements if "enforce" in s][:1] + [s for s in statements if "gtid_mode" in s]
    try:
        misconfigured_mysql.execute(*ordered)
        after = run_preflight(misconfigured_mysql.cdc)
        assert [finding.check for finding in after.findings] == ["log_bin"], after.format()
    finally:
        # Forget the persisted fixes and restart: the server is back to its wrong command-line settings.
        misconfigured_mysql.execute("RESET PERSIST")
        assert misconfigured_mysql.local is not None
        misconfigured_mysql.local.stop()
        misconfigured_mysql.local.start()
    assert [f.check for f in run_preflight(misconfigured_mysql.cdc).findings] == [f.check for f in report.findings]


def test_missing_privileges_are_named_with_their_grants(preflight_schema: MySqlTestServer) -> None:
    limited = preflight_schema.account("cdc_limited", LIMITED_PASSWORD)
    report = run_preflight(limited, ["preflight_db.*", "preflight_db.hidden"])
    fixes = {finding.fix for finding in report.findings}
    assert "GRANT REPLICATION SLAVE ON *.* TO 'cdc_limited'@'%';" in fixes
    assert "GRANT REPLICATION CLIENT ON *.* TO 'cdc_limited'@'%';" in fixes
    assert "GRANT SELECT ON `preflight_db`.`visible_only` TO 'cdc_limited'@'%';" in fixes
    assert "GRANT LOCK TABLES ON `preflight_db`.* TO 'cdc_limited'@'%';" in fixes
    assert any("no table matches 'preflight_db.hidden'" in finding.problem for finding in report.findings)
    assert not report.ok
    # The printed grants really are sufficient.
    preflight_schema.execute(
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc_limited'@'%'",
        "GRANT SELECT ON preflight_db.visible_only TO 'cdc_limited'@'%'",
        "GRANT LOCK TABLES ON preflight_db.* TO 'cdc_limited'@'%'",
    )
    try:
        assert run_preflight(limited, ["preflight_db.*"]).ok
    finally:
        preflight_schema.execute(
            "REVOKE REPLICATION SLAVE, REPLICATION CLIENT ON *.* FROM 'cdc_limited'@'%'",
            "REVOKE SELECT ON preflight_db.visible_only FROM 'cdc_limited'@'%'",
            "REVOKE LOCK TABLES ON preflight_db.* FROM 'cdc_limited'@'%'",
        )


def test_wrong_password_and_unreachable_host_are_clear_and_secret_free(mysql_server: MySqlTestServer) -> None:
    wrong = mysql_server.account("cdc", "definitely-Wrong-pw-123")
    with pytest.raises(MySqlAuthenticationError) as auth:
        run_preflight(wrong)
    assert "definitely-Wrong-pw-123" not in str(auth.value)
    assert "password" in str(auth.value)
    closed = mysql_server.account("cdc", "some-pw-XYZ").__class__(
        host="127.0.0.1", port=free_port(), user="cdc", password="some-pw-XYZ", connect_timeout=3
    )
    with pytest.raises(MySqlUnreachableError) as unreachable:
        run_preflight(closed)
    assert "some-pw-XYZ" not in str(unreachable.value)
    assert str(closed.port) in str(unreachable.value)


def test_binlog_inventory_reads_gtid_state(mysql_server: MySqlTestServer) -> None:
    mysql_server.execute(
        "CREATE DATABASE IF NOT EXISTS inventory_db", "CREATE TABLE IF NOT EXISTS inventory_db.t (id INT PRIMARY KEY)"
    )
    with connection_to(mysql_server.cdc) as connection:
        inventory = read_binlog_inventory(connection, mysql_server.cdc)
    assert inventory.files, "a binlog-enabled server lists at least one binlog file"
    assert inventory.current_file == inventory.files[-1].name
    assert f"{inventory.server_uuid}:1" in inventory.gtid_executed
    assert inventory.gtid_purged <= inventory.gtid_executed
    assert json.dumps(inventory.as_xcom())


def run_cli(*args: str, conn_json: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIRFLOW_CONN_MYSQL_CDC_TEST": conn_json}
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_mysql_cdc", "preflight", "--conn-id", "mysql_cdc_test", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_cli_reports_and_exits_by_outcome(
    preflight_schema: MySqlTestServer, misconfigured_mysql: MySqlTestServer, airflow_home: object
) -> None:
    good = run_cli("--tables", "preflight_db.*", conn_json=preflight_schema.airflow_conn_json())
    assert good.returncode == 0, good.stdout + good.stderr
    assert "0 error(s)" in good.stdout

    bad = run_cli("--json", conn_json=misconfigured_mysql.airflow_conn_json(conn_type="mysql"))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    findings = json.loads(bad.stdout)["findings"]
    assert {f["check"] for f in findings} >= {"gtid_mode", "log_bin", "binlog_format"}

    wrong = preflight_schema.account("cdc", "Cli-wrong-pw-999")
    failed = run_cli(conn_json=preflight_schema.airflow_conn_json(wrong))
    assert failed.returncode == 2
    assert "Cli-wrong-pw-999" not in failed.stdout + failed.stderr
    assert "rejected" in failed.stderr


@pytest.fixture(scope="module")
def filtered_binlog_mysql() -> Iterator[MySqlTestServer]:
    """A server started with ``binlog-ignore-db=scratch``, otherwise well configured."""
    with running_local(f"{INSTANCE_PREFIX}-binlog-filter", {"binlog_ignore_db": "scratch"}) as server:
        yield server


def test_a_filtered_binlog_is_refused_with_what_it_loses(filtered_binlog_mysql: MySqlTestServer) -> None:
    """MySQL logs DDL by the session's default database: from ``USE scratch``, a TRUNCATE of
    ``shop.orders`` reaches no binlog (no event, no GTID), so no capture can follow it. The preflight
    (and every capture, which runs the same checks) refuses such a server, naming the filter and the fix."""
    server = filtered_binlog_mysql
    server.execute(
        "CREATE DATABASE shop",
        "CREATE DATABASE scratch",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY)",
        "INSERT INTO shop.orders VALUES (1), (2)",
    )
    before = server.execute("SELECT @@GLOBAL.gtid_executed")
    server.execute("USE scratch", "TRUNCATE TABLE shop.orders")
    assert server.execute("SELECT COUNT(*) FROM shop.orders") == [(0,)]
    assert server.execute("SELECT @@GLOBAL.gtid_executed") == before  # the truncate was not logged
    report = run_preflight(server.cdc, ["shop.*"])
    (finding,) = report.errors
    assert finding.check == "binlog_filters" and "binlog-ignore-db=scratch" in finding.problem, report.format()
    assert "Remove binlog-do-db / binlog-ignore-db" in finding.fix


def test_a_replica_that_does_not_log_what_it_applies_is_refused(mysql_server: MySqlTestServer) -> None:
    """With ``log_replica_updates=OFF`` a replica's ``gtid_executed`` holds its source's transactions but
    no binlog of its own does (MySQL 9.7 counts them in ``gtid_purged``): every window would find them
    purged. The preflight refuses such a replica by name, with the fix."""
    with running_replica(
        mysql_server, f"{INSTANCE_PREFIX}-replica-unlogged", skip_existing=True, settings={"log_replica_updates": "OFF"}
    ) as replica:
        mysql_server.execute(
            "CREATE DATABASE IF NOT EXISTS preflight_replica",
            "CREATE TABLE IF NOT EXISTS preflight_replica.t (id INT PRIMARY KEY)",
            "REPLACE INTO preflight_replica.t VALUES (1)",
        )
        replica.catch_up()
        applied = GtidSet.parse(str(mysql_server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))
        purged = GtidSet.parse(str(replica.server.execute("SELECT @@GLOBAL.gtid_purged")[0][0]))
        assert applied <= purged  # the applied transactions reached no binlog of the replica
        report = run_preflight(replica.server.cdc)
        (finding,) = report.errors
        assert finding.check == "log_replica_updates", report.format()
    assert run_preflight(mysql_server.cdc).ok  # the source itself is fine


def test_a_server_that_stops_logging_on_a_binlog_error_is_warned_about(mysql_server: MySqlTestServer) -> None:
    """``binlog_error_action=IGNORE_ERROR`` (dynamic): on a failed binlog write MySQL turns logging off and
    goes on committing. The preflight warns, with the statement that restores the default."""
    mysql_server.execute("SET GLOBAL binlog_error_action = 'IGNORE_ERROR'")
    try:
        report = run_preflight(mysql_server.cdc)
    finally:
        mysql_server.execute("SET GLOBAL binlog_error_action = 'ABORT_SERVER'")
    assert report.ok
    (warning,) = report.warnings
    assert warning.check == "binlog_error_action" and "reach no binlog" in warning.problem, report.format()
    assert run_preflight(mysql_server.cdc).warnings == ()
