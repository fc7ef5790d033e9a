"""The change catalogue, part 3: what one session can change, and very large values.

A session may write its row events with ``binlog_row_image=MINIMAL`` or ``NOBLOB`` (images without
every column), ``binlog_row_value_options=PARTIAL_JSON`` (JSON updates as diffs; with FULL images and
with MINIMAL ones), or ``binlog_transaction_compression=ON`` (a transaction as one compressed
payload), whatever the server's settings that preflight checks. Each test first proves from the
binlog that the session really wrote what it claims (the event types), then compares after every
window.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

import pymysql
import pytest

from airflow_provider_mysql_cdc.core.storage_engines import UNKNOWN_ENGINE_REASON
from airflow_provider_mysql_cdc.core.windows import CutoffRule
from airflow_provider_mysql_cdc.staging import Staging
from tests.exactness.conftest import global_variable
from tests.exactness.harness import ExactnessPipeline, WindowStopped
from tests.exactness.scenario import binlog_event_types, binlog_events, binlog_position, drive, fill, run_windows

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

NewPipeline = Callable[..., ExactnessPipeline]
MINIMAL = ("SET SESSION binlog_row_image = 'MINIMAL'",)
NOBLOB = ("SET SESSION binlog_row_image = 'NOBLOB'",)


def run_and_check_events(
    pipeline: ExactnessPipeline,
    windows: Sequence[Sequence[str]],
    session: Sequence[str],
    settings: dict[str, str],
    expected_event: str | None = None,
) -> None:
    """Like :func:`run_windows`; each window's writes also check that their session had ``settings``
    (read back after the statements), and the first window's that they wrote at least one
    ``expected_event`` (the binlog's event type)."""
    database = pipeline.databases[0]
    read_back = "SELECT " + ", ".join(f"@@SESSION.{name}" for name in settings)

    def write(statements: Sequence[str], first: bool) -> None:
        since = binlog_position(pipeline.server)
        rows = pipeline.sql(*(fill(s, database=database) for s in statements), read_back, session=session)
        assert [str(v) for v in rows[0]] == list(settings.values()), (rows, settings)
        if expected_event and first:
            types = binlog_event_types(pipeline.server, since)
            assert expected_event in types, f"the session wrote no {expected_event} event: {sorted(set(types))}"

    drive(pipeline, [partial(write, statements, number == 0) for number, statements in enumerate(windows)])


# -- row images -----------------------------------------------------------------------------------

ROW_IMAGE_TABLE = (
    "CREATE TABLE {db}.img (id INT PRIMARY KEY, a INT, b VARCHAR(20) DEFAULT 'dflt', "
    "c DATETIME(6) DEFAULT '2020-02-02 02:02:02', t TEXT, bl BLOB, j JSON)",
    "INSERT INTO {db}.img VALUES (1, 1, 'one', '2021-01-01 00:00:00', 'text one', x'01', '{\"k\": 1}'), "
    "(2, 2, 'two', NULL, NULL, NULL, NULL), (3, 3, 'three', '2023-03-03 03:03:03', 'text three', x'0303', '[3]'), "
    "(4, 4, 'four', '2024-04-04 04:04:04', 'text four', x'04', 'null')",
)
#: Updates without key change, a key update, inserts omitting columns, a delete, and several partial
#: updates of one row in one window; then the same kinds again in a second window.
ROW_IMAGE_WINDOWS = (
    [
        "UPDATE {db}.img SET a = 10 WHERE id = 1",
        "UPDATE {db}.img SET t = 'text one changed' WHERE id = 1",
        "UPDATE {db}.img SET b = 'x' WHERE id = 1",
        "UPDATE {db}.img SET id = 30 WHERE id = 3",
        "INSERT INTO {db}.img (id, a) VALUES (5, 5)",
        "INSERT INTO {db}.img (id) VALUES (6)",
        "DELETE FROM {db}.img WHERE id = 4",
        "UPDATE {db}.img SET bl = x'ffff', j = JSON_ARRAY(2) WHERE id = 2",
    ],
    [
        "UPDATE {db}.img SET c = NULL WHERE id = 5",
        "UPDATE {db}.img SET id = 7, a = 70 WHERE id = 6",
        "UPDATE {db}.img SET a = a + 1",
        "DELETE FROM {db}.img WHERE id = 30",
        "INSERT INTO {db}.img (id, t) VALUES (8, 'eight')",
    ],
)


def test_session_binlog_row_image_minimal(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(*ROW_IMAGE_TABLE)
    run_and_check_events(pipeline, ROW_IMAGE_WINDOWS, MINIMAL, {"binlog_row_image": "MINIMAL"})


def test_session_binlog_row_image_noblob(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(*ROW_IMAGE_TABLE)
    run_and_check_events(pipeline, ROW_IMAGE_WINDOWS, NOBLOB, {"binlog_row_image": "NOBLOB"})


@pytest.mark.parametrize("image", ["NOBLOB", "MINIMAL"])
def test_multi_table_updates_and_deletes_under_partial_row_images(pipeline_for: NewPipeline, image: str) -> None:
    """Found by the randomized differential (seed 1, a 385-column table): MySQL sets the spare bits past
    the last column in the before image's columns-present bitmap of a multi-table ``UPDATE`` (``dbff``
    for these 9 columns, ``db01`` for the same update of one table). Counted as columns, they made the
    reader take one NULL-bitmap byte too many and read every value after it from the wrong place."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b BLOB, c INT, v INT AS (a + 1) VIRTUAL, d TEXT, e INT, "
        "f VARCHAR(5), g INT)",
        "CREATE TABLE {db}.s (id INT PRIMARY KEY, a INT, b BLOB, c INT, d TEXT, e INT, f INT, g INT, h INT, i INT)",
        "INSERT INTO {db}.t (id, a, b, c, d, e, f, g) VALUES (1, 1, 'x', 1, 'y', 1, 'p', 1), (2, 2, 'x', 2, 'y', 2, "
        "'q', 2), (3, 3, NULL, 3, NULL, 3, NULL, 3)",
        "INSERT INTO {db}.s VALUES (1, 1, 'x', 1, 'y', 1, 1, 1, 1, 1), (2, 2, 'x', 2, 'y', 2, 2, 2, 2, 2)",
        suffix=f"_{image.lower()}",
    )
    run_and_check_events(
        pipeline,
        [
            [
                "UPDATE {db}.t AS x JOIN {db}.t AS y ON y.id = 1 SET x.a = y.a + 10, x.f = 'r' WHERE x.id = 2",
                "UPDATE {db}.t AS x JOIN {db}.s AS y ON y.id = x.id SET x.c = 20, y.e = 30, y.b = 'z'",
                "DELETE x FROM {db}.t AS x JOIN {db}.s AS y ON y.id = x.id WHERE y.id = 1",
            ],
            [
                "UPDATE {db}.s AS x JOIN {db}.t AS y ON y.id = 3 SET x.h = y.g, x.d = 'w'",
                "INSERT INTO {db}.s (id) VALUES (5)",
            ],
        ],
        (f"USE `{pipeline.databases[0]}`", f"SET SESSION binlog_row_image = '{image}'"),  # DELETE x: x in it
        {"binlog_row_image": image},
    )


def test_minimal_images_after_columns_added_with_defaults_in_the_same_window(pipeline_for: NewPipeline) -> None:
    """Found by the randomized differential (seed 2): rows the window updates with MINIMAL images after
    ``ADD COLUMN ... DEFAULT`` hold the default in MySQL (they existed when the column was added), but
    their images lack the column."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10), n INT)",
        "INSERT INTO {db}.t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)",
    )
    run_and_check_events(
        pipeline,
        [
            [
                "UPDATE {db}.t SET n = 10 WHERE id = 4",
                "ALTER TABLE {db}.t ADD COLUMN x VARCHAR(5) NOT NULL DEFAULT 'std'",
                "UPDATE {db}.t SET v = 'a+' WHERE id = 1",
                "UPDATE {db}.t SET n = 40 WHERE id = 4",
                "INSERT INTO {db}.t (id, v) VALUES (5, 'e')",
                "ALTER TABLE {db}.t ADD COLUMN y DATETIME(3) DEFAULT '2020-01-02 03:04:05' FIRST",
                "UPDATE {db}.t SET v = 'b+' WHERE id = 2",
                "UPDATE {db}.t SET x = 'set', n = 11 WHERE id = 1",
            ],
            ["UPDATE {db}.t SET v = 'c+' WHERE id = 3", "UPDATE {db}.t SET n = 12 WHERE id = 1"],
        ],
        MINIMAL,
        {"binlog_row_image": "MINIMAL"},
    )


def test_minimal_images_before_a_rename_and_a_swap_in_the_same_window(pipeline_for: NewPipeline) -> None:
    """A MINIMAL image lacks the columns the statement did not set, under their names at that time: a
    rename (or a swap of two names) later in the window must not turn "absent" into NULL."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10), n INT, k INT)",
        "INSERT INTO {db}.t VALUES (1, 'a', 1, -1), (2, 'b', 2, -2), (3, 'c', 3, -3), (4, 'd', 4, -4)",
    )
    run_and_check_events(
        pipeline,
        [
            [
                "UPDATE {db}.t SET k = 10 WHERE id = 1",
                "ALTER TABLE {db}.t RENAME COLUMN v TO w",
                "UPDATE {db}.t SET k = 20 WHERE id = 2",
                "ALTER TABLE {db}.t RENAME COLUMN w TO n, RENAME COLUMN n TO w",
                "UPDATE {db}.t SET k = 30 WHERE id = 3",
                "ALTER TABLE {db}.t CHANGE k kk BIGINT",
                "UPDATE {db}.t SET n = 'd+' WHERE id = 4",
            ],
            ["UPDATE {db}.t SET kk = 11 WHERE id = 1"],
        ],
        MINIMAL,
        {"binlog_row_image": "MINIMAL"},
    )


# -- partial JSON ---------------------------------------------------------------------------------

JSON_TABLE = (
    "CREATE TABLE {db}.docs (id INT PRIMARY KEY, j JSON, other JSON, n INT)",
    "INSERT INTO {db}.docs VALUES "
    '(1, \'{"a": 1, "b": "xxxxxxxxxxxxxxxxxxxxxxxx", "c": [1, 2, 3]}\', \'{"o": 1}\', 1), '
    '(2, \'{"a": 2, "nested": {"deep": {"k": "vvvvvvvvvvvvvvvv"}}}\', NULL, 2), '
    "(3, '[1, 2, 3, 4, 5, 6, 7, 8, 9]', '[]', 3), "
    '(4, \'{"gone": true, "kept": "yyyyyyyyyyyyyyyy"}\', \'{}\', 4)',
)
#: JSON_SET of an existing and of a new key, JSON_REPLACE (shorter and longer), JSON_REMOVE, a chain
#: of them in one statement, a partial update together with other columns, several partial updates
#: of one row, and a partial update followed by a full one in the same window.
JSON_WINDOWS = (
    [
        "UPDATE {db}.docs SET j = JSON_SET(j, '$.a', 10) WHERE id = 1",
        "UPDATE {db}.docs SET j = JSON_SET(j, '$.new', 'added') WHERE id = 1",
        "UPDATE {db}.docs SET j = JSON_REPLACE(j, '$.nested.deep.k', 'short') WHERE id = 2",
        "UPDATE {db}.docs SET j = JSON_REMOVE(j, '$[0]', '$[3]') WHERE id = 3",
        "UPDATE {db}.docs SET j = JSON_REMOVE(j, '$.gone'), n = 40 WHERE id = 4",
        "UPDATE {db}.docs SET j = JSON_SET(JSON_REMOVE(j, '$.c'), '$.b', 'yyyyyyyyyyyy'), "
        "other = JSON_SET(other, '$.o', 2) WHERE id = 1",
    ],
    [
        "UPDATE {db}.docs SET j = JSON_REPLACE(j, '$.nested.deep.k', REPEAT('long', 20)) WHERE id = 2",
        "UPDATE {db}.docs SET j = JSON_SET(j, '$[0]', 'first') WHERE id = 3",
        'UPDATE {db}.docs SET j = \'{"whole": "document"}\' WHERE id = 3',
        "UPDATE {db}.docs SET other = JSON_SET(other, '$.p', NULL) WHERE id = 4",
    ],
)
PARTIAL_JSON = ("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",)


def test_session_partial_json_with_full_row_image(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(*JSON_TABLE)
    run_and_check_events(
        pipeline, JSON_WINDOWS, PARTIAL_JSON, {"binlog_row_value_options": "PARTIAL_JSON"}, "Update_rows_partial"
    )


def test_session_partial_json_with_minimal_row_image(pipeline_for: NewPipeline) -> None:
    pipeline = pipeline_for(*JSON_TABLE)
    run_and_check_events(
        pipeline,
        JSON_WINDOWS,
        (*MINIMAL, *PARTIAL_JSON),
        {"binlog_row_image": "MINIMAL", "binlog_row_value_options": "PARTIAL_JSON"},
        "Update_rows_partial",
    )


def test_minimal_images_and_partial_json_of_columns_named_with_dots_backquotes_and_spaces(
    pipeline_for: NewPipeline,
) -> None:
    """A quoted MySQL column name may hold any character. Folding partial images, and applying pending
    JSON diffs to the target's documents, must name every column quoted and escaped: ``a.b`` was read as
    the field ``b`` of a column ``a``, and a backquote ended a name early, so the table's apply failed
    on every window with a partial image."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.odd (`k``.id` INT PRIMARY KEY, `a.b` INT, `c``d` VARCHAR(10), `e``f g` JSON, `g.h` TEXT)",
        "INSERT INTO {db}.odd VALUES (1, 1, 'one', '{\"n\": 1, \"pad\": \"xxxxxxxxxxxxxxxx\"}', 'x'), "
        "(2, 2, 'two', NULL, NULL), (3, 3, 'three', '[3, 33, 333]', 'y')",
    )
    run_and_check_events(
        pipeline,
        [
            [
                "UPDATE {db}.odd SET `a.b` = 10 WHERE `k``.id` = 1",
                "UPDATE {db}.odd SET `c``d` = 'uno' WHERE `k``.id` = 1",
                "UPDATE {db}.odd SET `e``f g` = JSON_SET(`e``f g`, '$.n', 2) WHERE `k``.id` = 1",
                "UPDATE {db}.odd SET `k``.id` = 30 WHERE `k``.id` = 3",
                "INSERT INTO {db}.odd (`k``.id`, `a.b`) VALUES (4, 4)",
                "DELETE FROM {db}.odd WHERE `k``.id` = 2",
            ],
            [
                "UPDATE {db}.odd SET `g.h` = 'z', `e``f g` = JSON_REMOVE(`e``f g`, '$[1]') WHERE `k``.id` = 30",
                "UPDATE {db}.odd SET `a.b` = `a.b` + 1",
            ],
        ],
        (*MINIMAL, *PARTIAL_JSON),
        {"binlog_row_image": "MINIMAL", "binlog_row_value_options": "PARTIAL_JSON"},
        "Update_rows_partial",
    )


# -- transaction compression ----------------------------------------------------------------------


def test_session_binlog_transaction_compression(pipeline_for: NewPipeline) -> None:
    """Small transactions, a large one (20,000 rows, several MB), and transactions over several
    tables, all compressed; DDL between them."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.c1 (id INT PRIMARY KEY, v VARCHAR(200))",
        "CREATE TABLE {db}.c2 (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.c1 VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO {db}.c2 VALUES (1, 1)",
    )
    many = (
        "INSERT INTO {db}.c1 SELECT 1000 + n, REPEAT(CHAR(65 + n % 26), 150) FROM "
        "(WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < 19999) SELECT n FROM seq) s"
    )
    windows = [
        [
            "UPDATE {db}.c1 SET v = 'small' WHERE id = 1",
            "START TRANSACTION",
            "INSERT INTO {db}.c2 VALUES (2, 2)",
            "UPDATE {db}.c1 SET id = 20 WHERE id = 2",
            "DELETE FROM {db}.c2 WHERE id = 1",
            "COMMIT",
            "SET SESSION cte_max_recursion_depth = 100000",
            many,
        ],
        [
            "ALTER TABLE {db}.c2 ADD COLUMN w INT",
            "UPDATE {db}.c1 SET v = CONCAT(v, '!') WHERE id % 7 = 0",
            "START TRANSACTION",
            "DELETE FROM {db}.c1 WHERE id BETWEEN 5000 AND 9000",
            "INSERT INTO {db}.c2 VALUES (3, 3, 33)",
            "COMMIT",
        ],
    ]
    run_and_check_events(
        pipeline,
        windows,
        ("SET SESSION binlog_transaction_compression = ON",),
        {"binlog_transaction_compression": "1"},
        "Transaction_payload",
    )


# -- very large values ----------------------------------------------------------------------------

MIB = 1024 * 1024


def test_a_64_mib_longblob(large_packets: None, pipeline_for: NewPipeline) -> None:
    """A 64 MiB value read by the snapshot, then in one window copied by ``INSERT ... SELECT`` (the
    issue's case copied 62.5 MB) and updated in another column (both images hold it). The apply runs
    in its own JVM, as ``spark-submit`` from the example DAG does, with the driver memory
    ``SparkApplyOperator`` sizes from the largest staged row (Spark's default 1 GiB died, exit 52)."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.big (id INT PRIMARY KEY, b LONGBLOB, n INT)",
        f"INSERT INTO {{db}}.big VALUES (1, REPEAT(x'ab', 1024), 1), (2, REPEAT(x'cd', {64 * MIB}), 2)",
        own_jvm=True,
    )
    run_windows(
        pipeline,
        [
            [
                "INSERT INTO {db}.big SELECT 3, b, 3 FROM {db}.big WHERE id = 2",
                "UPDATE {db}.big SET n = 20 WHERE id = 2",
                "DELETE FROM {db}.big WHERE id = 1",
            ],
        ],
    )


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("MYSQL_CDC_SLOW_TESTS") != "1", reason="takes minutes and several GB of disk: MYSQL_CDC_SLOW_TESTS=1"
)
def test_a_one_gigabyte_transaction(large_packets: None, pipeline_for: NewPipeline) -> None:
    """One transaction of sixteen 64 MiB rows (1 GiB of row events). One to three minutes here, and
    about 5 GB of disk (binlog, InnoDB, staging, warehouse): run with ``MYSQL_CDC_SLOW_TESTS=1``."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.huge (id INT PRIMARY KEY, b LONGBLOB)",
        f"INSERT INTO {{db}}.huge VALUES (0, REPEAT(x'ee', {64 * MIB}))",
        own_jvm=True,
    )
    run_windows(
        pipeline,
        [
            [
                "START TRANSACTION",
                *(f"INSERT INTO {{db}}.huge SELECT {i}, b FROM {{db}}.huge WHERE id = 0" for i in range(1, 17)),
                "COMMIT",
            ],
        ],
    )


# -- statement-based logging ------------------------------------------------------------------------


@pytest.mark.parametrize("binlog_format", ["STATEMENT", "MIXED"])
def test_session_binlog_format_statement_and_mixed(pipeline_for: NewPipeline, binlog_format: str) -> None:
    """A session may log its changes as statements (``SET SESSION binlog_format``, for an account with
    SYSTEM_VARIABLES_ADMIN): the binlog then holds ``INSERT``/``UPDATE``/``DELETE`` text, not rows, and
    under STATEMENT a trigger's changes are not logged at all (a replica re-runs the trigger). Such a
    window cannot be applied from the binlog: every followed table is re-built from the next snapshot,
    and the targets equal MySQL again. Row events of other sessions in the same window are not lost."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.s1 (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE {db}.s2 (id INT PRIMARY KEY, n INT)",
        "CREATE TABLE {db}.audit (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(40))",
        "CREATE TRIGGER {db}.s1_audit AFTER INSERT ON {db}.s1 FOR EACH ROW "
        "INSERT INTO audit (what) VALUES (CONCAT('insert ', NEW.id))",
        "INSERT INTO {db}.s1 VALUES (1, 'one'), (2, 'two')",
        "INSERT INTO {db}.s2 VALUES (1, 10)",
    )
    session = (f"SET SESSION binlog_format = '{binlog_format}'",)
    database = pipeline.databases[0]

    def write(statements: Sequence[str]) -> None:
        since = binlog_position(pipeline.server)
        rows = pipeline.sql(
            *(fill(s, database=database) for s in statements), "SELECT @@SESSION.binlog_format", session=session
        )
        assert rows == [(binlog_format,)], rows
        logged = [info for kind, info in binlog_events(pipeline.server, since) if kind == "Query"]
        assert [info for info in logged if info.split("*/")[-1].strip().startswith("UPDATE")], logged

    windows = [
        [
            "INSERT INTO {db}.s1 VALUES (3, 'three')",  # the trigger writes audit
            "UPDATE {db}.s1 SET v = 'ONE' WHERE id = 1",
            "DELETE FROM {db}.s2 WHERE id = 1",
            "INSERT INTO {db}.s2 VALUES (2, 20)",
        ],
        ["UPDATE {db}.s1 SET v = CONCAT(v, '!')", "INSERT INTO {db}.s1 VALUES (4, 'four')"],
    ]
    drive(pipeline, [partial(write, statements) for statements in windows])


