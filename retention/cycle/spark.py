"""The Spark engine: each of the cycle's buckets is a Spark task that does the bucket's whole
work in an executor (`buckets.run_bucket`: lock, gather, decide, apply), so a cycle gets faster
with every executor core. The driver only lists the buckets and sums what they send back. The
project's code reaches the executors with the job (`spark_tasks.shipping`), and Django is set up
there from the driver's settings (`spark_tasks.executors`).

Executors that do not see the data directory (`CBR_SPARK_SHARED_STORE=false`, a cluster without a
shared file system) plan instead (`buckets.plan_bucket`): the driver reads the streams' ends from
its store and ships them with the buckets, the executors lock, gather, decide and record, and the
driver applies what they recorded (`buckets.apply_plan`). The buckets go in waves of one per
executor core, the driver applying a wave while the executors plan the next; it holds the ends
of two waves' streams at most, each read just before its wave is planned."""

from __future__ import annotations

import gc
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import connection

from retention.cycle.buckets import Bucket, apply_plan
from retention.cycle.gathering import load_streams, no_automatic_gc, ship_ends
from retention.cycle.local import Sink
from retention.locks import Locks
from retention.truncation import finish_truncations, pending_truncations
from spark_tasks import load_executors


def slots() -> int:
    """The executor cores the cycle's buckets are spread over (one on SQLite, which takes one
    writer at a time, so its buckets run in one task)."""
    if connection.vendor == "sqlite":
        return 1
    return load_executors().executor_slots()


def run(buckets: list[Bucket], total: int, progress: Callable[[int, int], None] | None, sink: Sink) -> None:
    """All buckets in one Spark job (or, without a shared store, a job per wave); `progress(done,
    total)` while it runs (streams of the buckets done so far); the counts and outcomes to `sink`
    in the buckets' order."""
    if not settings.CBR_SPARK_SHARED_STORE:
        _run_planned(buckets, total, progress, sink)
        return
    answers = _job("retention.cycle.buckets:run_bucket", buckets, 0, total, progress)
    for summary, outcomes in answers:
        sink(summary, outcomes)
    if progress:
        progress(total, total)


def _job(function: str, buckets: list, before: int, total: int, progress) -> list:
    """One Spark job over these buckets; `progress` counts `before` streams done already."""
    sizes = sorted(len(b["ids"]) for b in buckets)

    def buckets_done(n: int) -> None:
        if progress:
            progress(min(total, before + sum(sizes[:n])), total)  # at least this many streams

    return load_executors().run_in_executors(
        function,
        list(buckets),
        progress=buckets_done,
        parallel=connection.vendor != "sqlite",  # SQLite takes one writer at a time
    )


def _run_planned(buckets: list[Bucket], total: int, progress, sink: Sink) -> None:
    """The buckets in waves of one per executor core; while the executors plan a wave, this
    process applies the one before (the two touch different streams), so the cycle takes about the
    longer of the two, not their sum."""
    wave = slots()
    waves = [buckets[start : start + wave] for start in range(0, len(buckets), wave)]
    done = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="cbr-retention-plan") as pool:

        def plan(part: list[Bucket]) -> Future:
            shipped = [_shipped(bucket) for bucket in part]
            # progress counts streams applied here: a wave's planning alone does none
            return pool.submit(lambda: (shipped, _job("retention.cycle.buckets:plan_bucket", shipped, 0, 0, None)))

        planning = plan(waves[0]) if waves else None
        for k in range(len(waves)):
            assert planning is not None
            part, plans = planning.result()
            planning = plan(waves[k + 1]) if k + 1 < len(waves) else None
            for bucket, answer in zip(part, plans):
                with no_automatic_gc():  # as a bucket's batches are gathered (`prepared_batches`)
                    sink(*apply_plan(bucket, answer))
                gc.collect(0)
                done += len(bucket["ids"])
                if progress:
                    progress(done, total)


def _shipped(bucket: Bucket) -> Bucket:
    """The bucket with its streams' ends read here; truncations a crash left half done finished
    first, under the streams' locks as a cycle finishes them (their heads are the ones to ship)."""
    streams = load_streams(bucket["ids"])
    pending = pending_truncations([s.pk for s in streams])
    if pending:
        locks = Locks.take([r.stream for r in pending])
        try:
            held = {s.pk for s in locks.held}
            finish_truncations([r for r in pending if r.stream_id in held])
        finally:
            locks.release()
    return {**bucket, "ends": ship_ends(streams)}
