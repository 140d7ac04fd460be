"""A stream's events across its segments: routing, stream cuts, reads and truncation.

`SegmentStore(root, config).stream(key, layout)` gives a `StreamLog` whose segments are
directories `root/<key>/<segment id>/`. Segment ids are opaque strings ("0", "1", …) everywhere.
Routing maps a routing key onto the key space [0, 1) with a stable hash and sends it to the active
segment whose range holds it, as Pravega does (a stream that never scaled gives each segment an
equal range); the mapping never depends on the process (Python's own `hash` is salted per
process). A scale (streams.scaling) seals segments (`Segment.seal`); reads take a successor's
events only once every predecessor has been read to its sealed end.
No Django, no database: the caller passes a directory key (CBR uses the stream's database id).
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import heapq
import itertools
import os
import random
import resource
import shutil
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, cast

from domain.epoch_cuts import epoch_cut
from domain.events import EventIn
from domain.segment_layout import Layout
from store.ends import Head, Tail, read_stream_ends
from store.framing import Record
from store.segment.append import read_sealed_end
from store.segment.config import StoreConfig
from store.segment.errors import SegmentSealed
from store.segment.log import Segment
from store.segment.reads import SegmentInfo
from store.segment.retired import RetiredSegment
from store.segment.truncation import TruncateResult, move_heads

StreamCut = dict[str, int]

_SEGMENTS: OrderedDict[Path, Segment] = OrderedDict()
# The ends of sealed segments this process has read, by directory: an end never changes, and a
# stream's directory is never used by another stream (`Stream.storage_key`), so a cycle or a read
# of a scaled stream reads each seal once per process, not once per layout loaded.
_SEALED_ENDS: dict[Path, int] = {}
MAX_KNOWN_ENDS = 500_000  # then forgotten at once and read again as needed
_SEGMENTS_LOCK = threading.Lock()


# Segments kept open per process (each holds a lock file and a chunk descriptor): a retention
# cycle over 100k streams touches 400k segments, far past the descriptor limit.
def _max_open_segments() -> int:
    """A quarter of the process's descriptor limit (each open segment may hold two), at most
    4096: with the common default of 1024 descriptors, 256 segments."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            return 4096
    except (ImportError, ValueError, OSError):
        soft = 1024
    return max(64, min(4096, soft // 4))


MAX_OPEN_SEGMENTS = _max_open_segments()


def _new_pools() -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
    """Appends to several segments at once; and many small file reads for many streams at once
    (a retention cycle's batch): a read whose directory entry is not cached waits on the disk,
    and threads overlap those waits."""
    return (
        ThreadPoolExecutor(max_workers=8, thread_name_prefix="cbr-append"),
        ThreadPoolExecutor(max_workers=8, thread_name_prefix="cbr-store-io"),
    )


_APPEND_POOL, _IO_POOL = _new_pools()


def _after_fork_in_child() -> None:
    """A forked process (a retention cycle's workers) starts with none of the parent's threads:
    the pools' workers and whoever held the cache's lock are gone. It gets pools and a lock of its
    own, and opens segments anew (`Segment` drops inherited descriptors itself: a flock through
    an open file shared with the parent would not exclude it)."""
    global _APPEND_POOL, _IO_POOL, _SEGMENTS_LOCK
    _APPEND_POOL, _IO_POOL = _new_pools()
    _SEGMENTS_LOCK = threading.Lock()
    _SEGMENTS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def open_segment(path: Path, config: StoreConfig) -> Segment:
    """The process's `Segment` object for a directory (it caches descriptors). Past
    MAX_OPEN_SEGMENTS the least recently used quarter is closed; one in use by another thread is
    skipped (a thread that still holds an evicted object keeps working: files are opened by path
    and the flock excludes across descriptors)."""
    with _SEGMENTS_LOCK:
        seg = _SEGMENTS.get(path)
        if seg is None or seg.config != config:
            seg = _SEGMENTS[path] = Segment(path, config)
            if len(_SEGMENTS) > MAX_OPEN_SEGMENTS:
                _evict(len(_SEGMENTS) - MAX_OPEN_SEGMENTS * 3 // 4)
        else:
            _SEGMENTS.move_to_end(path)
    return seg


def _evict(count: int) -> None:
    busy = []
    while count > 0 and len(_SEGMENTS) > 1:  # the newest, just opened, stays
        old_path, old = _SEGMENTS.popitem(last=False)
        if not old._thread_lock.acquire(blocking=False):
            busy.append((old_path, old))
            continue
        try:
            old.close()
            count -= 1
        finally:
            old._thread_lock.release()
    for old_path, old in busy:
        _SEGMENTS[old_path] = old


def _libc_syncfs():
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None  # not Linux: os.sync
    syncfs.argtypes = [ctypes.c_int]
    return syncfs


_SYNCFS = _libc_syncfs()


def sync_store(path: Path | str) -> None:
    """Make this host's writes to the filesystem holding `path` durable: the batched
    truncation's one sync for many heads. `syncfs(2)` reaches only that filesystem (a network
    filesystem's writes included: the client flushes and commits them), not every disk of the
    host as `sync(2)` would; where there is no `syncfs`, `os.sync`."""
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if _SYNCFS(fd) != 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EPERM):
                raise OSError(err, os.strerror(err), str(path))
            os.sync()  # a sandbox that refuses syncfs
    finally:
        os.close(fd)


def key_space_position(routing_key: bytes) -> float:
    """Where a routing key falls in the key space [0, 1): stable across processes and hosts."""
    digest = hashlib.blake2b(routing_key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class Position(NamedTuple):
    segment: str
    offset: int


@dataclass(frozen=True, slots=True)
class StreamRecord:
    segment: str
    record: Record


class SealedSegments(Exception):
    """Part of an append met segments a scale has sealed since the caller read the stream's
    layout: `positions` holds where each event of the batch went, None for those not written
    (route them again by the current layout; each routing key's events went all or none)."""

    def __init__(self, positions: list[Position | None]):
        super().__init__("some segments are sealed")
        self.positions = positions


class StreamLog:
    def __init__(self, root: Path, layout: Layout, config: StoreConfig):
        self.root = root
        self.layout = layout
        self.segment_ids = layout.ids  # active or sealed and still holding data
        self.active_ids = layout.active_ids
        self.config = config
        self._paths = {s: root / s for s in self.segment_ids}
        self._sealed = [s for s in self.segment_ids if layout.is_sealed(s)]
        self._ends: dict[str, int] | None = None
        self.held_ids = layout.held_ids  # those with files (not retired)
        self._retired = {
            s.id: RetiredSegment(self._paths[s.id], s.retired[0], s.retired[1])
            for s in layout.segments.values()
            if s.retired
        }

    def segment(self, segment_id: str) -> Segment:
        retired = self._retired.get(segment_id)
        if retired is not None:  # answers every read a segment does (store.segment.retired)
            return cast(Segment, retired)
        return open_segment(self._paths[segment_id], self.config)

    # -- writing ----------------------------------------------------------------------------

    def route(self, routing_key: bytes) -> str:
        return self.layout.route(key_space_position(routing_key))

    def append(self, events: list[EventIn], now_ms: int | None = None, on_commit=None) -> list[Position]:
        """Append a validated batch; returns each event's (segment, offset), in the order given.
        `on_commit(segment_id, first_offset, events, now_ms)` runs for each segment's part once it
        is committed, under that segment's lock (see `Segment.append`).

        Events with a routing key go to the key's active segment, in order; events without one
        are spread round-robin from a random active segment (Pravega gives them a random key).
        Segments are appended in parallel threads, so their fsyncs overlap (fdatasync releases
        the GIL). A segment sealed since this layout was read takes nothing: `SealedSegments`.
        """
        if self._sealed and self._ends is None:
            # Every segment this layout says is sealed is sealed in the store before anything is
            # appended by it: a scale seals its segments only after its epoch commits, and in
            # between a process still routing by the older layout could append to a predecessor
            # after this process appended to its successor, and readers (who read a predecessor
            # to its end first) would give one key's events out of order. Once per layout.
            self.sealed_ends()
        ids = self.active_ids
        n = len(ids)
        if n == 1:
            seg_of = None
            groups = {ids[0]: events}
        else:
            spread = random.randrange(n)
            seg_of = []
            for ev in events:
                if ev.routing_key is None:
                    seg_of.append(ids[spread % n])
                    spread += 1
                else:
                    seg_of.append(self.route(ev.routing_key))
            groups = {}
            for seg_id, ev in zip(seg_of, events):
                groups.setdefault(seg_id, []).append(ev)

        # The Parquet copy of a chunk an append sealed is made by the compaction run that reads
        # it (`store.parquet.copy_facts`), never here: a publish must not wait for it.
        def hook(seg_id: str, evs: list[EventIn]):
            if on_commit is None:
                return None
            return lambda first, at: on_commit(seg_id, first, evs, at)

        firsts: dict[str, int] = {}
        sealed = False
        if len(groups) == 1:
            ((seg_id, evs),) = groups.items()
            try:
                firsts[seg_id] = self.segment(seg_id).append(evs, now_ms, hook(seg_id, evs)).first_offset
            except SegmentSealed:
                sealed = True
        else:
            futures = {
                seg_id: _APPEND_POOL.submit(self.segment(seg_id).append, evs, now_ms, hook(seg_id, evs))
                for seg_id, evs in groups.items()
            }
            failed = None
            for seg_id, f in futures.items():
                try:
                    firsts[seg_id] = f.result().first_offset
                except SegmentSealed:
                    sealed = True
                except BaseException as exc:  # every part is waited for before anything goes up
                    failed = failed or exc
            if failed is not None:
                raise failed
        if seg_of is None and not sealed:
            seg_id = ids[0]
            first = firsts[seg_id]
            return [Position(seg_id, o) for o in range(first, first + len(events))]
        next_offset = dict(firsts)
        positions: list[Position | None] = []
        for seg_id in seg_of or [ids[0]] * len(events):
            if seg_id in next_offset:
                positions.append(Position(seg_id, next_offset[seg_id]))
                next_offset[seg_id] += 1
            else:
                positions.append(None)
        if sealed:
            raise SealedSegments(positions)
        return positions  # type: ignore[return-value]  # every event was written

    def seal(self, segment_ids: list[str]) -> dict[str, int]:
        """Seal these segments in the store (`Segment.seal`): each one's end."""
        return {s: self.segment(s).seal() for s in segment_ids}

    def shown(self, cut: StreamCut) -> StreamCut:
        """A cut of every segment as the API shows cuts (`domain.epoch_cuts.epoch_cut`)."""
        return epoch_cut(self.layout, cut, self.sealed_ends()) if self._sealed else cut

    def sealed_ends(self) -> dict[str, int]:
        """The end of every segment the layout says is sealed. A scale seals its segments in the
        store right after its epoch commits; one it had not reached yet (the process stopped in
        between) is sealed here: readers need its end before they pass to a successor."""
        if self._ends is not None:
            return self._ends
        out = {}
        for s in self._sealed:
            path = self._paths[s]
            end = _SEALED_ENDS.get(path)
            if end is None:
                retired = self._retired.get(s)
                # read from the seal's file itself: no segment object made for a sealed segment
                end = retired.end if retired else read_sealed_end(path)
                if end is None:
                    end = self.segment(s).seal()
                if len(_SEALED_ENDS) >= MAX_KNOWN_ENDS:
                    _SEALED_ENDS.clear()
                _SEALED_ENDS[self._paths[s]] = end
            out[s] = end
        self._ends = out  # a sealed segment's end never changes: known once for this layout
        return out

    def create(self) -> None:
        """Make every active segment that does not exist yet (`Segment.create`)."""
        for seg_id in self.active_ids:
            self.segment(seg_id).create()

    # -- cuts and sizes ---------------------------------------------------------------------

    def infos(self) -> dict[str, SegmentInfo]:
        return {s: self.segment(s).info() for s in self.segment_ids}

    def head_cut(self) -> StreamCut:
        return {s: self.segment(s).read_head().offset for s in self.segment_ids}

    def cut_at_time(self, ms: int) -> StreamCut:
        """Per segment, the first event published at or after `ms` (the tail where none is)."""
        return {seg_id: self.segment(seg_id).offset_at_time(ms) for seg_id in self.segment_ids}

    def tail_cut(self) -> StreamCut:
        return {s: self.segment(s).committed_tail().next_offset for s in self.segment_ids}

    def size_till(self, cut: StreamCut) -> int:
        """Payload bytes from offset 0 of every segment up to `cut` (cumulative, never shrinks)."""
        return sum(self.segment(s).size_till(cut[s]) for s in self.segment_ids)

    # -- reading ----------------------------------------------------------------------------

    def read(self, from_cut: StreamCut, limit: int) -> tuple[list[StreamRecord], StreamCut]:
        """Up to `limit` events from `from_cut`, oldest published first across segments, a
        successor's only once each of its predecessors has been read to its end (so one routing
        key's events come in order across scale events).

        Returns the events and the cut to continue from (an offset for every segment of the
        layout). A segment position before the head continues from the head.
        """
        next_cut: StreamCut = {}
        for seg_id in self.segment_ids:
            next_cut[seg_id] = max(from_cut.get(seg_id, 0), self.segment(seg_id).read_head().offset)
        ends = self.sealed_ends() if self._sealed else {}
        result: list[StreamRecord] = []
        opened: list[str] = []
        while len(result) < limit:
            more = [
                s for s in self.segment_ids if s not in opened and _predecessors_read(self.layout, s, next_cut, ends)
            ]
            if not more and opened:
                break
            opened += more
            want = limit - len(result)
            page = max(16, min(want, -(-want // len(opened)) + 16))
            sources = [self._records(s, next_cut[s], want, page) for s in opened]
            # A merge takes each segment's records in their own order, so every segment
            # contributes a prefix of itself, whatever the clocks said; the sources read lazily.
            merged = heapq.merge(*sources, key=lambda r: (r.record.published_ms, r.segment, r.record.offset))
            got = list(itertools.islice(merged, want))
            for sr in got:
                next_cut[sr.segment] = sr.record.offset + 1
            result += got
            if len(got) == want or not ends:
                break  # a full page, or nothing sealed that could let a successor in
        return result, next_cut

    def _records(self, seg_id: str, start: int, limit: int, page: int):
        seg = self.segment(seg_id)
        taken = 0
        while taken < limit:
            got = seg.read(start, min(page, limit - taken))
            if not got:
                return
            for rec in got:
                yield StreamRecord(seg_id, rec)
            taken += len(got)
            start = got[-1].offset + 1

    # -- truncation and maintenance ---------------------------------------------------------

    def large_payload(self, segment_id: str, offset: int):
        """The payload of the large event at (`segment_id`, `offset`) (`Segment.large_payload`),
        None when the stream holds no event there."""
        if segment_id not in self._paths or segment_id in self._retired:
            return None
        return self.segment(segment_id).large_payload(offset)

    def move_heads(
        self, cut: StreamCut, sizes: dict[str, int], durable: bool = True
    ) -> dict[str, tuple[Head, Head, int]]:
        """`Segment.move_head` for every segment in `cut`, under the stream's heads lock at once."""
        return move_heads(self.root, self.held_ids, self.segment, cut, sizes, durable)

    def truncate(self, cut: StreamCut) -> dict[str, TruncateResult]:
        return {s: self.segment(s).truncate(cut[s]) for s in self.held_ids if s in cut}

    def ends(self) -> dict[str, tuple[Head, Tail]]:
        """Per segment, the head and the committed tail (offsets and cumulative sizes): one read
        of the stream's `ends` file; a segment whose slot is missing or torn is asked itself."""
        found = (
            read_stream_ends(self.root, self.held_ids)
            if self._retired
            else read_stream_ends(self.root, self.segment_ids)
        )
        out = {}
        for s in self.segment_ids:
            head, tail = found.get(s, (None, None))
            out[s] = (head, tail) if head is not None and tail is not None else self.segment(s).ends()
        return out

    def retire(self, segment_ids: list[str]) -> None:
        """Delete what is left of segments retention has passed whole (the layout says they are
        retired; their chunks went with the truncation): their directories, and this process's
        open objects of them. Called a while after they retired: a process that still read the
        layout before finds the files as they were (head and seal at the end), never an empty
        segment it would make anew."""
        for seg_id in segment_ids:
            path = self.root / seg_id
            with _SEGMENTS_LOCK:
                seg = _SEGMENTS.pop(path, None)
            if seg is not None:
                seg.close()
            shutil.rmtree(path, ignore_errors=True)

    def seal_due_chunks(self, now_ms: int | None = None) -> int:
        """Roll the active chunks that have reached their age; how many were sealed. (Their
        Parquet copies are made by the compaction run that reads them, in Spark's executors.)"""
        return sum(self.segment(seg_id).roll_if_due(now_ms) is not None for seg_id in self.segment_ids)

    def parquet_paths(self) -> list[Path]:
        return sorted(self.root.glob("*/*.parquet"))

    def delete(self) -> None:
        for seg_id in self.segment_ids:
            with _SEGMENTS_LOCK:
                seg = _SEGMENTS.pop(self.root / seg_id, None)
            if seg is not None:
                seg.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _predecessors_read(layout: Layout, segment_id: str, cut: StreamCut, ends: dict[str, int]) -> bool:
    """Whether a cut has read every predecessor of this segment (those still held) to its end."""
    return all(
        p not in ends or layout[p].retired or cut.get(p, 0) >= ends[p]
        for p in layout[segment_id].predecessors
        if p in layout
    )


class SegmentStore:
    def __init__(self, root: Path, config: StoreConfig | None = None):
        self.root = Path(root)
        self.config = config or StoreConfig()

    def sync(self) -> None:
        """Make this host's writes to the store durable (`sync_store`); a store not made yet
        holds nothing to sync."""
        if self.root.exists():
            sync_store(self.root)

    def stream(self, key: str, layout: Layout | int) -> StreamLog:
        """The stream in directory `key`, with its segments (`layout`, or a count of segments of
        a stream that never scaled)."""
        if not key or "/" in key or key in (".", ".."):
            raise ValueError(f"bad stream directory key {key!r}")
        return StreamLog(self.root / key, Layout.fixed(layout) if isinstance(layout, int) else layout, self.config)


def truncate_many(
    targets: list[tuple[StreamLog, StreamCut, dict[str, int] | None]], *, durable: bool = False
) -> list[dict[str, TruncateResult]]:
    """Truncate many streams with at most one sync instead of two fsyncs per segment: move every
    head (not yet durable); if any chunk is now wholly behind a head, sync once and delete those
    chunks. No chunk is ever deleted behind a head that is not durable, so a crash can only take
    back head moves (the data comes back into view; nothing is lost). The caller syncs at the
    end of its work (`SegmentStore.sync`) to make the remaining head moves durable. Each target
    may carry the cumulative size at each offset of its cut, as read from the store before.

    The sync is this host's, so chunks are deleted only behind the heads this call wrote (or
    found and made durable itself): a head that a process on another host moved further since,
    and has not synced yet, never decides a deletion here.

    With `durable` (a truncation of its own, not one of a cycle's batch), each stream's head moves
    are made durable as they are written, nothing is left for the caller to sync, and every chunk
    wholly behind a head is deleted whether or not this call moved that head: a truncation that
    a crash interrupted between the two halves is finished."""
    moved = []  # in this thread: head writes in parallel threads measured slower (journal)
    for log, cut, sizes in targets:
        moved.append(log.move_heads(cut, sizes or {}, durable=durable))
    # A chunk can newly fall behind a head only if the old head lay before the active chunk;
    # otherwise every earlier chunk was behind the old head already, and deleted then.
    deletable = {
        (i, s)
        for i, ((log, _, _), heads) in enumerate(zip(targets, moved))
        for s, (before, after, active_base) in heads.items()
        if (durable or (before != after and before.offset < active_base)) and log.segment(s).has_chunks_before_head()
    }
    if deletable and not durable:
        for root in {targets[i][0].root.parent for i, _ in deletable}:
            sync_store(root)
    results = []
    for i, ((log, _, _), heads) in enumerate(zip(targets, moved)):
        out = {}
        for s, (before, after, _) in heads.items():
            chunks, freed = 0, 0
            if (i, s) in deletable:
                chunks, freed = log.segment(s).delete_chunks_before_head(upto=after.offset)
            out[s] = TruncateResult(before, after, chunks, freed)
        results.append(out)
    return results


def ends_many(logs: list[StreamLog]) -> list[dict[str, tuple[Head, Tail]]]:
    """`StreamLog.ends` of many streams, the reads overlapped in threads."""
    return list(_IO_POOL.map(StreamLog.ends, logs))
