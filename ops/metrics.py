"""`/metrics` for Prometheus: gauges read at scrape time from the segment store (the truth), the
truncation history, the reader groups' acknowledgement state and the delayed indexes in Redis,
so every web process answers the same numbers.

A scrape costs the same number of queries and Redis round trips whatever the number of streams
and groups (tests/api/test_metrics_at_scale.py): each stream's store is read once and its cuts
shared, and every projection gathers all of its rows at once (bench/metrics_scrape.py: with
10 000 groups a scrape took over 30 s, a query and a round trip per group, and the text alone
took 0.5 s through prometheus_client's objects, hence `ops.exposition`)."""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count
from django.http import HttpResponse
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from groups.projections.consumers import bounded, every_consumer_figures
from groups.projections.lag import every_group_totals
from ops.exposition import Family, exposition, label_set
from ops.health import readiness
from retention.models import RetentionCycle, TruncationRecord
from retention.projections import consumption_states
from store.redis_connection import get_redis
from streams import tiering, wait_stats
from streams.delaying.projection import LATENCY_LES, delayed_states
from streams.logs import StreamState, stream_state
from streams.models import Scaling, Stream

Ends = dict[int, tuple[dict[str, int], dict[str, int]]]  # stream id -> (head cut, tail cut)


class _Labels:
    """Each label set made once per scrape: a stream's, a (stream, group) pair's."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], str] = {}

    def of(self, stream: str, group: str) -> str:
        key = (stream, group)
        labels = self._made.get(key)
        if labels is None:
            labels = self._made[key] = label_set(stream=stream, reader_group=group)
        return labels


def families() -> Iterator[Family | Metric]:
    streams = list(Stream.objects.select_related("scope"))
    states = {stream.pk: stream_state(stream) for stream in streams}
    ends: Ends = {pk: (state.head_cut, state.tail_cut) for pk, state in states.items()}
    labels = _Labels()
    yield from _stream_metrics(streams, states)
    yield from _consumption_metrics(ends, labels)
    yield from _reader_group_metrics(ends, labels)
    yield from _consumer_metrics({pk: tail for pk, (_, tail) in ends.items()})
    yield from _delayed_metrics()
    yield from _cycle_metrics()
    yield from _waiting_metrics()
    yield from _health_metrics()


def _health_metrics() -> Iterator[Family]:
    """What /readyz says, part by part, for alerting (docs/grafana/alerts.yml): 1 when the part
    works, 0 when it does not (the workers and beat: 0 too when Redis, which holds their
    heartbeats, cannot be asked)."""
    answer = readiness()
    up = Family("cbr_component_up", "1 while a part CBR needs works (/readyz's parts), 0 when not")
    for part in ("database", "redis", "workers", "beat", "data_dir"):
        up.add(label_set(component=part), 1 if answer[part]["ok"] else 0)
    if answer["tier"]["ok"] is not None:  # long-term storage, where one is configured
        up.add(label_set(component="tier"), 1 if answer["tier"]["ok"] else 0)
    yield up
    state = tiering.offload_state()  # the families always; their samples with a tier only
    lag = Family(
        "cbr_tier_offload_lag_seconds", "How long the oldest sealed file not copied to the tier yet has waited"
    )
    waiting = Family("cbr_tier_offload_waiting_bytes", "Bytes of sealed files not copied to the tier yet")
    if state is not None:
        lag.add("", state.lag_s or 0.0)
        waiting.add("", state.waiting_bytes)
    yield lag
    yield waiting


def _stream_metrics(streams: list[Stream], states: dict[int, StreamState]) -> Iterator[Family]:
    held = Family("cbr_stream_bytes", "Payload bytes held")
    events = Family("cbr_stream_events", "Events held")
    disk = Family("cbr_stream_disk_bytes", "Chunk bytes on disk")
    published = Family("cbr_stream_published_bytes", "Payload bytes ever published", "counter")
    appended = Family("cbr_stream_published_events", "Events ever published", "counter")
    full = Family("cbr_stream_full", "1 while a stream at its max refuses publishes (on_max_limit: reject_publish)")
    segments = Family("cbr_stream_segments", "Active segments of a stream (its epoch's: scaling changes it)")
    for stream in streams:
        full.add(label_set(stream=stream.full_name), 1 if stream.full_since is not None else 0)
        segments.add(label_set(stream=stream.full_name), stream.segment_count)
        state = states[stream.pk]
        name = label_set(stream=stream.full_name)
        held.add(name, state.size_bytes)
        events.add(name, state.event_count)
        disk.add(name, state.physical_bytes)
        published.add(name, state.published_bytes)
        appended.add(name, sum(state.tail_cut.values()))
    reclaimed = Family("cbr_reclaimed_bytes", "Payload bytes released by truncation", "counter")
    reclaimed.add("", TruncationRecord.objects.reclaimed_bytes())
    truncations = Family("cbr_truncations", "Truncations performed", "counter")
    truncations.add("", TruncationRecord.objects.count())
    tier = Family("cbr_tier_bytes", "Bytes of a stream's sealed files copied to long-term storage (CBR_TIER_URL)")
    names = {s.pk: s.full_name for s in streams}
    for stream_id, (size, _) in tiering.tier_usage(list(names)).items():
        tier.add(label_set(stream=names[stream_id]), size)
    scalings = Family("cbr_scalings", "Scales made (split, merge or both), by what asked for them", "counter")
    made = dict(Scaling.objects.values_list("trigger").annotate(n=Count("pk")))
    for trigger in Scaling.Trigger.values:
        scalings.add(label_set(trigger=trigger), made.get(trigger, 0))
    yield from (held, events, disk, published, appended, full, segments, tier, reclaimed, truncations, scalings)


def _consumption_metrics(ends: Ends, labels: _Labels) -> Iterator[Family]:
    unconsumed = Family(
        "cbr_stream_unconsumed_events",
        "Events of a consumption-based stream not yet acknowledged by its slowest active subscriber",
    )
    without = Family(
        "cbr_streams_without_active_subscriber",
        "Consumption-based streams with no active subscriber (the two gauges below, summed)",
    )
    zero = Family(
        "cbr_streams_with_zero_subscribers",
        "Consumption-based streams with no subscriber registered (PDP-47): the limits alone decide",
    )
    all_inactive = Family(
        "cbr_streams_with_all_subscribers_inactive",
        "Consumption-based streams whose subscribers are all stale: nothing is truncated until the fallback",
    )
    acked = Family(
        "cbr_subscriber_acknowledged_events",
        "Offsets acknowledged by a subscriber (rate() of it is the consumption rate)",
        "counter",
    )
    held_back = Family(
        "cbr_subscriber_held_back_events",
        "Events a subscriber holds back from retention: from its acknowledgement cut (or the head) to the tail",
    )
    lag = Family(  # the name it had before "lag" meant only the floor's (docs/api.md)
        "cbr_subscriber_lag_events", "Deprecated: cbr_subscriber_held_back_events, under its former name"
    )
    stale = Family("cbr_subscriber_active", "1 while a subscriber is active, 0 when stale")
    count = none_registered = none_active = 0
    for state in consumption_states(ends=ends):
        name = state.stream.full_name
        unconsumed.add(label_set(stream=name), state.unconsumed_events)
        count += not state.has_active_subscriber
        none_registered += not state.subscribers
        none_active += bool(state.subscribers) and not state.has_active_subscriber
        for sub in state.subscribers:
            pair = labels.of(name, str(sub.group))
            acked.add(pair, sub.acknowledged_events)
            if sub.held_back is not None:
                held_back.add(pair, sub.held_back)
                lag.add(pair, sub.held_back)
            stale.add(pair, 1 if sub.active else 0)
    without.add("", count)
    zero.add("", none_registered)
    all_inactive.add("", none_active)
    yield from (unconsumed, without, zero, all_inactive, acked, held_back, lag, stale)


def _reader_group_metrics(ends: Ends, labels: _Labels) -> Iterator[Family]:
    """Every reader group's positions, summed over each stream's segments (`every_group_totals`:
    two queries and one Redis round trip for all of them)."""
    pending = Family("cbr_reader_group_pending", "Deliveries handed out and not yet acknowledged")
    lag = Family(
        "cbr_reader_group_floor_lag_events",
        "Events from the reader group's floor (or the head) to the tail: not yet processed",
    )
    halted = Family(
        "cbr_reader_group_halted",
        "1 while a poison event halts the group on some segment of the stream (on_poison: halt)",
    )
    redelivered = Family(
        "cbr_reader_group_redelivered", "Deliveries handed out again (nacked or lease expired)", "counter"
    )
    dead_lettered = Family(
        "cbr_reader_group_dead_lettered", "Events appended to the stream's dead-letter stream", "counter"
    )
    for t in every_group_totals(ends):
        pair = labels.of(t.stream, t.group)
        pending.add(pair, t.pending)
        lag.add(pair, t.lag_events)
        halted.add(pair, 1 if t.halted else 0)
        redelivered.add(pair, t.redelivered)
        dead_lettered.add(pair, t.dead_lettered)
    yield from (pending, lag, halted, redelivered, dead_lettered)


def _consumer_metrics(tails: dict[int, dict[str, int]]) -> Iterator[Family]:
    """Each reader group's consumers (`every_consumer_figures`: one query and two Redis round
    trips for all groups), at most `CBR_METRICS_CONSUMERS_PER_GROUP` named per group and the rest
    summed as `_other`: consumer names are the clients' to choose, the series' number is not."""
    in_flight = Family(
        "cbr_consumer_inflight",
        "Deliveries in a consumer's hands: handed to it, neither acknowledged, given back nor expired",
    )
    delivered = Family("cbr_consumer_delivered_events", "Events handed to a consumer", "counter")
    acked = Family("cbr_consumer_acked_events", "Events a consumer acknowledged", "counter")
    limit = settings.CBR_METRICS_CONSUMERS_PER_GROUP
    for group, rows in every_consumer_figures(tails).items():
        named, rest = bounded(rows, limit)
        for row in named + ([rest] if rest is not None else []):
            label = label_set(reader_group=group, consumer=row.name)
            in_flight.add(label, row.in_flight)
            delivered.add(label, row.delivered)
            acked.add(label, row.acked)
    yield from (in_flight, delivered, acked)


def _delayed_metrics() -> Iterator[Family | Metric]:
    """Per stream with a delayed index (docs/delayed.md): `delayed_states`, without
    the due-time histogram; one query for the streams, one for all their buckets, three Redis
    round trips for all their indexes."""
    buckets = Family(
        "cbr_delayed_message_index_bucket_total", "Buckets of the delayed index: the sealed ones + the mutable one"
    )
    loaded = Family("cbr_delayed_message_index_loaded", "Delayed indexes held in Redis (mutable, sealing, queued, due)")
    snapshot = Family("cbr_delayed_message_index_bucket_snapshot_size_bytes", "Bytes of the sealed buckets' snapshots")
    pending = Family("cbr_delayed_message_pending", "Delayed events not yet handed to the reader groups")
    ops = Family("cbr_delayed_message_index_bucket_op_count", "Operations on the delayed index's buckets", "counter")
    latency = HistogramMetricFamily(
        "cbr_delayed_message_index_bucket_op_latency_ms",
        "Latency of the operations on the delayed index's buckets (ms)",
        labels=["stream", "type"],
    )
    streams = list(
        Stream.objects.filter(delayed__isnull=False).select_related("scope").prefetch_related("delayed_buckets")
    )
    for stream, state in zip(streams, delayed_states(streams), strict=True):
        name = stream.full_name
        label = label_set(stream=name)
        buckets.add(label, len(state.buckets) + 1)
        loaded.add(label, state.hot_total)
        snapshot.add(label, state.snapshot_bytes)
        pending.add(label, state.pending)
        for kind, figures in state.ops.items():
            ops.add(label_set(stream=name, type=kind, state="succeed"), figures.succeed)
            ops.add(label_set(stream=name, type=kind, state="failed"), figures.failed)
            ops.add(label_set(stream=name, type=kind, state="all"), figures.succeed + figures.failed)  # PIP-195's total
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


def _cycle_metrics() -> Iterator[Family]:
    last = RetentionCycle.objects.filter(state="done").first()
    duration = Family("cbr_retention_cycle_duration_seconds", "Duration of the last finished retention cycle")
    streams = Family("cbr_retention_cycle_streams", "Streams in the last finished cycle")
    if last is not None and last.duration_s is not None:
        duration.add("", last.duration_s)
        streams.add("", last.streams_total)
    cycles = Family("cbr_retention_cycles", "Retention cycles run", "counter")
    for state, n in RetentionCycle.objects.values_list("state").annotate(n=Count("id")):
        cycles.add(label_set(state=state), n)
    yield from (duration, streams, cycles)


def _waiting_metrics() -> Iterator[Family | Metric]:
    """Waiting reads and delivery latency, every web process's (`streams.wait_stats`): one round
    trip."""
    waiting, counters = wait_stats.totals(get_redis())
    now = Family("cbr_reads_waiting", "Reads waiting for events now, in every web process")
    now.add("", waiting)
    wakes = Family("cbr_read_wakeups", "Waiting reads woken, by what woke them", "counter")
    for cause in WAKE_CAUSES:
        wakes.add(label_set(cause=cause), int(counters.get(f"woken:{cause}", 0)))
    yield now
    yield wakes
    yield _histogram(
        "cbr_read_wait_seconds",
        "How long waiting reads waited before their answer",
        "wait",
        wait_stats.WAIT_BUCKETS,
        counters,
    )
    yield _histogram(
        "cbr_delivery_latency_seconds",
        "From an event's publish to its first hand-out to a reader group",
        "latency",
        wait_stats.LATENCY_BUCKETS,
        counters,
    )
    yield from _tier_counters(counters)
    limited = Family(
        "cbr_rate_limited",
        "Requests a rate limit held back: publishes refused (publish_rate), reads that handed out "
        "all their group's dispatch_rate let them and wanted more (dispatch_rate), by limit",
        "counter",
    )
    limited.add(label_set(limit="publish"), int(counters.get("rate:limited:publish", 0)))
    limited.add(label_set(limit="dispatch"), int(counters.get("rate:limited:dispatch", 0)))
    yield limited
    expired = Family(
        "cbr_events_expired",
        "Events past their time to live that reader groups passed over without handing them out "
        "(counted once per group)",
        "counter",
    )
    expired.add("", int(counters.get(wait_stats.EXPIRED, 0)))
    yield expired


def _tier_counters(counters: dict[str, float]) -> Iterator[Family | Metric]:
    """Long-term storage as every process counted it (`streams.tiering`, `store.tier.reading`,
    carried by `streams.wait_stats`): reads of released chunks, copies and their time, errors."""
    hits = Family("cbr_tier_cache_hits", "Reads of released chunks served by the local cache", "counter")
    hits.add("", int(counters.get("tier:hit", 0)))
    fetches = Family("cbr_tier_fetches", "Reads of released chunks that asked the tier, whole or by range", "counter")
    fetches.add(label_set(how="whole"), int(counters.get("tier:miss", 0)))
    fetches.add(label_set(how="ranged"), int(counters.get("tier:ranged", 0)))
    errors = Family("cbr_tier_errors", "Tier operations refused or not answered, by operation", "counter")
    for op in ("put", "get", "delete", "sweep"):
        errors.add(label_set(op=op), int(counters.get(f"tier:error:{op}", 0)))
    yield hits
    yield fetches
    yield errors
    yield _histogram(
        "cbr_tier_offload_seconds",
        "Time to copy one sealed file to the tier and read it back",
        "tier:offload",
        wait_stats.OFFLOAD_BUCKETS,
        counters,
    )


# what wakes a waiting read (`streams.waking`): a publish, a group's own notice, a due time, what
# came while it looked, the channel lost or made again, a woken read that filled its batch
WAKE_CAUSES = ("stream", "group", "timer", "missed", "channel", "more")


def _histogram(name: str, doc: str, prefix: str, buckets: tuple[float, ...], counters: dict[str, float]) -> Metric:
    total, cumulative = 0.0, []
    for le in buckets:
        total += counters.get(f"{prefix}:{le!r}", 0.0)
        cumulative.append((floatToGoString(le), total))
    cumulative.append(("+Inf", counters.get(f"{prefix}:count", 0.0)))
    family = HistogramMetricFamily(name, doc)
    family.add_metric([], cumulative, counters.get(f"{prefix}:sum", 0.0))
    return family


def metrics_view(request):
    return HttpResponse(exposition(families()), content_type=CONTENT_TYPE_LATEST)