# -- explicit_defaults_for_timestamp ----------------------------------------------------------------

OLD_TIMESTAMPS = ("SET SESSION explicit_defaults_for_timestamp = OFF", "SET SESSION sql_mode = ''")


def test_session_explicit_defaults_for_timestamp_off(pipeline_for: NewPipeline) -> None:
    """With ``explicit_defaults_for_timestamp=OFF`` (deprecated, still settable per session) a TIMESTAMP
    column without attributes is ``NOT NULL``: the first one of a table ``DEFAULT CURRENT_TIMESTAMP ON
    UPDATE CURRENT_TIMESTAMP``, the others ``DEFAULT '0000-00-00 00:00:00'``. Columns added that way give
    the existing rows those values, and rows inserted without them (also under MINIMAL images) too."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.e (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.e VALUES (1, 1), (2, 2)",
    )
    run_windows(
        pipeline,
        [
            [
                "ALTER TABLE {db}.e ADD COLUMN first_ts TIMESTAMP, ADD COLUMN second_ts TIMESTAMP",
                "INSERT INTO {db}.e (id, v) VALUES (3, 3)",
                "CREATE TABLE {db}.made (id INT PRIMARY KEY, ts TIMESTAMP, ts2 TIMESTAMP, v INT)",
                "INSERT INTO {db}.made (id, v) VALUES (1, 1)",
            ],
            [
                "SET SESSION binlog_row_image = 'MINIMAL'",
                "INSERT INTO {db}.made (id, v) VALUES (2, 2)",
                "INSERT INTO {db}.e (id, v) VALUES (4, 4)",
                "UPDATE {db}.e SET v = 10 WHERE id = 1",
            ],
        ],
        session=OLD_TIMESTAMPS,
    )


# -- the client character set of DDL ------------------------------------------------------------------


def test_ddl_sent_in_another_client_character_set(pipeline_for: NewPipeline) -> None:
    """A Query event's text is in its session's ``character_set_client`` (the event says which):
    ``SET NAMES latin1`` makes the UTF-8 bytes of ``'é'`` two latin1 characters, ``Ã©``. Defaults, names
    and labels in such a statement are what MySQL read, not what UTF-8 would read."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.names (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.names VALUES (1, 1), (2, 2)",
    )
    run_windows(
        pipeline,
        [
            ["ALTER TABLE {db}.names ADD COLUMN note VARCHAR(20) DEFAULT 'café'"],  # no row after it
            [
                "ALTER TABLE {db}.names ADD COLUMN `prix_é` INT DEFAULT 5",
                "INSERT INTO {db}.names (id, v) VALUES (3, 3)",
            ],
            [
                "ALTER TABLE {db}.names ADD COLUMN kind ENUM('été', 'hiver') NOT NULL",
                "INSERT INTO {db}.names (id, v, kind) VALUES (4, 4, 2)",
            ],
        ],
        session=("SET NAMES latin1",),
    )


