"""`/metrics` for Prometheus: gauges read at scrape time from the segment store (the truth) and
the truncation history, so every web process answers the same numbers."""

from __future__ import annotations

from django.http import HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from django.db.models import Count

from retention.models import RetentionCycle, TruncationRecord
from retention.subscribers import consumption_states

from .models import Stream
from .services import stream_state


class StreamCollector:
    def collect(self):
        held = GaugeMetricFamily("cbr_stream_bytes", "Payload bytes held", labels=["stream"])
        events = GaugeMetricFamily("cbr_stream_events", "Events held", labels=["stream"])
        disk = GaugeMetricFamily("cbr_stream_disk_bytes", "Chunk bytes on disk", labels=["stream"])
        published = CounterMetricFamily(
            "cbr_stream_published_bytes", "Payload bytes ever published", labels=["stream"]
        )
        appended = CounterMetricFamily(
            "cbr_stream_published_events", "Events ever published", labels=["stream"]
        )
        for stream in Stream.objects.select_related("scope"):
            state = stream_state(stream)
            name = stream.full_name
            held.add_metric([name], state.size_bytes)
            events.add_metric([name], state.event_count)
            disk.add_metric([name], state.physical_bytes)
            published.add_metric([name], state.published_bytes)
            appended.add_metric([name], sum(state.tail_cut.values()))
        reclaimed = CounterMetricFamily(
            "cbr_reclaimed_bytes", "Payload bytes released by truncation"
        )
        reclaimed.add_metric([], TruncationRecord.objects.reclaimed_bytes())
        truncations = CounterMetricFamily("cbr_truncations", "Truncations performed")
        truncations.add_metric([], TruncationRecord.objects.count())
        yield from (held, events, disk, published, appended, reclaimed, truncations)
        yield from _consumption_metrics()
        yield from _cycle_metrics()


def _consumption_metrics():
    unconsumed = GaugeMetricFamily(
        "cbr_stream_unconsumed_events",
        "Events of a consumption-based stream not yet acknowledged by its slowest active subscriber",
        labels=["stream"],
    )
    without = GaugeMetricFamily(
        "cbr_streams_without_active_subscriber", "Consumption-based streams with no active subscriber"
    )
    acked = CounterMetricFamily(
        "cbr_subscriber_acknowledged_events",
        "Offsets acknowledged by a subscriber (rate() of it is the consumption rate)",
        labels=["stream", "reader_group"],
    )
    lag = GaugeMetricFamily(
        "cbr_subscriber_lag_events", "Events between a subscriber's cut and the tail",
        labels=["stream", "reader_group"],
    )
    stale = GaugeMetricFamily(
        "cbr_subscriber_active", "1 while a subscriber is active, 0 when stale",
        labels=["stream", "reader_group"],
    )
    count = 0
    for state in consumption_states():
        name = state.stream.full_name
        unconsumed.add_metric([name], state.unconsumed_events)
        count += not state.has_active_subscriber
        for sub in state.subscribers:
            group = str(sub.group)
            acked.add_metric([name, group], sub.acknowledged_events)
            if sub.lag is not None:
                lag.add_metric([name, group], sub.lag)
            stale.add_metric([name, group], 1 if sub.active else 0)
    without.add_metric([], count)
    yield from (unconsumed, without, acked, lag, stale)


def _cycle_metrics():
    last = RetentionCycle.objects.filter(state="done").first()
    duration = GaugeMetricFamily(
        "cbr_retention_cycle_duration_seconds", "Duration of the last finished retention cycle"
    )
    streams = GaugeMetricFamily("cbr_retention_cycle_streams", "Streams in the last finished cycle")
    if last is not None and last.duration_s is not None:
        duration.add_metric([], last.duration_s)
        streams.add_metric([], last.streams_total)
    cycles = CounterMetricFamily("cbr_retention_cycles", "Retention cycles run", labels=["state"])
    for state, n in RetentionCycle.objects.values_list("state").annotate(n=Count("id")):
        cycles.add_metric([state], n)
    yield from (duration, streams, cycles)


def metrics_view(request):
    registry = CollectorRegistry()
    registry.register(StreamCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
