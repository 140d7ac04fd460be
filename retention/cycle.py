"""A retention cycle (DESIGN.md §6): for every stream with a policy, record the tail cut, decide,
truncate, and keep the history. The rule itself is `domain.retention.decide`; this module gathers
its inputs from the database and the store and applies its answer.

Streams go through in batches (`BATCH`): a handful of queries per batch instead of per stream,
and head moves made durable by one sync (before any chunk deletion, and at the end of the cycle)
instead of two fsyncs per segment. Figures: bench/RESULTS.md.

Safety: a Redis lock per stream keeps two cycles off one stream (a stream locked by another cycle
is skipped: that cycle is deciding it); a truncation is recorded before the store is touched and
completed after, so a cycle that dies half-way is finished by the next one; a target at or behind
the head is a silent no-op.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import orjson
from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import F, FloatField, Func, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from domain.cuts import moves_head
from domain.retention import Decision, Inputs, Subscriber, decide
from domain.retention_set import after_truncation, with_tail
from retention.forked import Pool, chunks, run_forked
from retention.locks import Locks
from retention.models import CycleState, RetentionCycle, TruncationRecord
from retention.services import complete_truncation, drop_expired_checkpoints
from retention.set_store import as_records, read_sets, stored, write_sets
from spark_tasks import load_retention_job
from spark_tasks.retention_inputs import considered
from store import locks as redis_locks
from store.store import StreamLog, ends_many, sync_all, truncate_many
from streams.db import insert_rows, update_rows
from streams.logs import stream_log
from streams.models import RetentionType, Segment, Stream, Subscription

BATCH = 500


class Truncation(NamedTuple):
    """What a cycle's outcome keeps of the TruncationRecord it wrote (the record itself, with its
    subscribers and cuts, stays in the database: a million of them would not fit in a worker)."""

    record_id: int
    after_cut: dict[str, int]
    reclaimed_bytes: int


@dataclass(frozen=True)
class StreamOutcome:
    stream: str
    rule: str
    truncation: Truncation | None
    at_max: bool = False
    stream_id: int | None = None

    def line(self) -> str:
        if self.truncation is None:
            return f"{self.stream}: no truncation ({self.rule})"
        return (
            f"{self.stream}: truncated at {self.truncation.after_cut} ({self.rule}), "
            f"reclaimed {self.truncation.reclaimed_bytes} bytes"
        )


@dataclass
class CycleSummary:
    """What a cycle did, counted as its outcomes go by: what the beat task records and the bench
    prints, without holding an outcome per stream."""

    streams: int = 0
    truncations: int = 0
    bytes_reclaimed: int = 0
    rules: Counter = field(default_factory=Counter)

    def add(self, outcomes: list[StreamOutcome]) -> None:
        for o in outcomes:
            self.streams += 1
            self.rules[o.rule] += 1
            if o.truncation is not None:
                self.truncations += 1
                self.bytes_reclaimed += o.truncation.reclaimed_bytes


@dataclass
class Prepared:
    """One stream's inputs, with what applying a decision needs besides."""

    stream: Stream
    log: StreamLog
    inputs: Inputs
    head: dict[str, int]
    head_sizes: dict[str, int]
    tail: dict[str, int]
    tail_sizes: dict[str, int]
    # the retention set as stored (`retention.set_store`), in set order, the tail's new record
    # included; `stored_count` of them were stored when the batch was read
    rset_rows: list
    stored_count: int

    def segment_sizes(self, cut: dict[str, int]) -> dict[str, int]:
        """size_till of each segment's offset in `cut`, where already known (the head, the tail,
        a subscriber's or a retention record's cut); the store is read for the rest."""
        for _, _, recorded, sizes in reversed(self.rset_rows):
            # most targets are a retention record's cut: its sizes were stored with it
            if recorded == cut and sizes and all(sizes.get(s) is not None for s in cut):
                return {s: int(sizes[s]) for s in cut}
        known: dict[str, int] = {}
        for seg, offset in cut.items():
            if offset == self.head[seg]:
                known[seg] = self.head_sizes[seg]
            elif offset == self.tail[seg]:
                known[seg] = self.tail_sizes[seg]
            else:
                size = self._recorded_size(seg, offset)
                known[seg] = self.log.segment(seg).size_till(offset) if size is None else size
        return known

    def _recorded_size(self, seg: str, offset: int) -> int | None:
        for sub in self.inputs.subscribers:
            if sub.cut and sub.cut.get(seg) == offset:
                return sub.cut_sizes[seg]
        for _, _, cut, sizes in reversed(self.rset_rows):
            if sizes and cut.get(seg) == offset and seg in sizes:
                return int(sizes[seg])
        return None

    def retention_set_after(self, cut: dict[str, int] | None) -> list | None:
        """The rows to store once the cycle is done with this stream (truncated at `cut`, or not
        truncated: None), or None when what is stored is already that."""
        rows = self.rset_rows
        if cut is not None:
            rows = rows[len(rows) - len(after_truncation(self.inputs.retention_set, cut)) :]
        unchanged = len(rows) == len(self.rset_rows) == self.stored_count  # nothing added or dropped
        return None if unchanged else rows


