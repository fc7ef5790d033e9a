"""The object store settings of an Airflow ``aws`` connection (staging and warehouse on S3).

The fields are those a user gives the Amazon provider's AWS connection: login = access key id,
password = secret access key, extra ``endpoint_url`` (an S3-compatible store: MinIO, SeaweedFS, Ceph;
also read from ``service_config.s3.endpoint_url``) and ``region_name``. The Amazon provider need not be
installed: only the connection's fields are read. Empty login and password mean the default AWS
credential chain of each process (instance profile, web identity).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_mysql_cdc.core.object_store import ObjectStoreSettings


def _endpoint_url(extra: dict[str, Any]) -> str:
    service = extra.get("service_config")
    s3 = service.get("s3") if isinstance(service, dict) else None
    from_service = s3.get("endpoint_url") if isinstance(s3, dict) else None
    return str(from_service or extra.get("endpoint_url") or "")


def object_store_settings(conn_id: str | None) -> ObjectStoreSettings | None:
    """The settings of connection ``conn_id`` (None when no connection is named)."""
    if not conn_id:
        return None
    connection = BaseHook.get_connection(conn_id)
    extra = connection.extra_dejson or {}
    return ObjectStoreSettings(
        access_key=connection.login or "",
        secret_key=connection.password or "",
        endpoint_url=_endpoint_url(extra),
        region=str(extra.get("region_name") or ""),
    )
