"""The delayed index's upkeep, run by beat (`delayed_maintenance`) and after a publish sealed a
bucket: recovery when Redis lost the index, sealing, loading what no process loaded, deleting
finished buckets, merging over `max_num_buckets`, and releasing what is due."""

from __future__ import annotations

import time

from ..models import DelayedBucket, DelayedIndex, Stream
from . import buckets, handing


def maintain(stream: Stream, now_ms: int | None = None) -> dict:
    """One round for one stream; skipped when another process holds the stream's lock."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    index = handing.index_of(stream)
    done = {"recovered": False, "sealed": 0, "deleted": 0, "merged": 0, "released": 0}
    with buckets.maintenance_lock(stream) as got:
        if not got:
            return done
        if not index.is_recovered():
            buckets.recover(stream, now_ms, index)
            done["recovered"] = True
        for gen in index.sealing():
            done["sealed"] += buckets.seal(stream, gen, index) is not None
        loaded = index.loaded()
        for row in DelayedBucket.objects.filter(stream=stream).exclude(pk__in=list(loaded)):
            buckets.load_next(stream, row.pk, index)  # registered, never loaded (a crash between)
        done["deleted"] = buckets.delete_finished(stream, index, now_ms)
        for _ in range(8):
            if buckets.merge_if_needed(stream, index) is None:
                break
            done["merged"] += 1
    done["released"] = handing.release_due(stream, now_ms)
    return done


def maintain_all(now_ms: int | None = None) -> int:
    """Every stream with a delayed index."""
    ids = DelayedIndex.objects.values_list("stream_id", flat=True)
    streams = Stream.objects.filter(pk__in=list(ids)).select_related("scope")
    for stream in streams:
        maintain(stream, now_ms)
    return len(streams)
