"""A stream's events across its segments: routing, stream cuts, reads and truncation.

`SegmentStore(root, config).stream(key, segment_count)` gives a `StreamLog` whose segments are
directories `root/<key>/<segment id>/`. Segment ids are opaque strings ("0", "1", …) everywhere,
so that scaling by split/merge can name them differently later. Routing maps a routing key onto
the key space [0, 1) with a stable hash and gives each segment an equal range, as Pravega does;
the mapping never depends on the process (Python's own `hash` is salted per process).
No Django, no database: the caller passes a directory key (CBR uses the stream's database id).
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from .framing import EventIn, Record
from .parquet import write_parquet_copy
from .segment import Segment, SegmentInfo, StoreConfig, TruncateResult

StreamCut = dict[str, int]

_SEGMENTS: dict[Path, Segment] = {}


def open_segment(path: Path, config: StoreConfig) -> Segment:
    """The process's one `Segment` object for a directory (it caches descriptors)."""
    seg = _SEGMENTS.get(path)
    if seg is None or seg.config != config:
        seg = _SEGMENTS[path] = Segment(path, config)
    return seg


def key_space_position(routing_key: bytes) -> float:
    """Where a routing key falls in the key space [0, 1): stable across processes and hosts."""
    digest = hashlib.blake2b(routing_key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True, slots=True)
class Position:
    segment: str
    offset: int


@dataclass(frozen=True, slots=True)
class StreamRecord:
    segment: str
    record: Record


class StreamLog:
    def __init__(self, root: Path, segment_ids: list[str], config: StoreConfig):
        self.root = root
        self.segment_ids = segment_ids
        self.config = config

    def segment(self, segment_id: str) -> Segment:
        if segment_id not in self.segment_ids:
            raise KeyError(segment_id)
        return open_segment(self.root / segment_id, self.config)

    # -- writing ----------------------------------------------------------------------------

    def route(self, routing_key: bytes) -> str:
        n = len(self.segment_ids)
        return self.segment_ids[min(int(key_space_position(routing_key) * n), n - 1)]

    def append(self, events: list[EventIn], now_ms: int | None = None) -> list[Position]:
        """Append a validated batch; returns each event's position, in the order given.

        Events with a routing key go to the key's segment, in order; events without one are
        spread round-robin from a random segment (Pravega gives them a random key).
        """
        by_segment: dict[str, list[int]] = {}
        n = len(self.segment_ids)
        spread = random.randrange(n)
        for i, ev in enumerate(events):
            if ev.routing_key is None:
                seg_id = self.segment_ids[spread % n]
                spread += 1
            else:
                seg_id = self.route(ev.routing_key)
            by_segment.setdefault(seg_id, []).append(i)
        positions: list[Position | None] = [None] * len(events)
        for seg_id, idxs in by_segment.items():
            # The Parquet copy of a chunk this append sealed is made by `seal_due_chunks`
            # (a Celery beat task), never here: a publish must not wait for it.
            result = self.segment(seg_id).append([events[i] for i in idxs], now_ms)
            for k, i in enumerate(idxs):
                positions[i] = Position(seg_id, result.first_offset + k)
        return positions  # type: ignore[return-value]

    # -- cuts and sizes ---------------------------------------------------------------------

    def infos(self) -> dict[str, SegmentInfo]:
        return {s: self.segment(s).info() for s in self.segment_ids}

    def head_cut(self) -> StreamCut:
        return {s: self.segment(s).read_head().offset for s in self.segment_ids}

    def tail_cut(self) -> StreamCut:
        return {s: self.segment(s).committed_tail().next_offset for s in self.segment_ids}

    def size_till(self, cut: StreamCut) -> int:
        """Payload bytes from offset 0 of every segment up to `cut` (cumulative, never shrinks)."""
        return sum(self.segment(s).size_till(cut[s]) for s in self.segment_ids)

    # -- reading ----------------------------------------------------------------------------

    def read(self, from_cut: StreamCut, limit: int) -> tuple[list[StreamRecord], StreamCut]:
        """Up to `limit` events from `from_cut`, oldest published first across segments.

        Returns the events and the cut to continue from. A segment position before the head
        continues from the head.
        """
        per_segment: list[list[StreamRecord]] = []
        next_cut: StreamCut = {}
        for seg_id in self.segment_ids:
            seg = self.segment(seg_id)
            next_cut[seg_id] = max(from_cut.get(seg_id, 0), seg.read_head().offset)
            per_segment.append([StreamRecord(seg_id, r) for r in seg.read(next_cut[seg_id], limit)])
        # A merge takes each segment's records in their own order, so every segment contributes
        # a prefix of itself, whatever the clocks said.
        merged = heapq.merge(
            *per_segment, key=lambda r: (r.record.published_ms, r.segment, r.record.offset)
        )
        result = list(itertools.islice(merged, limit))
        for sr in result:
            next_cut[sr.segment] = sr.record.offset + 1
        return result, next_cut

    # -- truncation and maintenance ---------------------------------------------------------

    def truncate(self, cut: StreamCut) -> dict[str, TruncateResult]:
        return {s: self.segment(s).truncate(cut[s]) for s in self.segment_ids if s in cut}

    def seal_due_chunks(self, now_ms: int | None = None) -> int:
        """Roll aged active chunks and give every sealed chunk its Parquet copy."""
        made = 0
        for seg_id in self.segment_ids:
            seg = self.segment(seg_id)
            seg.roll_if_due(now_ms)
            for base in seg.sealed_chunks():
                if not seg.chunk_path(base, "parquet").exists():
                    write_parquet_copy(seg.chunk_path(base), seg_id)
                    made += 1
        return made

    def parquet_paths(self) -> list[Path]:
        return sorted(self.root.glob("*/*.parquet"))

    def delete(self) -> None:
        for seg_id in self.segment_ids:
            seg = _SEGMENTS.pop(self.root / seg_id, None)
            if seg is not None:
                seg.close()
        shutil.rmtree(self.root, ignore_errors=True)


class SegmentStore:
    def __init__(self, root: Path, config: StoreConfig | None = None):
        self.root = Path(root)
        self.config = config or StoreConfig()

    def stream(self, key: str, segment_count: int) -> StreamLog:
        if not key or "/" in key or key in (".", ".."):
            raise ValueError(f"bad stream directory key {key!r}")
        ids = [str(i) for i in range(segment_count)]
        return StreamLog(self.root / key, ids, self.config)
