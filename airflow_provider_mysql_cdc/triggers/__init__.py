"""Triggers of the MySQL CDC provider (run in Airflow's triggerer for deferrable sensors)."""
