"""The bad-input catalogue: every input a user can get wrong, each refused with the exact error class
and a message that says what to do, without a password in it, and without losing or changing
anything already published (staging bytes, the metadata store's records, Iceberg snapshots and rows).

Most cases run against a pipeline that already has a finished snapshot and a published window
(:func:`published_pipeline`), and compare everything it published before and after the bad input.
Server settings are changed on a server of this module's own (``SET GLOBAL`` between cases, then
restored); ``log_bin`` cannot change at runtime, so it has its own server. The apply cases use two
pipelines applied to Iceberg up to window 1 (:func:`applied`, :func:`altered`); the damage cases break
window 2's staging and restore it afterwards.

Covered elsewhere (see docs/exactness.md "Reliability" table): the re-capture that rewrites a truncated
manifest or a damaged Parquet file byte-identical (``tests/integration/test_capture_faults.py``),
every wrong setting at once (``test_wrong_server_settings_fail_before_any_window_is_planned``) and
``binlog_row_value_options`` (``test_server_level_partial_json_is_captured_exactly``), the
apply gap and the other tables of a run going on after a type change
(``tests/integration/test_apply.py``), tables without a key, read whole or cut by ``key_columns``
(``tests/integration/test_snapshot.py``).
"""

from __future__ import annotations

import functools
import json
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.apply.contract import ApplySpec
from airflow_provider_mysql_cdc.apply.spark_job import run_apply
from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, CaptureResult, capture_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    CorruptStagingError,
    FrontierStoreError,
    MissingPrivilegeError,
    MySqlAuthenticationError,
    MySqlUnreachableError,
    PreflightFailedError,
    RebuildPendingError,
    StagingWriteError,
    WarehouseUnreachableError,
)
from airflow_provider_mysql_cdc.snapshot.engine import SnapshotPlan, SnapshotRequest, plan_snapshot
from airflow_provider_mysql_cdc.staging import Staging
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore
from tests.conftest import INSTANCE_PREFIX
from tests.integration.snapshot_pipeline import SnapshotPipeline
from tests.mysql_servers import MySqlTestServer, free_port, running_local

pytestmark = pytest.mark.mysql

#: The server id capture announces on the binlog stream in this module.
REPLICA_SERVER_ID = 4_440_001


# -- a pipeline that has published something ------------------------------------------------------


