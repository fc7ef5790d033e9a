"""The project's test bed: local servers the tests, the demo and the benchmarks run against.

Not part of the provider wheel (``pyproject.toml`` packages only ``airflow_provider_mysql_cdc``);
it is imported from a checkout of the repository, whose root is on ``sys.path``.
"""
