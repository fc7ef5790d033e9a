"""The apply job's Spark session and Iceberg catalog: checks before anything is applied, commit
summary properties, and Java errors as short messages (URL credentials masked). No Airflow import."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_provider_mysql_cdc.apply.plan import quote
from airflow_provider_mysql_cdc.errors import ConfigurationError, WarehouseUnreachableError

#: Held while PySpark's callback server is started (it checks, then starts).
_CALLBACK_SERVER_START = threading.Lock()

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def table_exists(spark: SparkSession, name: str) -> bool:
    """Whether the catalog has table ``name`` (``catalog.namespace.table``, parts quoted where needed).

    One call into the JVM: ``DESCRIBE TABLE`` of a table that does not exist raised a Java exception that
    PySpark converts at some 25 ms, and of one that exists analysed the whole table."""
    return bool(spark.catalog.tableExists(name))


def snapshot_summary(jvm: Any, snapshot: Any) -> tuple[dict[str, str], int | None]:
    """An Iceberg snapshot's summary properties and its parent's id (None for a first snapshot), read in
    one call into the JVM: the snapshot's JSON (``SnapshotParser.toJson``). Reading the Java map through
    Py4J costs a round trip per entry, some 30 ms for a MERGE's summary."""
    document = json.loads(jvm.org.apache.iceberg.SnapshotParser.toJson(snapshot))
    summary = {str(key): str(value) for key, value in document.get("summary", {}).items()}
    summary.pop("operation", None)  # the JSON's summary carries the operation, the snapshot's map does not
    parent = document.get("parent-snapshot-id")
    return summary, None if parent is None else int(parent)


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether a failed MERGE or CREATE lost to a concurrent commit (Iceberg refused to commit it)."""
    text = str(exc)
    return any(
        marker in text
        for marker in ("ValidationException", "CommitFailedException", "Found conflicting", "conflicting files")
    )


def mask_userinfo(text: str) -> str:
    """``scheme://user:secret@host`` -> ``scheme://***@host``."""
    return re.sub(r"(?<=://)[^/@\s]+@", "***@", text)


def java_error_summary(exc: BaseException) -> str:
    """The first line of an exception's message and its root cause, without the JVM stack trace that
    Py4J puts into the text of Java exceptions (URL credentials masked)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line.removeprefix(": ").strip() for line in lines if line and not line.startswith("at ")]
    lines = [line for line in lines if not line.startswith(("An error occurred while calling", "..."))]
    if not lines:
        return type(exc).__name__
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    summary = lines[0] if not causes or causes[-1] == lines[0] else f"{lines[0]} (caused by {causes[-1]})"
    return mask_userinfo(summary)


def require_reachable_catalog(spark: SparkSession, catalog: str) -> None:
    """List the catalog's namespaces once, before any table is touched; an unreachable catalog or
    warehouse raises :class:`WarehouseUnreachableError` (a Hadoop warehouse directory that does not
    exist yet is fine: the first apply creates it)."""
    try:
        spark.sql(f"SHOW NAMESPACES IN {quote(catalog)}").collect()
    except Exception as exc:
        if "NoSuchNamespaceException" in str(exc):
            return
        prefix = f"spark.sql.catalog.{catalog}"
        settings = [
            f"{key} {mask_userinfo(str(value))}"
            for key in ("type", "uri", "warehouse")
            if (value := spark.conf.get(f"{prefix}.{key}", None))
        ]
        raise WarehouseUnreachableError(
            f"cannot reach the Iceberg catalog {catalog!r} ({', '.join(settings) or 'no type, uri or warehouse set'}): "
            f"{java_error_summary(exc)}. Nothing was applied: check the catalog's uri or warehouse, the network "
            "and the catalog's credentials, then retry"
        ) from None


def with_commit_properties(spark: SparkSession, properties: dict[str, str], action: Callable[[], object]) -> None:
    """Run ``action`` so that every Iceberg commit it makes carries ``properties`` in its summary.

    Iceberg keeps them in a JVM thread-local (``CommitMetadata.withCommitProperties``); PySpark's
    pinned-thread mode runs the Python callable on the JVM thread that called it, so SQL issued from
    the callable commits with the properties.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    assert gateway is not None and jvm is not None
    with _CALLBACK_SERVER_START:  # tables applied at the same time must not start two
        ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    failure: list[BaseException] = []

    class _Callable:
        def call(self) -> None:
            try:
                action()
            except BaseException as exc:  # kept to re-raise the Python exception itself
                failure.append(exc)
                raise

        class Java:
            implements = ["java.util.concurrent.Callable"]

    jprops = jvm.java.util.HashMap()
    for key, value in properties.items():
        jprops.put(key, value)
    runtime_exception = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    try:
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(jprops, _Callable(), runtime_exception)
    except Exception:
        if failure:
            raise failure[0] from None
        raise


#: The Spark property of the shuffles' partition count (Spark's default: 200).
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: Shuffle partitions per core the apply gives a local master whose settings name none.
LOCAL_SHUFFLE_PARTITIONS_PER_CORE = 2


def local_shuffle_partitions(master: str, cores: int) -> int | None:
    """The shuffle partitions for a job on ``master`` with ``cores`` cores when its settings name none:
    two per core on a local master (its cores are all there is), None (Spark's default) elsewhere."""
    if not master.startswith("local"):
        return None
    return max(2, LOCAL_SHUFFLE_PARTITIONS_PER_CORE * cores)


def configure_shuffle_partitions(spark: SparkSession) -> None:
    """Fewer shuffle partitions on a local master, unless the application or the session set them.

    Every task of a MERGE's target scan writes one shuffle partition per ``spark.sql.shuffle.partitions``:
    with Spark's 200 on two cores, a 10,000-change MERGE took 1.13 s into 100,000 rows and 1.09 s into
    1,000,000, against 0.91 s and 0.89 s with 4 (``benchmarks/apply.py --shuffle-partitions``)."""
    if spark.conf.get(SHUFFLE_PARTITIONS, None) is not None:
        return
    context = spark.sparkContext
    partitions = local_shuffle_partitions(str(context.master), int(context.defaultParallelism))
    if partitions is not None:
        spark.conf.set(SHUFFLE_PARTITIONS, str(partitions))


def configure_catalog_cache(spark: SparkSession, catalog: str) -> None:
    """Keep loaded tables pinned for the whole job (refreshed explicitly when a state is read)."""
    prefix = f"spark.sql.catalog.{catalog}"
    if str(spark.conf.get(f"{prefix}.cache-enabled", "true")).lower() == "false":
        raise ConfigurationError(
            f"{prefix}.cache-enabled=false: the apply pins each table while it plans and merges, which needs "
            "the catalog's table cache; remove that setting for the apply job"
        )
    spark.conf.set(f"{prefix}.cache.expiration-interval-ms", "-1")
