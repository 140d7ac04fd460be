"""A real Celery worker process, sharing the test database, Redis and a segment store directory
with the test process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from cbrweb import web
from cbrweb.celery import app

ROOT = Path(__file__).resolve().parents[2]
WORKER_CHUNK_BYTES = 4096


def _database_url(db: dict) -> str:
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@dataclass
class Worker:
    broker_url: str
    data_dir: Path


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, test_broker, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("worker-data")
    broker = test_broker
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": broker,
        "CBR_DATA_DIR": str(data_dir),
        "CBR_CHUNK_BYTES": str(WORKER_CHUNK_BYTES),
        "CBR_COMPACTION_WARM_UP": "0",  # tested in tests/compaction; here it would only cost CPU
    }
    log = open(data_dir.parent / "worker.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "cbrweb",
            "worker",
            "--pool",
            "solo",
            "-Q",
            "celery,compaction",
            "-l",
            "info",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while not app.control.ping(destination=None, timeout=1) or proc.poll() is not None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(
                f"the Celery worker did not start: {(data_dir.parent / 'worker.log').read_text()[-2000:]}"
            )
    yield Worker(broker, data_dir)
    proc.terminate()
    proc.wait(20)
    log.close()
    with django_db_blocker.unblock():
        _wait_for_other_sessions_to_close(connection)


def _wait_for_other_sessions_to_close(connection, timeout: float = 15) -> None:
    """PostgreSQL ends a dead client's backend a moment later; the test database can only be
    dropped once it has."""
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if cur.fetchone()[0] == 0:
                return
        time.sleep(0.1)


@dataclass
class WebServer:
    """The real web server (gunicorn, two processes), on the test database, Redis and segment
    store; `kill()` is a kill -9 of all of it, `start()` brings it back."""

    env: dict
    port: int
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            web.command(f"127.0.0.1:{self.port}", 2, "--graceful-timeout", "2"),
            cwd=ROOT,
            env={"CBR_WEB_THREADS": "4", **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/login/", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"the web server did not start: {self.log_path.read_text()[-2000:]}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web_server(django_db_setup, django_db_blocker, settings, data_dir, tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(data_dir),
        "CBR_VAR_DIR": str(tmp_path / "var"),
    }
    server = WebServer(env, _free_port(), tmp_path / "web.log")
    server.start()
    yield server
    server.kill()
    with django_db_blocker.unblock():
        _wait_for_other_sessions_to_close(connection)
