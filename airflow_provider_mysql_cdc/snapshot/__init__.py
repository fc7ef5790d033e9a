"""Consistent snapshots of MySQL tables, staged like binlog windows (rows with ``_cdc_op = 'r'``)."""
