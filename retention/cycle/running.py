"""One retention cycle over a set of streams, on the engine asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from retention.cycle import local, spark
from retention.cycle.gathering import streams_with_policy
from retention.cycle.outcomes import CycleSummary, Report, StreamOutcome
from store.store import sync_all
from streams.models import Stream


def choose_engine(engine: str, stream_count: int) -> str:
    if engine == "auto":
        return "spark" if stream_count >= settings.CBR_SPARK_MIN_STREAMS else "local"
    return engine


def run_cycle(**kwargs) -> list[StreamOutcome]:
    """`run_cycle_summary` with every stream's outcome, in the streams' order: for a cycle over
    a few streams (a command's `--stream`, tests). A fleet's cycle keeps only the summary."""
    outcomes: list[StreamOutcome] = []
    run_cycle_summary(report=outcomes.extend, **kwargs)
    return outcomes


def run_cycle_summary(
    *,
    now: datetime | None = None,
    streams: Iterable[Stream] | None = None,
    trigger: str = "beat",
    user=None,
    engine: str = "local",
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    report: Report | None = None,
) -> CycleSummary:
    """One cycle over `streams` (default: every stream with a policy, by scope and name; given
    streams are loaded again, and one without a policy is left out). A large cycle is
    spread over `workers` processes (`CBR_RETENTION_WORKERS`, see `process_count`): the local
    engine's whole work (`local.run`), the Spark engine's gathering and applying.

    Memory stays flat whatever the fleet's size: the cycle lists the streams' ids, and loads the
    streams a chunk at a time where they are gathered; the outcomes go to `report` a chunk at a
    time, in the streams' order, and are then dropped (at a million streams, the streams and
    outcomes held at once took 5.2 GB in the cycle's process, and its forked workers copied
    much of it as they read it)."""
    now = now or timezone.now()
    ids = _target_ids(streams)
    progress = _once_each(progress)
    workers = local.process_count(len(ids), workers)
    summary = CycleSummary()

    def sink(outcomes: list[StreamOutcome]) -> None:
        summary.add(outcomes)
        if report is not None:
            report(outcomes)

    engine_module = spark if choose_engine(engine, len(ids)) == "spark" else local
    engine_module.run(ids, now, trigger, user, progress, sink, workers)
    if summary.truncations:
        # batches sync only before deleting chunks; the cycle's other head moves become
        # durable here, once (see `truncate_many`)
        sync_all()
    return summary


def _once_each(progress):
    """`progress` called only when the count moved (a chunk's end is often its last batch's)."""
    if progress is None:
        return None
    last = [None]

    def moved(done: int, total: int) -> None:
        if done != last[0]:
            last[0] = done
            progress(done, total)

    return moved


def _target_ids(streams: Iterable[Stream] | None) -> list[int]:
    if streams is not None:
        return [s.pk for s in streams]
    return list(streams_with_policy().values_list("pk", flat=True))  # in Stream's order: scope, name