def tree(directory: Path) -> dict[str, bytes]:
    """Every file below ``directory`` with its bytes (empty when it does not exist)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@dataclass
class Pipeline:
    """A test pipeline: its source server, staging directory and metadata store (SQLite)."""

    server: MySqlTestServer
    root: Path
    name: str
    database: str

    @property
    def staging(self) -> Path:
        return self.root / "staging"

    @property
    def store_path(self) -> Path:
        return self.root / "meta.db"

    @functools.cached_property
    def store(self) -> FrontierStore:
        return FrontierStore.from_url(f"sqlite:///{self.store_path}")

    def capture(
        self,
        run_id: str,
        *,
        source: MySqlConnectionConfig | None = None,
        tables: str | None = None,
        staging_uri: str | None = None,
    ) -> CaptureResult:
        request = CaptureRequest(
            pipeline=self.name,
            run_id=run_id,
            staging_uri=staging_uri or str(self.staging),
            cutoff=CutoffRule.CATCH_UP,
            tables=TableSelection.of(tables or f"{self.database}.*"),
            replica_server_id=REPLICA_SERVER_ID,
        )
        return capture_window(request, source or self.server.cdc, self.store)

    def plan(
        self,
        run_id: str,
        *,
        source: MySqlConnectionConfig | None = None,
        tables: str | None = None,
        staging_uri: str | None = None,
        resnapshot: tuple[str, ...] = (),
        key_columns: dict[str, list[str]] | None = None,
    ) -> SnapshotPlan:
        request = SnapshotRequest(
            pipeline=self.name,
            run_id=run_id,
            staging_uri=staging_uri or str(self.staging),
            tables=TableSelection.of(tables or f"{self.database}.*"),
            resnapshot=resnapshot,
            key_columns=key_columns or {},
        )
        return plan_snapshot(request, source or self.server.cdc, self.store)

    def run(self, operation: str, run_id: str, **kwargs: Any) -> Any:
        """``capture`` or ``snapshot_plan`` (the two tasks that start from user input)."""
        return self.capture(run_id, **kwargs) if operation == "capture" else self.plan(run_id, **kwargs)

    def published(self) -> dict[str, Any]:
        """Everything the pipeline published or recorded: staging files and bytes, store records."""
        store = self.store
        pipeline = store.get_pipeline(self.name)
        return {
            "files": tree(self.staging),
            "pipeline": None
            if pipeline is None
            else (str(pipeline.initial_frontier), str(pipeline.capture_frontier), pipeline.revision),
            "windows": [
                (w.window_id, w.run_id, str(w.lower), str(w.upper), w.status, w.manifest_uri, w.counts)
                for w in store.list_windows(self.name)
            ],
            "snapshots": store.list_snapshots(self.name),
            "chunks": [
                (c.snapshot_id, c.table_name, c.chunk_no, c.status, str(c.frontier), c.manifest_uri, c.rows)
                for c in store.snapshot_chunks(self.name)
            ],
        }


def published_pipeline(server: MySqlTestServer, tmp_path: Path, name: str) -> Pipeline:
    """Pipeline ``name`` on database ``h4bad_<name>`` (table ``t``): snapshot finished, window 1 published."""
    database = f"h4bad_{name}"
    server.execute(
        f"DROP DATABASE IF EXISTS {database}",
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO {database}.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    pipeline = Pipeline(server, tmp_path, name, database)
    plan = pipeline.plan("run-1")
    assert plan.tables == (f"{database}.t",)
    SnapshotPipeline(server, tmp_path, name, TableSelection.of(f"{database}.*")).snapshot("run-1")
    server.execute(f"UPDATE {database}.t SET v = 'changed' WHERE id = 1", f"INSERT INTO {database}.t VALUES (4, 'd')")
    window = pipeline.capture("run-1")
    assert (window.window_id, window.transactions) == (1, 2)
    assert pipeline.published()["windows"][0][4] == "published"
    return pipeline


def assert_secret_free(message: str, *passwords: str) -> None:
    for password in passwords:
        assert password, "a test password must not be empty"
        assert password not in message


# -- wrong credentials, unreachable host -----------------------------------------------------------


@pytest.mark.parametrize("operation", ["capture", "snapshot_plan"])
def test_wrong_password(mysql_server: MySqlTestServer, tmp_path: Path, operation: str) -> None:
    pipeline = published_pipeline(mysql_server, tmp_path, f"pw_{operation}")
    before = pipeline.published()
    wrong = mysql_server.account("cdc", f"Wrong-pw-{secrets.token_hex(6)}")
    with pytest.raises(MySqlAuthenticationError) as raised:
        pipeline.run(operation, "run-2", source=wrong)
    assert type(raised.value) is MySqlAuthenticationError
    message = str(raised.value)
    assert f"MySQL rejected {wrong.address}" in message
    assert "Check the connection's login and password" in message
    assert_secret_free(message, wrong.password, mysql_server.cdc.password, mysql_server.admin.password)
    assert pipeline.published() == before


@pytest.mark.parametrize("operation", ["capture", "snapshot_plan"])
def test_unreachable_host(mysql_server: MySqlTestServer, tmp_path: Path, operation: str) -> None:
    pipeline = published_pipeline(mysql_server, tmp_path, f"down_{operation}")
    before = pipeline.published()
    closed = MySqlConnectionConfig(
        host="127.0.0.1", port=free_port(), user="cdc", password=mysql_server.cdc.password, connect_timeout=3
    )
    with pytest.raises(MySqlUnreachableError) as raised:
        pipeline.run(operation, "run-2", source=closed)
    assert type(raised.value) is MySqlUnreachableError
    message = str(raised.value)
    assert f"cannot reach MySQL at cdc@127.0.0.1:{closed.port}" in message
    assert "Check host, port, firewall and that the server is running" in message
    assert_secret_free(message, mysql_server.cdc.password)
    assert pipeline.published() == before


# -- server settings -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def settings_server() -> Iterator[MySqlTestServer]:
    """A well-configured server of this module's own: its settings are changed by the tests."""
    with running_local(f"{INSTANCE_PREFIX}-badsettings") as server:
        yield server


@dataclass(frozen=True)
class SettingCase:
    break_it: tuple[str, ...]
    restore: tuple[str, ...]
    problem: str
    fix: str


