"""Consuming through a reader group (DESIGN.md §7): read, ack, nack, dead letters, checkpoints.
The only place that moves a group's floors; the views, tasks and the console call these.

The rules live in `streams.domain.acks` and run in Redis (`streams.ack_tracker`); this module
joins them to the segment store (what to hand out, the events themselves) and to the database
(the persisted floors, checkpoints and acknowledgement cuts).

A delivery id is `"<group>-<stream>-<segment>-<offset>-<epoch>"`: it names the group it belongs
to, where the event is, and which delivery of it this is (an older epoch is a lease that expired
and was handed to someone else: its acknowledgement is refused).
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import BigIntegerField, Case, F, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from cbrweb.redis_client import get_redis

from .ack_tracker import SegmentTracker
from .api.serializers import event_json
from .domain.acks import AckResult, Delivery, Poison
from .domain.errors import FieldError
from .models import Checkpoint, ReaderGroup, ReadPosition, RetentionType, Stream, Subscription
from .services import do_create_stream, do_publish, stream_log
from .storage.framing import EventIn, Record
from .storage.store import StreamRecord

AUTO_PREFIX = "auto-"
AUTO_CHECKPOINTS_KEPT = 3
SEEN_TTL_S = 30 * 86400
DEFAULT_CHECKPOINT_INTERVAL_S = 30  # Pravega's automatic checkpoint interval
_now = time.time  # the clock of leases and delays (tests replace it)
_DELIVERY_ID = re.compile(r"^(\d{1,18})-(\d{1,18})-(\d{1,9})-(\d{1,18})-(\d{1,9})$")


@dataclass
class Slot:
    """One group's position on one segment of one of its streams."""

    subscription: Subscription
    stream: Stream
    segment: str
    position: ReadPosition
    tracker: SegmentTracker


@dataclass
class ReadResult:
    deliveries: list[dict]
    missed: int = 0
    missed_by_stream: dict[str, int] = field(default_factory=dict)
    pending_limit_reached: bool = False


@dataclass
class AckOutcome:
    acked: int = 0  # counted as processed
    waiting_for_sinks: int = 0
    given_back: int = 0  # nacks
    refused: list[dict] = field(default_factory=list)


def checkpoint_interval_s(group: ReaderGroup) -> int | None:
    """How often an AUTOMATIC group checkpoints (and so releases) by itself."""
    if group.retention_type != RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT:
        return None
    return group.checkpoint_interval_s or DEFAULT_CHECKPOINT_INTERVAL_S


def delivery_id(group: ReaderGroup, stream: Stream, segment: str, d: Delivery) -> str:
    return f"{group.pk}-{stream.pk}-{segment}-{d.offset}-{d.epoch}"


# -- positions -----------------------------------------------------------------------------


def slots(group: ReaderGroup) -> list[Slot]:
    """The group's positions on every segment of its streams (rows made on first use). One query
    when every position exists."""
    positions = list(
        ReadPosition.objects.filter(subscription__reader_group=group)
        .select_related("subscription__stream__scope")
        .order_by("subscription__stream__scope__name", "subscription__stream__name", "segment_id")
    )
    by_sub: dict[int, dict[str, ReadPosition]] = defaultdict(dict)
    subs: dict[int, Subscription] = {}
    for p in positions:
        by_sub[p.subscription_id][p.segment_id] = p
        subs[p.subscription_id] = p.subscription
    # Subscriptions are made with their positions (and migration 0004 gave older ones theirs):
    # only a group with none, or a stream with fewer rows than segments, needs a second look.
    if not subs or any(len(by_sub[sid]) != sub.stream.segment_count for sid, sub in subs.items()):
        for sub in Subscription.objects.filter(reader_group=group).select_related("stream__scope"):
            missing = [s for s in sub.stream.segment_ids if s not in by_sub[sub.pk]]
            if missing:
                by_sub[sub.pk].update(_make_positions(sub, missing))
            subs[sub.pk] = sub
    redis = get_redis()
    out = []
    for sub in sorted(subs.values(), key=lambda s: (s.stream.scope.name, s.stream.name)):
        for seg in sub.stream.segment_ids:
            # keyed by the subscription: a stream dropped and added again starts afresh
            tracker = SegmentTracker(redis, group.pk, sub.pk, seg)
            out.append(Slot(sub, sub.stream, seg, by_sub[sub.pk][seg], tracker))
    return out


