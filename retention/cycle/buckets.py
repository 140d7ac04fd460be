"""A cycle's unit of work: a bucket of streams (as Pravega spreads retention over stream
buckets). `run_bucket` does a bucket's whole work, batch by batch: lock, gather from the database
and the store, decide, apply (record, move the heads, delete the chunks behind them, complete),
then make this host's head moves durable. The local engine runs the buckets one after another in
this process; the Spark engine runs each as a Spark task in an executor. One implementation.

A bucket travels as plain data (`bucket_tasks`): an executor unpickles it before Django is set
up there. Its `task` names it within its cycle, and the retention locks it takes carry that name:
a retry of the bucket (Spark retries a task whose executor died) takes them over at once and
finishes what the first attempt began; applying is idempotent (a truncation is recorded before
the store is touched, and the next attempt completes it; a head never moves back)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import NotRequired, TypedDict

from django.conf import settings
from django.contrib.auth import get_user_model

from domain.retention import considered, decide
from retention.cycle import gathering
from retention.cycle.applying import apply_batch
from retention.cycle.gathering import load_streams, prepared_batches
from retention.cycle.outcomes import CycleSummary, StreamOutcome, skipped
from streams.logs import segment_store

BUCKET = 2_000  # streams a bucket holds at most (4 batches)
TASKS_PER_SLOT = 4  # on Spark, buckets per executor core at least, while a bucket holds a batch


def bucket_size(streams: int, slots: int | None) -> int:
    """Streams per bucket for a cycle over `streams` streams run by `slots` executor cores (None:
    in this process, one bucket after another). On Spark the buckets are made small enough that
    every core gets several (a cluster's cores all work, and the last buckets even out between
    them), but never smaller than one batch (a bucket's fixed costs: its task, its sync)."""
    if slots is None:
        return BUCKET
    return min(BUCKET, max(gathering.BATCH, -(-streams // (slots * TASKS_PER_SLOT))))


class Bucket(TypedDict):
    index: int
    ids: list[int]
    now: datetime
    interval: float
    trigger: str
    user: int | None
    batch: int  # streams locked, gathered and applied at a time (`gathering.BATCH`)
    task: str  # the bucket's name in its cycle, carried by the locks it takes
    outcomes: bool  # send back every stream's outcome, or only the counts
    attempt: NotRequired[int]  # set by the Spark engine: 0, or which retry of the task this is


def bucket_tasks(
    ids: list[int], now: datetime, trigger: str, user, outcomes: bool, slots: int | None = None
) -> list[Bucket]:
    """The cycle's streams in buckets (`bucket_size`), in the streams' order."""
    cycle = uuid.uuid4().hex[:12]
    user_id = user.pk if user is not None and user.is_authenticated else None
    size = bucket_size(len(ids), slots)
    return [
        Bucket(
            index=k,
            ids=ids[start : start + size],
            now=now,
            interval=settings.CBR_RETENTION_INTERVAL,
            trigger=trigger,
            user=user_id,
            batch=gathering.BATCH,
            task=f"cycle-{cycle}/{k}",
            outcomes=outcomes,
        )
        for k, start in enumerate(range(0, len(ids), size))
    ]


def run_bucket(
    bucket: Bucket, batch_done: Callable[[int], None] | None = None
) -> tuple[CycleSummary, list[StreamOutcome] | None]:
    """A bucket's whole work; its counts, and its outcomes in the streams' order when asked.
    `batch_done(n)` after each batch, n the streams done so far. Streams deleted since the cycle
    listed them are not there."""
    user = get_user_model().objects.filter(pk=bucket["user"]).first() if bucket["user"] else None
    outcomes = run_streams(
        load_streams(bucket["ids"]),
        bucket["now"],
        bucket["interval"],
        bucket["trigger"],
        user,
        task=bucket["task"],
        batch=bucket["batch"],
        retry=bucket.get("attempt", 0) > 0,
        batch_done=batch_done,
    )
    summary = CycleSummary()
    summary.add(outcomes)
    if summary.truncations:
        # batches sync only before deleting chunks; this bucket's other head moves become
        # durable here, on the host that made them (see `truncate_many`)
        segment_store().sync()
    return summary, (outcomes if bucket["outcomes"] else None)


def run_streams(
    targets, now, interval, trigger, user, *, task=None, batch=None, retry=False, batch_done=None
) -> list[StreamOutcome]:
    """Lock, gather, decide and apply batch by batch; `batch_done(n)` after each batch, n the
    streams done so far."""
    outcomes: list[StreamOutcome] = []
    for streams, locks, prepared in prepared_batches(targets, now, interval, task, batch):
        try:
            outcomes += skipped(streams, locks.held, "skipped:locked-by-another-cycle")
            items = []
            for p in prepared:
                decision = decide(p.inputs)
                items.append((p, decision, considered(p.inputs, decision)))
            outcomes += apply_batch(items, now, trigger, user, retry)
        finally:
            locks.release()
        if batch_done:
            batch_done(len(outcomes))
    return outcomes
