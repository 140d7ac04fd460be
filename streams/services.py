"""Making, changing and publishing to streams: `do_*` changes the database rows and the segment
store together. Views, tasks and commands call these; they never touch the store or write rows
themselves. Deleting a stream is `streams.deletion` (it reaches every layer that refers to one);
a stream with its retention policy is made by `retention.services.do_create_stream`."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from domain import autoscale
from domain.errors import FieldError, insufficient_storage, no_space_for_stream, stream_full
from domain.events import EventIn
from store.large import SpooledPayload, spool_pieces
from store.segment import NO_SPACE_ERRNOS, StorageFull
from store.store import Position, SealedSegments
from streams.delaying.indexing import ensure_live, publish_hook
from streams.delaying.stream_index import index_of
from streams.logs import stream_log
from streams.models import Scope, Segment, Stream
from streams.notices import send_notice
from streams.signals import delayed_bucket_sealed
from streams.waking import stream_channel

# -- streams -------------------------------------------------------------------------------


def do_create_stream(
    *,
    scope: str,
    name: str,
    segment_count: int = 1,
    cleanup_policy: str = "delete",
    on_max_limit: str = "truncate",
    max_delay_s: int | None = None,
    message_ttl_s: int | None = None,
    delayed_index: dict | None = None,
    compaction: dict | None = None,
    description: str = "",
    inherited: list[str] | None = None,
    scaling_policy: dict | None = None,
    tags: dict | None = None,
    publish_rate: dict | None = None,
) -> Stream:
    """`inherited`: the settings the stream takes from its scope's defaults (`domain.scope_defaults`;
    `retention.services.do_create_stream` works them out)."""
    try:
        with transaction.atomic():
            scope_row, _ = Scope.objects.get_or_create(name=scope)
            stream = Stream.objects.create(
                scope=scope_row,
                name=name,
                segment_count=segment_count,
                cleanup_policy=cleanup_policy,
                on_max_limit=on_max_limit,
                max_delay_s=max_delay_s,
                message_ttl_s=message_ttl_s,
                delayed_index=delayed_index or {},
                **(compaction or {}),
                description=description,
                inherited=inherited or [],
                scaling_policy=scaling_policy or {},
                tags=tags or {},
                publish_rate=publish_rate or {},
            )
            Segment.objects.bulk_create(Segment(stream=stream, segment_id=s) for s in stream.segment_ids)
            _make_segments(stream)
    except IntegrityError:
        raise FieldError("name", f"stream {scope}/{name} exists", "duplicate") from None
    return stream


def _make_segments(stream: Stream) -> None:
    """The segment directories and their first chunks, made before the stream's rows commit: a
    disk too full for them leaves no stream behind (a row without segments answered the retry
    409 `duplicate`), and the same create succeeds once space is freed."""
    log = stream_log(stream)
    try:
        log.create()
    except OSError as exc:
        log.delete()
        if exc.errno in NO_SPACE_ERRNOS:
            raise no_space_for_stream() from exc
        raise


def check_scaling_policy(value: object) -> dict:
    """A `scaling_policy` as sent, checked by `domain.autoscale.check_scaling_policy` against this
    deployment's CBR_MAX_SEGMENTS, with its defaults; a refusal names the field inside it
    (`scaling_policy.target_rate`)."""
    return autoscale.check_scaling_policy(value, settings.CBR_MAX_SEGMENTS)


def do_set_scaling_policy(stream: Stream, value: object) -> Stream:
    """Replace how the stream scales by itself with `value` as sent (`PUT …/scaling-policy/`, the
    console's policy form): checked first (`check_scaling_policy`), so a refusal changes nothing.
    The next auto-scaling evaluation acts on it (a raised `min_segments` at once, whatever the
    rates)."""
    policy = check_scaling_policy(value)
    stream.scaling_policy = {} if policy.get("type") == "fixed" and policy.get("min_segments", 1) == 1 else policy
    stream.save(update_fields=["scaling_policy", "updated_at"])
    return stream


def do_update_stream(stream: Stream, changes: dict) -> Stream:
    """Change the stream's settings; one it set itself no longer follows its scope's default."""
    for field, value in changes.items():
        setattr(stream, field, value)
    fields = [*changes, "updated_at"]
    if set(changes) & set(stream.inherited):
        stream.inherited = [n for n in stream.inherited if n not in changes]
        fields.append("inherited")
    stream.save(update_fields=fields)
    return stream


# -- events --------------------------------------------------------------------------------


def do_publish(stream: Stream, events: list[EventIn]) -> list[Position]:
    """Append a validated batch; returns once it is durable (CBR_FSYNC). Delayed events go to
    the stream's delayed index as each segment's part commits (streams.delaying).

    A stream at its max under `on_max_limit: reject_publish` refuses every publish, whoever
    sends it (the API, dead letters, the demo): 507 `stream_full` (`stream.full_since`, set and
    cleared by the retention cycle).

    A full data disk refuses the publish (507 `insufficient_storage`): the segment that did not
    fit committed nothing of it. A batch spread over several segments is appended to them in
    parallel, so the parts for other segments may have been committed (as with any failed
    publish, the producer sends it again: at-least-once)."""
    if stream.full_since is not None:
        raise stream_full()
    try:
        positions = _publish(stream, events)
    except StorageFull as full:
        raise insufficient_storage() from full
    _wake_readers(stream, events)
    return positions


def do_publish_copies(stream: Stream, events: list[EventIn]) -> list[Position]:
    """`do_publish` of events copied from other streams (dead letters, republished ones), among
    which large events (`copied_large`): each large one appended alone, in its place, the others
    in runs; the spooled payloads closed once written. Returns every event's position."""
    positions: list[Position] = []
    run: list[EventIn] = []
    try:
        for event in events:
            if type(event.payload) is SpooledPayload:
                if run:
                    positions += do_publish(stream, run)
                    run = []
                positions += do_publish(stream, [event])
            else:
                run.append(event)
        if run:
            positions += do_publish(stream, run)
    finally:
        for event in events:
            if type(event.payload) is SpooledPayload:
                event.payload.close()
    return positions


def copied_large(stream: Stream, segment: str, offset: int) -> SpooledPayload | None:
    """The payload of the large event at (`segment`, `offset`) of `stream`, copied (checked
    against its CRC as it is read) to a spooled file, never whole in memory; None when the
    stream no longer holds it."""
    large = stream_log(stream).large_payload(segment, offset)
    if large is None:
        return None
    try:
        return spool_pieces(large.pieces(), Path(settings.CBR_DATA_DIR) / "spool")
    finally:
        large.close()


def _wake_readers(stream: Stream, events: list[EventIn]) -> None:
    """Reads waiting on the stream look again now; a delayed event wakes them when it is due
    (the earliest of the batch: a read woken then finds the next due time in the index). Sent
    before the publish is answered, Redis's reply not waited for (`streams.notices`)."""
    channel = [stream_channel(stream.storage_key)]
    delayed = [ev.deliver_at_ms for ev in events if ev.deliver_at_ms is not None]
    if len(delayed) < len(events):
        send_notice(channel)
    if delayed:
        send_notice(channel, min(delayed))


def _publish(stream: Stream, events: list[EventIn]) -> list[Position]:
    if not any(ev.deliver_at_ms is not None for ev in events):
        return _append(stream, events)
    hook = publish_hook(stream)
    hook.begin()
    positions = _append(stream, events, hook)
    hook.done()
    if hook.not_live:
        ensure_live(stream, index_of(stream))
    if hook.sealed:  # the mutable bucket was sealed: snapshot it now, not at the next beat
        delayed_bucket_sealed.send(sender=Stream, stream=stream)
    return positions


SCALES_IN_A_ROW = 5  # scales met by one publish before it gives up (each one is a new epoch)


def _append(stream: Stream, events: list[EventIn], hook=None) -> list[Position]:
    """Append by the stream's layout; the part that met segments sealed by a scale since the
    layout was read is routed again by the stream's current layout (read from the database: the
    scale committed its epoch before it sealed anything), until every event is written."""
    positions: list[Position | None] = [None] * len(events)
    todo = list(range(len(events)))
    for _ in range(SCALES_IN_A_ROW):
        try:
            written: list[Position | None] = list(stream_log(stream).append([events[i] for i in todo], on_commit=hook))
        except SealedSegments as sealed:
            written = sealed.positions
            fresh = Stream.objects.only("segment_count", "epoch", "scaled_segments").get(pk=stream.pk)
            stream.segment_count, stream.epoch, stream.scaled_segments = (
                fresh.segment_count,
                fresh.epoch,
                fresh.scaled_segments,
            )
        for i, position in zip(todo, written, strict=True):
            positions[i] = position
        todo = [i for i in todo if positions[i] is None]
        if not todo:
            return positions  # type: ignore[return-value]  # every event has its position
    raise RuntimeError(f"{stream.full_name}: {SCALES_IN_A_ROW} scales met by one publish")