def _make_positions(sub: Subscription, segments: list[str]) -> dict[str, ReadPosition]:
    """Positions start where the group's cut starts (its start position, or where a MANUAL
    subscriber says it is): the head for a segment the cut does not name."""
    ends = stream_log(sub.stream).ends()
    cut = sub.acknowledgement_cut or {}
    rows = [
        ReadPosition(subscription=sub, segment_id=s, floor=max(cut.get(s, 0), ends[s][0].offset))
        for s in segments
    ]
    ReadPosition.objects.bulk_create(rows, ignore_conflicts=True)
    return {
        p.segment_id: p
        for p in ReadPosition.objects.filter(subscription=sub, segment_id__in=segments)
    }


def _persist_floors(moves: list[tuple[Slot, int, int]]) -> None:
    """Persist (slot, floor, missed) moves in one statement. Floors only move forward: each row
    takes the greater of its floor and the new one."""
    merged: dict[int, tuple[Slot, int, int]] = {}
    for slot, floor, missed in moves:  # one slot may move more than once in a request
        _, f, m = merged.get(slot.position.pk, (slot, floor, 0))
        merged[slot.position.pk] = (slot, max(f, floor), m + missed)
    moves = [(slot, floor, missed) for slot, floor, missed in merged.values()
             if floor > slot.position.floor or missed]
    if not moves:
        return
    floors = Case(*[When(pk=slot.position.pk, then=Value(floor)) for slot, floor, _ in moves],
                  output_field=BigIntegerField())
    missed = Case(*[When(pk=slot.position.pk, then=Value(m)) for slot, _, m in moves],
                  default=Value(0), output_field=BigIntegerField())
    ReadPosition.objects.filter(pk__in=[slot.position.pk for slot, _, _ in moves]).update(
        floor=Greatest(F("floor"), floors), missed=F("missed") + missed, updated_at=timezone.now()
    )
    for slot, floor, m in moves:
        slot.position.floor = max(slot.position.floor, floor)
        slot.position.missed += m


def _seen_key(group_id: int) -> str:
    return f"cbr:rg:{{{group_id}}}:seen"


def mark_seen(group: ReaderGroup, now: float) -> None:
    """A consumer of the group read or acknowledged: the group is alive (its checkpoints count as
    acknowledgements for `subscriber_timeout_s`; a group nobody consumes goes stale)."""
    get_redis().set(_seen_key(group.pk), now, ex=SEEN_TTL_S)


def last_seen(group: ReaderGroup) -> datetime | None:
    value = get_redis().get(_seen_key(group.pk))
    return datetime.fromtimestamp(float(value), tz=UTC) if value is not None else None


def forget_trackers(group_id: int, subscription_id: int | None = None) -> None:
    """Drop a group's Redis state (the group was deleted, or stopped reading a stream)."""
    redis = get_redis()
    pattern = f"cbr:acks:{{{group_id}:{'' if subscription_id is None else f'{subscription_id}:'}*"
    batch = []
    for key in redis.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            redis.delete(*batch)
            batch = []
    if batch:
        redis.delete(*batch)
    if subscription_id is None:
        redis.delete(_seen_key(group_id))


# -- read ----------------------------------------------------------------------------------


def read(group: ReaderGroup, max_events: int, wait_ms: int = 0, consumer: str = "") -> ReadResult:
    """Up to `max_events` deliveries, fair across the group's segments; with `wait_ms`, waits up
    to that long for the first one (long poll)."""
    group_slots = slots(group)
    deadline = time.monotonic() + wait_ms / 1000
    pause = 0.02
    while True:
        result = _read_once(group, group_slots, max_events, consumer or "default")
        left = deadline - time.monotonic()
        if result.deliveries or result.pending_limit_reached or left <= 0:
            return result
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.25)