SETTING_CASES = {
    "gtid_mode": SettingCase(
        # gtid_mode moves one step at a time.
        ("SET GLOBAL gtid_mode = ON_PERMISSIVE", "SET GLOBAL gtid_mode = OFF_PERMISSIVE", "SET GLOBAL gtid_mode = OFF"),
        ("SET GLOBAL gtid_mode = OFF_PERMISSIVE", "SET GLOBAL gtid_mode = ON_PERMISSIVE", "SET GLOBAL gtid_mode = ON"),
        "ERROR [gtid_mode] gtid_mode is OFF; GTID-based capture needs ON",
        "fix: SET PERSIST gtid_mode = ON;",
    ),
    "binlog_format": SettingCase(
        ("SET GLOBAL binlog_format = 'STATEMENT'",),
        ("SET GLOBAL binlog_format = 'ROW'",),
        "ERROR [binlog_format] binlog_format is STATEMENT; row events need ROW",
        "fix: SET PERSIST binlog_format = 'ROW';",
    ),
    "binlog_row_image": SettingCase(
        ("SET GLOBAL binlog_row_image = 'MINIMAL'",),
        ("SET GLOBAL binlog_row_image = 'FULL'",),
        "ERROR [binlog_row_image] binlog_row_image is MINIMAL; it must be FULL",
        "fix: SET PERSIST binlog_row_image = 'FULL';",
    ),
    "binlog_row_metadata": SettingCase(
        ("SET GLOBAL binlog_row_metadata = 'MINIMAL'",),
        ("SET GLOBAL binlog_row_metadata = 'FULL'",),
        "ERROR [binlog_row_metadata] binlog_row_metadata is MINIMAL; it must be FULL",
        "fix: SET PERSIST binlog_row_metadata = 'FULL';",
    ),
}


@pytest.mark.parametrize("setting", list(SETTING_CASES))
def test_one_wrong_server_setting(settings_server: MySqlTestServer, tmp_path: Path, setting: str) -> None:
    """The setting goes wrong after the pipeline published a window: the next capture is refused with
    the one finding and its fix; once the setting is back, the same run captures window 2."""
    case = SETTING_CASES[setting]
    pipeline = published_pipeline(settings_server, tmp_path, setting)
    before = pipeline.published()
    settings_server.execute(*case.break_it)
    try:
        with pytest.raises(PreflightFailedError) as raised:
            pipeline.capture("run-2")
    finally:
        settings_server.execute(*case.restore)
    assert type(raised.value) is PreflightFailedError
    message = str(raised.value)
    assert ": 1 error(s)" in message, message
    assert case.problem in message
    assert case.fix in message
    assert_secret_free(message, settings_server.cdc.password, settings_server.admin.password)
    assert pipeline.published() == before
    assert pipeline.capture("run-2").window_id == 2


def test_binlog_off(tmp_path: Path) -> None:
    """``log_bin`` cannot change at runtime: a server started without a binlog."""
    with running_local(f"{INSTANCE_PREFIX}-nobinlog", {"log_bin": "OFF"}) as server:
        server.execute("CREATE DATABASE h4bad_nobinlog", "CREATE TABLE h4bad_nobinlog.t (id INT PRIMARY KEY)")
        pipeline = Pipeline(server, tmp_path, "nobinlog", "h4bad_nobinlog")
        for operation in ("capture", "snapshot_plan"):
            with pytest.raises(PreflightFailedError) as raised:
                pipeline.run(operation, "run-1")
            assert type(raised.value) is PreflightFailedError
            message = str(raised.value)
            assert ": 1 error(s)" in message, message
            assert "ERROR [log_bin] binary logging is off (log_bin=OFF); there is no binlog to read" in message
            assert "fix: [mysqld] log_bin = binlog  (in my.cnf); log_bin cannot be changed at runtime." in message
            assert_secret_free(message, server.cdc.password, server.admin.password)
        assert pipeline.published() == {"files": {}, "pipeline": None, "windows": [], "snapshots": [], "chunks": []}


# -- privileges ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivilegeCase:
    #: The documented grant left out.
    missing: str
    operation: str
    error: type[Exception]
    #: The GRANT the message must print; ``{account}`` and ``{database}`` are filled in.
    grant: str
    #: Another grant the account holds (``{account}``/``{database}`` filled in), or "".
    extra: str = ""


