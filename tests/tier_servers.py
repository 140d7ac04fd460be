"""An S3-compatible server for the tier tests: moto's server (from PyPI), started on a free port in
its own process, once per test process, and stopped at its end. Each test gets a bucket of its
own, so tests never see each other's objects."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import boto3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's server on 127.0.0.1; `env` is what a client needs (the standard AWS variables)."""

    def __init__(self, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "cbr-tests",
            "AWS_SECRET_ACCESS_KEY": "cbr-tests",
        }
        self._log = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/", timeout=1).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's server did not start: see {log}") from None
                time.sleep(0.1)

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=self.env["AWS_DEFAULT_REGION"],
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
        )

    def new_bucket(self) -> str:
        name = f"cbr-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._log)
