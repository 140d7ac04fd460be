"""Rebuilding a stream's segments after a host lost its data directory (`manage.py
restore_from_tier`): every copied chunk back as a stub read through the tier, the head where the
last truncation left it, appends past every offset anyone was told of, its files beside the log
back, and a report of what was lost. It must never touch a segment that still has chunks."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from domain.restoring import plan_restore
from store import framing
from store.ends import Head
from store.offload import tier_key
from store.tier.base import Tier, TierError
from store.tier.reading import TieredStub
from streams.logs import stream_log
from streams.models import Stream, TierObject
from streams.tiering.beside import restore_beside
from streams.tiering.tier import tier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Known:
    """What the database knows of a segment beyond its tiered chunks: its head (as the last
    truncation left it) and the highest offset and size anyone was told of (the segment's row as
    last refreshed, a reader group's hand-outs). Lower bounds: the restore starts no lower."""

    head: int = 0
    head_size: int = 0
    tail: int = 0
    tail_size: int = 0


@dataclass(frozen=True)
class SegmentRestored:
    segment: str
    chunks: int  # chunks brought back (read from the tier)
    head: int
    tail: int  # where appends go on
    lost: list[tuple[int, int]]  # [from, to) offsets whose events no tier holds
    skipped: str = ""  # why the segment was left as it was


@dataclass(frozen=True)
class Restored:
    segments: list[SegmentRestored]
    files: int  # files beside the log brought back (delayed-index snapshots, the compacted view)


def restore(stream: Stream, known: dict[str, Known]) -> Restored:
    """Rebuild the stream's segments whose directory was lost, from their chunks in the tier
    (`TierObject` rows) and what the database knows (`known`): every offloaded chunk back (as a
    stub read through the tier), the head where the last truncation left it, and appends going on
    at or past the highest offset anyone may have seen; and its files beside the log that are
    missing (`TierFile`: the delayed index's snapshots, the compacted view). What no tier holds is
    reported lost: the chunks that were never sealed or never copied. A segment that still has
    chunks is left."""
    target = tier()
    if target is None:
        raise TierError("no tier is configured (CBR_TIER_URL)")
    log_ = stream_log(stream)
    rows: dict[str, list[TierObject]] = {}
    for row in TierObject.objects.filter(stream=stream).order_by("segment_id", "base"):
        rows.setdefault(row.segment_id, []).append(row)
    files = restore_beside(stream)
    out = []
    for segment_id in log_.held_ids:
        segment = log_.segment(segment_id)
        if segment.chunk_bases():
            out.append(SegmentRestored(segment_id, 0, 0, 0, [], "it has chunks on disk"))
            continue
        out.append(
            _restore_segment(target, stream, segment_id, rows.get(segment_id, []), known.get(segment_id, Known()))
        )
    return Restored(out, files)


def _restore_segment(
    target: Tier, stream: Stream, segment_id: str, rows: list[TierObject], known: Known
) -> SegmentRestored:
    log_ = stream_log(stream)
    segment = log_.segment(segment_id)
    chunks = [r for r in rows if r.kind == "chunk"]
    parquets = {r.base: r for r in rows if r.kind == "parquet"}
    plan = plan_restore([(r.base, r.end) for r in chunks], known.head, known.tail)
    stubs: list[tuple[int, TieredStub]] = []
    cum_end = 0
    for i, row in enumerate(chunks):
        key = tier_key(stream.storage_key, segment_id, row.base, "chunk")
        if i == len(chunks) - 1:  # the last one read whole: where its records end
            data = target.get(key, row.crc32c)
            header_base, cum = framing.decode_chunk_header(data)
            cum_end = framing.scan(data, framing.CHUNK_HEADER_SIZE, row.base, cum).cum_size
        else:
            header_base, cum = framing.decode_chunk_header(target.get(key, start=0, length=framing.CHUNK_HEADER_SIZE))
        if header_base != row.base:
            raise TierError(f"{key} holds the chunk of base {header_base}, not {row.base}")
        parquet = parquets.get(row.base)
        stubs.append(
            (
                row.base,
                TieredStub(
                    key=key,
                    size=row.size,
                    crc32c=row.crc32c,
                    cum_size=cum,
                    parquet_key=None
                    if parquet is None
                    else tier_key(stream.storage_key, segment_id, row.base, "parquet"),
                    parquet_size=None if parquet is None else parquet.size,
                    parquet_crc32c=None if parquet is None else parquet.crc32c,
                ),
            )
        )
    sealed = stream.layout.is_sealed(segment_id)
    if not stubs:
        size = max(known.head_size, known.tail_size)
        segment.restore_from_tier([], Head(plan.tail, size), plan.tail, size, sealed)
        return SegmentRestored(segment_id, 0, plan.tail, plan.tail, plan.lost)
    if plan.tail > chunks[-1].end:  # events past the last copy: their sizes as last known
        cum_end = max(cum_end, known.tail_size)
    segment.restore_from_tier(stubs, Head(plan.first, stubs[0][1].cum_size), plan.tail, cum_end, sealed)
    if plan.head > plan.first:
        segment.move_head(plan.head)
    return SegmentRestored(segment_id, len(stubs), plan.head, plan.tail, plan.lost)
