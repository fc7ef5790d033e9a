"""A table's staged schema versions during one window, and its row images made ready to stage (no Airflow
import).

A :class:`TableVersion` is one table schema as the binlog's table map describes it, under the column
identities the schema tracker knows, with its decoders. :func:`complete_update` turns an update's
before and after images into the after image the target should end with: columns a partial after
image lacks are taken from the before image when it has them (an update leaves them as they were),
and JSON diffs are applied to the before image's document; what neither image has stays marked in the
row's ``_cdc_partial`` map for the apply to take from the target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from airflow_provider_mysql_cdc.core.staging import SchemaVersionInfo
from airflow_provider_mysql_cdc.core.types import ColumnSpec
from airflow_provider_mysql_cdc.decoding.binlog_rows import RowConverter
from airflow_provider_mysql_cdc.decoding.compiled_rows import CompiledRowDecoder
from airflow_provider_mysql_cdc.decoding.json_diff import apply_json_diffs, diffs_from_text
from airflow_provider_mysql_cdc.errors import JsonDiffError, TerminalCdcError

#: A converted row image (the table's values, then ``_cdc_invalid_values``) and its ``_cdc_partial``.
Image = tuple[tuple[Any, ...], dict[str, str] | None]


@dataclass
class TableVersion:
    """One staged schema version of a table, with what reads its row images."""

    specs: tuple[ColumnSpec, ...]
    column_ids: tuple[int, ...]
    converter: RowConverter
    decoder: CompiledRowDecoder | None
    schema: pa.Schema
    schema_version: int
    #: Column names, and the positions of the primary key's columns, in table order.
    names: tuple[str, ...]
    key_positions: tuple[int, ...]
    info: SchemaVersionInfo

    def position(self, name: str) -> int:
        """The position of column ``name``."""
        return self.names.index(name)


def differ(before: tuple[Any, ...], after: tuple[Any, ...], positions: tuple[int, ...], names: tuple[str, ...]) -> bool:
    """Whether two converted images differ in a column at ``positions`` (two invalid dates, both staged
    as NULL, differ when their texts in ``_cdc_invalid_values``, the images' last item, do)."""
    for position in positions:
        if before[position] != after[position]:
            return True
        if before[position] is None and (before[-1] or after[-1]):
            name = names[position]
            if (before[-1] or {}).get(name) != (after[-1] or {}).get(name):
                return True
    return False


def complete_update(version: TableVersion, before: Image, after: Image, where: str) -> Image:
    """The after image of an update, completed from its before image where that one has the columns
    the after image lacks, with JSON diffs applied to the before image's document (see the module
    docstring). Raises :class:`TerminalCdcError` when a diff does not fit its document."""
    values_after, partial_after = after
    if partial_after is None:
        return after
    values_before, partial_before = before
    absent_before = partial_before or {}
    values = list(values_after)
    invalid_after = dict(values_after[-1] or {})
    still: dict[str, str] = {}
    for name, staged in partial_after.items():
        if name in absent_before:
            still[name] = staged  # neither image has it: the target has it
            continue
        position = version.position(name)
        if staged == "":
            values[position] = values_before[position]
            if name in (values_before[-1] or {}):
                invalid_after[name] = (values_before[-1] or {})[name]
            continue
        document = values_before[position]
        if document is None:
            raise TerminalCdcError(f"{where}.{name}: a partial JSON update of a NULL document")
        try:
            values[position] = apply_json_diffs(document, diffs_from_text(staged))
        except JsonDiffError as exc:
            raise TerminalCdcError(
                f"{where}.{name}: the partial JSON update does not fit its document ({exc})"
            ) from None
    values[-1] = invalid_after or None
    return tuple(values), still or None


def fill_defaults(version: TableVersion, image: Image, defaults: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """An insert's image with the columns it lacks set to their defaults; None when a default is not
    known (``defaults`` maps the column names whose defaults are known to their staged values)."""
    values, partial = image
    if partial is None:
        return values
    completed = list(values)
    for name, staged in partial.items():
        if staged != "" or name not in defaults:
            return None
        completed[version.position(name)] = defaults[name]
    return tuple(completed)
