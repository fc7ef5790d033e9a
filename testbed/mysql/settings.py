"""Server settings of a local instance: the defaults, which options may be overridden, and how a
setting becomes a ``mysqld`` option.

Defaults (each can be overridden with ``--set``/``settings``): ``gtid_mode=ON``,
``enforce_gtid_consistency=ON``, ``log_bin=ON`` (``OFF`` becomes ``--disable-log-bin``; any other
value is the binlog basename), ``binlog_format=ROW``, ``binlog_row_image=FULL``,
``binlog_row_metadata=FULL`` (without it, row events carry no column names),
``innodb_buffer_pool_size=128M``, ``performance_schema=OFF``, ``mysqlx=OFF``,
``secure_file_priv=NULL`` (the compiled-in default directory does not exist, so mysqld would refuse
to start; ``NULL`` disables file import/export) and ``skip_name_resolve=ON``. ``server_id`` may
also be given in the settings (e.g. ``server_id=0`` to test a misconfigured server). The paths,
port and bind address are managed by the instance and cannot be overridden.

Other MySQL 9.x notes: ``RESET MASTER`` is gone (use ``RESET BINARY LOGS AND GTIDS``), and the
server's ``@@mysqlx`` variable does not exist once the X plugin is off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from testbed.mysql.errors import LocalMySQLError

DEFAULT_SETTINGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "gtid_mode": "ON",
        "enforce_gtid_consistency": "ON",
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "innodb_buffer_pool_size": "128M",
        "performance_schema": "OFF",
        "mysqlx": "OFF",
        "secure_file_priv": "NULL",
        "skip_name_resolve": "ON",
    }
)
#: Options the instance sets itself; ``--set`` may not override them.
MANAGED_OPTIONS: Final = frozenset(
    {
        "basedir",
        "bind_address",
        "character_sets_dir",
        "datadir",
        "lc_messages_dir",
        "log_error",
        "pid_file",
        "plugin_dir",
        "port",
        "socket",
        "user",
    }
)
#: Options that must already be given to ``--initialize`` (they fix on-disk formats).
INITIALIZE_OPTIONS: Final = frozenset(
    {
        "lower_case_table_names",
        "innodb_page_size",
        "innodb_data_file_path",
        "innodb_checksum_algorithm",
        "innodb_undo_directory",
        "innodb_log_group_home_dir",
    }
)
_OFF_VALUES: Final = frozenset({"OFF", "0", "FALSE", "NO", "DISABLED"})
_ON_VALUES: Final = frozenset({"ON", "1", "TRUE", "YES", "ENABLED"})


def normalize_settings(settings: Mapping[str, str | int | bool] | None) -> dict[str, str]:
    """Overrides with names as ``lower_snake`` and values as strings (``True``/``False`` -> ``ON``/``OFF``);
    raises for invalid or managed option names."""
    result: dict[str, str] = {}
    for key, value in (settings or {}).items():
        name = key.strip().lower().replace("-", "_")
        if not re.fullmatch(r"[a-z][a-z0-9_.]*", name):
            raise LocalMySQLError(f"invalid server option name {key!r}")
        if name in MANAGED_OPTIONS:
            raise LocalMySQLError(f"{name} is managed by testbed.mysql and cannot be overridden")
        if isinstance(value, bool):
            result[name] = "ON" if value else "OFF"
        else:
            result[name] = str(value)
    return result


def _option(key: str, value: str) -> str:
    return f"--{key.replace('_', '-')}={value}"


def server_options(settings: Mapping[str, str], binlog_basename: Path) -> list[str]:
    """``mysqld`` options for effective settings; ``log_bin=ON`` writes to ``binlog_basename``."""
    options: list[str] = []
    for key, value in settings.items():
        if key == "log_bin":
            if value.upper() in _OFF_VALUES:
                options.append("--disable-log-bin")
            elif value.upper() in _ON_VALUES:
                options.append(f"--log-bin={binlog_basename}")
            else:
                options.append(f"--log-bin={value}")
        else:
            options.append(_option(key, value))
    return options


def initialize_options(settings: Mapping[str, str]) -> list[str]:
    """The options among effective settings that ``mysqld --initialize`` must already be given."""
    return [_option(key, value) for key, value in settings.items() if key in INITIALIZE_OPTIONS]