# What a cycle reads of a stream, its scope and its policy: the rest (the delayed index's JSON,
# timestamps, descriptions) cost more to load for 100k streams than the decisions.
_CYCLE_FIELDS = (
    "id",
    "name",
    "storage_key",
    "segment_count",
    "on_max_limit",
    "full_since",
    "scope__name",
    "retention_policy__id",
    "retention_policy__stream_id",
    "retention_policy__limit_type",
    "retention_policy__min_value",
    "retention_policy__max_value",
    "retention_policy__consumption_based",
    "retention_policy__subscriber_timeout_s",
    "retention_policy__fallback_after_s",
)


def streams_with_policy():
    return Stream.objects.filter(retention_policy__isnull=False).select_related("scope", "retention_policy")


# -- locks ---------------------------------------------------------------------------------------


# -- gathering -----------------------------------------------------------------------------------


def pending_truncations(pks: list[int]) -> list[TruncationRecord]:
    """The truncations of these streams that a crash left half done (usually none).

    On PostgreSQL, one probe of the small `truncation_pending` index per stream, in a LATERAL
    join that the planner cannot flatten (`OFFSET 0`). The plain `stream_id IN (…) AND NOT
    completed` was planned from the table's statistics, and without fresh ones (the history grew
    by a whole cycle since its last ANALYZE: autovacuum off, or behind) PostgreSQL read the whole
    history for every batch of streams: ~190M blocks in a 1M-stream cycle, whose
    database time grew with every batch. JIT is off for the probe: the same missing statistics
    made its cost look large enough to compile it, 60 ms for 0.5 ms of work."""
    if connection.vendor != "postgresql":
        return list(TruncationRecord.objects.filter(stream_id__in=pks, completed=False).select_related("stream__scope"))
    q = connection.ops.quote_name
    sql = (
        f"SELECT t.{q('id')} FROM unnest(%s::bigint[]) AS s(stream_id) CROSS JOIN LATERAL "
        f"(SELECT {q('id')} FROM {q(TruncationRecord._meta.db_table)} "
        f"WHERE {q('stream_id')} = s.stream_id AND NOT {q('completed')} OFFSET 0) t"
    )
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL jit = off")
        cur.execute(sql, [pks])
        ids = [row[0] for row in cur.fetchall()]
    if not ids:
        return []
    return list(TruncationRecord.objects.filter(pk__in=ids, completed=False).select_related("stream__scope"))


def prepare_batch(streams: list[Stream], now: datetime, interval: float) -> list[Prepared]:
    """Finish truncations a crash left half done, record each stream's tail in its retention set
    (when the newest record is older than the interval: stored when the batch is applied), and
    read everything `decide` needs: three queries for the batch, one small file read per stream."""
    pks = [s.pk for s in streams]
    for record in pending_truncations(pks):
        complete_truncation(record)
    sets = read_sets(pks)
    subs: dict[int, list] = defaultdict(list)
    for row in (
        Subscription.objects.filter(stream_id__in=pks)
        .exclude(reader_group__retention_type=RetentionType.NONE)
        .order_by("stream_id", "id")
        # the cuts as text, decoded by orjson: the JSON field's own decoding was a tenth of
        # preparing a batch
        .annotate(
            cut_text=Cast("acknowledgement_cut", TextField()), sizes_text=Cast("acknowledgement_sizes", TextField())
        )
        .annotate(acked_s=_epoch_seconds("acknowledged_at"), since_s=_epoch_seconds("created_at"))
        .values_list(
            "stream_id",
            "reader_group__scope__name",
            "reader_group__name",
            "cut_text",
            "sizes_text",
            "acked_s",
            "since_s",
        )
    ):
        subs[row[0]].append(row[1:])
    prepared = []
    logs = [stream_log(stream) for stream in streams]
    for stream, log, ends in zip(streams, logs, ends_many(logs)):
        head = {s: h.offset for s, (h, _) in ends.items()}
        head_sizes = {s: h.cum_size for s, (h, _) in ends.items()}
        tail = {s: t.next_offset for s, (_, t) in ends.items()}
        tail_sizes = {s: t.cum_size for s, (_, t) in ends.items()}
        rset_rows = sets.get(stream.pk, [])
        stored_count = len(rset_rows)
        rset = as_records(rset_rows)
        grown = with_tail(rset, now.timestamp(), interval, tail, sum(tail_sizes.values()))
        if len(grown) > len(rset):
            rset_rows = [*rset_rows, stored(now, grown[-1].size, tail, tail_sizes)]
        subscribers = tuple(_subscriber(row, log, head, head_sizes, tail, tail_sizes) for row in subs[stream.pk])
        policy = stream.retention_policy.as_policy(stream.on_max_limit)
        prepared.append(
            Prepared(
                stream,
                log,
                Inputs(now.timestamp(), policy, grown, subscribers),
                head,
                head_sizes,
                tail,
                tail_sizes,
                rset_rows,
                stored_count,
            )
        )
    return prepared


