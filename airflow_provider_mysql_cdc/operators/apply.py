"""``SparkApplyOperator``: spark-submit the apply job for a run of windows, then record what it applied."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias, BaseHook, Connection, Context

from airflow_provider_mysql_cdc.apply.contract import ApplyReport, ApplySpec
from airflow_provider_mysql_cdc.apply.partitioning import parse_partitioning
from airflow_provider_mysql_cdc.core.freshness import freshness, newest_commit, rows_by_op
from airflow_provider_mysql_cdc.core.headroom import HEADROOM_XCOM_KEY
from airflow_provider_mysql_cdc.core.lineage import (
    AppliedTable,
    MySqlServer,
    TaskLineage,
    apply_lineage,
    identifier_parts,
)
from airflow_provider_mysql_cdc.core.spark_properties import (
    job_environment,
    secret_properties_file,
    spark_defaults_path,
    split_secret_properties,
)
from airflow_provider_mysql_cdc.errors import (
    ConfigurationError,
    MySqlCdcError,
    TerminalCdcError,
    TransientCdcError,
    error_class,
    error_named,
)
from airflow_provider_mysql_cdc.hooks.mysql_cdc import MySqlCdcHook
from airflow_provider_mysql_cdc.hooks.object_store import object_store_settings
from airflow_provider_mysql_cdc.operators.lineage import (
    OpenLineageFacets,
    staged_columns,
    staged_snapshots_uri,
    staged_windows_uri,
    with_parent_job_properties,
)
from airflow_provider_mysql_cdc.operators.run_order import (
    DEFAULT_PREVIOUS_RUN_WAIT,
    previous_run_note,
    previous_task_reader,
    wait_for_previous_run,
)
from airflow_provider_mysql_cdc.task_failure import terminal_errors_fail_task

if TYPE_CHECKING:  # pyarrow is imported when the task runs, not when a DAG is parsed
    from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings
    from airflow_provider_mysql_cdc.staging import Staging

#: The spark-submit application (``spark_apps/apply_changes.py`` runs the same ``main``).
APPLY_APPLICATION = str(Path(__file__).resolve().parents[1] / "apply" / "spark_job.py")
#: Maven coordinates of the Iceberg runtime used when neither ``jars`` nor ``packages`` is given.
ICEBERG_PACKAGE = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: Maven coordinates of Hadoop's S3A connector (pyspark 3.5's Hadoop), added to the default packages for S3.
HADOOP_AWS_PACKAGE = "org.apache.hadoop:hadoop-aws:3.3.4"


def apply_spark_conf(catalog: str, warehouse: str | None, catalog_conf: Mapping[str, str] | None) -> dict[str, str]:
    """Spark properties of the apply job: Iceberg's SQL extensions and the target catalog.

    With ``catalog_conf`` (e.g. ``{"type": "rest", "uri": "https://..."}`` or a Glue/Hive setup) the
    catalog is configured from it; otherwise a Hadoop catalog on ``warehouse``.
    """
    prefix = f"spark.sql.catalog.{catalog}"
    conf = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        # Cache entries never expire: the job pins a table while it plans and merges it (refreshing it itself).
        f"{prefix}.cache.expiration-interval-ms": "-1",
        "spark.sql.session.timeZone": "UTC",
    }
    if catalog_conf:
        conf.update({f"{prefix}.{key}": str(value) for key, value in catalog_conf.items()})
    elif warehouse:
        conf.update({f"{prefix}.type": "hadoop", f"{prefix}.warehouse": warehouse})
    else:
        raise ConfigurationError(
            f"SparkApplyOperator needs a warehouse (Hadoop catalog) or catalog_conf for catalog {catalog!r}"
        )
    return conf


def hadoop_warehouse(catalog: str, conf: Mapping[str, str]) -> str | None:
    """The warehouse of ``catalog`` when the Spark properties make it Iceberg's Hadoop catalog (``type``
    ``hadoop``, no ``catalog-impl``), else None."""
    prefix = f"spark.sql.catalog.{catalog}"
    if conf.get(prefix) != "org.apache.iceberg.spark.SparkCatalog" or f"{prefix}.catalog-impl" in conf:
        return None
    if str(conf.get(f"{prefix}.type", "")).lower() != "hadoop":
        return None
    warehouse = conf.get(f"{prefix}.warehouse")
    return str(warehouse) if warehouse else None


#: Asset alias the apply task emits its target tables' Asset events through (see :func:`iceberg_table_asset`).
DEFAULT_ASSET_ALIAS = "mysql_cdc_iceberg_tables"


def pipeline_asset(pipeline: str) -> Asset:
    """The Airflow Asset of a whole pipeline: one event per applied run, whose metadata (frontier, last
    commit time, lag, purge headroom, rows by op, tables) make the Asset's page in the Airflow UI the
    pipeline's dashboard (docs/operators.md "Observability: the pipeline's Asset is its dashboard")."""
    return Asset(name=f"mysql_cdc.{pipeline}", uri=f"mysql-cdc://pipeline/{pipeline}")


