"""``MySqlBinlogPurgeHeadroomSensor``: warn before the server purges binlogs a pipeline still needs."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, AirflowSkipException

from airflow_provider_mysql_cdc.core.headroom import (
    DEFAULT_MIN_HEADROOM_SECONDS,
    HEADROOM_XCOM_KEY,
    HeadroomReport,
    HeadroomStatus,
)
from airflow_provider_mysql_cdc.core.windows import patterns
from airflow_provider_mysql_cdc.errors import ConfigurationError, MySqlCdcError
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task
from airflow_provider_mysql_cdc.triggers.purge_headroom import (
    ERROR_STATUS,
    MySqlBinlogPurgeHeadroomTrigger,
    check_pipeline_headroom,
    min_headroom,
)

#: How long the sensor waits for the headroom to come back above the minimum (see the class docstring).
DEFAULT_TIMEOUT = timedelta(minutes=5)
#: Time between two checks while it waits.
DEFAULT_POKE_INTERVAL = timedelta(minutes=1)


class MySqlBinlogPurgeHeadroomSensor(BaseSensorOperator):
    """Check that the binlog files ``pipeline`` still has to capture stay on the server long enough.

    Compares the pipeline's capture frontier with the server's binlog files, ``gtid_purged`` and
    ``binlog_expire_logs_seconds`` (see :mod:`airflow_provider_mysql_cdc.core.headroom`):

    * ``ok`` (headroom >= ``min_headroom_seconds``, or no automatic purge): success; the report's
      dict is the XCom return value.
    * ``below_minimum``: checks again every ``poke_interval`` (in the worker, or in the triggerer
      with ``deferrable=True``) until ``timeout``, then fails with the report's message, or is
      skipped with it under ``soft_fail=True``.
    * ``purged``: fails at once, without retries and even with ``soft_fail=True``: the lost GTIDs
      need a re-snapshot, which no wait or retry brings back. A run that re-snapshots tables
      (``resnapshot`` not empty) is that recovery: the sensor then succeeds with a warning, so the
      snapshot tasks run; capture checks that the snapshots hold the purged transactions.
    * ``history_mismatch``: the server cannot continue the pipeline (the topology guard of
      :mod:`airflow_provider_mysql_cdc.core.topology`, the same that stops capture and snapshot: a
      replica lacking transactions the pipeline holds, another server, a reset history): fails at
      once, like ``purged``, with the guard's message; the report's ``missing_gtids`` lists what the
      server lacks.

    Before failing or being skipped it pushes the report to XCom under key ``headroom``. The poke
    and the deferrable path decide the same way: the trigger's event is handled like the first check.

    **Why the default timeout is short (5 minutes, a check a minute).** The headroom only grows when
    capture moves the frontier forward or someone raises ``binlog_expire_logs_seconds``; meanwhile it
    shrinks by a second every second. The sensor runs in front of capture, so a long wait holds back
    the one task that fixes the problem. Five minutes lets a capture of an earlier run that is still
    finishing publish its window or a retention change land, and costs little (under 2 % of the
    default 6 h minimum). ``timeout=0`` lets the first check decide.

    ``soft_fail`` is applied by this sensor, not by :class:`BaseSensorOperator` (whose ``soft_fail``
    stays False): the base class would turn every failure into a skip, the purged binlog included,
    and replace the report's message by a generic one. ``never_fail`` is refused for the same reason.

    :param pipeline: pipeline name (its capture frontier is read from the metadata tables).
    :param mysql_cdc_conn_id: the MySQL source connection.
    :param metadata_conn_id: connection of the metadata database; default: a SQLite file in AIRFLOW_HOME.
    :param min_headroom_seconds: the headroom below which the sensor does not succeed (default 6 h).
    :param deferrable: wait in the triggerer instead of a worker slot; default: Airflow's
        ``[operators] default_deferrable`` (False unless configured).
    :param timeout: how long to wait for the headroom to recover (default 5 minutes); the deferred
        wait ends at the same deadline.
    :param poke_interval: time between two checks while waiting (default 1 minute).
    :param soft_fail: skip instead of failing when the headroom stays below the minimum (never for a
        purged binlog or a history mismatch).
    :param resnapshot: the tables (or patterns) this run re-snapshots, as given to the snapshot plan.
    """

    template_fields: Sequence[str] = (
        "pipeline",
        "mysql_cdc_conn_id",
        "metadata_conn_id",
        "min_headroom_seconds",
        "resnapshot",
    )
    ui_color = "#fdf0d5"

    def __init__(
        self,
        *,
        pipeline: str,
        mysql_cdc_conn_id: str = MySqlCdcHook.default_conn_name,
        metadata_conn_id: str | None = None,
        min_headroom_seconds: int | str = DEFAULT_MIN_HEADROOM_SECONDS,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        poke_interval: timedelta | float = DEFAULT_POKE_INTERVAL,
        soft_fail: bool = False,
        resnapshot: Sequence[str] | str = (),
        **kwargs: Any,
    ) -> None:
        if kwargs.get("never_fail"):
            raise ConfigurationError(
                f"MySqlBinlogPurgeHeadroomSensor {kwargs.get('task_id')!r}: never_fail would turn a purged binlog "
                "into a skip; use soft_fail=True to skip while the headroom is merely below the minimum"
            )
        super().__init__(timeout=timeout, poke_interval=poke_interval, **kwargs)
        self.pipeline = pipeline
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.metadata_conn_id = metadata_conn_id
        self.min_headroom_seconds = min_headroom_seconds
        self.deferrable = deferrable
        self.skip_below_minimum = soft_fail
        self.resnapshot = resnapshot
        self._last_report: HeadroomReport | None = None

    def _check(self) -> HeadroomReport:
        self._last_report = None
        report = check_pipeline_headroom(
            self.pipeline, self.mysql_cdc_conn_id, self.metadata_conn_id, min_headroom(self.min_headroom_seconds)
        )
        self._last_report = report
        self._log_report(report.as_xcom())
        return report

    def _log_report(self, xcom: dict[str, Any]) -> None:
        self.log.info(
            "pipeline %s: %s; headroom %s s (%s older files, %s bytes) before %s, purge forecast %s, "
            "backlog %s files (%s bytes), lag %s s",
            xcom["pipeline"],
            xcom["status"],
            xcom["headroom_seconds"],
            xcom["headroom_files"],
            xcom["headroom_bytes"],
            xcom["oldest_needed_file"],
            xcom["purge_forecast"],
            xcom["backlog_files"],
            xcom["backlog_bytes"],
            xcom["lag_seconds"],
        )
        self.log.info("%s", xcom["message"])

    def poke(self, context: Context) -> PokeReturnValue:
        """Done when the answer is final: ``ok`` or ``purged`` (``execute`` turns the latter into a failure)."""
        report = self._check()
        return PokeReturnValue(report.status is not HeadroomStatus.BELOW_MINIMUM, report.as_xcom())

    @terminal_errors_fail_task
    def execute(self, context: Context) -> Any:
        """Check (and wait while below the minimum); return the ``ok`` report or fail/skip as documented."""
        if self.deferrable:
            return self._execute_deferrable(context)
        try:
            xcom = super().execute(context)
        except AirflowSensorTimeout:
            if self._last_report is None:
                raise
            raise self._give_up(context, self._last_report.as_xcom()) from None
        return self._finish(context, xcom)

    def _execute_deferrable(self, context: Context) -> Any:
        """The first check in the worker; while below the minimum, the trigger checks until the deadline."""
        deadline = time.time() + self.timeout
        report = self._check()
        remaining = deadline - time.time()
        if report.status is HeadroomStatus.BELOW_MINIMUM and remaining > 0:
            self.defer(
                trigger=MySqlBinlogPurgeHeadroomTrigger(
                    pipeline=self.pipeline,
                    mysql_cdc_conn_id=self.mysql_cdc_conn_id,
                    metadata_conn_id=self.metadata_conn_id,
                    min_headroom_seconds=min_headroom(self.min_headroom_seconds),
                    poke_interval=self.poke_interval,
                    deadline=deadline,
                ),
                method_name="execute_complete",
                # A safety net only: the trigger fires its own event at the deadline.
                timeout=timedelta(seconds=remaining + max(60.0, 2 * self.poke_interval)),
            )
        return self._finish(context, report.as_xcom())

    @terminal_errors_fail_task
    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resume after the trigger's event: return the report, or fail/skip as in ``execute``.

        :class:`BaseSensorOperator`'s ``resume_execution`` passes the exceptions raised here through
        unchanged, because its own ``soft_fail`` and ``never_fail`` stay False (see the class docstring).
        """
        if event.get("status") == ERROR_STATUS:
            raise MySqlCdcError(f"the purge headroom check failed in the triggerer: {event.get('message')}")
        xcom: dict[str, Any] = event["report"]
        self._log_report(xcom)
        return self._finish(context, xcom)

    def _finish(self, context: Context, xcom: dict[str, Any]) -> dict[str, Any]:
        """Return an ``ok`` report; raise for ``purged`` (hard) or ``below_minimum`` (timeout or skip)."""
        if xcom["status"] == HeadroomStatus.OK.value:
            return xcom
        if xcom["status"] == HeadroomStatus.HISTORY_MISMATCH.value:
            context["ti"].xcom_push(key=HEADROOM_XCOM_KEY, value=xcom)
            raise AirflowFailException(xcom["message"])
        if xcom["status"] == HeadroomStatus.PURGED.value:
            resnapshot = [pattern for pattern in patterns(self.resnapshot) if pattern]
            if resnapshot:
                self.log.warning(
                    "%s This run re-snapshots %s: the snapshot tasks run, and capture continues after the "
                    "purged transactions once every selected table's snapshot holds them.",
                    xcom["message"],
                    resnapshot,
                )
                return xcom
            context["ti"].xcom_push(key=HEADROOM_XCOM_KEY, value=xcom)
            raise AirflowFailException(xcom["message"])
        raise self._give_up(context, xcom)

    def _give_up(self, context: Context, xcom: dict[str, Any]) -> Exception:
        """Push the report and build the timeout (or, under ``soft_fail``, the skip) carrying its message."""
        context["ti"].xcom_push(key=HEADROOM_XCOM_KEY, value=xcom)
        waited = f" (still below the minimum after waiting {self.timeout:.0f} s)" if self.timeout else ""
        kind = AirflowSkipException if self.skip_below_minimum else AirflowSensorTimeout
        return kind(f"{xcom['message']}{waited}")