PRIVILEGE_CASES = {
    "REPLICATION SLAVE": PrivilegeCase(
        "REPLICATION SLAVE", "capture", PreflightFailedError, "GRANT REPLICATION SLAVE ON *.* TO {account};"
    ),
    "REPLICATION CLIENT": PrivilegeCase(
        "REPLICATION CLIENT", "capture", PreflightFailedError, "GRANT REPLICATION CLIENT ON *.* TO {account};"
    ),
    # Without any privilege on it the table is invisible to the account ...
    "SELECT": PrivilegeCase(
        "SELECT", "snapshot_plan", MissingPrivilegeError, "GRANT SELECT ON `{database}`.`t` TO {account};"
    ),
    # ... with another one (here INSERT) it is visible, and reading it is what fails.
    "SELECT on a visible table": PrivilegeCase(
        "SELECT",
        "snapshot_plan",
        MissingPrivilegeError,
        "GRANT SELECT ON `{database}`.`t` TO {account};",
        extra="GRANT INSERT ON {database}.t TO {account}",
    ),
    "LOCK TABLES": PrivilegeCase(
        "LOCK TABLES", "snapshot_plan", MissingPrivilegeError, "GRANT LOCK TABLES ON `{database}`.* TO {account};"
    ),
}


@pytest.mark.parametrize("privilege", list(PRIVILEGE_CASES))
def test_missing_privilege(mysql_server: MySqlTestServer, tmp_path: Path, privilege: str) -> None:
    """An account with every documented grant but one runs the task that needs it (the snapshot of a
    named table for SELECT and LOCK TABLES): refused with the GRANT to run, which is sufficient."""
    case = PRIVILEGE_CASES[privilege]
    slug = privilege.lower().replace(" ", "_")
    pipeline = published_pipeline(mysql_server, tmp_path, f"no_{slug}")
    user, password = f"h4_no_{slug}"[:32], f"Pw-{slug}-{secrets.token_hex(6)}"
    account = f"'{user}'@'%'"
    grants = {
        "REPLICATION SLAVE": f"GRANT REPLICATION SLAVE ON *.* TO {account}",
        "REPLICATION CLIENT": f"GRANT REPLICATION CLIENT ON *.* TO {account}",
        "SELECT": f"GRANT SELECT ON {pipeline.database}.* TO {account}",
        "LOCK TABLES": f"GRANT LOCK TABLES ON {pipeline.database}.* TO {account}",
    }
    mysql_server.execute(
        f"DROP USER IF EXISTS {account}",
        f"CREATE USER {account} IDENTIFIED BY '{password}'",
        *(grant for name, grant in grants.items() if name != case.missing),
        *([case.extra.format(account=account, database=pipeline.database)] if case.extra else []),
    )
    limited = mysql_server.account(user, password)
    before = pipeline.published()

    def attempt() -> Any:
        table = f"{pipeline.database}.t"
        if case.operation == "capture":
            return pipeline.capture("run-2", source=limited, tables=table)
        return pipeline.plan("run-2", source=limited, tables=table, resnapshot=(table,))

    try:
        with pytest.raises(case.error) as raised:
            attempt()
        assert type(raised.value) is case.error
        message = str(raised.value)
        grant = case.grant.format(account=account, database=pipeline.database)
        assert grant in message, message
        assert_secret_free(message, password, mysql_server.cdc.password)
        assert pipeline.published() == before
        mysql_server.execute(grant.rstrip(";"))  # the printed statement is all it takes
        attempt()
    finally:
        mysql_server.execute(f"DROP USER IF EXISTS {account}")


# -- the metadata tables ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreCase:
    table: str
    column: str
    where: str
    #: Where the message says the right value is; and that value, read from the published manifest.
    restore_hint: str
    expected: Callable[[Pipeline], str]


def _window_1_manifest(pipeline: Pipeline) -> Any:
    manifest = Staging(str(pipeline.staging), pipeline.name).read_window_manifest(1)
    assert manifest is not None
    return manifest


STORE_CASES = {
    "cdc_windows.upper": StoreCase(
        "cdc_windows",
        "upper",
        "window_id = 1",
        "'upper' in this window's _manifest.json",
        lambda p: str(_window_1_manifest(p).upper),
    ),
    "cdc_windows.lower": StoreCase(
        "cdc_windows",
        "lower",
        "window_id = 1",
        "the upper bound of the window before it (or the pipeline's initial_frontier for window 1)",
        lambda p: str(_window_1_manifest(p).lower),
    ),
    "cdc_pipelines.capture_frontier": StoreCase(
        "cdc_pipelines",
        "capture_frontier",
        "1 = 1",
        "the upper bound of its last published window",
        lambda p: str(_window_1_manifest(p).upper),
    ),
    "cdc_pipelines.initial_frontier": StoreCase(
        "cdc_pipelines",
        "initial_frontier",
        "1 = 1",
        "the lower bound of its window 1",
        lambda p: str(_window_1_manifest(p).lower),
    ),
}


