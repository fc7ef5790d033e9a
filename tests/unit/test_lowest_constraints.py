"""The floors of pyproject.toml and the lowest-supported constraints file agree (``scripts/lowest_constraints.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    """Import ``scripts/lowest_constraints.py`` by its path."""
    path = REPO_ROOT / "scripts" / "lowest_constraints.py"
    spec = importlib.util.spec_from_file_location("lowest_constraints", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lowest = load_script()


def test_floor_of_reads_the_lower_bound_of_a_range() -> None:
    assert lowest.floor_of("SQLAlchemy>=2.0.48,<3") == ("SQLAlchemy", "2.0.48")
    assert lowest.floor_of("pyiceberg[pyarrow] >= 0.12 , <0.13") == ("pyiceberg", "0.12")
    assert lowest.floor_of("cryptography>=44.0.3; python_version >= '3.11'") == ("cryptography", "44.0.3")


@pytest.mark.parametrize("requirement", ["types-PyMySQL", "import-linter==2.16", "PyMySQL<2", "a>=1,>=2"])
def test_a_requirement_without_exactly_one_floor_is_refused(requirement: str) -> None:
    with pytest.raises(lowest.FloorError, match="exactly one '>=' bound"):
        lowest.floor_of(requirement)


def test_every_dependency_and_the_spark_extra_have_a_floor() -> None:
    floors = lowest.project_floors(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text()))
    assert {"apache-airflow", "apache-airflow-providers-apache-spark", "pyspark", "PyMySQL"} <= set(floors)
    assert "pytest" not in floors  # the dev tools are not pinned to their floors


def test_the_lowest_constraints_file_pins_every_floor_of_pyproject() -> None:
    """A floor changed in pyproject.toml without `make constraints-lowest` fails here."""
    floors = lowest.project_floors(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text()))
    pinned = (REPO_ROOT / "constraints" / "constraints-lowest-3.11.txt").read_text().splitlines()
    lowest.check_floors(floors, lowest.frozen_versions(pinned))


def test_check_floors_names_each_floor_that_was_not_installed() -> None:
    installed = lowest.frozen_versions(["pymysql==1.2.4", "SQLAlchemy==2.0.48"])
    with pytest.raises(lowest.FloorError) as raised:
        lowest.check_floors({"PyMySQL": "1.2.1", "SQLAlchemy": "2.0.48", "pyarrow": "18.0.0"}, installed)
    assert str(raised.value) == (
        "the venv did not get these floors: PyMySQL==1.2.1 (installed: 1.2.4), pyarrow==18.0.0 (installed: nothing)"
    )
