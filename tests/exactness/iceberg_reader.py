"""The independent Iceberg reader of the exactness tests: pyiceberg on the Hadoop catalog's files.

Neither Spark nor the provider's code reads the target here. A Hadoop catalog keeps a table in
``{warehouse}/{namespace}/{table}``; each commit writes ``metadata/v{N}.metadata.json`` and then
``metadata/version-hint.text`` holding ``N``. Like Iceberg's own ``HadoopTableOperations``, the
reader starts at the hinted version and takes any newer ``v{N+1}``, ``v{N+2}`` ... that exist (the hint
is written after the metadata file, so it can lag by one commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION_HINT = "version-hint.text"


@dataclass(frozen=True)
class IcebergContents:
    """A target table's current snapshot as pyiceberg reads it (position deletes applied)."""

    #: A local path, or the URI of a table in an object store.
    metadata_file: Path | str
    #: Column names of the current schema, in schema order.
    columns: tuple[str, ...]
    #: Every live row, as a dict of Python values (Arrow's ``to_pylist``).
    rows: tuple[dict[str, Any], ...]
    #: The current snapshot's summary (``{}`` before the first commit).
    summary: dict[str, str]


def table_directory(warehouse: Path, database: str, table: str) -> Path:
    """Where the Hadoop catalog keeps ``lake.{database}.{table}``."""
    return warehouse / database / table


def current_metadata_file(table_dir: Path) -> Path | None:
    """The newest ``v{N}.metadata.json`` of a table, starting from its version hint; None when the
    table does not exist."""
    metadata = table_dir / "metadata"
    hint = metadata / VERSION_HINT
    if not hint.is_file():
        return None
    version = int(hint.read_text().strip())
    while (metadata / f"v{version + 1}.metadata.json").is_file():
        version += 1
    found = metadata / f"v{version}.metadata.json"
    assert found.is_file(), f"{hint} names version {version}, but {found} does not exist"
    return found


def read_iceberg_table(warehouse: Path, database: str, table: str) -> IcebergContents | None:
    """The live rows of ``lake.{database}.{table}``, or None when the table does not exist."""

    metadata_file = current_metadata_file(table_directory(warehouse, database, table))
    if metadata_file is None:
        return None
    return read_iceberg_metadata(metadata_file)


def read_iceberg_metadata(metadata_file: Path | str, properties: Mapping[str, str] | None = None) -> IcebergContents:
    """The live rows of the table whose metadata file is ``metadata_file`` (a path, or a URI such as
    ``s3://...`` read with pyiceberg's ``properties``: ``s3.endpoint``, keys)."""
    from pyiceberg.table import StaticTable

    static = StaticTable.from_metadata(str(metadata_file), dict(properties or {}))
    columns = tuple(field.name for field in static.schema().fields)
    snapshot = static.current_snapshot()
    summary: dict[str, str] = {}
    if snapshot is not None and snapshot.summary is not None:
        summary = {str(k): str(v) for k, v in snapshot.summary.additional_properties.items()}
        summary["operation"] = str(snapshot.summary.operation.value)
    arrow = static.scan().to_arrow()
    return IcebergContents(metadata_file, columns, tuple(arrow.to_pylist()), summary)
