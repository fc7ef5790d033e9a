"""Where the metadata tables live: an Airflow connection, or a SQLite file in AIRFLOW_HOME."""

from __future__ import annotations

import os
from pathlib import Path

from airflow.sdk import BaseHook, conf

from airflow_provider_mysql_cdc.errors import ConfigurationError
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


#: Executors whose tasks all run on this machine, so they share the default SQLite file.
SINGLE_MACHINE_EXECUTORS = frozenset({"LocalExecutor", "SequentialExecutor", "DebugExecutor"})


def distributed_executors(executor_setting: str) -> list[str]:
    """The executors of ``[core] executor`` (a comma-separated list of names, class paths or
    ``alias:class.path``) that run tasks on other machines than this one's."""
    names = [item.strip() for item in executor_setting.split(",") if item.strip()]
    return [name for name in names if name.rsplit(":", 1)[-1].rsplit(".", 1)[-1] not in SINGLE_MACHINE_EXECUTORS]


def require_shared_default_store(executor_setting: str, url: str) -> None:
    """Refuse the default store (a SQLite file in this worker's AIRFLOW_HOME) when tasks may run on other
    workers, each with its own file: the pipeline's state would split between them."""
    distributed = distributed_executors(executor_setting)
    if distributed:
        raise ConfigurationError(
            f"the default metadata store {url} is a file on this worker, but Airflow runs tasks with "
            f"{', '.join(distributed)}, whose workers each have their own: the pipeline's state would split "
            "between them. Give every task of the pipeline metadata_conn_id, a database all workers reach "
            '(postgres or mysql; docs/concepts.md "Metadata database")'
        )


def metadata_store(conn_id: str | None) -> FrontierStore:
    """The frontier store for a metadata connection id (None: the default SQLite file, refused when
    Airflow's executor runs tasks on other machines)."""
    if conn_id:
        return FrontierStore.from_url(metadata_url_from_connection(conn_id))
    url = default_metadata_url()
    require_shared_default_store(conf.get("core", "executor", fallback="LocalExecutor"), url)
    return FrontierStore.from_url(url)
