"""Where the metadata tables live: an Airflow connection, or a SQLite file in AIRFLOW_HOME."""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import BaseHook

from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore

#: Used when no metadata connection is given: the embedded single-machine setup and the demo.
DEFAULT_SQLITE_NAME = "mysql_cdc_metadata.db"

_SCHEMES = {
    "postgres": "postgresql+psycopg2",
    "postgresql": "postgresql+psycopg2",
    "mysql": "mysql+pymysql",
    "mysql_cdc": "mysql+pymysql",
    "sqlite": "sqlite",
}


def metadata_url_from_connection(conn_id: str) -> str:
    """SQLAlchemy URL of an Airflow connection (postgres, mysql, sqlite; or an ``sqlalchemy_url`` extra)."""
    connection = BaseHook.get_connection(conn_id)
    explicit = connection.extra_dejson.get("sqlalchemy_url")
    if explicit:
        return str(explicit)
    if connection.conn_type == "sqlite":
        return f"sqlite:///{connection.host}"
    uri = connection.get_uri()
    scheme, _, rest = uri.partition("://")
    return f"{_SCHEMES.get(scheme, scheme)}://{rest}"


def default_metadata_url() -> str:
    """``sqlite:///$AIRFLOW_HOME/mysql_cdc_metadata.db``."""
    home = Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow"))
    return f"sqlite:///{home / DEFAULT_SQLITE_NAME}"


def metadata_store(conn_id: str | None) -> FrontierStore:
    """The frontier store for a metadata connection id (None: the default SQLite file)."""
    return FrontierStore.from_url(metadata_url_from_connection(conn_id) if conn_id else default_metadata_url())
