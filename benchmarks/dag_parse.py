"""DAG parsing: ``airflow dags report`` of the example DAG against the same shape built from EmptyOperator.

Airflow's DAG processor imports every DAG file again and again, so a DAG built by
``mysql_cdc_pipeline`` must parse about as fast as any DAG of the same shape. In one run, with a fresh
``AIRFLOW_HOME`` (SQLite, ``airflow db migrate`` once, not timed) and two DAG folders:

* **measured**: ``dags/mysql_cdc_example.py`` (preflight -> purge headroom -> snapshot plan -> mapped
  snapshot -> capture -> apply -> verify, the provider's operators);
* **baseline**: a DAG file of the same shape, params and dependencies made of ``EmptyOperator`` only
  (no provider import at all).

Each folder is reported ``--repeat`` times (default 5) by ``airflow dags report -o json`` in a new
process, as the DAG processor would parse it. Printed per folder: the file's parse ``duration`` that
Airflow reports (its import of the file, in-process) and the wall time of the whole command
(interpreter start, Airflow's own imports, the parse), their medians, and the ratios measured over
baseline. The last line is the summary::

    dag_parse parse_s=<m> baseline_parse_s=<m> ratio=<r> wall_s=<m> baseline_wall_s=<m> wall_ratio=<r>

Run: ``.venv/bin/python benchmarks/dag_parse.py`` (``make bench-dag-parse``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = Path(sys.executable).with_name("airflow")

BASELINE_DAG = """
from datetime import datetime, timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

with DAG(
    dag_id="empty_same_shape",
    schedule=timedelta(hours=1),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    params={name: Param("x", type="string") for name in ("pipeline", "staging_uri", "warehouse", "cutoff")},
):
    preflight = EmptyOperator(task_id="preflight", retries=4)
    purge_headroom = EmptyOperator(task_id="purge_headroom", retries=4)
    snapshot_plan = EmptyOperator(task_id="snapshot_plan", retries=4)
    snapshot = EmptyOperator.partial(task_id="snapshot", retries=4).expand(doc_md=["a", "b"])
    capture = EmptyOperator(task_id="capture", retries=4, trigger_rule="none_failed")
    apply = EmptyOperator(task_id="apply", retries=4)
    verify = EmptyOperator(task_id="verify", retries=4)
    preflight >> purge_headroom >> snapshot_plan >> snapshot >> capture >> apply >> verify
"""


def _environment(home: Path, dags: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }


def _report(home: Path, dags: Path) -> tuple[float, float]:
    """One ``airflow dags report``: (the file's parse duration as Airflow reports it, the wall time)."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(AIRFLOW), "dags", "report", "-o", "json"],
        env=_environment(home, dags),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"airflow dags report failed:\n{done.stderr[-3000:]}")
    (report,) = [line for line in done.stdout.splitlines() if line.startswith("[{")]  # log lines around it
    (row,) = json.loads(report)
    if int(row.get("number of errors", 0)):
        raise SystemExit(f"the DAG file did not import: {row}")
    return _seconds(str(row["duration"])), wall


def _seconds(duration: str) -> float:
    """Airflow's ``0:00:00.123456`` duration text in seconds."""
    hours, minutes, seconds = duration.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def run(repeat: int) -> str:
    """Measure both folders ``repeat`` times, alternating; print the rounds; return the summary line."""
    with tempfile.TemporaryDirectory(prefix="dag-parse-") as scratch:
        home = Path(scratch) / "airflow"
        measured, baseline = Path(scratch) / "measured", Path(scratch) / "baseline"
        for folder in (home, measured, baseline):
            folder.mkdir()
        shutil.copy(REPO_ROOT / "dags" / "mysql_cdc_example.py", measured)
        (baseline / "empty_same_shape.py").write_text(textwrap.dedent(BASELINE_DAG))
        migrated = subprocess.run(
            [str(AIRFLOW), "db", "migrate"],
            env=_environment(home, baseline),
            capture_output=True,
            text=True,
            check=False,
        )
        if migrated.returncode != 0:
            raise SystemExit(migrated.stderr[-3000:])
        rounds: dict[str, list[tuple[float, float]]] = {"measured": [], "baseline": []}
        for _ in range(repeat):
            for name, folder in (("baseline", baseline), ("measured", measured)):
                rounds[name].append(_report(home, folder))
        for name, values in rounds.items():
            print(f"{name} parse_s: {' '.join(f'{p:.3f}' for p, _ in values)}", flush=True)
            print(f"{name} wall_s: {' '.join(f'{w:.2f}' for _, w in values)}", flush=True)
    parse = statistics.median(p for p, _ in rounds["measured"])
    base_parse = statistics.median(p for p, _ in rounds["baseline"])
    wall = statistics.median(w for _, w in rounds["measured"])
    base_wall = statistics.median(w for _, w in rounds["baseline"])
    return (
        f"dag_parse parse_s={parse:.3f} baseline_parse_s={base_parse:.3f} ratio={parse / base_parse:.2f} "
        f"wall_s={wall:.2f} baseline_wall_s={base_wall:.2f} wall_ratio={wall / base_wall:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="reports per folder (default 5)")
    options = parser.parse_args(argv)
    print(run(options.repeat), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
