"""The sealed buckets of a stream's delayed index: sealing the mutable bucket into a durable
snapshot, loading snapshot segments into the shared queue, merging, deleting what is finished,
and recovering the index after Redis lost it (docs/design/delayed-delivery.md). Heavy steps take the
stream's maintenance lock; loads are safe without it (each is conditional in Redis)."""

from __future__ import annotations

import bisect
import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from domain.delayed import (
    Bucket,
    Index,
    SnapshotSegment,
    cut_segments,
    merge_choice,
    merge_kept,
    plan_loads,
    recovery_plan,
    round_budget,
)
from store import delayed_snapshots as snapshots
from store import locks as redis_locks
from store.delayed_snapshots import CorruptSnapshot
from store.redis_connection import get_redis
from streams.delaying.index import DelayIndex, Direct, Load, packed, tag
from streams.delaying.stream_index import config_of, index_of
from streams.logs import stream_log
from streams.models import DelayedBucket, DelayedIndex, DelayedOp, Stream

log = logging.getLogger(__name__)
OPS_KEPT = 300


def snapshot_dir(stream: Stream) -> Path:
    return Path(settings.CBR_DATA_DIR) / "delayed" / stream.storage_key


# -- the operations log ------------------------------------------------------------------------


def record(stream: Stream, kind: str, ok: bool, started: float, detail: str = "", count: int = 1) -> None:
    """Count bucket operations (metrics) and keep them in the console's log: `count` of them
    done together (a hand-out round's loads), each taking its share of the time."""
    latency = (time.monotonic() - started) * 1000
    state = "succeed" if ok else "failed"
    redis = get_redis()
    pipe = redis.pipeline(transaction=False)
    pipe.hincrby(f"{tag(stream.storage_key)}:ops", f"{kind}:{state}", count)
    pipe.hincrbyfloat(f"{tag(stream.storage_key)}:ops", f"{kind}:ms", latency)
    pipe.hincrby(f"{tag(stream.storage_key)}:latency", f"{kind}:{_latency_bucket(latency / count)}", count)
    if kind == "load" and ok:  # loads come by the thousand: the log keeps at most one a second
        pipe.set(f"{tag(stream.storage_key)}:load-logged", 1, nx=True, px=1000)
    if not pipe.execute()[-1]:
        return
    op = DelayedOp.objects.create(stream=stream, type=kind, state=state, latency_ms=latency, detail=detail[:500])
    if op.pk % 50 == 0 and DelayedOp.objects.filter(stream=stream).count() > OPS_KEPT + 50:
        keep = DelayedOp.objects.filter(stream=stream).values_list("pk", flat=True)[:OPS_KEPT]
        DelayedOp.objects.filter(stream=stream).exclude(pk__in=list(keep)).delete()


# PIP-195's thresholds (50 ms … 60 s, then overflow), with finer ones below 50 ms
LATENCY_BOUNDS_MS = (1, 5, 10, 50, 100, 500, 1000, 5000, 30000, 60000)


def _latency_bucket(ms: float) -> str:
    return next((str(b) for b in LATENCY_BOUNDS_MS if ms <= b), "+Inf")


@contextmanager
def maintenance_lock(stream: Stream, ttl_s: int | None = None) -> Iterator[bool]:
    """One process at a time seals, merges, deletes or recovers a stream's buckets (a lease: a
    holder killed on this machine frees it at once, one elsewhere after `CBR_DELAYED_LOCK_S`;
    every step is safe to repeat)."""
    with redis_locks.lease(f"{tag(stream.storage_key)}:lock", ttl_s or settings.CBR_DELAYED_LOCK_S) as got:
        yield got


# -- sealing -----------------------------------------------------------------------------------


def cut(stream: Stream, indexes: list[Index]) -> list[SnapshotSegment]:
    """Sort and cut a bucket's indexes into snapshot segments, in this process: faster than a
    Spark job at every size measured (bench/delayed_sealing.py: 1M indexes in 4.3 s here, 9.9 s
    on Spark `local[2]`), since the indexes would travel to executors and back for a cut that is
    sequential by nature."""
    config = config_of(stream)
    return cut_segments(sorted(indexes), config.max_time_step_per_segment, config.max_indexes_per_segment)


def _entries(indexes) -> list[tuple[int, int, int]]:
    return [(ix.segment, ix.offset, ix.deliver_at) for ix in indexes]


def _edge(segments: list[dict], number: int) -> int | None:
    """The frontier after loading segment `number`: its latest time, None for the last one."""
    return segments[number]["max"] if number + 1 < len(segments) else None


