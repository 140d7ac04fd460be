"""Each subscriber of a stream as the console and /metrics show it: cut, lag, active or stale.
Reads only; the activity rule is `domain.retention.is_active`."""

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
    lag: int | None  # events between the cut and the tail
    acknowledged_events: int  # sum of the cut's offsets: its rate is the consumption rate
    active: bool


def subscriber_states(stream: Stream, tail_cut: dict[str, int], now: datetime | None = None) -> list[SubscriberState]:
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
                lag=None if cut is None else sum(max(0, t - cut.get(s, 0)) for s, t in tail_cut.items()),
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
        tail = stream_log(stream).tail_cut()
        states = subscriber_states(stream, tail, now)
        cuts = [s.cut for s in states if s.active and s.cut is not None]  # the active subscribers'
        unconsumed = 0
        if cuts:
            unconsumed = sum(max(0, t - min(cut.get(seg, 0) for cut in cuts)) for seg, t in tail.items())
        out.append(ConsumptionState(stream, states, unconsumed))
    return out
