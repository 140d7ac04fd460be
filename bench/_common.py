"""Helpers shared by the benchmark scripts: the machine's description and a temporary server."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cbrweb import web  # noqa: E402  (the project, from the path above)

# Celery's Django fix-up (set up by the import above) put the working directory first on the
# path: run from bench/, the project's `retention` package was then this directory's
# retention.py. The project goes first again.
sys.path.remove(str(ROOT))
sys.path.insert(0, str(ROOT))


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def in_process_environment(prefix: str, database: str, redis_db: int) -> Path:
    """For a benchmark that runs the application in its own process: the environment the
    settings read (`DATABASE_URL` and `REDIS_URL` unless set already: a fresh PostgreSQL database
    `database` on 127.0.0.1, Redis database `redis_db`), that database made afresh, that Redis
    database flushed, and a temporary data directory under var/ (returned: the caller removes it)."""
    work = Path(tempfile.mkdtemp(dir=ROOT / "var", prefix=prefix))
    os.environ.setdefault("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{database}")
    os.environ.setdefault("REDIS_URL", f"redis://127.0.0.1:6379/{redis_db}")
    os.environ["CBR_DATA_DIR"] = str(work / "data")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only")
    os.environ.setdefault("CBR_LOG_LEVEL", "WARNING")
    os.environ["DJANGO_SETTINGS_MODULE"] = "cbrweb.settings"
    url = os.environ["DATABASE_URL"]
    if url.startswith("postgres"):
        import psycopg

        base, name = url.rsplit("/", 1)
        with psycopg.connect(base + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    return work


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def manage(env: dict, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout


@dataclass(frozen=True)
class Server:
    port: int
    token: str
    pid: int  # gunicorn's master
    path: str  # the stream's events endpoint


@contextmanager
def web_server(
    stream: str, segments: int, gunicorn_args: Sequence[str] = (), workers: int = 2, threads: int = 2
) -> Iterator[Server]:
    """The web server (`cbrweb.web`: `workers` processes of `threads` threads) serving a fresh data
    directory (and a fresh SQLite database unless DATABASE_URL is set), with one stream
    `bench/<stream>` of `segments` segments and an admin's token; all removed afterwards."""
    (ROOT / "var").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=ROOT / "var"))
    port = 18000 + os.getpid() % 1000
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "CBR_DATA_DIR": str(work / "data"),
        "DJANGO_SECRET_KEY": "bench-only",
        "CBR_LOG_LEVEL": "WARNING",
        "CBR_WEB_THREADS": str(threads),
    }
    if "DATABASE_URL" not in os.environ:
        env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
    manage(env, "migrate", "--noinput")
    token = manage(
        env,
        "shell",
        "-c",
        (
            "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
            "from streams.services import do_create_stream;"
            "u, _ = User.objects.get_or_create(username='bench', defaults={'is_staff': True});"
            f"do_create_stream(scope='bench', name='{stream}', segment_count={segments});"
            "print(Token.objects.get_or_create(user=u)[0].key)"
        ),
    ).split()[-1]
    server = subprocess.Popen(
        web.command(f"127.0.0.1:{port}", workers, *gunicorn_args, "--log-level", "warning"),
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/login/")
        yield Server(port, token, server.pid, f"/api/v1/streams/bench/{stream}/events/")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)
        subprocess.run(["rm", "-rf", str(work)])


def cpu_seconds(procs) -> float:
    """User + system CPU seconds used so far by the psutil processes `procs` (those gone skipped)."""
    import psutil

    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def postgres_cpu_seconds() -> float:
    """User + system CPU seconds used so far by PostgreSQL on this machine: its live processes,
    plus the backends that have exited (their time is added to the postmaster's children's). A
    sum over live processes alone can go down between two samples, as backends come and go."""
    import psutil

    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] not in ("postgres", "postmaster"):
            continue
        try:
            times = proc.cpu_times()
            total += times.user + times.system
            if proc.ppid() == 1 or proc.parent().name() not in ("postgres", "postmaster"):  # the postmaster
                total += times.children_user + times.children_system
        except psutil.Error:
            continue
    return total


class StandaloneCluster:
    """A standalone Spark cluster on this machine for a benchmark (`cbrweb.spark_cluster`: one
    master, one worker of `cores` cores, executors started outside the repository), and this
    process's Spark session moved onto it; `stop` ends both."""

    def __init__(self, cores: int, memory: str = "2g", executor_memory: str | None = None):
        from cbrweb import spark_cluster
        from spark_tasks.session import get_spark, stop_spark

        stop_spark()
        self.base = Path(tempfile.mkdtemp(prefix="cbr-bench-cluster-"))
        self.cluster = spark_cluster.Cluster(self.base / "state", self.base / "work", 17077, 18090, 18091)
        spark_cluster.start(self.cluster, cores=cores, memory=memory)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if executor_memory:  # as an operator would: spark-defaults.conf in SPARK_CONF_DIR
            conf = self.base / "conf"
            conf.mkdir()
            (conf / "spark-defaults.conf").write_text(f"spark.executor.memory {executor_memory}\n")
            os.environ["SPARK_CONF_DIR"] = str(conf)
        spark = get_spark(master=self.cluster.master)
        spark.sparkContext.parallelize(range(cores), cores).map(lambda x: x).collect()  # executors up

    def executor_processes(self) -> list:
        """The executors' processes (their JVM and Python workers): those whose directory is in
        the worker's work directory, not the master or the worker themselves."""
        import psutil

        found = []
        for proc in psutil.process_iter(["cwd", "cmdline"]):
            daemon = any("deploy.master" in p or "deploy.worker" in p for p in proc.info["cmdline"] or [])
            if (proc.info["cwd"] or "").startswith(str(self.cluster.work)) and not daemon:
                found.append(proc)
        return found

    def daemons(self) -> list:
        """The cluster's master and worker processes."""
        import psutil

        return [
            proc
            for proc in psutil.process_iter(["cmdline"])
            if any("deploy.master" in p or "deploy.worker" in p for p in proc.info["cmdline"] or [])
        ]

    def stop(self) -> None:
        import shutil

        from cbrweb import spark_cluster
        from spark_tasks.session import stop_spark

        stop_spark()
        spark_cluster.stop(self.cluster)
        shutil.rmtree(self.base, ignore_errors=True)