def seal(stream: Stream, gen: int, index: DelayIndex | None = None) -> DelayedBucket | None:
    """Seal generation `gen` (renamed from the mutable bucket by the index): snapshot, durable,
    then registered, then its first segment loaded; each step may be repeated after a crash."""
    index = index or index_of(stream)
    started = time.monotonic()
    row = DelayedBucket.objects.filter(stream=stream, first_chunk=gen).first()
    if row is None:
        entries, ranges = index.sealing_entries(gen)
        if not entries:
            index.drop_gen(gen)  # every index of it came due while it waited
            return None
        segments = cut(stream, [Index(at, gen, seg, off) for seg, off, at in entries])
        try:
            row = _register(stream, Bucket(gen, gen, segments), f"b{gen}-{time.time_ns()}", ranges)
        except OSError as exc:  # the snapshot could not be written: the generation waits in Redis
            record(stream, "create", False, started, f"chunk {gen}: {exc}")
            raise
        record(stream, "create", True, started, f"chunk {gen}: {len(entries)} indexes, {len(segments)} segments")
    first = snapshots.read_segment(snapshot_dir(stream), row.name, 0)
    index.load(row.pk, 0, _entries(first), _edge(row.segments, 0), drop_gen=gen)
    return row


def _register(stream: Stream, bucket: Bucket, name: str, ranges: dict, replaces=()) -> DelayedBucket:
    """Write the snapshot durably, then register it (and drop the rows it replaces) in one
    transaction; raise the stream's sealed-through offsets."""
    info = snapshots.write_snapshot(snapshot_dir(stream), name, bucket)
    with transaction.atomic():
        DelayedBucket.objects.filter(pk__in=[r.pk for r in replaces]).delete()
        row = DelayedBucket.objects.create(
            stream=stream,
            first_chunk=bucket.first_chunk,
            last_chunk=bucket.last_chunk,
            name=name,
            ranges=ranges,
            segments=info.segments,
            index_count=info.count,
            snapshot_bytes=info.parquet_bytes,
        )
        meta, _ = DelayedIndex.objects.select_for_update().get_or_create(stream=stream)
        through = dict(meta.sealed_through)
        for seg, (_, hi) in ranges.items():
            through[seg] = max(through.get(seg, -1), hi)
        if through != meta.sealed_through:
            meta.sealed_through = through
            meta.save(update_fields=["sealed_through"])
    return row


# -- loading -----------------------------------------------------------------------------------


def load_next(stream: Stream, bucket_id: int, index: DelayIndex, rows: dict | None = None) -> bool:
    """Load a bucket's next snapshot segment into the shared queue (its current one is running
    out). False when the snapshot cannot be read: maintenance rebuilds it by replay. `rows`
    caches registrations across the loads of one hand-out."""
    started = time.monotonic()
    if rows is None or bucket_id not in rows:
        row = DelayedBucket.objects.filter(stream=stream, pk=bucket_id).first()
        if rows is not None:
            rows[bucket_id] = row
    else:
        row = rows[bucket_id]
    number = index.loaded().get(bucket_id, 0)
    if row is None or number >= len(row.segments):
        index.forget_bucket(bucket_id)  # merged or deleted meanwhile: nothing to load from it
        return True
    try:
        entries = snapshots.read_segment(snapshot_dir(stream), row.name, number)
    except CorruptSnapshot as exc:
        log.error("delayed index of %s: %s", stream, exc)
        record(stream, "load", False, started, str(exc))
        return False
    if index.load(bucket_id, number, _entries(entries), _edge(row.segments, number)):
        record(stream, "load", True, started, f"bucket {row.first_chunk}-{row.last_chunk} segment {number}")
    return True


def _bucket_rows(stream: Stream, ids: set[int], rows: dict) -> dict[int, tuple[str, list[dict], str]]:
    """The registrations of these buckets that still exist — (snapshot name, segments, chunks) —
    from `rows` (kept by the caller for one hand-out: a registered bucket never changes, a merge
    or rebuild registers a new one) or one query for those not in it yet."""
    missing = [i for i in ids if i not in rows]
    if missing:
        for pk, name, segments, first, last in DelayedBucket.objects.filter(stream=stream, pk__in=missing).values_list(
            "pk", "name", "segments", "first_chunk", "last_chunk"
        ):
            rows[pk] = (name, segments, f"{first}-{last}")
    return {i: rows[i] for i in ids if i in rows}


