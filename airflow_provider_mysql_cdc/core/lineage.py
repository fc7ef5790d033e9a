"""OpenLineage names of what a pipeline reads and writes, by the naming spec
(https://openlineage.io/docs/spec/naming): MySQL tables, staging locations and Iceberg tables.

A dataset is a ``(namespace, name)`` pair: the namespace names the data source (a server, a bucket,
a file system), the name the dataset inside it. No name or namespace ever holds a user, password or
query string: the user info of a URI and its query are dropped.

Pure: strings in, :class:`DatasetName` out; ``operators/lineage.py`` turns them into OpenLineage objects.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Object stores whose URI authority is a bucket: ``{scheme}://{bucket}`` namespaces, the object key as
#: the name. Hadoop's ``s3a``/``s3n`` name the same buckets as ``s3``.
BUCKET_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs"}
#: Azure schemes whose authority is ``container@account.host`` (the ``@`` is no user info).
AZURE_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})
#: The Iceberg catalog type Spark uses when the apply is given a ``warehouse`` and no ``catalog_conf``.
HADOOP_CATALOG = "hadoop"

_QUOTED_PART = re.compile(r"`((?:[^`]|``)*)`")


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset identity: the data source's ``namespace`` and the dataset's ``name`` in it."""

    namespace: str
    name: str


@dataclass(frozen=True)
class IcebergTableNames:
    """The dataset of an Iceberg table, and its catalog name when the dataset is its storage location.

    Spark's OpenLineage integration names an Iceberg table by its location (``dataset``) and gives the
    catalog's name of it as a ``SymlinksDatasetFacet`` of type ``TABLE`` (``table``); the apply does the
    same where it can tell the location without asking the catalog (Hadoop catalogs).
    """

    dataset: DatasetName
    table: DatasetName | None = None


def mysql_dataset(host: str, port: int, table_name: str) -> DatasetName:
    """A MySQL table ``db.table`` of the server at ``host:port``: ``mysql://{host}:{port}``, ``{db}.{table}``.

    An empty host (a connection through a Unix socket) is ``localhost``; an IPv6 address is bracketed.
    """
    host = host.strip() or "localhost"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return DatasetName(f"mysql://{host.lower()}:{int(port)}", table_name)


def _without_user_info(authority: str) -> str:
    """``user:password@host:port`` -> ``host:port``."""
    return authority.rpartition("@")[2]


def _path(path: str) -> str:
    """A path without query, fragment, repeated or trailing slashes (``/`` stays)."""
    path = path.split("?", 1)[0].split("#", 1)[0]
    return posixpath.normpath(path) if path else "/"


def location_dataset(uri: str) -> DatasetName:
    """The dataset of a storage location (a local path or any ``scheme://authority/path`` URI).

    * a local path or ``file:///path``: namespace ``file``, the absolute path as the name;
    * ``file://host/path``: namespace ``file://{host}``;
    * ``s3://``, ``s3a://``, ``s3n://``, ``gs://``, ``gcs://``: namespace ``s3://{bucket}`` or
      ``gs://{bucket}``, the object key (no leading slash) as the name;
    * ``abfss://container@account.dfs.core.windows.net/path`` and other Azure schemes: the authority kept whole;
    * any other scheme (``hdfs://namenode:8020/path``): namespace ``{scheme}://{authority}``, the path.
    """
    scheme, separator, rest = uri.strip().partition("://")
    if not separator:
        return DatasetName("file", _path(uri.strip()))
    scheme = scheme.lower()
    authority, _, path = rest.partition("/")
    path = _path("/" + path)
    if scheme in AZURE_SCHEMES:
        return DatasetName(f"{scheme}://{authority}", path)
    authority = _without_user_info(authority)
    if scheme == "file":
        return DatasetName("file" if authority in ("", "localhost") else f"file://{authority}", path)
    if scheme in BUCKET_SCHEMES:
        return DatasetName(f"{BUCKET_SCHEMES[scheme]}://{authority}", path.lstrip("/"))
    return DatasetName(f"{scheme}://{authority}", path)


def _location_uri(location: str) -> str:
    """A location as a URI without user info, query or trailing slash (a local path as ``file://``)."""
    dataset = location_dataset(location)
    if dataset.namespace == "file":
        return "file://" + dataset.name
    separator = "" if dataset.name.startswith("/") else "/"
    return f"{dataset.namespace}{separator}{dataset.name}".rstrip("/")