def _read_once(group: ReaderGroup, group_slots: list[Slot], max_events: int, consumer: str) -> ReadResult:
    now = _now()
    now_ms = int(now * 1000)
    lease_s = float(group.ack_timeout_s)
    on_poison = Poison(group.on_poison)
    redis = get_redis()
    pipe = redis.pipeline(transaction=False)
    pipe.set(_seen_key(group.pk), now, ex=SEEN_TTL_S)  # see mark_seen
    for slot in group_slots:
        state, leases, _, _, _, retry, _, dead, _ = slot.tracker.keys
        pipe.hmget(state, "next", "halted")
        pipe.zcount(leases, f"({now}", "+inf")  # live leases
        pipe.zcount(leases, "-inf", now)  # expired: due again
        pipe.zcount(retry, "-inf", now)
        pipe.zcount(dead, "-inf", now - lease_s)
    answers = pipe.execute()[1:]
    live = sum(answers[5 * i + 1] for i in range(len(group_slots)))
    room = group.max_ack_pending - live
    result = ReadResult([])
    if room <= 0:
        result.pending_limit_reached = True
        return result
    limit = min(max_events, room)
    ends = {}
    for slot in group_slots:
        if slot.stream.pk not in ends:
            ends[slot.stream.pk] = stream_log(slot.stream).ends()
    work = []
    for i, slot in enumerate(group_slots):
        (nxt, halted), _, expired, retry_due, dead_due = answers[5 * i: 5 * i + 5]
        head, tail = ends[slot.stream.pk][slot.segment]
        start = slot.position.floor if nxt is None else int(nxt)
        if max(start, head.offset) < tail.next_offset or halted is not None or expired or retry_due \
                or dead_due or head.offset > slot.position.floor:
            work.append((slot, start, head.offset, tail.next_offset))
    random.shuffle(work)  # fair across segments: no segment is always served first
    moves = []
    expires = _iso(now + lease_s)
    for n, (slot, start, head, tail) in enumerate(work):
        remaining = limit - len(result.deliveries)
        if remaining <= 0:
            break
        share = math.ceil(remaining / (len(work) - n))
        seg = stream_log(slot.stream).segment(slot.segment)
        got: list[tuple[Record, Delivery]] = []
        for _attempt in range(3):  # a competing consumer may take the offsets looked at first
            ahead = {r.offset: r for r in seg.read(max(start, head), share - len(got))} if start < tail else {}
            delayed = {o: r.deliver_at_ms / 1000 for o, r in ahead.items()
                       if r.deliver_at_ms is not None and r.deliver_at_ms > now_ms}
            scan_until = max(ahead) + 1 if ahead else max(start, head)
            out = slot.tracker.hand_out(
                now, consumer, share - len(got), tail, lease_s, group.max_deliveries, on_poison,
                floor=slot.position.floor, head=head, delayed=delayed, scan_until=scan_until,
            )
            floor = out.floor
            if out.dead_letter:
                floor = _dead_letter(group, slot, out.dead_letter, now_ms) or floor
            moves.append((slot, floor, out.missed))
            if out.missed:
                result.missed += out.missed
                name = slot.stream.full_name
                result.missed_by_stream[name] = result.missed_by_stream.get(name, 0) + out.missed
            records = _records(seg, [d.offset for d in out.deliveries], ahead)
            # an offset truncated away meanwhile is skipped: the next read counts it missed
            got += [(records[d.offset], d) for d in out.deliveries if d.offset in records]
            if len(got) >= share or out.next >= tail:
                break  # served, or nothing left: no second look
            start = out.next
        result.deliveries += _deliveries_json(group, slot, got, expires)
    _persist_floors(moves)
    return result


