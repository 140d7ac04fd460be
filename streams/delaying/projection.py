"""What a stream's delayed index holds, gathered for the console and /metrics: the pending delayed
events (hot in Redis, cold in the sealed buckets' snapshot segments not loaded yet), the buckets,
the next delivery time, pending events by due time, and the bucket operations' counts and
latencies. It only reads: it never changes the index (streams.delaying.indexing and buckets do,
and groups.delayed_release takes out what is due)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from streams.delaying.buckets import LATENCY_BOUNDS_MS, remaining
from streams.delaying.index import DelayIndex, HotState, hot_states
from streams.delaying.stream_index import index_of
from streams.models import Stream

OP_TYPES = ("create", "load", "merge", "delete", "recover", "rebuild")  # DelayedOp.type
LATENCY_LES = (*(str(b) for b in LATENCY_BOUNDS_MS), "+Inf")  # buckets.record's latency fields


@dataclass(frozen=True)
class BucketState:
    """One sealed bucket: what it covers, how far its snapshot is loaded, what it still holds."""

    bucket_id: int
    first_chunk: int
    last_chunk: int
    segments_loaded: int
    segments_total: int
    index_count: int
    remaining: int  # its loaded segment's indexes and those after it: what merging weighs
    unloaded: int  # indexes of the segments not loaded yet: pending outside Redis
    snapshot_bytes: int
    min_ms: int | None
    max_ms: int | None


@dataclass(frozen=True)
class DueBin:
    """Pending delayed events due in (start_ms, end_ms]."""

    start_ms: int
    end_ms: int
    count: int


@dataclass(frozen=True)
class OpFigures:
    """One operation type's counts since Redis last lost them, and its latencies: `latency` maps
    each bound of LATENCY_LES to the operations that took at most that and more than the one
    before (not cumulative)."""

    succeed: int
    failed: int
    latency_ms_sum: float
    latency: dict[str, int]


@dataclass(frozen=True)
class DelayedState:
    now_ms: int
    hot: dict[str, int]  # indexes held in Redis: mutable, sealing, queue, due (DelayIndex.counts)
    buckets: list[BucketState]
    next_due_ms: int | None
    due_now: int  # pending and due already: the next read or maintenance round hands them out
    by_due_time: list[DueBin]  # the rest, from now to the latest due time; empty when none
    ops: dict[str, OpFigures]

    @property
    def hot_total(self) -> int:
        return sum(self.hot.values())

    @property
    def unloaded(self) -> int:
        return sum(b.unloaded for b in self.buckets)

    @property
    def pending(self) -> int:
        return self.hot_total + self.unloaded

    @property
    def snapshot_bytes(self) -> int:
        return sum(b.snapshot_bytes for b in self.buckets)

    @property
    def bin_width_s(self) -> float:
        return (self.by_due_time[0].end_ms - self.by_due_time[0].start_ms) / 1000 if self.by_due_time else 0

    @property
    def tallest_bar(self) -> int:
        """The scale of the console's chart: its bars are the events due now and the bins."""
        return max([self.due_now, *(b.count for b in self.by_due_time)])


