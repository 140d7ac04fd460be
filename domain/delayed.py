"""The bucket-based index of delayed events (docs/design/delayed-delivery.md; Pulsar's PIP-195), as plain
Python: the rules every part of delayed delivery uses — where an index goes, when the mutable
bucket is sealed, how a bucket is cut into snapshot segments, which segment the shared queue
holds, which buckets to merge, what recovery keeps. Storage (snapshot files, Redis, the
database) lives elsewhere and calls these.

A position is `(chunk, segment, offset)`, chunks numbered stream-wide in increasing order; an
index is a position with its delivery time, ordered by `(deliver_at_ms, chunk, segment, offset)`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from pyroaring import BitMap


class Index(NamedTuple):
    deliver_at: int  # in the caller's unit (ms in CBR; the examples use seconds)
    chunk: int
    segment: int
    offset: int

    @property
    def position(self) -> tuple[int, int, int]:
        return self.chunk, self.segment, self.offset


@dataclass(frozen=True)
class DelayedConfig:
    min_index_count_per_bucket: int = 50_000
    max_time_step_per_segment: int = 300_000  # the window of a snapshot segment (ms)
    max_indexes_per_segment: int = 5_000  # -1: no count limit
    max_num_buckets: int | None = None  # None: never merge


@dataclass
class SnapshotSegment:
    """One piece of a sealed bucket: its indexes in order, their time range, and per (chunk,
    segment) the offsets it holds."""

    indexes: list[Index]
    bitmaps: dict[tuple[int, int], BitMap] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bitmaps:
            for ix in self.indexes:
                self.bitmaps.setdefault((ix.chunk, ix.segment), BitMap()).add(ix.offset)

    @property
    def min_time(self) -> int:
        return self.indexes[0].deliver_at

    @property
    def max_time(self) -> int:
        return self.indexes[-1].deliver_at


class SegmentCutter:
    """Places sorted indexes into snapshot segments one at a time: a segment opens at its first
    index with the window `[t0, t0 + window - 1]` and closes when the next index falls outside it
    or when it holds `max_per_segment` indexes (-1: no count limit). The one cutter, used in
    process and by the Spark job."""

    def __init__(self, window: int, max_per_segment: int):
        self.window = window
        self.max_per_segment = max_per_segment
        self.segment_no = -1
        self._count = 0
        self._t0 = 0

    def place(self, deliver_at: int) -> int:
        full = self.max_per_segment != -1 and self._count >= self.max_per_segment
        if self.segment_no < 0 or deliver_at > self._t0 + self.window - 1 or full:
            self.segment_no += 1
            self._count = 0
            self._t0 = deliver_at
        self._count += 1
        return self.segment_no


def cut_segments(indexes: Iterable[Index], window: int, max_per_segment: int) -> list[SnapshotSegment]:
    """Cut sorted indexes into snapshot segments (see SegmentCutter)."""
    cutter = SegmentCutter(window, max_per_segment)
    groups: list[list[Index]] = []
    for ix in indexes:
        if cutter.place(ix.deliver_at) == len(groups):
            groups.append([])
        groups[-1].append(ix)
    return [SnapshotSegment(g) for g in groups]


@dataclass
class Bucket:
    """A sealed (immutable) bucket: whole chunks `[first_chunk, last_chunk]`, its snapshot
    segments, and how many of them the shared queue has loaded so far."""

    first_chunk: int
    last_chunk: int
    segments: list[SnapshotSegment]
    loaded: int = 0  # segments loaded into the shared queue (the last one loaded is current)

    @property
    def remaining(self) -> int:
        """Indexes not yet loaded into the queue, plus those of the current segment."""
        start = max(self.loaded - 1, 0)
        return sum(len(s.indexes) for s in self.segments[start:])

    def covers(self, chunk: int) -> bool:
        return self.first_chunk <= chunk <= self.last_chunk

    def contains(self, position: tuple[int, int, int]) -> bool:
        chunk, segment, offset = position
        return any(offset in s.bitmaps.get((chunk, segment), ()) for s in self.segments)


def merge_choice(counts: list[int]) -> int:
    """Which adjacent pair of buckets to merge: the pair with the fewest remaining indexes
    (the first such pair on a tie); returns the index of its left bucket."""
    if len(counts) < 2:
        raise ValueError("merging needs at least two buckets")
    sums = [counts[i] + counts[i + 1] for i in range(len(counts) - 1)]
    return sums.index(min(sums))


def merge_kept(sources: list[Bucket], still_queued: Callable[[list[Index]], list[bool]]) -> list[Index]:
    """What merging these buckets keeps, in order: every index of theirs but those handed out
    already, which are exactly the indexes of a segment loaded into the shared queue
    (`Bucket.loaded`) that the queue no longer holds (`still_queued` says, for a list of
    indexes, which it still holds). Never judged by delivery time: an index that arrived due
    goes out at once and may be later than segments not loaded yet, which nobody was handed."""
    loaded = [ix for b in sources for s in b.segments[: b.loaded] for ix in s.indexes]
    done = {ix.position for ix, queued in zip(loaded, still_queued(loaded), strict=True) if not queued}
    merged = heapq.merge(*(s.indexes for b in sources for s in b.segments))
    return [ix for ix in merged if ix.position not in done]


def plan_loads(
    due: list[tuple[int, int, int]], segments: dict[int, list[dict]], now: int, budget: int, after: int | None = None
) -> tuple[dict[int, tuple[int, int]], int]:
    """Which snapshot segments one hand-out round loads, and the bound it releases up to.

    `due`: (frontier, bucket, segments loaded) of the buckets whose frontier (the latest time of
    their loaded segment) is due by `now`; `segments`: each such bucket's segment metadata
    (`min`, `max`, `count`); `after`: the frontier of the next bucket when `due` lists only the
    earliest ones. A bucket's next segment is loaded once its frontier is due (before its last
    loaded index is handed out); the round goes on loading in frontier order — a loaded segment
    wholly due makes the bucket's next one loadable in the same round — until `budget` indexes
    (at least one segment). The bound is then the earliest frontier left, less 1 (nothing at or
    past it goes out before that bucket's next segment is loaded), and at most `now`: the loaded
    indexes due by it go out in this round, the others (at most the last segment of a bucket
    and ties at the bound) wait in the shared queue. Returns ({bucket: (first, last) segment
    loaded}, bound)."""
    heap = [(edge, bucket) for edge, bucket, _ in due]
    heapq.heapify(heap)
    following = {bucket: loaded for _, bucket, loaded in due}
    plan: dict[int, tuple[int, int]] = {}
    while heap and heap[0][0] <= now:
        edge, bucket = heap[0]
        number = following[bucket]
        if number >= len(segments[bucket]):
            break  # nothing to load (a bucket being deleted): it holds the bound
        count = segments[bucket][number]["count"]
        if plan and count > budget:
            break
        heapq.heappop(heap)
        budget -= count
        plan[bucket] = (plan[bucket][0] if bucket in plan else number, number)
        following[bucket] = number + 1
        if number + 1 < len(segments[bucket]):
            heapq.heappush(heap, (segments[bucket][number]["max"], bucket))
    bound = now
    if heap:
        bound = min(bound, heap[0][0] - 1)
    if after is not None:
        bound = min(bound, after - 1)
    return plan, bound


def round_budget(
    due: list[tuple[int, int, int]], segments: dict[int, list[dict]], base: int, layers: int = 4, cap: int = 200_000
) -> int:
    """How many snapshot indexes one hand-out round may load (`plan_loads`' budget): at least
    `base`, and `layers` times what the due buckets hold in the shared queue (their loaded
    segments' counts), at most `cap`. Only a bucket's last loaded segment of a round waits in
    the queue (a Redis sorted set: added, then popped, by the script, some µs an index); the
    segments before it go out at once with the round. With many buckets (199 at 10M pending
    with the defaults) a fixed budget below one segment per bucket sends every loaded index
    through the queue; loading `layers` segments per due bucket sends ~1/(layers+1) of them.
    `due` and `segments` as `plan_loads` takes them; `cap` bounds a round's batch (and the
    script's argument) when segments are full (up to `max_indexes_per_segment` each)."""
    queued = sum(
        segments[b][loaded - 1]["count"] for _, b, loaded in due if b in segments and 0 < loaded <= len(segments[b])
    )
    return max(base, min(layers * queued, cap))


def recovery_plan(buckets: list[tuple[int, int, bool]]) -> list[int]:
    """Which registered buckets to delete after a restart: `(first_chunk, last_chunk,
    snapshot_readable_and_not_empty)` each; a bucket whose snapshot is missing or empty, or whose
    range another bucket encloses (a leftover of an interrupted merge), is deleted. Returns
    their positions in the list. (An unreadable snapshot's range is rebuilt by replay: the
    caller does that before deleting.)"""
    gone = []
    for i, (first, last, usable) in enumerate(buckets):
        enclosed = any(
            j != i and f <= first and last <= l and (f, l) != (first, last)
            for j, (f, l, ok) in enumerate(buckets)
            if ok
        )
        if not usable or enclosed:
            gone.append(i)
    return gone


class BucketIndex:
    """A stream's delayed-event index: the last mutable bucket, the immutable buckets, and the
    shared queue (each immutable bucket's current segment, plus indexes that went there
    directly). `pop_due` hands indexes out in order, never early."""

    def __init__(self, config: DelayedConfig):
        self.config = config
        self.mutable: list[Index] = []
        self.mutable_positions: set[tuple[int, int, int]] = set()
        self.mutable_last_chunk: int | None = None
        self.buckets: list[Bucket] = []
        self._queue: list[tuple[Index, int]] = []  # (index, bucket id or -1 for direct)
        self._queued: set[tuple[int, int, int]] = set()
        self._left_in_segment: dict[int, int] = {}  # bucket id -> indexes of its current segment still queued
        self._ids: dict[int, Bucket] = {}
        self._next_id = 0

    # -- adding --------------------------------------------------------------------------------

    def contains(self, position: tuple[int, int, int]) -> bool:
        return (
            position in self.mutable_positions
            or position in self._queued
            or any(b.covers(position[0]) and b.contains(position) for b in self.buckets)
        )

    def add(self, ix: Index, now: int) -> str:
        """Track one event: "ordinary" (due already: deliver it as any event), "duplicate",
        "queue" (its chunk is inside an immutable bucket's range or older than the mutable
        bucket's: straight to the shared queue), or "mutable"."""
        if ix.deliver_at <= now:
            return "ordinary"
        if self.contains(ix.position):
            return "duplicate"
        first = self.mutable[0].chunk if self.mutable else None  # never lowered: older chunks queue
        if (
            any(b.covers(ix.chunk) for b in self.buckets)
            or (first is not None and ix.chunk < first)
            or (self.buckets and ix.chunk <= self.buckets[-1].last_chunk)
        ):
            self._push(ix, -1)
            return "queue"
        last = self.mutable_last_chunk
        if last is not None and ix.chunk > last and len(self.mutable) >= self.config.min_index_count_per_bucket:
            self.seal()
        self.mutable.append(ix)
        self.mutable_last_chunk = max(ix.chunk, self.mutable_last_chunk or ix.chunk)
        self.mutable_positions.add(ix.position)
        return "mutable"

    def seal(self) -> Bucket | None:
        """Seal the mutable bucket into an immutable one (whole chunks) and load its first
        segment into the queue."""
        if not self.mutable:
            return None
        indexes = sorted(self.mutable)
        chunks = [ix.chunk for ix in self.mutable]
        bucket = Bucket(
            min(chunks),
            max(chunks),
            cut_segments(indexes, self.config.max_time_step_per_segment, self.config.max_indexes_per_segment),
        )
        self.mutable, self.mutable_positions, self.mutable_last_chunk = [], set(), None
        self._register(bucket)
        return bucket

    def _register(self, bucket: Bucket) -> None:
        bucket_id = self._next_id
        self._next_id += 1
        self._ids[bucket_id] = bucket
        self.buckets.append(bucket)
        self.buckets.sort(key=lambda b: b.first_chunk)
        if not self._load_next(bucket_id):
            self._drop(bucket_id)

    def _drop(self, bucket_id: int) -> None:
        self.buckets.remove(self._ids.pop(bucket_id))
        self._left_in_segment.pop(bucket_id, None)

    def _load_next(self, bucket_id: int) -> bool:
        """Load the bucket's next segment holding anything not already queued; False when the
        bucket has none left."""
        bucket = self._ids[bucket_id]
        while bucket.loaded < len(bucket.segments):
            segment = bucket.segments[bucket.loaded]
            bucket.loaded += 1
            pushed = sum(self._push(ix, bucket_id) for ix in segment.indexes)
            if pushed:
                self._left_in_segment[bucket_id] = pushed
                return True
        self._left_in_segment[bucket_id] = 0
        return False

    def _push(self, ix: Index, bucket_id: int) -> bool:
        if ix.position in self._queued:
            return False  # queued twice (after a merge): once is enough
        heapq.heappush(self._queue, (ix, bucket_id))
        self._queued.add(ix.position)
        return True

    # -- handing out ---------------------------------------------------------------------------

    def pop_due(self, now: int, floor: Callable[[int], int] | None = None, limit: int | None = None) -> list[Index]:
        """Due indexes in order. Before the last queued index of a bucket's current segment is
        handed out, that bucket's next segment is loaded (nothing later overtakes it); a bucket
        with nothing left is dropped. Indexes below `floor(segment)` (already processed) are
        dropped, not handed out."""
        out: list[Index] = []
        while self._queue and self._queue[0][0].deliver_at <= now and (limit is None or len(out) < limit):
            ix, bucket_id = self._queue[0]
            if bucket_id >= 0 and self._left_in_segment[bucket_id] == 1:
                if self._load_next(bucket_id):
                    self._left_in_segment[bucket_id] += 1  # the one about to go still counts
                    continue  # the loaded segment may hold an earlier index
                self._left_in_segment[bucket_id] = 1
            heapq.heappop(self._queue)
            self._queued.discard(ix.position)
            if bucket_id >= 0:
                self._left_in_segment[bucket_id] -= 1
                bucket = self._ids[bucket_id]
                if self._left_in_segment[bucket_id] == 0 and bucket.loaded >= len(bucket.segments):
                    self._drop(bucket_id)
            if floor is not None and ix.offset < floor(ix.segment):
                continue
            out.append(ix)
        return out

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def pending(self) -> int:
        return (
            len(self.mutable)
            + len(self._queue)
            + sum(sum(len(s.indexes) for s in b.segments[b.loaded :]) for b in self.buckets)
        )

    # -- merging -------------------------------------------------------------------------------

    def merge_if_needed(self) -> Bucket | None:
        """Over `max_num_buckets`: merge the adjacent pair with the fewest remaining indexes.
        The merge reads all segments of both sources (what is still queued stays queued; the
        dedup of the queue drops the repeats)."""
        limit = self.config.max_num_buckets
        if limit is None or len(self.buckets) <= limit:
            return None
        i = merge_choice([b.remaining for b in self.buckets])
        left, right = self.buckets[i], self.buckets[i + 1]
        keep = merge_kept([left, right], lambda ixs: [ix.position in self._queued for ix in ixs])
        merged = Bucket(
            left.first_chunk,
            right.last_chunk,
            cut_segments(keep, self.config.max_time_step_per_segment, self.config.max_indexes_per_segment),
        )
        for bucket in (left, right):
            bucket_id = next(k for k, b in self._ids.items() if b is bucket)
            self._drop(bucket_id)
            # its queued indexes stay in the queue as direct ones
            self._queue = [(ix, -1 if b == bucket_id else b) for ix, b in self._queue]
            heapq.heapify(self._queue)
        self._register(merged)
        return merged
