"""Spark jobs: one module per job, plus session.py, the only place that builds a SparkSession.

pyspark (and pandas with it) loads only in a process that runs a job, never in a web process:
the apps reach the jobs and the session through the functions below, which import them when
first called. These functions are the project's one exception to "imports at module top"
(pyproject.toml names this file; docs/architecture.md says why)."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def load_compaction_job() -> ModuleType:
    from spark_tasks import compaction_job

    return compaction_job


def load_executors() -> ModuleType:
    from spark_tasks import executors

    return executors


def load_tier_io() -> ModuleType:
    from spark_tasks import tier_io

    return tier_io


def spark_session() -> Any:
    """The process's shared SparkSession (`session.get_spark`), started on first use."""
    from spark_tasks.session import get_spark

    return get_spark()


def scheduler_pool(name: str | None) -> None:
    """`session.scheduler_pool`: this thread's Spark jobs go to that pool."""
    from spark_tasks.session import scheduler_pool as use

    use(name)
