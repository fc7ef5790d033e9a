"""Run one snapshot or capture of a test pipeline in a child process and report its peak RSS.

The parent writes a JSON request to the child's stdin (never argv: it holds the server's password);
the child prints one JSON line: ``{"peak_rss_mb", "rss_after_imports_mb", "result"}``. Run as
``python -m tests.integration.pipeline_child`` from the repository root (:func:`run_in_child`).
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from typing import Any

from airflow_provider_mysql_cdc.core.connection import MySqlConnectionConfig
from tests.child_process import run_module
from tests.mysql_servers import MySqlTestServer


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB: Linux's ``VmHWM``, which counts this
    process's own pages only. ``getrusage``'s ``ru_maxrss`` starts at the peak of the parent that
    forked it (a test process that read big values earlier would hide the child's peak behind its
    own); it is the fallback where ``/proc`` has no ``VmHWM``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _account(config: MySqlConnectionConfig) -> dict[str, Any]:
    return {"host": config.host, "port": config.port, "user": config.user, "password": config.password}


def run_in_child(server: MySqlTestServer, tmp_path: Path, phase: str, **request: Any) -> dict[str, Any]:
    """Run ``phase`` (``snapshot`` or ``capture``) of pipeline ``request["name"]`` on ``tmp_path`` in a
    fresh Python process; returns what it printed."""
    payload = {
        "phase": phase,
        "admin": _account(server.admin),
        "cdc": _account(server.cdc),
        "tmp_path": str(tmp_path),
        **request,
    }
    return run_module("tests.integration.pipeline_child", payload, timeout=1800)


def main() -> None:
    """The child: read the request, run the phase, print the result line."""
    from airflow_provider_mysql_cdc.core.gtid import GtidSet
    from airflow_provider_mysql_cdc.core.windows import TableSelection
    from tests.integration.snapshot_pipeline import SnapshotPipeline

    request = json.loads(sys.stdin.read())
    server = MySqlTestServer(MySqlConnectionConfig(**request["admin"]), MySqlConnectionConfig(**request["cdc"]))
    tables = TableSelection.of(request["tables"])
    pipeline = SnapshotPipeline(server, Path(request["tmp_path"]), request["name"], tables)
    after_imports = peak_rss_mb()
    overrides = dict(request.get("overrides", {}))
    if request["phase"] == "snapshot":
        result: Any = [chunk.as_xcom() for chunk in pipeline.snapshot(request["run_id"], **overrides)]
    else:
        if "initial_frontier" in overrides:
            overrides["initial_frontier"] = GtidSet.parse(overrides["initial_frontier"])
        captured = pipeline.capture(request["run_id"], **overrides)
        result = {"window_id": captured.window_id, "op_counts": captured.op_counts, "upper": str(captured.upper)}
    print(json.dumps({"peak_rss_mb": peak_rss_mb(), "rss_after_imports_mb": after_imports, "result": result}))


if __name__ == "__main__":
    main()
