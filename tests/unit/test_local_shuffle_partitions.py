"""The apply's shuffle partitions when the job's Spark settings name none (pure logic)."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.apply.iceberg_session import local_shuffle_partitions


@pytest.mark.parametrize(
    ("master", "cores", "expected"),
    [
        ("local[2]", 2, 4),
        ("local[*]", 8, 16),
        ("local", 1, 2),
        ("local-cluster[2,1,1024]", 2, 4),
        ("spark://127.0.0.1:7077", 8, None),  # a cluster: Spark's default, the user's to tune
        ("yarn", 64, None),
        ("k8s://https://api:6443", 16, None),
    ],
)
def test_two_partitions_a_core_on_a_local_master_only(master: str, cores: int, expected: int | None) -> None:
    assert local_shuffle_partitions(master, cores) == expected
