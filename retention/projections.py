"""Each subscriber of a stream as the console and /metrics show it: its acknowledgement cut, what it
holds back from retention, active or stale. Reads only; the activity rule is
`domain.retention.is_active`.

Two counts, named apart everywhere (docs/consuming.md, "Lag and held back"): a group's **lag** is
the events from its floor to the tail, what it has not processed (`streams.projections`); a
subscriber **holds back** the events from its acknowledgement cut to the tail, what retention may
not release for it. Both start at the head when truncation has passed the floor or the cut: an
event no longer held is neither lag nor held back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from streams.logs import stream_log
from streams.models import ReaderGroup, RetentionType, Stream, Subscription


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
    states = []
    for sub in subs:
        cut = sub.acknowledgement_cut
        sub.stream = stream
        states.append(
            SubscriberState(
                group=sub.reader_group,
                cut=cut,
                acknowledged_at=sub.acknowledged_at,
                held_back=None if cut is None else events_after(cut, head_cut, tail_cut),
                acknowledged_events=sum(cut.values()) if cut else 0,
                active=sub.is_active(now),
            )
        )
    return states


@dataclass(frozen=True)
class ConsumptionState:
    stream: Stream
    subscribers: list[SubscriberState]
    unconsumed_events: int  # between the slowest active subscriber and the tail

    @property
    def has_active_subscriber(self) -> bool:
        return any(s.active for s in self.subscribers)


def consumption_states(now: datetime | None = None) -> list[ConsumptionState]:
    """Every consumption-based stream with its subscribers (PDP-47's metrics)."""
    out = []
    streams = Stream.objects.filter(retention_policy__consumption_based=True).select_related(
        "scope", "retention_policy"
    )
    for stream in streams:
        log = stream_log(stream)
        head, tail = log.head_cut(), log.tail_cut()
        states = subscriber_states(stream, head, tail, now)
        cuts = [s.cut for s in states if s.active and s.cut is not None]  # the active subscribers'
        unconsumed = 0
        if cuts:
            slowest = {seg: min(cut.get(seg, 0) for cut in cuts) for seg in tail}
            unconsumed = events_after(slowest, head, tail)
        out.append(ConsumptionState(stream, states, unconsumed))
    return out
