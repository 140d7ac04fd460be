"""A read's answer: its parts (a segment's records and deliveries each), its deliveries as the
JSON answer gives them (docs/api.md) for callers in Python, and the deliveries as id ranges.
`streams.wire` writes the answer's JSON and binary forms from the same parts."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from domain import delivery_ids
from domain.acks import Delivery
from groups.consuming.acking import AckOutcome
from store.framing import Frame, Record
from streams.wire import record_json


@dataclass
class ReadPart:
    """A read's deliveries on one segment, in order: each event's record (`items`), and its
    delivery, given as runs (`runs`: [first offset, events, delivery count], each run's offsets
    consecutive, its events the next ones of `items`); for a fan-out group's read the sinks each
    still waits for. A read's first deliveries are a run per look: no object per delivery."""

    stream: str  # the stream's full name
    segment: str
    id_prefix: str  # of the deliveries' ids: `<incarnation>-<stream id>-<segment>`
    items: list[Record | Frame] = field(default_factory=list)  # a record, or one left as stored for a binary answer
    runs: list[list[int]] = field(default_factory=list)
    sinks_pending: list[list[str]] | None = None  # per delivery; None for a group without sinks

    @classmethod
    def of(cls, stream: str, segment: str, id_prefix: str, got: Iterable[tuple[Record | Frame, Delivery]]) -> ReadPart:
        """A part from each event's record and delivery."""
        part = cls(stream, segment, id_prefix)
        for item, delivery in got:
            part.add(item, delivery.epoch)
        return part

    def add(self, item: Record | Frame, epoch: int) -> None:
        """One more event, delivered for the `epoch`-th time."""
        self.items.append(item)
        add_run(self.runs, item.offset, 1, epoch)

    def epochs(self) -> list[int]:
        """Each event's delivery count, in order."""
        out: list[int] = []
        for _, n, epoch in self.runs:
            out += repeat(epoch, n)
        return out


def add_run(runs: list[list[int]], first: int, n: int, epoch: int) -> None:
    """Deliveries of offsets first .. first + n - 1 at one delivery count, after `runs`: the
    last run grows when they follow it at its count."""
    if runs:
        last = runs[-1]
        if last[2] == epoch and last[0] + last[1] == first:
            last[1] += n
            return
    runs.append([first, n, epoch])


@dataclass
class ReadResult:
    parts: list[ReadPart] = field(default_factory=list)
    missed: int = 0
    missed_by_stream: dict[str, int] = field(default_factory=dict)
    pending_limit_reached: bool = False
    acked: AckOutcome | None = None  # what the read's `ack` part did (None: it had none)
    delivery_ranges: list[str] | None = None  # the deliveries as id ranges, when asked for
    lease_expires_at: str | None = None  # of every delivery of the read (None: an ack_policy none group)
    next_due: float | None = None  # the earliest time something of the group's segments comes due later
    delayed_known: bool = False  # whether the pass found `delayed_due` (else the index is asked)
    delayed_due: float | None = None  # the earliest delayed event of the group's streams (s), if any
    wait: Any = None  # a read that found nothing and parks: what it waits for (`waking.Wait`)

    @functools.cached_property
    def deliveries(self) -> list[dict]:
        """Each delivery as the JSON answer carries it (docs/api.md), as dicts, built when asked
        for: a read's answer never builds them (`streams.wire.deliveries_json` writes the JSON's,
        `streams.wire.encode_read_batch` the binary form's)."""
        out: list[dict] = []
        for part in self.parts:
            answers = _deliveries_json(part, self.lease_expires_at)
            if part.sinks_pending is not None:  # a redelivery is for the sinks that have not acknowledged it
                for answer, pending in zip(answers, part.sinks_pending, strict=True):
                    answer["sinks_pending"] = pending
            out += answers
        return out


def _deliveries_json(part: ReadPart, expires: str | None) -> list[dict]:
    """Each event as every answer carries it (`record_json`), then the delivery's fields. A read's
    JSON answer is not built from these: `streams.wire.deliveries_json` writes the same bytes
    without a dict per event."""
    out = []
    for item, epoch in zip(part.items, part.epochs(), strict=True):
        rec = item.record() if isinstance(item, Frame) else item  # (a binary answer's read)
        event = record_json(part.segment, rec, part.stream)
        event["stream"] = part.stream
        event["delivery_id"] = delivery_ids.delivery_id(part.id_prefix, rec.offset, epoch)
        event["delivery_count"] = epoch
        event["lease_expires_at"] = expires
        out.append(event)
    return out
