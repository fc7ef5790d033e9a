"""The change catalogue: every kind of change MySQL can make, MySQL compared with Iceberg after each window."""