def _epoch_seconds(field: str):
    """A time column as epoch seconds computed by PostgreSQL (the float `datetime.timestamp()`
    gives: both round the exact microseconds once): 60k datetimes parsed a 10k cycle otherwise.
    Other databases send the datetime."""
    if connection.vendor != "postgresql":
        return F(field)
    return Func(F(field), template="EXTRACT(EPOCH FROM %(expressions)s)::float8", output_field=FloatField())


def _seconds(value) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else value


def _subscriber(row, log, head, head_sizes, tail, tail_sizes) -> Subscriber:
    scope, name, ack, ack_sizes, acked_at, created_at = row
    cut = sizes = None
    ack = None if ack is None else orjson.loads(ack)
    ack_sizes = None if ack_sizes is None else orjson.loads(ack_sizes)
    if ack is not None:
        # a cut behind the head (data a max limit removed) counts as at the head
        cut = {s: max(int(ack.get(s, 0)), head[s]) for s in head}
        sizes = {}
        for s, offset in cut.items():
            if offset == head[s]:
                sizes[s] = head_sizes[s]
            elif offset == tail[s]:
                sizes[s] = tail_sizes[s]
            elif ack_sizes and ack_sizes.get(s) is not None and int(ack[s]) == offset:
                sizes[s] = int(ack_sizes[s])  # recorded with the cut: no store read
            else:
                sizes[s] = log.segment(s).size_till(offset)
    return Subscriber(
        name=f"{scope}/{name}",
        cut=cut,
        cut_sizes=sizes,
        acknowledged_at=_seconds(acked_at),
        subscribed_at=_seconds(created_at),
    )


# -- applying ------------------------------------------------------------------------------------


def apply_batch(
    items: list[tuple[Prepared, Decision, list[dict]]], now: datetime, trigger: str, user=None
) -> list[StreamOutcome]:
    """Record, truncate (one sync for the batch), complete; store the retention sets (the tails
    recorded, the records behind the new heads dropped) and drop expired checkpoints behind the
    new heads; mark streams full or not (`reject_publish`)."""
    outcomes: dict[int, StreamOutcome] = {}
    planned: list[tuple[Prepared, TruncationRecord, dict[str, int]]] = []
    triggered_by = user if user is not None and user.is_authenticated else None
    decisions = {p.stream.pk: decision for p, decision, _ in items}
    for p, decision, subscribers in items:
        target = _target(p, decision.cut)
        if target is None:
            outcomes[p.stream.pk] = StreamOutcome(p.stream.full_name, decision.rule, None, decision.at_max, p.stream.pk)
            continue
        sizes = p.segment_sizes(target)
        record = TruncationRecord(
            stream=p.stream,
            created_at=now,
            before_cut=p.head,
            after_cut=target,
            before_size=sum(p.head_sizes.values()),
            after_size=sum(sizes.values()),
            tail_size=sum(p.tail_sizes.values()),
            rule=decision.rule,
            subscribers=subscribers,
            trigger=trigger,
            triggered_by=triggered_by,
            completed=False,
        )
        planned.append((p, record, sizes))
    if planned:
        with transaction.atomic():  # recorded before the store is touched
            insert_rows(TruncationRecord, [r for _, r, _ in planned])
        results = truncate_many([(p.log, r.after_cut, sizes) for p, r, sizes in planned])
        with transaction.atomic():
            _complete([(p, r) for p, r, _ in planned], results)
        for p, r, _ in planned:  # after `_complete`, which corrects a record's size to the store's
            truncation = Truncation(r.pk, r.after_cut, r.reclaimed_bytes)
            outcomes[p.stream.pk] = StreamOutcome(
                p.stream.full_name, r.rule, truncation, decisions[p.stream.pk].at_max, p.stream.pk
            )
    truncated_at = {p.stream.pk: r.after_cut for p, r, _ in planned}
    sets = {}
    for p, _, _ in items:
        rows = p.retention_set_after(truncated_at.get(p.stream.pk))
        if rows is not None:
            sets[p.stream.pk] = rows
    write_sets(sets)
    _mark_full([(p.stream, d.at_max) for p, d, _ in items], now)
    return [outcomes[p.stream.pk] for p, _, _ in items]


