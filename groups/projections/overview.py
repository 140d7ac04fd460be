"""Each reader group as the console and /metrics show it: its positions per stream with the lag in
events and bytes, its acknowledgement cuts and their age, poison halts and dead-letter streams.
Reads only: the positions come from `projections.lag.group_state`; nothing here moves a floor or a cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from groups.consuming import dead_letter_name
from groups.models import ReaderGroup, Subscription
from groups.projections.lag import PositionState, group_state
from streams.logs import stream_log
from streams.models import Stream


@dataclass(frozen=True)
class StreamTotals:
    """One group's positions on one stream, summed over its segments (what /metrics exports)."""

    lag_events: int = 0
    pending: int = 0
    waiting: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    missed: int = 0
    halted: bool = False


def totals_by_stream(states: Iterable[PositionState]) -> dict[str, StreamTotals]:
    """`group_state` summed per stream, in the order the streams come."""
    out: dict[str, StreamTotals] = {}
    for st in states:
        t = out.get(st.stream, StreamTotals())
        out[st.stream] = StreamTotals(
            lag_events=t.lag_events + st.lag_events,
            pending=t.pending + st.pending,
            waiting=t.waiting + st.waiting,
            redelivered=t.redelivered + st.redelivered,
            dead_lettered=t.dead_lettered + st.dead_lettered,
            skipped=t.skipped + st.skipped,
            missed=t.missed + st.missed,
            halted=t.halted or st.halted_at is not None,
        )
    return out


# -- the list ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSummary:
    group: ReaderGroup
    streams: list[Stream]
    lag_events: int
    pending: int
    halts: list[PositionState]


def group_summaries(groups: Iterable[ReaderGroup]) -> list[GroupSummary]:
    """A row per group. Each group costs one `group_state` (two queries and one Redis round
    trip), so callers pass a page of groups, not all of them."""
    out = []
    for group in groups:
        states = group_state(group)
        out.append(
            GroupSummary(
                group=group,
                streams=sorted({sub.stream for sub in group.subscription_set.all()}, key=str),
                lag_events=sum(st.lag_events for st in states),
                pending=sum(st.pending for st in states),
                halts=[st for st in states if st.halted_at is not None],
            )
        )
    return out


# -- one group -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentPosition:
    state: PositionState
    lag_bytes: int  # payload bytes from the floor (or the head) to the tail


@dataclass(frozen=True)
class StreamPosition:
    stream: Stream
    cut: dict[str, int] | None
    acknowledged_at: datetime | None
    active: bool | None  # None: the group is not a subscriber (its cut holds nothing back)
    segments: list[SegmentPosition]
    dead_letters: Stream | None  # `<name>-dlq` in the same scope, once something went there

    @property
    def lag_events(self) -> int:
        return sum(s.state.lag_events for s in self.segments)

    @property
    def lag_bytes(self) -> int:
        return sum(s.lag_bytes for s in self.segments)


@dataclass(frozen=True)
class GroupOverview:
    group: ReaderGroup
    streams: list[StreamPosition]

    def _sum(self, field: str) -> int:
        return sum(getattr(s.state, field) for p in self.streams for s in p.segments)

    @property
    def halts(self) -> list[PositionState]:
        return [s.state for p in self.streams for s in p.segments if s.state.halted_at is not None]

    @property
    def lag_events(self) -> int:
        return self._sum("lag_events")

    @property
    def lag_bytes(self) -> int:
        return sum(p.lag_bytes for p in self.streams)

    @property
    def pending(self) -> int:
        return self._sum("pending")

    @property
    def redelivered(self) -> int:
        return self._sum("redelivered")

    @property
    def dead_lettered(self) -> int:
        return self._sum("dead_lettered")


def group_overview(group: ReaderGroup, now: datetime | None = None) -> GroupOverview:
    now = now or timezone.now()
    states = group_state(group)
    subs = list(
        Subscription.objects.filter(reader_group=group)
        .select_related("stream__scope", "stream__retention_policy")
        .order_by("stream__scope__name", "stream__name")
    )
    dlqs = _dead_letter_streams([sub.stream for sub in subs])
    by_stream: dict[str, list[PositionState]] = {}
    for st in states:
        by_stream.setdefault(st.stream, []).append(st)
    streams = []
    for sub in subs:
        stream = sub.stream
        streams.append(
            StreamPosition(
                stream=stream,
                cut=sub.acknowledgement_cut,
                acknowledged_at=sub.acknowledged_at,
                active=_active(group, sub, now),
                segments=_with_lag_bytes(stream, by_stream.get(stream.full_name, [])),
                dead_letters=dlqs.get(stream.pk),
            )
        )
    return GroupOverview(group, streams)


def _active(group: ReaderGroup, sub: Subscription, now: datetime) -> bool | None:
    if not group.is_subscriber:
        return None
    return sub.is_active(now)


def _with_lag_bytes(stream: Stream, states: list[PositionState]) -> list[SegmentPosition]:
    """Lag in payload bytes: the tail's cumulative size minus the size before the floor (or the
    head, where the floor lies behind it). One record read per segment whose floor lies strictly
    between its head and its tail; none for the others."""
    if not states:
        return []
    log = stream_log(stream)
    ends = log.ends()
    out = []
    for st in states:
        head, tail = ends[st.segment]
        start = min(max(st.floor, head.offset), tail.next_offset)
        if start == head.offset:
            size = head.cum_size
        elif start == tail.next_offset:
            size = tail.cum_size
        else:
            try:
                size = log.segment(st.segment).size_till(start)
            except ValueError:
                # truncated past `start` since the ends were read: what lay before the new head
                # is gone (the group will count it missed), so the lag starts at the new head
                size = log.segment(st.segment).read_head().cum_size
        out.append(SegmentPosition(st, max(0, tail.cum_size - size)))
    return out


def _dead_letter_streams(streams: list[Stream]) -> dict[int, Stream]:
    """Each stream's dead-letter stream, where one exists (one query for all of them)."""
    if not streams:
        return {}
    wanted = {(s.scope_id, dead_letter_name(s)): s.pk for s in streams}
    match = Q()
    for scope_id, name in wanted:
        match |= Q(scope_id=scope_id, name=name)
    found = Stream.objects.filter(match).select_related("scope")
    return {wanted[(d.scope_id, d.name)]: d for d in found}
