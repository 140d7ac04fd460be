"""The invariants every fault test checks once the fault is over (docs/storage.md, docs/design/acks.md; issue 7):

- no acknowledged event lost: every event a publish was answered 201 for is readable, whole and
  in its place, unless a recorded truncation moved the head past it; every event a consumer
  had acknowledged stays processed (the persisted floors cover it, or it was processed again);
- no event before the head readable, through the store or the API;
- floors never regress: a persisted floor is never below one sampled earlier;
- no subscriber's unconsumed data deleted, except by a max-limit rule recorded in the stream's
  truncation history (a head past a subscriber's acknowledgement cut, or a `missed` count, must
  be explained by such a record);
- the truncation history agrees with the heads: every record complete, cuts never backwards,
  the newest record's cut is the head.

It reads the store and the database directly (what is on disk, not what a server says) and
fails with a message naming the stream, segment and offset.
"""

from __future__ import annotations

import json
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field

from groups.models import ReadPosition, Subscription
from retention.models import TruncationRecord
from streams import logs
from streams.models import Stream

MAX_LIMIT_RULES = ("limit_max", "max_bound")  # domain/retention.py: the max limit wins


def is_max_limit_rule(rule: str) -> bool:
    return any(part in rule for part in MAX_LIMIT_RULES)


@dataclass
class PublishLedger:
    """What producers were told: per stream, (segment, offset) → payload of every 201'd event,
    in the order the answers came."""

    events: dict[str, dict[tuple[str, int], bytes]] = field(default_factory=lambda: defaultdict(dict))

    def record(self, stream: str, positions: list[dict], payloads: list[bytes]) -> None:
        assert len(positions) == len(payloads)
        for pos, payload in zip(positions, payloads):
            key = (pos["segment"], pos["offset"])
            assert key not in self.events[stream], f"{stream} {key} was answered twice"
            self.events[stream][key] = payload


def floors() -> dict[tuple[str, str, str], int]:
    """Every persisted floor: (group, stream, segment) → floor."""
    rows = ReadPosition.objects.select_related("subscription__reader_group", "subscription__stream__scope")
    return {(r.subscription.reader_group.name, str(r.subscription.stream), r.segment_id): r.floor for r in rows}


def stream_named(name: str) -> Stream:
    scope, _, stream = name.partition("/")
    return Stream.objects.get(scope__name=scope, name=stream)


def check_floors_never_regress(samples: list[dict[tuple[str, str, str], int]]) -> None:
    """`samples` in the order they were taken (the last one now)."""
    for earlier, later in zip(samples, samples[1:]):
        for key, floor in earlier.items():
            assert later.get(key, floor) >= floor, f"floor {key} went back from {floor} to {later.get(key)}"


def check_log_whole(stream: Stream) -> dict[tuple[str, int], bytes]:
    """Reads every segment from offset 0: nothing before the head comes back, offsets run
    without a gap from the head to the committed tail, every record passes its CRC (a torn
    record makes the read raise). Returns what is readable."""
    log = logs.stream_log(stream)
    readable = {}
    for seg in stream.segment_ids:
        segment = log.segment(seg)
        head, tail = segment.read_head().offset, segment.committed_tail().next_offset
        got = segment.read(0, tail + 1, max_bytes=1 << 40)
        offsets = [r.offset for r in got]
        assert offsets == list(range(head, tail)), (
            f"{stream} segment {seg}: read from 0 gave {offsets[:3]}…{offsets[-3:]}, expected {head}..{tail - 1}"
        )
        readable.update({(seg, r.offset): r.payload for r in got})
    return readable


def check_published_intact(ledger: PublishLedger) -> None:
    """Every 201'd event is readable with its payload, unless a truncation moved the head past
    it (and then its stream's history records that truncation)."""
    for name, events in ledger.events.items():
        stream = stream_named(name)
        readable = check_log_whole(stream)
        heads = logs.stream_log(stream).head_cut()
        for (seg, offset), payload in events.items():
            if offset < heads[seg]:
                assert TruncationRecord.objects.filter(stream=stream).exists(), (
                    f"{name} {seg}:{offset} gone, no truncation"
                )
                continue
            assert readable.get((seg, offset)) == payload, f"{name} {seg}:{offset}: a 201'd event is lost or changed"


def check_nothing_before_head_over_api(client, name: str) -> None:
    """A plain read from offset 0 of every segment starts at the head."""
    stream = stream_named(name)
    heads = logs.stream_log(stream).head_cut()
    answer = client.request("GET", f"streams/{name}/events/?from=" + _cut_param({s: 0 for s in heads}) + "&limit=1000")
    for event in answer["events"]:
        assert event["offset"] >= heads[event["segment"]], (
            f"{name}: {event['segment']}:{event['offset']} before the head"
        )


def _cut_param(cut: dict[str, int]) -> str:
    return urllib.parse.quote(json.dumps(cut))


def acknowledgement_cuts() -> dict[tuple[str, str], dict[str, int]]:
    """Every subscriber's acknowledgement cut: (group, stream) → cut. What it protects."""
    rows = Subscription.objects.exclude(reader_group__retention_type="NONE").select_related(
        "reader_group", "stream__scope"
    )
    return {(r.reader_group.name, str(r.stream)): dict(r.acknowledgement_cut or {}) for r in rows}


def check_retention_safe(stream: Stream, cuts_before: dict[tuple[str, str], dict[str, int]]) -> None:
    """No subscriber's unconsumed data deleted, except by a max-limit rule in the history; the
    history agrees with the heads.

    `cuts_before`: the subscribers' acknowledgement cuts sampled before the fault (a subscriber
    has processed everything before its cut; the head may not pass it)."""
    name = str(stream)
    heads = logs.stream_log(stream).head_cut()
    records = list(TruncationRecord.objects.filter(stream=stream).order_by("created_at", "id"))
    assert all(r.completed for r in records), f"{name}: a truncation left unfinished"
    previous: dict[str, int] = {}
    for r in records:
        for seg, offset in r.after_cut.items():
            assert offset >= r.before_cut[seg] and offset >= previous.get(seg, 0), f"{name}: a cut went back: {r.rule}"
        previous = r.after_cut
    if records:
        assert records[-1].after_cut == heads, f"{name}: head {heads}, newest truncation {records[-1].after_cut}"
    else:
        assert all(h == 0 for h in heads.values()), f"{name}: head {heads} moved without a record"
    by_max = [r for r in records if is_max_limit_rule(r.rule)]
    for (group, stream_name), cut in cuts_before.items():
        if stream_name != name:
            continue
        for seg, head in heads.items():
            protected = cut.get(seg, 0)
            if head > protected:
                assert any(r.after_cut[seg] > protected for r in by_max), (
                    f"{name} segment {seg}: head {head} passed subscriber {group}'s cut {protected} "
                    f"with no max-limit rule in {[r.rule for r in records]}"
                )
    missed = ReadPosition.objects.filter(subscription__stream=stream, missed__gt=0)
    missed = missed.exclude(subscription__reader_group__retention_type="NONE")
    assert not missed.exists() or by_max, f"{name}: a subscriber missed events with no max-limit truncation"