def identifier_parts(identifier: str) -> list[str]:
    """The parts of a dotted Spark identifier (``catalog.namespace.table``), each plain or backquoted: a
    backquoted part keeps its dots, and a doubled backquote in it is one (``shop.`t.x``` gives ``shop``
    and ``t.x``). Raises ValueError for an unclosed backquote or text after a closing one."""
    parts: list[str] = []
    position = 0
    while True:
        if identifier.startswith("`", position):
            match = _QUOTED_PART.match(identifier, position)
            if match is None:
                raise ValueError(f"{identifier!r} has an unclosed backquote")
            parts.append(match.group(1).replace("``", "`"))
            position = match.end()
        else:
            end = identifier.find(".", position)
            end = len(identifier) if end < 0 else end
            parts.append(identifier[position:end])
            position = end
        if position == len(identifier):
            return parts
        if identifier[position] != ".":
            raise ValueError(f"{identifier!r} has text after a backquoted part: expected a dot")
        position += 1


def _service_namespace(uri: str, scheme: str | None = None) -> str:
    """``{scheme}://{host}[:{port}]`` of a service URI (a catalog's ``uri``), without user info or path."""
    given_scheme, separator, rest = uri.strip().partition("://")
    if not separator:
        rest, given_scheme = given_scheme, ""
    authority = _without_user_info(rest.partition("/")[0].split("?", 1)[0])
    return f"{scheme or given_scheme.lower()}://{authority}"


def hadoop_table_location(warehouse: str, levels: Sequence[str]) -> str:
    """Where a Hadoop catalog on ``warehouse`` keeps the table ``namespace...table`` (``levels``):
    ``{warehouse}/{namespace...}/{table}`` (Iceberg's ``HadoopCatalog.defaultWarehouseLocation``; names
    as written, no case folding)."""
    return "/".join([warehouse.rstrip("/"), *levels])


def iceberg_table_names(
    target: str, warehouse: str | None = None, catalog_conf: Mapping[str, str] | None = None
) -> IcebergTableNames:
    """The OpenLineage names of an Iceberg target ``catalog.namespace.table`` (as the apply reports it).

    * Hadoop catalog (``warehouse`` without ``catalog_conf``, or ``catalog_conf`` ``type=hadoop``): the
      table lives at ``{warehouse}/{namespace...}/{table}``; the dataset is that location
      (:func:`location_dataset`) and ``table`` is ``{namespace}.{table}`` in the warehouse's namespace
      (its URI, a local path as ``file://``), as Spark's OpenLineage integration names it.
    * Hive catalog (``type=hive``, ``uri=thrift://host:port``): ``hive://{host}:{port}``, ``{namespace}.{table}``.
    * Another catalog with a ``uri`` (REST, Nessie): the URI's ``{scheme}://{host}:{port}``,
      ``{namespace}.{table}`` (where the table's files are is known to the catalog only).
    * Any other catalog (Glue, a ``catalog-impl``): ``iceberg://{catalog}``, ``{namespace}.{table}``.
    """
    catalog, *levels = identifier_parts(target)
    table_name = ".".join(levels)
    conf = dict(catalog_conf or {})
    catalog_type = str(conf.get("type", HADOOP_CATALOG if not conf else "")).lower()
    location_root = conf.get("warehouse") if conf else warehouse
    if catalog_type == HADOOP_CATALOG and location_root:
        location = hadoop_table_location(location_root, levels)
        return IcebergTableNames(location_dataset(location), DatasetName(_location_uri(location_root), table_name))
    uri = conf.get("uri")
    if catalog_type == "hive" and uri:
        return IcebergTableNames(DatasetName(_service_namespace(uri, "hive"), table_name))
    if uri:
        return IcebergTableNames(DatasetName(_service_namespace(uri), table_name))
    return IcebergTableNames(DatasetName(f"iceberg://{catalog}", table_name))


@dataclass(frozen=True)
class LineageDataset:
    """A dataset a task read or wrote, with what the task knows of it."""

    dataset: DatasetName
    #: The catalog's name of a dataset named by its storage location (an Iceberg table's ``TABLE`` symlink).
    table: DatasetName | None = None
    #: ``(name, type)`` of its columns, when known (a MySQL table's: their MySQL types).
    columns: tuple[tuple[str, str], ...] = ()
    #: Columns that are each a copy of the column of the same name in ``copied_from``.
    copied_columns: tuple[str, ...] = ()
    copied_from: DatasetName | None = None
    #: Rows the task wrote to it (changes, for a merge).
    rows: int | None = None


