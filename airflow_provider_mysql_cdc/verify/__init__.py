"""Verify: compare Iceberg targets with their MySQL tables as of one GTID set, without stopping writes.

:mod:`.ranges` and :mod:`.report` are pure (range planning, checksum comparison, the report);
:mod:`.spark_checks` is the Spark side (the target brought to the source's GTID set in memory, range
checksums, the row-by-row comparison); :mod:`.engine` runs it all (no Airflow import).
"""

from __future__ import annotations

#: Server id a verification's binlog reader announces by default: another than the capture's, so the
#: two never disconnect each other.
DEFAULT_VERIFY_SERVER_ID = 4_000_091