def _target(p: Prepared, cut) -> dict[str, int] | None:
    if cut is None or not moves_head(cut, p.head):
        return None
    return {s: min(max(p.head[s], int(cut.get(s, p.head[s]))), p.tail[s]) for s in p.head}


def _complete(planned, results) -> None:
    changed = []
    for (p, record), result in zip(planned, results):
        counts = (
            sum(r.head_after.cum_size for r in result.values()),
            sum(r.chunks_deleted for r in result.values()),
            sum(r.bytes_deleted for r in result.values()),
        )
        if counts != (record.after_size, 0, 0):
            record.after_size, record.chunks_deleted, record.bytes_deleted = counts
            changed.append((record.pk, *counts))
        record.completed = True
    TruncationRecord.objects.filter(pk__in=[r.pk for _, r in planned]).update(completed=True)
    update_rows(TruncationRecord, ["after_size", "chunks_deleted", "bytes_deleted"], changed)
    _update_segment_rows(planned, results)
    drop_expired_checkpoints({p.stream.pk: (p.stream.full_name, r.after_cut) for p, r in planned})


def _update_segment_rows(planned, results) -> None:
    """The Segment rows follow the heads moved (the beat's stats refresh does the rest): one
    UPDATE by (stream, segment), the counts lowered in SQL, no read first."""
    rows = [
        (p.stream.pk, seg, res.head_after.offset, res.head_after.cum_size, res.chunks_deleted, res.bytes_deleted)
        for (p, _), result in zip(planned, results)
        for seg, res in result.items()
    ]
    if not rows:
        return
    now = timezone.now()
    table = connection.ops.quote_name(Segment._meta.db_table)
    postgres = connection.vendor == "postgresql"
    floor = "greatest" if postgres else "max"

    def statement(source: str) -> str:
        return f"""
            WITH v(stream_id, segment_id, head_offset, head_size, chunks, freed) AS (SELECT * FROM {source})
            UPDATE {table} SET head_offset = v.head_offset, head_size = v.head_size,
                chunk_count = {floor}(0, chunk_count - v.chunks),
                physical_bytes = {floor}(0, physical_bytes - v.freed), refreshed_at = %s
            FROM v WHERE {table}.stream_id = v.stream_id AND {table}.segment_id = v.segment_id"""

    with connection.cursor() as cur:
        if postgres:
            source = "unnest(%s::bigint[], %s::text[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])"
            cur.execute(statement(source), [*[list(col) for col in zip(*rows)], now])
            return
        for start in range(0, len(rows), 100):  # SQLite's parameter limit
            chunk = rows[start : start + 100]
            source = "(VALUES " + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk)) + ")"
            cur.execute(statement(source), [x for row in chunk for x in row] + [now])


def _mark_full(states: list[tuple[Stream, bool]], now: datetime) -> None:
    """`on_max_limit: reject_publish`: a stream at its max whose slowest subscriber still needs
    the data refuses publishing (507) until a cycle finds it below the max again."""
    full = [s.pk for s, at_max in states if at_max and s.full_since is None]
    freed = [s.pk for s, at_max in states if not at_max and s.full_since is not None]
    if full:
        Stream.objects.filter(pk__in=full).update(full_since=now)
    if freed:
        Stream.objects.filter(pk__in=freed).update(full_since=None)
    for stream, at_max in states:
        if at_max and stream.full_since is None:
            stream.full_since = now
        elif not at_max:
            stream.full_since = None


# -- the cycle -----------------------------------------------------------------------------------


def choose_engine(engine: str, stream_count: int) -> str:
    if engine == "auto":
        return "spark" if stream_count >= settings.CBR_SPARK_MIN_STREAMS else "local"
    return engine


def _batches(items: list, size: int | None = None) -> list[list]:
    size = size or BATCH
    return [items[start : start + size] for start in range(0, len(items), size)]


def _lock_and_prepare(batch: list[Stream], now: datetime, interval: float):
    locks = Locks.take(batch)
    try:
        return batch, locks, prepare_batch(locks.held, now, interval)
    except BaseException:
        locks.release()
        raise


