"""Deleting copies in the tier: what a truncation passed (`delete_passed`), what a deleted stream
held (`forget_stream`), and what no row names and nothing needs (`sweep`, hourly)."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.db import transaction

from store.offload import KINDS, tier_key
from store.tier.base import TierError
from streams import wait_stats
from streams.logs import stream_log
from streams.models import Stream, TierFile, TierObject
from streams.tiering.beside import BESIDE, beside_key
from streams.tiering.tier import publish_counts, tier

log = logging.getLogger(__name__)


def delete_passed(streams: list[Stream], heads: dict[int, dict[str, int]] | None = None) -> dict[int, tuple[int, int]]:
    """After truncations: the tier's copies of what now lies wholly before each segment's head
    (or in a segment retired whole) go, objects first (in batches: a thousand a request on S3),
    then their rows. Objects the tier refuses keep their rows, and a tier that does not answer
    keeps them all, so the next cycle tries again: a cycle never waits on a tier that is down
    once per object. `heads`: the heads a truncation just wrote, by stream id and segment (the
    others are read). The objects and bytes that went, by stream id."""
    target = tier()
    if target is None or not streams:
        return {}
    by_pk = {s.pk: s for s in streams}
    rows = list(TierObject.objects.filter(stream_id__in=list(by_pk)))
    if not rows:
        return {}
    known = heads or {}
    read: dict[int, dict[str, int]] = {}

    def head_of(row: TierObject) -> int | None:
        """The segment's head: as the caller just wrote it, else read (None: retired, passed whole)."""
        head = known.get(row.stream_id, {}).get(row.segment_id)
        if head is not None:
            return head
        if row.stream_id not in read:
            ends = stream_log(by_pk[row.stream_id]).ends()
            read[row.stream_id] = {sid: h.offset for sid, (h, _) in ends.items()}
        return read[row.stream_id].get(row.segment_id)

    passed: dict[str, TierObject] = {}
    for row in rows:
        head = head_of(row)
        if head is None or row.end <= head:
            passed[tier_key(by_pk[row.stream_id].storage_key, row.segment_id, row.base, row.kind)] = row
    try:
        refused = set(target.delete_many(list(passed)))  # a thousand objects a request on S3
    except TierError as e:  # a tier that does not answer: every row kept for the next cycle
        log.warning("tier deletions left for the next cycle (%d objects): %s", len(passed), e)
        wait_stats.counts.add("tier:error:delete")
        publish_counts()
        refused = set(passed)
    if refused:
        log.warning("the tier refused to delete %d objects, left for the next cycle", len(refused))
    gone = [row for key, row in passed.items() if key not in refused]
    TierObject.objects.filter(pk__in=[r.pk for r in gone]).delete()
    out: dict[int, tuple[int, int]] = {}
    for row in gone:
        count, size = out.get(row.stream_id, (0, 0))
        out[row.stream_id] = (count + 1, size + row.size)
    return out


def sweep() -> int:
    """Objects no row names that nothing needs (beat's `tier-sweep`, hourly): those of streams
    that no longer exist (a deletion the tier refused), and those of chunks retention has
    passed (an upload whose row never committed, then a truncation: the chunk is gone here and
    began before the head). An object of a chunk still here is left: the next offload writes
    the same bytes and records it. How many objects went; a tier that does not answer stops the
    sweep until the next one."""
    target = tier()
    if target is None:
        return 0
    streams = {s.storage_key: s for s in Stream.objects.all()}
    known = {
        tier_key(key, seg, base, kind)
        for key, seg, base, kind in TierObject.objects.values_list("stream__storage_key", "segment_id", "base", "kind")
    }
    known.update(beside_key(stream, path) for stream, path in _files_by_stream(streams))
    heads: dict[str, dict[str, int]] = {}
    gone = 0
    try:
        for key in target.list_keys():
            if key in known:
                continue
            stream = streams.get(key.split("/", 1)[0])
            if stream is not None and not _passed(stream, key, heads):
                continue
            target.delete(key)
            gone += 1
    except TierError as e:
        log.warning("tier sweep stopped, the next one goes on: %s", e)
        wait_stats.counts.add("tier:error:sweep")
    return gone


def _files_by_stream(streams: dict[str, Stream]) -> list[tuple[Stream, str]]:
    by_pk = {s.pk: s for s in streams.values()}
    return [(by_pk[pk], path) for pk, path in TierFile.objects.values_list("stream_id", "path") if pk in by_pk]


def _passed(stream: Stream, key: str, heads: dict[str, dict[str, int]]) -> bool:
    """Whether an object of `stream` that no row names holds only what retention has passed, or
    is a copy of a file beside the log that is gone here (a bucket merged, a generation replaced,
    and the deletion of its copy refused then)."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[1] in BESIDE:
        where = Path(settings.CBR_DATA_DIR) / parts[1] / stream.storage_key
        return where.is_dir() and not (where / "/".join(parts[2:])).exists()
    name = parts[-1].partition(".")
    if len(parts) != 3 or not name[0].isdigit() or name[2] not in KINDS:
        return False  # not a file the store names: not the sweep's to judge
    segment, base = parts[1], int(name[0])
    if segment not in stream.layout.held_ids:
        return segment in stream.layout.ids  # a retired segment's (an unknown one's: left alone)
    if stream.storage_key not in heads:
        heads[stream.storage_key] = {s: h.offset for s, (h, _) in stream_log(stream).ends().items()}
    log_ = stream_log(stream)
    # the chunk holding the head is never deleted here: a chunk gone that began before the head
    # lay wholly before it
    seg = log_.segment(segment)
    held = seg.chunk_path(base).exists() or seg.tiered_stub(base) is not None
    return base < heads[stream.storage_key][segment] and not held


def delete_prefix(prefix: str) -> int:
    """Delete every object under `prefix` (a compaction's staging: its executors' parts, taken or
    left by a run that died); how many. A tier that does not answer leaves them for the next
    run over the same stream."""
    target = tier()
    if target is None:
        return 0
    try:
        keys = list(target.list_keys(prefix))
        refused = target.delete_many(keys)
    except TierError as e:
        log.warning("tier deletion under %s, left for the next run: %s", prefix, e)
        wait_stats.counts.add("tier:error:delete")
        return 0
    return len(keys) - len(refused)


def forget_stream(stream: Stream) -> None:
    """Inside a stream's deletion: once it commits, every object under the stream's key goes (its
    rows go with the stream). Objects the tier refuses to delete then are left for a sweep."""
    target = tier()
    if target is None:
        return
    prefix = f"{stream.storage_key}/"

    def delete_all() -> None:
        try:
            for key in list(target.list_keys(prefix)):
                target.delete(key)
        except TierError as e:
            log.warning("tier deletion of stream %s's objects, left for a sweep: %s", stream.full_name, e)
            wait_stats.counts.add("tier:error:delete")

    transaction.on_commit(delete_all)
