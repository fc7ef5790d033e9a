"""spark-submit application: MERGE a pipeline's staged snapshots and windows into Iceberg tables.

    spark-submit --jars <iceberg runtime jar> \\
        --conf spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions \\
        --conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog \\
        --conf spark.sql.catalog.lake.type=hadoop --conf spark.sql.catalog.lake.warehouse=/data/warehouse \\
        spark_apps/apply_changes.py --spec /data/staging/shop/apply-specs/run-1-try1.json

``--spec`` is the URI of an ``ApplySpec`` JSON document (``airflow_provider_mysql_cdc.apply.contract``:
pipeline, staging URI, windows, catalog name, target template, ...), which ``SparkApplyOperator``
writes to the pipeline's staging before it submits; by hand, write one with ``ApplySpec(...).to_json()``.
The logic is ``airflow_provider_mysql_cdc.apply.spark_job`` (the Spark driver needs the package
installed, or shipped with ``--py-files``); ``SparkApplyOperator`` submits the same entry point.
Exit status: 0 every table applied, 1 some table failed (the others were applied), 2 bad input.
"""

from __future__ import annotations

import sys

from airflow_provider_mysql_cdc.apply.spark_job import main

if __name__ == "__main__":
    sys.exit(main())