@dataclass(frozen=True)
class TaskLineage:
    """What one task run read (``inputs``) and wrote (``outputs``)."""

    inputs: tuple[LineageDataset, ...] = ()
    outputs: tuple[LineageDataset, ...] = ()


@dataclass(frozen=True)
class MySqlServer:
    """Where the source tables live (``host`` and ``port`` only: never the account)."""

    host: str
    port: int

    def table(self, table_name: str, columns: Sequence[tuple[str, str]] = ()) -> LineageDataset:
        """The source table ``db.table``."""
        return LineageDataset(mysql_dataset(self.host, self.port, table_name), columns=tuple(columns))


def staging_lineage(location: str) -> TaskLineage:
    """A task that writes to a staging location (``location``), before it knows what it reads."""
    return TaskLineage(outputs=(LineageDataset(location_dataset(location)),))


def capture_lineage(source: MySqlServer, rows_by_table: Mapping[str, Mapping[str, int]], windows: str) -> TaskLineage:
    """A capture: the tables whose changes the window staged, into the pipeline's staged windows (``windows``:
    their location)."""
    rows = sum(sum(counts.values()) for counts in rows_by_table.values())
    return TaskLineage(
        inputs=tuple(source.table(name) for name in sorted(rows_by_table)),
        outputs=(LineageDataset(location_dataset(windows), rows=rows),),
    )


def snapshot_plan_lineage(source: MySqlServer, tables: Sequence[str]) -> TaskLineage:
    """A snapshot plan: the tables whose keys it read to cut them into chunks; it writes no data."""
    return TaskLineage(inputs=tuple(source.table(name) for name in sorted(tables)))


def snapshot_chunk_lineage(source: MySqlServer, table_name: str, rows: int, snapshots: str) -> TaskLineage:
    """A snapshot chunk: one table's rows, into the pipeline's staged snapshots (``snapshots``: their location)."""
    return TaskLineage(
        inputs=(source.table(table_name),),
        outputs=(LineageDataset(location_dataset(snapshots), rows=rows),),
    )


@dataclass(frozen=True)
class AppliedTable:
    """One table of an apply run: its Iceberg target, staged columns and the changes merged."""

    table_name: str
    target: str
    #: ``(name, MySQL type)`` of the table's staged columns (its newest schema in the run).
    columns: tuple[tuple[str, str], ...] = ()
    rows: int = 0


def apply_lineage(
    source: MySqlServer | None,
    tables: Sequence[AppliedTable],
    staged: Sequence[str],
    warehouse: str | None,
    catalog_conf: Mapping[str, str] | None,
) -> TaskLineage:
    """An apply: the staged windows and snapshots it read (``staged``: their locations) and, for each
    table, its MySQL table (when the source is known) and its Iceberg target, whose every column is a
    copy of the MySQL column of the same name (the target's ``_cdc_*`` columns are the pipeline's own)."""
    inputs = [LineageDataset(location_dataset(location)) for location in staged]
    outputs = []
    for table in sorted(tables, key=lambda t: t.table_name):
        mysql = source.table(table.table_name, table.columns) if source else None
        if mysql:
            inputs.append(mysql)
        names = iceberg_table_names(table.target, warehouse, catalog_conf)
        outputs.append(
            LineageDataset(
                names.dataset,
                table=names.table,
                copied_columns=tuple(name for name, _ in table.columns) if mysql else (),
                copied_from=mysql.dataset if mysql else None,
                rows=table.rows,
            )
        )
    return TaskLineage(inputs=tuple(inputs), outputs=tuple(outputs))


def verify_lineage(
    source: MySqlServer, targets: Mapping[str, str], warehouse: str | None, catalog_conf: Mapping[str, str] | None
) -> TaskLineage:
    """A verify: each MySQL table and its Iceberg target (``targets``: ``db.table`` -> target), read and compared."""
    inputs = []
    for table_name in sorted(targets):
        names = iceberg_table_names(targets[table_name], warehouse, catalog_conf)
        inputs += [source.table(table_name), LineageDataset(names.dataset, table=names.table)]
    return TaskLineage(inputs=tuple(inputs))