@pytest.mark.parametrize("column", list(STORE_CASES))
def test_malformed_gtid_set_in_the_metadata_tables(mysql_server: MySqlTestServer, tmp_path: Path, column: str) -> None:
    """A frontier edited by hand into something that is not a GTID set: the next capture names the
    column, the bad text and where the right value is (and it is there); restored, the run goes on."""
    case = STORE_CASES[column]
    pipeline = published_pipeline(mysql_server, tmp_path, f"store_{case.column}")
    before = pipeline.published()
    with sqlite3.connect(pipeline.store_path) as db:
        (original,) = db.execute(f"SELECT {case.column} FROM {case.table} WHERE {case.where}").fetchone()
        damaged = original.replace(":", ";", 1)  # a typo: e.g. 'uuid;1-9'
        db.execute(f"UPDATE {case.table} SET {case.column} = ? WHERE {case.where}", (damaged,))
    try:
        with pytest.raises(FrontierStoreError) as raised:
            pipeline.capture("run-2")
    finally:
        with sqlite3.connect(pipeline.store_path) as db:
            db.execute(f"UPDATE {case.table} SET {case.column} = ? WHERE {case.where}", (original,))
    assert type(raised.value) is FrontierStoreError
    message = str(raised.value)
    assert f"metadata table column {column} of pipeline 'store_{case.column}'" in message
    assert "is not a valid GTID set" in message and repr(damaged) in message
    assert f"Restore it in the metadata database: the right value is {case.restore_hint}" in message
    assert case.expected(pipeline) == original  # the hint leads to the right value
    assert_secret_free(message, mysql_server.cdc.password)
    assert pipeline.published() == before
    assert pipeline.capture("run-2").window_id == 2


# -- staging ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["capture", "snapshot_plan"])
def test_staging_uri_not_writable(mysql_server: MySqlTestServer, tmp_path: Path, operation: str) -> None:
    """The pipeline is pointed at a staging URI it cannot write (a path below a regular file: the
    tests run as root, which ignores permission bits): refused before any window or snapshot is
    recorded."""
    pipeline = published_pipeline(mysql_server, tmp_path / "pipeline", f"nowrite_{operation}")
    before = pipeline.published()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    unwritable = str(blocker / "staging")
    with pytest.raises(StagingWriteError) as raised:
        pipeline.run(operation, "run-2", staging_uri=unwritable)
    assert type(raised.value) is StagingWriteError
    message = str(raised.value)
    assert f"staging URI {unwritable!r} is not writable" in message
    assert "nothing was recorded" in message
    assert "Fix the path, its permissions or the filesystem credentials" in message
    assert_secret_free(message, mysql_server.cdc.password)
    assert pipeline.published() == before
    assert blocker.read_text() == "not a directory"


@pytest.mark.parametrize("field", ["transactions", "upper"])
def test_edited_manifest_is_refused_and_rewritten(mysql_server: MySqlTestServer, tmp_path: Path, field: str) -> None:
    """A published manifest edited into other valid JSON (a count, the upper bound): readers refuse it
    (its checksum no longer matches); re-running the window's capture rewrites it byte-identical."""
    pipeline = published_pipeline(mysql_server, tmp_path, f"edited_{field}")
    before = pipeline.published()
    path = pipeline.staging / pipeline.name / "windows" / "00000001" / "_manifest.json"
    data = json.loads(path.read_text())
    data[field] = data["lower"] if field == "upper" else data[field] + 1
    path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n")
    with pytest.raises(CorruptStagingError) as raised:
        Staging(str(pipeline.staging), pipeline.name).read_window_manifest(1)
    assert type(raised.value) is CorruptStagingError
    message = str(raised.value)
    assert f"manifest {path} is corrupt or was edited" in message
    assert "does not match its manifest_sha256: it was edited" in message
    assert "re-run its capture task to rewrite it" in message
    assert pipeline.capture("run-1").window_id == 1
    assert pipeline.published() == before


