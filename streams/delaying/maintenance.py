"""The delayed index's upkeep, run by beat (`delayed_maintenance`) and after a publish sealed a
bucket: recovery when Redis lost the index, sealing, loading what no process loaded, deleting
finished buckets, merging over `max_num_buckets`, and releasing what is due (to the reader
groups, through the function their app registers: `release_due_with`)."""

from __future__ import annotations

import logging
import time
from typing import Protocol

from django.db.models import Count

from streams.delaying import buckets, indexing, stream_index
from streams.models import DelayedBucket, DelayedIndex, Stream

log = logging.getLogger(__name__)

SWEEP_S = 60  # finished buckets are looked for when something was released, or this often


class ReleaseDue(Protocol):
    def __call__(self, stream: Stream, now_ms: int, *, rounds: int) -> int:
        """Release what is due in the stream's index to its reader groups, in at most `rounds`
        rounds; how many indexes went out."""


def _release_to_nobody(stream: Stream, now_ms: int, *, rounds: int) -> int:
    """Before the reader groups' app registers its release: there is no group to release to."""
    return 0


_release_due: ReleaseDue = _release_to_nobody


def release_due_with(release: ReleaseDue) -> None:
    """The reader groups' app registers how what is due goes to a stream's groups
    (`groups.delayed_release.release_due`) when Django starts (groups.apps): the stream layer
    never imports it."""
    global _release_due
    _release_due = release


def maintain(stream: Stream, now_ms: int | None = None, bucket_count: int | None = None) -> dict:
    """One round for one stream; skipped when another process holds the stream's lock. Cheap
    when there is nothing to do (a few Redis calls): `bucket_count`, when the caller knows it,
    spares a query."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    index = stream_index.index_of(stream)
    done = {"recovered": False, "sealed": 0, "deleted": 0, "merged": 0, "released": 0, "failed": 0}
    with buckets.maintenance_lock(stream) as got:
        if not got:
            return done
        state = index.state()
        if "recovered" not in state:
            buckets.recover(stream, now_ms, index)
            done["recovered"] = True
        indexing.reindex_unfinished(stream, now_ms)  # publishes that died before indexing
        for gen in index.sealing():
            try:
                done["sealed"] += buckets.seal(stream, gen, index) is not None
            except OSError:  # recorded as a failed create; the generation waits for the next round
                log.exception("sealing chunk %s of %s's delayed index failed", gen, stream)
                done["failed"] += 1
                break
        loaded = index.loaded()
        if bucket_count is None or bucket_count != len(loaded) or done["sealed"] or done["recovered"]:
            for row in DelayedBucket.objects.filter(stream=stream).exclude(pk__in=list(loaded)):
                buckets.load_next(stream, row.pk, index)  # registered, never loaded (a crash between)
        released, swept = state.get("released", "0"), state.get("swept", "")
        last_sweep = float(state.get("swept_at", 0))
        if released != swept or now_ms - last_sweep > SWEEP_S * 1000 or done["recovered"]:
            try:
                done["deleted"] = buckets.delete_finished(stream, index, now_ms)
                buckets.delete_orphans(stream)
            except OSError:  # recorded as a failed delete; swept again next round
                log.exception("deleting %s's finished delayed buckets failed", stream)
                done["failed"] += 1
            else:
                index.redis.hset(index.keys[0], mapping={"swept": released, "swept_at": now_ms})
        limit = stream_index.config_of(stream).max_num_buckets
        if limit is not None and (bucket_count is None or bucket_count + done["sealed"] > limit):
            for _ in range(8):
                if buckets.merge_if_needed(stream, index) is None:
                    break
                done["merged"] += 1
    done["released"] = _release_due(stream, now_ms, rounds=100_000)
    return done


def maintain_all(now_ms: int | None = None) -> int:
    """Every stream with a delayed index."""
    ids = DelayedIndex.objects.values_list("stream_id", flat=True)
    streams = Stream.objects.filter(pk__in=list(ids)).select_related("scope")
    counts = dict(DelayedBucket.objects.values("stream_id").annotate(n=Count("id")).values_list("stream_id", "n"))
    for stream in streams:
        maintain(stream, now_ms, counts.get(stream.pk, 0))
    return len(streams)
