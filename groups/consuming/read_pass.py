"""One pass of reads, together: the counts of every read's segments, its carried ack, its first
look at each segment and its hand-out, the records read once for all, the floors and how far
they handed out persisted in one statement, and each read's answer. Fair across a group's
segments (a read's events shared out evenly); `groups.consuming.reading` decides when a read
passes again. Each step that puts commands on a pipeline reads its own answers
(`ScriptPipeline.step`). It must never wait, nor answer a read a database does not know of."""

from __future__ import annotations

import functools
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, cast

from domain import delivery_ids, ttl
from domain.acks import AckPolicy, Delivery, HandOut, Poison
from domain.assignments import assign
from groups import dispatching
from groups.ack_tracker import KnownCounts, LookBatch, runs_of
from groups.consuming import compacted, floors
from groups.consuming.acking import AckOutcome, PendingAck
from groups.consuming.answers import ReadPart, ReadResult, add_run
from groups.consuming.checkpoints import maybe_checkpoint
from groups.consuming.compacted import compacted_views
from groups.consuming.dead_letters import dead_letter
from groups.consuming.floors import (
    Slot,
    count_consumer,
    known_counts,
    mark_seen,
    note_consumer,
    persist_delivery_counts,
    persist_floors,
    read_noted,
    records_at,
)
from groups.delayed_release import queue_release, release_due
from groups.models import DeliveryMode, ReaderGroup
from store.ends import Head, Tail
from store.framing import Frame, Record
from store.redis_connection import Answers, ScriptPipeline, get_redis, scripted_pipeline
from streams import wait_stats
from streams.delaying.index import EARLIEST_UNKNOWN, Round
from streams.delaying.stream_index import index_of
from streams.logs import stream_log
from streams.memo import Ticket
from streams.waking import group_channel, notify_due
from streams.wire import seconds_to_iso

_OFFSET = itemgetter(0)  # of a Delivery


_ROW_OFFSET, _DELIVER_AT = attrgetter("offset"), attrgetter("deliver_at_ms")  # of a Record or a Frame
_OWN_TTL, _HEADERS = attrgetter("ttl_ms"), attrgetter("headers")  # a Frame's own time to live; a Record's headers


@dataclass(eq=False)
class Waiting:
    """A read of one group, from its first pass to its answer: what each pass needs."""

    group: ReaderGroup
    group_slots: list[Slot]
    max_events: int
    consumer: str
    ranges: bool
    frames: bool
    channels: tuple[str, ...]  # what it waits on (`wake_channels`; none: it does not wait)
    deadline: float  # `time.monotonic()` when its wait ends
    since: float | None = None  # when it began to wait
    woken: str = ""  # what woke it last ("": it has not waited yet)
    acked: AckOutcome | None = None  # what its first pass's carried ack did
    ticket: Ticket | None = None  # `GROUP_CHANGES`'s when its group was last loaded
    stops: dict[int, int] | None = None  # by position: the segment's `next` as its last pass left it

    @property
    def group_key(self) -> str:
        return group_channel(self.group.state_key)


