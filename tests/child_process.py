"""Run a test helper module in a fresh Python interpreter: a JSON request on its standard input (it
may hold a password: never argv or the environment), one JSON line printed last as its answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


def send_request(process: subprocess.Popen[bytes], text: str) -> None:
    """Write ``text`` to a started child's standard input and close it; a child that died first (killed
    by the test, or failed at start) is not an error here: its exit and log tell."""
    assert process.stdin is not None
    try:
        process.stdin.write(text.encode())
        process.stdin.close()
    except BrokenPipeError:
        pass


def run_module(module: str, request: Mapping[str, Any], *, timeout: float) -> dict[str, Any]:
    """``python -m module`` from the repository root with ``request`` on stdin; the last line it
    printed, parsed. A child that fails fails the test with the end of its standard error."""
    done = subprocess.run(
        [sys.executable, "-m", module],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        check=False,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{module} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
