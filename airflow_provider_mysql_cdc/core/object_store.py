"""How to reach an S3 (or S3-compatible) object store: the fields a user gives for AWS, typed and secret-safe.

One :class:`ObjectStoreSettings` is read from an Airflow ``aws`` connection (login = access key id,
password = secret access key, extra ``endpoint_url`` and ``region_name``) by the operators, opens the
staging area's pyarrow ``S3FileSystem`` on the worker (:mod:`airflow_provider_mysql_cdc.staging`), and
becomes Hadoop S3A properties for the Spark apply job (:meth:`ObjectStoreSettings.spark_properties`),
which that job turns back into the same settings (:meth:`ObjectStoreSettings.from_spark_properties`)
for its own staging reads. The properties reach spark-submit in a ``0600`` properties file, never in
its argv or environment. Pure: no pyarrow, Spark or Airflow import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from airflow_provider_mysql_cdc.errors import ConfigurationError

#: URI schemes that name an object in S3 (``s3a`` is Hadoop's spelling; pyarrow reads ``s3``).
S3_SCHEMES = ("s3", "s3a")
#: Hadoop's S3A filesystem class (``hadoop-aws``), also mapped to ``s3://`` for Spark and Iceberg.
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
#: The S3A credential provider of fixed keys: the job uses the connection's keys and nothing else.
S3A_FIXED_KEYS_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
_PREFIX = "spark.hadoop.fs.s3a."


def is_s3_uri(uri: str) -> bool:
    """Whether ``uri`` names a place in S3 (``s3://`` or ``s3a://``)."""
    return uri.partition("://")[0].lower() in S3_SCHEMES and "://" in uri


def s3_path(uri: str) -> str:
    """``s3://bucket/key`` (or ``s3a://``) as pyarrow's S3 path ``bucket/key`` (no trailing slash)."""
    if not is_s3_uri(uri):
        raise ConfigurationError(f"{uri!r} is not an s3:// or s3a:// URI")
    path = uri.split("://", 1)[1].rstrip("/")
    if not path or path.startswith("/"):
        raise ConfigurationError(f"{uri!r} names no bucket")
    return path


@dataclass(frozen=True)
class ObjectStoreSettings:
    """Keys, endpoint and region of an S3 store. ``repr`` never shows the secret key.

    Empty keys mean the default AWS credential chain (instance profile, web identity, ...) of each
    process; an empty endpoint means AWS itself. A non-AWS endpoint (MinIO, SeaweedFS, Ceph) is
    addressed path-style (``endpoint/bucket/key``), as those stores expect.
    """

    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    endpoint_url: str = ""
    region: str = ""

    def __post_init__(self) -> None:
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigurationError(
                "the object store connection has only one of access key (login) and secret key (password); "
                "give both, or neither to use the default AWS credential chain"
            )
        if self.endpoint_url and "://" not in self.endpoint_url:
            raise ConfigurationError(
                f"object store endpoint_url {self.endpoint_url!r} needs its scheme (http:// or https://)"
            )

    @property
    def path_style(self) -> bool:
        """Whether buckets are addressed as a path of the endpoint (every non-AWS endpoint)."""
        return bool(self.endpoint_url)

    def spark_properties(self) -> dict[str, str]:
        """The Spark properties that give Hadoop's S3A (staging reads, an Iceberg Hadoop warehouse) these
        settings; ``s3://`` is mapped to S3A too. They hold the secret key: give them to spark-submit in a
        properties file, never as ``--conf``."""
        properties = {"spark.hadoop.fs.s3.impl": S3A_FILESYSTEM, "spark.hadoop.fs.s3a.impl": S3A_FILESYSTEM}
        if self.access_key:
            properties.update(
                {
                    f"{_PREFIX}access.key": self.access_key,
                    f"{_PREFIX}secret.key": self.secret_key,
                    f"{_PREFIX}aws.credentials.provider": S3A_FIXED_KEYS_PROVIDER,
                }
            )
        if self.endpoint_url:
            properties.update(
                {
                    f"{_PREFIX}endpoint": self.endpoint_url,
                    f"{_PREFIX}path.style.access": "true",
                    f"{_PREFIX}connection.ssl.enabled": str(self.endpoint_url.lower().startswith("https://")).lower(),
                }
            )
        if self.region:
            properties[f"{_PREFIX}endpoint.region"] = self.region
        return properties

    @classmethod
    def from_spark_properties(cls, get: Callable[[str], str | None]) -> ObjectStoreSettings | None:
        """The settings a Spark job was given by :meth:`spark_properties` (``get`` reads one Spark
        property, None when unset); None when it was given none (no S3, or S3 by other means)."""
        access_key = get(f"{_PREFIX}access.key") or ""
        endpoint_url = get(f"{_PREFIX}endpoint") or ""
        if not access_key and not endpoint_url:
            return None
        return cls(
            access_key=access_key,
            secret_key=get(f"{_PREFIX}secret.key") or "",
            endpoint_url=endpoint_url,
            region=get(f"{_PREFIX}endpoint.region") or "",
        )
