"""Parsing a DAG file stays light, and importing ``decoding`` changes nothing in python-mysql-replication.

* Airflow's DAG processor imports every DAG file again and again. The example DAG files, imported in
  a fresh interpreter, must load no module of PyMySQL, python-mysql-replication, pyarrow or pyspark
  beyond what a baseline interpreter that imports only ``airflow`` and ``airflow.sdk`` loads: the
  operators, sensors, triggers and hooks import engines and drivers when a task runs.
* Importing every module of :mod:`airflow_provider_mysql_cdc.decoding` leaves every class and
  module of python-mysql-replication as it was; only
  :func:`~airflow_provider_mysql_cdc.capture.binlog_library.install_library_fixes` (which
  ``BinlogReader.open()`` calls) changes them, and calling it twice changes nothing more.

Each check runs in its own interpreter (``subprocess``): this test process has imported the drivers
and may have installed the fixes already.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.fresh_interpreter import run_json

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Packages a DAG file must not load when it is parsed.
HEAVY_PACKAGES = ("pymysqlreplication", "pymysql", "pyarrow", "pyspark")

_MODULES_AFTER = """
import importlib.util, json, sys
import airflow, airflow.sdk
dag_ids = []
for index, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"dag_file_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag_ids += sorted({value.dag_id for value in vars(module).values() if isinstance(value, airflow.sdk.DAG)})
print(json.dumps({"modules": sorted(sys.modules), "dag_ids": dag_ids}))
"""


def _heavy(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if name.split(".", 1)[0] in HEAVY_PACKAGES)


@pytest.fixture(scope="module")
def baseline_modules() -> set[str]:
    """The modules a fresh interpreter holds after ``import airflow, airflow.sdk``."""
    return set(run_json(_MODULES_AFTER)["modules"])


def test_the_heavy_packages_are_installed() -> None:
    """Without them the DAG checks below would pass for the wrong reason."""
    assert all(importlib.util.find_spec(package) is not None for package in HEAVY_PACKAGES)


@pytest.mark.parametrize(
    ("dag_file", "dag_id", "provider_module"),
    [
        ("mysql_cdc_example.py", "mysql_cdc_example", "airflow_provider_mysql_cdc.pipeline"),
        (
            "mysql_cdc_maintained_example.py",
            "mysql_cdc_maintained_example",
            "airflow_provider_mysql_cdc.operators.maintenance",
        ),
        ("mysql_cdc_downstream_example.py", "mysql_cdc_orders_report", "airflow_provider_mysql_cdc.operators.apply"),
    ],
)
def test_parsing_a_dag_file_loads_no_driver_or_engine(
    baseline_modules: set[str], dag_file: str, dag_id: str, provider_module: str
) -> None:
    assert not _heavy(baseline_modules), "the baseline itself loads a driver: the comparison means nothing"
    parsed = run_json(_MODULES_AFTER, str(REPO_ROOT / "dags" / dag_file))
    assert dag_id in parsed["dag_ids"]
    added = set(parsed["modules"]) - baseline_modules
    assert provider_module in added  # the provider's DAG-building code was imported ...
    assert _heavy(added) == []  # ... without a driver or an engine


_MODULES_AFTER_IMPORT = """
import importlib, json, sys
import airflow, airflow.sdk
importlib.import_module(sys.argv[1])
print(json.dumps({"modules": sorted(sys.modules)}))
"""


def test_importing_the_verify_operator_loads_no_driver_or_engine(baseline_modules: set[str]) -> None:
    added = (
        set(run_json(_MODULES_AFTER_IMPORT, "airflow_provider_mysql_cdc.operators.verify")["modules"])
        - baseline_modules
    )
    assert "airflow_provider_mysql_cdc.operators.verify" in added
    assert _heavy(added) == []
    assert "airflow_provider_mysql_cdc.verify.engine" not in added


_LIBRARY_STATE = """
import importlib, json, pkgutil, sys

import pymysqlreplication

for found in pkgutil.walk_packages(pymysqlreplication.__path__, "pymysqlreplication."):
    if ".tests" not in found.name:  # the library ships its own tests inside the package
        importlib.import_module(found.name)


def value_state(value):
    if isinstance(value, dict):  # a dict changed in place keeps its id: compare its items
        return sorted((repr(key), id(item)) for key, item in value.items())
    return id(value)


def library_state():
    state = {}
    for name, module in list(sys.modules.items()):
        if name.split(".", 1)[0] != "pymysqlreplication" or module is None:
            continue
        for attribute, value in vars(module).items():
            state[f"{name}.{attribute}"] = value_state(value)
            if isinstance(value, type) and value.__module__ == name:
                for member, item in vars(value).items():
                    state[f"{name}.{attribute}.{member}"] = value_state(item)
    return state


def changed(before, after):
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))


import airflow_provider_mysql_cdc.decoding as decoding

pristine = library_state()
imported = [
    importlib.import_module(found.name).__name__
    for found in pkgutil.walk_packages(decoding.__path__, "airflow_provider_mysql_cdc.decoding.")
]
after_import = library_state()

from airflow_provider_mysql_cdc.capture.binlog_library import install_library_fixes

install_library_fixes()
after_install = library_state()
install_library_fixes()
after_second_install = library_state()
print(json.dumps({
    "imported": imported,
    "changed_by_import": changed(pristine, after_import),
    "changed_by_install": changed(after_import, after_install),
    "changed_by_second_install": changed(after_install, after_second_install),
}))
"""


def test_importing_decoding_leaves_the_library_unchanged() -> None:
    result = run_json(_LIBRARY_STATE)
    assert set(result["imported"]) >= {
        f"airflow_provider_mysql_cdc.decoding.{name}"
        for name in ("binlog_rows", "binlog_values", "compiled_rows", "library_fixes", "table_map", "text_arrow")
    }
    assert result["changed_by_import"] == []
    # The check sees a patch: the explicit installer changes what the fixes are about ...
    assert {
        "pymysqlreplication.column.Column._Column__parse_column_definition",
        "pymysqlreplication.row_event.TableMapEvent._get_optional_meta_data",
        "pymysqlreplication.row_event.TableMapEvent._is_character_column",
        "pymysqlreplication.row_event.TableMapEvent._read_column_names",
        "pymysqlreplication.row_event.TableMapEvent._read_type_values",
        "pymysqlreplication.binlogstream.GtidSet",
        "pymysqlreplication.packet.BinLogPacketWrapper._BinLogPacketWrapper__event_map",
    } <= set(result["changed_by_install"])
    # ... and installing again changes nothing more.
    assert result["changed_by_second_install"] == []
