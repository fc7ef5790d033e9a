"""``MySqlBinlogPurgeHeadroomTrigger``: the deferrable half of ``MySqlBinlogPurgeHeadroomSensor``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_mysql_cdc.core.headroom import HeadroomReport, HeadroomStatus
from airflow_provider_mysql_cdc.errors import ConfigurationError
from airflow_provider_mysql_cdc.hooks.metadata import metadata_store
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook

#: ``status`` of the trigger's event when the check itself failed (``message`` says why).
ERROR_STATUS = "error"


def min_headroom(value: int | float | str) -> int:
    """A minimum headroom in seconds, from an int or a rendered template's text."""
    try:
        seconds = int(float(value))
    except (TypeError, ValueError):
        raise ConfigurationError(f"min_headroom_seconds must be a number of seconds, not {value!r}") from None
    if seconds < 0:
        raise ConfigurationError(f"min_headroom_seconds must not be negative, got {seconds}")
    return seconds


def _event(status: str, report: HeadroomReport | None, message: str) -> TriggerEvent:
    payload = {"status": status, "report": None if report is None else report.as_xcom(), "message": message}
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]


def check_pipeline_headroom(
    pipeline: str, mysql_cdc_conn_id: str, metadata_conn_id: str | None, min_headroom_seconds: int
) -> HeadroomReport:
    """One headroom check through Airflow connections (blocking; the sensor and the trigger use it)."""
    from airflow_provider_mysql_cdc.mysql.binlog_files import check_headroom  # PyMySQL: not at parse time

    source = MySqlCdcHook(mysql_cdc_conn_id=mysql_cdc_conn_id).get_connection_config()
    store = metadata_store(metadata_conn_id)
    try:
        return check_headroom(pipeline, source, store, min_headroom_seconds)
    finally:
        store.engine.dispose()


class MySqlBinlogPurgeHeadroomTrigger(BaseTrigger):
    """Re-check a pipeline's purge headroom every ``poke_interval`` seconds until it is no longer below
    the minimum or ``deadline`` (epoch seconds) passes; then fire one event.

    The event's payload is ``{"status", "report", "message"}``: status ``ok``, ``purged`` or
    ``below_minimum`` (at the deadline) with the report's XCom dict, or ``error`` (no report) when
    the check raised.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        mysql_cdc_conn_id: str,
        metadata_conn_id: str | None,
        min_headroom_seconds: int,
        poke_interval: float,
        deadline: float,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.pipeline = pipeline
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.metadata_conn_id = metadata_conn_id
        self.min_headroom_seconds = int(min_headroom_seconds)
        self.poke_interval = float(poke_interval)
        self.deadline = float(deadline)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Classpath and JSON-safe keyword arguments (connection ids only, never credentials)."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "pipeline": self.pipeline,
                "mysql_cdc_conn_id": self.mysql_cdc_conn_id,
                "metadata_conn_id": self.metadata_conn_id,
                "min_headroom_seconds": self.min_headroom_seconds,
                "poke_interval": self.poke_interval,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                report = await asyncio.to_thread(
                    check_pipeline_headroom,
                    self.pipeline,
                    self.mysql_cdc_conn_id,
                    self.metadata_conn_id,
                    self.min_headroom_seconds,
                )
            except Exception as exc:
                yield _event(ERROR_STATUS, None, f"{type(exc).__name__}: {exc}")
                return
            remaining = self.deadline - time.time()
            if report.status is not HeadroomStatus.BELOW_MINIMUM or remaining <= 0:
                yield _event(report.status.value, report, report.message)
                return
            self.log.info("%s", report.message)
            await asyncio.sleep(min(self.poke_interval, remaining))