def round_loads(
    stream: Stream,
    index: DelayIndex,
    due: list[tuple[int, int, int]],
    after: int | None,
    now_ms: int,
    budget: int,
    cache: dict,
) -> tuple[list[Load], Direct | None, tuple[list, list, list], int, bool]:
    """Plan and read one hand-out round's loads (domain.delayed.plan_loads): the buckets
    whose frontier is due get their next snapshot segments, several per round, read with one
    Parquet call per bucket. Returns the loads, the indexes due by the bound to release at once
    (packed, and as lists: times, segments, offsets), the bound, and whether a snapshot could not
    be read (logged; then nothing is loaded: maintenance rebuilds the bucket). `cache` keeps the
    bucket registrations across the rounds of one hand-out."""
    started = time.monotonic()
    rows = _bucket_rows(stream, {bucket for _, bucket, _ in due}, cache)
    live = []
    for edge, bucket, loaded in due:
        if bucket not in rows or loaded >= len(rows[bucket][1]):
            index.forget_bucket(bucket)  # merged or deleted meanwhile: nothing to load from it
        else:
            live.append((edge, bucket, loaded))
    metadata = {b: rows[b][1] for _, b, _ in live}
    plan, bound = plan_loads(live, metadata, now_ms, round_budget(live, metadata, budget), after)
    directory = snapshot_dir(stream)
    read: dict[int, tuple[list, list, list]] = {}
    for bucket, (first, last) in plan.items():
        try:
            read[bucket] = snapshots.read_segment_columns(directory, rows[bucket][0], first, last)
        except CorruptSnapshot as exc:
            log.error("delayed index of %s: %s", stream, exc)
            record(stream, "load", False, started, str(exc))
            return [], None, ([], [], []), now_ms, True
    loads, times, segs, offs = [], [], [], []
    for bucket, (t, s, o) in read.items():
        first, last = plan[bucket]
        cut = bisect.bisect_right(t, bound)
        times += t[:cut]
        segs += s[:cut]
        offs += o[:cut]
        segments = rows[bucket][1]
        next_edge = segments[last]["max"] if last + 1 < len(segments) else None
        loads.append(Load(bucket, first, last + 1, next_edge, packed(zip(s[cut:], o[cut:], t[cut:]))))
    direct = Direct(packed(zip(segs, offs, times)), max(times)) if times else None
    if loads:
        detail = "; ".join(
            f"bucket {rows[b][2]} segment {a}" + (f"-{z}" if z > a else "") for b, (a, z) in plan.items()
        )
        record(stream, "load", True, started, detail, count=sum(ld.loaded - ld.expected for ld in loads))
    return loads, direct, (times, segs, offs), bound, False


# -- merging and deleting ----------------------------------------------------------------------


def remaining(row: DelayedBucket, loaded: int) -> int:
    """Indexes of the bucket not yet handed out, as far as its counts tell: its loaded
    segment's and those after it."""
    return sum(s["count"] for s in row.segments[max(loaded - 1, 0) :])


def delete_bucket(stream: Stream, row: DelayedBucket, index: DelayIndex, why: str) -> None:
    started = time.monotonic()
    bucket_id = row.pk
    try:
        snapshots.delete_snapshot(snapshot_dir(stream), row.name)  # the snapshot, then its registration
    except OSError as exc:  # the bucket stays registered: the next sweep tries again
        record(stream, "delete", False, started, f"bucket {row.first_chunk}-{row.last_chunk}: {exc}")
        raise
    row.delete()
    index.forget_bucket(bucket_id)
    record(stream, "delete", True, started, f"bucket {row.first_chunk}-{row.last_chunk}: {why}")


def delete_finished(stream: Stream, index: DelayIndex, now_ms: int) -> int:
    """Delete buckets with nothing left to hand out: every segment loaded and released, or wholly
    truncated away. (The stream's head counts as a floor: a new reader group may start there.)"""
    state = index.state()
    released = int(state.get("released", 0))
    loaded = index.loaded()
    heads = {s: c for s, c in stream_log(stream).head_cut().items()}
    gone = 0
    for row in DelayedBucket.objects.filter(stream=stream):
        done = loaded.get(row.pk, 0) >= len(row.segments) and row.segments and row.segments[-1]["max"] <= released
        below = all(hi < heads.get(seg, 0) for seg, (_, hi) in row.ranges.items())
        if done or below:
            delete_bucket(stream, row, index, "all handed out" if done else "below the head")
            gone += 1
    return gone


