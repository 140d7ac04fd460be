"""The sampler (a beat task every CBR_SAMPLE_INTERVAL): each stream's published events and bytes
and payload held, and each of its subscriptions' processed count (the group's floors summed) and
lag, read from the store and Redis as the metrics read them, kept for CBR_SAMPLE_WINDOW_S. The
console draws rates and backlog over time from them (`series`). Above CBR_SAMPLE_MAX_STREAMS
streams the sampler does nothing: a fleet that size is watched with Prometheus (/metrics)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from domain.rates import rates
from groups.models import ReaderGroup, Sample
from groups.projections.lag import group_state
from groups.projections.overview import totals_by_stream
from streams.logs import stream_state
from streams.models import Stream

log = logging.getLogger(__name__)


def take_samples(now: datetime | None = None) -> int:
    """One sample of every stream and subscription; the samples past the window deleted.
    Returns how many were written (0 above the fleet cap)."""
    now = now or timezone.now()
    Sample.objects.filter(at__lt=now - timedelta(seconds=settings.CBR_SAMPLE_WINDOW_S)).delete()
    streams = list(Stream.objects.select_related("scope"))
    if len(streams) > settings.CBR_SAMPLE_MAX_STREAMS:
        log.info("%d streams, over CBR_SAMPLE_MAX_STREAMS: not sampled", len(streams))
        return 0
    rows = []
    held: dict[int, tuple[int, int, int]] = {}
    for stream in streams:
        state = stream_state(stream)
        held[stream.pk] = (sum(state.tail_cut.values()), state.published_bytes, state.size_bytes)
        rows.append(Sample(stream=stream, at=now, published_events=held[stream.pk][0],
                           published_bytes=state.published_bytes, held_bytes=state.size_bytes))  # fmt: skip
    by_name = {s.full_name: s for s in streams}
    for group in ReaderGroup.objects.select_related("scope"):
        states = group_state(group)
        totals = totals_by_stream(states)
        processed: dict[str, int] = {}
        for st in states:
            processed[st.stream] = processed.get(st.stream, 0) + st.floor
        for name, total in totals.items():
            sampled = by_name.get(name)
            if sampled is None:
                continue
            events, published_bytes, held_bytes = held[sampled.pk]
            rows.append(Sample(stream=sampled, reader_group=group, at=now, published_events=events,
                               published_bytes=published_bytes, held_bytes=held_bytes,
                               processed=processed[name], lag_events=total.lag_events))  # fmt: skip
    Sample.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


@dataclass
class Series:
    """What the stream page draws: times (epoch seconds) and, per time, the values."""

    times: list[float] = field(default_factory=list)
    held_bytes: list[int | None] = field(default_factory=list)
    publish_rate: list[float | None] = field(default_factory=list)  # events/s
    groups: dict[str, dict[str, list]] = field(default_factory=dict)  # name -> {"ack_rate": [...], "lag": [...]}

    def as_json(self) -> dict:
        return {
            "times": self.times,
            "held_bytes": self.held_bytes,
            "publish_rate": self.publish_rate,
            "groups": self.groups,
        }


def series(stream: Stream, since: datetime | None = None) -> Series:
    """The stream's samples in the window, aligned on the sampler's times: the stream's held bytes
    and publish rate, each subscription's acknowledgement rate and lag (None where a group has no
    sample at a time)."""
    since = since or timezone.now() - timedelta(seconds=settings.CBR_SAMPLE_WINDOW_S)
    rows = list(
        Sample.objects.filter(stream=stream, at__gte=since)
        .select_related("reader_group__scope")
        .order_by("at")
        .values_list(
            "at",
            "reader_group__scope__name",
            "reader_group__name",
            "published_events",
            "held_bytes",
            "processed",
            "lag_events",
        )  # fmt: skip
    )
    out = Series()
    stream_rows = [(r[0].timestamp(), r[3], r[4]) for r in rows if r[1] is None]
    out.times = [t for t, _, _ in stream_rows]
    out.held_bytes = [held for _, _, held in stream_rows]
    out.publish_rate = [None, *(rate for _, rate in rates([(t, e) for t, e, _ in stream_rows]))][: len(out.times)]
    index = {t: i for i, t in enumerate(out.times)}
    per_group: dict[str, list[tuple[float, int | None, int | None]]] = {}
    for at, scope, name, _, _, processed, lag in rows:
        if scope is not None:
            per_group.setdefault(f"{scope}/{name}", []).append((at.timestamp(), processed, lag))
    for name, points in per_group.items():
        ack_rate: list[float | None] = [None] * len(out.times)
        lag_at: list[int | None] = [None] * len(out.times)
        for t, rate in rates([(t, p) for t, p, _ in points]):
            if t in index:
                ack_rate[index[t]] = rate
        for t, _, lag in points:
            if t in index:
                lag_at[index[t]] = lag
        out.groups[name] = {"ack_rate": ack_rate, "lag": lag_at}
    return out
