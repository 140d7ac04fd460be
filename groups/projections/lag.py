"""A group's positions and lag, as the console, the API and /metrics show them: per segment, the
floor, the head and the tail, the lag in events and the tracker's counts (`group_state`); every
group's totals per stream at once, for /metrics (`every_group_totals`). Reads only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groups.ack_tracker import SegmentTracker, stats_many
from groups.consuming.floors import slots
from groups.models import ReaderGroup, ReadPosition, Subscription
from store.redis_connection import get_redis, read_many
from streams.logs import stream_log


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
    group_slots = slots(group)
    stats = stats_many(get_redis(), [s.tracker for s in group_slots])
    ends: dict[int, dict] = {}
    out = []
    for slot, st in zip(group_slots, stats, strict=True):
        if slot.stream.pk not in ends:
            ends[slot.stream.pk] = stream_log(slot.stream).ends()
        head, tail = ends[slot.stream.pk][slot.segment]
        floor = max(slot.position.floor, st.floor or 0)
        out.append(
            PositionState(
                stream=slot.stream.full_name,
                segment=slot.segment,
                floor=floor,
                head=head.offset,
                tail=tail.next_offset,
                lag_events=max(0, tail.next_offset - max(floor, head.offset)),
                pending=st.pending,
                waiting=st.waiting,
                redelivered=st.redelivered,
                dead_lettered=st.dead_lettered,
                skipped=st.skipped,
                missed=slot.position.missed,
                halted_at=st.halted_at,
            )
        )
    return out


@dataclass(frozen=True)
class GroupTotals:
    """One group's positions on one stream, summed over the stream's segments: what /metrics
    exports of it (`totals_by_stream(group_state(group))`, less what it does not export)."""

    group: str
    stream: str
    lag_events: int
    pending: int
    redelivered: int
    dead_lettered: int
    halted: bool


def every_group_totals(ends: Mapping[int, tuple[Mapping[str, int], Mapping[str, int]]]) -> list[GroupTotals]:
    """`GroupTotals` of every group on each of its streams, ordered by group, then stream, as
    `group_state` would give them group by group, but in two queries and two Redis round trips
    whatever the number of groups (the state hash of every tracker, then the leases of those
    that have one; /metrics made a query and a round trip per group, 10 000 of each). `ends`:
    each stream's head and tail cuts by its id, read once by the caller; a stream not in them
    (made since) is left out, and a segment without its position row yet (made by the group's
    next read) counts from the head. Nothing is written."""
    subs = Subscription.objects.order_by(
        "reader_group__scope__name", "reader_group__name", "stream__scope__name", "stream__name"
    ).values_list(
        "pk",
        "state_key",
        "stream_id",
        "stream__scope__name",
        "stream__name",
        "reader_group__scope__name",
        "reader_group__name",
    )
    floors = {
        (sub, segment): floor
        for sub, segment, floor in ReadPosition.objects.order_by().values_list("subscription_id", "segment_id", "floor")
    }
    # the tracker's keys, named as `SegmentTracker.keys_of` names them (in its order, as
    # `stats_many` reads them), made from a pattern: 11 names a tracker were much of a scrape
    pattern = SegmentTracker.keys_of("\0", "\1")
    state_key_of, leased_key_of = pattern[0], pattern[9]
    plan = []  # per subscription: group, stream, and (head, tail, persisted floor, key) per segment
    for sub_id, state_key, stream_id, stream_scope, stream_name, group_scope, group_name in subs:
        if stream_id not in ends:
            continue
        head_cut, tail_cut = ends[stream_id]
        segments = [
            (head_cut.get(segment, 0), tail, floors.get((sub_id, segment), 0), (state_key, segment))
            for segment, tail in tail_cut.items()
        ]
        plan.append((f"{group_scope}/{group_name}", f"{stream_scope}/{stream_name}", segments))
    trackers = [key for _, _, segments in plan for *_, key in segments]
    states = [
        _as_hash(state)
        for state in read_many([("HGETALL", state_key_of.replace("\0", k).replace("\1", seg)) for k, seg in trackers])
    ]
    # a tracker's keys are made and dropped with its state hash: without one, nothing is leased
    held = [key for key, state in zip(trackers, states, strict=True) if state]
    leased = dict(
        zip(held, read_many([("BITCOUNT", leased_key_of.replace("\0", k).replace("\1", seg)) for k, seg in held]))
    )
    by_tracker = iter(states)
    out = []
    for group, stream, segments in plan:
        lag = pending = redelivered = dead_lettered = 0
        halted = False
        for head, tail, persisted, key in segments:
            state = next(by_tracker)
            lag += max(0, tail - max(persisted, int(state.get(b"floor", 0)), head))
            pending += leased.get(key, 0)
            redelivered += int(state.get(b"redelivered", 0))
            dead_lettered += int(state.get(b"dead_lettered", 0))
            halted = halted or b"halted" in state
        out.append(GroupTotals(group, stream, lag, pending, redelivered, dead_lettered, halted))
    return out


def _as_hash(reply: dict | list) -> dict:
    """A hash as RESP3 gives it (a dict) or RESP2 (a list of fields and values)."""
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))