def prepared_batches(targets: list[Stream], now: datetime, interval: float):
    """Yields (batch, locks, prepared) for each batch; the caller releases the locks once it has
    applied the batch. (Preparing the next batch in a helper thread meanwhile was tried: on two
    cores shared with the database it made the cycle slower, not faster.)

    The garbage collector's automatic runs are held off during the cycle: a batch makes some
    100k small objects (retention records, cuts), which would trigger collections over every
    object of the process again and again (a fifth of the cycle's time). The youngest
    generation is collected after each batch instead."""
    with _no_automatic_gc():
        for batch in _batches(targets):
            yield _lock_and_prepare(batch, now, interval)
            gc.collect(0)


@contextmanager
def _no_automatic_gc():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _skipped(streams: list[Stream], held: list[Stream], rule: str) -> list[StreamOutcome]:
    ids = {s.pk for s in held}
    return [StreamOutcome(s.full_name, rule, None, stream_id=s.pk) for s in streams if s.pk not in ids]


Report = Callable[[list[StreamOutcome]], None]


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
    engine's whole work (`_run_in_processes`), the Spark engine's gathering and applying.

    Memory stays flat whatever the fleet's size: the cycle lists the streams' ids, and loads the
    streams a chunk at a time where they are gathered; the outcomes go to `report` a chunk at a
    time, in the streams' order, and are then dropped (at a million streams, the streams and
    outcomes held at once took 5.2 GB in the cycle's process, and its forked workers copied
    much of it as they read it)."""
    now = now or timezone.now()
    ids = _target_ids(streams)
    progress = _once_each(progress)
    workers = process_count(len(ids), workers)
    summary = CycleSummary()

    def sink(outcomes: list[StreamOutcome]) -> None:
        summary.add(outcomes)
        if report is not None:
            report(outcomes)

    if choose_engine(engine, len(ids)) == "spark":
        _run_on_spark(ids, now, trigger, user, progress, sink, workers)
    else:
        interval = settings.CBR_RETENTION_INTERVAL
        if workers > 1:
            _run_in_processes(ids, now, interval, trigger, user, progress, sink, workers)
        else:
            for start, end in chunks(len(ids), PARALLEL_CHUNK):
                batch_done = (lambda n, start=start: progress(start + n, len(ids))) if progress else None
                sink(_run_locally(load_streams(ids[start:end]), now, interval, trigger, user, batch_done))
                if progress:
                    progress(end, len(ids))  # streams gone since they were listed count as done
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


def load_streams(ids: list[int]) -> list[Stream]:
    """The streams with these ids that still have a policy, in the ids' order, with only what a
    cycle reads of them (`_CYCLE_FIELDS`)."""
    by_id = {s.pk: s for s in streams_with_policy().only(*_CYCLE_FIELDS).filter(pk__in=ids)}
    return [by_id[i] for i in ids if i in by_id]


def _run_locally(targets, now, interval, trigger, user, batch_done=None) -> list[StreamOutcome]:
    """Lock, gather, decide and apply batch by batch in this process; `batch_done(n)` after each
    batch, n the streams done so far."""
    outcomes: list[StreamOutcome] = []
    for batch, locks, prepared in prepared_batches(targets, now, interval):
        try:
            outcomes += _skipped(batch, locks.held, "skipped:locked-by-another-cycle")
            items = []
            for p in prepared:
                decision = decide(p.inputs)
                items.append((p, decision, considered(p.inputs, decision)))
            outcomes += apply_batch(items, now, trigger, user)
        finally:
            locks.release()
        if batch_done:
            batch_done(len(outcomes))
    return outcomes


# -- the local engine on several cores -----------------------------------------------------------

PARALLEL_CHUNK = 2_000  # streams a process takes at a time (4 batches)
# what the forked worker processes read (the parent's memory, shared at fork: nothing is pickled
# on the way in); set only while a cycle's workers are alive
_FORKED: tuple | None = None


def process_count(stream_count: int, asked: int | None = None) -> int:
    """How many processes a cycle (either engine) over `stream_count` streams uses. One,
    whatever was asked, below `CBR_RETENTION_PARALLEL_MIN_STREAMS` streams, on a database other than
    PostgreSQL (SQLite takes one writer at a time, and an in-memory one is not shared), inside a
    transaction (other processes would not see what it has not committed), or where processes
    cannot be forked."""
    workers = asked if asked is not None else settings.CBR_RETENTION_WORKERS
    if (
        workers <= 1
        or stream_count < settings.CBR_RETENTION_PARALLEL_MIN_STREAMS
        or connection.vendor != "postgresql"
        or connection.in_atomic_block
        or not hasattr(os, "fork")
    ):
        return 1
    return min(workers, -(-stream_count // PARALLEL_CHUNK))


def _run_in_processes(ids, now, interval, trigger, user, progress, sink: Report, workers) -> None:
    """The local engine on `workers` forked processes (`retention.forked`), each taking chunks of
    PARALLEL_CHUNK streams in turn and running them exactly as `_run_locally` does: its own
    database connection, the same per-stream locks, batches and rules. A cycle in one process is
    half Python and half PostgreSQL, one after the other; two processes keep both cores busy.
    The outcomes go to `sink` in the streams' order, a chunk at a time (a chunk done early waits
    for the ones before it); progress counts the chunks done in that order.
    A worker that dies fails the cycle; the locks it held belonged to a dead process on this
    machine, so the next cycle takes them over and finishes its streams."""
    global _FORKED
    ranges = chunks(len(ids), PARALLEL_CHUNK)
    done: dict[int, list[StreamOutcome]] = {}
    reported = 0

    def on_result(i: int, outcomes: list[StreamOutcome]) -> None:
        nonlocal reported
        done[i] = outcomes
        while reported < len(ranges) and reported in done:
            sink(done.pop(reported))
            reported += 1
            if progress:
                progress(ranges[reported - 1][1], len(ids))

    _FORKED = (ids, now, interval, trigger, user, ranges)
    try:
        # a forked process must not share this process's database socket: each opens its own
        run_forked(
            _run_chunk,
            len(ranges),
            workers,
            on_result,
            before_fork=connections.close_all,
            at_exit=connections.close_all,
        )  # a worker's backend ends with it, not a moment later
    finally:
        _FORKED = None


def _run_chunk(i: int) -> list[StreamOutcome]:
    """In a worker process: the i-th chunk of the cycle's streams, run locally."""
    ids, now, interval, trigger, user, ranges = _FORKED
    start, end = ranges[i]
    return _run_locally(load_streams(ids[start:end]), now, interval, trigger, user)