def read_passes(passes: list[tuple[Waiting, PendingAck | None]]) -> list[ReadResult]:
    """One pass of each of these reads, together: one round trip to Redis for all their counts,
    one for all their first looks, one statement for all their floors, and each record read once
    (a publish that wakes a thousand groups' reads is read in a few round trips, not thousands).
    A read with a `PendingAck` has that ack applied first, on the first pipeline (its outcome in
    its result's `acked`), and its floors persisted with the read's."""
    now = floors.clock()
    now_ms = int(now * 1000)
    redis = get_redis()
    streams = list({slot.stream.id: slot.stream for reading, _ in passes for slot in reading.group_slots}.values())
    pipe = scripted_pipeline(redis)
    # due delayed events go to every group of the stream: the first round of each stream's
    # release is the first thing on this pipeline, and the rest (if anything was due) follows
    # once it is answered
    releases: list[tuple[Callable[[list], Round], Answers]] = []
    for stream in streams:
        with pipe.step() as released_answer:
            round_of = queue_release(stream, now_ms, pipe)
        releases.append((round_of, released_answer))
    # and, for reads that may wait, each stream's earliest delayed event after that round (how
    # long a read that finds nothing waits: `reading._wait_for`), on the same round trip
    earliest: list[tuple[int, Callable[[list], int | None], Answers]] = []
    if any(reading.channels for reading, _ in passes):
        for stream in streams:
            with pipe.step() as earliest_answer:
                read_earliest = index_of(stream).earliest_on(pipe)
            earliest.append((stream.id, read_earliest, earliest_answer))
    queued: list[tuple[Answers, Answers]] = []  # each read's: its carried ack's, its counts'
    contexts = [_context(reading, now) for reading, _ in passes]
    ends: dict[int, dict[str, tuple[Head, Tail]]] = {}
    shared_rows: dict[tuple, list] = {}
    shared_segs: dict[tuple, Any] = {}
    shared_facts: dict[int, tuple] = {}
    aheads: list[list[_Ahead] | None] = []  # each read's looks ahead (None: it counts first)
    expiring_ahead: defaultdict[int, list[str]] = defaultdict(list)
    rated: dict[int, Answers] = {}  # reads of groups with a dispatch rate: what they took from it
    batch = LookBatch()  # the looks ahead, gathered by the place they look at
    for n, (ctx, (reading, pending)) in enumerate(zip(contexts, passes, strict=True)):
        if dispatching.limited(ctx.group):
            with pipe.step() as rated[n]:
                dispatching.take(ctx.group, ctx.limit, pipe)
        # then a carried ack: the leases it ends leave room for its read (Redis runs a pipeline
        # in order)
        with pipe.step() as acked:
            if pending is not None:
                pending.queue(pipe)
        ctx.rows, ctx.segs, ctx.facts = shared_rows, shared_segs, shared_facts
        ahead = _looks_ahead(ctx, reading, ends) if pending is None else None
        if ahead is None:  # (a read looking ahead writes them with its first look)
            mark_seen(reading.group, now, pipe)
            if pending is not None:
                note_consumer(reading.group, reading.consumer, "a", now, pipe)
            note_consumer(reading.group, reading.consumer, "r", now, pipe)
        with pipe.step() as counted:
            if ahead is None:
                _queue_counts(reading.group_slots, now, ctx.lease_s, pipe)
            else:
                _queue_looks(ctx, ahead, pipe, batch)
        aheads.append(ahead)
        queued.append((acked, counted))
        if ahead and ctx.ack_policy is not AckPolicy.NONE:  # as for the hand-outs below
            expiring_ahead[int((now + ctx.lease_s) * 1000)].append(group_channel(ctx.group.state_key))
    batch.queue(pipe)
    for due_ms, channels in expiring_ahead.items():
        notify_due(pipe, channels, due_ms, now_ms)
    pipe.execute(meanwhile=_handed_ahead(contexts, aheads))
    released = {
        stream.id: release_due(stream, now_ms, first=round_of(answer.one()))
        for stream, (round_of, answer) in zip(streams, releases, strict=True)
    }
    if earliest:
        _delayed_due(contexts, {pk: read_earliest(answer.all()) for pk, read_earliest, answer in earliest})
    counts: list[list] = []
    stale: list[int] = []  # reads whose counts may be stale
    done: set[int] = set()  # reads whose looks ahead handed out all there was: no further step
    for n, ((reading, pending), (acked, counted), ctx, ahead) in enumerate(
        zip(passes, queued, contexts, aheads, strict=True)
    ):
        if pending is not None:
            ctx.result.acked, ctx.moves = pending.finish(acked.all())
        if n in rated:  # no more than the group's dispatch rate leaves it
            ctx.granted, wait = dispatching.taken(rated[n].one())
            ctx.limit = min(ctx.limit, ctx.granted)
            ctx.rate_due = now + wait if not ctx.granted else None
        if ahead is None:
            counts.append(counted.all())
        else:
            found, complete = _took_ahead(ctx, ahead, counted.all())
            counts.append(found)
            if complete:
                done.add(n)
                continue
        # the counts again when they may be stale: events released to the group's segments after
        # they were counted, or an ack script Redis had lost that ran after them
        if any(released[slot.stream.id] for slot in reading.group_slots) or (pending is not None and pipe.reran):
            stale.append(n)
    if stale:
        pipe = scripted_pipeline(redis)
        recounts: dict[int, Answers] = {}
        for n in stale:
            with pipe.step() as recounts[n]:
                _queue_counts(passes[n][0].group_slots, now, contexts[n].lease_s, pipe)
        pipe.execute()
        for n in stale:
            counts[n] = recounts[n].all()
    work = [
        [] if n in done else _work(ctx, reading_counts, ends, shared_rows)
        for n, (ctx, reading_counts) in enumerate(zip(contexts, counts, strict=True))
    ]
    # a state Redis must start: from what the database knows now (the floor may have moved, and
    # what was handed out before a loss comes again counting on), never from what the request
    # loaded when it began
    fresh = [serve for serves in work for serve in serves if serve.fresh]
    known = known_counts([serve.slot for serve in fresh]) if fresh else {}
    for serve in fresh:  # from the floor as the database knows it now
        serve.start = serve.slot.position.floor
    # every segment's first look in one round trip, each read's events shared out evenly across
    # its segments
    pipe = scripted_pipeline(redis)
    asked: list[tuple[_Context, _Serve, int, _Look, Answers]] = []  # with its answer
    expiring: defaultdict[int, list[str]] = defaultdict(list)  # when leases expire -> the groups
    for ctx, serves in zip(contexts, work, strict=True):
        ctx.known = known
        taken = ctx.serves  # what its looks ahead handed out already
        ctx.serves = taken + serves
        already = sum(len(serve.items) for serve in taken)
        for n, serve in enumerate(serves):
            want = math.ceil((ctx.limit - already - sum(s.asked for s in serves)) / (len(serves) - n))
            if want > 0:
                serve.asked = want
                with pipe.step() as answer:
                    looked = _ask(ctx, serve, want, pipe)
                asked.append((ctx, serve, want, looked, answer))
        if any(serve.asked for serve in serves) and ctx.ack_policy is not AckPolicy.NONE:
            # the leases this read may hand out expire then: a waiting read of the group (another
            # consumer's) looks again at that time, in case they are not acknowledged (one message
            # on the pipeline for all the reads of the pass, no round trip of its own)
            expiring[int((now + ctx.lease_s) * 1000)].append(group_channel(ctx.group.state_key))
    for due_ms, channels in expiring.items():
        notify_due(pipe, channels, due_ms, now_ms)
    if asked:
        pipe.execute()
        for ctx, serve, want, looked, answer in asked:
            _take(ctx, serve, want, looked, looked.read(answer.one()))
    for ctx in contexts:
        _look_more(ctx, redis)
        _answer(ctx)
    _expire_held_back(contexts, redis)
    _persist(contexts, [pending for _, pending in passes])
    if rated:
        _after_dispatch([contexts[n] for n in rated])
    for (reading, _), ctx, reading_counts in zip(passes, contexts, counts, strict=True):
        reading.stops = _stops(ctx, reading_counts)
    for ctx in contexts:  # each consumer's figures (the console's, /metrics'): counted, no round trip
        count_consumer(ctx.group, ctx.consumer, "r", sum(len(part.items) for part in ctx.result.parts), now)
        if ctx.result.acked is not None:
            count_consumer(
                ctx.group, ctx.consumer, "a", ctx.result.acked.acked + ctx.result.acked.waiting_for_sinks, now
            )
    return [ctx.result for ctx in contexts]


