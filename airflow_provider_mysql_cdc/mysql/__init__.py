"""Glue to a live MySQL server (PyMySQL): connections and introspection. No Airflow import."""
