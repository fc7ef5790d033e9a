"""The provider metadata Airflow reads through the entry point."""

from __future__ import annotations

import importlib
import json
from importlib.metadata import entry_points
from pathlib import Path

import airflow
import jsonschema

from airflow_provider_mysql_cdc import __version__
from airflow_provider_mysql_cdc.get_provider_info import get_provider_info


def test_provider_info_is_valid_against_airflows_schema() -> None:
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-provider-mysql-cdc"
    assert info["versions"] == [__version__]


def test_every_listed_module_and_hook_class_imports() -> None:
    info = get_provider_info()
    for section in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for connection_type in info["connection-types"]:
        module, _, name = connection_type["hook-class-name"].rpartition(".")
        hook = getattr(importlib.import_module(module), name)
        assert hook.conn_type == connection_type["connection-type"]


def test_entry_point_is_registered() -> None:
    points = [
        ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_provider_mysql")
    ]
    assert len(points) == 1
    assert points[0].load()() == get_provider_info()


def test_the_package_ships_its_type_hints() -> None:
    """PEP 561: ``py.typed`` sits in the package and pyproject's package-data puts it into the wheel."""
    import tomllib

    import airflow_provider_mysql_cdc

    assert (Path(airflow_provider_mysql_cdc.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["airflow_provider_mysql_cdc"]
