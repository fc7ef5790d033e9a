"""The provider metadata Airflow reads through the entry point."""

from __future__ import annotations

import importlib
import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import airflow
import jsonschema

from airflow_provider_mysql_cdc import __version__
from airflow_provider_mysql_cdc.get_provider_info import PACKAGE, get_provider_info
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook


def _airflow_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((Path(airflow.__file__).parent / name).read_text())
    return schema


def test_provider_info_is_valid_against_airflows_schema() -> None:
    info = get_provider_info()
    jsonschema.validate(info, _airflow_schema("provider_info.schema.json"))
    assert info["package-name"] == "airflow-provider-mysql-cdc"
    assert info["versions"] == [__version__]


def test_lifecycle_and_connection_form_are_valid_against_the_provider_yaml_schema() -> None:
    """provider_info.schema.json leaves ``lifecycle``, ``conn-fields`` and ``ui-field-behaviour`` open;
    provider.yaml.schema.json (what Airflow's own providers are checked against) defines them."""
    info = get_provider_info()
    properties = _airflow_schema("provider.yaml.schema.json")["properties"]
    jsonschema.validate(info["lifecycle"], properties["lifecycle"])
    assert info["lifecycle"] == "incubation"
    jsonschema.validate(info["connection-types"], properties["connection-types"])
    (connection_type,) = info["connection-types"]
    assert {"conn-fields", "ui-field-behaviour"} <= set(connection_type)


def test_the_connection_form_is_declared_only_in_the_provider_info() -> None:
    """A hook method would be a second declaration (Airflow 3.2 deprecated them in favour of conn-fields)."""
    for method in ("get_ui_field_behaviour", "get_connection_form_widgets"):
        assert not any(method in vars(cls) for cls in MySqlCdcHook.__mro__ if cls.__module__.startswith(PACKAGE))


def test_providers_manager_builds_the_form_from_the_provider_info() -> None:
    """Airflow's ProvidersManager (what the API server's connection form reads) finds our fields."""
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()  # type: ignore[no-untyped-call]
    widgets = {
        name.removeprefix("extra__mysql_cdc__"): widget
        for name, widget in manager.connection_form_widgets.items()
        if name.startswith("extra__mysql_cdc__")
    }
    declared = get_provider_info()["connection-types"][0]
    assert set(widgets) == set(declared["conn-fields"])
    for name, field in declared["conn-fields"].items():
        assert widgets[name].hook_class_name == f"{PACKAGE}.hooks.mysql_cdc.MySqlCdcHook"
        assert widgets[name].field["schema"]["title"] == field["label"]
        assert widgets[name].field["value"] == field["schema"].get("default")
        assert not widgets[name].is_sensitive
    assert widgets["ssl_mode"].field["value"] == "PREFERRED"
    behaviour = manager.field_behaviours["mysql_cdc"]
    assert behaviour["relabeling"] == {"schema": "Default database (optional)"}
    assert behaviour["placeholders"] == {"host": "mysql.example.internal", "port": "3306", "login": "cdc"}
    assert behaviour["hidden_fields"] == []


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