def test_ddl_literals_converted_to_another_connection_character_set(pipeline_for: NewPipeline) -> None:
    """With ``character_set_connection = latin1`` under a UTF-8 client, a literal's characters pass
    through latin1: ``'日本'`` becomes ``'??'``. Such a statement's text is not what MySQL stored, so
    every table is re-read."""
    pipeline = pipeline_for("CREATE TABLE {db}.lit (id INT PRIMARY KEY)", "INSERT INTO {db}.lit VALUES (1), (2)")
    run_windows(
        pipeline,
        [["ALTER TABLE {db}.lit ADD COLUMN note VARCHAR(20) DEFAULT '日本 ok'"]],
        session=("SET character_set_connection = latin1",),
    )


# -- default_storage_engine ---------------------------------------------------------------------------


def test_session_default_storage_engine_that_keeps_no_rows(pipeline_for: NewPipeline) -> None:
    """A CREATE TABLE without ``ENGINE=`` takes its session's ``default_storage_engine``, which the binlog
    does not carry, and ``CREATE ... LIKE`` its source's engine. A table created that way in
    ``BLACKHOLE`` logs its inserts as rows but keeps none: it waits alone, the reason naming the engine,
    while tables created in an engine that keeps rows (``MyISAM``, a ``LIKE`` of an InnoDB table) are
    followed. One whose engine changed before the capture read its CREATE waits too (the engine the
    CREATE made is not known). Re-read after the fix the reason suggests (another engine), the published
    window reads the same; the next snapshot then takes the tables."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.orders (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE {db}.outbox (id INT PRIMARY KEY, v INT) ENGINE=BLACKHOLE",
        "INSERT INTO {db}.orders VALUES (1, 1)",
    )
    database = pipeline.databases[0]
    staging = Staging(str(pipeline.engine.staging), pipeline.name)
    pipeline.snapshot()
    pipeline.run_window()
    blackhole = ("SET SESSION default_storage_engine = BLACKHOLE",)
    pipeline.sql(
        f"CREATE TABLE {database}.made (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {database}.made VALUES (1, 1)",
        f"CREATE TABLE {database}.copied LIKE {database}.orders",  # LIKE takes the source's engine
        f"INSERT INTO {database}.copied VALUES (1, 1)",
        session=blackhole,
    )
    pipeline.sql(
        f"CREATE TABLE {database}.cloned LIKE {database}.outbox",
        f"INSERT INTO {database}.cloned VALUES (1, 1)",
        f"INSERT INTO {database}.orders VALUES (2, 2)",
    )
    pipeline.sql(
        f"CREATE TABLE {database}.kept (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {database}.kept VALUES (1, 1), (2, 2)",
        session=("SET SESSION default_storage_engine = MyISAM",),
    )
    # Given another engine before the capture reads its CREATE: the server's answer no longer says
    # which engine the CREATE made (CREATE_TIME, in whole seconds, moved past the CREATE's commit).
    pipeline.sql(
        f"CREATE TABLE `{database}`.late (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{database}`.late VALUES (1, 1)",
        session=blackhole,
    )
    pipeline.sql("DO SLEEP(1.1)", f"ALTER TABLE `{database}`.late ENGINE=InnoDB")
    engines = dict(
        pipeline.sql(f"SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{database}'")
    )
    assert engines == {
        "orders": "InnoDB", "outbox": "BLACKHOLE", "made": "BLACKHOLE", "copied": "InnoDB",
        "cloned": "BLACKHOLE", "kept": "MyISAM", "late": "InnoDB",
    }, engines  # fmt: skip
    second = pipeline.run_window()
    manifest = staging.read_window_manifest(second.window_id)
    assert manifest is not None
    waiting = dict(manifest.rebuilds_pending)
    assert set(waiting) == {f"{database}.{t}" for t in ("outbox", "made", "cloned", "late")}, waiting
    for table in ("made", "cloned"):
        assert "ENGINE=BLACKHOLE keeps no rows" in waiting[f"{database}.{table}"], waiting
        assert not (pipeline.warehouse / database / table).exists()
    assert UNKNOWN_ENGINE_REASON in waiting[f"{database}.late"], waiting
    pipeline.assert_exact([(database, t) for t in ("orders", "copied", "kept")])

    # The fix: another engine. The published window, read again, is what it was.
    pipeline.sql(f"ALTER TABLE `{database}`.made ENGINE=InnoDB", f"INSERT INTO `{database}`.made VALUES (2, 2)")
    again = pipeline.engine.capture(f"{pipeline.name}-run-2")
    assert again.window_id == second.window_id
    reread = staging.read_window_manifest(second.window_id)
    assert reread is not None and reread.to_json() == manifest.to_json()
    third = pipeline.run_window()  # its snapshot takes made (InnoDB now: the row inserted since)
    assert set(pipeline.rebuilding) == {f"{database}.outbox", f"{database}.cloned"}, pipeline.rebuilding
    assert third.window_id == second.window_id + 1
    pipeline.assert_exact([(database, t) for t in ("orders", "copied", "kept", "made", "late")])


def test_a_table_given_another_engine_after_the_window_that_created_it_waits(pipeline_for: NewPipeline) -> None:
    """A window reads the engine of a table its CREATE made without ``ENGINE=`` from the server when it is
    captured, which can be after a statement past the window's end changed it: here a ``data_interval``
    window ends before ``ALTER TABLE ... ENGINE=InnoDB``, so the server answers InnoDB although the
    window's insert went to ``BLACKHOLE``. The table's ``CREATE_TIME``, in a later second than the
    window's end, tells: the table waits for the next snapshot (which finds it empty, as MySQL has it)."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.orders (id INT PRIMARY KEY, v INT)", "INSERT INTO {db}.orders VALUES (1, 1)"
    )
    database = pipeline.databases[0]
    pipeline.snapshot()
    pipeline.run_window()
    pipeline.sql(
        f"CREATE TABLE `{database}`.gap (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{database}`.gap VALUES (1, 1)",
        f"INSERT INTO `{database}`.orders VALUES (2, 2)",
        session=("SET SESSION default_storage_engine = BLACKHOLE",),
    )
    window_end = pipeline.server.utc_now()
    pipeline.sql("DO SLEEP(1.1)", f"ALTER TABLE `{database}`.gap ENGINE=InnoDB")
    captured = pipeline.engine.capture(
        f"{pipeline.name}-run-2", cutoff=CutoffRule.DATA_INTERVAL, data_interval_end=window_end
    )
    pipeline.apply_captured(captured)
    assert UNKNOWN_ENGINE_REASON in pipeline.rebuilding.get(f"{database}.gap", ""), pipeline.rebuilding
    pipeline.assert_exact([(database, "orders")])
    pipeline.run_window()  # the ALTER, and the snapshot that takes gap
    assert not pipeline.rebuilding, pipeline.rebuilding
    pipeline.assert_exact([(database, "orders"), (database, "gap")])


