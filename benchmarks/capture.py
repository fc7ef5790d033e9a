"""Capture throughput: this project's ``capture_window`` against python-mysql-replication alone.

What it measures, in one run on one binlog:

1. **Load.** A table ``bench.rows`` with seven mixed columns (BIGINT key, INT, VARCHAR, DECIMAL,
   DATETIME(6), DOUBLE with NULLs, TINYINT) receives ``--rows N`` rows with deterministic values,
   as multi-row INSERTs of ``--rows-per-transaction`` rows each (default 1,000; every statement its
   own autocommit transaction, so 1 gives an OLTP-shaped binlog where each row is a transaction of
   its own), through the admin (root) account. ``@@gtid_executed`` is read just before the load:
   that is the frontier both readers start from.
2. **Library alone** (phase ``library``): ``pymysqlreplication.BinLogStreamReader`` with
   ``auto_position`` = that frontier and ``only_events=[WriteRowsEvent]``, reading every row's values
   (``for row in event.rows: row["values"]``) until all N rows were read. Replica server id 4200001.
3. **mysqlbinlog** (the limit): the bundled ``mysqlbinlog`` reads the same binlog from the server as
   the ``cdc`` account after the same frontier (``--read-from-remote-source=BINLOG-DUMP-GTIDS
   --exclude-gtids``, as the capture asks for it) and prints every row as pseudo-SQL (``--verbose
   --base64-output=DECODE-ROWS``) into a file; the clock covers the whole process. It is MySQL's own
   C++ decoder of the same events: what a reader in Python would have to match. Its rows are counted
   and their ids summed from the file afterwards (not timed).
4. **Capture** (phase ``capture``): ``capture_window`` with ``CutoffRule.CATCH_UP``, a fresh SQLite
   ``FrontierStore`` and staging in temporary directories, the pipeline's initial frontier = the
   frontier above; it reads the binlog, decodes and converts every row and writes Parquet (zstd),
   then publishes the manifest. Replica server id 4200002. Both readers use the ``cdc`` account.
5. **Content check** (not timed): the same ``capture_window`` once more, with every row event decoded
   by python-mysql-replication plus this provider's fixes (the path the compiled row decoders
   replace; forced in that child process by making ``row_images`` hand no event to them). Its staged
   Parquet must equal the timed capture's: same files, schemas and values, batch by batch.

Each timed phase runs in its own child process (this script with the hidden ``--phase`` option,
parameters on stdin, a JSON result as the child's last stdout line), so its peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss`` reported by the child) belongs to that phase alone. Imports,
the store's schema and the connection settings are prepared before the clock starts; the clock
covers opening the stream through the last row (library) or the whole ``capture_window`` call
(capture: planning, reading, Parquet, manifest, frontier update).

The benchmark fails (exit code 1) unless the three readers saw exactly N rows: the library loop and
mysqlbinlog's output give the rows and the sum of their ``id`` values; for the capture, the manifest's
op counts, the Parquet files' row counts and the staged ``id`` values are checked; and unless the
content check finds the staged Parquet equal to the reference capture's.

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``bench-capture``; see
:mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/capture.py --rows 500000
    .venv/bin/python benchmarks/capture.py --rows 100000 --profile     # plus a cProfile'd capture run
    .venv/bin/python benchmarks/capture.py --rows 100000 --rows-per-transaction 1   # one row a transaction
    .venv/bin/python benchmarks/capture.py --mysql-url mysql://root:PASSWORD@127.0.0.1:3306

``--mysql-url`` uses an existing server instead (an admin account; database ``bench`` is dropped
and re-created; the ``cdc`` account is created if missing, password from
``MYSQL_CDC_TEST_CDC_PASSWORD``, default ``cdc-test-pw``). The server needs the settings listed in
docs/connection.md (GTIDs, ROW binlog, FULL row image and metadata).

The last line printed is always (one line)::

    capture rows=<n> rows_per_s=<x> library_rows_per_s=<y> ratio=<x/y> peak_rss_mb=<m>
        mysqlbinlog_rows_per_s=<z> of_mysqlbinlog=<x/z>

where ``peak_rss_mb`` is the capture phase's peak RSS; the library's peak RSS and mysqlbinlog's
figures (CPU seconds of the client and of mysqld) are on earlier lines.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql

# mysql_bench (this folder, sys.path[0] of a script) mypy checks only as benchmarks.mysql_bench.
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]
    BenchmarkError,
    Server,
    cdc_config,
    client_argv,
    client_phase,
    execute,
    existing_server,
    local_server,
    peak_rss_mb,
    print_summary,
    require_positive,
    run_client,
    run_phase,
    run_phase_child,
)
from pymysql.constants import CLIENT

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig

DATABASE = "bench"
TABLE = "rows"
#: Rows per INSERT statement (each its own autocommit transaction) unless ``--rows-per-transaction`` says.
DEFAULT_ROWS_PER_TRANSACTION = 1_000
#: Bytes of INSERT statements sent in one round trip (a multi-statement query) during the load.
ROUND_TRIP_BYTES = 64_000
LIBRARY_SERVER_ID = 4_200_001
CAPTURE_SERVER_ID = 4_200_002
PROFILE_SERVER_ID = 4_200_003
REFERENCE_SERVER_ID = 4_200_004
INSTANCE_NAME = "bench-capture"
#: Server options of the local instance: a bigger buffer pool and no fsync per commit, so the load is
#: quick; neither changes what the binlog holds.
LOCAL_SETTINGS = {
    "innodb_buffer_pool_size": "512M",
    "innodb_flush_log_at_trx_commit": "2",
    "sync_binlog": "0",
}
#: This script, run again with ``--phase`` for each measured phase.
SCRIPT = str(Path(__file__).resolve())
CREATE_TABLE = f"""CREATE TABLE {DATABASE}.{TABLE} (
    id BIGINT NOT NULL PRIMARY KEY,
    a INT NOT NULL,
    b VARCHAR(64) NOT NULL,
    c DECIMAL(12,2) NOT NULL,
    d DATETIME(6) NOT NULL,
    e DOUBLE NULL,
    f TINYINT NOT NULL
)"""
_EPOCH = dt.datetime(2024, 1, 1)


# -- the load -----------------------------------------------------------------------------------


def row_text(i: int) -> str:
    """The SQL tuple of row ``i`` (deterministic, every column type exercised, ``e`` NULL every 10th row)."""
    a = (i * 2_654_435_761) % 4_294_967_296 - 2_147_483_648
    b = f"name-{i:010d}-{(i * 7_919) % 1_000_003:07d}" + "x" * (i % 32)
    c = f"{(i * 104_729) % 10_000_000_000 // 100}.{i % 100:02d}"
    moment = _EPOCH + dt.timedelta(seconds=i * 37, microseconds=(i * 7_919) % 1_000_000)
    e = "NULL" if i % 10 == 0 else repr(i / 7.0 - 1_000.0)
    f = i % 256 - 128
    return f"({i},{a},'{b}',{c},'{moment:%Y-%m-%d %H:%M:%S.%f}',{e},{f})"


def load(admin: MySqlConnectionConfig, rows: int, rows_per_transaction: int) -> tuple[str, float, int]:
    """(Re)create the table, then insert ``rows`` rows, ``rows_per_transaction`` rows an INSERT statement,
    each statement its own autocommit transaction (statements of up to :data:`ROUND_TRIP_BYTES` in all
    sent in one multi-statement query); returns (frontier before the load, seconds, statements)."""
    execute(admin, f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}", CREATE_TABLE)
    frontier = str(execute(admin, "SELECT @@GLOBAL.gtid_executed")[0][0] or "")
    if not frontier:
        raise BenchmarkError("@@gtid_executed is empty after CREATE TABLE: is gtid_mode ON?")
    started = time.perf_counter()
    statements = 0
    connection = pymysql.connect(**admin.pymysql_kwargs(), autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)
    try:
        with connection.cursor() as cursor:
            batch: list[str] = []
            batch_bytes = 0
            for first in range(1, rows + 1, rows_per_transaction):
                values = ",".join(row_text(i) for i in range(first, min(first + rows_per_transaction, rows + 1)))
                batch.append(f"INSERT INTO {DATABASE}.{TABLE} (id, a, b, c, d, e, f) VALUES {values}")
                batch_bytes += len(batch[-1])
                statements += 1
                if batch_bytes >= ROUND_TRIP_BYTES or first + rows_per_transaction > rows:
                    cursor.execute(";".join(batch))
                    while cursor.nextset():
                        pass
                    batch, batch_bytes = [], 0
    finally:
        connection.close()
    return frontier, time.perf_counter() - started, statements


def binlog_megabytes(admin: MySqlConnectionConfig) -> float:
    """Total size of the server's binlog files."""
    return sum(int(row[1]) for row in execute(admin, "SHOW BINARY LOGS")) / 1e6


