"""Crash trials, quick variant for ``make test``: a few SIGKILLs per stage at seeded random points
(capture, snapshot chunk, Spark apply), each followed by a re-run that must give exactly what an
uninterrupted run gives. The long variant runs many more trials from ``make reliability``.

``MYSQL_CDC_RELIABILITY_SEED`` overrides the fixed seed; every failure message names the seed in use.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.mysql_servers import MySqlTestServer
from tests.reliability.crash import CrashReport, run_crash_trials, stage_schedule

#: Fixed so that ``make test`` kills at the same relative points every run (the apply's single kill
#: lands at 48% of its reference run, the captures' at 48%, 19% and 82%, the snapshots' at 48% and 19%).
DEFAULT_SEED = 20263100
SEED = int(os.environ.get("MYSQL_CDC_RELIABILITY_SEED", DEFAULT_SEED))


def check(report: CrashReport, stage: str, trials: int) -> None:
    text = report.describe()
    print(text)
    assert report.seed == SEED, text
    assert (report.trials, report.trials_by_stage) == (trials, {stage: trials}), text
    assert report.differences == 0, text
    # One line for the reference run, one per trial, each naming the seed.
    assert len(report.lines) == trials + 1, text
    assert all(f"seed={SEED}" in line for line in report.lines), text
    assert report.mid_run_by_stage[stage] >= 1, f"no {stage} kill landed while it ran:\n{text}"


def test_trials_rotate_over_the_stages_with_fewer_spark_applies() -> None:
    assert stage_schedule(6) == ["capture", "snapshot", "apply", "capture", "snapshot", "capture"]
    assert Counter(stage_schedule(50)) == {"capture": 20, "snapshot": 20, "apply": 10}
    assert stage_schedule(3, ("snapshot", "apply")) == ["snapshot", "apply", "snapshot"]
    with pytest.raises(ValueError, match="stages must be"):
        stage_schedule(1, ("capture", "merge"))


@pytest.mark.mysql
def test_sigkilled_captures_are_re_run_into_identical_windows(mysql_server: MySqlTestServer, tmp_path: Path) -> None:
    report = run_crash_trials(mysql_server, tmp_path, trials=3, seed=SEED, stages=("capture",))
    check(report, "capture", 3)


@pytest.mark.mysql
def test_sigkilled_snapshot_chunks_are_re_run_into_identical_chunks(
    mysql_server: MySqlTestServer, tmp_path: Path
) -> None:
    report = run_crash_trials(mysql_server, tmp_path, trials=2, seed=SEED, stages=("snapshot",))
    check(report, "snapshot", 2)


@pytest.mark.mysql
@pytest.mark.spark
def test_a_sigkilled_spark_apply_re_run_commits_every_window_once(
    mysql_server: MySqlTestServer, spark: Any, tmp_path: Path
) -> None:
    report = run_crash_trials(mysql_server, tmp_path, trials=1, seed=SEED, stages=("apply",), spark=spark)
    check(report, "apply", 1)
