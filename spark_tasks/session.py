"""The one place that builds a SparkSession (docs/design/scaling.md). A process keeps its session and reuses
it: starting one costs seconds. The master comes from SPARK_MASTER (`local[*]` by default). Every
session ships the project's code to its executors (`shipping`), and runs no speculative task:
a task that applies truncations must run once at a time (a retry after a failure is safe)."""

from __future__ import annotations

import logging
import os
import sys
import threading

from django.conf import settings
from pyspark.sql import SparkSession

from spark_tasks.shipping import ship

# py4j logs each closed connection at INFO, also from __del__ at interpreter exit.
logging.getLogger("py4j").setLevel(logging.WARNING)

_lock = threading.Lock()
_session = None


def get_spark(master: str | None = None):
    global _session
    with _lock:
        if _session is not None:
            return _session
        if master is None:
            try:
                master = settings.SPARK_MASTER
            except Exception:  # used outside Django (tests of pure jobs, benchmarks)
                master = os.environ.get("SPARK_MASTER", "local[*]")
        if master.startswith("local"):
            # Python workers run on this interpreter, with the project's packages. A cluster's
            # executors need their own Python with pandas, pyarrow and orjson (PYSPARK_PYTHON).
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        _session = (
            SparkSession.builder.master(master)
            .appName("cbr")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", os.environ.get("CBR_SPARK_DRIVER_MEMORY", "1g"))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.speculation", "false")
            # jobs of different threads (streams compacted at once) share the executors fairly
            # instead of queueing behind one another (`scheduler_pool`)
            .config("spark.scheduler.mode", "FAIR")
            .getOrCreate()
        )
        _session.sparkContext.setLogLevel("ERROR")
        ship(_session)
        return _session


def scheduler_pool(name: str | None) -> None:
    """The Spark scheduler pool of the jobs this thread submits from now on (None: the default
    pool). Under the FAIR mode the session runs in, pools share the executors evenly: threads
    that each run their own jobs in their own pool (several streams compacted at once) all make
    progress, and a small job is not stuck behind a big one."""
    get_spark().sparkContext.setLocalProperty("spark.scheduler.pool", name)


def stop_spark() -> None:
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
