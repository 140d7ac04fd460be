"""Scaling a stream (docs/design/stream-scaling.md): sealing active segments and making the
successors that take their keys, as one step that makes the stream's next epoch.

The database is the truth of the layout: a scale commits the new epoch (the stream's segments,
its `Scaling` record, the new segments' rows) in one transaction, and only then seals the old
segments in the store. Whatever stops in between leaves the new epoch whole: publishes already
route by it, and a reader that needs a sealed segment's end seals it itself
(`StreamLog.sealed_ends`). A writer that read the layout before the scale and appends after the
seal is refused by the segment (`SegmentSealed`) and routes its events again (`streams.services`).
Nothing is moved or copied: the sealed segments keep their events until retention passes them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

import orjson
from django.db import transaction
from django.utils import timezone

from domain.errors import FieldError
from domain.segment_layout import check_scale_shape
from store.ends import Head
from streams.db import delete_pairs, update_rows
from streams.logs import stream_log
from streams.models import Scaling, Segment, Stream
from streams.notices import send_notice
from streams.signals import segments_retired, stream_scaled
from streams.waking import stream_channel


def epoch_mismatch(current: int) -> FieldError:
    return FieldError(
        "epoch",
        f"the stream has moved on to epoch {current} since: read its segments again",
        "epoch_mismatch",
        {"epoch": current},
    )


def do_scale(
    stream: Stream,
    *,
    seal: Sequence[str],
    new_ranges: Sequence[Sequence[float]],
    epoch: int | None = None,
    trigger: str = Scaling.Trigger.MANUAL,
    rule: str = "",
    rates: dict | None = None,
    by: str = "",
    at: datetime | None = None,
) -> Scaling:
    """Seal the active segments `seal` and make successors over `new_ranges`: the next epoch.
    `epoch`, when given, is the epoch the caller last saw (409 `epoch_mismatch` if the stream
    has moved on). Refusals name `seal` or `new_ranges` and change nothing."""
    check_scale_shape(seal, new_ranges)
    with transaction.atomic():
        row = Stream.objects.select_for_update().select_related("scope").get(pk=stream.pk)
        if epoch is not None and epoch != row.epoch:
            raise epoch_mismatch(row.epoch)
        layout = row.layout
        count = len(new_ranges) if isinstance(new_ranges, list | tuple) else 0
        scaled = layout.scale(seal, new_ranges, layout.new_ids(count))
        row.scaled_segments = scaled.layout.rows()
        row.epoch = scaled.layout.epoch
        row.segment_count = len(scaled.layout.active_ids)
        row.save(update_fields=["scaled_segments", "epoch", "segment_count", "updated_at"])
        Segment.objects.bulk_create(Segment(stream=row, segment_id=s.id) for s in scaled.created)
        scaling = Scaling.objects.create(
            stream=row,
            epoch=row.epoch,
            sealed=list(seal),
            created=[{"id": s.id, "key_range": [s.lo, s.hi]} for s in scaled.created],
            trigger=trigger,
            rule=rule,
            rates=rates or {},
            by=by,
            at=at or timezone.now(),
        )
        stream_scaled.send(sender=Stream, stream=row)
        log = stream_log(row)
        for s in scaled.created:  # before the commit: a disk too full for them changes nothing
            log.segment(s.id).create()
    log.seal(list(seal))
    stream.segment_count, stream.epoch, stream.scaled_segments = row.segment_count, row.epoch, row.scaled_segments
    # waiting readers look again: a successor may be theirs now
    send_notice([stream_channel(row.storage_key)])
    return scaling


RETIRED_FILES_KEPT_S = 600  # a retired segment's last files stay this long (`StreamLog.retire`)


def retire_passed_segments(stream: Stream, now: float | None = None) -> list[str]:
    """`retire_passed_many` of one stream: the segments retired now."""
    return retire_passed_many([stream], now).get(stream.pk, [])


def retire_passed_many(
    streams: list[Stream], now: float | None = None, heads: dict[int, dict[str, Head]] | None = None
) -> dict[int, list[str]]:
    """After truncations: the sealed segments whose every event now lies before the head retire
    (`Layout.retire`): the layout keeps each at its end, so cuts and sizes stay whole, while its
    rows and the groups' state on it go (`segments_retired`); the last of its files (the seal,
    the head, an empty chunk) go `RETIRED_FILES_KEPT_S` later, by a later call. Many streams at
    once (a cycle's batch): a few statements whatever their number. `heads`: the heads the
    caller's truncations just wrote, by stream id and segment (read from the store where not
    given). Returns the segments retired now, by stream id. A stream that never scaled costs
    nothing."""
    now = time.time() if now is None else now
    heads = heads or {}
    found: dict[int, dict[str, tuple[int, int, int]]] = {}
    for stream in streams:
        layout = stream.layout
        if len(layout.held_ids) == len(layout.active_ids) == len(layout.ids):
            continue  # never scaled
        log = stream_log(stream)
        stale = [
            s.id
            for s in layout.segments.values()
            if s.retired and now - s.retired[2] >= RETIRED_FILES_KEPT_S and (log.root / s.id).exists()
        ]
        if stale:
            log.retire(stale)
        ends = {}
        written = heads.get(stream.pk, {})
        for sid, end in log.sealed_ends().items():
            if layout[sid].retired is None:
                head = written.get(sid) or log.segment(sid).read_head()
                if head.offset >= end:
                    ends[sid] = (end, head.cum_size, int(now))
        if ends:
            found[stream.pk] = ends
    if not found:
        return {}
    retired: dict[int, list[str]] = {}
    with transaction.atomic():
        rows = list(Stream.objects.select_for_update().filter(pk__in=list(found)).order_by("pk"))
        for row in rows:
            current = row.layout
            ends = {sid: end for sid, end in found[row.pk].items() if sid in current.held_ids}
            if ends:
                row.scaled_segments = current.retire(ends).rows()
                retired[row.pk] = list(ends)
        changed = [row for row in rows if row.pk in retired]
        update_rows(
            Stream, ["scaled_segments"], [(row.pk, orjson.dumps(row.scaled_segments).decode()) for row in changed]
        )
        delete_pairs(Segment, "stream", "segment_id", [(pk, sid) for pk, sids in retired.items() for sid in sids])
        if retired:
            segments_retired.send(sender=Stream, retired=retired)
    by_pk = {row.pk: row for row in changed}
    for stream in streams:
        if stream.pk in by_pk:
            stream.scaled_segments = by_pk[stream.pk].scaled_segments
    return retired
