"""Helpers shared by the jar assembly scripts ``iceberg_jars.py`` and ``shaded_jackson.py``.

This module imports neither of them. They import it by name, so it stays next to them in
``scripts/``.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parents[1]
CACHE_ROOT: Path = REPO_ROOT / ".cache"
DEFAULT_PYTHON: Path = REPO_ROOT / ".venv" / "bin" / "python"


class JarAssemblyError(RuntimeError):
    """A step of the jar assembly failed; the message says what to do."""


def log(message: str) -> None:
    """Print a progress message to stderr (stdout is kept for the jar paths)."""
    print(f"[iceberg_jars] {message}", file=sys.stderr, flush=True)


def run(cmd: Sequence[str], what: str, hint: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run *cmd* (in *cwd*), raising :class:`JarAssemblyError` with *hint* if it fails."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, cwd=cwd)
    except FileNotFoundError as exc:
        raise JarAssemblyError(f"{what} failed: {exc}.\n  What to do: {hint}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise JarAssemblyError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}\n  What to do: {hint}")
    return proc


def jar_has(jar: Path, member: str) -> bool:
    """Tell whether the zip file *jar* contains *member*."""
    with zipfile.ZipFile(jar) as zf:
        try:
            zf.getinfo(member)
        except KeyError:
            return False
        return True
