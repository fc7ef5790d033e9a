"""Metadata tables (SQLAlchemy Core): the source of truth for frontiers and windows between runs."""