# -- server-wide session defaults -----------------------------------------------------------------------


def test_a_server_wide_sql_select_limit_cuts_nothing_the_pipeline_reads(pipeline_for: NewPipeline) -> None:
    """``SET GLOBAL sql_select_limit = 3`` makes every new session's results (``SHOW`` included) at most
    three rows: the preflight's variables, the snapshot's chunks, the capture's lookups. Every connection
    of the pipeline sets its own limit back, so snapshot and windows read every row."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.keyed (id INT PRIMARY KEY, v INT)",
        "INSERT INTO {db}.keyed VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 21)),
        "CREATE TABLE {db}.bag (v INT)",
        "INSERT INTO {db}.bag VALUES " + ", ".join(f"({i % 4})" for i in range(20)),
    )
    database = pipeline.databases[0]
    with global_variable(pipeline.server, "sql_select_limit", 3):
        with pymysql.connect(**pipeline.server.admin.pymysql_kwargs()) as raw, raw.cursor() as cursor:
            cursor.execute(f"SELECT id FROM `{database}`.keyed")  # a session that does not set its own
            assert cursor.fetchall() == ((1,), (2,), (3,))
        pipeline.snapshot()
        pipeline.run_window()
        pipeline.sql(
            f"CREATE TABLE `{database}`.made (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO `{database}`.made VALUES " + ", ".join(f"({i}, {i})" for i in range(10)),
            f"UPDATE `{database}`.keyed SET v = v + 100",
        )
        pipeline.run_window()
    pipeline.assert_exact()


def test_windows_across_a_binlog_checksum_change(pipeline_for: NewPipeline) -> None:
    """``SET GLOBAL binlog_checksum`` rotates the binlog: each file keeps the setting it was opened
    with. A window holding files of both settings is read exactly, each file by its own. While the
    server's setting is NONE, a reader cannot ask for files written with CRC32: the capture stops with
    the fix (set CRC32 again), and after it the window is read exactly."""
    pipeline = pipeline_for(
        "CREATE TABLE {db}.r (id INT PRIMARY KEY, v VARCHAR(20), d DOUBLE)", "INSERT INTO {db}.r VALUES (1, 'a', 1.5)"
    )
    database = pipeline.databases[0]
    table = f"`{database}`.r"
    pipeline.snapshot()
    pipeline.run_window()
    try:
        pipeline.sql(f"INSERT INTO {table} VALUES (2, 'crc32', 2.5)", "SET GLOBAL binlog_checksum = NONE")
        pipeline.sql(f"INSERT INTO {table} VALUES (3, 'none', 3.5)", f"UPDATE {table} SET v = 'none too' WHERE id = 1")
        pipeline.sql("SET GLOBAL binlog_checksum = CRC32", f"DELETE FROM {table} WHERE id = 2")
        assert len(pipeline.sql("SHOW BINARY LOGS")) >= 3  # each change opened a new file
        pipeline.run_window()
        pipeline.assert_exact()
        pipeline.sql(f"INSERT INTO {table} VALUES (4, 'crc32 again', 4.5)", "SET GLOBAL binlog_checksum = NONE")
        pipeline.sql(f"INSERT INTO {table} VALUES (5, 'none again', 5.5)")
        with pytest.raises(WindowStopped) as stopped:
            pipeline.run_window()
        (error,) = stopped.value.errors
        assert (error.stage, error.error_class) == ("capture", "BinlogStreamError"), error
        assert "SET PERSIST binlog_checksum = 'CRC32'" in error.message, error.message
    finally:
        pipeline.sql("SET GLOBAL binlog_checksum = CRC32")
    pipeline.run_window()
    pipeline.assert_exact()
