"""Real Airflow services for a test: api-server, scheduler, dag-processor and triggerer of the shared
venv, on their own AIRFLOW_HOME (SQLite metadata database, LocalExecutor, simple auth manager).

A test writes its DAG files into :attr:`AirflowServices.dags_folder`, then drives Airflow the way a
user does: through the REST API the UI calls (:class:`AirflowRestClient`, token from ``POST
/auth/token`` like the UI's login form) and the ``airflow`` CLI on the same home
(:meth:`AirflowServices.cli`). Connections are ``AIRFLOW_CONN_*`` variables of the services'
environment only (never argv). Every process is stopped by its PID when the context ends.

What Airflow 3.3 needs for this, found by running it:

* SQLite with the LocalExecutor is accepted (no check refuses the pair any more); the task processes
  never open the database (they talk to the api-server's execution API), so the writers are the four
  services. The database file is put in WAL mode so the api-server can read while the scheduler writes.
* Workers reach the execution API at ``[core] execution_api_server_url`` (default
  ``http://localhost:8080/execution/``): with a free port it must be set, with ``[api] base_url``.
* The api-server signs the task tokens and the scheduler's workers present them: all services must
  share ``[api_auth] jwt_secret`` (left at its default, each process would draw its own).
* The simple auth manager reads the users' passwords from ``[core] simple_auth_manager_passwords_file``;
  writing that file before the api-server starts gives a known password without printing one.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.mysql_servers import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = Path(sys.executable).with_name("airflow")
#: The services a test gets, by name: the ``airflow`` sub-command and its arguments.
SERVICES: Mapping[str, tuple[str, ...]] = {
    "api-server": ("api-server",),
    "scheduler": ("scheduler",),
    "dag-processor": ("dag-processor",),
    "triggerer": ("triggerer",),
}
#: Run states after which a run does not change by itself.
FINISHED_RUN_STATES = frozenset({"success", "failed"})
ADMIN_USER = "admin"
POLL_SECONDS = 0.5

T = TypeVar("T")


class ServicesTimeout(AssertionError):
    """Raised when something a test waits for did not happen before its deadline (the message holds the
    services' log tails)."""


def service_environment(
    home: Path, port: int, connections: Mapping[str, str], settings: Mapping[str, str]
) -> dict[str, str]:
    """The environment of every service and CLI call on ``home``: this process's environment without its
    Airflow settings and connections, then the home's settings, ``settings`` (``AIRFLOW__...`` names)
    and ``connections`` (conn id -> JSON)."""
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_")) and name != "AIRFLOW_HOME"
    }
    base_url = f"http://127.0.0.1:{port}"
    home_settings = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base_url}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        # New DAG files are found within seconds; a file is parsed again at most every 30 s.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__OPENLINEAGE__DISABLED": "True",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), inherited.get("PYTHONPATH", "")])),
    }
    conns = {f"AIRFLOW_CONN_{conn_id.upper()}": conn_json for conn_id, conn_json in connections.items()}
    return {**inherited, **home_settings, **settings, **conns}


class AirflowRestClient:
    """The public REST API (``/api/v2``) with a bearer token obtained like the UI's login form does."""

    def __init__(self, base_url: str, password: str) -> None:
        self.base_url = base_url
        self._password = password
        self._http = httpx.Client(base_url=base_url, timeout=60.0)
        self._token: str | None = None

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def token(self) -> str:
        """An access token for the admin user (``POST /auth/token``)."""
        if self._token is None:
            response = self._http.post("/auth/token", json={"username": ADMIN_USER, "password": self._password})
            assert response.status_code == 201, f"POST /auth/token: {response.status_code} {response.text}"
            self._token = str(response.json()["access_token"])
        return self._token

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One authenticated request to ``/api/v2{path}``; the response whatever its status."""
        headers = {"Authorization": f"Bearer {self.token()}"}
        return self._http.request(method, f"/api/v2{path}", headers=headers, **kwargs)

    def call(self, method: str, path: str, expected: int = 200, **kwargs: Any) -> Any:
        """One authenticated request that must answer ``expected``; its JSON body."""
        response = self.request(method, path, **kwargs)
        assert response.status_code == expected, f"{method} {path}: {response.status_code} {response.text[:2000]}"
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        """``GET /api/v2{path}`` (200) with query ``params``."""
        return self.call("GET", path, params=params)

    def health(self) -> dict[str, Any] | None:
        """``/api/v2/monitor/health`` (no token needed); None while the api-server does not answer."""
        try:
            response = self._http.get("/api/v2/monitor/health", timeout=5.0)
        except httpx.TransportError:
            return None
        return dict(response.json()) if response.status_code == 200 else None

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """One DAG run as the API shows it."""
        return dict(self.get(f"/dags/{dag_id}/dagRuns/{run_id}"))

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        """Every run of ``dag_id``, oldest logical date first."""
        return list(self.get(f"/dags/{dag_id}/dagRuns", order_by="logical_date", limit=100)["dag_runs"])

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The task instances of one run."""
        return list(self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", limit=100)["task_instances"])

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """What a task pushed (deserialized by the API: ``deserialize=true``)."""
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}"
        return self.call("GET", path, params={"deserialize": "true", "stringify": "false"})["value"]


