"""The only place that changes streams: `check_*` validates against the current state, `do_*`
changes it (the database rows and the segment store together). Views, tasks and commands call
these; they never touch the store or write rows themselves."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from retention.models import RetentionPolicy
from domain.policy_spec import PolicySpec

from domain.errors import FieldError, insufficient_storage, no_space_for_stream, stream_full
from domain.events import PublishLimits
from streams.models import Scope, Segment, Stream, Subscription
from domain.events import EventIn
from store.segment import NO_SPACE_ERRNOS, SegmentInfo, StorageFull, StoreConfig
from store.store import Position, SegmentStore, StreamLog, StreamRecord

logger = logging.getLogger(__name__)


@functools.cache
def _store(data_dir: str, chunk_bytes: int, chunk_seconds: int, fsync: str) -> SegmentStore:
    config = StoreConfig(chunk_bytes=chunk_bytes, chunk_seconds=chunk_seconds, fsync=fsync)
    return SegmentStore(Path(data_dir) / "streams", config)


def segment_store() -> SegmentStore:
    return _store(
        str(settings.CBR_DATA_DIR), settings.CBR_CHUNK_BYTES, settings.CBR_CHUNK_SECONDS,
        settings.CBR_FSYNC,
    )


@functools.lru_cache(maxsize=4096)
def _stream_log(store: SegmentStore, key: str, segment_count: int) -> StreamLog:
    return store.stream(key, segment_count)


def stream_log(stream: Stream) -> StreamLog:
    """The stream's log (cached: a StreamLog holds only its paths; a cycle asks for 100k)."""
    return _stream_log(segment_store(), stream.store_key, stream.segment_count)


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


def stream_state(stream: Stream) -> StreamState:
    return StreamState(stream_log(stream).infos())


# -- streams -------------------------------------------------------------------------------


def do_create_stream(
    *,
    scope: str,
    name: str,
    segment_count: int = 1,
    cleanup_policy: str = "delete",
    on_max_limit: str = "truncate",
    max_delay_s: int | None = None,
    delayed_index: dict | None = None,
    compaction: dict | None = None,
    description: str = "",
    policy: PolicySpec | None = None,
    user=None,
) -> Stream:
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
                delayed_index=delayed_index or {},
                **(compaction or {}),
                description=description,
            )
            Segment.objects.bulk_create(
                Segment(stream=stream, segment_id=s) for s in stream.segment_ids
            )
            if policy is not None:
                _save_policy(stream, policy, user)
            _make_segments(stream)
    except IntegrityError:
        raise FieldError("name", f"stream {scope}/{name} exists", 409, "duplicate") from None
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


def do_update_stream(stream: Stream, changes: dict) -> Stream:
    for field, value in changes.items():
        setattr(stream, field, value)
    stream.save(update_fields=[*changes, "updated_at"])
    return stream


def do_delete_stream(stream: Stream) -> None:
    """The stream goes with its files and every piece of its Redis state: its delayed index and
    its reader groups' acknowledgement state on it. Each group that read it records the removal
    (`reader_groups.note_stream_deleted`)."""
    from streams.consuming import forget_trackers  # noqa: PLC0415  (they import this module)
    from streams.delaying.buckets import forget_index  # noqa: PLC0415
    from streams.reader_groups import note_stream_deleted  # noqa: PLC0415

    log = stream_log(stream)
    forget = forget_index(stream)
    with transaction.atomic():
        trackers = note_stream_deleted(stream, timezone.now())
        stream.delete()
        transaction.on_commit(log.delete)
        transaction.on_commit(forget)
        transaction.on_commit(lambda: forget_trackers(trackers))


def do_set_policy(stream: Stream, policy: PolicySpec, user=None) -> RetentionPolicy:
    with transaction.atomic():
        return _save_policy(stream, policy, user)


def _save_policy(stream: Stream, policy: PolicySpec, user) -> RetentionPolicy:
    row, _ = RetentionPolicy.objects.update_or_create(
        stream=stream,
        defaults=dict(
            limit_type=policy.limit_type,
            min_value=policy.min,
            max_value=policy.max,
            consumption_based=policy.consumption_based,
            subscriber_timeout_s=policy.subscriber_timeout_s,
            fallback_after_s=policy.fallback_after_s,
            updated_by=user if user is not None and user.is_authenticated else None,
        ),
    )
    return row


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
        return _publish(stream, events)
    except StorageFull as full:
        raise insufficient_storage() from full


def _publish(stream: Stream, events: list[EventIn]) -> list[Position]:
    if not any(ev.deliver_at_ms is not None for ev in events):
        return stream_log(stream).append(events)
    from streams.delaying.handing import publish_hook  # noqa: PLC0415  (it imports this module)

    hook = publish_hook(stream)
    hook.begin()
    positions = stream_log(stream).append(events, on_commit=hook)
    hook.done()
    if hook.not_live:
        from streams.delaying.handing import ensure_live, index_of  # noqa: PLC0415

        ensure_live(stream, index_of(stream))
    if hook.sealed:  # the mutable bucket was sealed: snapshot it now, not at the next beat
        from streams.tasks import maintain_delayed_index  # noqa: PLC0415

        try:
            maintain_delayed_index.delay(stream.pk)
        except Exception:  # the broker is down: beat's next round seals it
            logger.warning("could not queue the sealing of %s's delayed bucket", stream, exc_info=True)
    return positions


def set_acknowledgement_cut(sub: Subscription, cut: dict[str, int], at=None) -> list[str]:
    """The one writer of a subscription's acknowledgement cut, whatever decided it (a published
    cut, a checkpoint, a group becoming a subscriber at its floors): the cut, each segment's
    cumulative size at it (what the retention cycle reads instead of the store) and, with `at`,
    when. Sets them on `sub`; returns the fields for the caller to save."""
    log = stream_log(sub.stream)
    sub.acknowledgement_cut = cut
    sub.acknowledgement_sizes = {s: log.segment(s).size_till(o) for s, o in cut.items()}
    fields = ["acknowledgement_cut", "acknowledgement_sizes"]
    if at is not None:
        sub.acknowledged_at = at
        fields.append("acknowledged_at")
    return fields


def read_events(
    stream: Stream, from_cut: dict[str, int], limit: int
) -> tuple[list[StreamRecord], dict[str, int]]:
    return stream_log(stream).read(from_cut, limit)


# -- segment rows --------------------------------------------------------------------------


def refresh_segments(stream: Stream, state: StreamState | None = None) -> StreamState:
    """Copy the store's per-segment heads, tails and sizes into the Segment rows (in batches,
    never per event: DESIGN.md §5)."""
    state = state or stream_state(stream)
    now = timezone.now()
    rows = {row.segment_id: row for row in stream.segments.all()}
    for seg_id, info in state.segments.items():
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