SPARK_CHUNK = 25_000  # streams gathered, decided in one Spark job and applied before the next


@dataclass
class _SparkChunk:
    """A chunk of streams gathered for the Spark engine: where its inputs are, the streams another
    cycle holds, and the job deciding them. The batches themselves (their locks held until each is
    applied) are kept by whoever gathered them: `held` here in this process, or each worker
    process its part (`parts`: the chunk's ranges of streams, each sent to worker i % workers)."""

    path: Path
    skipped: list[StreamOutcome]
    rows: int
    held: list[tuple[Locks, list[Prepared]]] = field(default_factory=list)
    parts: list[tuple[int, int]] = field(default_factory=list)
    decided: Future | None = None
    start: int = 0  # the chunk's streams: the cycle's [start, end)
    end: int = 0


def _run_on_spark(ids, now, trigger, user, progress, sink: Report, workers: int = 1) -> None:
    """The Spark engine: gather the inputs of a chunk of streams (recording their tails) into
    Parquet, decide them all in one Spark job with the same `decide`, then apply the decisions
    batch by batch. Each stream is gathered once: its lock is held from gathering to applying,
    as in the local engine, so its head cannot move meanwhile. Chunks of SPARK_CHUNK streams bound
    what is held in memory (and how long a lock is held) whatever the fleet's size.

    The Spark job of one chunk runs (in a thread of this process, waiting on the JVM) while the
    next chunk is gathered: the job's executors and the gathering each use a core, where one
    waited for the other. At most two chunks are held at once. Gathering and applying are spread
    over worker processes as in the local engine (`process_count`): each worker gathers parts of
    PARALLEL_CHUNK streams, writes their inputs into the chunk's directory and keeps them, with
    their locks, until this process sends it the decisions for them. The outcomes go to `sink`
    a chunk at a time, in the streams' order."""
    decide_file = load_retention_job().decide_file

    global _FORKED
    interval = settings.CBR_RETENTION_INTERVAL
    waiting: list[_SparkChunk] = []  # gathered, in order; the first is applied next
    directory = tempfile.TemporaryDirectory(prefix="cbr-retention-")
    pool = deciding = None

    def apply_first() -> None:
        chunk = waiting[0]
        decisions = chunk.decided.result() if chunk.decided else {}
        if pool is None:
            batch_done = (lambda n: progress(chunk.start + len(chunk.skipped) + n, len(ids))) if progress else None
            outcomes = _apply_held(chunk.held, decisions, now, trigger, user, batch_done)
        else:
            outcomes = _apply_parts(pool, chunk.parts, ids, decisions)
        order = {sid: k for k, sid in enumerate(ids[chunk.start : chunk.end])}
        sink(sorted(chunk.skipped + outcomes, key=lambda o: order[o.stream_id]))  # the streams' order
        if progress:
            progress(chunk.end, len(ids))
        shutil.rmtree(chunk.path, ignore_errors=True)
        waiting.pop(0)

    try:
        if workers > 1:  # forked before the thread below exists
            _FORKED = (ids, now, interval, trigger, user, None)
            pool = Pool(_spark_part, workers, before_fork=connections.close_all, at_exit=_release_held_parts)
        deciding = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cbr-spark-decide")
        for k, (start, end) in enumerate(chunks(len(ids), SPARK_CHUNK)):
            path = Path(directory.name) / f"chunk-{k}"
            path.mkdir()
            if pool is None:
                chunk = _SparkChunk(path, [], 0, start=start, end=end)
                waiting.append(chunk)  # from here on, released whatever happens
                chunk.rows = _gather_here(chunk, load_streams(ids[start:end]), now, interval)
            else:
                chunk = _gather_in_parts(pool, path, start, end)
                waiting.append(chunk)
            if chunk.rows:
                chunk.decided = deciding.submit(decide_file, path)
            if len(waiting) > 1:
                apply_first()
        while waiting:
            apply_first()
    finally:
        if deciding is not None:
            deciding.shutdown(wait=True, cancel_futures=True)  # no job reads a directory removed below
        for chunk in waiting:
            _release(chunk.held)
        _FORKED = None
        if pool is not None:
            pool.close()  # each live worker releases the parts it still holds as it exits
        directory.cleanup()