def iceberg_table_asset(target: str) -> Asset:
    """The Airflow Asset of an Iceberg target ``catalog.namespace.table`` (backtick-quoted or plain).

    Schedule a downstream DAG on it: ``schedule=[iceberg_table_asset("lake.demo.orders")]``; the apply
    task emits an event for it whenever a run commits changes to the table.
    """
    parts = identifier_parts(target)
    return Asset(name=".".join(parts), uri="iceberg://" + "/".join(parts))


#: The Spark provider's own OpenLineage injection (arguments of its newer versions), switched off: the parent
#: run is added by ``execute()`` before the hook exists, and the transport never is.
_BASE_OPENLINEAGE_INJECTION_OFF: dict[str, Any] = {
    name: False
    for name in ("openlineage_inject_parent_job_info", "openlineage_inject_transport_info")
    if name in inspect.signature(SparkSubmitOperator.__init__).parameters
}


def spark_master(connection: Connection) -> str:
    """The master URL spark-submit gets from a Spark connection, by the Spark provider's documented rule:
    a ``spark`` connection whose host is a whole master URL (``local[*]``, ``k8s://https://...``) or has
    no port uses the host; otherwise ``<conn_type>://<host>``; a port is appended."""
    if connection.conn_type == "spark" and connection.host and ("://" in connection.host or not connection.port):
        master = connection.host
    else:
        master = f"{connection.conn_type}://{connection.host or ''}"
    return f"{master}:{connection.port}" if connection.port else master


#: What spark-submit answers for a Python application in cluster deploy mode on a standalone master
#: (Spark 3.5, checked by tests/integration/test_spark_cluster.py against a real standalone cluster).
STANDALONE_PYTHON_CLUSTER_MODE_REFUSAL = (
    "Cluster deploy mode is currently not supported for python applications on standalone clusters"
)


def check_deploy_mode(pipeline: str, conn_id: str, master: str, deploy_mode: str | None) -> None:
    """Raise :class:`ConfigurationError` before anything is submitted when the Spark connection asks
    for a deploy mode the master cannot run the apply job (a Python application) in: ``cluster`` on a
    standalone ``spark://`` master, which spark-submit refuses (docs/operators.md "Where the apply runs")."""
    if deploy_mode == "cluster" and master.startswith("spark://"):
        raise ConfigurationError(
            f"pipeline {pipeline!r}: the Spark connection {conn_id!r} asks for deploy mode 'cluster' on the "
            f"standalone master {master}, where spark-submit refuses Python applications such as the apply "
            f'job ("{STANDALONE_PYTHON_CLUSTER_MODE_REFUSAL}"): set the connection\'s extra "deploy-mode" to '
            '"client" (the driver then runs on the Airflow worker, the executors on the cluster) and give the '
            "operator no deploy_mode='cluster'; cluster deploy mode works on YARN and Kubernetes masters"
        )


def given_to_the_process(hook: SparkSubmitHook, environment: dict[str, str]) -> None:
    """Make ``hook`` start spark-submit with ``environment`` plus its ``env_vars``, and nothing else.

    On a YARN or standalone master the hook keeps its ``env_vars`` for the process when it builds the
    command, then starts the process from a copy of the whole worker environment (``AIRFLOW_CONN_*``,
    ``AIRFLOW_VAR_*`` and settings, which can hold passwords) with them added: an ``env=`` given to its
    ``submit`` is then replaced. Here they go into ``environment`` once the command is built, and the hook
    keeps none, so the ``env=`` it is given stands. (On Kubernetes the hook also passes them as
    ``spark.kubernetes.driverEnv.*`` properties, which it does itself.)"""
    build = hook._build_spark_submit_command

    def build_and_take_env_vars(application: str) -> list[str]:
        command = build(application)
        kept = hook._env
        if kept:
            environment.update({name: str(value) for name, value in kept.items()})
            hook._env = None
        return command

    hook._build_spark_submit_command = build_and_take_env_vars  # type: ignore[method-assign]


@dataclass(frozen=True)
class WarmSpark:
    """Where warm Spark services live and how long one waits for the next apply."""

    idle_timeout: timedelta
    folder: str


def default_warm_spark_folder() -> str:
    """This user's folder of warm Spark services, under the temporary directory."""
    return str(Path(tempfile.gettempdir()) / f"mysql-cdc-spark-{os.getuid()}")


