"""A class-data-sharing archive for the Spark JVMs the test suite starts.

Every spark-submit of the suite (the apply and maintenance jobs, the verify children, the warm services,
the Airflow tasks' jobs) starts a JVM that loads and verifies the same tens of thousands of Spark,
Scala, Hadoop and Iceberg classes. A dynamic CDS archive (``-XX:ArchiveClassesAtExit``, JDK 13 and
later) holds them parsed and verified: with it a cold spark-submit of a small Iceberg MERGE job took
5.4 s instead of 11.2 s on the suite's 2-core machine, and 6.6 CPU seconds instead of 13. The one
in-process session of the ``spark`` fixture starts without it (``tests/spark_session.py`` says why).

The archive is made once per machine and environment by running this module as a Spark job (an
Iceberg table created, written, merged into and read, as the provider's jobs do), keyed by the Java
runtime, the Spark jars and the Iceberg runtime jars, under a lock so that pytest-xdist's processes make
it once. A JVM whose class path differs from the archive's (other jars on it) runs without it:
``-Xshare:auto`` is the default, and the archive's log lines are turned off.

The JVM refuses to use (and to make) an archive while a non-empty directory is on its class path, and
Spark's launcher puts ``$SPARK_CONF_DIR`` there: the suite's conf dir stays empty, and its Spark
settings reach the JVMs as ``-Dspark.*`` system properties in ``SPARK_SUBMIT_OPTS`` instead of a
``spark-defaults.conf`` (see ``tests/conftest.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

ARCHIVE_DIR = Path(__file__).resolve().parents[1] / ".cache" / "jvm-class-archive"
#: ``$SPARK_CONF_DIR`` of every Spark JVM of the suite: on their class path, so it must stay empty.
EMPTY_SPARK_CONF_DIR = ARCHIVE_DIR / "spark-conf"
#: The archive's own JVM log lines (a JVM that cannot use it says so on stdout) are off.
QUIET = "-Xlog:cds*=off"


def _java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def _spark_jars() -> list[Path]:
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def archive_key(java_version: str, jars: Sequence[Path]) -> str:
    """What the archive depends on: the Java runtime, the class path's directory, the jars (by name and size)."""
    digest = hashlib.sha256(java_version.encode())
    digest.update(str(EMPTY_SPARK_CONF_DIR).encode())
    for jar in jars:
        digest.update(f"{jar}:{jar.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def ensure_archive(iceberg_jars: Sequence[Path], environ: Mapping[str, str]) -> Path | None:
    """The archive for these jars, made now if there is none (about 20 s, once); None when it cannot be
    made here (no Java, or the job failed: the reason is printed and the suite runs without it)."""
    java = _java()
    if java is None or not all(jar.is_file() for jar in iceberg_jars):
        return None
    version = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    spark_jars = _spark_jars()
    archive = ARCHIVE_DIR / f"spark-{archive_key(version, [*spark_jars, *iceberg_jars])}.jsa"
    EMPTY_SPARK_CONF_DIR.mkdir(parents=True, exist_ok=True)
    if archive.is_file():
        return archive
    with open(ARCHIVE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.is_file():
            return archive
        return _make_archive(archive, iceberg_jars, environ)


def _make_archive(archive: Path, iceberg_jars: Sequence[Path], environ: Mapping[str, str]) -> Path | None:
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="cds-warehouse-") as warehouse:
        command = [
            str(Path(sys.executable).with_name("spark-submit")),
            "--master",
            "local[2]",
            "--conf",
            f"spark.driver.extraJavaOptions=-XX:ArchiveClassesAtExit={partial} {QUIET}",
            "--jars",
            ",".join(str(jar) for jar in iceberg_jars),
            __file__,
            warehouse,
        ]
        env = {**environ, "SPARK_CONF_DIR": str(EMPTY_SPARK_CONF_DIR), "PYSPARK_PYTHON": sys.executable}
        env.pop("SPARK_SUBMIT_OPTS", None)
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        print(
            f"tests: no JVM class archive (the Spark JVMs start without one): exit {result.returncode}\n"
            + result.stderr[-2000:],
            file=sys.stderr,
        )
        return None
    os.replace(partial, archive)
    return archive


def _warm_up(warehouse: str) -> None:
    """The job whose classes the archive holds: what the provider's apply, verify and maintenance load."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.appName("jvm-class-archive")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.lake.type", "hadoop")
        .config("spark.sql.catalog.lake.warehouse", f"{warehouse}/lake")
        .getOrCreate()
    )
    staged = f"{warehouse}/staged"
    spark.range(100).selectExpr("id", "CAST(id AS STRING) AS v", "id % 3 AS op").write.parquet(staged)
    spark.sql(
        "CREATE TABLE lake.db.t (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
    )
    spark.sql("INSERT INTO lake.db.t SELECT id, v FROM parquet.`" + staged + "` WHERE id < 50")
    spark.read.parquet(staged).createOrReplaceTempView("changes")
    spark.sql(
        "MERGE INTO lake.db.t t USING changes s ON t.id = s.id WHEN MATCHED AND s.op = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)"
    )
    spark.sql("DELETE FROM lake.db.t WHERE id > 90")
    spark.sql("SELECT count(*), sum(xxhash64(id, v)) FROM lake.db.t").collect()
    spark.sql("SELECT summary FROM lake.db.t.snapshots").collect()
    spark.stop()


if __name__ == "__main__":
    _warm_up(sys.argv[1])
