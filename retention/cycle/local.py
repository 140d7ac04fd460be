"""The local engine: the cycle's buckets one after another in this process (`buckets.run_bucket`,
the function the Spark engine runs in executors). On one machine with several cores, the Spark
engine on `local[*]` is the parallel one."""

from __future__ import annotations

from collections.abc import Callable

from retention.cycle.buckets import Bucket, run_bucket
from retention.cycle.outcomes import CycleSummary, StreamOutcome

Sink = Callable[[CycleSummary, list[StreamOutcome] | None], None]


def run(buckets: list[Bucket], total: int, progress: Callable[[int, int], None] | None, sink: Sink) -> None:
    """Each bucket in turn; its counts and outcomes to `sink` as it ends; `progress(done, total)`
    after each batch, in streams."""
    start = 0
    for bucket in buckets:
        batch_done = (lambda n, start=start: progress(start + n, total)) if progress else None
        sink(*run_bucket(bucket, batch_done))
        start += len(bucket["ids"])
        if progress:
            progress(start, total)  # streams gone since they were listed count as done
