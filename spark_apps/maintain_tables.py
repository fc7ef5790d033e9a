"""spark-submit application: Iceberg table maintenance of the tables a pipeline applies to.

    spark-submit --jars <iceberg runtime jar> \\
        --conf spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions \\
        --conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog \\
        --conf spark.sql.catalog.lake.type=hadoop --conf spark.sql.catalog.lake.warehouse=/data/warehouse \\
        spark_apps/maintain_tables.py --spec /data/staging/shop/maintenance-specs/run-1-try1.json

``--spec`` is the URI of a ``MaintenanceSpec`` JSON document (``airflow_provider_mysql_cdc.apply.contract``:
pipeline, catalog, targets, retention...), which ``IcebergMaintenanceOperator`` writes to the pipeline's
staging before it submits; by hand, write one with ``MaintenanceSpec(...).to_json()``. For each table it
compacts data files, rewrites position deletes, expires snapshots (keeping every snapshot back to the
newest apply commit, which records the applied window and GTID set) and removes orphan files, then writes
the ``MaintenanceReport``. The logic is ``airflow_provider_mysql_cdc.apply.table_maintenance``.
Exit status: 0 every table maintained, 1 some table failed (the others were maintained), 2 bad input.
"""

from __future__ import annotations

import sys

from airflow_provider_mysql_cdc.apply.table_maintenance import main

if __name__ == "__main__":
    sys.exit(main())
