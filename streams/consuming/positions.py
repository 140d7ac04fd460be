"""A reader group's positions: one `Slot` per segment of each of its streams (the persisted
floor and the Redis tracker), floors persisted only upwards, the group's last-seen time, and the
clock every lease and delay uses (`clock`; tests replace it)."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import BigIntegerField, Case, F, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from cbrweb.redis_client import get_redis

from ..ack_tracker import SegmentTracker
from ..delaying.index import state_key as delayed_state_key
from ..models import ReaderGroup, ReadPosition, Stream, Subscription
from ..services import stream_log
from ..storage.framing import Record

SEEN_TTL_S = 30 * 86400
clock = time.time  # the clock of leases and delays (tests replace it)


@dataclass
class Slot:
    """One group's position on one segment of one of its streams."""

    subscription: Subscription
    stream: Stream
    segment: str
    position: ReadPosition
    tracker: SegmentTracker


def slots(group: ReaderGroup) -> list[Slot]:
    """The group's positions on every segment of its streams (rows made on first use). One query
    when every position exists."""
    positions = list(
        ReadPosition.objects.filter(subscription__reader_group=group)
        .select_related("subscription__stream__scope")
        .order_by("subscription__stream__scope__name", "subscription__stream__name", "segment_id")
    )
    return _slots_of(group, positions)


def group_and_slots(scope: str, name: str) -> tuple[ReaderGroup, list[Slot]] | None:
    """The group `scope/name` and its `slots`, found together in one query when it has positions
    (every read and ack asks for both); None when no such group exists."""
    positions = list(
        ReadPosition.objects.filter(
            subscription__reader_group__scope__name=scope, subscription__reader_group__name=name
        )
        .select_related("subscription__stream__scope", "subscription__reader_group__scope")
        .order_by("subscription__stream__scope__name", "subscription__stream__name", "segment_id")
    )
    if positions:
        group = positions[0].subscription.reader_group
        for p in positions:
            p.subscription.reader_group = group  # one instance: a change made through one is seen by all
    else:  # a group without positions yet (or none): the plain way
        group = ReaderGroup.objects.select_related("scope").filter(scope__name=scope, name=name).first()
        if group is None:
            return None
    return group, _slots_of(group, positions)


def _slots_of(group: ReaderGroup, positions: list[ReadPosition]) -> list[Slot]:
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
                by_sub[sub.pk].update(make_positions(sub, missing))
            subs[sub.pk] = sub
    redis = get_redis()
    out = []
    for sub in sorted(subs.values(), key=lambda s: (s.stream.scope.name, s.stream.name)):
        for seg in sub.stream.segment_ids:
            # keyed by the subscription: a stream dropped and added again starts afresh
            tracker = SegmentTracker(redis, group.pk, sub.pk, seg, delayed_state_key(sub.stream_id))
            out.append(Slot(sub, sub.stream, seg, by_sub[sub.pk][seg], tracker))
    return out


def make_positions(sub: Subscription, segments: list[str]) -> dict[str, ReadPosition]:
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


def persist_floors(moves: list[tuple[Slot, int, int]]) -> None:
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


def seen_key(group_id: int) -> str:
    return f"cbr:rg:{{{group_id}}}:seen"


def mark_seen(group: ReaderGroup, now: float, pipe=None) -> None:
    """A consumer of the group read or acknowledged: the group is alive (its checkpoints count as
    acknowledgements for `subscriber_timeout_s`; a group nobody consumes goes stale). With `pipe`,
    queued on that pipeline."""
    (pipe if pipe is not None else get_redis()).set(seen_key(group.pk), now, ex=SEEN_TTL_S)


def last_seen(group: ReaderGroup) -> datetime | None:
    value = get_redis().get(seen_key(group.pk))
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
        redis.delete(seen_key(group_id))


def records_at(seg, offsets: list[int], known: dict[int, Record]) -> dict[int, Record]:
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
