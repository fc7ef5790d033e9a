"""Binlog capture: reading a MySQL binlog window by window."""
