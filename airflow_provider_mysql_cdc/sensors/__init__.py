"""Sensors of the MySQL CDC provider."""