def warm_spark_setting(idle_timeout: timedelta | None, folder: str | None) -> WarmSpark | None:
    """An operator's ``warm_spark_idle_timeout`` and ``warm_spark_folder``: None when no timeout is set."""
    return WarmSpark(idle_timeout, folder or default_warm_spark_folder()) if idle_timeout else None


class IcebergSparkJobOperator(SparkSubmitOperator):
    """What this package's spark-submit jobs share (the apply, table maintenance): the job gets ``--spec
    <URI>``; the Iceberg runtime from Maven unless ``jars``/``packages`` are given; the worker's environment
    without Airflow's connections, variables and settings; and, for a local master, this worker's Python.

    Subclasses set ``spark_conn_id``, ``local_python`` and ``pipeline`` and put the catalog's properties into ``conf``
    (:func:`apply_spark_conf`) before :meth:`submit_job`.
    """

    spark_conn_id: str
    local_python: str
    pipeline: str

    def _local_env(self) -> dict[str, str]:
        """Environment of a local spark-submit: this worker's Python and its spark-submit, loopback only."""
        bin_dir = str(Path(self.local_python).parent)
        return {
            "PYSPARK_PYTHON": self.local_python,
            "PYSPARK_DRIVER_PYTHON": self.local_python,
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        }

    def supported_master(self) -> str:
        """The master of the Spark connection, once its deploy mode is one the master runs this package's
        jobs (Python applications) in (:func:`check_deploy_mode`)."""
        connection = BaseHook.get_connection(self.spark_conn_id)
        master = spark_master(connection)
        deploy_mode = self._deploy_mode or connection.extra_dejson.get("deploy-mode")
        check_deploy_mode(self.pipeline, self.spark_conn_id, master, deploy_mode)
        return master

    def submit_job(
        self,
        context: Context,
        spec_uri: str,
        before_submit: Callable[[str], None] | None = None,
        object_store: ObjectStoreSettings | None = None,
        warm: WarmSpark | None = None,
    ) -> None:
        """spark-submit the application with ``--spec spec_uri``; ``before_submit(master)`` runs once the
        master is known, before the hook is created (it may still change ``conf``). The properties of ``conf``
        that hold a secret (:func:`~airflow_provider_mysql_cdc.core.spark_properties.is_secret_property`: a
        catalog's password or token) and, with ``object_store``, Hadoop's S3A settings, keys included, go
        in a properties file only this user can read, removed after the job (never in argv or the
        environment: :func:`~airflow_provider_mysql_cdc.core.spark_properties.secret_properties_file`). With
        ``warm``, the spec goes to a warm Spark service of the same command line instead
        (:mod:`airflow_provider_mysql_cdc.apply.warm_service`), started when none listens."""
        self.application_args = [] if warm else ["--spec", spec_uri]
        if not self.jars and not self.packages:
            self.packages = ICEBERG_PACKAGE + (f",{HADOOP_AWS_PACKAGE}" if object_store else "")
        master = self.supported_master()
        environment = job_environment(os.environ)
        if master.startswith("local"):
            # Given to the process here, not as the hook's env_vars: the hook would add them to a copy
            # of the whole worker environment, secrets included.
            environment.update({**self._local_env(), **(self.env_vars or {})})
            self.env_vars = None
        if before_submit is not None:
            before_submit(master)
        with contextlib.ExitStack() as cleanup:
            public, secrets = split_secret_properties(self.conf or {})
            if object_store is not None:
                secrets = {**object_store.spark_properties(), **secrets}
            if secrets:
                given_file, given_conf = self.properties_file, self.conf
                cleanup.callback(setattr, self, "properties_file", given_file)
                cleanup.callback(setattr, self, "conf", given_conf)
                base = Path(given_file) if given_file else spark_defaults_path(environment)
                self.properties_file = cleanup.enter_context(secret_properties_file(secrets, base))
                self.conf = public
            self._hook = hook = self._get_hook()
            given_to_the_process(hook, environment)
            if warm is not None:
                self._run_warm(hook, warm, spec_uri, environment)
                return
            self._hook.submit = functools.partial(self._hook.submit, env=environment)  # type: ignore[method-assign]
            super().execute(context)

    def _run_warm(self, hook: SparkSubmitHook, warm: WarmSpark, spec_uri: str, environment: Mapping[str, str]) -> None:
        """Run the spec in the warm service of the spark-submit command the hook would run."""
        from airflow_provider_mysql_cdc.apply.warm_service import SERVICE_APPLICATION, WarmApplyClient

        command = hook._build_spark_submit_command(SERVICE_APPLICATION)
        if "--deploy-mode" in command and command[command.index("--deploy-mode") + 1] == "cluster":
            raise ConfigurationError(
                f"pipeline {self.pipeline!r}: a warm Spark service runs the driver on this worker, so it needs client "
                f"deploy mode, not cluster (connection {self.spark_conn_id!r}); set warm_spark_idle_timeout=None"
            )
        client = WarmApplyClient(Path(warm.folder), command, environment, warm.idle_timeout.total_seconds())
        try:
            code = client.run(spec_uri, self.log.info)
        except MySqlCdcError as exc:
            raise type(exc)(f"pipeline {self.pipeline!r}: {exc}") from exc
        if code != 0:
            raise TransientCdcError(
                f"pipeline {self.pipeline!r}: the job for {spec_uri} exited with code {code} in the warm Spark "
                f"service (its log: {client.paths.log})"
            )


