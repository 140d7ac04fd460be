"""Run a function of the project over a list of tasks in Spark's executors, one Spark task per
task, with Django set up there: the way a cycle's heavy work (a retention bucket: lock, gather,
decide, apply) reaches every executor core of a cluster.

The function is named by its dotted path (`"retention.cycle.buckets:run_bucket"`), not passed as
an object: unpickling a function of an app would import the app's models before Django is set
up in the executor. Tasks and answers are plain data for the same reason on the way in.

An executor's Python sets Django up once, from the `context` the driver sends with the job
(`driver_context`): the settings module, the database, Redis, the segment store's directory (not
without a shared store, `CBR_SPARK_SHARED_STORE`: then an executor never opens one) and every
`CBR_*` setting of the driver, so executors need no configuration of their own beyond what
reaches them (the services and the store). A task given as a dict also gets `attempt`: 0, or which retry of the Spark task this is.
Between tasks, an executor closes its database
connections: a cluster's hundreds of executor cores must not each keep one open (docs/cluster.md
on pooling)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any
from urllib.parse import quote

import django
from django.conf import settings
from django.db import connections
from pyspark import TaskContext

from spark_tasks.session import get_spark

_set_up = False


def database_url(db: Mapping[str, Any]) -> str:
    """A Django database's settings as the URL `DATABASE_URL` takes (user, password and name
    quoted; `sslmode` kept)."""
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    url = f"postgres://{auth}@{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{quote(db['NAME'])}"
    if db.get("OPTIONS", {}).get("sslmode"):
        url += f"?sslmode={quote(db['OPTIONS']['sslmode'])}"
    return url


def driver_context() -> dict:
    """What an executor needs to set Django up as this process has it: environment for
    `django.setup()`, and the settings to apply before each task (this process's, which tests
    and commands may have changed since start)."""
    shared = settings.CBR_SPARK_SHARED_STORE  # else the executors' own CBR_DATA_DIR, never opened
    env = {
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "cbrweb.settings"),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "REDIS_URL": settings.REDIS_URL,
        **({"CBR_DATA_DIR": str(settings.CBR_DATA_DIR)} if shared else {}),
        **{k: v for k, v in os.environ.items() if k.startswith("CBR_") and k not in ("CBR_DATA_DIR",)},
    }
    overrides = {
        name: getattr(settings, name)
        for name in dir(settings)
        if name.startswith("CBR_")
        and (shared or name != "CBR_DATA_DIR")
        and isinstance(getattr(settings, name), (str, int, float, bool, Path, type(None)))
    }
    overrides["REDIS_URL"] = settings.REDIS_URL
    return {"env": env, "settings": overrides}


def executor_slots(spark=None) -> int:
    """How many tasks the session's executors run at once: their cores (Spark's default
    parallelism: the cores of the executors registered, or of `local[N]`)."""
    return max(1, (spark or get_spark()).sparkContext.defaultParallelism)


def run_in_executors(
    function: str, tasks: list, *, progress: Callable[[int], None] | None = None, parallel: bool = True, spark=None
) -> list:
    """`function(task)` for each task, each a Spark task of its own (retried by Spark where a
    cluster retries tasks; speculation is off, see `session`), the answers in the tasks' order.
    `progress(n)` every half second or so while the job runs, n the tasks done. Not `parallel`:
    one Spark task runs them all in turn (SQLite takes one writer at a time)."""
    if not tasks:
        return []
    spark = spark or get_spark()
    sc = spark.sparkContext
    context = driver_context()
    done = sc.accumulator(0)

    def run(task):  # in an executor
        answer = _call(function, context, task)
        done.add(1)
        return answer

    job = sc.parallelize(tasks, len(tasks) if parallel else 1).map(run)
    if progress is None:
        return job.collect()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cbr-spark-job") as pool:
        answer = pool.submit(job.collect)
        while wait([answer], timeout=0.5).not_done:
            progress(done.value)
        return answer.result()


def _call(function: str, context: dict, task: Any) -> Any:
    """In an executor's Python: Django set up (once per process), the driver's settings applied,
    then the function; the database connections closed after it."""
    global _set_up
    if not _set_up:
        for name, value in context["env"].items():
            os.environ[name] = value
        django.setup()
        _set_up = True
    for name, value in context["settings"].items():
        setattr(settings, name, value)
    task_context = TaskContext.get()
    if isinstance(task, dict) and task_context is not None:
        task = {**task, "attempt": task_context.attemptNumber()}  # a retry may find its work begun
    module, _, name = function.partition(":")
    try:
        return getattr(importlib.import_module(module), name)(task)
    finally:
        connections.close_all()
