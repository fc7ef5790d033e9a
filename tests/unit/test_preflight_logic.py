"""Pure preflight evaluation: settings, versions, SHOW GRANTS parsing, table selection."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig, SslMode
from airflow_provider_mysql_cdc.core.preflight import (
    Grants,
    ServerFacts,
    ServerVersion,
    Severity,
    TableName,
    evaluate,
    select_tables,
)
from airflow_provider_mysql_cdc.errors import ConfigurationError

GOOD_VARIABLES = {
    "gtid_mode": "ON",
    "enforce_gtid_consistency": "ON",
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "binlog_expire_logs_seconds": "2592000",
    "server_id": "1",
}
CDC_GRANTS = [
    "GRANT SELECT, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
]
TABLES = (TableName("shop", "orders"), TableName("shop", "customers"), TableName("hr", "staff"))


def facts(
    variables: Mapping[str, str | None] | None = None,
    grants: list[str] | None = None,
    version: str = "8.4.3",
) -> ServerFacts:
    return ServerFacts(
        version=version,
        version_comment="MySQL Community Server - GPL",
        current_user="cdc@%",
        variables={**GOOD_VARIABLES, **(variables or {})},
        grants=Grants.parse(CDC_GRANTS if grants is None else grants),
        visible_tables=TABLES,
    )


def test_good_server_passes() -> None:
    report = evaluate(facts(), ["shop.*"])
    assert report.ok
    assert report.findings == ()
    assert [str(t) for t in report.selected_tables] == ["shop.customers", "shop.orders"]
    assert "0 error(s), 0 warning(s)" in report.format()


def test_every_bad_setting_is_reported_at_once_with_its_fix() -> None:
    bad = {
        "gtid_mode": "OFF",
        "enforce_gtid_consistency": "OFF",
        "log_bin": "OFF",
        "binlog_format": "STATEMENT",
        "binlog_row_image": "MINIMAL",
        "binlog_row_metadata": "MINIMAL",
        "binlog_expire_logs_seconds": "3600",
    }
    report = evaluate(facts(bad), ["shop.orders"])
    by_check = {f.check: f for f in report.findings}
    assert set(by_check) == {
        "gtid_mode",
        "enforce_gtid_consistency",
        "log_bin",
        "binlog_format",
        "binlog_row_image",
        "binlog_row_metadata",
        "binlog_expire_logs_seconds",
    }
    assert by_check["binlog_expire_logs_seconds"].severity is Severity.WARNING
    assert len(report.errors) == 6
    assert by_check["binlog_format"].fix.startswith("SET PERSIST binlog_format = 'ROW';")
    assert by_check["binlog_row_image"].fix == "SET PERSIST binlog_row_image = 'FULL';"
    assert by_check["binlog_row_metadata"].fix == "SET PERSIST binlog_row_metadata = 'FULL';"
    assert "log_bin" in by_check["log_bin"].fix
    gtid_fix = by_check["gtid_mode"].fix.splitlines()
    assert gtid_fix[0] == "SET PERSIST enforce_gtid_consistency = ON;"
    assert [line for line in gtid_fix if line.startswith("SET PERSIST gtid_mode")] == [
        "SET PERSIST gtid_mode = OFF_PERMISSIVE;",
        "SET PERSIST gtid_mode = ON_PERMISSIVE;",
        "SET PERSIST gtid_mode = ON;",
    ]
    assert not report.ok
    text = report.format()
    for finding in report.findings:
        assert finding.problem in text


def test_gtid_mode_fix_continues_from_the_current_step() -> None:
    report = evaluate(facts({"gtid_mode": "ON_PERMISSIVE"}))
    fix = next(f.fix for f in report.findings if f.check == "gtid_mode")
    assert "SET PERSIST gtid_mode = OFF_PERMISSIVE;" not in fix
    assert fix.endswith("SET PERSIST gtid_mode = ON;")


def test_expiry_zero_means_never_and_is_fine() -> None:
    assert evaluate(facts({"binlog_expire_logs_seconds": "0"})).findings == ()


def test_partial_json_row_values_are_fine_and_every_report_explains_session_settings() -> None:
    report = evaluate(facts({"binlog_row_value_options": "PARTIAL_JSON"}))
    assert report.findings == () and report.ok  # capture applies the diffs
    assert "note: any session may set binlog_row_image" in report.format()
    assert "binlog_transaction_compression=ON" in report.format()


def test_missing_privileges_name_the_grant() -> None:
    report = evaluate(facts(grants=["GRANT USAGE ON *.* TO `cdc`@`%`"]), ["shop.orders"])
    fixes = [f.fix for f in report.findings]
    assert "GRANT REPLICATION SLAVE ON *.* TO 'cdc'@'%';" in fixes
    assert "GRANT REPLICATION CLIENT ON *.* TO 'cdc'@'%';" in fixes
    assert "GRANT SELECT ON `shop`.`orders` TO 'cdc'@'%';" in fixes
    assert "GRANT LOCK TABLES ON `shop`.* TO 'cdc'@'%';" in fixes
    assert all(f.check == "privileges" for f in report.findings)


def test_database_and_table_level_grants_count() -> None:
    grants = [
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
        "GRANT SELECT, LOCK TABLES ON `shop`.* TO `cdc`@`%`",
        "GRANT SELECT ON `hr`.`staff` TO `cdc`@`%`",
    ]
    report = evaluate(facts(grants=grants), ["shop.*", "hr.staff"])
    assert [f.problem for f in report.findings] == [
        "'cdc'@'%' lacks LOCK TABLES on hr.staff (for the consistent snapshot)"
    ]


def test_grants_parser_handles_all_wildcards_columns_and_roles() -> None:
    grants = Grants.parse(
        [
            "GRANT ALL PRIVILEGES ON `sh\\_%`.* TO `cdc`@`%`",
            "GRANT SELECT (`id`, `name`) ON `hr`.`staff` TO `cdc`@`%`",
            "GRANT `reader`@`%` TO `cdc`@`%`",
            "GRANT REPLICATION_SLAVE_ADMIN ON *.* TO `cdc`@`%`",
        ]
    )
    assert grants.allows("SELECT", TableName("sh_x", "t"))
    assert not grants.allows("SELECT", TableName("shax", "t"))  # the underscore was escaped
    assert not grants.allows("SELECT", TableName("hr", "staff"))  # column grants do not cover the table
    assert not grants.allows("REPLICATION SLAVE")
    assert grants.role_grants == ("`reader`@`%`",)


def test_unknown_table_pattern_is_an_error() -> None:
    report = evaluate(facts(), ["shop.nope", "shop"])
    problems = [f.problem for f in report.findings]
    assert len(problems) == 2
    assert all("no table matches" in p for p in problems)


def test_select_tables_ignores_system_schemas_and_deduplicates() -> None:
    visible = [*TABLES, TableName("mysql", "user")]
    selected, unmatched = select_tables(["*.*", "shop.orders"], visible)
    assert [str(t) for t in selected] == ["hr.staff", "shop.customers", "shop.orders"]
    assert unmatched == []


@pytest.mark.parametrize(
    ("version", "comment", "statement", "tags"),
    [
        ("8.0.36", "", "SHOW MASTER STATUS", False),
        ("8.2.0", "", "SHOW BINARY LOG STATUS", False),
        ("8.4.3-log", "", "SHOW BINARY LOG STATUS", True),
        ("9.7.0", "(Debian)", "SHOW BINARY LOG STATUS", True),
        ("10.11.6-MariaDB-0+deb12u1", "Debian 12", "SHOW MASTER STATUS", False),
    ],
)
def test_server_version_flavour(version: str, comment: str, statement: str, tags: bool) -> None:
    server = ServerVersion.parse(version, comment)
    assert server.binlog_status_statement == statement
    assert server.supports_tagged_gtids is tags


def test_mariadb_and_old_mysql_are_refused() -> None:
    assert not evaluate(facts(version="10.11.6-MariaDB")).ok
    assert not evaluate(facts(version="5.7.44")).ok


def test_connection_config_hides_secrets_and_validates() -> None:
    config = MySqlConnectionConfig(host="db", user="cdc", password="s3cr3t-pw", ssl_key="/k.pem")
    assert "s3cr3t-pw" not in repr(config)
    assert "/k.pem" not in repr(config)
    assert config.address == "cdc@db:3306"
    assert SslMode.parse("verify-ca") is SslMode.VERIFY_CA
    with pytest.raises(ConfigurationError, match="ssl_mode"):
        SslMode.parse("sometimes")
    with pytest.raises(ConfigurationError, match="ssl_ca"):
        MySqlConnectionConfig(host="db", ssl_mode=SslMode.VERIFY_IDENTITY)
    with pytest.raises(ConfigurationError, match="port"):
        MySqlConnectionConfig(host="db", port=0)


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("1", True), ("2", False)])
def test_lower_case_table_names_2_is_refused(value: str, ok: bool) -> None:
    """0 (Linux) and 1 (Windows) keep one spelling of every name in the binlog's table maps; 2 (macOS)
    stores names as written but InnoDB's in lower case, so statements and table maps cannot be matched."""
    report = evaluate(facts({"lower_case_table_names": value}), ["shop.*"])
    assert report.ok is ok
    if not ok:
        (finding,) = report.errors
        assert finding.check == "lower_case_table_names" and "initialized" in finding.fix


