"""A standalone Spark cluster (one master, one worker) on 127.0.0.1, from the pyspark package alone:
no Spark download, no Hadoop. For running the Spark engine against a real cluster master.

    python bench/spark_standalone.py start      # master spark://127.0.0.1:7077, worker with 2 cores
    SPARK_MASTER=spark://127.0.0.1:7077 PYSPARK_PYTHON=$PWD/.venv/bin/python \\
        python bench/retention.py --master spark://127.0.0.1:7077 --sizes 100000
    python bench/spark_standalone.py stop

The master and worker are `spark-class org.apache.spark.deploy.{master.Master,worker.Worker}` from
pyspark's own `bin/`, with SPARK_HOME set to the pyspark package; logs and pids go to var/spark/.
Executors run PYSPARK_PYTHON (this project's interpreter), which must have pandas, pyarrow, orjson.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
from _common import ROOT

SPARK_HOME = Path(pyspark.__file__).parent
STATE = ROOT / "var" / "spark"
MASTER_PORT, MASTER_UI, WORKER_UI = 7077, 8090, 8091


def _spark_class(name: str, *args: str) -> subprocess.Popen:
    STATE.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(STATE),
        "SPARK_WORKER_DIR": str(STATE / "work"),
    }
    log = open(STATE / f"{name.rsplit('.', 1)[-1].lower()}.log", "w")
    return subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), name, *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}; see {STATE}/*.log")


def start(cores: int = 2, memory: str = "4g") -> None:
    master = _spark_class(
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        str(MASTER_PORT),
        "--webui-port",
        str(MASTER_UI),
    )
    _wait_port(MASTER_PORT)
    worker = _spark_class(
        "org.apache.spark.deploy.worker.Worker",
        f"spark://127.0.0.1:{MASTER_PORT}",
        "--host",
        "127.0.0.1",
        "--cores",
        str(cores),
        "--memory",
        memory,
        "--webui-port",
        str(WORKER_UI),
    )
    _wait_port(WORKER_UI)
    (STATE / "pids").write_text(f"{master.pid} {worker.pid}\n")
    print(f"master spark://127.0.0.1:{MASTER_PORT} (UI http://127.0.0.1:{MASTER_UI}), worker {cores} cores, {memory}")


def stop() -> None:
    pids = (STATE / "pids").read_text().split() if (STATE / "pids").exists() else []
    for pid in pids:
        try:
            os.killpg(int(pid), signal.SIGTERM)
        except ProcessLookupError:
            pass
    (STATE / "pids").unlink(missing_ok=True)
    print(f"stopped {len(pids)} process(es)")


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1] if len(sys.argv) > 1 else "start"]()
