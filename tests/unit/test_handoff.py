"""The hand-off's pure decisions: by GTID first, then by the key's chunk."""

from __future__ import annotations

import pytest

from airflow_provider_mysql_cdc.capture.handoff import TableHandoff
from airflow_provider_mysql_cdc.core.chunks import Key, plan_snapshot_chunks
from airflow_provider_mysql_cdc.core.gtid import Gtid, GtidSet

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def handoff(boundaries: list[Key], frontiers: list[str]) -> TableHandoff:
    chunks = plan_snapshot_chunks("db", "t", ["k"], boundaries)
    return TableHandoff.of("000001", chunks, [GtidSet.parse(f"{U}:{f}") for f in frontiers])


def test_a_gtid_in_every_chunk_is_skipped_in_none_staged_in_some_decided_by_key() -> None:
    rules = handoff([(100,), (200,)], ["1-10", "1-14", "1-12"])
    assert rules.in_every_chunk == GtidSet.parse(f"{U}:1-10")
    assert rules.in_some_chunk == GtidSet.parse(f"{U}:1-14")
    assert rules.by_gtid(Gtid.parse(f"{U}:7")) is True
    assert rules.by_gtid(Gtid.parse(f"{U}:15")) is False
    assert rules.by_gtid(Gtid.parse(f"{U}:12")) is None
    assert [rules.chunk_in_python((k,)) for k in (-5, 99, 100, 199, 200, 10**9)] == [0, 0, 1, 1, 2, 2]


def test_string_keys_are_left_to_the_server_unless_python_can_decide() -> None:
    rules = handoff([("m",)], ["1-3", "1-5"])
    assert rules.chunk_in_python(("m",)) == 1  # equal to a bound: decided under every collation
    assert rules.chunk_in_python(("a",)) is None  # collation-dependent
    single = handoff([], ["1-3"])
    assert single.chunk_in_python((1.5,)) == 0  # type: ignore[arg-type]  # one chunk holds every key, whatever its type


@pytest.mark.parametrize("gtid", ["1", "3", "4", "5"])
def test_one_chunk_makes_every_decision_by_gtid(gtid: str) -> None:
    rules = handoff([], ["1-3"])
    assert rules.by_gtid(Gtid.parse(f"{U}:{gtid}")) is (int(gtid) <= 3)