# -- the phases (child processes) ---------------------------------------------------------------


def library_phase(spec: dict[str, Any]) -> dict[str, Any]:
    """python-mysql-replication alone: every WriteRowsEvent after the frontier, every row's values."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    target = int(spec["rows"])
    settings = cdc_config(spec).pymysql_kwargs()
    baseline = peak_rss_mb()
    rows = 0
    id_sum = 0
    started = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=LIBRARY_SERVER_ID,
        blocking=False,  # ends at the end of the binlog instead of waiting (a safety net; N rows end it first)
        auto_position=spec["frontier"],
        only_events=[WriteRowsEvent],
    )
    try:
        for event in stream:
            for row in event.rows:
                values = row["values"]
                id_sum += values["id"]
                rows += 1
            if rows >= target:
                break
    finally:
        stream.close()
    seconds = time.perf_counter() - started
    return {"rows": rows, "id_sum": id_sum, "seconds": seconds, "baseline_rss_mb": baseline, "peak_rss_mb": 0.0}


def capture_phase(spec: dict[str, Any], *, profile: bool = False, library_decoding: bool = False) -> dict[str, Any]:
    """``capture_window`` (catch_up) from the frontier into Parquet staging; optionally under cProfile, or
    with the row images decoded by the library path instead of the compiled decoders (the reference)."""
    from airflow_provider_mysql_cdc.capture import window_reading
    from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
    from airflow_provider_mysql_cdc.core.gtid import GtidSet
    from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    store = FrontierStore.from_url(f"sqlite:///{spec['store_path']}")
    store.ensure_schema()
    request = CaptureRequest(
        pipeline="bench",
        run_id="bench-run",
        staging_uri=spec["staging_dir"],
        cutoff=CutoffRule.CATCH_UP,
        tables=TableSelection.of(f"{DATABASE}.*"),
        initial_frontier=GtidSet.parse(spec["frontier"]),
        replica_server_id=int(spec["server_id"]),
    )
    config = cdc_config(spec)
    if library_decoding:  # every event then takes the path row_images() leaves to the library
        window_reading.row_images = lambda event: None  # type: ignore[assignment]
    baseline = peak_rss_mb()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    result = capture_window(request, config, store)
    seconds = time.perf_counter() - started
    if profiler is not None:
        import pstats

        profiler.disable()
        print(f"--- cProfile of the capture phase ({seconds:.1f} s under the profiler) ---", file=sys.stderr)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(20)
    return {
        "rows": sum(result.op_counts.values()),
        "op_counts": result.op_counts,
        "transactions": result.transactions,
        "manifest_uri": result.manifest_uri,
        "window_id": result.window_id,
        "seconds": seconds,
        "baseline_rss_mb": baseline,
        "peak_rss_mb": 0.0,
    }


def mysqlbinlog_argv(cdc: MySqlConnectionConfig, frontier: str, first_log: str) -> list[str]:
    """The bundled ``mysqlbinlog`` reading the binlog from the server as ``cdc`` after ``frontier``
    (``COM_BINLOG_DUMP_GTID``, as the capture does), every row as pseudo-SQL (``--verbose``) and no
    base64 copy of the events."""
    return [
        *client_argv("mysqlbinlog", cdc),
        "--read-from-remote-source=BINLOG-DUMP-GTIDS",
        f"--exclude-gtids={frontier}",
        "--verbose",
        "--base64-output=DECODE-ROWS",
        "--to-last-log",
        first_log,
    ]


def mysqlbinlog_phase(cdc: MySqlConnectionConfig, frontier: str, first_log: str, result_file: Path) -> dict[str, Any]:
    """Time ``mysqlbinlog -v`` over the window's binlog into ``result_file`` (the whole process); then
    count the rows it printed and sum their ids."""
    with result_file.open("wb") as output:
        run = run_client("mysqlbinlog", mysqlbinlog_argv(cdc, frontier, first_log), cdc, output)
    rows = 0
    id_sum = 0
    expect_id = False
    with result_file.open("rb") as printed:
        for line in printed:
            if line.startswith(f"### INSERT INTO `{DATABASE}`.`{TABLE}`".encode()):
                rows += 1
                expect_id = True
            elif expect_id and line.startswith(b"###   @1="):
                id_sum += int(line[9:])
                expect_id = False
    return {**run, "rows": rows, "id_sum": id_sum, "dump_mb": result_file.stat().st_size / 1e6}


# -- checks -------------------------------------------------------------------------------------


def check_staging(staging_dir: str, capture: dict[str, Any], rows: int) -> tuple[int, float]:
    """Manifest op counts, Parquet row counts and the staged ids must all match the load."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from airflow_provider_mysql_cdc.staging import Staging

    staging = Staging(staging_dir, "bench")
    manifest = staging.read_window_manifest(int(capture["window_id"]))
    if manifest is None:
        raise BenchmarkError(f"no manifest in {staging_dir}")
    manifest_rows = sum(manifest.op_counts().values())
    if manifest_rows != rows or manifest.op_counts().get("c") != rows:
        raise BenchmarkError(f"manifest counts {manifest.op_counts()} rows, expected {rows} inserts")
    parquet_rows = 0
    id_sum = 0
    parquet_bytes = 0
    for staged in manifest.files:
        path = Path(staging.path_of(staging.file_in(staging.window_dir(manifest.window_id), staged.path)))
        ids = pq.read_table(path, columns=["id"]).column("id")
        parquet_rows += len(ids)
        id_sum += int(pc.sum(ids).as_py() or 0)
        parquet_bytes += path.stat().st_size
    if parquet_rows != rows or id_sum != rows * (rows + 1) // 2:
        raise BenchmarkError(f"Parquet files hold {parquet_rows} rows (id sum {id_sum}), expected {rows}")
    return len(manifest.files), parquet_bytes / 1e6


