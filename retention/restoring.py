"""What the database knows of a stream's segments when a host lost its data directory, gathered
for `streams.tiering.restore` (`manage.py restore_from_tier`): each segment's head as the last
truncation left it (or its row, if that is further on), and the highest offset anyone was told
of: the segment's row as last refreshed, and every reader group's hand-outs and floor on it. The
restore puts appends at or past that, so no offset is ever given to two different events."""

from __future__ import annotations

from django.db.models import Max

from groups.models import ReadPosition
from retention.models import TruncationRecord
from streams.models import Segment, Stream
from streams.tiering import Known


def known_of(stream: Stream) -> dict[str, Known]:
    heads: dict[str, int] = {}
    last = TruncationRecord.objects.filter(stream=stream).order_by("-created_at", "-pk").first()
    if last is not None:
        heads.update({seg: int(offset) for seg, offset in (last.after_cut or {}).items()})
    seen = {
        row["segment_id"]: max(row["handed"] or 0, row["floor"] or 0)
        for row in ReadPosition.objects.filter(subscription__stream=stream)
        .values("segment_id")
        .annotate(handed=Max("handed"), floor=Max("floor"))
    }
    out = {}
    for row in Segment.objects.filter(stream=stream):
        sid = row.segment_id
        head = max(row.head_offset, heads.get(sid, 0))
        tail = max(row.tail_offset, seen.get(sid, 0), head)
        out[sid] = Known(head=head, head_size=row.head_size, tail=tail, tail_size=row.tail_size)
    for sid in set(seen) | set(heads):
        if sid not in out:
            head = heads.get(sid, 0)
            out[sid] = Known(head=head, tail=max(head, seen.get(sid, 0)))
    return out
