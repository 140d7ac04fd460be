"""One retention cycle over a set of streams, on the engine asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from retention.cycle import local, spark
from retention.cycle.buckets import bucket_tasks
from retention.cycle.gathering import streams_with_policy
from retention.cycle.outcomes import CycleSummary, Report, StreamOutcome
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
    report: Report | None = None,
) -> CycleSummary:
    """One cycle over `streams` (default: every stream with a policy, by scope and name; given
    streams are loaded again, and one without a policy is left out), in buckets of streams
    (`buckets`): one after another in this process (`local`), or each a Spark task in an
    executor (`spark`).

    Memory stays flat whatever the fleet's size: the cycle lists the streams' ids, and a bucket
    loads its streams where it runs; the outcomes go to `report` a bucket at a time, in the
    streams' order, and only when asked for (a fleet's cycle keeps the counts)."""
    now = now or timezone.now()
    ids = _target_ids(streams)
    progress = _once_each(progress)
    summary = CycleSummary()
    on_spark = choose_engine(engine, len(ids)) == "spark"
    slots = spark.slots() if on_spark else None
    buckets = bucket_tasks(ids, now, trigger, user, outcomes=report is not None, slots=slots)

    def sink(counts: CycleSummary, outcomes: list[StreamOutcome] | None) -> None:
        summary.merge(counts)
        if report is not None and outcomes is not None:
            report(outcomes)

    (spark if on_spark else local).run(buckets, len(ids), progress, sink)
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