# -- table selection -------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["capture", "snapshot_plan"])
@pytest.mark.parametrize("name", ["nope", "T"])
def test_unknown_table_in_the_include_list(
    mysql_server: MySqlTestServer, tmp_path: Path, operation: str, name: str
) -> None:
    """A plain name that matches no table (a typo; names are case-sensitive, so ``T`` is not ``t``)."""
    pipeline = published_pipeline(mysql_server, tmp_path, f"unknown_{operation}_{name.lower()}")
    before = pipeline.published()
    missing = f"{pipeline.database}.{name}"
    with pytest.raises(ConfigurationError) as raised:
        pipeline.run(operation, "run-2", tables=missing)
    assert type(raised.value) is ConfigurationError
    message = str(raised.value)
    assert f"the table list names {missing!r}" in message
    assert f"sees no such base table on 127.0.0.1:{mysql_server.cdc.port}; nothing was recorded" in message
    assert "case-sensitive" in message
    assert f"select it with a pattern such as '{missing}*'" in message
    assert_secret_free(message, mysql_server.cdc.password)
    assert pipeline.published() == before


def test_a_pattern_that_matches_nothing_yet_is_accepted(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    """Unlike a plain name, a pattern may match nothing yet: a table created later is captured from its
    first row (and snapshotted by the next plan)."""
    database = "h4bad_later"
    mysql_server.execute(f"DROP DATABASE IF EXISTS {database}", f"CREATE DATABASE {database}")
    pipeline = Pipeline(mysql_server, tmp_path, "later", database)
    pattern = f"{database}.later_*"
    assert pipeline.plan("run-1", tables=pattern).tables == ()
    first = pipeline.capture("run-1", tables=pattern)
    assert (first.window_id, first.table_counts) == (1, {})
    mysql_server.execute(
        f"CREATE TABLE {database}.later_1 (id INT PRIMARY KEY)", f"INSERT INTO {database}.later_1 VALUES (1), (2)"
    )
    second = pipeline.capture("run-2", tables=pattern)
    assert second.table_counts == {f"{database}.later_1": {"r": 0, "c": 2, "u": 0, "d": 0}}
    assert pipeline.plan("run-3", tables=pattern).tables == (f"{database}.later_1",)


@pytest.mark.parametrize(
    ("named", "expected"),
    [
        (["a", "nope"], "key_columns for {table} name 'nope', which is not a column of the table"),
        ([], "key_columns for {table} must be a non-empty list of column names"),
    ],
    ids=["unknown_column", "empty_list"],
)
def test_key_columns_that_cannot_cut_a_table_without_a_key(
    mysql_server: MySqlTestServer, tmp_path: Path, named: list[str], expected: str
) -> None:
    """A table without a key starts matching a running pipeline's pattern (it is snapshotted whole, as
    one chunk, see ``tests/integration/test_snapshot.py``), and ``key_columns`` names columns to cut it
    into chunks that it lacks, or none: the plan is refused before anything is recorded."""
    pipeline = published_pipeline(mysql_server, tmp_path, f"keycols_{len(named)}")
    before = pipeline.published()
    table = f"{pipeline.database}.log"
    mysql_server.execute(
        f"CREATE TABLE {table} (a INT NOT NULL, b VARCHAR(10), UNIQUE KEY nullable_b (b))",
        f"INSERT INTO {table} VALUES (1, 'x'), (2, NULL), (2, NULL)",  # a nullable unique key is no key
    )
    with pytest.raises(ConfigurationError) as raised:
        pipeline.plan("run-2", key_columns={table: named})
    assert type(raised.value) is ConfigurationError
    message = str(raised.value)
    assert expected.format(table=table) in message
    assert_secret_free(message, mysql_server.cdc.password)
    assert pipeline.published() == before
    # Without them the same table is planned as one chunk that reads it whole.
    plan = pipeline.plan("run-2")
    assert [(chunk.table, chunk.key_columns) for chunk in plan.chunks] == [("log", ())]


# -- apply: Spark and Iceberg ----------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """A pipeline whose one table ``t`` is snapshotted and applied up to window 1; window 2 is captured
    and not applied."""

    pipeline: SnapshotPipeline
    database: str

    def window_dir(self, window_id: int) -> Path:
        return self.pipeline.staging / self.pipeline.name / "windows" / f"{window_id:08d}"

    def config(self, window_id: int, **overrides: Any) -> ApplySpec:
        settings: dict[str, Any] = {"catalog": "lake", **overrides}
        return ApplySpec(self.pipeline.name, str(self.pipeline.staging), window_id, window_id, **settings)

    def lake(self, spark: Any) -> tuple[list[int], list[tuple[Any, ...]]]:
        """The target's commits (snapshot ids) and rows, re-read from the warehouse."""
        target = f"lake.{self.database}.t"
        spark.sql(f"REFRESH TABLE {target}")
        commits = sorted(r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {target}.snapshots").collect())
        return commits, sorted(tuple(r) for r in spark.sql(f"SELECT id, name, balance FROM {target}").collect())

    def staging_except(self, window_id: int) -> dict[str, bytes]:
        skipped = f"{self.pipeline.name}/windows/{window_id:08d}/"
        return {path: data for path, data in tree(self.pipeline.staging).items() if not path.startswith(skipped)}


def _applied_pipeline(
    spark: Any, server: MySqlTestServer, root: Path, database: str, window_2: tuple[str, ...]
) -> Applied:
    server.execute(
        f"DROP DATABASE IF EXISTS {database}",
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY, name VARCHAR(20), balance DECIMAL(10,2))",
        f"INSERT INTO {database}.t VALUES (1, 'c1', 1.50), (2, 'c2', 2.50), (3, 'c3', 3.50)",
    )
    pipeline = SnapshotPipeline(server, root, database, TableSelection.of(f"{database}.*"))
    pipeline.snapshot("run-1")
    server.execute(f"UPDATE {database}.t SET balance = 9.99 WHERE id = 1", f"DELETE FROM {database}.t WHERE id = 3")
    assert pipeline.capture("run-1").window_id == 1
    applied = Applied(pipeline, database)
    report = run_apply(spark, applied.config(1))
    assert report.failed == [], report
    server.execute(*window_2)
    assert pipeline.capture("run-2").window_id == 2
    return applied


@pytest.fixture(scope="module")
def applied(spark: Any, mysql_server: MySqlTestServer, tmp_path_factory: pytest.TempPathFactory) -> Applied:
    """Window 2 holds an update (its staging gets damaged and restored by the tests)."""
    return _applied_pipeline(
        spark,
        mysql_server,
        tmp_path_factory.mktemp("applied"),
        "h4bad_apply",
        ("UPDATE h4bad_apply.t SET name = 'w2' WHERE id = 2",),
    )


@pytest.fixture(scope="module")
def altered(spark: Any, mysql_server: MySqlTestServer, tmp_path_factory: pytest.TempPathFactory) -> Applied:
    """Window 2 holds a type change the target cannot follow (DECIMAL to VARCHAR) and a row using it."""
    return _applied_pipeline(
        spark,
        mysql_server,
        tmp_path_factory.mktemp("altered"),
        "h4bad_alter",
        (
            "ALTER TABLE h4bad_alter.t MODIFY balance VARCHAR(20)",
            "UPDATE h4bad_alter.t SET balance = 'n/a' WHERE id = 1",
        ),
    )


def _damage(applied: Applied, damage: str) -> Path:
    """Damage window 2's staging; returns the damaged file."""
    window = applied.window_dir(2)
    if damage.startswith("manifest"):
        path = window / "_manifest.json"
        text = path.read_text()
        if damage == "manifest-truncated":
            path.write_text(text[: len(text) // 2])
        else:  # valid JSON, another valid upper bound: only the manifest's checksum can tell
            data = json.loads(text)
            data["upper"] = data["lower"]
            path.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n")
        return path
    (path,) = window.glob("*/v*/part-*.parquet")
    data = path.read_bytes()
    if damage == "parquet-flipped":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 8]) + data[middle + 8 :])
    else:
        path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.spark