@dataclass
class AirflowServices:
    """Running Airflow services on one home, and how to reach them."""

    home: Path
    env: dict[str, str]
    api: AirflowRestClient
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def dags_folder(self) -> Path:
        """Where the dag-processor looks for DAG files."""
        return self.home / "dags"

    def log_file(self, service: str) -> Path:
        """Where a service's standard output and error go."""
        return self.home / "service-logs" / f"{service}.log"

    def log_tails(self, lines: int = 40) -> str:
        """The last ``lines`` lines of every service's log, for a failure message."""
        parts = []
        for service in self.processes:
            text = self.log_file(service).read_text(errors="replace") if self.log_file(service).exists() else ""
            parts.append(f"--- {service} (last {lines} lines) ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1) -> str:
        """A task try's log file as the worker wrote it (empty when there is none)."""
        found = sorted(
            (self.home / "logs").glob(f"dag_id={dag_id}/run_id={run_id}/task_id={task_id}/**/attempt={try_number}.log")
        )
        if map_index >= 0:
            found = [path for path in found if f"map_index={map_index}" in str(path)]
        return "\n".join(path.read_text(errors="replace") for path in found)

    def cli(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """``airflow *args`` on this home and environment (its result whatever the exit code)."""
        return subprocess.run(
            [str(AIRFLOW), *args], env=self.env, capture_output=True, text=True, check=False, timeout=timeout
        )

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float) -> T:
        """Poll ``probe`` until it returns something other than None (or False); fail after ``timeout``
        seconds naming ``what``, with the services' log tails. A service that exited fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            found = probe()
            if found is not None and found is not False:
                return found
            dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
            if dead:
                raise ServicesTimeout(f"while waiting for {what}, service(s) exited: {dead}\n{self.log_tails()}")
            if time.monotonic() >= deadline:
                raise ServicesTimeout(f"timed out after {timeout:.0f} s waiting for {what}\n{self.log_tails()}")
            time.sleep(POLL_SECONDS)

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Wait until the dag-processor has parsed ``dag_id``; a DAG file that failed to import fails the
        wait at once with its import error."""

        def parsed() -> dict[str, Any] | None:
            response = self.api.request("GET", f"/dags/{dag_id}")
            if response.status_code == 200:
                return dict(response.json())
            errors = self.api.get("/importErrors")["import_errors"]
            if errors:
                raise AssertionError(f"DAG files failed to import: {json.dumps(errors, indent=1)[:4000]}")
            return None

        return self.wait_for(f"DAG {dag_id!r} to be parsed", parsed, timeout)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300.0) -> dict[str, Any]:
        """Wait until a run is finished (success or failed); the run as the API shows it."""

        def finished() -> dict[str, Any] | None:
            run = self.api.dag_run(dag_id, run_id)
            return run if run["state"] in FINISHED_RUN_STATES else None

        return self.wait_for(f"run {run_id!r} of {dag_id!r} to finish", finished, timeout)

    def wait_for_backfill(self, backfill_id: int, timeout: float = 600.0) -> dict[str, Any]:
        """Wait until a backfill is completed (the scheduler sets ``completed_at`` once its runs ended)."""

        def completed() -> dict[str, Any] | None:
            backfill = dict(self.api.get(f"/backfills/{backfill_id}"))
            return backfill if backfill["completed_at"] else None

        return self.wait_for(f"backfill {backfill_id} to complete", completed, timeout)


def _prepare_home(home: Path, env: Mapping[str, str], password: str) -> None:
    """Folders, the users' passwords file and a migrated metadata database (in WAL mode)."""
    for folder in ("dags", "logs", "service-logs"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({ADMIN_USER: password}) + "\n")
    passwords.chmod(0o600)
    migrated = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=dict(env), capture_output=True, text=True, check=False, timeout=300
    )
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    database = sqlite3.connect(home / "airflow.db")
    try:
        database.execute("PRAGMA journal_mode=WAL")  # persists in the file
    finally:
        database.close()


def _start(services: AirflowServices, name: str) -> None:
    log = services.log_file(name).open("ab")
    try:
        services.processes[name] = subprocess.Popen(
            [str(AIRFLOW), *SERVICES[name]],
            env=services.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=services.home,
            start_new_session=True,  # its own process group: its workers and tasks are stopped with it
        )
    finally:
        log.close()


def stop_process(process: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """Terminate a service (its process group: workers, task supervisors, spark-submit), wait, kill."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader exited; whatever it left in its group is stopped too.
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        break
    process.poll()


@contextmanager
def airflow_services(
    home: Path,
    connections: Mapping[str, str] | None = None,
    settings: Mapping[str, str] | None = None,
    services: tuple[str, ...] = tuple(SERVICES),
    start_timeout: float = 180.0,
) -> Iterator[AirflowServices]:
    """Start ``services`` on a fresh ``home`` (``connections``: conn id -> connection JSON, given to
    them as ``AIRFLOW_CONN_*``; ``settings``: more ``AIRFLOW__SECTION__KEY`` variables); wait until the
    api-server answers and every started job reports healthy; stop them all (by PID) at the end."""
    port = free_port()
    env = service_environment(home, port, connections or {}, settings or {})
    password = secrets.token_urlsafe(16)
    _prepare_home(home, env, password)
    running = AirflowServices(home=home, env=env, api=AirflowRestClient(f"http://127.0.0.1:{port}", password))
    try:
        for name in services:
            _start(running, name)
        expected = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}
        wanted = [component for service, component in expected.items() if service in services]

        def healthy() -> dict[str, Any] | None:
            health = running.api.health()
            if health is None:
                return None
            statuses = {part: health.get(part, {}).get("status") for part in wanted}
            return health if all(status == "healthy" for status in statuses.values()) else None

        running.wait_for("the services to be healthy", healthy, start_timeout)
        yield running
    finally:
        running.api.close()
        for process in reversed(list(running.processes.values())):
            stop_process(process)
