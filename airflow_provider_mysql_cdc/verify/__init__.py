"""Verify: compare Iceberg targets with their MySQL tables as of one GTID set, without stopping writes.

:mod:`.ranges` and :mod:`.report` are pure (range planning, checksum comparison, the report);
:mod:`.spark_checks` is the Spark side (the target brought to the source's GTID set in memory, range
checksums, the row-by-row comparison); :mod:`.engine` runs it all (no Airflow import).
"""
