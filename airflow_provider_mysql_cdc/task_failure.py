"""How this package's errors end an Airflow task: terminal ones without retries, transient ones retried.

Airflow decides by type: a task that raises :class:`AirflowFailException` fails at once, whatever its
``retries``; any other exception makes it ``up_for_retry`` while retries are left. Every operator and
sensor of the package marks its ``execute`` (and ``execute_complete``) with
:func:`terminal_errors_fail_task`:

* a :class:`~airflow_provider_mysql_cdc.errors.TerminalCdcError` (a person must change a setting,
  grant, connection or input) leaves the task as an exception that is both its own class and an
  ``AirflowFailException``, so the task fails without burning retries, and callbacks and tests can
  still tell ``BinlogPurgedError`` from ``MissingPrivilegeError`` by ``isinstance``;
* a :class:`~airflow_provider_mysql_cdc.errors.TransientCdcError` (server unreachable, connection
  lost, window not closed yet) and any other exception pass unchanged, so retries apply.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_mysql_cdc.errors import TerminalCdcError

Params = ParamSpec("Params")
Result = TypeVar("Result")


#: One failing subclass per error class (made once, so equal errors have equal types).
_FAILING_CLASSES: dict[type[TerminalCdcError], type[TerminalCdcError]] = {}


def _failing_class(error_class: type[TerminalCdcError]) -> type[TerminalCdcError]:
    """``error_class`` that Airflow also reads as :class:`AirflowFailException` (same name and module,
    so logs, tracebacks and Airflow's error serialisation show the package's class)."""
    if error_class not in _FAILING_CLASSES:
        namespace = {"__module__": error_class.__module__, "__qualname__": error_class.__qualname__}
        _FAILING_CLASSES[error_class] = type(error_class.__name__, (error_class, AirflowFailException), namespace)
    return _FAILING_CLASSES[error_class]


def as_task_failure(error: TerminalCdcError) -> TerminalCdcError:
    """``error`` itself, re-typed so that Airflow fails the task without retries (message, attributes,
    cause and traceback unchanged)."""
    if not isinstance(error, AirflowFailException):
        error.__class__ = _failing_class(type(error))
    return error


def terminal_errors_fail_task(method: Callable[Params, Result]) -> Callable[Params, Result]:
    """Decorate a task method: a :class:`TerminalCdcError` escaping it fails the task without retries."""

    @functools.wraps(method)
    def run(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        try:
            return method(*args, **kwargs)
        except TerminalCdcError as error:
            as_task_failure(error)
            raise

    return run
