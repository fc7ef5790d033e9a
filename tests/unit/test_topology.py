"""The server identity and history guards (core.topology): every topology case by hand, and a model of a
server's history (writes, rotations, restarts, purges, resets) under hypothesis: legitimate histories
never fire, a reset fires unless it is past what the guard can see (documented in the module)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.topology import (
    DOCS_SECTION,
    RecordedObservation,
    ServerObservation,
    binlog_number,
    history_problem,
    history_rewrites,
    require_continuable,
)
from airflow_provider_mysql_cdc.errors import (
    FrontierNotOnServerError,
    ServerChangedError,
    ServerHistoryError,
    ServerHistoryResetError,
    TerminalCdcError,
)

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"  # the source
B = "4e11fa47-71ca-11e1-9e33-c80aa9429562"  # its replica
C = "5e11fa47-71ca-11e1-9e33-c80aa9429562"  # a server restored from a dump
T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
SECOND = 1_000_000


def gtids(text: str) -> GtidSet:
    return GtidSet.parse(text)


def observation(
    uuid: str = A,
    executed: str = f"{A}:1-20",
    purged: str = "",
    files: tuple[str, ...] = ("binlog.000001", "binlog.000002"),
    first_previous: str | None = "",
    created: dict[str, int] | None = None,
    address: str = "127.0.0.1:3306",
) -> ServerObservation:
    return ServerObservation(
        address=address,
        server_uuid=uuid,
        gtid_executed=gtids(executed),
        gtid_purged=gtids(purged),
        binlog_files=files,
        first_binlog_previous_gtids=None if first_previous is None else gtids(first_previous),
        binlog_created_us={name: T0 + index * SECOND for index, name in enumerate(files)}
        if created is None
        else created,
    )


def recorded(seen: ServerObservation, unit: str = "window 3") -> RecordedObservation:
    """As the metadata store keeps it: the first and the last binlog file only."""
    files = tuple(dict.fromkeys(name for name in (seen.first_binlog, seen.last_binlog) if name))
    kept = replace(
        seen, binlog_files=files, binlog_created_us={n: t for n, t in seen.binlog_created_us.items() if n in files}
    )
    return RecordedObservation(unit, datetime(2026, 1, 1, 12, tzinfo=UTC), kept)


def problem(
    server: ServerObservation,
    frontier: str | None = f"{A}:1-20",
    *,
    snapshots: str = "",
    last: ServerObservation | None = None,
    last_on_server: ServerObservation | None = None,
) -> ServerHistoryError | None:
    return history_problem(
        "shop",
        "window 4 (run 'scheduled__2026')",
        server,
        capture_frontier=None if frontier is None else gtids(frontier),
        snapshot_frontiers=gtids(snapshots),
        last=None if last is None else recorded(last),
        last_on_server=None if last_on_server is None else recorded(last_on_server),
    )


# -- containment ---------------------------------------------------------------------------------------


def test_a_pipeline_not_registered_yet_may_start_on_any_server() -> None:
    assert problem(observation(executed=""), frontier=None) is None


def test_the_server_that_holds_the_frontier_continues() -> None:
    source = observation(executed=f"{A}:1-25")
    assert problem(source) is None
    assert problem(source, last=observation(), last_on_server=observation()) is None


def test_a_server_lacking_frontier_transactions_stops_and_says_which_and_what_to_do() -> None:
    found = problem(observation(uuid=B, executed=f"{A}:1-17", address="127.0.0.1:3307"))
    assert type(found) is FrontierNotOnServerError
    assert isinstance(found, TerminalCdcError)
    text = str(found)
    assert found.missing_gtids == f"{A}:18-20"
    assert f"lacks 3 transaction(s) the pipeline already holds: {A}:18-20" in text
    assert "pipeline 'shop' window 4 (run 'scheduled__2026')" in text
    assert f"127.0.0.1:3307 (server_uuid {B})" in text
    assert f"SELECT GTID_SUBSET('{A}:1-20', @@GLOBAL.gtid_executed)" in text
    for choice in ("wait until it has applied them", "point the connection at a server", "re-snapshot"):
        assert choice in text
    assert DOCS_SECTION in text
    assert "nothing was staged or recorded and the frontier is unchanged" in text


def test_a_lagging_replica_after_the_source_is_a_changed_server() -> None:
    source = observation(executed=f"{A}:1-20")
    replica = observation(uuid=B, executed=f"{A}:1-17", files=("replica-bin.000003",), address="127.0.0.1:3307")
    found = problem(replica, last=source)
    assert type(found) is ServerChangedError
    assert isinstance(found, FrontierNotOnServerError)
    text = str(found)
    assert f"another server than window 3 (2026-01-01T12:00:00Z) read (127.0.0.1:3306 (server_uuid {A}))" in text
    assert f"such as the one window 3 (2026-01-01T12:00:00Z) read: 127.0.0.1:3306 (server_uuid {A})" in text
    assert found.missing_gtids == f"{A}:18-20"


def test_a_promoted_caught_up_replica_continues_whatever_its_binlogs_and_purged_set() -> None:
    nine = T0 + 9 * SECOND
    source = observation(
        executed=f"{A}:1-20",
        purged=f"{A}:1-10",
        files=("binlog.000007", "binlog.000009"),
        created={"binlog.000007": T0, "binlog.000009": nine},
    )
    promoted = observation(
        uuid=B,
        executed=f"{A}:1-23,{B}:1-4",
        purged="",
        files=("binlog.000001",),
        address="127.0.0.1:3307",
    )
    assert problem(promoted, last=source) is None
    # and back on the old source later: compared with its own last observation, it only grew
    assert problem(observation(executed=f"{A}:1-23"), f"{A}:1-23,{B}:1-4", last=promoted) is not None
    back = observation(
        executed=f"{A}:1-23,{B}:1-4",
        purged=f"{A}:1-10",
        files=("binlog.000009", "binlog.000010"),
        first_previous=f"{A}:1-18",
        created={"binlog.000009": nine, "binlog.000010": nine + SECOND},
    )
    assert problem(back, f"{A}:1-23,{B}:1-4", last=promoted, last_on_server=source) is None


def test_a_server_restored_from_an_older_dump_is_refused() -> None:
    restored = observation(uuid=C, executed=f"{C}:1-8", address="127.0.0.1:3308")
    found = problem(restored, last=observation())
    assert type(found) is ServerChangedError
    assert found.missing_gtids == f"{A}:1-20"


def test_a_server_whose_uuid_changed_continues_when_it_holds_the_frontier_and_stops_otherwise() -> None:
    renamed = observation(uuid=B, executed=f"{A}:1-20", files=("binlog.000001", "binlog.000002", "binlog.000003"))
    assert problem(renamed, last=observation()) is None
    behind = replace(renamed, gtid_executed=gtids(f"{A}:1-19"))
    assert type(problem(behind, last=observation())) is ServerChangedError


def test_snapshot_frontiers_beyond_the_capture_frontier_count_too() -> None:
    server = observation(uuid=B, executed=f"{A}:1-20")
    found = problem(server, snapshots=f"{A}:1-22")
    assert type(found) is FrontierNotOnServerError
    assert found.missing_gtids == f"{A}:21-22"
    assert f"finished snapshot chunks' frontiers (beyond it: {A}:21-22)" in str(found)


def test_require_continuable_raises_the_problem() -> None:
    require_continuable("shop", "window 4", observation(), capture_frontier=gtids(f"{A}:1-5"))
    with pytest.raises(FrontierNotOnServerError, match="lacks 15 transaction"):
        require_continuable("shop", "window 4", observation(executed=f"{A}:1-5"), capture_frontier=gtids(f"{A}:1-20"))


# -- history of one server -----------------------------------------------------------------------------


def test_a_reset_with_fewer_writes_than_before_is_a_reset_not_a_lagging_server() -> None:
    before = observation(executed=f"{A}:1-20", files=("binlog.000001", "binlog.000004"))
    after = observation(executed=f"{A}:1-3", files=("binlog.000001",), created={"binlog.000001": T0 + 99 * SECOND})
    found = problem(after, last=before, last_on_server=before)
    assert type(found) is ServerHistoryResetError
    text = str(found)
    assert f"gtid_executed went backwards: it was {A}:1-20, it is {A}:1-3 now, without {A}:4-20" in text
    assert "the newest binlog file was binlog.000004, it is binlog.000001 now" in text
    assert "was started at 2026-01-01T00:00:00Z, the file of that name now at 2026-01-01T00:01:39Z" in text
    assert "reuse GTIDs the pipeline already holds" in text
    assert "re-snapshot under a new pipeline" in text
    assert found.missing_gtids == f"{A}:4-20"


def test_a_reset_followed_by_more_writes_is_found_by_its_binlog_files() -> None:
    before = observation(executed=f"{A}:1-20", files=("binlog.000001",), created={"binlog.000001": T0})
    after = observation(executed=f"{A}:1-30", files=("binlog.000001",), created={"binlog.000001": T0 + 60 * SECOND})
    assert problem(after, last=before, last_on_server=before) is not None
    assert problem(after) is None  # without the recorded observation containment alone cannot see it


def test_binlog_numbering_that_started_over_is_a_reset() -> None:
    before = observation(executed=f"{A}:1-20", files=("binlog.000005", "binlog.000006"), first_previous=f"{A}:1-9")
    after = observation(executed=f"{A}:1-40", files=("binlog.000001", "binlog.000002"))
    reasons = history_rewrites(before, after, gtids(f"{A}:1-20"))
    assert reasons == [
        "the first binlog file was binlog.000005, it is binlog.000001 now (numbering started over)",
        "the newest binlog file was binlog.000006, it is binlog.000002 now (numbering started over)",
    ]


def test_a_first_file_rewritten_under_its_name_or_beginning_after_less_is_a_reset() -> None:
    before = observation(files=("binlog.000003", "binlog.000004"), first_previous=f"{A}:1-9")
    same_name = replace(before, first_binlog_previous_gtids=gtids(f"{A}:1-2"))
    assert history_rewrites(before, same_name, gtids(f"{A}:1-20")) == [
        f"binlog binlog.000003 began after {A}:1-9, it begins after {A}:1-2 now (the file was written again)"
    ]
    created = {"binlog.000004": T0 + SECOND, "binlog.000005": T0 + 2 * SECOND}
    later = observation(files=("binlog.000004", "binlog.000005"), first_previous=f"{A}:1-5", created=created)
    assert history_rewrites(before, later, gtids(f"{A}:1-20")) == [
        f"the first binlog file binlog.000004 begins after {A}:1-5, which lacks {A}:6-9 that binlog.000003 began after"
    ]


def test_gtid_purged_that_shrank_is_a_reset() -> None:
    before = observation(purged=f"{A}:1-10", first_previous=f"{A}:1-10")
    after = replace(before, gtid_purged=GtidSet())
    assert history_rewrites(before, after, gtids(f"{A}:1-20")) == [
        f"gtid_purged shrank: it was {A}:1-10, it is (empty) now, without {A}:1-10"
    ]


def test_purges_restarts_and_rotations_never_fire() -> None:
    before = observation(executed=f"{A}:1-20", files=("binlog.000001", "binlog.000002", "binlog.000003"))
    created = {"binlog.000003": T0 + 2 * SECOND, "binlog.000004": T0 + 50 * SECOND}
    after = observation(
        executed=f"{A}:1-26",
        purged=f"{A}:1-12",
        files=("binlog.000003", "binlog.000004"),
        first_previous=f"{A}:1-12",
        created=created,
    )
    assert history_rewrites(before, after, gtids(f"{A}:1-20")) == []
    assert problem(after, last=before, last_on_server=before) is None


def test_a_renamed_binlog_base_name_is_not_compared_by_number() -> None:
    before = observation(files=("binlog.000009",), created={"binlog.000009": T0})
    after = observation(executed=f"{A}:1-21", files=("mysql-bin.000001",), created={"mysql-bin.000001": T0 + SECOND})
    assert history_rewrites(before, after, gtids(f"{A}:1-20")) == []


def test_unknown_binlog_files_skip_the_file_rules() -> None:
    before = observation(files=(), first_previous=None, created={})
    after = observation(executed=f"{A}:1-22", files=("binlog.000001",))
    assert history_rewrites(before, after, gtids(f"{A}:1-20")) == []
    assert history_rewrites(after, before, gtids(f"{A}:1-20")) == [
        f"gtid_executed went backwards: it was {A}:1-22, it is {A}:1-20 now, without {A}:21-22"
    ]


def test_files_that_started_over_under_a_purged_set_beyond_the_frontier_are_left_to_the_purge_check() -> None:
    """A server re-provisioned from a backup (RESET, then SET GLOBAL gtid_purged): its new files hold no
    GTID of the old history; capture's purge check asks for the re-snapshot it needs."""
    before = observation(executed=f"{A}:1-20", files=("binlog.000005", "binlog.000006"), first_previous=f"{A}:1-9")
    provisioned = observation(executed=f"{A}:1-50", purged=f"{A}:1-50", files=("binlog.000001",))
    assert history_rewrites(before, provisioned, gtids(f"{A}:1-20")) == []
    # ... but not when the purged set is the frontier exactly: a reset history may have reused it
    exactly = replace(provisioned, gtid_executed=gtids(f"{A}:1-20"), gtid_purged=gtids(f"{A}:1-20"))
    assert history_rewrites(before, exactly, gtids(f"{A}:1-20")) != []