def check_same_content(staging_dir: str, reference_dir: str, window_id: int) -> int:
    """The staged Parquet of the capture must equal the reference capture's, file by file, batch by
    batch (same manifest file list, schemas and values); returns the rows compared."""
    import pyarrow.parquet as pq

    from airflow_provider_mysql_cdc.staging import Staging

    staging, reference_staging = Staging(staging_dir, "bench"), Staging(reference_dir, "bench")
    manifest = staging.read_window_manifest(window_id)
    reference = reference_staging.read_window_manifest(window_id)
    if manifest is None or reference is None:
        raise BenchmarkError("a manifest is missing")
    paths = [(f.path, f.rows, f.op_counts) for f in manifest.files]
    if paths != [(f.path, f.rows, f.op_counts) for f in reference.files]:
        raise BenchmarkError(f"staged files differ from the reference capture's: {manifest.files} {reference.files}")
    compared = 0
    for staged in manifest.files:
        relative = staging.file_in(staging.window_dir(window_id), staged.path)
        ours, theirs = pq.ParquetFile(staging.path_of(relative)), pq.ParquetFile(reference_staging.path_of(relative))
        if not ours.schema_arrow.equals(theirs.schema_arrow):
            raise BenchmarkError(f"{staged.path}: schema differs from the reference capture's")
        for mine, other in zip(ours.iter_batches(10_000), theirs.iter_batches(10_000), strict=True):
            if not mine.equals(other):
                raise BenchmarkError(f"{staged.path}: rows {compared}.. differ from the reference capture's")
            compared += mine.num_rows
    return compared


