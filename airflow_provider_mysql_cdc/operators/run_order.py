"""Windows in run order without ``depends_on_past``: wait while the previous run's task is unfinished,
never wait on a failed one.

``depends_on_past`` keeps a task from starting while the same task of the previous run has not
succeeded. After a failure that means waiting forever, silently: the run never ends (``airflow dags
test`` sleeps until killed) and the UI shows it only in the task's dependency details. Capture and
apply do not need it. What they need is not to overtake a previous run that is still going (a
backfill beside the scheduled runs), and the engines already refuse, by name, what an earlier
failure really blocks:

* capture: a window planned by an earlier run but never published raises ``WindowOrderError``
  naming that run; an earlier run that planned no window (its preflight failed, the headroom sensor
  stopped it) blocks nothing: this run's window starts at the frontier and covers its interval too;
* apply: a table whose changes of an earlier window were never applied raises ``ApplyGapError``
  naming the windows; the other tables are applied.

So the task waits (polling, logging the run it waits for) while the previous run's same task is
scheduled, queued, running or up for retry, up to a limit; otherwise it goes on. When the previous
run's task failed, the task says so in its log and in its error, with the way out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

#: Task states after which the previous run's task will not change by itself.
FINISHED_TASK_STATES = frozenset({"success", "skipped", "failed", "upstream_failed", "removed"})
#: Run states after which a task of the run that never started will not start by itself.
FINISHED_RUN_STATES = frozenset({"success", "failed"})
#: How long a task waits for the previous run's same task before it fails, naming it.
DEFAULT_PREVIOUS_RUN_WAIT = timedelta(hours=2)
#: Seconds between two looks at the previous run.
POLL_SECONDS = 15.0


@dataclass(frozen=True)
class PreviousTask:
    """The same task in the run before this one (by logical date)."""

    run_id: str
    logical_date: str
    #: The task instance's state; None when it has none (not scheduled yet).
    state: str | None
    run_state: str

    @property
    def finished(self) -> bool:
        """True when waiting cannot change it: the task ended, or its run ended without running it."""
        if self.state is None:
            return self.run_state in FINISHED_RUN_STATES
        return self.state in FINISHED_TASK_STATES

    @property
    def failed(self) -> bool:
        """True when it ended failed (its window may be unpublished or unapplied)."""
        return self.state == "failed"


class TaskStateReader(Protocol):
    """What the gate asks Airflow: the previous run's same task (None when there is no previous run)."""

    def __call__(self) -> PreviousTask | None: ...


def previous_task_reader(context: Context) -> TaskStateReader:
    """Read the previous run's same task through the Task SDK (the worker's API client)."""
    ti: Any = context.get("ti")

    def read() -> PreviousTask | None:
        if not hasattr(ti, "get_previous_dagrun"):  # called outside a task run (a test's plain context)
            return None
        previous_run = ti.get_previous_dagrun()
        if previous_run is None:
            return None
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[previous_run.run_id])
        state = states.get(previous_run.run_id, {}).get(ti.task_id)
        run_state = ti.get_dagrun_state(dag_id=ti.dag_id, run_id=previous_run.run_id)
        logical_date = previous_run.logical_date.isoformat() if previous_run.logical_date else ""
        return PreviousTask(previous_run.run_id, logical_date, _text(state), str(_text(run_state)))

    return read


def _text(state: Any) -> str | None:
    """A state as its plain text (the SDK hands out str enums or strings)."""
    return None if state is None else str(getattr(state, "value", state))


def previous_run_note(dag_id: str, task_id: str, previous: PreviousTask) -> str:
    """The way out when the previous run's task left work undone: it failed, or it shows success or skipped
    because someone marked it so (a marked task did none of its work: its window is not captured or applied)."""
    when = f" -s {previous.logical_date} -e {previous.logical_date}" if previous.logical_date else ""
    clear = f"airflow tasks clear {dag_id} -t '^{task_id}$'{when} -y, or Clear in the UI"
    if previous.failed:
        return (
            f"run {previous.run_id!r} ended with its {task_id} failed. Fix the cause in its log, then clear it "
            f"({clear}) and clear this run's {task_id} after it; if that run's window must be given up instead, "
            "re-snapshot the tables it held (trigger a run with resnapshot=[...])"
        )
    return (
        f"run {previous.run_id!r} before this one shows its {task_id} as {previous.state or 'not run'}; if it was "
        f"marked so by hand, it did none of its work: clear it ({clear}) and clear this run's {task_id} after it"
    )


def wait_for_previous_run(
    reader: TaskStateReader,
    log: Any,
    task: str,
    max_wait: timedelta = DEFAULT_PREVIOUS_RUN_WAIT,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> PreviousTask | None:
    """Wait while the previous run's ``task`` (a label: "pipeline 'shop' capture") is unfinished; return
    it (None: no previous run).

    Past ``max_wait`` the task fails without retries (``AirflowFailException``) naming that run; a
    run that is not really running (a killed ``airflow dags test``) is marked failed to let later
    runs go.
    """
    deadline = time.monotonic() + max_wait.total_seconds()
    previous = reader()
    while previous is not None and not previous.finished:
        if time.monotonic() >= deadline:
            raise AirflowFailException(
                f"waited {max_wait} for the {task} of run {previous.run_id!r} ({previous.state or 'not started'}); "
                "this run must not overtake it. If that run is not really running (a killed `airflow dags test`), "
                "mark it failed, then clear this task"
            )
        log.info(
            "waiting for the %s of run %r (%s) to finish first", task, previous.run_id, previous.state or "not started"
        )
        sleep(poll_seconds)
        previous = reader()
    if previous is not None and previous.failed:
        log.warning(
            "the %s of run %r failed; this run goes on from the last published state, which stops by name if that "
            "run's window is what it needs",
            task,
            previous.run_id,
        )
    return previous
