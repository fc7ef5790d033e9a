"""Which metadata store a task may use: the default SQLite file only where every task runs on this machine."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.hooks.metadata import distributed_executors, require_shared_default_store


@pytest.mark.parametrize(
    ("setting", "distributed"),
    [
        ("LocalExecutor", []),
        ("airflow.executors.local_executor.LocalExecutor", []),
        ("CeleryExecutor", ["CeleryExecutor"]),
        ("LocalExecutor, KubernetesExecutor", ["KubernetesExecutor"]),
        (
            "fast:airflow.executors.local_executor.LocalExecutor,edge:airflow.providers.edge3.EdgeExecutor",
            ["edge:airflow.providers.edge3.EdgeExecutor"],
        ),
    ],
)
def test_executors_that_run_tasks_elsewhere_are_named(setting: str, distributed: list[str]) -> None:
    assert distributed_executors(setting) == distributed


def test_the_default_store_is_refused_under_a_distributed_executor_with_the_fix() -> None:
    require_shared_default_store("LocalExecutor", "sqlite:////home/a/mysql_cdc_metadata.db")
    with pytest.raises(ConfigurationError, match=r"runs tasks with CeleryExecutor, whose workers each have their own"):
        require_shared_default_store("CeleryExecutor", "sqlite:////home/a/mysql_cdc_metadata.db")
    with pytest.raises(ConfigurationError, match="Give every task of the pipeline metadata_conn_id"):
        require_shared_default_store("KubernetesExecutor", "sqlite:////home/a/mysql_cdc_metadata.db")