def _delayed_due(contexts: list[_Context], earliest: dict[int, int | None]) -> None:
    """Each read's earliest delayed event of its streams (`ReadResult.delayed_due`), from what the
    pass's first round trip found (ms by stream; unknown while a stream's buckets are being
    sealed: the read then asks the index itself, if it waits). Taken after that round's release
    of what was due: a later round of this pass may release more, and a read woken at a time
    that has passed looks again and finds its next one."""
    for ctx in contexts:
        dues = {earliest[slot.stream.id] for slot in ctx.slots}
        if EARLIEST_UNKNOWN in dues:
            continue
        known = [due for due in dues if due is not None]
        ctx.result.delayed_known = True
        ctx.result.delayed_due = min(known) / 1000 if known else None


def _after_dispatch(contexts: list[_Context]) -> None:
    """Reads of groups with a dispatch rate: what each took from its bucket and did not hand out
    goes back; a read that handed out all it took and wanted more was held back (counted), and
    one that took nothing waits, if it waits, until the bucket holds one more."""
    returns = []
    for ctx in contexts:
        handed = sum(len(serve.items) for serve in ctx.serves)
        granted = ctx.granted or 0
        returns.append((ctx.group, granted - handed))
        if handed >= granted and granted < ctx.wanted:
            dispatching.count_limited()
        if ctx.rate_due is not None:
            due = ctx.result.next_due
            ctx.result.next_due = ctx.rate_due if due is None else min(due, ctx.rate_due)
    dispatching.give_back(returns)


def _context(reading: Waiting, now: float) -> _Context:
    group = reading.group
    return _Context(
        group,
        now,
        reading.consumer,
        float(group.ack_timeout_s),
        Poison(group.on_poison),
        tuple(group.backoff_s or ()),
        AckPolicy(group.ack_policy),
        compacted_views(group, reading.group_slots),
        ReadResult(delivery_ranges=[] if reading.ranges else None),
        [],
        reading.frames,
        reading.group_slots,
        reading.max_events,
        wanted=reading.max_events,
    )


def _work(ctx: _Context, counts: list, ends: dict[int, dict[str, tuple[Head, Tail]]], rows: dict) -> list[_Serve]:
    """From a read's counts (one answer per segment, `_queue_counts`): the segments with
    something to hand out, as `_Serve`s in a fair (random) order, and how many events the read
    may hand out (`ctx.limit`: none when the group holds `max_ack_pending` leases). `ends`: the
    streams' ends as read so far by this pass (each stream's read once); `rows`: the records read
    so far (`_ask` reads each once)."""
    result = ctx.result
    result.next_due = min((float(c[6]) for c in counts if c[6] is not None), default=None)
    room = ctx.group.max_ack_pending - sum(c[2] for c in counts)
    if room <= 0:
        result.pending_limit_reached = True
        ctx.limit = 0
        return []
    ctx.limit = min(ctx.limit, room)
    ctx.rows = rows
    serves: list[_Serve] = []
    for slot, (nxt, halted, _, expired, retry_due, dead_due, _) in zip(ctx.slots, counts, strict=True):
        if slot.stream.id not in ends:
            ends[slot.stream.id] = stream_log(slot.stream).ends()
        seg_head, seg_tail = ends[slot.stream.id][slot.segment]
        stop = seg_tail.next_offset
        head = seg_head.offset
        end_cut = slot.subscription.end_cut
        if end_cut is not None and slot.segment in end_cut:  # a bounded group reads up to its end
            end = int(end_cut[slot.segment])
            if head > end:
                # retention deleted past the end: the group missed only what lay before its end,
                # never what it would not have read
                head = max(end, slot.position.floor)
            stop = min(stop, max(end, head))
        start = slot.position.floor if nxt is None else int(nxt)
        if (
            max(start, head) < stop
            or halted is not None
            or expired
            or retry_due
            or dead_due
            or head > slot.position.floor
        ):
            # a segment whose state Redis does not hold (lost, or never read) starts at its floor
            serves.append(_Serve(slot, start, head, stop, (seg_head, seg_tail), fresh=nxt is None))
    if ctx.serves:  # the segments its looks ahead served are done for this pass
        served = {serve.slot.position.id for serve in ctx.serves}
        serves = [serve for serve in serves if serve.slot.position.id not in served]
    ordered = ctx.group.delivery == DeliveryMode.ORDERED
    blocked = _successors_waiting(ctx.slots, counts, acknowledged=ordered)
    if ordered:
        blocked |= _not_mine(ctx, counts)
    if blocked:
        serves = [s for s in serves if (s.slot.stream.id, s.slot.segment) not in blocked]
    random.shuffle(serves)  # fair across segments: no segment is always served first
    return serves


def _successors_waiting(slots: list[Slot], counts: list, acknowledged: bool = False) -> set[tuple[int, str]]:
    """The segments (stream id, segment id) of scaled streams that must not be handed out yet: a
    successor waits until the group has handed out every event of each of its predecessors (up to
    the sealed end; `acknowledged`, an ordered group: until they are all acknowledged, its floor
    at the end), so one routing key's events go out in order across a scale."""
    if not any(slot.stream.layout.is_sealed(slot.segment) for slot in slots):
        return set()  # no predecessor still to read: every sealed segment is processed whole
    blocked, by_floor = _predecessors_open(slots, counts, acknowledged)
    if by_floor:  # the floors may be as this process remembered them (`floors.GROUPS_READ`)
        floors.fresh_positions(by_floor)
        blocked, _ = _predecessors_open(slots, counts, acknowledged)
    return blocked