class SparkApplyOperator(OpenLineageFacets, IcebergSparkJobOperator):
    """MERGE a pipeline's staged windows (and the snapshots they build on) into Iceberg tables.

    Writes an :class:`~airflow_provider_mysql_cdc.apply.contract.ApplySpec` (the settings below) to the
    pipeline's staging and submits ``airflow_provider_mysql_cdc/apply/spark_job.py --spec <URI>`` through
    the Spark provider's ``SparkSubmitHook`` (the catalog's properties and memory go as Spark ``conf``).
    The master comes from the Spark connection (``spark_default``; its host ``local[*]`` runs Spark on
    the worker, ``yarn``, ``k8s://...`` or ``spark://host:7077`` a cluster).
    The job records what each table holds in the table's own Iceberg commits (the metadata database
    is not used); its report (per table: status, windows applied, rows) is returned as XCom. A table
    the job could not apply (a schema change the target cannot follow, a gap) fails the task after the
    other tables were applied.

    :param pipeline: pipeline name.
    :param staging_uri: staging root the windows were captured to.
    :param windows: the window id to apply, or ``first-last`` (templated; e.g. the capture's XCom).
    :param catalog: Spark catalog name of the targets.
    :param warehouse: Hadoop catalog warehouse path (when ``catalog_conf`` is not given).
    :param catalog_conf: the catalog's properties without the ``spark.sql.catalog.<name>.`` prefix
        (REST, Hive, Glue...).
    :param target_template: target table inside the catalog; ``{database}``/``{table}`` are MySQL's names.
        The template's dots separate namespace levels; a name filled in is never split (MySQL's ``t.x``
        is the Iceberg table ``t.x``).
    :param history: ``db.table`` patterns whose changes are also appended to a changelog table.
    :param partitioning: ``db.table`` patterns (fnmatch) -> the Iceberg partition fields of their targets,
        written as in ``PARTITIONED BY``: a column, ``bucket(N, column)``, ``truncate(W, column)``,
        ``years``/``months``/``days``/``hours(column)``; e.g. ``{"shop.orders": ["days(created_at)"]}``. A
        target the apply creates or replaces gets them; an existing target whose fields differ is evolved to
        them at its next apply that writes (files already written keep their layout). A table no pattern
        names keeps its target's partitioning (none when the apply creates it).
    :param drop_dropped_columns: drop target columns dropped in MySQL (default: keep them, NULL). A
        column a partition spec of the target takes values from is kept all the same (Iceberg cannot
        drop it and still merge into the table), with a warning; one the target's sort order names fails
        that table with ``UnsupportedSchemaChangeError``, before any row of the window is applied.
    :param schema_change_policy: a table whose window holds a change its target cannot follow exactly
        (a retype that may change values, a key change, a renamed table, ...): ``rebuild`` (default; it
        waits for the fresh snapshot the pipeline's next run takes, and the task succeeds) or ``stop``
        (the table fails with ``RebuildPendingError`` until it is re-snapshotted). Either way the other
        tables are applied.
    :param chunks_per_commit: snapshot chunks merged per Iceberg commit when loading a snapshot.
    :param parallel_tables: tables the job applies at the same time, each in its own thread of the one
        Spark session (default 4; 1: one after the other). A window of many small tables waits on the
        driver, not the executors; the tables' tasks share the executors either way.
    :param jars: Iceberg runtime jar(s) for ``--jars`` (offline); default: Maven ``packages``.
    :param local_python: for local masters, the Python of the Spark driver (default: this worker's).
    :param conn_id: the Spark connection (its host is the master: ``local[*]``, ``spark://...``, ``yarn``...;
        its extra ``deploy-mode``: on a ``spark://`` master only ``client``, see :func:`check_deploy_mode`).
    :param headroom_task_id: the run's purge headroom sensor, whose figure the Asset events carry.
    :param previous_run_wait: how long to wait while the previous run's apply is unfinished (windows are
        applied in order; see :mod:`airflow_provider_mysql_cdc.operators.run_order`), then fail naming it.
    :param asset_alias: name of the AssetAlias (an outlet of the task) through which an Asset event
        is emitted for every target table the run changed (:func:`iceberg_table_asset`); None: no events.
    :param object_store_conn_id: an Airflow ``aws`` connection (login = access key id, password = secret access
        key, extra ``endpoint_url``, ``region_name``) for staging and a warehouse on S3: the worker reads
        staging with it, and the job gets it as Hadoop S3A properties (``s3://`` and ``s3a://``) in a
        ``0600`` properties file, never in its argv or environment. The S3A jars must reach Spark
        (``jars``, or ``packages``; the default packages add ``hadoop-aws``).
    :param mysql_cdc_conn_id: the pipeline's MySQL source connection; only its host and port are read, to
        name the source tables in the task's OpenLineage events (None: they are left out).
    :param openlineage_inject_parent_job_info: when OpenLineage is enabled, give the Spark job this task's
        run as its OpenLineage parent (``spark.openlineage.parent*``/``rootParent*`` properties). The
        transport settings are never passed (they can hold an API key): configure the OpenLineage Spark
        listener's transport in the cluster's ``spark-defaults``.
    :param skip_spark_when_up_to_date: with a Hadoop catalog, first read each target's applied state from
        its Iceberg metadata files and plan the run as the job would; when every table already holds the
        windows (a run without a change of any selected table), report that and do not start Spark. Anything
        else, or metadata that cannot be read with certainty, is left to the job (see
        :mod:`airflow_provider_mysql_cdc.apply.without_spark`). False: always submit the job.
    :param warm_spark_idle_timeout: keep the apply's Spark driver (its JVM and session) running between
        runs: the first apply starts a warm service with the very spark-submit command line the job would
        get, later applies with the same command line send it their spec over a private Unix socket and skip
        Spark's start; the service stops by itself after this long without an apply, or after an error that
        may have broken its session (:mod:`airflow_provider_mysql_cdc.apply.warm_service`). Only where the
        driver runs on this worker (a local master, or client deploy mode). None (default): a spark-submit
        per run.
    :param warm_spark_folder: the private (``0700``) folder of the warm services' sockets, pid files and logs
        (default: ``mysql-cdc-spark-<uid>`` in the temporary directory).

    OpenLineage (when enabled): inputs are the pipeline's staged windows (and snapshots, when the run
    loaded one) and the MySQL tables of the run, outputs the Iceberg targets, each with column lineage
    from its MySQL table (see docs/operators.md "Lineage (OpenLineage)").

    With no window to apply (``windows`` renders to None or "": the capture found the run's interval
    already covered) the task succeeds without starting Spark. Before submitting, Spark's memory is
    sized from the largest staged row of the windows (:mod:`airflow_provider_mysql_cdc.apply.memory`): a
    local master's driver memory is raised when big rows need it, and memory given too small (or a
    cluster's executor memory not given) fails with ``SparkMemoryTooSmallError`` naming the setting.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "pipeline",
        "staging_uri",
        "windows",
        "warehouse",
        "catalog_conf",
        "target_template",
        "schema_change_policy",
        "mysql_cdc_conn_id",
        "object_store_conn_id",
    )
    ui_color = "#fde9c7"

    def __init__(
        self,
        *,
        pipeline: str,
        staging_uri: str,
        windows: str | int | None,
        catalog: str = ApplySpec.catalog,
        warehouse: str | None = None,
        catalog_conf: Mapping[str, str] | None = None,
        target_template: str = ApplySpec.target_template,
        history: Sequence[str] = ApplySpec.history,
        partitioning: Mapping[str, Sequence[str]] | None = None,
        history_suffix: str = ApplySpec.history_suffix,
        drop_dropped_columns: bool = ApplySpec.drop_dropped_columns,
        schema_change_policy: str = ApplySpec.schema_change_policy,
        chunks_per_commit: int = ApplySpec.chunks_per_commit,
        parallel_tables: int = ApplySpec.parallel_tables,
        local_python: str | None = None,
        conf: dict[str, Any] | None = None,
        jars: str | None = None,
        packages: str | None = None,
        application: str = APPLY_APPLICATION,
        name: str = "mysql-cdc-apply",
        asset_alias: str | None = DEFAULT_ASSET_ALIAS,
        conn_id: str = "spark_default",
        headroom_task_id: str | None = None,
        previous_run_wait: timedelta = DEFAULT_PREVIOUS_RUN_WAIT,
        mysql_cdc_conn_id: str | None = MySqlCdcHook.default_conn_name,
        openlineage_inject_parent_job_info: bool = True,
        object_store_conn_id: str | None = None,
        skip_spark_when_up_to_date: bool = True,
        warm_spark_idle_timeout: timedelta | None = None,
        warm_spark_folder: str | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.pop("openlineage_inject_transport_info", False):
            raise ConfigurationError(
                "SparkApplyOperator does not pass OpenLineage transport settings to spark-submit: they can hold "
                "an API key, which would then be in its command line; configure the OpenLineage Spark listener's "
                "transport in the cluster's spark-defaults instead"
            )
        if asset_alias:
            kwargs["outlets"] = [*kwargs.get("outlets", []), AssetAlias(asset_alias)]
        super().__init__(
            application=application,
            conf=conf,
            jars=jars,
            packages=packages,
            name=name,
            conn_id=conn_id,
            **_BASE_OPENLINEAGE_INJECTION_OFF,
            **kwargs,
        )
        self.spark_conn_id = conn_id
        self.pipeline = pipeline
        self.staging_uri = staging_uri
        self.windows = windows
        self.catalog = catalog
        self.warehouse = warehouse
        self.catalog_conf = dict(catalog_conf or {})
        self.target_template = target_template
        self.history = tuple(history)
        self.partitioning = {pattern: list(fields) for pattern, fields in dict(partitioning or {}).items()}
        parse_partitioning(self.partitioning)  # written wrong: the DAG fails to parse, naming the field
        self.history_suffix = history_suffix
        self.drop_dropped_columns = drop_dropped_columns
        self.schema_change_policy = schema_change_policy
        self.chunks_per_commit = chunks_per_commit
        self.parallel_tables = parallel_tables
        self.local_python = local_python or sys.executable
        self.asset_alias = asset_alias
        self.report_uri = ""
        self.previous_run_wait = previous_run_wait
        self.headroom_task_id = headroom_task_id
        self.mysql_cdc_conn_id = mysql_cdc_conn_id
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.object_store_conn_id = object_store_conn_id
        self.skip_spark_when_up_to_date = skip_spark_when_up_to_date
        self.warm_spark = warm_spark_setting(warm_spark_idle_timeout, warm_spark_folder)

    def apply_spec(self, report_uri: str) -> ApplySpec:
        """What the job is asked to do, from the (rendered) arguments; no credential is part of it (the
        catalog's properties go to Spark as ``conf``)."""
        return ApplySpec.for_windows(
            self.pipeline,
            self.staging_uri,
            str(self.windows),
            catalog=self.catalog,
            target_template=self.target_template,
            history=tuple(self.history),
            partitioning=self.partitioning,
            history_suffix=self.history_suffix,
            drop_dropped_columns=self.drop_dropped_columns,
            schema_change_policy=self.schema_change_policy,
            chunks_per_commit=int(self.chunks_per_commit),
            parallel_tables=int(self.parallel_tables),
            report_uri=report_uri,
        )

    @terminal_errors_fail_task
    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]  # returns the XCom
        if self.windows in (None, "", "None"):
            self.log.info("no window to apply in this run (its capture planned none); Spark is not started")
            return {"pipeline": self.pipeline, "first_window": None, "last_window": None, "upper": None, "tables": {}}
        self.supported_master()  # a deploy mode the master refuses fails now, not after the wait below
        task = f"pipeline {self.pipeline!r} {self.task_id}"
        previous = wait_for_previous_run(previous_task_reader(context), self.log, task, self.previous_run_wait)
        previous_note = previous_run_note(self.dag_id, self.task_id, previous) if previous else ""
        self.conf = {**apply_spark_conf(self.catalog, self.warehouse, self.catalog_conf), **(self.conf or {})}
        if self.openlineage_inject_parent_job_info:
            self.conf = with_parent_job_properties(self.conf, context)
        run_id = str(context["run_id"])
        try_number = int(getattr(context.get("ti"), "try_number", 1) or 1)
        from airflow_provider_mysql_cdc.staging import Staging

        object_store = object_store_settings(self.object_store_conn_id)
        staging = Staging(self.staging_uri, self.pipeline, object_store)
        report_path = staging.apply_report_path(run_id, try_number)
        self.report_uri = staging.uri_of(report_path)
        spec = self.apply_spec(self.report_uri)
        if self.skip_spark_when_up_to_date and (report := self._report_without_spark(spec, staging, object_store)):
            staging.write_text(report_path, report.to_json())
            self.log.info(
                "every table already holds windows %s..%s (read from their Iceberg metadata): Spark is not started",
                report.first_window,
                report.last_window,
            )
            self._log_report(report)
            self._record_lineage(functools.partial(self._lineage, staging, report))
            self._emit_asset_events(context, report, staging)
            return self._xcom(report)
        spec_uri = staging.write_text(staging.apply_spec_path(run_id, try_number), spec.to_json())
        try:
            self.submit_job(
                context,
                spec_uri,
                functools.partial(self._size_memory, staging, spec=spec),
                object_store,
                self.warm_spark,
            )
        except Exception as exc:
            report = self._read_report(staging, report_path)
            if report is None:
                raise
            self._log_report(report)
            self._record_lineage(functools.partial(self._lineage, staging, report))
            raise self._failure(report, previous_note) from exc
        report = self._read_report(staging, report_path)
        if report is None:
            raise TerminalCdcError(f"the apply job succeeded but wrote no report at {self.report_uri}")
        self._log_report(report)
        self._record_lineage(functools.partial(self._lineage, staging, report))
        self._emit_asset_events(context, report, staging)
        return self._xcom(report)

    def _report_without_spark(
        self, spec: ApplySpec, staging: Staging, object_store: ObjectStoreSettings | None
    ) -> ApplyReport | None:
        """The job's report when no table of the windows has anything to apply, read from the targets'
        Iceberg metadata (a Hadoop catalog only: :mod:`airflow_provider_mysql_cdc.apply.without_spark`);
        None when the job must run, or when the metadata cannot be read with certainty."""
        from airflow_provider_mysql_cdc.apply.without_spark import (
            MetadataUnreadable,
            read_hadoop_table,
            report_without_spark,
        )
        from airflow_provider_mysql_cdc.staging.area import open_filesystem

        warehouse = hadoop_warehouse(self.catalog, self.conf or {})
        if warehouse is None:
            return None
        try:
            filesystem, root = open_filesystem(warehouse, object_store)
            return report_without_spark(spec, staging, functools.partial(read_hadoop_table, filesystem, root))
        except (MetadataUnreadable, MySqlCdcError, OSError) as exc:
            self.log.info("the targets' state is left to the Spark job (%s: %s)", type(exc).__name__, exc)
            return None

    def _size_memory(self, staging: Staging, master: str, *, spec: ApplySpec) -> None:
        """Give Spark the memory the windows' largest staged row needs, or fail before submitting with
        :class:`~airflow_provider_mysql_cdc.errors.SparkMemoryTooSmallError` (see ``apply.memory``)."""
        from airflow_provider_mysql_cdc.apply.memory import MIB, plan_apply_memory

        footprint, settings = plan_apply_memory(
            staging,
            spec.first_window,
            spec.last_window,
            master,
            self.conf or {},
            driver_memory=self._driver_memory,
            executor_memory=self._executor_memory,
        )
        if "spark.driver.memory" in settings:
            self._driver_memory = settings.pop("spark.driver.memory")
            self.log.info(
                "the largest staged row of windows %s is %.1f MiB: driver memory %s",
                footprint.windows,
                footprint.largest.bytes / MIB if footprint.largest else 0.0,
                self._driver_memory,
            )
        self.conf = {**(self.conf or {}), **settings}

    def _lineage(self, staging: Staging, report: ApplyReport) -> TaskLineage:
        """What the run read (staged windows and snapshots; the MySQL tables they come from) and wrote
        (the Iceberg targets, each column a copy of its MySQL column)."""
        columns = staged_columns(staging, report.first_window, report.last_window, report.tables)
        tables = [
            AppliedTable(name, table.target, columns.get(name, ()), sum(table.rows.values()))
            for name, table in report.tables.items()
        ]
        staged = [staged_windows_uri(self.staging_uri, self.pipeline)]
        if any(table.snapshot_chunks_loaded for table in report.tables.values()):
            staged.append(staged_snapshots_uri(self.staging_uri, self.pipeline))
        return apply_lineage(self._lineage_source(), tables, staged, self.warehouse, self.catalog_conf)

    def _lineage_source(self) -> MySqlServer | None:
        """Host and port of the MySQL source (None without a connection, or when it cannot be read)."""
        if not self.mysql_cdc_conn_id:
            return None
        try:
            config = MySqlCdcHook(mysql_cdc_conn_id=self.mysql_cdc_conn_id).get_connection_config()
        except Exception as exc:  # lineage only: the apply itself needs no MySQL connection
            self.log.warning("OpenLineage: the MySQL source tables are left out (%s)", type(exc).__name__)
            return None
        return MySqlServer(config.host, config.port)

    def _emit_asset_events(self, context: Context, report: ApplyReport, staging: Staging) -> None:
        """Through the task's AssetAlias outlet: an event for the pipeline, and one per target table that
        got new commits, carrying the frontier, freshness and purge headroom (docs/operators.md
        "Observability: the pipeline's Asset is its dashboard")."""
        if not self.asset_alias:
            return
        windows = range(report.first_window, report.last_window + 1)
        manifests = (staging.read_window_manifest(window) for window in windows)
        common = {
            "pipeline": self.pipeline,
            **freshness(newest_commit(m.last_commit_ts_us for m in manifests if m), datetime.now(UTC)),
            "headroom_seconds": self._headroom_seconds(context),
        }
        events = context["outlet_events"][AssetAlias(self.asset_alias)]
        pipeline_extra: dict[str, Any] = {
            **common,
            "windows": [report.first_window, report.last_window],
            "frontier": report.upper,
            "rows_by_op": rows_by_op(table.rows for table in report.tables.values()),
            "tables": {name: table.status for name, table in report.tables.items()},
            "waiting_for_rebuild": sorted(name for name, table in report.tables.items() if table.rebuild),
        }
        events.add(pipeline_asset(self.pipeline), extra=pipeline_extra)
        for table_name, table in report.tables.items():
            if table.status == "applied":
                extra: dict[str, Any] = {
                    **common,
                    "table": table_name,
                    "windows": table.windows_applied,
                    "rows": table.rows,
                    "frontier": table.state.get("upper") or report.upper,
                    "snapshot_chunks_loaded": table.snapshot_chunks_loaded,
                }
                events.add(iceberg_table_asset(table.target), extra=extra)

    def _headroom_seconds(self, context: Context) -> float | None:
        """The purge headroom the run's sensor measured (None without one, or when it could not say)."""
        if not self.headroom_task_id or "ti" not in context:
            return None
        ti = context["ti"]
        report = ti.xcom_pull(task_ids=self.headroom_task_id) or ti.xcom_pull(
            task_ids=self.headroom_task_id, key=HEADROOM_XCOM_KEY
        )
        seconds = report.get("headroom_seconds") if isinstance(report, dict) else None
        return float(seconds) if isinstance(seconds, int | float) else None

    @staticmethod
    def _read_report(staging: Staging, report_path: str) -> ApplyReport | None:
        found = staging.read_text(report_path)
        return None if found is None else ApplyReport.from_json(*found)

    def _log_report(self, report: ApplyReport) -> None:
        """Log what the job did per table (what each table holds is in its Iceberg commits)."""
        for table_name, table in report.tables.items():
            if table.rebuild:
                self.log.warning(
                    "%s waits for a rebuild since %s; the pipeline's next snapshot reads it again",
                    table_name,
                    table.rebuild,
                )
        self.log.info("apply of windows %s..%s: %s", report.first_window, report.last_window, self._summary(report))

    @staticmethod
    def _summary(report: ApplyReport) -> dict[str, str]:
        return {name: f"{t.status} windows={t.windows_applied} rows={t.rows}" for name, t in report.tables.items()}

    def _failure(self, report: ApplyReport, previous_note: str = "") -> MySqlCdcError:
        """The error of a failed job: the job's own when it stopped before the tables; otherwise every
        failed table's, terminal (no retry) only when each of them is (a retry re-applies only the
        tables that failed: the others already hold the windows). ``previous_note``: how to get
        past the previous run's apply (failed, or marked success), added when a table stopped at a gap."""
        where = f"pipeline {self.pipeline!r} windows {report.first_window}..{report.last_window}"
        if report.error:
            return error_named(report.error_class, f"{where}: {report.error}", TransientCdcError)
        errors = "; ".join(
            f"{name}: {report.tables[name].error_class or 'error'}: {report.tables[name].error}"
            for name in report.failed
        )
        text = f"{where}: the apply could not apply {len(report.failed)} table(s), the others were applied: {errors}"
        if previous_note and any(report.tables[name].error_class == "ApplyGapError" for name in report.failed):
            text += f". The gap: {previous_note}"
        terminal = all(
            issubclass(error_class(report.tables[name].error_class) or MySqlCdcError, TerminalCdcError)
            for name in report.failed
        )
        return TerminalCdcError(text) if terminal else TransientCdcError(f"{text}; the retry applies them again")

    @staticmethod
    def _xcom(report: ApplyReport) -> dict[str, Any]:
        return {
            "pipeline": report.pipeline,
            "first_window": report.first_window,
            "last_window": report.last_window,
            "upper": report.upper,
            "tables": {
                name: {
                    "target": table.target,
                    "status": table.status,
                    "windows_applied": table.windows_applied,
                    "rows": table.rows,
                    "snapshot_chunks_loaded": table.snapshot_chunks_loaded,
                    # Why it waits for a fresh snapshot (docs/operations.md "Operating it": when a table is re-built).
                    **({"rebuild": table.rebuild} if table.rebuild else {}),
                }
                for name, table in report.tables.items()
            },
        }
