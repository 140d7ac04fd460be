"""Changes to retention state: truncation and its history. Check first, then do."""

from __future__ import annotations

from django.db import transaction

from streams.domain.errors import FieldError
from streams.models import Stream
from streams.services import refresh_segments, stream_log

from .models import TruncationRecord


def do_truncate(
    stream: Stream,
    cut: dict[str, int],
    *,
    rule: str,
    trigger: str,
    user=None,
    subscribers: list | None = None,
) -> TruncationRecord | None:
    """Move the stream's head to `cut` and delete the chunks wholly before it.

    A cut at or behind the head on every segment is a silent no-op (returns None); on a segment
    where the cut is behind the head, that segment's head stays where it is.
    """
    log = stream_log(stream)
    head = log.head_cut()
    tail = log.tail_cut()
    for seg, offset in cut.items():
        if offset > tail[seg]:
            raise FieldError(f"stream_cut.{seg}", f"offset {offset} is past the tail {tail[seg]}")
    target = {s: max(head[s], cut.get(s, head[s])) for s in stream.segment_ids}
    if target == head:
        return None
    results = log.truncate(target)
    with transaction.atomic():
        record = TruncationRecord.objects.create(
            stream=stream,
            before_cut=head,
            after_cut=target,
            before_size=sum(r.head_before.cum_size for r in results.values()),
            after_size=sum(r.head_after.cum_size for r in results.values()),
            rule=rule,
            subscribers=subscribers or [],
            trigger=trigger,
            triggered_by=user if user is not None and user.is_authenticated else None,
            chunks_deleted=sum(r.chunks_deleted for r in results.values()),
            bytes_deleted=sum(r.bytes_deleted for r in results.values()),
        )
        refresh_segments(stream)
    return record