def _predecessors_open(slots: list[Slot], counts: list, acknowledged: bool) -> tuple[set[tuple[int, str]], list[Slot]]:
    """`_successors_waiting`'s segments, and the predecessors that hold them back by their floor."""
    read_to: dict[int, dict[str, tuple[int, Slot | None]]] = {}
    streams = {}
    for slot, (nxt, *_) in zip(slots, counts, strict=True):
        layout = slot.stream.layout
        if len(layout.active_ids) == len(layout.ids):
            continue  # no sealed segment
        streams[slot.stream.id] = slot.stream
        by_floor = nxt is None or acknowledged
        done = slot.position.floor if by_floor else int(nxt)
        read_to.setdefault(slot.stream.id, {})[slot.segment] = (done, slot if by_floor else None)
    blocked = set()
    open_by_floor: dict[int, Slot] = {}
    for pk, stream in streams.items():
        layout, ends, at = stream.layout, stream_log(stream).sealed_ends(), read_to[pk]
        for segment in at:
            open_ = [
                at[p] for p in layout[segment].predecessors if p in at and at[p][0] < ends[p]
            ]  # (a retired one has no slot)
            if open_:
                blocked.add((pk, segment))
                open_by_floor.update((s.position.id, s) for _, s in open_ if s is not None)
    return blocked, list(open_by_floor.values())


def _not_mine(ctx: _Context, counts: list) -> set[tuple[int, str]]:
    """An ordered group's segments this read's consumer may not read: those another consumer
    owns (`domain.assignments.assign` from the owners, who was heard from within the group's
    `consumer_timeout_s`, and which segments have deliveries in flight; a change of owner is
    claimed in Redis only while the segment has nothing in flight, and every hand-out checks the
    owner in its own call), and its own segments with a redelivery waiting for its backoff (the
    segment's later events wait for it)."""
    redis = get_redis()
    keys = [f"{slot.stream.id}:{slot.segment}" for slot in ctx.slots]
    pipe = redis.pipeline(transaction=False)
    for slot in ctx.slots:
        slot.tracker.owner(pipe)
        slot.tracker.leases_live(ctx.now, pipe)
    pipe.hgetall(floors.consumers_key(ctx.group.state_key))
    *found, consumers = pipe.execute()
    owners = {k: o.decode() for k, o in zip(keys, found[0::2], strict=True) if o}
    in_flight = {k for k, n in zip(keys, found[1::2], strict=True) if n}
    heard = heard_from(consumers, ctx.now)
    heard[ctx.consumer] = ctx.now
    wanted = assign(keys, heard, owners, in_flight, ctx.now, float(ctx.group.consumer_timeout_s))
    changes = [(n, wanted.get(k, "")) for n, k in enumerate(keys) if wanted.get(k, "") != owners.get(k, "")]
    if changes:
        claims = scripted_pipeline(redis)
        for n, who in changes:
            ctx.slots[n].tracker.claim(ctx.now, who, claims)
        for (n, _), now_owner in zip(changes, claims.execute(), strict=True):
            owners[keys[n]] = now_owner.decode() if isinstance(now_owner, bytes) else now_owner
    out = set()
    for slot, k, c in zip(ctx.slots, keys, counts, strict=True):
        _, _, live, expired, retry_due, _, next_due = c
        backing_off = next_due is not None and not (int(live) or int(expired) or int(retry_due))
        if owners.get(k) != ctx.consumer or backing_off:
            out.add((slot.stream.id, slot.segment))
    return out


def heard_from(consumers: dict, now: float) -> dict[str, float]:
    """Each consumer's last read from the group's consumers hash (a read waiting now counts as
    heard now). Acknowledgements do not count: an ack need not name its consumer, and one that
    does not would make `default` a consumer that never reads, holding segments nobody reads."""
    heard: dict[str, float] = {}
    for entry, value in consumers.items():
        kind, _, name = (entry.decode() if isinstance(entry, bytes) else entry).partition(":")
        text = value.decode() if isinstance(value, bytes) else value
        if kind == "r":
            at = float(text)
        elif kind == "w":
            at = now if float(text.split()[-1]) > now else float(text.split()[0])
        else:
            continue
        heard[name] = max(heard.get(name, 0.0), at)
    return heard


def _look_more(ctx: _Context, redis: Any) -> None:
    """One segment at a time, what a read's first looks did not fill (a segment with fewer events
    than its share, a competing consumer that took some): each segment looks at most three
    times."""
    serves = ctx.serves
    while (missing := ctx.limit - sum(len(s.items) for s in serves)) > 0:
        more = [s for s in serves if s.more]
        if not more:
            break
        for n, serve in enumerate(more):
            missing = ctx.limit - sum(len(s.items) for s in serves)
            if missing <= 0:
                break
            want = math.ceil(missing / (len(more) - n))
            pipe = scripted_pipeline(redis)
            looked = _ask(ctx, serve, want, pipe)
            _take(ctx, serve, want, looked, looked.read(pipe.execute()[0]))


def _answer(ctx: _Context) -> None:
    """A read's parts (a segment's deliveries each) from what its looks got."""
    result = ctx.result
    if ctx.limit <= 0:
        return
    result.lease_expires_at = None if ctx.ack_policy is AckPolicy.NONE else seconds_to_iso(ctx.now + ctx.lease_s)
    sink_names = ctx.group.sink_names
    for serve in ctx.serves:
        if not serve.items:
            continue
        slot = serve.slot
        part = ReadPart(
            slot.stream.full_name,
            slot.segment,
            delivery_ids.prefix(slot.subscription.incarnation, slot.stream.id, slot.segment, serve.life),
            serve.items,
            serve.runs,
        )
        if sink_names:  # a redelivery is for the sinks that have not acknowledged it
            part.sinks_pending = [
                [s for s in sink_names if s not in serve.sinks_acked.get(item.offset, ())] for item in serve.items
            ]
        result.parts.append(part)
        if result.delivery_ranges is not None:
            result.delivery_ranges += delivery_ids.id_ranges(part.id_prefix, part.runs)