def _records(seg, offsets: list[int], known: dict[int, Record]) -> dict[int, Record]:
    """The records at these offsets: those already read, the rest read in contiguous runs."""
    out = {o: known[o] for o in offsets if o in known}
    missing = sorted(o for o in offsets if o not in known)
    i = 0
    while i < len(missing):
        j = i
        while j + 1 < len(missing) and missing[j + 1] == missing[j] + 1:
            j += 1
        start = missing[i]
        while start <= missing[j]:  # a read stops at its byte cap: go on until the run is whole
            got = seg.read(start, missing[j] - start + 1)
            if not got:
                break  # truncated away (or gone): the caller decides
            for rec in got:
                if missing[i] <= rec.offset <= missing[j]:
                    out[rec.offset] = rec
            start = got[-1].offset + 1
        i = j + 1
    return out


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def _deliveries_json(group, slot: Slot, got: list[tuple[Record, Delivery]], expires: str) -> list[dict]:
    """Each event as every answer carries it, plus the delivery's fields."""
    prefix = f"{group.pk}-{slot.stream.pk}-{slot.segment}-"
    stream = slot.stream.full_name
    out = []
    for rec, d in got:
        event = event_json(StreamRecord(slot.segment, rec))
        event["stream"] = stream
        event["delivery_id"] = f"{prefix}{d.offset}-{d.epoch}"
        event["delivery_count"] = d.epoch
        event["lease_expires_at"] = expires
        out.append(event)
    return out


# -- dead letters --------------------------------------------------------------------------


def dead_letter_name(stream: Stream) -> str:
    return f"{stream.name[:124]}-dlq"


def _dead_letter_stream(stream: Stream) -> Stream:
    name = dead_letter_name(stream)
    found = Stream.objects.filter(scope=stream.scope, name=name).select_related("scope").first()
    if found is not None:
        return found
    try:
        return do_create_stream(scope=stream.scope.name, name=name, segment_count=1,
                                description=f"dead letters of {stream.full_name}")
    except FieldError:  # created by another process meanwhile
        return Stream.objects.select_related("scope").get(scope=stream.scope, name=name)


def _dead_letter(group: ReaderGroup, slot: Slot, offsets: list[int], now_ms: int) -> int | None:
    """Append the events to `<stream>-dlq` (durably), then count them as processed. A crash in
    between appends them again later (the claim expires): at least once, never lost."""
    seg = stream_log(slot.stream).segment(slot.segment)
    records = _records(seg, offsets, {})
    reasons = slot.tracker.reasons(offsets)
    epochs = get_redis().hmget(slot.tracker.keys[3], offsets)
    head = seg.read_head().offset
    events, settled = [], []
    for offset, epoch in zip(offsets, epochs, strict=True):
        rec = records.get(offset)
        if rec is None:
            if offset < head:
                settled.append(offset)  # truncated away: nothing left to dead-letter
            continue  # not read this time: the claim stays and expires, it is tried again
        headers = dict(rec.headers or {})
        headers.update({
            "cbr-dlq-reason": reasons.get(offset, "max deliveries reached"),
            "cbr-dlq-stream": slot.stream.full_name,
            "cbr-dlq-segment": slot.segment,
            "cbr-dlq-offset": str(offset),
            "cbr-dlq-reader-group": str(group),
            "cbr-dlq-deliveries": (epoch or b"1").decode(),
            "cbr-dlq-at": str(now_ms),
        })
        events.append(EventIn(rec.payload, rec.routing_key, rec.key, headers))
        settled.append(offset)
    if events:
        do_publish(_dead_letter_stream(slot.stream), events)
    return slot.tracker.dead_lettered(settled)


# -- ack / nack ----------------------------------------------------------------------------


