"""The metadata tables on a MySQL server (``mysql+pymysql://``): a server-wide ``sql_select_limit``, a
session default a DBA may set, must not cut what the store reads back."""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.exactness.conftest import global_variable
from tests.mysql_servers import MySqlTestServer

pytestmark = pytest.mark.mysql

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
DATABASE = "cdc_metadata_on_mysql"


@pytest.fixture
def store_url(mysql_server: MySqlTestServer) -> Iterator[str]:
    admin = mysql_server.admin
    mysql_server.execute(f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}")
    yield f"mysql+pymysql://{admin.user}:{admin.password}@{admin.host}:{admin.port}/{DATABASE}"
    mysql_server.execute(f"DROP DATABASE IF EXISTS {DATABASE}")


def test_a_server_wide_select_limit_cuts_no_window_list(mysql_server: MySqlTestServer, store_url: str) -> None:
    store = FrontierStore.from_url(store_url)
    store.register_pipeline("p", GtidSet.parse(f"{U}:1-5"))
    with global_variable(mysql_server, "sql_select_limit", 2):
        with pymysql.connect(**mysql_server.admin.pymysql_kwargs()) as raw, raw.cursor() as cursor:
            cursor.execute("SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3")
            assert len(cursor.fetchall()) == 2  # what a session that does not set its own limit reads
        limited = FrontierStore.from_url(store_url)  # its connections open under the limit
        for window_id in range(1, 5):
            limited.plan_window("p", window_id, f"run-{window_id}", GtidSet.parse(f"{U}:1-5"), "catch_up", "")
        assert [window.window_id for window in limited.list_windows("p")] == [1, 2, 3, 4]