def delete_orphans(stream: Stream, older_than_s: int = 600) -> int:
    """Snapshot files no registration names (a seal or merge that died before registering),
    once they are old enough not to be one in progress."""
    directory = snapshot_dir(stream)
    if not directory.is_dir():
        return 0
    names = set(DelayedBucket.objects.filter(stream=stream).values_list("name", flat=True))
    gone = 0
    cutoff = time.time() - older_than_s
    for path in directory.iterdir():
        name = path.name.split(".")[0]
        if name not in names and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
            gone += 1
    return gone


def merge_if_needed(stream: Stream, index: DelayIndex) -> DelayedBucket | None:
    """Over `max_num_buckets`: merge the adjacent pair with the fewest remaining indexes, from
    all their segments, leaving out only what was handed out (`domain.delayed.merge_kept`);
    the sources go only once the merged snapshot is durable. A load racing the merge makes it
    keep more (repeats, which the queue and the groups drop), never less."""
    limit = config_of(stream).max_num_buckets
    rows = list(DelayedBucket.objects.filter(stream=stream).order_by("first_chunk"))
    if limit is None or len(rows) <= limit:
        return None
    started = time.monotonic()
    loaded = index.loaded()
    i = merge_choice([remaining(r, loaded.get(r.pk, 0)) for r in rows])
    left, right = rows[i], rows[i + 1]
    directory = snapshot_dir(stream)
    try:
        sources = [snapshots.read_snapshot(directory, r.name) for r in (left, right)]
    except CorruptSnapshot as exc:
        record(stream, "merge", False, started, str(exc))
        return None
    for source, row in zip(sources, (left, right), strict=True):
        source.loaded = loaded.get(row.pk, 0)
    keep = merge_kept(sources, lambda ixs: index.queued([f"{ix.segment}:{ix.offset}" for ix in ixs]))
    ranges = dict(left.ranges)
    for seg, (lo, hi) in right.ranges.items():
        have = ranges.get(seg)
        ranges[seg] = [min(lo, have[0]), max(hi, have[1])] if have else [lo, hi]
    config = config_of(stream)
    bucket = Bucket(
        left.first_chunk,
        right.last_chunk,
        cut_segments(keep, config.max_time_step_per_segment, config.max_indexes_per_segment),
    )
    if not bucket.segments:
        for r in (left, right):
            delete_bucket(stream, r, index, "merged: nothing left")
        return None
    row = _register(
        stream, bucket, f"m{left.first_chunk}-{right.last_chunk}-{time.time_ns()}", ranges, replaces=(left, right)
    )
    for r in (left, right):
        index.forget_bucket(r.pk)
    first = bucket.segments[0].indexes
    index.load(row.pk, 0, _entries(first), _edge(row.segments, 0))
    for r in (left, right):
        snapshots.delete_snapshot(directory, r.name)
    record(
        stream,
        "merge",
        True,
        started,
        f"buckets {left.first_chunk}-{left.last_chunk} + {right.first_chunk}-{right.last_chunk}: {len(keep)} indexes",
    )
    return row


# -- recovery ----------------------------------------------------------------------------------


def _delayed_in(
    stream: Stream, segment: str, start: int, end: int | None, after_ms: int
) -> Iterator[list[tuple[int, int, int]]]:
    """The stream's events in [start, end) of a segment that are due after `after_ms`, in
    batches: what a replay indexes."""
    seg = stream_log(stream).segment(segment)
    stop = seg.committed_tail().next_offset if end is None else end
    at = start
    while at < stop:
        records = seg.read(at, min(10_000, stop - at))
        if not records:
            break
        batch = [
            (int(segment), r.offset, r.deliver_at_ms)
            for r in records
            if r.offset < stop and r.deliver_at_ms is not None and r.deliver_at_ms > after_ms
        ]
        if batch:
            yield batch
        at = records[-1].offset + 1


def rebuild(stream: Stream, row: DelayedBucket, now_ms: int) -> DelayedBucket | None:
    """Rebuild an unreadable snapshot by replaying its range of the stream."""
    started = time.monotonic()
    indexes = [
        Index(at, row.first_chunk, seg, off)
        for seg_id, (lo, hi) in row.ranges.items()
        for batch in _delayed_in(stream, seg_id, lo, hi + 1, now_ms)
        for seg, off, at in batch
    ]
    if not indexes:
        delete_bucket(stream, row, index_of(stream), "rebuilt: nothing left")
        record(stream, "rebuild", True, started, f"bucket {row.first_chunk}-{row.last_chunk}: nothing left")
        return None
    bucket = Bucket(row.first_chunk, row.last_chunk, cut(stream, indexes))
    new = _register(
        stream, bucket, f"r{row.first_chunk}-{row.last_chunk}-{time.time_ns()}", row.ranges, replaces=(row,)
    )
    snapshots.delete_snapshot(snapshot_dir(stream), row.name)
    record(
        stream, "rebuild", True, started, f"bucket {row.first_chunk}-{row.last_chunk}: {len(indexes)} indexes replayed"
    )
    return new


