"""Dead letters: events out of deliveries under `on_poison: dead_letter` go to `<stream>-dlq`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

from django.db import transaction

from domain.dead_letters import DeadLetter, read_dead_letter
from domain.errors import FieldError
from domain.events import EventIn
from domain.ttl import TTL_HEADER, expired, stream_ttl_ms
from groups.consuming.floors import Slot, records_at
from groups.models import ReaderGroup, Republished
from store.framing import Record
from store.redis_connection import as_text, get_redis
from streams import wait_stats
from streams.logs import stream_log
from streams.models import Stream
from streams.services import copied_large, do_create_stream, do_publish_copies


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
    between appends them again later (the claim expires): at least once, never lost. An event
    past its time to live (`domain.ttl`) is not appended: it counts as processed, expired. A dead
    letter does not keep the event's own time to live (its stream's `message_ttl_s` applies)."""
    seg = stream_log(slot.stream).segment(slot.segment)
    records = records_at(seg, offsets, {})
    reasons = slot.tracker.reasons(offsets)
    epochs = get_redis().hmget(slot.tracker.keys[3], offsets)
    head = seg.read_head().offset
    stream_ms = stream_ttl_ms(slot.stream.message_ttl_s)
    events, settled = [], []
    for offset, epoch in zip(offsets, epochs, strict=True):
        rec = records.get(offset)
        if rec is None:
            if offset < head:
                settled.append(offset)  # truncated away: nothing left to dead-letter
            continue  # not read this time: the claim stays and expires, it is tried again
        if expired(rec.published_ms, rec.deliver_at_ms, rec.ttl_ms, stream_ms, now_ms):
            settled.append(offset)
            wait_stats.counts.add(wait_stats.EXPIRED)
            continue
        headers = {k: v for k, v in (rec.headers or {}).items() if k != TTL_HEADER}
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
        payload = rec.payload
        if rec.large_size is not None:  # copied as it is read, never whole in memory
            copied = copied_large(slot.stream, slot.segment, offset)
            if copied is None:
                settled.append(offset)  # truncated away meanwhile: nothing left to dead-letter
                continue
            payload = cast(bytes, copied)  # (an event's payload, as `EventIn` says)
        events.append(EventIn(payload, rec.routing_key, rec.key, headers))
        settled.append(offset)
    if events:
        try:
            do_publish_copies(_dead_letter_stream(slot.stream), events)
        except FieldError as refused:
            if refused.code not in ("stream_full", "insufficient_storage"):  # full, or its disk: not now
                raise
            return None  # the claims stay, expire, and the events are dead-lettered later
    return slot.tracker.dead_lettered(settled)


# -- republishing ----------------------------------------------------------------------------

REPUBLISH_BATCH = 1000  # dead letters read and republished together, one transaction each


@dataclass(frozen=True)
class RepublishOutcome:
    republished: int
    skipped: int  # republished before, not a dead letter, or its stream is gone


def is_dead_letter_stream(stream: Stream) -> bool:
    return stream.name.endswith("-dlq")


def republish(dead_letters: Stream, positions: list[tuple[str, int]] | None, user=None) -> RepublishOutcome:
    """Append dead letters again to the streams they came from: those at `positions` ((segment,
    offset) each), or all the stream holds (None). Each once: one already republished is skipped,
    and so is an event that is no dead letter, or whose stream was deleted. An event goes back as
    it came (payload, routing key, key, its own headers), without its `cbr-` headers.

    At least once, never lost: the append and the record of it are one transaction, which a
    republish of the same dead-letter stream waits for; a process that dies after the append and
    before the commit leaves no record, and the next republish appends the event again."""
    if not is_dead_letter_stream(dead_letters):
        raise FieldError("stream", f"{dead_letters.full_name} is not a dead-letter stream (<name>-dlq)")
    log = stream_log(dead_letters)
    republished = skipped = 0
    for batch in _batches(log, positions):
        done, passed = _republish_batch(dead_letters, batch, user)
        republished, skipped = republished + done, skipped + passed
    return RepublishOutcome(republished, skipped)


def _batches(log, positions: list[tuple[str, int]] | None):
    """The dead letters to republish, REPUBLISH_BATCH at a time, as (segment, record)."""
    if positions is None:
        cut: dict[str, int] = {}
        while True:
            records, cut = log.read(cut, REPUBLISH_BATCH)
            if not records:
                return
            yield [(r.segment, r.record) for r in records]
    wanted: dict[str, list[int]] = {}
    for n, (segment, offset) in enumerate(positions):
        if segment not in log.segment_ids:
            raise FieldError(f"events[{n}].segment", f"no segment {segment!r}")
        wanted.setdefault(segment, []).append(offset)
    found: list[tuple[str, Record]] = []
    for segment, offsets in wanted.items():
        records = records_at(log.segment(segment), offsets, {})
        found += [(segment, records[o]) for o in offsets if o in records]
    missing = [(n, s, o) for n, (s, o) in enumerate(positions) if not any(s == fs and o == r.offset for fs, r in found)]
    if missing:
        n, segment, offset = missing[0]
        raise FieldError(f"events[{n}]", f"no event at {segment}:{offset} (truncated, or past the tail)")
    for at in range(0, len(found), REPUBLISH_BATCH):
        yield found[at : at + REPUBLISH_BATCH]


def _republish_batch(dead_letters: Stream, batch: list[tuple[str, Record]], user) -> tuple[int, int]:
    sources: dict[str, Stream | None] = {}
    with transaction.atomic():
        Stream.objects.select_for_update().filter(pk=dead_letters.pk).exists()  # (SELECT … FOR UPDATE): one at a time
        seen = set(
            Republished.objects.filter(dead_letters=dead_letters, offset__in=[r.offset for _, r in batch]).values_list(
                "segment", "offset"
            )
        )
        by_source: dict[str, list[tuple[str, Record, DeadLetter, EventIn]]] = {}
        skipped = 0
        for segment, rec in batch:
            dead, _ = read_dead_letter(rec.headers)
            if (segment, rec.offset) in seen or dead is None:
                skipped += 1
                continue
            if dead.stream not in sources:
                scope, _, name = dead.stream.partition("/")
                sources[dead.stream] = (
                    Stream.objects.filter(scope__name=scope, name=name).select_related("scope").first()
                )
            if sources[dead.stream] is None:
                skipped += 1
                continue
            own = {k: v for k, v in (rec.headers or {}).items() if not k.lower().startswith("cbr-")}
            copied = None if rec.large_size is None else copied_large(dead_letters, segment, rec.offset)
            if rec.large_size is not None and copied is None:  # truncated away meanwhile
                skipped += 1
                continue
            event = EventIn(
                rec.payload if copied is None else cast(bytes, copied), rec.routing_key, rec.key, own or None
            )
            by_source.setdefault(dead.stream, []).append((segment, rec, dead, event))
        rows = []
        for name, items in by_source.items():
            source = sources[name]
            assert source is not None
            positions = do_publish_copies(source, [event for *_, event in items])
            rows += [
                Republished(
                    dead_letters=dead_letters,
                    segment=segment,
                    offset=rec.offset,
                    source=source,
                    source_segment=at.segment,
                    source_offset=at.offset,
                    republished_by=user,
                )
                for (segment, rec, _, _), at in zip(items, positions, strict=True)
            ]
        Republished.objects.bulk_create(rows)
    return len(rows), skipped
