"""How a CBR web server starts, in one place (`make run`, the integration tests, the benchmarks):
gunicorn's process management with uvicorn's worker, serving `cbrweb.asgi` (the Django application
behind the front that parks waiting reads, `cbrweb.front`). `CBR_WEB_THREADS` sets each process's
threads."""

from __future__ import annotations

import sys

WORKER_CLASS = "uvicorn_worker.UvicornWorker"
APPLICATION = "cbrweb.asgi:application"


def command(bind: str, workers: int | str, *extra: str) -> list[str]:
    """The command line of a web server on `bind` (`host:port`) with `workers` processes."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        APPLICATION,
        "-c",
        "python:cbrweb.gunicorn_conf",
        "-b",
        bind,
        "-w",
        str(workers),
        "-k",
        WORKER_CLASS,
        *extra,
    ]
