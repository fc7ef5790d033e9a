"""The metadata tables (SQLAlchemy Core definitions); :mod:`.frontier_store` and :mod:`.schema_tracking`
read and write them. Created on first use, versioned in ``cdc_store_version``."""

from __future__ import annotations

import sqlalchemy as sa

#: Version of the tables below; bump with a migration in :meth:`FrontierStore.ensure_schema`.
#: 2: ``cdc_snapshot_chunks`` (created on first use by an older store; no existing table changes).
#: 3: ``cdc_snapshots`` (likewise).
#: 4: ``cdc_tracked_schemas`` and ``cdc_rebuild_requests`` (likewise).
#: 5: ``cdc_server_observations`` (likewise).
#: ``cdc_table_frontiers`` (each table's applied GTID set, written after every apply and never read:
#: the target's Iceberg commit holds it) is no longer created or written; a store that has it keeps it,
#: unused (no version of its own: a store of either form is read and written the same way).
STORE_SCHEMA_VERSION = 5

metadata = sa.MetaData()

store_version_table = sa.Table(
    "cdc_store_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("installed_at", sa.DateTime(timezone=True), nullable=False),
)

pipelines_table = sa.Table(
    "cdc_pipelines",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("initial_frontier", sa.Text, nullable=False),
    sa.Column("capture_frontier", sa.Text, nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

windows_table = sa.Table(
    "cdc_windows",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("window_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("run_id", sa.String(250), nullable=False),
    sa.Column("lower", sa.Text, nullable=False),
    sa.Column("upper", sa.Text, nullable=True),
    sa.Column("cutoff_rule", sa.String(32), nullable=False),
    sa.Column("cutoff_value", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("manifest_uri", sa.Text, nullable=True),
    sa.Column("counts", sa.Text, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
    sa.UniqueConstraint("pipeline", "run_id", name="uq_cdc_windows_run"),
)

schema_history_table = sa.Table(
    "cdc_schema_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("pipeline", sa.String(200), nullable=False),
    sa.Column("table_name", sa.String(400), nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("columns", sa.Text, nullable=False),
    sa.Column("gtid", sa.String(200), nullable=True),
    sa.Column("statement", sa.Text, nullable=True),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("pipeline", "table_name", "fingerprint", name="uq_cdc_schema_fingerprint"),
)

ddl_history_table = sa.Table(
    "cdc_ddl_history",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("gtid", sa.String(200), primary_key=True),
    sa.Column("database_name", sa.String(200), nullable=False),
    sa.Column("statement", sa.Text, nullable=False),
    sa.Column("window_id", sa.Integer, nullable=False),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
)


snapshot_chunks_table = sa.Table(
    "cdc_snapshot_chunks",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("snapshot_id", sa.String(200), primary_key=True),
    # 300, not 400 as elsewhere: MySQL keys hold at most 3072 bytes (768 utf8mb4 characters); a
    # ``db.table`` name is at most 129 characters
    sa.Column("table_name", sa.String(300), primary_key=True),
    sa.Column("chunk_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("chunk", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("frontier", sa.Text, nullable=True),
    sa.Column("manifest_uri", sa.Text, nullable=True),
    sa.Column("rows", sa.BigInteger, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
)


snapshots_table = sa.Table(
    "cdc_snapshots",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("snapshot_id", sa.String(200), primary_key=True),
    sa.Column("run_id", sa.String(250), nullable=False),
    #: JSON list of the ``db.table`` names the snapshot reads.
    sa.Column("tables", sa.Text, nullable=False),
    #: Capture applies this snapshot's hand-off to windows from this id on.
    sa.Column("handoff_window", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("pipeline", "run_id", name="uq_cdc_snapshots_run"),
)

#: Each selected table's tracked schema (columns with identities), from the point it took effect:
#: ``(window_id, seq)`` of the DDL or table map in a window, or ``(handoff_window, -1)`` for the
#: schema a snapshot read. The schema at the start of window k is the last one before ``(k, 0)``.
tracked_schemas_table = sa.Table(
    "cdc_tracked_schemas",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("table_name", sa.String(400), primary_key=True),
    sa.Column("window_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    #: ``ddl``, ``table_map``, ``dropped`` or ``snapshot:<snapshot id>``.
    sa.Column("source", sa.String(220), nullable=False),
    #: The tracked table as JSON; NULL when the table was dropped.
    sa.Column("schema", sa.Text, nullable=True),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
)

#: Tables a window left waiting for a fresh snapshot (a change the target could not follow).
rebuild_requests_table = sa.Table(
    "cdc_rebuild_requests",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("table_name", sa.String(400), primary_key=True),
    sa.Column("window_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
    sa.Column("gtid", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
)

#: What each window's capture and each snapshot's planning and chunks saw of the server before reading
#: it (``core.topology``): identity and history, appended once per run, never updated.
server_observations_table = sa.Table(
    "cdc_server_observations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("pipeline", sa.String(200), nullable=False, index=True),
    #: ``window`` or ``snapshot``.
    sa.Column("kind", sa.String(16), nullable=False),
    #: The window id, or ``<snapshot id>`` / ``<snapshot id>:<db.table>:<chunk no>``.
    sa.Column("ref", sa.String(700), nullable=False),
    #: ``host:port`` (or the socket path); never the account or a password.
    sa.Column("address", sa.String(300), nullable=False),
    sa.Column("server_uuid", sa.String(64), nullable=False),
    sa.Column("gtid_executed", sa.Text, nullable=False),
    sa.Column("gtid_purged", sa.Text, nullable=False),
    sa.Column("first_binlog", sa.String(300), nullable=True),
    sa.Column("first_binlog_previous_gtids", sa.Text, nullable=True),
    sa.Column("first_binlog_created_us", sa.BigInteger, nullable=True),
    sa.Column("last_binlog", sa.String(300), nullable=True),
    sa.Column("last_binlog_created_us", sa.BigInteger, nullable=True),
    sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
)