def delayed_state(stream: Stream, now_ms: int | None = None, bins: int = 24) -> DelayedState:
    """The stream's delayed index as it stands; `bins=0` leaves out the due-time histogram.
    Reads the buckets through `stream.delayed_buckets`, so a prefetch serves it."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    index = index_of(stream)
    (hot,), (ops,) = hot_states([index]), _op_figures([index])
    rows = list(stream.delayed_buckets.all())
    state = _state(rows, hot, ops, now_ms)
    if not bins:
        return state
    due_now, by_due_time = _by_due_time(index, _cold(rows, state.buckets), now_ms, bins)
    return replace(state, due_now=due_now + hot.counts["due"], by_due_time=by_due_time)  # "due": being handed out


def delayed_states(streams: Sequence[Stream], now_ms: int | None = None) -> list[DelayedState]:
    """`delayed_state(stream, bins=0)` of each stream (what /metrics exports), in three Redis
    round trips whatever their number (`hot_states`, then the operations' figures)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    indexes = [index_of(stream) for stream in streams]
    return [
        _state(list(stream.delayed_buckets.all()), hot, ops, now_ms)
        for stream, hot, ops in zip(streams, hot_states(indexes), _op_figures(indexes), strict=True)
    ]


def _state(rows: list, hot: HotState, ops: dict[str, OpFigures], now_ms: int) -> DelayedState:
    """The state of an index whose bucket rows are `rows`, without its due-time histogram
    (nothing counted as due now either)."""
    buckets = [_bucket_state(row, hot.loaded.get(row.pk, 0)) for row in rows]
    next_due = min(
        [t for t in [hot.next_due] if t is not None] + [s["min"] for s in _cold(rows, buckets)], default=None
    )
    return DelayedState(now_ms, hot.counts, buckets, next_due, 0, [], ops)


def _cold(rows: list, buckets: list[BucketState]) -> list[dict]:
    """The sealed buckets' snapshot segments not loaded yet: pending outside Redis."""
    return [s for row, b in zip(rows, buckets) for s in row.segments[b.segments_loaded :]]


def _bucket_state(row, loaded: int) -> BucketState:
    segments = row.segments
    return BucketState(
        bucket_id=row.pk,
        first_chunk=row.first_chunk,
        last_chunk=row.last_chunk,
        segments_loaded=loaded,
        segments_total=len(segments),
        index_count=row.index_count,
        remaining=remaining(row, loaded),
        unloaded=sum(s["count"] for s in segments[loaded:]),
        snapshot_bytes=row.snapshot_bytes,
        min_ms=min((s["min"] for s in segments), default=None),
        max_ms=max((s["max"] for s in segments), default=None),
    )


def _timed_sets(index) -> list[str]:
    """The Redis sorted sets scored by delivery time: the mutable bucket, the shared queue and
    the buckets being sealed (the hand-out area is scored by claim expiry instead)."""
    mutable, queue = index.keys[1], index.keys[2]
    return [mutable, queue, *[f"{index.prefix}:sealing:{g}" for g in index.sealing()]]


def _by_due_time(index, cold: list[dict], now_ms: int, bins: int) -> tuple[int, list[DueBin]]:
    """Pending events due by now, and the others in `bins` equal bins up to the latest due time:
    ZCOUNTs for the hot part (two round trips in all), and for an unloaded snapshot segment its
    count spread evenly over [min, max] (its indexes' own times are in the snapshot only)."""
    keys = _timed_sets(index)
    pipe = index.redis.pipeline(transaction=False)
    for key in keys:
        pipe.zrange(key, -1, -1, withscores=True)
    latest = max([int(rows[0][1]) for rows in pipe.execute() if rows] + [s["max"] for s in cold], default=now_ms)
    width = -(-(latest - now_ms) // bins) if latest > now_ms else 0  # ceil: the last edge reaches it
    edges = [now_ms + k * width for k in range(bins + 1)] if width else [now_ms]
    pipe = index.redis.pipeline(transaction=False)
    for key in keys:
        for edge in edges:
            pipe.zcount(key, "-inf", edge)
    counts = pipe.execute()
    by_edge = [sum(counts[k * len(edges) + e] for k in range(len(keys))) for e in range(len(edges))]
    by_edge = [n + sum(_spread_at_or_before(s, edge) for s in cold) for n, edge in zip(by_edge, edges)]
    return by_edge[0], [
        DueBin(lo, hi, after - before) for lo, hi, before, after in zip(edges, edges[1:], by_edge, by_edge[1:])
    ]


def _spread_at_or_before(segment: dict, at_ms: int) -> int:
    """How many of a snapshot segment's indexes are due by `at_ms`, its count spread evenly over
    its [min, max] (rounded: monotone in `at_ms`, and all of them from `max` on)."""
    lo, hi, count = segment["min"], segment["max"], segment["count"]
    if at_ms < lo:
        return 0
    if at_ms >= hi:
        return count
    return round(count * (at_ms - lo) / (hi - lo))


def _op_figures(indexes: Sequence[DelayIndex]) -> list[dict[str, OpFigures]]:
    """The counters buckets.record keeps in Redis, per operation type (zeros for the types that
    never ran, so a rate() starts from the first scrape), of each index in one round trip."""
    if not indexes:
        return []
    pipe = indexes[0].redis.pipeline(transaction=False)
    for index in indexes:
        pipe.hgetall(f"{index.prefix}:ops")
        pipe.hgetall(f"{index.prefix}:latency")
    answers = pipe.execute()
    out = []
    for i in range(len(indexes)):
        ops, latency = ({_text(k): _text(v) for k, v in h.items()} for h in answers[2 * i : 2 * i + 2])
        out.append(
            {
                kind: OpFigures(
                    succeed=int(ops.get(f"{kind}:succeed", 0)),
                    failed=int(ops.get(f"{kind}:failed", 0)),
                    latency_ms_sum=float(ops.get(f"{kind}:ms", 0)),
                    latency={le: int(latency.get(f"{kind}:{le}", 0)) for le in LATENCY_LES},
                )
                for kind in OP_TYPES
            }
        )
    return out


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