def _parse_ids(group: ReaderGroup, ids: object, group_slots: list[Slot]) -> dict[tuple, list]:
    """Delivery ids by (stream, segment) → [(index, Delivery)]; anything wrong is refused
    before anything is applied."""
    if not isinstance(ids, list) or not ids:
        raise FieldError("delivery_ids", "must be a non-empty list of delivery ids")
    if len(ids) > settings.CBR_MAX_READ_EVENTS:
        raise FieldError("delivery_ids", f"holds {len(ids)} ids; at most {settings.CBR_MAX_READ_EVENTS}")
    known = {(s.stream.pk, s.segment): s for s in group_slots}
    prefixes = {f"{group.pk}-{sid}-{seg}": (sid, seg) for sid, seg in known}
    by_slot: dict[tuple, list] = defaultdict(list)
    for i, raw in enumerate(ids):
        if type(raw) is str:  # the common case, without a regular expression
            head, _, epoch = raw.rpartition("-")
            prefix, _, offset = head.rpartition("-")
            key = prefixes.get(prefix)
            if key is not None and offset.isascii() and offset.isdigit() and epoch.isascii() \
                    and epoch.isdigit() and len(offset) <= 18 and len(epoch) <= 9:
                by_slot[key].append((i, Delivery(int(offset), int(epoch))))
                continue
        m = _DELIVERY_ID.match(raw) if isinstance(raw, str) else None
        if m is None:
            raise FieldError(f"delivery_ids[{i}]", f"{raw!r} is not a delivery id", 400, "unknown_delivery")
        gid, sid, seg, offset, epoch = m.groups()
        if int(gid) != group.pk:
            raise FieldError(f"delivery_ids[{i}]", "belongs to another reader group", 400, "unknown_delivery")
        key = (int(sid), str(int(seg)))
        if key not in known:
            raise FieldError(f"delivery_ids[{i}]", "names a stream this group does not read", 400, "unknown_delivery")
        by_slot[key].append((i, Delivery(int(offset), int(epoch))))
    return by_slot


def _refusal(outcome: AckOutcome, ids: list, verb: str) -> None:
    if not outcome.refused:
        return
    first = outcome.refused[0]
    unknown = [r for r in outcome.refused if r["reason"] != "stale"]
    status, code = (400, "unknown_delivery") if unknown else (409, "lease_lost")
    first = (unknown or outcome.refused)[0]
    detail = {
        "unknown": "is not a live delivery of this group (never handed out, or already given back)",
        "stale": "its lease expired and the event was handed out again: this delivery is void",
    }.get(first["reason"], first["reason"])
    details = {"refused": outcome.refused, "acked": outcome.acked,
               "waiting_for_sinks": outcome.waiting_for_sinks, "given_back": outcome.given_back}
    raise FieldError(
        first["field"],
        f"{detail}; {len(outcome.refused)} of {len(ids)} refused, the others were {verb}",
        status, code, details,
    )


def ack(group: ReaderGroup, ids: object, sink: object = None) -> AckOutcome:
    """Acknowledge deliveries, in any order. For a fan-out group, `sink` says which sink
    acknowledges; an event counts once every sink has. A retried ack is harmless."""
    sinks = group.sink_names
    if sinks:
        if sink not in sinks:
            raise FieldError("sink", f"must be one of {', '.join(sinks)} (the group's sinks)")
    elif sink is not None:
        raise FieldError("sink", "this group declares no sinks")
    group_slots = slots(group)
    by_slot = _parse_ids(group, ids, group_slots)
    slot_of = {(s.stream.pk, s.segment): s for s in group_slots}
    outcome = AckOutcome()
    mark_seen(group, _now())
    pipe = get_redis().pipeline(transaction=False)
    readers = [
        (slot_of[key], items, slot_of[key].tracker.ack_many([d for _, d in items], sink, sinks, pipe=pipe))
        for key, items in by_slot.items()
    ]
    moves = []
    for (slot, items, reader), answer in zip(readers, pipe.execute(), strict=True):
        results, floor = reader(answer)
        _tally(outcome, ids, items, results)
        moves.append((slot, floor, 0))
    _persist_floors(moves)
    maybe_checkpoint(group)
    _refusal(outcome, ids, "acknowledged")
    return outcome


def nack(group: ReaderGroup, ids: object, delay_ms: int = 0, reason: str = "") -> AckOutcome:
    """Give deliveries back: each is handed out again after `delay_ms`."""
    group_slots = slots(group)
    by_slot = _parse_ids(group, ids, group_slots)
    slot_of = {(s.stream.pk, s.segment): s for s in group_slots}
    outcome = AckOutcome()
    now = _now()
    for key, items in by_slot.items():
        results = slot_of[key].tracker.nack_many([d for _, d in items], now, delay_ms / 1000, reason)
        _tally(outcome, ids, items, results, nack=True)
    _refusal(outcome, ids, "given back")
    return outcome


