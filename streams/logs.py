"""A stream's log in the segment store, and what is read from it: its state, its Segment rows.
Everything above reaches the store through `stream_log(stream)`."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from domain.epoch_cuts import epoch_cut
from domain.events import PublishLimits
from domain.segment_layout import Layout
from store.segment import SegmentInfo, StoreConfig
from store.store import SegmentStore, StreamLog, StreamRecord
from streams.models import Segment, Stream


@functools.cache
def _store(
    data_dir: str, chunk_bytes: int, chunk_seconds: int, fsync: str, tier_url: str, tier_cache_bytes: int
) -> SegmentStore:
    config = StoreConfig(
        chunk_bytes=chunk_bytes,
        chunk_seconds=chunk_seconds,
        fsync=fsync,
        tier_url=tier_url,
        tier_cache_dir=str(Path(data_dir) / "tier-cache"),
        tier_cache_bytes=tier_cache_bytes,
    )
    return SegmentStore(Path(data_dir) / "streams", config)


def segment_store() -> SegmentStore:
    return _store(
        str(settings.CBR_DATA_DIR),
        settings.CBR_CHUNK_BYTES,
        settings.CBR_CHUNK_SECONDS,
        settings.CBR_FSYNC,
        settings.CBR_TIER_URL,
        settings.CBR_TIER_CACHE_BYTES,
    )


@functools.lru_cache(maxsize=4096)
def _stream_log(store: SegmentStore, key: str, layout: Layout) -> StreamLog:
    return store.stream(key, layout)


def stream_log(stream: Stream) -> StreamLog:
    """The stream's log (cached: a StreamLog holds only its paths and its layout; a cycle asks
    for 100k)."""
    return _stream_log(segment_store(), stream.store_key, stream.layout)


def publish_limits(stream: Stream) -> PublishLimits:
    return PublishLimits(
        max_event_bytes=settings.CBR_MAX_EVENT_BYTES,
        max_batch_events=settings.CBR_MAX_BATCH_EVENTS,
        max_delay_s=stream.max_delay_s,
        require_key=stream.is_compacted,
    )


@dataclass(frozen=True)
class StreamState:
    """A stream's live state, read from the store."""

    segments: dict[str, SegmentInfo]

    @property
    def head_cut(self) -> dict[str, int]:
        return {s: i.head for s, i in self.segments.items()}

    @property
    def tail_cut(self) -> dict[str, int]:
        return {s: i.tail for s, i in self.segments.items()}

    @property
    def size_bytes(self) -> int:
        return sum(i.tail_size - i.head_size for i in self.segments.values())

    @property
    def event_count(self) -> int:
        return sum(i.tail - i.head for i in self.segments.values())

    @property
    def physical_bytes(self) -> int:
        return sum(i.physical_bytes for i in self.segments.values())

    @property
    def published_bytes(self) -> int:
        return sum(i.tail_size for i in self.segments.values())

    def shown(self, layout: Layout, cut: dict[str, int]) -> dict[str, int]:
        """A cut of every segment (this state's head or tail cut, a read's next cut) as the API
        shows cuts: Pravega's form (`domain.epoch_cuts.epoch_cut`), the same on a stream that
        never scaled. A sealed segment's end is its tail."""
        if len(layout.active_ids) == len(layout.ids):
            return cut
        return epoch_cut(layout, cut, {s: self.segments[s].tail for s in layout.ids if layout.is_sealed(s)})


def stream_state(stream: Stream) -> StreamState:
    return StreamState(stream_log(stream).infos())


def read_events(stream: Stream, from_cut: dict[str, int], limit: int) -> tuple[list[StreamRecord], dict[str, int]]:
    return stream_log(stream).read(from_cut, limit)


def refresh_segments(stream: Stream, state: StreamState | None = None) -> StreamState:
    """Copy the store's per-segment heads, tails and sizes into the Segment rows (in batches,
    never per event: docs/storage.md). A retired segment has no row (`streams.scaling`): the
    store still reports it, at its end, but no row is made for it again."""
    state = state or stream_state(stream)
    now = timezone.now()
    rows = {row.segment_id: row for row in stream.segments.all()}
    held = set(stream.layout.held_ids)
    for seg_id, info in state.segments.items():
        if seg_id not in held:
            continue
        row = rows.get(seg_id) or Segment(stream=stream, segment_id=seg_id)
        row.head_offset, row.tail_offset = info.head, info.tail
        row.head_size, row.tail_size = info.head_size, info.tail_size
        row.chunk_count, row.physical_bytes = info.chunk_count, info.physical_bytes
        row.refreshed_at = now
        rows[seg_id] = row
    fields = [
        "head_offset",
        "tail_offset",
        "head_size",
        "tail_size",
        "chunk_count",
        "physical_bytes",
        "refreshed_at",
    ]
    Segment.objects.bulk_update([r for r in rows.values() if r.pk], fields)
    Segment.objects.bulk_create([r for r in rows.values() if not r.pk])
    return state


def seal_due_chunks(stream: Stream) -> int:
    return stream_log(stream).seal_due_chunks()


def seal_active_chunks(stream: Stream) -> list[tuple[str, int]]:
    """Seal every segment's active chunk now, whatever its size and age (operators, before a
    compaction; the API's `seal`): the (segment, chunk base) of each chunk sealed. An empty
    active chunk stays as it is (there is nothing to seal)."""
    log = stream_log(stream)
    far = int(time.time() * 1000) + 10 * 365 * 86_400_000
    sealed = []
    for seg_id in stream.segment_ids:
        path = log.segment(seg_id).roll_if_due(far)
        if path is not None:
            sealed.append((seg_id, int(path.name.split(".", 1)[0])))
    return sealed
