"""The SparkSession the report runs on: loopback only, no web UI, any master.

`local[*]` runs Spark in this process's JVM. `local-cluster[N,cores,MB]` starts a master and
N worker JVMs on this machine, like a real cluster (tasks and shuffles cross processes).
Its workers start executors from `$SPARK_HOME` (its `jars/`) and keep their work folders
in `$SPARK_HOME/work`; without a SPARK_HOME, pip's pyspark is Spark's home, and rather than
write into the installed package, the session gets a private home in a temporary folder
(links to pyspark's `jars` and `bin`), removed when the process exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "LOOPBACK", "spark_running", "spark_session"]

log = logging.getLogger("bench.aggregate")

APP_NAME = "kcore-bench"
LOOPBACK = "127.0.0.1"
DEFAULT_MASTER = "local[*]"
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def spark_session(master: str = DEFAULT_MASTER) -> SparkSession:
    """A SparkSession on `master` that listens on loopback only and has no web UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark resolves the machine's hostname to pick its local address unless told; on a
    # host whose name maps to a public interface that would be where it binds.
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    if master.startswith("local-cluster") and "SPARK_HOME" not in os.environ:
        _private_spark_home()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    if master.startswith("local"):
        # One machine, short jobs: the JVMs' start and warm-up are most of the time, and
        # the quick JIT tier alone halves them (a local-cluster report: ~100 s -> ~50 s on
        # a busy 2-core machine). Set before the JVMs start, so only for sessions this
        # process starts.
        builder = builder.config("spark.driver.extraJavaOptions", QUICK_JIT).config(
            "spark.executor.extraJavaOptions", QUICK_JIT
        )
    spark = (
        builder.appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # stdout is the CLI's report
        .config("spark.sql.shuffle.partitions", str(_shuffle_partitions(master)))
        .config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
        .config("spark.sql.session.timeZone", "UTC")  # a run's date is its UTC date
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _shuffle_partitions(master: str) -> int:
    # Aggregates are small: a few partitions per core rather than Spark's 200 tasks of
    # nothing each.
    return max(2, 2 * (os.cpu_count() or 1)) if master.startswith("local") else 200


def spark_running() -> bool:
    """Whether this process already runs a SparkContext (the builder would reuse it)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def _private_spark_home() -> None:
    import pyspark

    installed = Path(pyspark.__file__).parent
    home = Path(tempfile.mkdtemp(prefix="kcore-spark-home-"))
    for name in ("jars", "bin", "conf"):
        if (installed / name).exists():
            (home / name).symlink_to(installed / name)
    os.environ["SPARK_HOME"] = str(home)
    log.info("local-cluster: Spark's home is %s (links to %s)", home, installed)

    def remove() -> None:
        if os.environ.get("SPARK_HOME") == str(home):
            del os.environ["SPARK_HOME"]
        shutil.rmtree(home, ignore_errors=True)

    atexit.register(remove)