# -- main ---------------------------------------------------------------------------------------


def benchmark(server: Server, rows: int, rows_per_transaction: int, profile: bool) -> str:
    """Load, run both phases (and the optional profiled capture), check, print the details; return the
    summary line (printed by :func:`main` once the server is gone, so that it is the very last line)."""
    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    frontier, load_seconds, statements = load(server.admin, rows, rows_per_transaction)
    print(
        f"load rows={rows} transactions={statements} seconds={load_seconds:.1f} "
        f"rows_per_s={rows / load_seconds:.0f} binlog_mb={binlog_megabytes(server.admin):.1f} frontier={frontier}",
        flush=True,
    )
    reader = {"host": server.cdc.host, "port": server.cdc.port, "user": server.cdc.user}
    secret = {"password": server.cdc.password}
    library = run_phase(SCRIPT, "library", {**reader, **secret, "rows": rows, "frontier": frontier})
    expected_id_sum = rows * (rows + 1) // 2
    if library["rows"] != rows or library["id_sum"] != expected_id_sum:
        raise BenchmarkError(f"the library read {library['rows']} rows (id sum {library['id_sum']}), expected {rows}")
    library_rate = rows / library["seconds"]
    print(
        f"library rows={library['rows']} seconds={library['seconds']:.2f} rows_per_s={library_rate:.0f} "
        f"peak_rss_mb={library['peak_rss_mb']:.1f} (after imports: {library['baseline_rss_mb']:.1f})",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as scratch:
        first_log = str(execute(server.admin, "SHOW BINARY LOGS")[0][0])
        mysqlbinlog_rate = client_phase(
            "mysqlbinlog",
            lambda _admin, path: mysqlbinlog_phase(server.cdc, frontier, first_log, path),
            server.admin,
            Path(scratch) / "mysqlbinlog.txt",
            rows,
        )
        staging_dir = str(Path(scratch) / "staging")
        spec = {
            **reader,
            **secret,
            "rows": rows,
            "frontier": frontier,
            "staging_dir": staging_dir,
            "store_path": str(Path(scratch) / "frontier.db"),
            "server_id": CAPTURE_SERVER_ID,
        }
        capture = run_phase(SCRIPT, "capture", spec)
        files, parquet_mb = check_staging(staging_dir, capture, rows)
        if capture["rows"] != rows:
            raise BenchmarkError(f"the capture staged {capture['rows']} rows, expected {rows}")
        reference_dir = str(Path(scratch) / "staging-reference")
        reference = run_phase(
            SCRIPT,
            "capture-library-decoding",
            {
                **spec,
                "staging_dir": reference_dir,
                "store_path": str(Path(scratch) / "frontier-reference.db"),
                "server_id": REFERENCE_SERVER_ID,
            },
        )
        compared = check_same_content(staging_dir, reference_dir, int(capture["window_id"]))
        print(
            f"content check: {compared} staged rows equal the reference capture's (library decoding, "
            f"{rows / reference['seconds']:.0f} rows/s, peak_rss_mb={reference['peak_rss_mb']:.1f})",
            flush=True,
        )
        if profile:
            profiled = {
                **spec,
                "staging_dir": str(Path(scratch) / "staging-profile"),
                "store_path": str(Path(scratch) / "frontier-profile.db"),
                "server_id": PROFILE_SERVER_ID,
            }
            result = run_phase(SCRIPT, "capture-profile", profiled)
            print(f"profiled capture: {result['rows']} rows in {result['seconds']:.1f} s (timings below unaffected)")
    rate = rows / capture["seconds"]
    print(
        f"capture detail: transactions={capture['transactions']} staged_rows={capture['rows']} "
        f"op_counts={capture['op_counts']} files={files} parquet_mb={parquet_mb:.1f} "
        f"seconds={capture['seconds']:.2f} rss_after_imports_mb={capture['baseline_rss_mb']:.1f}",
        flush=True,
    )
    return (
        f"capture rows={rows} rows_per_s={rate:.0f} library_rows_per_s={library_rate:.0f} "
        f"ratio={rate / library_rate:.3f} peak_rss_mb={capture['peak_rss_mb']:.1f} "
        f"mysqlbinlog_rows_per_s={mysqlbinlog_rate:.0f} of_mysqlbinlog={rate / mysqlbinlog_rate:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=500_000, help="row events in the binlog (default 500000)")
    parser.add_argument(
        "--rows-per-transaction",
        type=int,
        default=DEFAULT_ROWS_PER_TRANSACTION,
        help=f"rows per INSERT, each its own transaction (default {DEFAULT_ROWS_PER_TRANSACTION}; 1: OLTP-shaped)",
    )
    parser.add_argument("--mysql-url", help="use this server (mysql://root:PASSWORD@HOST:PORT) instead of a local one")
    parser.add_argument("--profile", action="store_true", help="also run a cProfile'd capture (prints to stderr)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        return int(
            run_phase_child(
                args.phase,
                {
                    "library": library_phase,
                    "capture": capture_phase,
                    "capture-profile": lambda spec: capture_phase(spec, profile=True),
                    "capture-library-decoding": lambda spec: capture_phase(spec, library_decoding=True),
                },
            )
        )
    require_positive(parser, args, "rows", "rows_per_transaction")
    server_context = (
        existing_server(args.mysql_url, DATABASE) if args.mysql_url else local_server(INSTANCE_NAME, LOCAL_SETTINGS)
    )
    return int(
        print_summary(
            server_context, lambda server: benchmark(server, args.rows, args.rows_per_transaction, args.profile)
        )
    )


if __name__ == "__main__":
    sys.exit(main())
