"""At-least-once acknowledgement for one reader group on one segment (DESIGN.md §7; the
acknowledgement RFC: a position is released only once what lies below it was *processed*).
Plain Python: the rules, used as the reference model of the Redis tracker and by its tests.

State per (group, segment):
- `floor`: the lowest offset not yet acknowledged. Everything below it is processed; it is what
  the group's acknowledgement cut publishes, is persisted, and never moves backwards.
- `next`: the next offset never handed out.
- `leases`: offsets handed out and not yet acknowledged, each with its consumer, expiry, epoch
  (which delivery of the offset it is) and, for fan-out groups, the sinks that acknowledged it.
- `acked`: offsets in [floor, next) acknowledged out of order, waiting for the floor to reach
  them.
- `retry`: offsets to hand out again (a nack, an expired lease), each with the time it is due.

A delivery id names (offset, epoch): an acknowledgement of an older epoch (the lease expired and
was handed to another consumer) is refused, so the new holder's work is never lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum


class Poison(str, Enum):
    DEAD_LETTER = "dead_letter"
    SKIP = "skip"
    HALT = "halt"


@dataclass
class Lease:
    consumer: str
    expires_at: float
    epoch: int  # 1 for the first delivery, then one more per redelivery
    sinks_acked: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Delivery:
    offset: int
    epoch: int

    @property
    def delivery_count(self) -> int:
        return self.epoch


@dataclass(frozen=True)
class AckResult:
    acked: bool  # counted (every sink has acknowledged it)
    reason: str = ""  # why not: "unknown", "stale", "waiting-for-sinks"


@dataclass
class SegmentAcks:
    floor: int = 0
    next: int = 0
    leases: dict[int, Lease] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    retry: dict[int, float] = field(default_factory=dict)  # offset -> due time
    epochs: dict[int, int] = field(default_factory=dict)  # deliveries so far, above the floor
    poisoned: dict[int, str] = field(default_factory=dict)  # offset -> what on_poison did
    halted_at: int | None = None

    # -- handing out ---------------------------------------------------------------------------

    def hand_out(
        self, now: float, consumer: str, limit: int, tail: int, lease_s: float,
        max_deliveries: int, on_poison: Poison, visible: Iterable[int] | None = None,
    ) -> list[Delivery]:
        """Up to `limit` deliveries: due redeliveries first (oldest offset first), then offsets
        never handed out, in order, up to `tail`. An offset out of deliveries is not handed out
        again: `on_poison` decides (see `poison`). `visible`, when given, limits new offsets to
        those that may be delivered now (delayed events are not)."""
        self.expire(now)
        out: list[Delivery] = []
        for offset in sorted(o for o, due in self.retry.items() if due <= now):
            if len(out) >= limit or self.halted_at is not None:
                break
            if self.epochs.get(offset, 0) >= max_deliveries:
                del self.retry[offset]
                self.poison(offset, on_poison)
                continue
            del self.retry[offset]
            out.append(self._lease(offset, consumer, now, lease_s))
        allowed = None if visible is None else set(visible)
        while len(out) < limit and self.next < tail and self.halted_at is None:
            offset = self.next
            if allowed is not None and offset not in allowed:
                break  # a delayed event holds the order of its segment
            self.next += 1
            out.append(self._lease(offset, consumer, now, lease_s))
        return out

    def _lease(self, offset: int, consumer: str, now: float, lease_s: float) -> Delivery:
        epoch = self.epochs.get(offset, 0) + 1
        self.epochs[offset] = epoch
        self.leases[offset] = Lease(consumer, now + lease_s, epoch)
        return Delivery(offset, epoch)

    def expire(self, now: float) -> list[int]:
        """Leases past their expiry become due for redelivery at once."""
        gone = [o for o, lease in self.leases.items() if lease.expires_at <= now]
        for offset in gone:
            del self.leases[offset]
            self.retry[offset] = now
        return gone

    # -- acknowledging -------------------------------------------------------------------------

    def ack(self, delivery: Delivery, sink: str | None = None, sinks: Iterable[str] = ()) -> AckResult:
        """Acknowledge one delivery (for fan-out groups, on behalf of one sink: the event counts
        as processed once every declared sink acknowledged it)."""
        lease = self.leases.get(delivery.offset)
        if lease is None:
            if delivery.offset < self.floor or delivery.offset in self.acked:
                return AckResult(False, "already-acked")
            return AckResult(False, "unknown")
        if lease.epoch != delivery.epoch:
            return AckResult(False, "stale")
        required = set(sinks)
        if required:
            if sink not in required:
                return AckResult(False, "unknown-sink")
            lease.sinks_acked.add(sink)
            if lease.sinks_acked != required:
                return AckResult(False, "waiting-for-sinks")
        del self.leases[delivery.offset]
        self._processed(delivery.offset)
        return AckResult(True)

    def nack(self, delivery: Delivery, now: float, delay_s: float = 0.0) -> AckResult:
        """Give a delivery back: it is handed out again once `delay_s` has passed."""
        lease = self.leases.get(delivery.offset)
        if lease is None:
            return AckResult(False, "unknown")
        if lease.epoch != delivery.epoch:
            return AckResult(False, "stale")
        del self.leases[delivery.offset]
        self.retry[delivery.offset] = now + delay_s
        return AckResult(True)

    def poison(self, offset: int, on_poison: Poison) -> None:
        """An offset out of deliveries: dead-lettered or skipped, it counts as processed (the
        caller appends it to the dead-letter stream first); halted, the floor stops there."""
        self.poisoned[offset] = on_poison.value
        if on_poison is Poison.HALT:
            self.halted_at = offset if self.halted_at is None else min(self.halted_at, offset)
            return
        self._processed(offset)

    def _processed(self, offset: int) -> None:
        self.acked.add(offset)
        while self.floor in self.acked:
            self.acked.remove(self.floor)
            self.epochs.pop(self.floor, None)
            self.floor += 1

    # -- after truncation ----------------------------------------------------------------------

    def skip_to(self, head: int) -> int:
        """The stream was truncated past this group's position: continue from the head. Returns
        how many events the group missed (never handed out, or handed out and not acknowledged)."""
        if head <= self.floor:
            return 0
        missed = sum(1 for o in range(self.floor, min(head, self.next)) if o not in self.acked)
        missed += max(0, head - self.next)
        self.floor = head
        self.next = max(self.next, head)
        self.acked = {o for o in self.acked if o >= head}
        self.leases = {o: lease for o, lease in self.leases.items() if o >= head}
        self.retry = {o: due for o, due in self.retry.items() if o >= head}
        self.epochs = {o: e for o, e in self.epochs.items() if o >= head}
        return missed