def _queue_counts(group_slots: list[Slot], now: float, lease_s: float, pipe: ScriptPipeline) -> None:
    """Per segment, one answer (`SegmentTracker.read_counts`): its `next` and `halted`, its live
    leases and expired ones, its retries due and its dead-letter claims lapsed."""
    for slot in group_slots:
        slot.tracker.read_counts(now, lease_s, pipe)


def _persist(contexts: list[_Context], pendings: list[PendingAck | None]) -> None:
    """A pass's floors (its carried acks' with its reads') and how far its reads handed out, in
    one statement, and the delivery counts of their redeliveries: all before the answers leave,
    so that what a consumer holds is what the database knows if Redis loses its state. After an
    ack, an AUTOMATIC group's periodic checkpoint when one is due, as after an ack request."""
    counts = [c for ctx in contexts for c in ctx.counts]
    if counts:
        persist_delivery_counts(counts)
    handed: dict[int, tuple[Slot, int]] = {}
    for ctx in contexts:  # a group read twice in one pass: the further of its two
        for position, (slot, upto) in ctx.handed.items():
            if upto > handed.get(position, (slot, -1))[1]:
                handed[position] = (slot, upto)
    persist_floors([move for ctx in contexts for move in ctx.moves], handed)
    for ctx, pending in zip(contexts, pendings, strict=True):
        if pending is not None:
            maybe_checkpoint(ctx.group)


@dataclass
class _Context:
    """What every look of one read shares."""

    group: ReaderGroup
    now: float
    consumer: str
    lease_s: float
    on_poison: Poison
    backoff: tuple
    ack_policy: AckPolicy
    views: dict[int, Any]
    result: ReadResult
    moves: list[tuple[Slot, int, int]]
    frames: bool  # events from the log left as stored (`framing.Frame`)
    slots: list[Slot]
    limit: int  # how many events it may hand out (`max_events`, less when few leases are left)
    most_live: int = 0  # its looks ahead: the live leases a segment may hold (`_looks_ahead`)
    wanted: int = 0  # its `max_events`
    granted: int | None = None  # what its group's dispatch rate let it hand out (None: no rate)
    rate_due: float | None = None  # when that rate lets it hand out one more, if it let none
    known: dict[int, KnownCounts] = field(default_factory=dict)  # by position: where a state Redis starts now starts
    serves: list[_Serve] = field(default_factory=list)  # its segments with something to hand out
    rows: dict[tuple, list] = field(default_factory=dict)  # records read so far by the pass (`_ask`)
    segs: dict[tuple, Any] = field(default_factory=dict)  # the pass's segments, opened once (`_segment`)
    facts: dict[int, tuple] = field(default_factory=dict)  # by `id` of shared rows: `_row_facts`
    handed: dict[int, tuple[Slot, int]] = field(default_factory=dict)  # by position: (slot, its `next`)
    counts: list[tuple[int, int, int]] = field(default_factory=list)  # (position, offset, count) of redeliveries


@dataclass
class _Serve:
    """One segment's part of a read: where its next look starts, and what its looks got."""

    slot: Slot
    start: int
    head: int
    tail: int  # where the read stops on this segment (its tail, or a bounded group's end)
    ends: tuple[Head, Tail]  # the segment's head and committed tail as the read found them
    items: list[Record | Frame] = field(default_factory=list)  # what its looks got, in order
    runs: list[list[int]] = field(default_factory=list)  # their deliveries (`ReadPart.runs`)
    sinks_acked: dict[int, tuple[str, ...]] = field(default_factory=dict)
    looks: int = 0
    more: bool = True  # another look may find more
    life: int = 0  # of the Redis state that handed them out (in their ids)
    fresh: bool = False  # Redis holds no state for the segment (lost, or never read)
    asked: int = 0  # what its first look asked for
    expired: list[Delivery] = field(default_factory=list)  # handed out past their time to live: kept back


@dataclass
class _Look:
    """One hand-out on one segment, queued on a pipeline: the records read ahead of it (`rows`,
    in offset order; `base` the first one's offset when they hold consecutive offsets, else -1),
    and what reads its answer into a HandOut."""

    seg: Any
    view: Any
    rows: list[Record] | list[Frame]
    base: int
    # its answer into a HandOut (a look ahead's, called with no argument: its counts and a
    # HandOut or None)
    read: Callable[..., Any]

    @functools.cached_property
    def ahead(self) -> dict[int, Record | Frame]:
        """The rows by offset (made in C), for deliveries that are not a run of them."""
        return dict(zip(map(_ROW_OFFSET, self.rows), self.rows))


