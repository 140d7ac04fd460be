"""Dead letters: events out of deliveries under `on_poison: dead_letter` go to `<stream>-dlq`."""

from __future__ import annotations

from typing import Protocol

from domain.errors import FieldError
from domain.events import EventIn
from groups.consuming.floors import Slot, records_at
from groups.models import ReaderGroup
from store.redis_connection import as_text, get_redis
from streams.logs import stream_log
from streams.models import Stream
from streams.services import do_create_stream, do_publish


def dead_letter_name(stream: Stream) -> str:
    return f"{stream.name[:124]}-dlq"


class CreateStream(Protocol):
    def __call__(self, *, scope: str, name: str, segment_count: int, description: str) -> Stream: ...


# How a dead-letter stream is made: by default a bare stream; the retention app puts in its own
# when Django starts (`create_dead_letter_streams_with`: the scope's defaults, else a documented
# retention policy), as this layer never imports it.
_create_stream: CreateStream = do_create_stream


def create_dead_letter_streams_with(create: CreateStream) -> None:
    global _create_stream
    _create_stream = create


def _dead_letter_stream(stream: Stream) -> Stream:
    name = dead_letter_name(stream)
    found = Stream.objects.filter(scope=stream.scope, name=name).select_related("scope").first()
    if found is not None:
        return found
    try:
        return _create_stream(
            scope=stream.scope.name, name=name, segment_count=1, description=f"dead letters of {stream.full_name}"
        )
    except FieldError:  # created by another process meanwhile
        return Stream.objects.select_related("scope").get(scope=stream.scope, name=name)


def dead_letter(group: ReaderGroup, slot: Slot, offsets: list[int], now_ms: int) -> int | None:
    """Append the events to `<stream>-dlq` (durably), then count them as processed. A crash in
    between appends them again later (the claim expires): at least once, never lost."""
    seg = stream_log(slot.stream).segment(slot.segment)
    records = records_at(seg, offsets, {})
    reasons = slot.tracker.reasons(offsets)
    epochs = get_redis().hmget(slot.tracker.keys[3], offsets)
    head = seg.read_head().offset
    events, settled = [], []
    for offset, epoch in zip(offsets, epochs, strict=True):
        rec = records.get(offset)
        if rec is None:
            if offset < head:
                settled.append(offset)  # truncated away: nothing left to dead-letter
            continue  # not read this time: the claim stays and expires, it is tried again
        headers = dict(rec.headers or {})
        headers.update(
            {
                "cbr-dlq-reason": reasons.get(offset, "max deliveries reached"),
                "cbr-dlq-stream": slot.stream.full_name,
                "cbr-dlq-segment": slot.segment,
                "cbr-dlq-offset": str(offset),
                "cbr-dlq-reader-group": str(group),
                "cbr-dlq-deliveries": as_text(epoch or b"1"),
                "cbr-dlq-at": str(now_ms),
            }
        )
        events.append(EventIn(rec.payload, rec.routing_key, rec.key, headers))
        settled.append(offset)
    if events:
        try:
            do_publish(_dead_letter_stream(slot.stream), events)
        except FieldError as refused:
            if refused.code not in ("stream_full", "insufficient_storage"):  # full, or its disk: not now
                raise
            return None  # the claims stay, expire, and the events are dead-lettered later
    return slot.tracker.dead_lettered(settled)
