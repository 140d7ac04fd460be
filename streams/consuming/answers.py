"""A read's answer: its parts (a segment's records and deliveries each), the JSON form every
JSON answer carries (DESIGN.md §10), and the deliveries as id ranges. `streams.wire` writes the
binary form from the same parts."""

from __future__ import annotations

import functools
from binascii import b2a_base64
from dataclasses import dataclass, field
from operator import itemgetter

from domain.acks import Delivery
from store.framing import Frame, Record
from streams.consuming.acking import AckOutcome
from streams.wire import ms_to_iso, record_json

_DELIVERY, _OFFSET, _EPOCH = itemgetter(1), itemgetter(0), itemgetter(1)  # of a (record, delivery); of a Delivery


@dataclass
class ReadPart:
    """A read's deliveries on one segment, in order: each event's record and delivery, and for a
    fan-out group's read the sinks each still waits for."""

    stream: str  # the stream's full name
    segment: str
    id_prefix: str  # of the deliveries' ids: `<incarnation>-<stream id>-<segment>`
    got: list[tuple[Record | Frame, Delivery]]  # a record, or one left as stored for a binary answer
    sinks_pending: list[list[str]] | None = None  # per delivery; None for a group without sinks


@dataclass
class ReadResult:
    parts: list[ReadPart] = field(default_factory=list)
    missed: int = 0
    missed_by_stream: dict[str, int] = field(default_factory=dict)
    pending_limit_reached: bool = False
    acked: AckOutcome | None = None  # what the read's `ack` part did (None: it had none)
    delivery_ranges: list[str] | None = None  # the deliveries as id ranges, when asked for
    lease_expires_at: str | None = None  # of every delivery of the read (None: an ack_policy none group)

    @functools.cached_property
    def deliveries(self) -> list[dict]:
        """Each delivery as the JSON answer carries it (DESIGN.md §10), built when asked for: a
        binary answer (`streams.wire.encode_read_batch`) never builds them."""
        out: list[dict] = []
        for part in self.parts:
            answers = _deliveries_json(part, self.lease_expires_at)
            if part.sinks_pending is not None:  # a redelivery is for the sinks that have not acknowledged it
                for answer, pending in zip(answers, part.sinks_pending, strict=True):
                    answer["sinks_pending"] = pending
            out += answers
        return out


def id_ranges(prefix: str, got: list[tuple[Record | Frame, Delivery]]) -> list[str]:
    """The deliveries of `got` as id ranges `<prefix>-<first>..<last>-<epoch>`: one per run of
    consecutive offsets at one epoch (a read's first deliveries are a run per segment)."""
    n = len(got)
    if n:  # the common case, checked by C-level maps: the whole part is one run
        deliveries = list(map(_DELIVERY, got))
        first, epoch = deliveries[0]
        if list(map(_OFFSET, deliveries)) == list(range(first, first + n)) and set(map(_EPOCH, deliveries)) == {epoch}:
            return [f"{prefix}-{first}..{first + n - 1}-{epoch}"]
    out = []
    i = 0
    while i < n:
        first, epoch = got[i][1]
        j = i
        while j + 1 < n and got[j + 1][1] == (got[j][1][0] + 1, epoch):
            j += 1
        out.append(f"{prefix}-{first}..{got[j][1][0]}-{epoch}")
        i = j + 1
    return out


def _deliveries_json(part: ReadPart, expires: str | None) -> list[dict]:
    """Each event as every answer carries it (`record_json`: the same keys in the same order),
    plus the delivery's fields. Built here in one dict per event rather than by `record_json`
    and four more assignments: a read answers thousands. Events published in one batch share
    their millisecond, so each time is formatted once per answer."""
    prefix = part.id_prefix + "-"
    stream = part.stream
    segment = part.segment
    got = part.got
    times: dict[int, str] = {}
    out: list[dict] = []
    append = out.append
    for item, d in got:
        rec = item.record() if isinstance(item, Frame) else item  # (a binary answer's read)
        offset, published_ms, deliver_at_ms, _, routing_key, key, headers, payload, _ = rec
        published = times.get(published_ms)
        if published is None:
            published = times[published_ms] = ms_to_iso(published_ms)
        try:
            text = payload.decode()
        except UnicodeDecodeError:  # no `payload`: record_json leaves it out
            append(
                {
                    **record_json(segment, rec),
                    "stream": stream,
                    "delivery_id": f"{prefix}{d.offset}-{d.epoch}",
                    "delivery_count": d.epoch,
                    "lease_expires_at": expires,
                }
            )
            continue
        append(
            {
                "segment": segment,
                "offset": offset,
                "routing_key": None if routing_key is None else routing_key.decode(),
                "key": None if key is None else key.decode(),
                "headers": headers,
                "published_at": published,
                "deliver_at": None if deliver_at_ms is None else ms_to_iso(deliver_at_ms),
                "payload_b64": b2a_base64(payload, newline=False).decode(),
                "payload": text,
                "stream": stream,
                "delivery_id": f"{prefix}{d.offset}-{d.epoch}",
                "delivery_count": d.epoch,
                "lease_expires_at": expires,
            }
        )
    return out
