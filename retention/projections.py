"""Each subscriber of a stream as the console and /metrics show it: its acknowledgement cut, what it
holds back from retention, active or stale. Reads only; the activity rule is
`domain.retention.is_active`.

Two counts, named apart everywhere (docs/consuming.md, "Lag and held back"): a group's **lag** is
the events from its floor to the tail, what it has not processed (`groups.projections.lag`); a
subscriber **holds back** the events from its acknowledgement cut to the tail, what retention may
not release for it. Both start at the head when truncation has passed the floor or the cut: an
event no longer held is neither lag nor held back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from groups.models import ReaderGroup, RetentionType, Subscription
from streams.logs import stream_log
from streams.models import Stream


@dataclass(frozen=True)
class SubscriberState:
    group: ReaderGroup
    cut: dict[str, int] | None
    acknowledged_at: datetime | None
    held_back: int | None  # events from the cut (or the head, if truncation passed it) to the tail
    acknowledged_events: int  # sum of the cut's offsets: its rate is the consumption rate
    active: bool


def events_after(cut: dict[str, int], head_cut: dict[str, int], tail_cut: dict[str, int]) -> int:
    """The events held from `cut` on: per segment from the cut, or the head if it lies before it,
    to the tail."""
    return sum(max(0, t - max(cut.get(s, 0), head_cut.get(s, 0))) for s, t in tail_cut.items())


def subscriber_states(
    stream: Stream, head_cut: dict[str, int], tail_cut: dict[str, int], now: datetime | None = None
) -> list[SubscriberState]:
    now = now or timezone.now()
    subs = (
        Subscription.objects.filter(stream=stream)
        .exclude(reader_group__retention_type=RetentionType.NONE)
        .select_related("reader_group__scope")
    )
    return [_subscriber_state(sub, stream, head_cut, tail_cut, now) for sub in subs]


def _subscriber_state(
    sub: Subscription, stream: Stream, head_cut: dict[str, int], tail_cut: dict[str, int], now: datetime
) -> SubscriberState:
    cut = sub.acknowledgement_cut
    sub.stream = stream
    return SubscriberState(
        group=sub.reader_group,
        cut=cut,
        acknowledged_at=sub.acknowledged_at,
        held_back=None if cut is None else events_after(cut, head_cut, tail_cut),
        acknowledged_events=sum(cut.values()) if cut else 0,
        active=sub.is_active(now),
    )


_SUBSCRIBER_FIELDS = (
    "stream_id",
    "acknowledgement_cut",
    "acknowledged_at",
    "created_at",
    "reader_group__name",
    "reader_group__retention_type",
    "reader_group__subscriber_timeout_s",
    "reader_group__scope__name",
)


@dataclass(frozen=True)
class ConsumptionState:
    stream: Stream
    subscribers: list[SubscriberState]
    unconsumed_events: int  # between the slowest active subscriber and the tail

    @property
    def has_active_subscriber(self) -> bool:
        return any(s.active for s in self.subscribers)


def consumption_states(
    now: datetime | None = None, ends: Mapping[int, tuple[dict[str, int], dict[str, int]]] | None = None
) -> list[ConsumptionState]:
    """Every consumption-based stream with its subscribers (PDP-47's metrics), in two queries
    whatever the number of streams and subscribers (each subscriber's group with only its name,
    scope and retention type loaded). `ends`: the streams' head and tail cuts by id, where the
    caller has read them already; the others are read from the store."""
    now = now or timezone.now()
    streams = Stream.objects.filter(retention_policy__consumption_based=True).select_related(
        "scope", "retention_policy"
    )
    subs_of: dict[int, list[Subscription]] = {}
    subs = (
        Subscription.objects.filter(stream__retention_policy__consumption_based=True)
        .exclude(reader_group__retention_type=RetentionType.NONE)
        .select_related("reader_group__scope")
        # what the states are made of (`is_active` included); the rest of each row, its times
        # and JSON parsed for nothing, was most of the query with thousands of subscribers
        .only(*_SUBSCRIBER_FIELDS)
        .order_by("pk")
    )
    for sub in subs:
        subs_of.setdefault(sub.stream_id, []).append(sub)
    out = []
    for stream in streams:
        if ends is not None and stream.pk in ends:
            head, tail = ends[stream.pk]
        else:
            log = stream_log(stream)
            head, tail = log.head_cut(), log.tail_cut()
        states = [_subscriber_state(sub, stream, head, tail, now) for sub in subs_of.get(stream.pk, [])]
        cuts = [s.cut for s in states if s.active and s.cut is not None]  # the active subscribers'
        unconsumed = 0
        if cuts:
            slowest = {seg: min(cut.get(seg, 0) for cut in cuts) for seg in tail}
            unconsumed = events_after(slowest, head, tail)
        out.append(ConsumptionState(stream, states, unconsumed))
    return out