@pytest.mark.parametrize(
    ("do_db", "ignore_db", "shown"),
    [("shop", "", "binlog-do-db=shop"), ("", "tmp,scratch", "binlog-ignore-db=tmp,scratch")],
)
def test_binlog_database_filters_are_refused(do_db: str, ignore_db: str, shown: str) -> None:
    report = evaluate(dataclasses.replace(facts(), binlog_do_db=do_db, binlog_ignore_db=ignore_db), ["shop.*"])
    (finding,) = report.errors
    assert finding.check == "binlog_filters" and shown in finding.problem
    assert "default database" in finding.problem and "replicate-do-db" in finding.fix


@pytest.mark.parametrize(
    ("channels", "logs", "ok"), [(1, "OFF", False), (1, "ON", True), (0, "OFF", True), (2, "0", False)]
)
def test_a_replica_that_does_not_log_what_it_applies_is_refused(channels: int, logs: str, ok: bool) -> None:
    report = evaluate(dataclasses.replace(facts({"log_replica_updates": logs}), replica_channels=channels))
    assert report.ok is ok
    if not ok:
        (finding,) = report.errors
        assert finding.check == "log_replica_updates" and "capture from its source" in finding.fix


@pytest.mark.parametrize(
    ("version", "native", "warned"),
    [("8.4.3", None, True), ("9.7.4", "ON", True), ("9.7.4", "OFF", False), ("9.6.0", None, False)],
)
def test_selected_children_of_cascading_keys_are_named_where_cascades_are_not_logged(
    version: str, native: str | None, warned: bool
) -> None:
    """A selected table whose rows a foreign key's cascade changes waits alone where the binlog does not
    hold those changes: a warning names it (and no other table), the server's reason and the fixes."""
    children = (TableName("shop", "orders"), TableName("hr", "staff"))
    server = dataclasses.replace(
        facts({"innodb_native_foreign_keys": native}, version=version), cascading_children=children
    )
    report = evaluate(server, ["shop.*"])
    assert report.ok
    if not warned:
        assert report.findings == ()
        return
    (finding,) = report.warnings
    assert finding.check == "foreign_key_cascades"
    assert "shop.orders have a foreign key" in finding.problem and "hr.staff" not in finding.problem
    assert ("innodb_native_foreign_keys=ON" in finding.problem) is (native == "ON"), finding.problem
    assert "innodb_native_foreign_keys=OFF" in finding.fix and "exclude_tables" in finding.fix


@pytest.mark.parametrize(("action", "warned"), [("IGNORE_ERROR", True), ("ABORT_SERVER", False), (None, False)])
def test_a_binlog_that_may_stop_logging_on_an_error_is_warned_about(action: str | None, warned: bool) -> None:
    report = evaluate(facts({"binlog_error_action": action}))
    assert report.ok
    assert [finding.check for finding in report.warnings] == (["binlog_error_action"] if warned else [])
    if warned:
        assert "reach no binlog" in report.warnings[0].problem and "ABORT_SERVER" in report.warnings[0].fix