def _ask(ctx: _Context, serve: _Serve, want: int, pipe: ScriptPipeline) -> _Look:
    """Read the records a hand-out of up to `want` events from `serve.start` would give, and
    queue the tracker's hand-out on `pipe`."""
    slot, start, head, tail = serve.slot, serve.start, serve.head, serve.tail
    group = ctx.group
    seg = _segment(ctx, slot)
    view = ctx.views.get(slot.stream.id)
    horizon = 0 if view is None else view.horizon.get(slot.segment, 0)
    in_view = view is not None and start < horizon
    rows: list[Record] | list[Frame]
    base = -1
    if in_view:  # below the view's horizon a read_compacted group reads the view
        rows = compacted.views().segment_records(slot.stream, view, slot.segment, start, want)
        scan_until = max(map(_ROW_OFFSET, rows)) + 1 if len(rows) == want else horizon
    else:
        rows, base, scan_until = _rows(ctx, seg, serve, want)
    delayed, expired = _row_facts(ctx, rows, slot.stream)
    read = slot.tracker.hand_out(
        ctx.now,
        ctx.consumer,
        want,
        tail,
        ctx.lease_s,
        group.max_deliveries,
        ctx.on_poison,
        floor=slot.position.floor,
        head=0 if in_view else head,
        delayed=delayed,
        scan_until=scan_until,
        present=list(map(_ROW_OFFSET, rows)) if in_view else None,
        backoff=ctx.backoff,
        ack_policy=ctx.ack_policy,
        pipe=pipe,
        runs=True,
        known=ctx.known.get(slot.position.id),
        owned=group.delivery == DeliveryMode.ORDERED,
        expired=expired,
    )
    return _Look(seg, view, rows, base, read)


def _rows(ctx: _Context, seg: Any, serve: _Serve, want: int) -> tuple[list, int, int]:
    """The records from the log a hand-out of up to `want` events from `serve.start` would give
    (read once for all the reads of the pass), the first one's offset when they hold consecutive
    offsets (else -1), and where the hand-out's scan stops."""
    start, head = max(serve.start, serve.head), serve.head
    rows: list = []
    if start < serve.tail:  # the groups read together in one pass read each record once
        key = (serve.slot.stream.id, serve.slot.segment, start, want, ctx.frames)
        if key not in ctx.rows:
            read = seg.read_frames if ctx.frames else seg.read
            ctx.rows[key] = read(start, want, ends=serve.ends)
        rows = ctx.rows[key]
    if not rows:
        return rows, -1, max(serve.start, head)
    first, last = rows[0].offset, rows[-1].offset  # a segment's offsets follow one another
    return rows, first if last - first == len(rows) - 1 else -1, last + 1


def _segment(ctx: _Context, slot: Slot) -> Any:
    """The slot's segment of the log, opened once by a pass for all its reads."""
    key = (slot.stream.id, slot.segment)
    seg = ctx.segs.get(key)
    if seg is None:
        seg = ctx.segs[key] = stream_log(slot.stream).segment(slot.segment)
    return seg


def _row_facts(ctx: _Context, rows: list, stream: Any) -> tuple[dict[int, float], list[int]]:
    """Of records read ahead, those not due yet (`_delayed`) and those past their time to live
    (`_expired`): found once by a pass for every read that shares the records (`_rows`), by a
    clock read after the records were."""
    if not rows:
        return {}, []
    facts = ctx.facts.get(id(rows))
    if facts is None or facts[0] is not rows:
        facts = ctx.facts[id(rows)] = (rows, _delayed(rows), _expired(rows, stream))
    return facts[1], facts[2]


def _delayed(rows: list) -> dict[int, float]:
    """The delivery times of those records that are not due yet, by offset."""
    if not any(map(_DELIVER_AT, rows)):  # most reads have no delayed event at all (checked in C)
        return {}
    # not due by a clock read after the records: an event published with a delivery time already
    # past when it was read is ordinary (the index did not take it)
    after_ms = int(floors.clock() * 1000)
    return {
        r.offset: r.deliver_at_ms / 1000 for r in rows if r.deliver_at_ms is not None and r.deliver_at_ms > after_ms
    }


def _any_own_ttl(rows: list) -> bool:
    """Whether any of these records has its own time to live: a frame's field, read in C; a
    record's header, looked for only in the records that have headers (a read of frames holds
    a record for each large event among them)."""
    if not rows:
        return False
    if Frame in set(map(type, rows)):
        return any(map(_OWN_TTL, rows))
    return any(ttl.TTL_HEADER in headers for headers in filter(None, map(_HEADERS, rows)))


def _expired(rows: list, stream: Any) -> list[int]:
    """The offsets of those records past their time to live (`domain.ttl`), by a clock read
    after the records."""
    stream_ms = ttl.stream_ttl_ms(stream.message_ttl_s)
    if stream_ms is None and not _any_own_ttl(rows):  # most reads: none
        return []
    now_ms = int(floors.clock() * 1000)
    return [r.offset for r in rows if ttl.expired(r.published_ms, r.deliver_at_ms, r.ttl_ms, stream_ms, now_ms)]


@dataclass
class _Ahead:
    """One segment of a read that knows where the group stopped on it (`Waiting.stops`): its
    counts, and its hand-out from there when it has events past that point (`serve`), queued
    in one call (`SegmentTracker.look`)."""

    slot: Slot
    stopped: int  # the segment's `next` as the read's last pass left it
    head: int  # the segment's ends as the read found them
    tail: int
    serve: _Serve | None = None
    want: int = 0
    look: _Look | None = None
    scan_until: int = 0  # where its hand-out's scan stops: it hands out nothing past it


def _handed_ahead(contexts: list[_Context], aheads: list[list[_Ahead] | None]) -> Callable[[], None] | None:
    """How far the pass's looks ahead may hand out, persisted while Redis runs them (the
    pipeline's `meanwhile`): the database's wait and Redis's overlap instead of following one
    another, and the answer still leaves only once the database has what it holds. Each segment
    is taken to be handed out up to where its look's scan stops (`_Ahead.scan_until`), which a
    hand-out never passes; one that hands out less (the state was not what the read expected, or
    Redis had just lost it) leaves `handed` a little ahead, which only counts those events one
    delivery more if Redis then loses the group's state. Only for groups whose floors a hand-out
    does not move (their acknowledgements move them), and that deliver an event more than once
    (`max_deliveries` above 1: one counted delivered once by mistake still reaches a consumer
    before it is poisoned); the rest of the pass's floors are persisted after the looks, as
    before, and what was written here is not written again."""
    handed: dict[int, tuple[Slot, int]] = {}
    for ctx, ahead in zip(contexts, aheads, strict=True):
        if ahead is None or ctx.ack_policy is AckPolicy.NONE or ctx.group.max_deliveries <= 1:
            continue
        for a in ahead:
            if a.look is not None and a.scan_until > max(
                a.slot.position.handed, handed.get(a.slot.position.id, (a.slot, 0))[1]
            ):
                handed[a.slot.position.id] = (a.slot, a.scan_until)
    if not handed:
        return None
    return functools.partial(persist_floors, [], handed)


