"""Provider metadata read by Airflow's ProvidersManager through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_mysql_cdc import __version__

PACKAGE = "airflow_provider_mysql_cdc"


def get_provider_info() -> dict[str, Any]:
    """Describe the provider: name, versions, lifecycle, connection type, hooks, operators, sensors, triggers.

    The ``mysql_cdc`` connection form is declared here only (``ui-field-behaviour`` for the standard
    fields, ``conn-fields`` for the extras): Airflow's ProvidersManager reads it without importing the hook.
    """
    return {
        "package-name": "airflow-provider-mysql-cdc",
        "name": "MySQL CDC",
        "description": "Batch change-data-capture from MySQL binlogs (GTID windows) into Iceberg tables with Spark.",
        "versions": [__version__],
        # AIP-95 lifecycle stage (provider.yaml schema: incubation, production, mature, deprecated).
        "lifecycle": "incubation",
        "integrations": [
            {
                "integration-name": "MySQL CDC",
                "external-doc-url": "https://dev.mysql.com/doc/refman/8.4/en/replication-gtids.html",
                "tags": ["software"],
            }
        ],
        "hooks": [{"integration-name": "MySQL CDC", "python-modules": [f"{PACKAGE}.hooks.mysql_cdc"]}],
        "operators": [
            {
                "integration-name": "MySQL CDC",
                "python-modules": [
                    f"{PACKAGE}.operators.preflight",
                    f"{PACKAGE}.operators.snapshot",
                    f"{PACKAGE}.operators.capture",
                    f"{PACKAGE}.operators.apply",
                    f"{PACKAGE}.operators.verify",
                    f"{PACKAGE}.operators.approval",
                ],
            }
        ],
        "sensors": [{"integration-name": "MySQL CDC", "python-modules": [f"{PACKAGE}.sensors.purge_headroom"]}],
        "triggers": [{"integration-name": "MySQL CDC", "python-modules": [f"{PACKAGE}.triggers.purge_headroom"]}],
        "connection-types": [
            {
                "connection-type": "mysql_cdc",
                "hook-class-name": f"{PACKAGE}.hooks.mysql_cdc.MySqlCdcHook",
                "hook-name": "MySQL CDC",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Default database (optional)"},
                    "placeholders": {"host": "mysql.example.internal", "port": "3306", "login": "cdc"},
                },
                "conn-fields": {
                    "server_id": {
                        "label": "Replica server id",
                        "description": "Unique server_id for this binlog reader (not any real replica's).",
                        "schema": {"type": ["integer", "null"]},
                    },
                    "ssl_mode": {
                        "label": "SSL mode",
                        "description": "DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY",
                        "schema": {"type": ["string", "null"], "default": "PREFERRED"},
                    },
                    "ssl_ca": {"label": "SSL CA file", "schema": {"type": ["string", "null"]}},
                    "ssl_cert": {"label": "SSL client certificate file", "schema": {"type": ["string", "null"]}},
                    "ssl_key": {"label": "SSL client key file", "schema": {"type": ["string", "null"]}},
                    "connect_timeout": {
                        "label": "Connect timeout (s)",
                        "schema": {"type": ["integer", "null"], "default": 10},
                    },
                    "unix_socket": {
                        "label": "Unix socket",
                        "description": "Path of the server's socket file, to connect through it instead of TCP.",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
    }
