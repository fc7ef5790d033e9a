#!/usr/bin/env python3
"""Pin the lowest-supported package set: ``constraints/constraints-lowest-3.11.txt`` (``make constraints-lowest``).

The *floors* are the lower bounds (``>=``) of pyproject.toml's dependencies and of its ``spark``
extra; each one is the lowest version the code works with. In a throwaway venv:

1. every floor is installed pinned (``name==floor``), the rest of their dependencies resolved as pip
   resolved them on the day given by ``--resolved-before`` (``--uploaded-prior-to``; the Makefile's
   ``LOWEST_RESOLVED_BEFORE``, the day after the newest floor's release). An old release, Airflow's
   above all, does not work with dependencies released long after it (Airflow 3.1.0 does not even
   import with today's structlog); Airflow's own constraint files pin those for the same reason.
2. the project is installed with its ``spark`` and ``dev`` extras, the floors still pinned: the test
   tools come at their newest versions, and pip upgrades a package of step 1 only where a tool needs
   a newer one.

Then every floor is checked against what was installed, and ``pip freeze`` is written out.

pip's configuration files are ignored (``PIP_CONFIG_FILE`` is the null device): a local wheel
directory or file index has no upload times, so ``--uploaded-prior-to`` cannot filter what it holds.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = REPO_ROOT / "pyproject.toml"
DEFAULT_OUTPUT = REPO_ROOT / "constraints" / "constraints-lowest-3.11.txt"
DEFAULT_VENV = REPO_ROOT / ".cache" / "constraints-lowest-venv"
#: pyproject's extras whose floors are pinned (``dev`` is not: test tools come at their newest fitting versions).
PINNED_EXTRAS = ("spark",)

_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<specifiers>[^;]*)")


class FloorError(Exception):
    """Raised when a dependency has no floor, or the venv did not get a floor installed."""


def canonical_name(name: str) -> str:
    """A distribution name as pip compares it (PEP 503): lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def floor_of(requirement: str) -> tuple[str, str]:
    """``(name, version)`` of a requirement's one ``>=`` bound: ``SQLAlchemy>=2.0.48,<3`` gives ``2.0.48``."""
    match = _REQUIREMENT.match(requirement)
    if match is None:
        raise FloorError(f"cannot read the requirement {requirement!r} of pyproject.toml")
    floors = [spec.strip()[2:].strip() for spec in match["specifiers"].split(",") if spec.strip().startswith(">=")]
    if len(floors) != 1:
        raise FloorError(f"{requirement!r} in pyproject.toml needs exactly one '>=' bound: its floor")
    return match["name"], floors[0]


def project_floors(pyproject: Mapping[str, object]) -> dict[str, str]:
    """The floor of every dependency and of every dependency of :data:`PINNED_EXTRAS`, by name."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    requirements: list[str] = list(project["dependencies"])
    for extra in PINNED_EXTRAS:
        requirements += project["optional-dependencies"][extra]
    return dict(floor_of(requirement) for requirement in requirements)


def pins(floors: Mapping[str, str]) -> list[str]:
    """``name==version`` lines."""
    return [f"{name}=={version}" for name, version in floors.items()]


def frozen_versions(freeze: Iterable[str]) -> dict[str, str]:
    """``pip freeze`` lines (``name==version``) by canonical name."""
    versions: dict[str, str] = {}
    for line in freeze:
        name, sep, version = line.strip().partition("==")
        if sep:
            versions[canonical_name(name)] = version
    return versions


def check_floors(floors: Mapping[str, str], installed: Mapping[str, str]) -> None:
    """Raise :class:`FloorError` unless every floor is the installed version."""
    wrong = {
        name: installed.get(canonical_name(name), "nothing")
        for name, version in floors.items()
        if installed.get(canonical_name(name)) != version
    }
    if wrong:
        found = ", ".join(f"{name}=={floors[name]} (installed: {got})" for name, got in wrong.items())
        raise FloorError(f"the venv did not get these floors: {found}")


def _pip(venv: Path, *args: str) -> str:
    environment = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
    command = [str(venv / "bin" / "python"), "-m", "pip", *args]
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, env=environment, check=True, text=True, stdout=subprocess.PIPE).stdout


def build_lowest_venv(venv: Path, floors: Mapping[str, str], resolved_before: str) -> list[str]:
    """Steps 1 and 2 of the module docstring in a new venv at ``venv``; its ``pip freeze`` lines."""
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", "--quiet", "--upgrade", "pip>=26")  # --uploaded-prior-to
    floor_file = venv / "floors.txt"
    floor_file.write_text("\n".join(pins(floors)) + "\n")
    _pip(venv, "install", "--quiet", "--uploaded-prior-to", resolved_before, "-r", str(floor_file))
    _pip(venv, "install", "--quiet", "-c", str(floor_file), "-e", f"{REPO_ROOT}[spark,dev]")
    freeze = _pip(venv, "freeze", "--exclude-editable").splitlines()
    return [line for line in freeze if line and not line.startswith(("-e", "#"))]


def main(argv: Sequence[str] | None = None) -> int:
    """Build the venv, check the floors, write the constraints file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--resolved-before", required=True, help="ISO 8601 date: resolve the floors' needs as of it")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="throwaway venv (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="constraints file (default: %(default)s)")
    args = parser.parse_args(argv)
    floors = project_floors(tomllib.loads(PYPROJECT.read_text()))
    freeze = build_lowest_venv(args.venv, floors, args.resolved_before)
    try:
        check_floors(floors, frozen_versions(freeze))
    except FloorError as exc:
        print(f"lowest_constraints: {exc}", file=sys.stderr)
        return 1
    header = [
        f"# Lowest-supported package set (Python {sys.version_info.major}.{sys.version_info.minor}): the floors of",
        "# pyproject.toml, their dependencies as of " + args.resolved_before + ", the dev tools on top.",
        "# `make test-lowest` tests it. Regenerate with: make constraints-lowest",
    ]
    args.output.write_text("\n".join(header + freeze) + "\n")
    print(f"wrote {args.output} ({len(freeze)} packages; floors: {', '.join(pins(floors))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
