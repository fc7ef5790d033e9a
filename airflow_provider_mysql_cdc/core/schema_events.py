"""What a window's DDL did to a table, as the apply must replay it (pure).

Capture turns each DDL statement of a selected table into :class:`SchemaEvent` records, in binlog
order, each at its own ``_cdc_seq`` among the window's row changes. They travel in the window's
manifest; the apply replays them on the target: columns added (with the value MySQL gave the rows
that existed), dropped, renamed or widened, the table truncated or reset (dropped, or created anew),
or ``rebuild``: the target cannot follow this change exactly, so the table's rows from this point
on are not applied and the table waits for a fresh snapshot.

Backfill values are staged Python values (see :mod:`airflow_provider_mysql_cdc.core.types`) encoded
as JSON by :func:`encode_value`, tagged so that the apply gets the same Python value back.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from airflow_provider_mysql_cdc.errors import ConfigurationError

COLUMN_ADDED = "column_added"
COLUMN_DROPPED = "column_dropped"
COLUMN_RENAMED = "column_renamed"
COLUMN_RETYPED = "column_retyped"
TRUNCATED = "truncated"
RESET = "reset"
REBUILD = "rebuild"
EVENT_KINDS = frozenset({COLUMN_ADDED, COLUMN_DROPPED, COLUMN_RENAMED, COLUMN_RETYPED, TRUNCATED, RESET, REBUILD})

#: A pipeline's answer to a change a target cannot follow: ``rebuild`` the table from a fresh snapshot in
#: the next run (automatically; readers see the old table until the new one replaces it in one commit),
#: or ``stop`` the table with :class:`~airflow_provider_mysql_cdc.errors.RebuildPendingError` until
#: someone re-snapshots it. The other tables go on either way.
SCHEMA_CHANGE_REBUILD = "rebuild"
SCHEMA_CHANGE_STOP = "stop"
SCHEMA_CHANGE_POLICIES = (SCHEMA_CHANGE_REBUILD, SCHEMA_CHANGE_STOP)


def require_schema_change_policy(policy: str) -> str:
    """``policy`` when it is one of :data:`SCHEMA_CHANGE_POLICIES`; ConfigurationError otherwise."""
    if policy not in SCHEMA_CHANGE_POLICIES:
        raise ConfigurationError(
            f"schema_change_policy must be one of {', '.join(SCHEMA_CHANGE_POLICIES)}, not {policy!r}"
        )
    return policy


@dataclass(frozen=True)
class SchemaEvent:
    """One change a DDL statement made to one table, at ``seq`` in the window."""

    database: str
    table: str
    seq: int
    gtid: str
    #: One of :data:`EVENT_KINDS`.
    kind: str
    #: The column's identity (stable across renames; a dropped and re-added name gets a new one).
    column_id: int | None = None
    #: The column's name after the event (the new name of a rename).
    name: str | None = None
    #: A renamed column's name before the event.
    old_name: str | None = None
    #: ``column_added``: the value every row existing at this point got, :func:`encode_value`'s text.
    backfill: str | None = None
    #: The table's schema version after the event (None after ``rebuild`` and for a dropped table).
    schema_version: int | None = None
    #: The DDL statement; for ``rebuild``, why the target cannot follow, then the statement.
    reason: str = ""
    #: ``rebuild`` only: the named error the table stops with when no snapshot can rebuild it as it is
    #: (``TableWithoutKeyError``: the table lost its primary key); "" when a fresh snapshot can.
    error_class: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"unknown schema event kind {self.kind!r}")

    @property
    def table_name(self) -> str:
        """``db.table``."""
        return f"{self.database}.{self.table}"


def encode_value(value: Any) -> str:
    """A staged value as tagged JSON (see :func:`decode_value`)."""
    return json.dumps(_tagged(value), sort_keys=True, separators=(",", ":"))


def _tagged(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, bytes | bytearray):
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return {"timestamp": value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()}
        return {"datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"duration_us": str((value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds)}
    if isinstance(value, list | tuple):
        return {"list": [_tagged(item) for item in value]}
    raise TypeError(f"no encoding for a staged value of type {type(value).__name__}")


def decode_value(text: str) -> Any:
    """The staged value :func:`encode_value` encoded."""
    return _untagged(json.loads(text))


def _untagged(data: Any) -> Any:
    if data is None or isinstance(data, bool | str):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"not an encoded staged value: {data!r}")
    (tag, raw), *_ = data.items()
    if tag == "int":
        return int(raw)
    if tag == "float":
        return float.fromhex(raw)
    if tag == "decimal":
        return Decimal(raw)
    if tag == "bytes":
        return base64.b64decode(raw)
    if tag == "timestamp":
        return dt.datetime.fromisoformat(raw).replace(tzinfo=dt.timezone.utc)
    if tag == "datetime":
        return dt.datetime.fromisoformat(raw)
    if tag == "date":
        return dt.date.fromisoformat(raw)
    if tag == "duration_us":
        return dt.timedelta(microseconds=int(raw))
    if tag == "list":
        return [_untagged(item) for item in raw]
    raise ValueError(f"unknown staged value tag {tag!r}")
