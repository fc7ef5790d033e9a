"""GtidSet cross-checked against the real server: GTID_SUBSET, GTID_SUBTRACT and @@gtid_executed."""

from __future__ import annotations

import random

import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.errors import InvalidGtidSetError, MySqlQueryError
from airflow_provider_mysql_cdc.mysql.client import connection_to, query
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

UUIDS = (
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "4E11FA47-71CA-11E1-9E33-C80AA9429562",
    "00000000-0000-0000-0000-000000000001",
)
TAGS = ("", "", "etl", "b_2", "Zeta")
PAIRS = 1000
BATCH = 50


def random_messy_text(rng: random.Random) -> str:
    """Unsorted, overlapping, mixed-case GTID-set text, sometimes empty."""
    parts = []
    for _ in range(rng.randint(0, 6)):
        uuid = rng.choice(UUIDS)
        tag = rng.choice(TAGS)
        first = rng.randint(1, 60)
        last = first + rng.choice((0, 0, 1, 3, 12))
        interval = str(first) if first == last else f"{first}-{last}"
        parts.append(f"{uuid}:{tag}:{interval}" if tag else f"{uuid}:{interval}")
    return rng.choice((",", ",\n", ", ")).join(parts)


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def test_algebra_and_formatting_agree_with_the_server(mysql_server: MySqlTestServer) -> None:
    rng = random.Random(20261122)
    pairs = [(random_messy_text(rng), random_messy_text(rng)) for _ in range(PAIRS)]
    checked = 0
    with connection_to(mysql_server.admin) as connection:
        for start in range(0, PAIRS, BATCH):
            batch = pairs[start : start + BATCH]
            columns = []
            for left, right in batch:
                sql_left, sql_right = sql_string(left), sql_string(right)
                columns += [
                    f"GTID_SUBSET({sql_left}, {sql_right})",
                    f"GTID_SUBTRACT({sql_left}, {sql_right})",
                    f"GTID_SUBTRACT({sql_left}, '')",
                ]
            row = query(connection, mysql_server.admin, "SELECT " + ", ".join(columns))[0]
            for index, (left, right) in enumerate(batch):
                subset, difference, normalized = row[3 * index : 3 * index + 3]
                a, b = GtidSet.parse(left), GtidSet.parse(right)
                assert bool(subset) == (a <= b), (left, right)
                assert (a - b).to_mysql_text() == difference, (left, right)
                assert a.to_mysql_text() == normalized, left
                assert GtidSet.parse(difference) == a - b
                checked += 1
    assert checked == PAIRS


def test_gtid_executed_is_printed_as_we_print_it(scratch_mysql: MySqlTestServer) -> None:
    rng = random.Random(7)
    with connection_to(scratch_mysql.admin) as connection:
        for _ in range(25):
            text = random_messy_text(rng)
            query(connection, scratch_mysql.admin, "RESET BINARY LOGS AND GTIDS")
            query(connection, scratch_mysql.admin, f"SET GLOBAL gtid_purged = {sql_string(text)}")
            executed = query(connection, scratch_mysql.admin, "SELECT @@GLOBAL.gtid_executed")[0][0]
            assert GtidSet.parse(text).to_mysql_text() == executed, text
            assert GtidSet.parse(executed) == GtidSet.parse(text)


def test_texts_the_server_rejects_are_rejected_here_too(mysql_server: MySqlTestServer) -> None:
    u = UUIDS[0]
    server_rejects = [
        f"{u}:0",
        f"{u}:9223372036854775807",
        "nonsense",
        f"{u}:{'t' * 33}:1",
        f"{u}:9tag:1",
        f"{u}:1 2",
        f"{u}:1-x",
        u[:-4] + ":1",
    ]
    with connection_to(mysql_server.admin) as connection:
        for text in server_rejects:
            with pytest.raises(MySqlQueryError, match="Malformed GTID"):
                query(connection, mysql_server.admin, f"SELECT GTID_SUBTRACT({sql_string(text)}, '')")
            with pytest.raises(InvalidGtidSetError):
                GtidSet.parse(text)


def test_spacing_the_server_accepts_is_accepted_here_too(mysql_server: MySqlTestServer) -> None:
    u = UUIDS[0]
    text = f" {u} : 1 - 3 ,\n {u} : ETL : 4 , {u}:9223372036854775806"
    with connection_to(mysql_server.admin) as connection:
        normalized = query(connection, mysql_server.admin, f"SELECT GTID_SUBTRACT({sql_string(text)}, '')")[0][0]
    assert GtidSet.parse(text).to_mysql_text() == normalized
