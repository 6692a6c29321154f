"""One SparkSession for every bench test (one JVM start for the whole run)."""

import importlib.util
import shutil

import pytest


@pytest.fixture(scope="session")
def spark_installed(require_external):
    """PySpark and Java, or a skip (a failure under CI)."""
    require_external(
        "PySpark", importlib.util.find_spec("pyspark") is not None, "pip install -e '.[bench]'"
    )
    require_external("Java", shutil.which("java") is not None, "install a JDK 17 (apt: openjdk-17)")


@pytest.fixture(scope="session")
def spark(spark_installed):
    from bench.aggregate import spark_session

    session = spark_session()
    yield session
    session.stop()
