"""A fleet of streams for comparing retention engines: varied policies, two segments, events and
two subscribers at varied cuts; what a cycle leaves of it (`state`) and says of it
(`outcome_rows`), without the scope's name, so two fleets in two scopes compare equal."""

from datetime import UTC, datetime

import factories

from groups.acknowledgement import set_acknowledgement_cut
from retention import set_store
from retention.models import TruncationRecord
from streams import logs
from streams.models import Segment

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
POLICIES = [
    {"limit_type": "size", "min": 90, "max": 180, "consumption_based": True},
    {"limit_type": "size", "min": 30, "max": 600, "consumption_based": True},
    {"limit_type": "time", "min": 0, "max": 3600, "consumption_based": True},
    {"limit_type": "size", "min": 60, "max": 240, "consumption_based": False},
]


def fleet(scope: str, count: int = 9, sized: bool = False) -> list:
    """`count` streams with varied policies, 2 segments, 11 events each and two subscribers at
    varied cuts: a truncation by several different rules, and some streams left alone. `sized`:
    every other stream's subscribers have their cuts' sizes recorded, as an acknowledgement
    records them (`set_acknowledgement_cut`); the others' must be read from the store."""
    streams = []
    for i in range(count):
        stream = factories.make_stream(f"s{i}", scope=scope, segment_count=2, policy=POLICIES[i % len(POLICIES)])
        for k in range(11):
            factories.publish(stream, 1, b"x" * 30, routing_key=f"k{k}".encode())
        tail = logs.stream_log(stream).tail_cut()
        for g, share in (("A", (i % 3) / 3), ("B", ((i + 1) % 4) / 4)):
            sub = factories.subscribe(stream, g, {s: int(o * share) for s, o in tail.items()})
            if sized and i % 2 == 0:
                sub.save(update_fields=set_acknowledgement_cut(sub, sub.acknowledgement_cut))
        streams.append(stream)
    return streams


def state(streams) -> list:
    """What a cycle leaves of each stream, without its scope's name: head, Segment rows,
    retention set, history."""
    out = []
    for s in streams:
        out.append(
            (
                s.name,
                logs.stream_log(s).head_cut(),
                sorted(Segment.objects.filter(stream=s).values_list("segment_id", "head_offset", "head_size")),
                [(e.size_bytes, e.cut) for e in set_store.entries(s)],
                [
                    (
                        r.rule,
                        r.before_cut,
                        r.after_cut,
                        r.after_size,
                        r.completed,
                        [x["name"][-1] for x in r.subscribers],
                    )
                    for r in TruncationRecord.objects.filter(stream=s).order_by("id")
                ],
            )
        )
    return out


def outcome_rows(outcomes) -> list:
    return [(o.stream.split("/")[1], o.rule, o.truncation.after_cut if o.truncation else None) for o in outcomes]