@pytest.mark.parametrize("damage", ["manifest-truncated", "manifest-edited", "parquet-flipped", "parquet-truncated"])
def test_damaged_staging_stops_the_apply_before_its_merge(
    spark: Any, applied: Applied, mysql_server: MySqlTestServer, damage: str
) -> None:
    window = applied.window_dir(2)
    pristine = tree(window)
    lake, staging = applied.lake(spark), applied.staging_except(2)
    path = _damage(applied, damage)
    try:
        if damage.startswith("manifest"):
            with pytest.raises(CorruptStagingError) as raised:
                run_apply(spark, applied.config(2))
            assert type(raised.value) is CorruptStagingError
            message = str(raised.value)
            assert f"manifest {path} is corrupt or was edited" in message
            assert "re-run its capture task to rewrite it" in message
        else:
            report = run_apply(spark, applied.config(2))
            table = f"{applied.database}.t"
            assert report.failed == [table]
            assert report.tables[table].error_class == CorruptStagingError.__name__
            message = report.tables[table].error
            assert f"staged file {path} of window 2 is missing, truncated or changed" in message
            assert "delete the window's staging directory and re-run its capture task" in message
        assert_secret_free(message, mysql_server.cdc.password)
    finally:
        for relative, data in pristine.items():
            (window / relative).write_bytes(data)
    assert applied.lake(spark) == lake
    assert applied.staging_except(2) == staging
    assert tree(window) == pristine


