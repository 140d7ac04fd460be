"""A cycle's unit of work: a bucket of streams (as Pravega spreads retention over stream
buckets). `run_bucket` does a bucket's whole work, batch by batch: lock, gather from the database
and the store, decide, apply (record, move the heads, delete the chunks behind them, complete),
then make this host's head moves durable. The local engine runs the buckets one after another in
this process; the Spark engine runs each as a Spark task in an executor. One implementation.

Executors that do not see the data directory (`CBR_SPARK_SHARED_STORE=false`) run `plan_bucket`
instead: the same lock, gather and decide, from the streams' ends the driver read and shipped with
the bucket, the truncations recorded but not applied; the driver applies them (`apply_plan`, the
one truncation path) and runs the few streams whose gathering needed the store itself.

A bucket travels as plain data (`bucket_tasks`): an executor unpickles it before Django is set
up there. Its `task` names it within its cycle, and the retention locks it takes carry that name:
a retry of the bucket (Spark retries a task whose executor died) takes them over at once and
finishes what the first attempt began; applying is idempotent (a truncation is recorded before
the store is touched, and the next attempt completes it; a head never moves back)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import NotRequired, TypedDict

from django.conf import settings
from django.contrib.auth import get_user_model

from domain.retention import considered, decide
from retention.cycle import gathering
from retention.cycle.applying import apply_batch, target_of
from retention.cycle.gathering import ShippedEnds, StoreNeeded, load_streams, prepared_batches
from retention.cycle.outcomes import CycleSummary, StreamOutcome, Truncation, skipped
from retention.locks import release_handed
from retention.models import TruncationRecord
from retention.truncation import finish_truncations, pending_truncations
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
    ends: NotRequired[dict[int, ShippedEnds]]  # for `plan_bucket`: the streams' ends, read by the driver


class Plan(TypedDict):
    """What `plan_bucket` sends back to the driver, plain data."""

    outcomes: list[StreamOutcome]  # of the streams it decided or skipped; truncations as planned
    records: list[int]  # truncations this attempt recorded, not applied (their retention sets written)
    sizes: dict[int, dict[str, int]]  # by record: the cumulative size at each offset of its cut
    unfinished: list[int]  # truncations found recorded and not completed (an earlier attempt's)
    deferred: list[int]  # streams whose gathering needed the store: the driver runs them
    locks: list[tuple[str, list[str]]]  # (holder token, lock keys) kept for `records` and `unfinished`


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
    outcomes = run_streams(
        load_streams(bucket["ids"]),
        bucket["now"],
        bucket["interval"],
        bucket["trigger"],
        _user(bucket),
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


def _user(bucket: Bucket):
    return get_user_model().objects.filter(pk=bucket["user"]).first() if bucket["user"] else None


def plan_bucket(bucket: Bucket) -> Plan:
    """A bucket's work in an executor that does not see the data directory: lock, gather from the
    database and the ends shipped with the bucket, decide, record the truncations; the store is
    neither read nor written. The locks of the streams with a recorded truncation are handed to
    the driver, which applies them (`apply_plan`)."""
    return plan_streams(
        load_streams(bucket["ids"]),
        bucket["now"],
        bucket["interval"],
        bucket["trigger"],
        _user(bucket),
        shipped=bucket.get("ends", {}),
        task=bucket["task"],
        batch=bucket["batch"],
        retry=bucket.get("attempt", 0) > 0,
    )


def plan_streams(targets, now, interval, trigger, user, *, shipped, task=None, batch=None, retry=False) -> Plan:
    """`run_streams` without the store (`plan_bucket`). A stream with a truncation recorded and
    not applied (an earlier attempt of this bucket's, killed before the driver had its plan) is
    not decided again: its record goes to the driver with the new ones."""
    plan = Plan(outcomes=[], records=[], sizes={}, unfinished=[], deferred=[], locks=[])
    for streams, locks, prepared in prepared_batches(targets, now, interval, task, batch, shipped):
        try:
            plan["outcomes"] += skipped(streams, locks.held, "skipped:locked-by-another-cycle")
            named = {s.pk: s for s in locks.held}
            pending = {r.stream_id: r for r in pending_truncations(list(named))}
            plan["outcomes"] += [
                StreamOutcome(
                    named[r.stream_id].full_name,
                    r.rule,
                    Truncation(r.pk, r.after_cut, r.reclaimed_bytes),
                    stream_id=r.stream_id,
                )
                for r in pending.values()
            ]
            items = []
            sizes = {}
            for p in prepared:
                if p.stream.pk in pending:
                    continue
                decision = decide(p.inputs)
                target = target_of(p, decision.cut)
                try:
                    if target is not None:  # the record's sizes: known here, or the driver's
                        sizes[p.stream.pk] = p.segment_sizes(target)
                except StoreNeeded:
                    continue
                items.append((p, decision, considered(p.inputs, decision)))
            outcomes = apply_batch(items, now, trigger, user, retry, record_only=True)
            plan["outcomes"] += outcomes
            truncated = {o.stream_id: o.truncation.record_id for o in outcomes if o.truncation is not None}
            plan["records"] += list(truncated.values())
            plan["sizes"].update((record, sizes[pk]) for pk, record in truncated.items() if pk in sizes)
            plan["unfinished"] += [r.pk for r in pending.values()]
            decided = {p.stream.pk for p, _, _ in items}
            plan["deferred"] += [pk for pk in named if pk not in pending and pk not in decided]
            plan["locks"].append((locks.token, locks.hand_over(set(pending) | set(truncated))))
        finally:
            locks.release()  # what `hand_over` left: nothing, unless something above failed
    return plan


def apply_plan(bucket: Bucket, plan: Plan) -> tuple[CycleSummary, list[StreamOutcome] | None]:
    """The driver's half of a planned bucket: the recorded truncations applied here
    (`finish_truncations`: heads moved, chunks deleted, records completed with what the store
    did; the head moves made durable by one sync), the handed locks released, the deferred
    streams run here as the local engine runs them. The counts, and the outcomes in the streams'
    order when asked."""
    wanted = [*plan["records"], *plan["unfinished"]]
    records = list(TruncationRecord.objects.filter(pk__in=wanted, completed=False).select_related("stream__scope"))
    try:
        mine = set(plan["records"])
        finish_truncations([r for r in records if r.pk in mine], planned=True, sizes=plan["sizes"])
        finish_truncations([r for r in records if r.pk not in mine])  # as a crash's are finished
        if records:
            segment_store().sync()  # the planned ones' head moves, as `run_bucket` makes them durable
    finally:
        for token, keys in plan["locks"]:
            release_handed(keys, token)
    reclaimed = {r.pk: r.reclaimed_bytes for r in records}  # corrected to what the store did
    outcomes = {}
    for o in plan["outcomes"]:
        if o.truncation is not None and o.truncation.record_id in reclaimed:
            o = replace(o, truncation=o.truncation._replace(reclaimed_bytes=reclaimed[o.truncation.record_id]))
        outcomes[o.stream_id] = o
    if plan["deferred"]:
        deferred = run_streams(
            load_streams(plan["deferred"]),
            bucket["now"],
            bucket["interval"],
            bucket["trigger"],
            _user(bucket),
            task=f"{bucket['task']}/driver",
            batch=bucket["batch"],
        )
        outcomes.update((o.stream_id, o) for o in deferred)
        if any(o.truncation is not None for o in deferred):
            segment_store().sync()
    ordered = [outcomes[pk] for pk in bucket["ids"] if pk in outcomes]
    summary = CycleSummary()
    summary.add(ordered)
    return summary, (ordered if bucket["outcomes"] else None)


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
