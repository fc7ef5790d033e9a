"""Pure logic shared by the Airflow operators and the Spark apps: no Airflow, Spark or network import."""
