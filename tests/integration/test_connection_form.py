"""The ``mysql_cdc`` connection form as the Airflow UI receives it from the API server.

The UI builds the "Add connection" form from ``GET /ui/connections/hook_meta``; this test starts
Airflow's own FastAPI app (core API, SQLite metadata database of the test Airflow home) and reads
that route, so the form is checked as served from the provider info, not as declared.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_mysql_cdc.get_provider_info import get_provider_info

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient` is deprecated"),
]


@pytest.fixture
def hook_meta(airflow_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The ``mysql_cdc`` entry of ``/ui/connections/hook_meta`` (every request is an admin's: the simple
    auth manager's ``all_admins`` mode; the route answers 401 without a user)."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True")
    purge_cached_app()
    try:
        with TestClient(create_app("core")) as client:
            response = client.get("/ui/connections/hook_meta")
        assert response.status_code == 200, response.text[-2000:]
        entries = [entry for entry in response.json() if entry["connection_type"] == "mysql_cdc"]
        assert len(entries) == 1, [entry["connection_type"] for entry in response.json()]
        yield entries[0]
    finally:
        purge_cached_app()


def test_the_api_server_serves_our_connection_form(hook_meta: dict[str, Any]) -> None:
    declared = get_provider_info()["connection-types"][0]
    assert hook_meta["hook_class_name"] == declared["hook-class-name"]
    assert hook_meta["hook_name"] == "MySQL CDC"

    standard = hook_meta["standard_fields"]
    assert standard["url_schema"]["title"] == "Default database (optional)"
    for field, placeholder in declared["ui-field-behaviour"]["placeholders"].items():
        assert standard[field]["placeholder"] == placeholder
        assert standard[field]["hidden"] is False

    extra = hook_meta["extra_fields"]
    assert set(extra) == set(declared["conn-fields"])
    for name, field in declared["conn-fields"].items():
        assert extra[name]["schema"]["title"] == field["label"]
        assert extra[name]["schema"]["type"] == field["schema"]["type"]
        assert extra[name]["description"] == field.get("description")
        assert extra[name]["value"] == field["schema"].get("default")
    assert extra["ssl_mode"]["value"] == "PREFERRED" and extra["connect_timeout"]["value"] == 10
