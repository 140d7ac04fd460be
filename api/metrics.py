"""`/metrics` for Prometheus: gauges read at scrape time from the segment store (the truth), the
truncation history, the reader groups' acknowledgement state and the delayed indexes in Redis,
so every web process answers the same numbers."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.utils import floatToGoString

from retention.models import RetentionCycle, TruncationRecord
from retention.projections import consumption_states
from streams.logs import stream_state
from streams.models import ReaderGroup, Stream
from streams.projections.delayed import LATENCY_LES, delayed_state
from streams.projections.groups import totals_by_stream
from streams.projections.positions import group_state


class StreamCollector:
    def collect(self):
        held = GaugeMetricFamily("cbr_stream_bytes", "Payload bytes held", labels=["stream"])
        events = GaugeMetricFamily("cbr_stream_events", "Events held", labels=["stream"])
        disk = GaugeMetricFamily("cbr_stream_disk_bytes", "Chunk bytes on disk", labels=["stream"])
        published = CounterMetricFamily("cbr_stream_published_bytes", "Payload bytes ever published", labels=["stream"])
        appended = CounterMetricFamily("cbr_stream_published_events", "Events ever published", labels=["stream"])
        for stream in Stream.objects.select_related("scope"):
            state = stream_state(stream)
            name = stream.full_name
            held.add_metric([name], state.size_bytes)
            events.add_metric([name], state.event_count)
            disk.add_metric([name], state.physical_bytes)
            published.add_metric([name], state.published_bytes)
            appended.add_metric([name], sum(state.tail_cut.values()))
        reclaimed = CounterMetricFamily("cbr_reclaimed_bytes", "Payload bytes released by truncation")
        reclaimed.add_metric([], TruncationRecord.objects.reclaimed_bytes())
        truncations = CounterMetricFamily("cbr_truncations", "Truncations performed")
        truncations.add_metric([], TruncationRecord.objects.count())
        yield from (held, events, disk, published, appended, reclaimed, truncations)
        yield from _consumption_metrics()
        yield from _reader_group_metrics()
        yield from _delayed_metrics()
        yield from _cycle_metrics()


def _consumption_metrics():
    unconsumed = GaugeMetricFamily(
        "cbr_stream_unconsumed_events",
        "Events of a consumption-based stream not yet acknowledged by its slowest active subscriber",
        labels=["stream"],
    )
    without = GaugeMetricFamily(
        "cbr_streams_without_active_subscriber",
        "Consumption-based streams with no active subscriber (the two gauges below, summed)",
    )
    zero = GaugeMetricFamily(
        "cbr_streams_with_zero_subscribers",
        "Consumption-based streams with no subscriber registered (PDP-47): the limits alone decide",
    )
    all_inactive = GaugeMetricFamily(
        "cbr_streams_with_all_subscribers_inactive",
        "Consumption-based streams whose subscribers are all stale: nothing is truncated until the fallback",
    )
    acked = CounterMetricFamily(
        "cbr_subscriber_acknowledged_events",
        "Offsets acknowledged by a subscriber (rate() of it is the consumption rate)",
        labels=["stream", "reader_group"],
    )
    held_back = GaugeMetricFamily(
        "cbr_subscriber_held_back_events",
        "Events a subscriber holds back from retention: from its acknowledgement cut (or the head) to the tail",
        labels=["stream", "reader_group"],
    )
    lag = GaugeMetricFamily(  # the name it had before "lag" meant only the floor's (docs/api.md)
        "cbr_subscriber_lag_events",
        "Deprecated: cbr_subscriber_held_back_events, under its former name",
        labels=["stream", "reader_group"],
    )
    stale = GaugeMetricFamily(
        "cbr_subscriber_active",
        "1 while a subscriber is active, 0 when stale",
        labels=["stream", "reader_group"],
    )
    count = none_registered = none_active = 0
    for state in consumption_states():
        name = state.stream.full_name
        unconsumed.add_metric([name], state.unconsumed_events)
        count += not state.has_active_subscriber
        none_registered += not state.subscribers
        none_active += bool(state.subscribers) and not state.has_active_subscriber
        for sub in state.subscribers:
            group = str(sub.group)
            acked.add_metric([name, group], sub.acknowledged_events)
            if sub.held_back is not None:
                held_back.add_metric([name, group], sub.held_back)
                lag.add_metric([name, group], sub.held_back)
            stale.add_metric([name, group], 1 if sub.active else 0)
    without.add_metric([], count)
    zero.add_metric([], none_registered)
    all_inactive.add_metric([], none_active)
    yield from (unconsumed, without, zero, all_inactive, acked, held_back, lag, stale)


def _reader_group_metrics():
    """Every reader group's positions, summed over each stream's segments (`group_state` per
    group: two queries and one Redis round trip each)."""
    labels = ["stream", "reader_group"]
    pending = GaugeMetricFamily(
        "cbr_reader_group_pending", "Deliveries handed out and not yet acknowledged", labels=labels
    )
    lag = GaugeMetricFamily(
        "cbr_reader_group_floor_lag_events",
        "Events from the reader group's floor (or the head) to the tail: not yet processed",
        labels=labels,
    )
    halted = GaugeMetricFamily(
        "cbr_reader_group_halted",
        "1 while a poison event halts the group on some segment of the stream (on_poison: halt)",
        labels=labels,
    )
    redelivered = CounterMetricFamily(
        "cbr_reader_group_redelivered",
        "Deliveries handed out again (nacked or lease expired)",
        labels=labels,
    )
    dead_lettered = CounterMetricFamily(
        "cbr_reader_group_dead_lettered",
        "Events appended to the stream's dead-letter stream",
        labels=labels,
    )
    for group in ReaderGroup.objects.select_related("scope"):
        name = str(group)
        for stream, t in totals_by_stream(group_state(group)).items():
            pending.add_metric([stream, name], t.pending)
            lag.add_metric([stream, name], t.lag_events)
            halted.add_metric([stream, name], 1 if t.halted else 0)
            redelivered.add_metric([stream, name], t.redelivered)
            dead_lettered.add_metric([stream, name], t.dead_lettered)
    yield from (pending, lag, halted, redelivered, dead_lettered)


def _delayed_metrics():
    """Per stream with a delayed index (DELAYED-DELIVERY.md "Metrics"): `delayed_state` each,
    without its due-time histogram; one query for the streams, one for all their buckets."""
    labels = ["stream"]
    buckets = GaugeMetricFamily(
        "cbr_delayed_message_index_bucket_total",
        "Buckets of the delayed index: the sealed ones + the mutable one",
        labels=labels,
    )
    loaded = GaugeMetricFamily(
        "cbr_delayed_message_index_loaded",
        "Delayed indexes held in Redis (mutable, sealing, queued, due)",
        labels=labels,
    )
    snapshot = GaugeMetricFamily(
        "cbr_delayed_message_index_bucket_snapshot_size_bytes",
        "Bytes of the sealed buckets' snapshots",
        labels=labels,
    )
    pending = GaugeMetricFamily(
        "cbr_delayed_message_pending", "Delayed events not yet handed to the reader groups", labels=labels
    )
    ops = CounterMetricFamily(
        "cbr_delayed_message_index_bucket_op_count",
        "Operations on the delayed index's buckets",
        labels=["stream", "type", "state"],
    )
    latency = HistogramMetricFamily(
        "cbr_delayed_message_index_bucket_op_latency_ms",
        "Latency of the operations on the delayed index's buckets (ms)",
        labels=["stream", "type"],
    )
    streams = Stream.objects.filter(delayed__isnull=False).select_related("scope").prefetch_related("delayed_buckets")
    for stream in streams:
        state = delayed_state(stream, bins=0)
        name = stream.full_name
        buckets.add_metric([name], len(state.buckets) + 1)
        loaded.add_metric([name], state.hot_total)
        snapshot.add_metric([name], state.snapshot_bytes)
        pending.add_metric([name], state.pending)
        for kind, figures in state.ops.items():
            ops.add_metric([name, kind, "succeed"], figures.succeed)
            ops.add_metric([name, kind, "failed"], figures.failed)
            ops.add_metric([name, kind, "all"], figures.succeed + figures.failed)  # PIP-195's total
            latency.add_metric([name, kind], _cumulative(figures.latency), figures.latency_ms_sum)
    yield from (buckets, loaded, snapshot, pending, ops, latency)


def _cumulative(counts: dict[str, int]) -> list[tuple[str, int]]:
    """Prometheus buckets (each counts every observation up to its bound) from Redis's counts of
    the observations that fell in each."""
    total, out = 0, []
    for le in LATENCY_LES:
        total += counts[le]
        out.append((floatToGoString(le), total))
    return out


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