def _looks_ahead(ctx: _Context, reading: Waiting, ends: dict[int, dict[str, tuple[Head, Tail]]]) -> list[_Ahead] | None:
    """For a read that knows where its group stopped on each segment (a read woken after a pass
    that found nothing), its looks that need not count first: the segments with events past
    that point, each asked for its share of the read from there, the records read ahead. None
    when the read must count first: it does not know, nothing is new past those points (it was
    woken by a lease expiring, a retry, a change), or the group is one whose rules need the
    counts of all its segments before any hand-out (ordered, reading a compacted view, bounded,
    across a scale, fewer leases left than it may hand out)."""
    group, stops = ctx.group, reading.stops
    if stops is None or ctx.views or group.delivery == DeliveryMode.ORDERED or dispatching.limited(group):
        return None
    most_live = (group.max_ack_pending - ctx.limit) // len(ctx.slots)
    if most_live < 0:
        return None
    aheads: list[_Ahead] = []
    for slot in ctx.slots:
        stopped = stops.get(slot.position.id)
        layout = slot.stream.layout
        if stopped is None or slot.subscription.end_cut is not None or len(layout.active_ids) != len(layout.ids):
            return None
        if slot.stream.id not in ends:
            ends[slot.stream.id] = stream_log(slot.stream).ends()
        seg_head, seg_tail = ends[slot.stream.id][slot.segment]
        head, tail = seg_head.offset, seg_tail.next_offset
        if head > stopped or head > slot.position.floor:
            return None  # retention passed the group: the counts say what it missed
        ahead = _Ahead(slot, stopped, head, tail)
        if stopped < tail:
            ahead.serve = _Serve(slot, stopped, head, tail, (seg_head, seg_tail))
        aheads.append(ahead)
    serves = [ahead for ahead in aheads if ahead.serve is not None]
    if not serves:
        return None
    random.shuffle(serves)  # fair across segments, as `_work`
    for n, ahead in enumerate(serves):
        ahead.want = math.ceil((ctx.limit - sum(a.want for a in serves)) / (len(serves) - n))
    ctx.most_live = most_live
    return aheads


def _queue_looks(ctx: _Context, aheads: list[_Ahead], pipe: ScriptPipeline, batch: LookBatch) -> None:
    """Each segment's counts, and its hand-out where it has events past where it stopped: its
    counts queued on `pipe` now, its look gathered in `batch` with the pass's other looks at the
    same place (one call for them all, queued once every read is: `LookBatch`), each look also
    writing what a read writes of its group (its last-seen time, its consumer's last read:
    `floors.read_noted`; the same values again for a second segment's look)."""
    noted = read_noted(ctx.group, ctx.consumer, ctx.now)
    looked = False
    for ahead in aheads:
        slot, serve = ahead.slot, ahead.serve
        if serve is None or ahead.want <= 0:
            slot.tracker.read_counts(ctx.now, ctx.lease_s, pipe)
            continue
        seg = _segment(ctx, slot)
        rows, base, scan_until = _rows(ctx, seg, serve, ahead.want)
        delayed, expired = _row_facts(ctx, rows, slot.stream)
        read = slot.tracker.look(
            ahead.stopped,
            ctx.most_live,
            ctx.now,
            ctx.consumer,
            ahead.want,
            serve.tail,
            ctx.lease_s,
            ctx.group.max_deliveries,
            ctx.on_poison,
            pipe=pipe,
            floor=slot.position.floor,
            head=serve.head,
            delayed=delayed,
            scan_until=scan_until,
            backoff=ctx.backoff,
            ack_policy=ctx.ack_policy,
            noted=noted,
            expired=expired,
            batch=batch,
        )
        looked = True
        ahead.look = _Look(seg, None, rows, base, read)
        ahead.scan_until = scan_until
    if not looked:  # (no hand-out after all: written as any read writes them)
        mark_seen(ctx.group, ctx.now, pipe)
        note_consumer(ctx.group, ctx.consumer, "r", ctx.now, pipe)


def _took_ahead(ctx: _Context, aheads: list[_Ahead], answers: list) -> tuple[list, bool]:
    """What a read's looks ahead found: each segment's counts, and whether they handed out all
    the read would have (every hand-out found the state it expected, and no other segment has
    anything to hand out: no further step). Their hand-outs are taken (`ctx.serves`) either
    way: a read that must go on hands out the rest of its share from the other segments.
    `answers`: the counts of its segments without a look, in order (a look reads its own)."""
    counts: list = []
    complete = True
    counted = iter(answers)
    for ahead in aheads:
        if ahead.look is None:
            found = next(counted)
            nxt, halted, live, expired, retry_due, dead_due, _ = found
            complete = (
                complete
                and nxt is not None
                and max(int(nxt), ahead.head) >= ahead.tail
                and live <= ctx.most_live
                and not (halted or expired or retry_due or dead_due)
            )
        else:
            found, out = ahead.look.read()
            if out is None:
                complete = False
            else:
                serve = cast(_Serve, ahead.serve)
                serve.asked = ahead.want
                ctx.serves.append(serve)
                _take(ctx, serve, ahead.want, ahead.look, out)
        counts.append(found)
    assert next(counted, None) is None, "an answer for each segment without a look"
    ctx.result.next_due = min((float(c[6]) for c in counts if c[6] is not None), default=None)
    return counts, complete


