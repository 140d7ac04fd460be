"""`/metrics` for Prometheus: gauges read at scrape time from the segment store (the truth) and
the truncation history, so every web process answers the same numbers."""

from __future__ import annotations

from django.http import HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from retention.models import TruncationRecord

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


def metrics_view(request):
    registry = CollectorRegistry()
    registry.register(StreamCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
