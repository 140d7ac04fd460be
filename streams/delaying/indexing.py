"""Delayed events in: a publish indexes its delayed events (under the segment's lock, so in offset
order), and a publish that died between its append and the index taking them is re-read by
maintenance. Releasing what is due to the reader groups is theirs (`groups.delayed_release`)."""

from __future__ import annotations

import os
import time

import orjson
from django.conf import settings

from domain.events import EventIn
from streams.delaying.index import DelayIndex
from streams.delaying.stream_index import config_of, index_of
from streams.logs import stream_log
from streams.models import DelayedIndex, Stream


class PublishHook:
    """What `StreamLog.append` calls for each segment's part of a batch once it is committed,
    under the segment's lock: its delayed events go to the index. An event due within
    `CBR_DELAY_CLOCK_SKEW_MS` is indexed as well (it is released at once, harmlessly), so a
    reader whose clock is a little behind the publisher's cannot pass it over unindexed."""

    def __init__(self, stream: Stream):
        self.stream = stream
        self.skew = settings.CBR_DELAY_CLOCK_SKEW_MS
        self.min_count = config_of(stream).min_index_count_per_bucket  # read here: the hook runs in threads
        self.index = index_of(stream)
        self.sealed: list[int] = []  # generations to seal once the publish is done
        self.not_live: list[bool] = []  # the index is not live: see `ensure_live`, after the append
        self.token = f"{os.getpid()}:{time.time_ns()}"

    def __call__(self, segment_id: str, first: int, events: list[EventIn], now_ms: int) -> None:
        entries = [
            (int(segment_id), first + i, ev.deliver_at_ms)
            for i, ev in enumerate(events)
            if ev.deliver_at_ms is not None and ev.deliver_at_ms > now_ms - self.skew
        ]
        if not entries:
            return
        _, _, _, gen, live = self.index.add(entries, now_ms, self.min_count)
        if gen:
            self.sealed.append(gen)
        if not live:
            self.not_live.append(True)

    def begin(self) -> None:
        """Before the append: note where every segment's tail is. A publisher killed between
        its append and the index taking it leaves this note behind; maintenance re-reads from
        there (`reindex_unfinished`)."""
        cut = stream_log(self.stream).tail_cut()
        self.index.redis.hset(
            self.index.prefix + ":publishing", self.token, orjson.dumps({"at": time.time(), "cut": cut})
        )

    def done(self) -> None:
        self.index.redis.hdel(self.index.prefix + ":publishing", self.token)


def publish_hook(stream: Stream) -> PublishHook:
    """The hook that indexes one publish's delayed events (`PublishHook`)."""
    return PublishHook(stream)


def ensure_live(stream: Stream, index: DelayIndex) -> bool:
    """A stream whose index never existed is live at once; one Redis lost waits for recovery
    (streams.delaying.buckets.recover, run by the maintenance task)."""
    row, created = DelayedIndex.objects.get_or_create(stream=stream)
    if created:
        index.mark_recovered()
        return True
    return index.is_recovered()


def reindex_unfinished(stream: Stream, now_ms: int) -> int:
    """Publishes that died between their append and the index taking their delayed events (their
    note older than `CBR_DELAYED_PUBLISH_STALE_S`): re-read the stream from the tails they noted
    and index what is delayed (repeats are harmless: the index and the groups drop them)."""
    index = index_of(stream)
    key = index.prefix + ":publishing"
    stale = time.time() - settings.CBR_DELAYED_PUBLISH_STALE_S
    notes = {t: orjson.loads(v) for t, v in index.redis.hgetall(key).items()}
    dead = {t: n for t, n in notes.items() if n["at"] < stale}
    if not dead:
        return 0
    start: dict[str, int] = {}
    for note in dead.values():
        for seg, offset in note["cut"].items():
            start[seg] = min(start.get(seg, offset), offset)
    config = config_of(stream)
    found = 0
    log_ = stream_log(stream)
    for seg, offset in start.items():
        segment = log_.segment(seg)
        end = segment.committed_tail().next_offset
        while offset < end:
            records = segment.read(offset, min(10_000, end - offset))
            if not records:
                break
            batch = [(int(seg), r.offset, r.deliver_at_ms) for r in records if r.deliver_at_ms is not None]
            if batch:
                index.add(batch, now_ms, config.min_index_count_per_bucket)
                found += len(batch)
            offset = records[-1].offset + 1
    index.redis.hdel(key, *dead)
    return found
