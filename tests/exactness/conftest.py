"""Fixtures of the exactness tests: a fresh database and pipeline per test."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.exactness.harness import ExactnessPipeline
from tests.mysql_servers import MySqlTestServer


def database_name(test_name: str, suffix: str = "") -> str:
    """A MySQL database name (at most 64 characters) for a test."""
    base = re.sub(r"[^a-z0-9_]+", "_", test_name.lower()).strip("_")
    base = re.sub(r"^test_", "", base)
    return f"ex_{base}"[: 60 - len(suffix)] + suffix


@pytest.fixture
def pipeline_for(
    mysql_server: MySqlTestServer, spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[..., ExactnessPipeline]:
    """``pipeline_for(*statements, suffix="", own_jvm=False, **snapshot_settings)``: (re)create the test's
    database, run the statements (``{db}`` is its name) in one session, and return its pipeline."""

    def make(*statements: str, suffix: str = "", **snapshot_settings: Any) -> ExactnessPipeline:
        database = database_name(request.node.name, suffix)
        mysql_server.execute(
            f"DROP DATABASE IF EXISTS `{database}`",
            f"CREATE DATABASE `{database}`",
            *(statement.replace("{db}", f"`{database}`") for statement in statements),
        )
        return ExactnessPipeline(mysql_server, spark, tmp_path, database, [database], **snapshot_settings)

    return make


@contextlib.contextmanager
def global_variable(server: MySqlTestServer, name: str, value: int) -> Iterator[None]:
    """The server's numeric global variable ``name`` set to ``value`` inside the block, then restored."""
    before = server.execute(f"SELECT @@GLOBAL.{name}")[0][0]
    server.execute(f"SET GLOBAL {name} = {value}")
    try:
        yield
    finally:
        server.execute(f"SET GLOBAL {name} = {int(before)}")


@pytest.fixture
def large_packets(mysql_server: MySqlTestServer) -> Iterator[None]:
    """``max_allowed_packet`` at its maximum (1 GiB) for the test: a 64 MiB value does not fit the
    default 64 MiB (``REPEAT`` would return NULL), and neither do the rows holding it."""
    with global_variable(mysql_server, "max_allowed_packet", 1073741824):
        yield


@pytest.fixture
def local_infile(mysql_server: MySqlTestServer) -> Iterator[None]:
    """``local_infile`` ON for the test (off by default since MySQL 8.0): ``LOAD DATA LOCAL INFILE``."""
    with global_variable(mysql_server, "local_infile", 1):
        yield
