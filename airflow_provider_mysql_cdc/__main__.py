"""``python -m airflow_provider_mysql_cdc``: command-line entry points (see ``--help``)."""

from __future__ import annotations

from airflow_provider_mysql_cdc.cli import main

raise SystemExit(main())