def _tally(outcome: AckOutcome, ids: list, items: list, results: list[AckResult], nack: bool = False) -> None:
    for (i, _), result in zip(items, results, strict=True):
        if result.acked:
            if nack:
                outcome.given_back += 1
            else:
                outcome.acked += 1
        elif result.reason == "waiting-for-sinks":
            outcome.waiting_for_sinks += 1
        elif result.reason != "already-acked":
            outcome.refused.append({"field": f"delivery_ids[{i}]", "delivery_id": ids[i], "reason": result.reason})


# -- checkpoints ---------------------------------------------------------------------------


def current_floors(group: ReaderGroup, group_slots: list[Slot] | None = None) -> dict[str, dict[str, int]]:
    """The group's floor on every segment of its streams, raised to each segment's head (what
    lies before the head is gone): `{"scope/name": {"0": 12, …}}`. The live floor in Redis is
    persisted on the way (a process that died after an ack may have left the row behind)."""
    group_slots = slots(group) if group_slots is None else group_slots
    pipe = get_redis().pipeline(transaction=False)
    for slot in group_slots:
        pipe.hget(slot.tracker.keys[0], "floor")
    live = pipe.execute()
    heads: dict[int, dict[str, int]] = {}
    cuts: dict[str, dict[str, int]] = {}
    _persist_floors([(slot, int(floor), 0) for slot, floor in zip(group_slots, live, strict=True) if floor is not None])
    for slot in group_slots:
        if slot.stream.pk not in heads:
            heads[slot.stream.pk] = stream_log(slot.stream).head_cut()
        head = heads[slot.stream.pk][slot.segment]
        cuts.setdefault(slot.stream.full_name, {})[slot.segment] = max(slot.position.floor, head)
    return cuts


def check_checkpoint_name(name: object) -> str:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", name):
        raise FieldError("name", "must be 1-128 letters, digits, '_', '.', ':' or '-'")
    if name.startswith(AUTO_PREFIX):
        raise FieldError("name", f"names starting with '{AUTO_PREFIX}' are the automatic checkpoints'")
    return name


def do_checkpoint(group: ReaderGroup, name: str, persist: bool = False) -> Checkpoint:
    """Record the group's floor across all its streams. An AUTOMATIC group publishes it as its
    acknowledgement cut: what was handed out but not processed is never released."""
    cuts = current_floors(group)
    now = timezone.now()
    try:
        with transaction.atomic():
            cp = Checkpoint.objects.create(reader_group=group, name=name, cuts=cuts, persist=persist)
            ReaderGroup.objects.filter(pk=group.pk).update(last_checkpoint_at=now)
            group.last_checkpoint_at = now
            if group.retention_type == RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT:
                _publish(group, cuts)
    except IntegrityError:
        raise FieldError("name", f"{group} already has a checkpoint {name}", 409, "duplicate") from None
    return cp


def maybe_checkpoint(group: ReaderGroup) -> Checkpoint | None:
    """The periodic checkpoint of an AUTOMATIC group, when one is due (called by beat and after
    acks): named `auto-<time>`; only the last few automatic ones are kept."""
    interval = checkpoint_interval_s(group)
    if interval is None:
        return None
    now = timezone.now()
    if group.last_checkpoint_at and (now - group.last_checkpoint_at).total_seconds() < interval:
        return None
    name = f"{AUTO_PREFIX}{now:%Y%m%dT%H%M%S.%f}"
    try:
        cp = do_checkpoint(group, name)
    except FieldError:
        return None  # another process checkpointed in the same microsecond
    old = (
        Checkpoint.objects.filter(reader_group=group, name__startswith=AUTO_PREFIX, persist=False)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[AUTO_CHECKPOINTS_KEPT:]
    )
    Checkpoint.objects.filter(pk__in=list(old)).delete()
    return cp


