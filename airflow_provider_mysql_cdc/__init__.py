"""Apache Airflow provider for batch change-data-capture from MySQL into Iceberg tables.

Kept light on purpose: importing the package (as Airflow's provider discovery does) imports
neither Airflow nor any database driver.
"""

from __future__ import annotations

__version__ = "0.1.0"
