"""Command line: ``python -m airflow_provider_mysql_cdc preflight --conn-id mysql_cdc_default``, and
``python -m airflow_provider_mysql_cdc verify --pipeline P --tables db.t --warehouse W`` (see
docs/operators.md "Verify: the lake against MySQL as of one GTID set").

Credentials come from the Airflow connection (metadata database, secrets backend or an
``AIRFLOW_CONN_<ID>`` environment variable), never from the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

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
    _verify_parser(commands)
    return parser


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _verify_parser(commands: Any) -> None:
    verify = commands.add_parser(
        "verify",
        help="compare Iceberg targets with MySQL as of one GTID set (MySQL keeps being written to)",
    )
    verify.add_argument("--conn-id", default="mysql_cdc_default", help="Airflow connection id of the source")
    verify.add_argument("--pipeline", required=True, help="pipeline name (the targets' apply commits name it)")
    verify.add_argument(
        "--tables", nargs="+", required=True, metavar="DB.TABLE", help="tables (or glob patterns) to verify"
    )
    verify.add_argument("--staging-uri", help="the pipeline's staging (verifies targets holding only a snapshot)")
    verify.add_argument("--catalog", default="lake", help="Iceberg catalog of the targets (default: %(default)s)")
    verify.add_argument("--warehouse", help="warehouse of a Hadoop catalog (or give --catalog-conf)")
    verify.add_argument("--catalog-conf", nargs="*", type=_key_value, default=[], metavar="KEY=VALUE")
    verify.add_argument("--target-template", default="{database}.{table}")
    verify.add_argument("--scratch-uri", help="staging URI for the throwaway snapshot and window")
    verify.add_argument("--sample-fraction", type=float, default=1.0, help="fraction of key ranges (default: all)")
    verify.add_argument("--seed", type=int, default=0)
    verify.add_argument("--row-budget", type=int, default=1_000_000, help="rows per table compared row by row")
    verify.add_argument("--rows-per-range", type=int, default=10_000)
    verify.add_argument("--max-keys", type=int, default=20, help="differing keys listed per table")
    verify.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    verify.add_argument("--jars", nargs="*", default=[], help="Iceberg runtime jar paths")
    verify.add_argument("--packages", nargs="*", default=None, help="Maven coordinates (default: Iceberg runtime)")
    verify.add_argument("--conf", nargs="*", type=_key_value, default=[], metavar="KEY=VALUE", help="Spark conf")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")


def _verify(args: argparse.Namespace) -> int:
    """Run a verification; 0 when every table is equal, 1 on a difference or an unverified table."""
    from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
    from airflow_provider_mysql_cdc.operators.apply import ICEBERG_PACKAGE, apply_spark_conf
    from airflow_provider_mysql_cdc.verify import DEFAULT_VERIFY_SERVER_ID
    from airflow_provider_mysql_cdc.verify.engine import VerifyRequest, verify_targets
    from airflow_provider_mysql_cdc.verify.session import verify_session

    request = VerifyRequest(
        pipeline=args.pipeline,
        tables=tuple(args.tables),
        staging_uri=args.staging_uri,
        catalog=args.catalog,
        target_template=args.target_template,
        scratch_uri=args.scratch_uri,
        sample_fraction=args.sample_fraction,
        seed=args.seed,
        rows_per_range=args.rows_per_range,
        row_budget=args.row_budget,
        max_keys=args.max_keys,
        replica_server_id=DEFAULT_VERIFY_SERVER_ID,
    )
    source = MySqlCdcHook(mysql_cdc_conn_id=args.conn_id).get_connection_config()
    conf = {**apply_spark_conf(args.catalog, args.warehouse, dict(args.catalog_conf)), **dict(args.conf)}
    packages = args.packages if args.packages is not None else ([] if args.jars else [ICEBERG_PACKAGE])
    spark = verify_session(f"mysql-cdc-verify-{args.pipeline}", args.master, conf, args.jars, packages)
    report = verify_targets(spark, source, request)
    print(json.dumps(report.as_xcom(), indent=2) if args.json else report.describe())
    return EXIT_PROBLEMS if report.differing or report.unverified else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; exit 0 when fine, 1 when preflight found problems (verify: a difference or an
    unverified table), 2 when it could not run."""
    args = _parser().parse_args(argv)
    if args.command == "verify":
        try:
            return _verify(args)
        except MySqlCdcError as exc:
            print(f"verify could not run: {exc}", file=sys.stderr)
            return EXIT_FAILED
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
