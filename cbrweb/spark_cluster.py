"""A standalone Spark cluster on this machine (one master, one worker on 127.0.0.1), from the
pyspark package alone: no Spark download, no Hadoop. For trying the Spark engine against a real
cluster master; the integration tests and the benchmarks start theirs with it too.

    python -m cbrweb.spark_cluster start [--cores 2] [--memory 4g]
    SPARK_MASTER=spark://127.0.0.1:7077 PYSPARK_PYTHON=$PWD/.venv/bin/python \\
        python manage.py run_retention_cycle --engine spark
    python -m cbrweb.spark_cluster stop

The master and worker are `spark-class org.apache.spark.deploy.{master.Master,worker.Worker}` from
pyspark's own `bin/`, with SPARK_HOME set to the package; logs and pids go to var/spark/. The
worker runs its executors in a work directory outside the repository (the executors get CBR's
code from the driver, docs/cluster.md), and their Python is this interpreter (PYSPARK_PYTHON).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Cluster:
    state: Path  # logs and pids
    work: Path  # the worker's work directory: where executors start
    port: int = 7077
    master_ui: int = 8090
    worker_ui: int = 8091

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"


def default_cluster() -> Cluster:
    state = ROOT / "var" / "spark"
    return Cluster(state, Path(tempfile.gettempdir()) / "cbr-spark-work")


def _spark_class(cluster: Cluster, name: str, *args: str) -> subprocess.Popen:
    cluster.state.mkdir(parents=True, exist_ok=True)
    cluster.work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "SPARK_LOG_DIR": str(cluster.state),
        "SPARK_WORKER_DIR": str(cluster.work),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    log = open(cluster.state / f"{name.rsplit('.', 1)[-1].lower()}.log", "w")
    return subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), name, *args],
        env=env,
        cwd=cluster.work,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_port(cluster: Cluster, port: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}; see {cluster.state}/*.log")


def start(cluster: Cluster, cores: int = 2, memory: str = "4g") -> None:
    """Start the master and one worker of `cores` cores; return once both listen."""
    master = _spark_class(
        cluster,
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", str(cluster.port), "--webui-port", str(cluster.master_ui)),
    )
    (cluster.state / "pids").write_text(f"{master.pid}\n")
    _wait_port(cluster, cluster.port)
    worker = _spark_class(
        cluster,
        "org.apache.spark.deploy.worker.Worker",
        cluster.master,
        *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port", str(cluster.worker_ui)),
    )
    (cluster.state / "pids").write_text(f"{master.pid} {worker.pid}\n")
    _wait_port(cluster, cluster.worker_ui)
    _wait_registered(cluster)


def _wait_registered(cluster: Cluster, timeout: float = 60) -> None:
    """Until the master's log says the worker registered (it takes executors from then on)."""
    deadline = time.monotonic() + timeout
    log = cluster.state / "master.log"
    while time.monotonic() < deadline:
        if log.exists() and "Registering worker" in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the worker did not register with the master; see {cluster.state}/*.log")


def stop(cluster: Cluster) -> int:
    """Stop the master and the worker (and the executors the worker started); how many."""
    pids_file = cluster.state / "pids"
    pids = pids_file.read_text().split() if pids_file.exists() else []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid), signal.SIGTERM)
    pids_file.unlink(missing_ok=True)
    return len(pids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--cores", type=int, default=2, help="the worker's cores")
    parser.add_argument("--memory", default="4g", help="the worker's memory for executors")
    args = parser.parse_args()
    cluster = default_cluster()
    if args.action == "start":
        start(cluster, args.cores, args.memory)
        print(f"master {cluster.master} (UI http://127.0.0.1:{cluster.master_ui}), worker {args.cores} cores")
    else:
        print(f"stopped {stop(cluster)} process(es)")


if __name__ == "__main__":
    main()