def do_release_checkpoint(group: ReaderGroup, name: str) -> list[Subscription]:
    """A MANUAL subscriber releases at a persisted checkpoint: its cuts become the group's
    acknowledgement cuts, validated as any published cut is (within [head, tail], not behind
    the previous cut)."""
    from .reader_groups import check_truncation_cut, publish_cut

    cp = Checkpoint.objects.filter(reader_group=group, name=name).first()
    if cp is None:
        raise FieldError("checkpoint", f"{group} has no checkpoint {name}", 404, "checkpoint_not_found")
    if group.retention_type != RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT:
        raise FieldError(
            "retention_type",
            f"is {group.retention_type}: only MANUAL_RELEASE_AT_USER_STREAMCUT groups release at a checkpoint",
            409, "not_manual",
        )
    if not cp.persist:
        raise FieldError("checkpoint", f"{name} is not persisted: only persisted checkpoints are released", 409, "not_persisted")
    checked = [check_truncation_cut(group, {"stream": s, "stream_cut": cut}) for s, cut in cp.cuts.items()]
    with transaction.atomic():
        return [publish_cut(*c) for c in checked]


def _publish(group: ReaderGroup, cuts: dict[str, dict[str, int]]) -> None:
    """Move the group's acknowledgement cuts forward to `cuts` (never back)."""
    from retention.services import recheck_full_streams

    moved = []
    seen = last_seen(group)
    subs = Subscription.objects.filter(reader_group=group).select_related("stream__scope", "stream__retention_policy")
    for sub in subs.select_for_update(of=("self",)):  # concurrent checkpoints: the greater cut wins
        cut = cuts.get(sub.stream.full_name)
        if cut is None:
            continue
        previous = sub.acknowledgement_cut or {}
        new = {s: max(o, previous.get(s, 0)) for s, o in cut.items()}
        fields = []
        if seen is not None and (sub.acknowledged_at is None or seen > sub.acknowledged_at):
            sub.acknowledged_at = seen  # a checkpoint vouches for the group as far as it was seen
            fields.append("acknowledged_at")
        if new != previous:
            log = stream_log(sub.stream)
            sub.acknowledgement_cut = new
            sub.acknowledgement_sizes = {s: log.segment(s).size_till(o) for s, o in new.items()}
            fields += ["acknowledgement_cut", "acknowledgement_sizes"]
            moved.append(sub.stream)
        if fields:
            sub.save(update_fields=fields)
    if moved:
        recheck_full_streams(moved)


def periodic_checkpoints() -> int:
    """Beat: checkpoint every AUTOMATIC group whose interval has passed."""
    made = 0
    for group in ReaderGroup.objects.filter(
        retention_type=RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    ).select_related("scope"):
        made += maybe_checkpoint(group) is not None
    return made


# -- what the console, the API and /metrics show --------------------------------------------


@dataclass
class PositionState:
    stream: str
    segment: str
    floor: int  # persisted, or the live one in Redis when ahead
    head: int
    tail: int
    lag_events: int  # events from the floor (or the head) to the tail: not yet processed
    pending: int
    waiting: int
    redelivered: int
    dead_lettered: int
    skipped: int
    missed: int
    halted_at: int | None


def group_state(group: ReaderGroup) -> list[PositionState]:
    from .ack_tracker import stats_many

    group_slots = slots(group)
    stats = stats_many(get_redis(), [s.tracker for s in group_slots])
    ends: dict[int, dict] = {}
    out = []
    for slot, st in zip(group_slots, stats, strict=True):
        if slot.stream.pk not in ends:
            ends[slot.stream.pk] = stream_log(slot.stream).ends()
        head, tail = ends[slot.stream.pk][slot.segment]
        floor = max(slot.position.floor, st.floor or 0)
        out.append(PositionState(
            stream=slot.stream.full_name, segment=slot.segment, floor=floor, head=head.offset,
            tail=tail.next_offset, lag_events=max(0, tail.next_offset - max(floor, head.offset)),
            pending=st.pending, waiting=st.waiting, redelivered=st.redelivered,
            dead_lettered=st.dead_lettered, skipped=st.skipped, missed=slot.position.missed,
            halted_at=st.halted_at,
        ))
    return out
