"""python-mysql-replication's own stream over a test server's binlog, as ``BinlogReader`` reads it:
with this project's fixes to the library installed, as the ``cdc`` account, from a binlog position to
the end of the binlog (not blocking)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from pymysqlreplication import BinLogStreamReader

from airflow_provider_mysql_cdc.capture.binlog_library import install_library_fixes
from tests.mysql_servers import MySqlTestServer

#: Replica server ids of these streams (one at a time per test process; each on its own server id).
_server_ids = itertools.count(4_700_001)


def library_events(
    server: MySqlTestServer, start: tuple[str, int], only_events: Sequence[type], **filters: Any
) -> Iterator[Any]:
    """The events of the types ``only_events`` written after ``start`` (binlog file, position) that the
    stream's ``filters`` (``only_schemas``, ``only_tables``, ...) keep; the stream is closed at the end."""
    install_library_fixes()
    reader = BinLogStreamReader(
        connection_settings=server.cdc.pymysql_kwargs(),
        server_id=next(_server_ids),
        blocking=False,
        resume_stream=True,
        log_file=start[0],
        log_pos=start[1],
        only_events=list(only_events),
        **filters,
    )
    try:
        yield from reader
    finally:
        reader.close()
