"""Auto-scaling (docs/design/stream-scaling.md, "Auto-scaling"): once a minute (beat, or
`manage.py autoscale`), each stream with a scaling policy samples its active segments' tails
(events and bytes ever appended: what the store counts anyway) into their `Segment` rows, works
out each segment's rates over the last 2, 5, 10 and 20 minutes from the samples, and makes the
scale `domain.autoscale.plan` decides, recorded with its rule and rates. The samples live in the
database, so a restart loses none of them: a stream cold for 20 minutes before a restart merges
on time after it."""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from datetime import UTC, datetime

from domain.autoscale import add_sample, plan, policy_of, rates_from
from domain.errors import FieldError
from streams.logs import stream_log
from streams.models import Scaling, Segment, Stream
from streams.scaling import do_scale


def autoscale(stream: Stream | None = None, now: float | None = None) -> list[Scaling]:
    """One evaluation of every stream with a scaling policy (or of `stream`): the scales made."""
    now = time.time() if now is None else now
    streams = (
        [stream]
        if stream is not None
        else list(Stream.objects.filter(scaling_policy__has_key="type").select_related("scope"))
    )
    made = []
    for s in streams:
        scaling = autoscale_stream(s, now)
        if scaling is not None:
            made.append(scaling)
    return made


def autoscale_stream(stream: Stream, now: float) -> Scaling | None:
    if not stream.scaling_policy:
        return None
    policy = policy_of(stream.scaling_policy)
    layout = stream.layout
    ends = stream_log(stream).ends()
    rows = {r.segment_id: r for r in Segment.objects.filter(stream=stream, segment_id__in=layout.active_ids)}
    column, per = (2, 1024.0) if policy.kind == "by_byte_rate" else (1, 1.0)
    rates = {}
    for sid in layout.active_ids:
        tail = ends[sid][1]
        row = rows.setdefault(sid, Segment(stream=stream, segment_id=sid))
        row.rate_samples = add_sample(row.rate_samples or [], [now, tail.next_offset, tail.cum_size])
        rates[sid] = rates_from([[s[0], s[column]] for s in row.rate_samples], per)
    Segment.objects.bulk_update([r for r in rows.values() if r.pk], ["rate_samples"])
    Segment.objects.bulk_create([r for r in rows.values() if not r.pk])
    made_at = {
        created["id"]: scaling.at.timestamp() for scaling in stream.scalings.all() for created in scaling.created
    }
    step = plan(policy, layout, rates, {sid: made_at.get(sid, -math.inf) for sid in layout.active_ids}, now)
    if step is None:
        return None
    try:
        return do_scale(
            stream,
            seal=step.seal,
            new_ranges=step.new_ranges,
            epoch=stream.epoch,
            trigger=Scaling.Trigger.AUTO,
            rule="; ".join(step.reasons),
            at=datetime.fromtimestamp(now, UTC),
            rates={
                sid: {f"{w}m": round(v, 3) for w, v in zip((2, 5, 10, 20), asdict(rates[sid]).values(), strict=True)}
                for sid in step.seal
            },
        )
    except FieldError as exc:
        if exc.code == "epoch_mismatch":  # an operator scaled it meanwhile: the next minute decides anew
            return None
        raise