def _stops(ctx: _Context, counts: list) -> dict[int, int]:
    """Where the group stopped on each segment after this pass, for the read's next pass (a
    woken read looks ahead from there: `_looks_ahead`)."""
    stops = {slot.position.id: int(c[0]) for slot, c in zip(ctx.slots, counts, strict=True) if c[0] is not None}
    for serve in ctx.serves:
        if serve.looks:
            stops[serve.slot.position.id] = serve.start
    return stops


def _take(ctx: _Context, serve: _Serve, want: int, look: _Look, out: HandOut) -> None:
    """What one hand-out gave: its events (with their records) to the segment's part of the read,
    its floor and missed events to the moves, its poison to the dead letters."""
    slot, result = serve.slot, ctx.result
    if out.life < 0:  # Redis lost the state since this read looked: the next read starts it
        serve.more = False
        return
    if out.expired:
        wait_stats.counts.add(wait_stats.EXPIRED, out.expired)
    if not serve.looks:
        serve.life = out.life
    serve.sinks_acked.update(out.sinks_acked)
    floor = out.floor
    if out.dead_letter:
        floor = dead_letter(ctx.group, slot, out.dead_letter, int(ctx.now * 1000)) or floor
    ctx.moves.append((slot, floor, out.missed))
    if out.missed:
        result.missed += out.missed
        name = slot.stream.full_name
        result.missed_by_stream[name] = result.missed_by_stream.get(name, 0) + out.missed
    if out.deliveries:  # redeliveries, one by one
        _take_each(serve, look, out.deliveries)
        ctx.counts += [(slot.position.id, o, e) for o, e in out.deliveries if e > 1]
    if out.deliveries or out.first_runs:
        _, was = ctx.handed.get(slot.position.id, (slot, 0))
        ctx.handed[slot.position.id] = (slot, max(was, out.next))
    rows, base = look.rows, look.base
    for a, b in out.first_runs:  # first deliveries, a run of offsets each
        i, j = a - base, b - base
        first = len(serve.items)
        if base >= 0 and i >= 0 and j <= len(rows):  # all read ahead: the run is a slice of them
            serve.items += rows[i:j]
            add_run(serve.runs, a, b - a, 1)
        else:
            _take_each(serve, look, [Delivery(o, 1) for o in range(a, b)])
        if len(serve.items) > first:  # publish -> first hand-out, by the run's oldest event
            wait_stats.delivered_first(
                wait_stats.published_ms_of(serve.items[first]), ctx.now, len(serve.items) - first
            )
    serve.looks += 1
    handed = out.deliveries or out.first_runs
    no_progress = not handed and out.next <= max(serve.start, serve.head)  # a halted segment
    # served and maybe more behind, or a competing consumer took some: another look may find more
    serve.more = serve.looks < 3 and out.next < serve.tail and not no_progress
    serve.start = out.next


def _expire_held_back(contexts: list[_Context], redis: Any) -> None:
    """Deliveries a pass handed out but kept back from its answer, past their time to live
    (`_take_each`): acknowledged for the group (every sink of a fan-out group), in one round
    trip for the pass, their floors persisted with the read's."""
    pipe, queued = None, []
    for ctx in contexts:
        sinks = ctx.group.sink_names
        for serve in ctx.serves:
            if not serve.expired:
                continue
            pipe = pipe or scripted_pipeline(redis)
            runs = runs_of(sorted(serve.expired))
            for sink in sinks or (None,):
                with pipe.step() as answer:
                    read = serve.slot.tracker.ack_runs(runs, sink, sinks, pipe=pipe, life=serve.life)
                queued.append((ctx, serve.slot, read, answer))
            wait_stats.counts.add(wait_stats.EXPIRED, len(serve.expired))
            serve.expired = []
    if pipe is None:
        return
    pipe.execute()
    for ctx, slot, read, answer in queued:
        _, floor = read(answer.one())
        ctx.moves.append((slot, floor, 0))


def _take_each(serve: _Serve, look: _Look, deliveries: list[Delivery]) -> None:
    """Deliveries given one by one, each with its record: read ahead, or read now (a compacted
    view's, or one behind what was read ahead). An offset truncated away meanwhile is skipped:
    the next read counts it missed."""
    offsets = list(map(_OFFSET, deliveries))
    found = list(map(look.ahead.get, offsets))
    pairs: Iterable[tuple[Record | Frame, Delivery]]
    got: Iterable[Record | Frame] = cast(list[Record | Frame], found)
    if None not in found:  # the common case: every record read ahead (pairs made in C)
        pairs = zip(cast(list[Record | Frame], found), deliveries)
    else:
        records = records_at(look.seg, offsets, look.ahead)
        if look.view is not None:  # redeliveries of view events truncated from the log
            lost = [o for o in offsets if o not in records]
            records.update(compacted.views().records_at(serve.slot.stream, look.view, serve.slot.segment, lost))
        pairs = [(records[d.offset], d) for d in deliveries if d.offset in records]
        got = records.values()
    stream = serve.slot.stream
    if stream.message_ttl_s or _any_own_ttl(list(got)):
        # past their time to live since they were last handed out (or not read ahead): kept
        # back, and processed (`_expire_held_back`)
        pairs = list(pairs)
        gone = set(_expired([item for item, _ in pairs], stream))
        if gone:
            serve.expired += [d for _, d in pairs if d.offset in gone]
            pairs = [(item, d) for item, d in pairs if d.offset not in gone]
    items, runs = serve.items, serve.runs
    for item, (offset, epoch) in pairs:
        items.append(item)
        add_run(runs, offset, 1, epoch)
