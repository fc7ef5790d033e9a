"""Command line: ``python -m airflow_provider_mysql_cdc preflight --conn-id mysql_cdc_default``.

Credentials come from the Airflow connection (metadata database, secrets backend or an
``AIRFLOW_CONN_<ID>`` environment variable), never from the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from airflow_provider_mysql_cdc.core.preflight import DEFAULT_MIN_BINLOG_RETENTION_SECONDS
from airflow_provider_mysql_cdc.errors import MySqlCdcError

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_FAILED = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_mysql_cdc", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    preflight = commands.add_parser(
        "preflight",
        help="check a MySQL source's GTID/binlog settings and privileges; prints every fix",
    )
    preflight.add_argument("--conn-id", default="mysql_cdc_default", help="Airflow connection id (mysql_cdc or mysql)")
    preflight.add_argument(
        "--tables", nargs="*", default=[], metavar="DB.TABLE", help="database.table glob patterns to check SELECT on"
    )
    preflight.add_argument(
        "--min-binlog-retention-seconds",
        type=int,
        default=DEFAULT_MIN_BINLOG_RETENTION_SECONDS,
        help="warn when binlog_expire_logs_seconds is below this (default: %(default)s)",
    )
    preflight.add_argument("--json", action="store_true", help="print the findings as JSON")
    preflight.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; exit 0 when fine, 1 when preflight found problems, 2 when it could not run."""
    args = _parser().parse_args(argv)
    from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook

    try:
        report = MySqlCdcHook(mysql_cdc_conn_id=args.conn_id).preflight(
            args.tables, min_binlog_retention_seconds=args.min_binlog_retention_seconds
        )
    except MySqlCdcError as exc:
        print(f"preflight could not run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        findings = [
            {"check": f.check, "severity": f.severity.value, "problem": f.problem, "fix": f.fix}
            for f in report.findings
        ]
        print(json.dumps({"server": str(report.server), "ok": report.ok, "findings": findings}, indent=2))
    else:
        print(report.format())
    if not report.ok or (args.strict and report.warnings):
        return EXIT_PROBLEMS
    return EXIT_OK
