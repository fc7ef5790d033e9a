"""The suite's Spark JVMs start from its class-data-sharing archive (:mod:`tests.jvm_class_archive`).

The JVM drops an archive without an error (a warning, which the suite turns off) when its class path
does not match, or when a directory on it is not empty, such as ``$SPARK_CONF_DIR``: this test is what
notices, by reading where a spark-submit's JVM loaded its main class from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import JVM_CLASS_ARCHIVE
from tests.jvm_class_archive import EMPTY_SPARK_CONF_DIR

pytestmark = pytest.mark.spark


def test_a_spark_submit_of_the_suite_loads_spark_from_the_class_archive(tmp_path: Path) -> None:
    if os.environ.get("MYSQL_CDC_TEST_JVM_CLASS_ARCHIVE") == "0":
        pytest.skip("MYSQL_CDC_TEST_JVM_CLASS_ARCHIVE=0: the suite runs without the archive")
    assert JVM_CLASS_ARCHIVE is not None and JVM_CLASS_ARCHIVE.is_file(), "the suite made no JVM class archive"
    assert os.environ["SPARK_CONF_DIR"] == str(EMPTY_SPARK_CONF_DIR)
    assert list(EMPTY_SPARK_CONF_DIR.iterdir()) == [], "a file in $SPARK_CONF_DIR turns the archive off"
    job = tmp_path / "job.py"
    job.write_text("print('job ran')\n", encoding="utf-8")
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("spark-submit")),
            "--master",
            "local[1]",
            "--conf",
            "spark.driver.extraJavaOptions=-Xlog:class+load=info",
            str(job),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "job ran" in result.stdout
    (loaded,) = [line for line in result.stdout.splitlines() if " org.apache.spark.deploy.SparkSubmit " in line]
    assert "source: shared objects file (top)" in loaded, loaded
