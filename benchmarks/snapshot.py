"""Snapshot throughput: this project's chunked snapshot engine against ``mysqldump``.

What it measures, in one run on one table:

1. **Load** (not timed for the comparison). A table ``bench.snap`` with nine mixed columns (BIGINT
   key, INT, VARCHAR, DECIMAL, DATETIME(6), DOUBLE with NULLs, TINYINT, TEXT and JSON, both with
   NULLs) receives ``--rows N`` rows (ids 1..N) with deterministic values computed by the server:
   ``INSERT ... SELECT`` over a recursive CTE, 100,000 rows a statement, through the admin (root)
   account with ``sql_log_bin = 0`` (the snapshot does not read the binlog). ``ANALYZE TABLE`` and a
   full scan follow, so both readers find the table in the buffer pool.
2. **Snapshot** (phase ``snapshot``): a coordinator process starts ``--workers`` worker processes
   (``multiprocessing``, spawn: fresh interpreters, like Airflow's mapped task instances), each of
   which imports the engine and opens the SQLite ``FrontierStore`` before the clock starts. The clock
   covers ``plan_snapshot`` (preflight, key boundaries, chunk records; in the coordinator, like the
   planning task) and every chunk of ``SnapshotPlan.mapped_arguments()`` run by ``snapshot_chunk`` in
   the workers (each worker takes the next chunk when it is done with one, like mapped tasks on
   ``--workers`` slots): per chunk the short ``LOCK TABLES ... READ``, the consistent-snapshot
   read, Arrow conversion, Parquet (zstd) files in a temporary staging directory, the chunk manifest,
   the store update and, after the last chunk, the table manifest. All connections use the ``cdc``
   account over TCP (TLS, as the server offers it). A chunk that fails with the transient
   ``FrontierConflictError`` (two chunk tasks raced on a metadata record) is run again in the same
   worker, at most twice, as Airflow would retry the task; such retries are counted
   (``conflict_retries`` on the detail line) and their time counts.
3. **mysqldump** (phase ``mysqldump``): the bundled ``mysqldump`` (run through the MySQL prefix's
   loader, see :mod:`testbed.mysql`) with ``--single-transaction --quick --skip-lock-tables
   --set-gtid-purged=OFF --no-tablespaces`` dumps ``bench snap`` as the admin account over TCP to
   127.0.0.1 (TLS as offered; the password in a private option file, never on the command line or in
   the environment) into a file; the clock covers the whole ``mysqldump`` process.

4. **Wire limit** (phase ``wire``): how fast one MySQL client reads the table at all. The bundled
   ``mysql`` client with ``--quick --batch --skip-column-names`` runs ``SELECT * FROM bench.snap`` as
   the admin account over TCP (TLS as offered) into a file, one tab-separated line per row (values
   are escaped, so a line is a row); the clock covers the whole process. A snapshot reading all
   chunks on one connection could not be faster than this, though parallel chunk readers can (and
   the snapshot's binary-protocol rows cost the server less than the client's text rows).
5. **Protocols** (with ``--protocol-rounds R``; not part of the comparison): in the benchmark's own
   process, the whole table read through one ``cdc`` connection with the chunk reader
   (``staged_record_batches``, the chunk's ``SELECT``), R times as a prepared statement (binary-protocol
   rows, what a snapshot does) and R times as a plain query (text-protocol rows, what a server refusing
   prepared statements gets), alternating which goes first. The line ``protocols ...`` gives the
   medians of mysqld's CPU seconds, this process's and the wall seconds per read, and their ratios.

``client_cpu_s`` and ``server_cpu_s`` on each phase's line are the CPU seconds (user + system) of its
client processes (the chunk workers' own work, the tool's from ``wait4``) and of ``mysqld`` (from
``/proc``; ``n/a`` with ``--mysql-url``): on two cores, their sum against two cores' worth of the
phase's seconds shows whether the machine or the server's one reading thread is the limit.

``peak_rss_mb`` is the largest peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss``) of the snapshot's
processes: every worker and the coordinator report their own, the per-process figures are printed on
an earlier line. ``mysqldump``'s own peak RSS (from ``wait4``) is printed on an earlier line too.
``max_lock_ms`` is the largest ``ChunkResult.lock_ms``: how long a chunk held ``LOCK TABLES ...
READ`` (writers of the table wait that long at most).

The benchmark fails (exit code 1) unless both saw exactly N rows: the chunk results' row counts must
add up to N, and the Parquet files listed by the table manifest
(``{staging}/bench/snapshots/{snapshot_id}/bench.snap/_manifest.json``, via each chunk's manifest)
must hold N rows with ids adding up to N(N+1)/2; the dump's ``INSERT`` tuples are counted and their
ids summed the same way; the wire read's lines are counted and their first fields summed.

Run (starts and afterwards destroys its own local MySQL 9.7 instance ``bench-snapshot``; see
:mod:`testbed.mysql`)::

    .venv/bin/python benchmarks/snapshot.py --rows 1000000
    .venv/bin/python benchmarks/snapshot.py --rows 1000000 --workers 1 --chunk-rows 100000
    .venv/bin/python benchmarks/snapshot.py --rows 200000 --profile   # plus a cProfile'd chunk
    .venv/bin/python benchmarks/snapshot.py --protocol-rounds 6       # plus prepared against plain reads
    .venv/bin/python benchmarks/snapshot.py --mysql-url mysql://root:PASSWORD@127.0.0.1:3306

``--mysql-url`` uses an existing server instead (an admin account; database ``bench`` is dropped
and re-created; the ``cdc`` account is created if missing, password from
``MYSQL_CDC_TEST_CDC_PASSWORD``, default ``cdc-test-pw``; ``mysqldump`` is still the bundled one).
The server needs the settings listed in docs/connection.md (GTIDs, ROW binlog, FULL row image and metadata).

The last line printed is always::

    snapshot rows=<n> rows_per_s=<x> mysqldump_rows_per_s=<y> ratio=<x/y> wire_rows_per_s=<w>
    of_wire=<x/w> peak_rss_mb=<m> max_lock_ms=<l>

(one line; ``of_wire`` is the snapshot's rate over the wire read's).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # the testbed package (a script's sys.path[0] is its own folder)

# mysql_bench (this folder, sys.path[0] of a script) mypy checks only as benchmarks.mysql_bench.
from mysql_bench import (  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
    BenchmarkError,
    Server,
    cdc_config,
    client_argv,
    client_phase,
    cpu_delta_text,
    cpu_seconds,
    execute,
    existing_server,
    local_server,
    peak_rss_mb,
    print_summary,
    require_positive,
    run_client,
    run_phase,
    run_phase_child,
    server_cpu_seconds,
)

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig  # noqa: E402
from airflow_provider_mysql_cdc.snapshot.defaults import DEFAULT_CHUNK_ROWS, DEFAULT_FETCH_ROWS  # noqa: E402

DATABASE = "bench"
TABLE = "snap"
PIPELINE = "bench"
ROWS_PER_STATEMENT = 100_000
INSTANCE_NAME = "bench-snapshot"
DEFAULT_WORKERS = 2
#: Server options of the local instance: a buffer pool that holds the whole table (both readers read
#: it from memory) and no fsync per commit, so the load is quick.
LOCAL_SETTINGS = {
    "innodb_buffer_pool_size": "1G",
    "innodb_flush_log_at_trx_commit": "2",
    "sync_binlog": "0",
}
#: This script, run again with ``--phase`` for each measured phase.
SCRIPT = str(Path(__file__).resolve())
WORKER_START_TIMEOUT_SECONDS = 300
#: Times a chunk is retried after ``FrontierConflictError`` (transient: two chunk tasks raced on a
#: metadata record), as Airflow would retry the mapped task; retries are counted and printed.
CONFLICT_RETRIES = 2
CREATE_TABLE = f"""CREATE TABLE {DATABASE}.{TABLE} (
    id BIGINT NOT NULL PRIMARY KEY,
    a INT NOT NULL,
    b VARCHAR(64) NOT NULL,
    c DECIMAL(12,2) NOT NULL,
    d DATETIME(6) NOT NULL,
    e DOUBLE NULL,
    f TINYINT NOT NULL,
    g TEXT NULL,
    h JSON NULL
)"""
#: The values of row ``n`` (deterministic; ``e`` NULL every 10th row, ``g`` every 7th, ``h`` every 11th).
ROW_EXPRESSIONS = {
    "id": "n",
    "a": "(n * 2654435761) % 4294967296 - 2147483648",
    "b": "CONCAT('name-', LPAD(n, 10, '0'), '-', LPAD((n * 7919) % 1000003, 7, '0'), REPEAT('x', n % 32))",
    "c": "((n * 104729) % 10000000000 DIV 100) + (n % 100) / 100",
    "d": "TIMESTAMP('2024-01-01 00:00:00') + INTERVAL n * 37 SECOND + INTERVAL (n * 7919) % 1000000 MICROSECOND",
    "e": "IF(n % 10 = 0, NULL, CAST(n AS DOUBLE) / 7 - 1000)",
    "f": "n % 256 - 128",
    "g": "IF(n % 7 = 0, NULL, CONCAT('note ', n, ': ', REPEAT('lorem ipsum ', n % 8)))",
    "h": "IF(n % 11 = 0, NULL, JSON_OBJECT('n', n, 'tag', CONCAT('t', n % 13), 'even', n % 2 = 0))",
}
#: The first column of every row tuple of mysqldump's extended INSERTs (``VALUES (id,`` / ``),(id,``).
_DUMP_TUPLE = re.compile(rb"(?:VALUES \(|\),\()(-?\d+),")


# -- the load -----------------------------------------------------------------------------------


def insert_statement(block: int, rows: int) -> str:
    """``INSERT ... SELECT`` of ids ``block * 100000 + 1`` up to the next block (at most ``rows``)."""
    first_high = block * (ROWS_PER_STATEMENT // 1_000)
    last_high = first_high + ROWS_PER_STATEMENT // 1_000 - 1
    columns = ", ".join(ROW_EXPRESSIONS)
    values = ", ".join(f"{expression} AS {name}" for name, expression in ROW_EXPRESSIONS.items())
    return (
        f"INSERT INTO {DATABASE}.{TABLE} ({columns}) "
        "WITH RECURSIVE low (n) AS (SELECT CAST(0 AS SIGNED) UNION ALL SELECT n + 1 FROM low WHERE n < 999), "
        f"high (n) AS (SELECT CAST({first_high} AS SIGNED) UNION ALL SELECT n + 1 FROM high WHERE n < {last_high}) "
        f"SELECT {values} FROM (SELECT high.n * 1000 + low.n + 1 AS n FROM high CROSS JOIN low) AS s "
        f"WHERE s.n <= {int(rows)}"
    )


def load(admin: MySqlConnectionConfig, rows: int) -> tuple[float, int, float]:
    """(Re)create the table and fill it; returns (seconds, statements, table megabytes)."""
    execute(admin, f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}", CREATE_TABLE)
    started = time.perf_counter()
    statements = 0
    connection = pymysql.connect(**admin.pymysql_kwargs(), autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION sql_log_bin = 0")
            for block in range((rows + ROWS_PER_STATEMENT - 1) // ROWS_PER_STATEMENT):
                cursor.execute(insert_statement(block, rows))
                statements += 1
            cursor.execute(f"ANALYZE TABLE {DATABASE}.{TABLE}")
            cursor.fetchall()
            cursor.execute(f"SELECT COUNT(*), SUM(id) FROM {DATABASE}.{TABLE}")  # also warms the buffer pool
            count, id_sum = cursor.fetchone() or (0, 0)
            cursor.execute(
                "SELECT DATA_LENGTH FROM information_schema.TABLES "
                f"WHERE TABLE_SCHEMA = '{DATABASE}' AND TABLE_NAME = '{TABLE}'"
            )
            data_length = (cursor.fetchone() or (0,))[0]
    finally:
        connection.close()
    if int(count) != rows or int(id_sum or 0) != rows * (rows + 1) // 2:
        raise BenchmarkError(f"the load left {count} rows (id sum {id_sum}) in {DATABASE}.{TABLE}, expected {rows}")
    return time.perf_counter() - started, statements, int(data_length or 0) / 1e6


# -- the snapshot phase (a coordinator process and its workers) ---------------------------------


def _snapshot_request(spec: dict[str, Any]) -> Any:
    from airflow_provider_mysql_cdc.core.windows import TableSelection
    from airflow_provider_mysql_cdc.snapshot.engine import SnapshotRequest

    return SnapshotRequest(
        pipeline=PIPELINE,
        run_id="bench-run",
        staging_uri=spec["staging_dir"],
        tables=TableSelection.of(f"{DATABASE}.*"),
        chunk_rows=int(spec["chunk_rows"]),
        fetch_rows=int(spec["fetch_rows"]),
    )


#: A worker process's request, connection settings and store (set by :func:`_worker_init`).
_WORKER: dict[str, Any] = {}


def _worker_init(spec: dict[str, Any], ready: Any) -> None:
    """Worker start-up, before the clock: imports, the request, the store; then wait for the others."""
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    store = FrontierStore.from_url(f"sqlite:///{spec['store_path']}")
    store.ensure_schema()
    _WORKER.update(request=_snapshot_request(spec), config=cdc_config(spec), store=store, cpu_start=cpu_seconds())
    ready.wait(WORKER_START_TIMEOUT_SECONDS)


def _worker_chunk(argument: dict[str, Any]) -> dict[str, Any]:
    """One mapped chunk task: ``snapshot_chunk`` on one element of ``mapped_arguments()``."""
    from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
    from airflow_provider_mysql_cdc.errors import FrontierConflictError
    from airflow_provider_mysql_cdc.snapshot.engine import snapshot_chunk

    started = time.perf_counter()
    chunk = SnapshotChunk.from_json(argument["chunk"])
    retries = 0
    while True:
        try:
            result = snapshot_chunk(
                _WORKER["request"], argument["snapshot_id"], chunk, _WORKER["config"], _WORKER["store"]
            )
            break
        except FrontierConflictError as exc:  # a transient error: Airflow would retry the mapped task
            if retries >= CONFLICT_RETRIES:
                raise
            retries += 1
            print(f"chunk {chunk.chunk_no}: {exc} (retry {retries})", file=sys.stderr, flush=True)
    return {
        "pid": os.getpid(),
        "chunk_no": result.chunk_no,
        "rows": result.rows,
        "lock_ms": result.lock_ms,
        "reused": result.reused,
        "retries": retries,
        "seconds": time.perf_counter() - started,
        "peak_rss_mb": peak_rss_mb(),
        "cpu_seconds": cpu_seconds() - _WORKER["cpu_start"],
    }


def snapshot_phase(spec: dict[str, Any]) -> dict[str, Any]:
    """Plan, then run every chunk on ``workers`` worker processes; the clock covers both."""
    from airflow_provider_mysql_cdc.snapshot.engine import plan_snapshot
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    workers = int(spec["workers"])
    store = FrontierStore.from_url(f"sqlite:///{spec['store_path']}")
    store.ensure_schema()  # once, before the workers open the same file
    request = _snapshot_request(spec)
    config = cdc_config(spec)
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(workers + 1)
    with context.Pool(workers, initializer=_worker_init, initargs=(spec, ready)) as pool:
        ready.wait(WORKER_START_TIMEOUT_SECONDS)
        baseline = peak_rss_mb()
        started = time.perf_counter()
        plan = plan_snapshot(request, config, store)
        planned = time.perf_counter()
        chunks = list(pool.imap_unordered(_worker_chunk, plan.mapped_arguments(), chunksize=1))
        seconds = time.perf_counter() - started
    worker_rss: dict[str, float] = {}
    worker_cpu: dict[str, float] = {}
    for chunk in chunks:
        worker_rss[str(chunk["pid"])] = max(worker_rss.get(str(chunk["pid"]), 0.0), float(chunk["peak_rss_mb"]))
        worker_cpu[str(chunk["pid"])] = max(worker_cpu.get(str(chunk["pid"]), 0.0), float(chunk["cpu_seconds"]))
    return {
        "snapshot_id": plan.snapshot_id,
        "chunk_count": len(plan.chunks),
        "chunks": sorted(chunks, key=lambda c: int(c["chunk_no"])),
        "rows": sum(int(c["rows"]) for c in chunks),
        "retries": sum(int(c["retries"]) for c in chunks),
        "seconds": seconds,
        "plan_seconds": planned - started,
        "baseline_rss_mb": baseline,
        "worker_peak_rss_mb": worker_rss,
        "client_cpu_seconds": sum(worker_cpu.values()),
        "peak_rss_mb": 0.0,
    }


def snapshot_profile_phase(spec: dict[str, Any]) -> dict[str, Any]:
    """Plan (fresh store and staging), then the first chunk in this process under cProfile."""
    import cProfile
    import pstats

    from airflow_provider_mysql_cdc.core.chunks import SnapshotChunk
    from airflow_provider_mysql_cdc.snapshot.engine import plan_snapshot, snapshot_chunk
    from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

    store = FrontierStore.from_url(f"sqlite:///{spec['store_path']}")
    store.ensure_schema()
    request = _snapshot_request(spec)
    config = cdc_config(spec)
    plan = plan_snapshot(request, config, store)
    argument = plan.mapped_arguments()[0]
    chunk = SnapshotChunk.from_json(argument["chunk"])
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    result = snapshot_chunk(request, argument["snapshot_id"], chunk, config, store)
    profiler.disable()
    seconds = time.perf_counter() - started
    print(f"--- cProfile of chunk 0 ({result.rows} rows, {seconds:.1f} s under the profiler) ---", file=sys.stderr)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    return {"rows": result.rows, "seconds": seconds, "peak_rss_mb": 0.0}


# -- prepared statement against plain query --------------------------------------------------------


def protocol_rounds(server: Server, rows: int, rounds: int) -> str:
    """Read the whole table through one connection as the snapshot reads a chunk, ``rounds`` times as a
    prepared statement (binary-protocol rows) and as a plain query (text-protocol rows), alternating
    which goes first; the medians of mysqld's CPU, this process's CPU and the wall time per read."""
    import statistics

    from airflow_provider_mysql_cdc.decoding.text_rows import SNAPSHOT_SESSION_STATEMENTS, select_expressions
    from airflow_provider_mysql_cdc.mysql.client import connection_to, query
    from airflow_provider_mysql_cdc.snapshot.column_specs import column_specs_from_information_schema
    from airflow_provider_mysql_cdc.snapshot.fast_reader import staged_record_batches

    figures: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for round_no in range(rounds):
        for prepared in (True, False) if round_no % 2 == 0 else (False, True):
            with connection_to(server.cdc) as connection:
                for statement in SNAPSHOT_SESSION_STATEMENTS:
                    query(connection, server.cdc, statement)
                specs = column_specs_from_information_schema(connection, server.cdc, DATABASE, TABLE)
                sql = (
                    f"SELECT {', '.join(select_expressions(specs))} FROM {DATABASE}.{TABLE} WHERE id >= %s ORDER BY id"
                )
                server_before, cpu_before, started = (
                    server_cpu_seconds(server.admin),
                    cpu_seconds(),
                    time.perf_counter(),
                )
                batches = staged_record_batches(connection, specs, sql, [0], DEFAULT_FETCH_ROWS, prepared=prepared)
                read = sum(batch.num_rows for batch in batches)
                seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu_before
                server_after = server_cpu_seconds(server.admin)
            if read != rows:
                raise BenchmarkError(f"a {'prepared' if prepared else 'plain'} read gave {read} rows, expected {rows}")
            server_cpu = float("nan") if server_before is None or server_after is None else server_after - server_before
            figures[prepared].append((server_cpu, cpu, seconds))
    medians = {
        prepared: [statistics.median(values[i] for values in runs) for i in range(3)]
        for prepared, runs in figures.items()
    }
    (server_p, client_p, wall_p), (server_t, client_t, wall_t) = medians[True], medians[False]
    return (
        f"protocols rounds={rounds} prepared: mysqld_cpu_s={server_p:.2f} client_cpu_s={client_p:.2f} "
        f"seconds={wall_p:.2f}; plain query: mysqld_cpu_s={server_t:.2f} client_cpu_s={client_t:.2f} "
        f"seconds={wall_t:.2f}; ratios mysqld={server_p / server_t:.2f} client={client_p / client_t:.2f} "
        f"seconds={wall_p / wall_t:.2f} (medians)"
    )


# -- the mysqldump phase ------------------------------------------------------------------------


def mysqldump_argv(admin: MySqlConnectionConfig, result_file: Path) -> list[str]:
    """The bundled ``mysqldump`` (through the prefix's loader) dumping ``bench snap`` over TCP."""
    return [
        *client_argv("mysqldump", admin),
        "--single-transaction",
        "--quick",
        "--skip-lock-tables",
        "--set-gtid-purged=OFF",
        "--no-tablespaces",
        f"--result-file={result_file}",
        DATABASE,
        TABLE,
    ]


def mysqldump_phase(admin: MySqlConnectionConfig, result_file: Path) -> dict[str, Any]:
    """Time ``mysqldump`` (the whole process); then count the dump's rows."""
    run = run_client("mysqldump", mysqldump_argv(admin, result_file), admin, None)
    rows = 0
    id_sum = 0
    with result_file.open("rb") as dump:
        for line in dump:
            if line.startswith(b"INSERT INTO "):
                for match in _DUMP_TUPLE.finditer(line):
                    rows += 1
                    id_sum += int(match.group(1))
    return {**run, "rows": rows, "id_sum": id_sum, "dump_mb": result_file.stat().st_size / 1e6}


def wire_argv(admin: MySqlConnectionConfig) -> list[str]:
    """The bundled ``mysql`` client reading every row of ``bench.snap`` as fast as it can print it."""
    return [
        *client_argv("mysql", admin),
        "--quick",
        "--batch",
        "--skip-column-names",
        f"--execute=SELECT * FROM {DATABASE}.{TABLE}",
    ]


def wire_phase(admin: MySqlConnectionConfig, result_file: Path) -> dict[str, Any]:
    """Time ``mysql --quick`` reading the table into ``result_file``; then count its rows."""
    with result_file.open("wb") as output:
        run = run_client("mysql --quick", wire_argv(admin), admin, output)
    rows = 0
    id_sum = 0
    with result_file.open("rb") as lines:
        for line in lines:
            rows += 1
            id_sum += int(line.split(b"\t", 1)[0])
    return {**run, "rows": rows, "id_sum": id_sum}


# -- checks -------------------------------------------------------------------------------------


def check_staging(staging_dir: str, snapshot: dict[str, Any], rows: int) -> tuple[int, float]:
    """The table manifest's chunks, their Parquet row counts and staged ids must all match the load;
    returns (Parquet files, megabytes)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    staging = Path(staging_dir)
    table_manifest = staging / PIPELINE / "snapshots" / str(snapshot["snapshot_id"]) / f"{DATABASE}.{TABLE}"
    table_manifest /= "_manifest.json"
    if not table_manifest.is_file():
        raise BenchmarkError(f"no table manifest {table_manifest}")
    chunks = json.loads(table_manifest.read_text())["chunks"]
    if len(chunks) != snapshot["chunk_count"]:
        raise BenchmarkError(f"the table manifest lists {len(chunks)} chunks, the plan had {snapshot['chunk_count']}")
    manifest_rows = sum(int(chunk["rows"]) for chunk in chunks)
    parquet_rows = 0
    id_sum = 0
    files = 0
    parquet_bytes = 0
    for chunk in chunks:
        chunk_dir = staging / Path(chunk["manifest"]).parent
        manifest = json.loads((chunk_dir / "_manifest.json").read_text())
        for staged in manifest["files"]:
            path = chunk_dir / staged["path"]
            ids = pq.read_table(path, columns=["id"]).column("id")
            parquet_rows += len(ids)
            id_sum += int(pc.sum(ids).as_py() or 0)
            files += 1
            parquet_bytes += path.stat().st_size
    if manifest_rows != rows or parquet_rows != rows or id_sum != rows * (rows + 1) // 2:
        raise BenchmarkError(
            f"the table manifest counts {manifest_rows} rows, its Parquet files hold {parquet_rows} rows "
            f"(id sum {id_sum}); expected {rows}"
        )
    return files, parquet_bytes / 1e6


# -- main ---------------------------------------------------------------------------------------


def benchmark(
    server: Server, rows: int, workers: int, chunk_rows: int, fetch_rows: int, profile: bool, protocol_rounds_count: int
) -> str:
    """Load, run both phases (and the optional profiled chunk), check, print the details; return the
    summary line (printed by :func:`main` once the server is gone, so that it is the very last line)."""
    print(f"server: {server.description}, MySQL {execute(server.admin, 'SELECT VERSION()')[0][0]}", flush=True)
    load_seconds, statements, table_mb = load(server.admin, rows)
    print(
        f"load rows={rows} statements={statements} seconds={load_seconds:.1f} table_data_mb={table_mb:.1f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as scratch:
        dump_rate = client_phase("mysqldump", mysqldump_phase, server.admin, Path(scratch) / "dump.sql", rows)
        wire_rate = client_phase("wire (mysql --quick)", wire_phase, server.admin, Path(scratch) / "wire.tsv", rows)
        staging_dir = str(Path(scratch) / "staging")
        spec = {
            "host": server.cdc.host,
            "port": server.cdc.port,
            "user": server.cdc.user,
            "password": server.cdc.password,
            "staging_dir": staging_dir,
            "store_path": str(Path(scratch) / "frontier.db"),
            "workers": workers,
            "chunk_rows": chunk_rows,
            "fetch_rows": fetch_rows,
        }
        cpu_before = server_cpu_seconds(server.admin)
        snapshot = run_phase(SCRIPT, "snapshot", spec)
        server_cpu_snapshot = cpu_delta_text(cpu_before, server_cpu_seconds(server.admin))
        if snapshot["rows"] != rows or any(chunk["reused"] for chunk in snapshot["chunks"]):
            raise BenchmarkError(f"the snapshot staged {snapshot['rows']} rows, expected {rows}")
        files, parquet_mb = check_staging(staging_dir, snapshot, rows)
        if profile:
            profiled = {
                **spec,
                "staging_dir": str(Path(scratch) / "staging-profile"),
                "store_path": str(Path(scratch) / "frontier-profile.db"),
            }
            result = run_phase(SCRIPT, "snapshot-profile", profiled)
            print(f"profiled chunk: {result['rows']} rows in {result['seconds']:.1f} s (timings below unaffected)")
        if protocol_rounds_count:
            print(protocol_rounds(server, rows, protocol_rounds_count), flush=True)
    rate = rows / snapshot["seconds"]
    lock_times = [float(chunk["lock_ms"]) for chunk in snapshot["chunks"] if chunk["lock_ms"] is not None]
    max_lock_ms = max(lock_times, default=0.0)
    chunk_seconds = [float(chunk["seconds"]) for chunk in snapshot["chunks"]]
    peak_rss = max([float(snapshot["peak_rss_mb"]), *snapshot["worker_peak_rss_mb"].values()])
    worker_rss = " ".join(f"{mb:.1f}" for mb in snapshot["worker_peak_rss_mb"].values())
    print(
        f"snapshot detail: workers={workers} chunk_rows={chunk_rows} fetch_rows={fetch_rows} "
        f"chunks={snapshot['chunk_count']} conflict_retries={snapshot['retries']} "
        f"files={files} parquet_mb={parquet_mb:.1f} "
        f"seconds={snapshot['seconds']:.2f} plan_seconds={snapshot['plan_seconds']:.2f} "
        f"chunk_seconds_min/max={min(chunk_seconds):.2f}/{max(chunk_seconds):.2f} "
        f"coordinator_peak_rss_mb={snapshot['peak_rss_mb']:.1f} worker_peak_rss_mb=[{worker_rss}] "
        f"rss_after_imports_mb={snapshot['baseline_rss_mb']:.1f} "
        f"client_cpu_s={snapshot['client_cpu_seconds']:.2f} server_cpu_s={server_cpu_snapshot}",
        flush=True,
    )
    return (
        f"snapshot rows={rows} rows_per_s={rate:.0f} mysqldump_rows_per_s={dump_rate:.0f} "
        f"ratio={rate / dump_rate:.3f} wire_rows_per_s={wire_rate:.0f} of_wire={rate / wire_rate:.3f} "
        f"peak_rss_mb={peak_rss:.1f} max_lock_ms={max_lock_ms:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in bench.snap (default 1000000)")
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help=f"chunk worker processes (default {DEFAULT_WORKERS})"
    )
    parser.add_argument(
        "--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help=f"rows per chunk (default {DEFAULT_CHUNK_ROWS})"
    )
    parser.add_argument(
        "--fetch-rows", type=int, default=DEFAULT_FETCH_ROWS, help=f"rows per fetch (default {DEFAULT_FETCH_ROWS})"
    )
    parser.add_argument("--mysql-url", help="use this server (mysql://root:PASSWORD@HOST:PORT) instead of a local one")
    parser.add_argument("--profile", action="store_true", help="also run a cProfile'd chunk (prints to stderr)")
    parser.add_argument(
        "--protocol-rounds",
        type=int,
        default=0,
        help="also read the table this many times as a prepared statement and as a plain query (default 0: not)",
    )
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        return int(
            run_phase_child(args.phase, {"snapshot": snapshot_phase, "snapshot-profile": snapshot_profile_phase})
        )
    require_positive(parser, args, "rows", "workers", "chunk_rows", "fetch_rows")
    server_context = (
        existing_server(args.mysql_url, DATABASE) if args.mysql_url else local_server(INSTANCE_NAME, LOCAL_SETTINGS)
    )
    return int(
        print_summary(
            server_context,
            lambda server: benchmark(
                server, args.rows, args.workers, args.chunk_rows, args.fetch_rows, args.profile, args.protocol_rounds
            ),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
