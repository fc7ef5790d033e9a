"""The pure logic of ``benchmarks/e2e.py``: where a run's time went, from task instance times and the command's log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.e2e import (
    FLOOR_DAG_ID,
    TASKS,
    TaskInstanceTimes,
    busy_seconds,
    floor_dag_source,
    overhead_split,
    reported_starts,
    runner_start_seconds,
    summary_line,
    task_seconds,
)

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ti(
    task_id: str, start: float | None, end: float | None, map_index: int = -1, state: str = "success"
) -> TaskInstanceTimes:
    return TaskInstanceTimes(
        task_id,
        map_index,
        state,
        None if start is None else at(start),
        None if end is None else at(end),
        f"id-{task_id}-{map_index}",
    )


def test_overlapping_intervals_count_once_and_gaps_do_not_count() -> None:
    assert busy_seconds([]) == 0.0
    assert busy_seconds([(at(0), at(2)), (at(1), at(3)), (at(5), at(6))]) == 4.0
    assert busy_seconds([(at(5), at(6)), (at(0), at(10))]) == 10.0  # contained, given out of order


def test_task_seconds_union_map_indexes_and_skipped_tasks_cost_nothing() -> None:
    tis = [
        ti("preflight", 0, 2),
        ti("snapshot", 3, 7, map_index=0),
        ti("snapshot", 4, 6, map_index=1),  # parallel chunk: inside the first one's interval
        ti("capture", None, None, state="skipped"),
        ti("extra_task", 8, 9),
    ]
    seconds = task_seconds(tis, [task_id for task_id, _ in TASKS])
    assert list(seconds) == [
        "preflight",
        "purge_headroom",
        "snapshot_plan",
        "snapshot",
        "capture",
        "apply",
        "extra_task",
    ]
    assert seconds["preflight"] == 2.0 and seconds["snapshot"] == 4.0 and seconds["extra_task"] == 1.0
    assert seconds["capture"] == seconds["apply"] == 0.0


def test_the_time_outside_tasks_is_split_before_between_and_after() -> None:
    tis = [ti("preflight", 3, 5), ti("capture", 6, 8), ti("apply", 7, 12), ti("snapshot", None, None, state="skipped")]
    assert overhead_split(tis, at(0), at(15)) == {
        "before_first_task": 3.0,
        "between_tasks": 1.0,
        "after_last_task": 3.0,
    }
    assert overhead_split([], at(0), at(4)) == {"before_first_task": 4.0, "between_tasks": 0.0, "after_last_task": 0.0}


def test_summary_line_has_a_short_name_per_task_and_the_rest_as_other() -> None:
    seconds = {task_id: 0.0 for task_id, _ in TASKS} | {"preflight": 1.0, "capture": 4.25, "apply": 20.0}
    line = summary_line(100_000, 30.0, seconds)
    assert line == (
        "e2e changes=100000 wall_s=30.0 preflight_s=1.0 headroom_s=0.0 plan_s=0.0 snapshot_s=0.0 "
        "capture_s=4.2 apply_s=20.0 other_s=4.8"
    )
    assert summary_line(100_000, 30.0, seconds, floor=7.25).endswith(
        " other_s=4.8 airflow_floor_s=7.2 beyond_floor_s=22.8"
    )


def test_the_floor_dag_chains_as_many_empty_tasks_as_asked() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(floor_dag_source(7), "floor.py", "exec"), namespace)
    dag = namespace["dag"]
    names = [f"task_{n}" for n in range(7)]
    assert dag.dag_id == FLOOR_DAG_ID and sorted(dag.task_ids) == sorted(names)
    assert [sorted(dag.get_task(name).downstream_task_ids) for name in names] == [[n] for n in names[1:]] + [[]]
    assert {type(task).__name__ for task in dag.tasks} == {"EmptyOperator"}


def test_task_started_lines_give_the_runner_start_of_each_task_instance() -> None:
    log = "\n".join(
        [
            "2026-11-22T10:00:00.500000Z [info     ] [DAG TEST] running task <TaskInstance: d.preflight "
            "ti_id=id-preflight--1>",
            "2026-11-22T10:00:06.000000Z [info     ] Task started                   [airflow.api_fastapi.execution_api"
            ".routes.task_instances] hostname=vm previous_state=queued ti_id=id-preflight--1",
            "2026-11-22T10:00:09.250000Z [info     ] Task started   [x] ti_id=id-capture--1",
            "2026-11-22T10:00:09.900000Z [info     ] Task started   [x] ti_id=id-capture--1",  # a later line: ignored
            "2026-11-22T10:00:10.000000Z [info     ] Task finished  [x] ti_id=id-apply--1",
        ]
    )
    starts = reported_starts(log)
    assert starts == {"id-preflight--1": at(6), "id-capture--1": at(9.25)}
    tis = [ti("preflight", 1, 7), ti("capture", 9, 12), ti("apply", 12, 20)]
    assert runner_start_seconds(tis, starts) == {"preflight": 5.0, "capture": 0.25}
