"""The Spark engine: each of the cycle's buckets is a Spark task that does the bucket's whole
work in an executor (`buckets.run_bucket`: lock, gather, decide, apply), so a cycle gets faster
with every executor core. The driver only lists the buckets and sums what they send back. The
project's code reaches the executors with the job (`spark_tasks.shipping`), and Django is set up
there from the driver's settings (`spark_tasks.executors`)."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from retention.cycle.buckets import Bucket
from retention.cycle.local import Sink
from spark_tasks import load_executors


def slots() -> int:
    """The executor cores the cycle's buckets are spread over (one on SQLite, which takes one
    writer at a time, so its buckets run in one task)."""
    if connection.vendor == "sqlite":
        return 1
    return load_executors().executor_slots()


def run(buckets: list[Bucket], total: int, progress: Callable[[int, int], None] | None, sink: Sink) -> None:
    """All buckets in one Spark job; `progress(done, total)` while it runs (streams of the buckets
    done so far); the counts and outcomes to `sink` in the buckets' order once it ends."""
    sizes = [len(b["ids"]) for b in buckets]

    def buckets_done(n: int) -> None:
        if progress:
            progress(min(total, sum(sorted(sizes)[:n])), total)  # at least this many streams

    answers = load_executors().run_in_executors(
        "retention.cycle.buckets:run_bucket",
        list(buckets),
        progress=buckets_done,
        parallel=connection.vendor != "sqlite",  # SQLite takes one writer at a time
    )
    for summary, outcomes in answers:
        sink(summary, outcomes)
    if progress:
        progress(total, total)
