"""Run a piece of Python in a fresh interpreter of this venv: for what a test process cannot show
(which modules a DAG file loads, defaults read when a module is imported, a provider made unimportable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_json(code: str, *args: str, environ: Mapping[str, str] | None = None) -> Any:
    """Run ``code`` (with ``args`` as ``sys.argv[1:]``) in a fresh interpreter, this checkout first on
    the path, in ``environ`` (default: this process's environment); its last stdout line, as JSON."""
    base = dict(os.environ if environ is None else environ)
    env = {**base, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), base.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