def _gather_here(chunk: _SparkChunk, streams: list[Stream], now, interval, prefix="part", files=None) -> int:
    """Gather `streams` batch by batch into `chunk` (its inputs written to its directory, its
    batches kept with their locks in `chunk.held`); the number of streams written."""
    InputsWriter = load_retention_job().InputsWriter

    writer = InputsWriter(files=files, directory=chunk.path, prefix=prefix)
    try:
        for batch, locks, prepared in prepared_batches(streams, now, interval):
            chunk.held.append((locks, prepared))
            chunk.skipped += _skipped(batch, locks.held, "skipped:locked-by-another-cycle")
            writer.write([(p.stream.pk, p.inputs) for p in prepared])
    finally:
        writer.close()
    return writer.rows


def _apply_held(held, decisions, now, trigger, user, batch_done=None) -> list[StreamOutcome]:
    """Apply gathered batches with their decisions, releasing each batch's locks once applied;
    `batch_done(n)` after each batch, n the streams applied so far."""
    outcomes: list[StreamOutcome] = []
    try:
        with _no_automatic_gc():
            while held:
                locks, prepared = held[0]
                outcomes += apply_batch([(p, *decisions[p.stream.pk]) for p in prepared], now, trigger, user)
                locks.release()
                held.pop(0)
                gc.collect(0)
                if batch_done:
                    batch_done(len(outcomes))
    finally:
        _release(held)
    return outcomes


def _release(held: list[tuple[Locks, list[Prepared]]]) -> None:
    """Release the locks of gathered batches not applied (after a failure)."""
    for locks, _ in held:
        locks.release()
    held.clear()


# -- the Spark engine's worker processes: a part is PARALLEL_CHUNK streams of a chunk -------------

_PARTS: dict[int, _SparkChunk] = {}  # in a worker process: the parts it gathered, by start


def _gather_in_parts(pool: Pool, path: Path, start: int, end: int) -> _SparkChunk:
    parts = [(start + a, start + b) for a, b in chunks(end - start, PARALLEL_CHUNK)]
    chunk = _SparkChunk(path, [], 0, parts=parts, start=start, end=end)
    answers: dict[int, tuple] = {}
    pool.run([("gather", a, b, path) for a, b in parts], answers.__setitem__, worker_of=lambda i: i)
    for i in range(len(parts)):
        skipped, rows = answers[i]
        chunk.skipped += skipped
        chunk.rows += rows
    return chunk


def _apply_parts(pool: Pool, parts, ids, decisions) -> list[StreamOutcome]:
    tasks = [("apply", a, b, {sid: decisions[sid] for sid in ids[a:b] if sid in decisions}) for a, b in parts]
    answers: dict[int, list[StreamOutcome]] = {}
    pool.run(tasks, answers.__setitem__, worker_of=lambda i: i)
    return [o for i in range(len(parts)) for o in answers[i]]


