"""What the console, the API and /metrics show of a group's positions."""

from __future__ import annotations

from dataclasses import dataclass

from store.redis_connection import get_redis
from streams.ack_tracker import stats_many
from streams.consuming.positions import slots
from streams.logs import stream_log
from streams.models import ReaderGroup


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