def test_a_reset_of_an_empty_history_is_harmless() -> None:
    before = observation(executed="", files=("binlog.000004",), first_previous="")
    after = observation(executed=f"{A}:1-2", files=("binlog.000001",))
    assert history_rewrites(before, after, GtidSet()) == []


def test_the_history_rules_compare_a_server_only_with_itself() -> None:
    other = observation(uuid=B, executed=f"{A}:1-40,{B}:1-9", purged=f"{A}:1-30", files=("binlog.000090",))
    assert problem(observation(executed=f"{A}:1-21"), last=other, last_on_server=other) is None


def test_binlog_numbers_and_descriptions() -> None:
    assert binlog_number("binlog.000012") == ("binlog", 12)
    assert binlog_number("my.host-bin.1000000") == ("my.host-bin", 1_000_000)
    assert binlog_number("binlog") is None
    assert binlog_number("binlog.idx") is None
    assert RecordedObservation("window 2", None, observation()).describe() == "window 2"
    assert observation().first_binlog == "binlog.000001" and observation().last_binlog == "binlog.000002"
    assert observation(files=()).first_binlog is None and observation(files=()).last_binlog is None


# -- a model of one server's history -------------------------------------------------------------------


@dataclass
class ModelServer:
    """One server's own transactions ``A:1-n``, its binlog files ``(number, started, previous n)`` and
    ``gtid_purged`` ``A:1-purged``; the clock moves one second per event."""

    executed: int = 0
    purged: int = 0
    clock: int = T0
    files: list[tuple[int, int, int]] = field(default_factory=lambda: [(1, T0, 0)])

    def apply(self, event: tuple[str, int]) -> None:
        kind, amount = event
        self.clock += SECOND
        if kind == "write":
            self.executed += amount
        elif kind == "rotate":  # FLUSH BINARY LOGS, a restart, a full file
            self.files.append((self.files[-1][0] + 1, self.clock, self.executed))
        elif kind == "purge":  # PURGE BINARY LOGS, expiry: never the active file
            keep = max(1, len(self.files) - amount)
            self.files = self.files[-keep:]
            self.purged = max(self.purged, self.files[0][2])
        else:
            assert kind == "reset"  # RESET BINARY LOGS AND GTIDS
            self.executed, self.purged, self.files = 0, 0, [(1, self.clock, 0)]

    def observe(self) -> ServerObservation:
        def own(count: int) -> str:
            return f"{A}:1-{count}" if count else ""

        return observation(
            executed=own(self.executed),
            purged=own(self.purged),
            files=tuple(f"binlog.{number:06d}" for number, _, _ in self.files),
            first_previous=own(self.files[0][2]),
            created={f"binlog.{number:06d}": started for number, started, _ in self.files},
        )