@pytest.mark.spark
def test_a_type_change_the_target_cannot_hold_stops_that_table_under_the_stop_policy(
    spark: Any, altered: Applied, mysql_server: MySqlTestServer
) -> None:
    """The pipeline says 'stop' on changes its targets cannot follow: the table keeps its rows and
    stops with a named error that says what changed, where, and what to do; the staging stays as it is."""
    (_, rows), staging = altered.lake(spark), tree(altered.pipeline.staging)
    report = run_apply(spark, altered.config(2, schema_change_policy="stop"))
    table = f"{altered.database}.t"
    assert report.failed == [table]
    assert report.tables[table].error_class == RebuildPendingError.__name__
    message = report.tables[table].error
    assert "column 'balance' changed from decimal(10,2) to varchar(20)" in message
    assert f"by: ALTER TABLE {altered.database}.t MODIFY balance VARCHAR(20)" in message
    assert f"of pipeline '{altered.pipeline.name}' stops at window 2 (GTID " in message
    assert f"resnapshot=[{table!r}]" in message and "schema_change_policy to 'rebuild'" in message
    assert_secret_free(message, mysql_server.cdc.password)
    assert altered.lake(spark)[1] == rows
    assert tree(altered.pipeline.staging) == staging
    # It stays stopped: the same window again names the wait and the way out.
    again = run_apply(spark, altered.config(2, schema_change_policy="stop"))
    assert again.failed == [table] and again.tables[table].error_class == RebuildPendingError.__name__
    assert altered.lake(spark)[1] == rows


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["rest", "hdfs"])
def test_warehouse_unreachable(
    spark: Any, applied: Applied, mysql_server: MySqlTestServer, tmp_path: Path, kind: str
) -> None:
    """The catalog's service or the warehouse's storage does not answer (nothing listens on the port):
    refused before any table is read or written; the catalog's credential stays out of the message."""
    port = free_port()
    secret = f"cat-secret-{secrets.token_hex(6)}"
    catalog = f"h4_unreachable_{kind}"
    settings = (
        {"type": "rest", "uri": f"http://127.0.0.1:{port}/api", "credential": f"h4-client:{secret}"}
        if kind == "rest"
        else {"type": "hadoop", "warehouse": f"hdfs://127.0.0.1:{port}/warehouse"}
    )
    prefix = f"spark.sql.catalog.{catalog}"
    lake, staging = applied.lake(spark), tree(applied.pipeline.staging)
    report_path = tmp_path / "report.json"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    for key, value in settings.items():
        spark.conf.set(f"{prefix}.{key}", value)
    try:
        with pytest.raises(WarehouseUnreachableError) as raised:
            run_apply(spark, applied.config(2, catalog=catalog, report_uri=str(report_path)))
    finally:
        for key in ("", *(f".{k}" for k in settings), ".cache.expiration-interval-ms"):
            spark.conf.unset(prefix + key)
    assert type(raised.value) is WarehouseUnreachableError
    message = str(raised.value)
    assert f"cannot reach the Iceberg catalog {catalog!r}" in message
    assert (
        f"(type rest, uri http://127.0.0.1:{port}/api)"
        if kind == "rest"
        else f"(type hadoop, warehouse hdfs://127.0.0.1:{port}/warehouse)"
    ) in message
    assert "Connection refused" in message
    assert (
        "Nothing was applied: check the catalog's uri or warehouse, the network and the catalog's credentials"
        in message
    )
    assert "\tat " not in message and len(message) < 1500, message  # no JVM stack trace
    assert_secret_free(message, secret, mysql_server.cdc.password)
    assert not report_path.exists()
    assert applied.lake(spark) == lake
    assert tree(applied.pipeline.staging) == staging