def recover(stream: Stream, now_ms: int, index: DelayIndex | None = None) -> dict:
    """Make the index live again after Redis lost it: from the snapshots (leading segments
    already due are skipped: readers start again from their floors and deliver them as ordinary
    events), an unreadable snapshot rebuilt by replay, buckets with nothing left, a missing
    snapshot or a range another encloses deleted; then the mutable part rebuilt by re-reading
    the stream above what the buckets cover."""
    index = index or index_of(stream)
    started = time.monotonic()
    directory = snapshot_dir(stream)
    rows = list(DelayedBucket.objects.filter(stream=stream).order_by("first_chunk"))
    infos: list[DelayedBucket | None] = []
    for row in rows:
        try:
            snapshots.read_metadata(directory, row.name)
            if not (directory / f"{row.name}.parquet").exists():
                raise CorruptSnapshot(f"{row.name}: data missing")
            infos.append(row)
        except CorruptSnapshot as exc:
            log.error("delayed index of %s: %s: rebuilt by replay", stream, exc)
            infos.append(rebuild(stream, row, now_ms))
    live = [r for r in infos if r is not None]
    for i in sorted(recovery_plan([(r.first_chunk, r.last_chunk, True) for r in live]), reverse=True):
        delete_bucket(stream, live.pop(i), index, "enclosed by another (an interrupted merge)")
    loaded = 0
    for row in live:
        first = next((n for n, s in enumerate(row.segments) if s["max"] >= now_ms), None)
        if first is None:
            delete_bucket(stream, row, index, "all due")
            continue
        try:
            entries = snapshots.read_segment(directory, row.name, first)
        except CorruptSnapshot:
            rebuilt = rebuild(stream, row, now_ms)
            if rebuilt is None:
                continue
            row = rebuilt
            first, entries = 0, snapshots.read_segment(directory, row.name, 0)
        index.redis.hset(index.keys[5], row.pk, first)
        index.load(row.pk, first, _entries(entries), _edge(row.segments, first))
        loaded += 1
    meta, _ = DelayedIndex.objects.get_or_create(stream=stream)
    log_ = stream_log(stream)
    heads = log_.head_cut()
    config = config_of(stream)
    replayed = 0
    for seg_id in stream.segment_ids:
        start = max(heads[seg_id], meta.sealed_through.get(seg_id, -1) + 1)
        for batch in _delayed_in(stream, seg_id, start, None, now_ms):
            gen = index.add(batch, now_ms, config.min_index_count_per_bucket)[3]
            replayed += len(batch)
            if gen:
                seal(stream, gen, index)  # as it goes: a long replay never piles up in Redis
    index.mark_recovered()
    meta.recovered_at = timezone.now()
    meta.save(update_fields=["recovered_at"])
    record(stream, "recover", True, started, f"{loaded} buckets loaded, {replayed} indexes re-read")
    return {"buckets": loaded, "replayed": replayed}


def forget_index(stream: Stream):
    """What deleting a stream does to its delayed index, once the deletion commits: its Redis
    keys and its snapshots go."""
    index = index_of(stream)
    directory = snapshot_dir(stream)

    def forget() -> None:
        index.forget()
        index.redis.delete(f"{tag(stream.storage_key)}:ops", f"{tag(stream.storage_key)}:latency")
        shutil.rmtree(directory, ignore_errors=True)

    return forget


def replay(stream: Stream, now_ms: int) -> dict:
    """Rebuild the whole index by replaying the stream from its head: what recovery does when no
    snapshot can be used (and what the benchmark compares recovery with). Drops the Redis state
    and every bucket first; seals as it goes."""
    index = index_of(stream)
    index.forget()
    for row in DelayedBucket.objects.filter(stream=stream):
        snapshots.delete_snapshot(snapshot_dir(stream), row.name)
        row.delete()
    DelayedIndex.objects.filter(stream=stream).update(sealed_through={})
    done = recover(stream, now_ms, index)
    for gen in index.sealing():
        seal(stream, gen, index)
    return done