def _release_held_parts() -> None:
    """In a worker process whose tasks ended (the cycle done, failed, or its process gone):
    release the locks of the parts it still holds. A worker that died cannot: its locks name a
    dead process, taken over by the next cycle on this machine (elsewhere they expire)."""
    try:
        for part in _PARTS.values():
            _release(part.held)
        _PARTS.clear()
    finally:
        connections.close_all()


def _spark_part(task) -> object:
    """In a worker process: gather a part (its inputs written as `part-<start>` files into the
    chunk's directory; kept with its locks), or apply a part with its decisions."""
    op, start, end, arg = task
    ids, now, interval, trigger, user, _ = _FORKED
    if op == "gather":
        part = _PARTS[start] = _SparkChunk(arg, [], 0)
        try:
            part.rows = _gather_here(
                part, load_streams(ids[start:end]), now, interval, prefix=f"part-{start:09d}", files=1
            )
        except BaseException:
            _release(_PARTS.pop(start).held)
            raise
        return part.skipped, part.rows
    return _apply_held(_PARTS.pop(start).held, arg, now, trigger, user)


HEARTBEAT_S = 30  # a running cycle says it is alive this often
DEAD_AFTER_S = 4 * HEARTBEAT_S  # a cycle silent this long died (its process on another machine)


def sweep_dead_cycles() -> int:
    """Mark failed the cycles left `running` by a process that died: one on this machine that no
    longer exists, or one elsewhere silent for `DEAD_AFTER_S`. Their truncations were recorded
    before the store was touched, and the next cycle finishes them (DESIGN.md §6); only their rows
    stay behind, and this ends them."""
    now = timezone.now()
    silent = now - timedelta(seconds=DEAD_AFTER_S)
    running = RetentionCycle.objects.filter(state=CycleState.RUNNING).only("id", "runner", "heartbeat_at", "started_at")
    dead = [
        c.pk
        for c in running
        if redis_locks.holder_is_dead(c.runner)
        or (not redis_locks.holder_is_here(c.runner) and (c.heartbeat_at or c.started_at or now) < silent)
    ]
    if not dead:
        return 0
    return RetentionCycle.objects.filter(pk__in=dead, state=CycleState.RUNNING).update(
        state=CycleState.FAILED,
        finished_at=now,
        error="its process died before the cycle ended; the next cycle finishes its truncations",
    )


@contextmanager
def _heartbeat(cycle) -> Iterator[None]:
    """While the block runs, the cycle's row says every `HEARTBEAT_S` that it is alive (from a
    thread with a database connection of its own)."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(HEARTBEAT_S):
                try:
                    RetentionCycle.objects.filter(pk=cycle.pk).update(heartbeat_at=timezone.now())
                except Exception:  # the database away for a moment: the next beat tries again
                    continue
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"cycle {cycle.pk} heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def execute(cycle, report: Report | None = None) -> None:
    """Run a recorded RetentionCycle, keeping its state and progress up to date; first mark
    failed the cycles whose process died. `report` as for `run_cycle_summary`."""
    sweep_dead_cycles()
    cycle.state = CycleState.RUNNING
    cycle.started_at = cycle.heartbeat_at = timezone.now()
    cycle.runner = redis_locks.holder_token()
    cycle.save(update_fields=["state", "started_at", "heartbeat_at", "runner"])
    last_save = [0.0]

    def progress(done: int, total: int) -> None:
        cycle.streams_done, cycle.streams_total = done, total
        if done == total or time.monotonic() - last_save[0] > 0.5:  # at most two writes a second
            cycle.save(update_fields=["streams_done", "streams_total"])
            last_save[0] = time.monotonic()

    try:
        streams = [cycle.stream] if cycle.stream_id else None
        cycle.engine = choose_engine(cycle.engine, len(streams) if streams else streams_with_policy().count())
        cycle.save(update_fields=["engine"])
        with _heartbeat(cycle):
            summary = run_cycle_summary(
                now=cycle.clock,
                streams=streams,
                trigger=cycle.trigger,
                user=cycle.requested_by,
                engine=cycle.engine,
                progress=progress,
                report=report,
            )
    except Exception as exc:
        cycle.state = CycleState.FAILED
        cycle.error = f"{type(exc).__name__}: {exc}"
        cycle.finished_at = timezone.now()
        cycle.save(update_fields=["state", "error", "finished_at"])
        raise
    cycle.truncations = summary.truncations
    cycle.bytes_reclaimed = summary.bytes_reclaimed
    cycle.state = CycleState.DONE
    cycle.finished_at = timezone.now()
    cycle.save(update_fields=["truncations", "bytes_reclaimed", "state", "finished_at"])