LEGITIMATE = st.tuples(st.sampled_from(["write", "rotate", "purge"]), st.integers(1, 4))


@settings(max_examples=300, deadline=None)
@given(st.lists(LEGITIMATE, max_size=12), st.lists(LEGITIMATE, max_size=12), st.integers(0, 100))
def test_a_history_that_only_grows_never_fires(
    first: list[tuple[str, int]], then: list[tuple[str, int]], lag: int
) -> None:
    server = ModelServer()
    for event in first:
        server.apply(event)
    before = server.observe()
    frontier = GtidSet.parse(f"{A}:1-{server.executed * lag // 100}") if server.executed * lag // 100 else GtidSet()
    for event in then:
        server.apply(event)
    after = server.observe()
    assert history_rewrites(recorded(before).observation, after, frontier) == []
    assert problem(after, str(frontier), last=before, last_on_server=before) is None


@settings(max_examples=500, deadline=None)
@given(
    st.lists(LEGITIMATE, min_size=1, max_size=10),
    st.lists(LEGITIMATE, max_size=12),
    st.booleans(),
)
def test_a_reset_fires_unless_it_is_past_what_the_guard_can_see(
    first: list[tuple[str, int]], then: list[tuple[str, int]], caught_up: bool
) -> None:
    server = ModelServer()
    for event in [("write", 1), *first]:
        server.apply(event)
    before = server.observe()
    before_last_number = server.files[-1][0]
    frontier_count = server.executed if caught_up else max(1, server.executed - 1)
    frontier = GtidSet.parse(f"{A}:1-{frontier_count}")
    server.apply(("reset", 0))
    for event in then:
        server.apply(event)
    after = server.observe()
    found = problem(after, str(frontier), last=before, last_on_server=before)
    invisible = server.executed >= before.gtid_executed.intervals(A)[0][1] and server.files[0][0] > before_last_number
    left_to_purge_check = before.gtid_executed <= after.gtid_purged and not after.gtid_purged <= frontier
    if not (invisible or left_to_purge_check):
        assert isinstance(found, ServerHistoryResetError)
