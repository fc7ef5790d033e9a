"""Peak memory of reading or capturing binlog transactions, measured in a process of its own.

``python -m tests.integration.binlog_memory_probe`` reads one JSON request on stdin (so the password
never appears in argv)::

    {"mode": "read" | "capture", "host": ..., "port": ..., "user": ..., "password": ...,
     "after": GTID set, "server_id": int, "trace": bool,
     capture only: "pipeline", "staging", "store_url", "tables"}

``read`` iterates a :class:`BinlogReader` from ``after`` until it is idle and locates every row
event's images (:func:`row_images`); ``capture`` runs the first catch-up window of a new pipeline
whose frontier is ``after``. It prints one JSON line:
the row events read (and how many the compiled decoder can read), the staged rows, the peak RSS
before and after the work (``VmHWM``, KiB) and, with ``trace``, tracemalloc's peak (bytes).
Everything is imported and the peak is reset to the current RSS (Linux only) before the baseline is
taken, so the difference is the work's own memory.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sys
import tracemalloc
from typing import Any

from airflow_provider_mysql_cdc.capture.binlog_reader import BinlogReader, Idle, RowsEvent
from airflow_provider_mysql_cdc.capture.engine import CaptureRequest, capture_window
from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from airflow_provider_mysql_cdc.core.gtid import GtidSet
from airflow_provider_mysql_cdc.core.windows import CutoffRule, TableSelection
from airflow_provider_mysql_cdc.decoding.compiled_rows import row_images
from airflow_provider_mysql_cdc.store.frontier_store import FrontierStore


def _read(config: MySqlConnectionConfig, request: dict[str, Any]) -> dict[str, Any]:
    events = compiled = event_bytes = 0
    with BinlogReader(
        config, after=GtidSet.parse(request["after"]), replica_server_id=request["server_id"], heartbeat_seconds=0.5
    ) as reader:
        for item in reader:
            if isinstance(item, Idle):
                break
            if isinstance(item, RowsEvent):
                events += 1
                event_bytes += int(item.event.event_size)
                compiled += row_images(item.event) is not None
    return {"row_events": events, "compiled_row_events": compiled, "row_event_bytes": event_bytes}


def _capture(config: MySqlConnectionConfig, request: dict[str, Any]) -> dict[str, Any]:
    result = capture_window(
        CaptureRequest(
            pipeline=request["pipeline"],
            run_id="memory-probe",
            staging_uri=request["staging"],
            cutoff=CutoffRule.CATCH_UP,
            tables=TableSelection.of(request["tables"]),
            initial_frontier=GtidSet.parse(request["after"]),
            replica_server_id=request["server_id"],
        ),
        config,
        FrontierStore.from_url(request["store_url"]),
    )
    return {"staged_rows": sum(result.op_counts.values()), "window_id": result.window_id}


def _reset_peak_rss() -> None:
    """Give free heap back to the system (glibc ``malloc_trim``), then lower the peak RSS to the current
    RSS (Linux ``clear_refs`` 5): the peak then grows with the work's own memory, not hidden by the
    imports' freed pages nor by their transient peak."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def _peak_rss_kib() -> int:
    """The process's peak RSS (``VmHWM``, KiB): what ``getrusage`` reports as ``ru_maxrss``, without the
    floor ``ru_maxrss`` inherits from the parent that forked this process."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    """Run the request on stdin and print the measurements."""
    request = json.load(sys.stdin)
    config = MySqlConnectionConfig(
        host=request["host"], port=request["port"], user=request["user"], password=request["password"]
    )
    work = _read if request["mode"] == "read" else _capture
    _reset_peak_rss()
    baseline_kib = _peak_rss_kib()
    if request.get("trace"):
        tracemalloc.start()
    measured = work(config, request)
    measured["traced_peak_bytes"] = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else None
    measured["peak_rss_before_kib"] = baseline_kib
    measured["peak_rss_after_kib"] = _peak_rss_kib()
    print(json.dumps(measured))


if __name__ == "__main__":
    main()
