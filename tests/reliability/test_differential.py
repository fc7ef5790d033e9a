"""The quick randomized differential test (issue 7, point 1; issue 18) and a check of the replica it uses.

One seed (``MYSQL_CDC_RELIABILITY_SEED`` overrides it; a failure prints the seed and the command
that replays it), 20 windows of the seeded workload (DML, every schema change the capture follows or
re-builds, per-session row images, partial JSON and compression, tables without a key holding identical
rows that ``DELETE`` / ``UPDATE ... LIMIT 1`` change one copy at a time) through snapshot -> capture -> Spark
apply, every Iceberg table compared after every window with a replica stopped at the window's upper
GTID set (tables waiting for a rebuild after the next window), then the settle window. The long
variant (more seeds and windows, plus the crash trials) is ``make reliability``.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from tests.conftest import INSTANCE_PREFIX
from tests.exactness.comparison import compare_table
from tests.mysql_servers import MySqlTestServer
from tests.reliability.differential import count_differences, replica_filter, run_differential
from tests.reliability.replica import ReplicationError, running_replica
from tests.reliability.workload import KEYLESS_TABLES, REQUIRED_KINDS, WorkloadSize
from tests.spark_session import CATALOG

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

SEED_ENV = "MYSQL_CDC_RELIABILITY_SEED"
DEFAULT_SEED = 1
WINDOWS = 20
LARGE_ROWS = 100_000


def _executed(server: MySqlTestServer) -> GtidSet:
    return GtidSet.parse(str(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0]))


def test_replica_stops_exactly_at_a_gtid_set(mysql_server: MySqlTestServer) -> None:
    """The oracle's contract: ``apply_until(S)`` leaves the replica at exactly S's source transactions,
    refuses a set the replica is already past, and ``catch_up``/``promote`` work."""
    db = "rel_replica_check"
    with running_replica(
        mysql_server, f"{INSTANCE_PREFIX}-rel-check", skip_existing=True, wild_do_tables=[replica_filter(db)]
    ) as replica:
        mysql_server.execute(
            f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"
        )
        mysql_server.execute(f"INSERT INTO {db}.t VALUES (1)")
        first = _executed(mysql_server)
        mysql_server.execute(f"INSERT INTO {db}.t VALUES (2)", f"INSERT INTO {db}.t VALUES (3)")

        replica.apply_until(first)
        assert replica.server.execute(f"SELECT id FROM {db}.t") == [(1,)]
        assert replica.executed() == first
        assert replica.server.execute("SELECT @@GLOBAL.super_read_only")[0][0] == 1

        replica.catch_up()
        assert [row[0] for row in replica.server.execute(f"SELECT id FROM {db}.t ORDER BY id")] == [1, 2, 3]
        with pytest.raises(ReplicationError, match="beyond"):
            replica.apply_until(first)

        replica.promote()
        replica.server.execute(f"INSERT INTO {db}.t VALUES (4)")  # writable, with its own GTID
        own = replica.executed() - _executed(mysql_server)
        assert [key[0] for key in own.sources] == [replica.server_uuid]
    mysql_server.execute(f"DROP DATABASE {db}")


def test_randomized_differential_has_no_difference(
    spark: Any, mysql_server: MySqlTestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 windows of a seeded workload (every kind of operation of the issues, one transaction of
    100,000+ rows, a concurrent writer during every snapshot and capture): after every window every
    Iceberg table not waiting for a rebuild equals the replica stopped at the window's upper GTID set,
    value by value, and after the settle window every table does. Then one target row is deleted behind
    the pipeline's back, and the same comparison must find it."""
    seed = int(os.environ.get(SEED_ENV, DEFAULT_SEED))
    database = f"rel_q{seed}"
    size = WorkloadSize(initial_rows=240, transactions=4, large_rows=LARGE_ROWS, new_table_rows=30)
    with running_replica(
        mysql_server, f"{INSTANCE_PREFIX}-rel-replica", skip_existing=True, wild_do_tables=[replica_filter(database)]
    ) as replica:
        result = run_differential(
            spark,
            mysql_server,
            replica,
            tmp_path,
            seed=seed,
            windows=WINDOWS,
            database=database,
            size=size,
            replay=f"{SEED_ENV}={seed} .venv/bin/python -m pytest tests/reliability/test_differential.py",
        )
        # The tables without a key end with identical rows (the comparison counted copies, not rows).
        copies = {
            table: max(Counter(replica.server.execute(f"SELECT * FROM {database}.{table}")).values(), default=0)
            for table in KEYLESS_TABLES
        }
        # The oracle sees a difference when there is one: a row deleted from one target behind the
        # pipeline's back is found, and counted once.
        target = f"{CATALOG}.{database}.t_int"
        victim = spark.sql(f"SELECT id FROM {target} ORDER BY id LIMIT 1").collect()
        assert victim, f"{target} is empty after the run: {result.failure_message()}"
        spark.sql(f"DELETE FROM {target} WHERE id = {victim[0][0]}")
        warehouse = Path(spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse"))
        tampered = compare_table(replica.server, warehouse, database, "t_int")
    with capsys.disabled():
        print(f"\n{result.summary()}")
    assert result.differences == 0, result.failure_message()
    assert result.windows == WINDOWS and result.settled, result.failure_message()
    missing = [kind for kind in REQUIRED_KINDS if result.op_counts[kind] == 0]
    assert not missing, f"seed {seed}: the workload never did {missing}; replay: {result.replay}"
    assert result.rows > LARGE_ROWS, result.summary()
    assert any(n > 1 for n in copies.values()), f"seed {seed}: no identical rows at the end: {copies}"
    assert (len(tampered.only_mysql), tampered.only_iceberg, count_differences(tampered)) == (1, (), 1)
