"""At-least-once acknowledgement for one reader group on one segment (docs/design/acks.md; the
acknowledgement RFC: a position is released only once what lies below it was *processed*).
Plain Python: the rules, used as the reference model of the Redis tracker and by its tests.

State per (group, segment):
- `floor`: the lowest offset not yet acknowledged. Everything below it is processed; it is what
  the group's checkpoints and acknowledgement cut publish, is persisted, and never moves back.
- `next`: the next offset never handed out.
- `leases`: offsets handed out and not yet acknowledged, each with its consumer, expiry, epoch
  (which delivery of the offset it is) and, for fan-out groups, the sinks that acknowledged it.
- `acked`: offsets in [floor, next) acknowledged out of order, waiting for the floor to reach
  them.
- `retry`: offsets to hand out (again) once due: a nack, an expired lease, or a delayed event
  the stream's shared index released (`fan_out`). A delayed event passed over while not yet
  due is kept nowhere here: it holds the floor until the index hands it back and it is acked.
- `dead`: offsets out of deliveries under `dead_letter`, each with the time its append to the
  dead-letter stream was claimed. They count as processed only once that append is done
  (`dead_lettered`); a claim older than a lease is handed out again (the appender crashed).
- `sinks_acked`: for fan-out groups, the sinks that acknowledged an offset not yet processed,
  kept across its redeliveries (the RFC's "done when every exporter acked": a redelivery is for
  the sinks that have not).

Redelivery waits: an expired lease, or a nack without a delay of its own, is due again after the
group's backoff (`redelivery_delay`, JetStream's `BackOff`); none, at once. A group whose
`ack_policy` is `none` (at-most-once, the RFC's opt-out, JetStream's `AckNone`) counts a delivery
as processed when it is handed out: nothing is leased, nothing comes again.

A delivery id names (offset, epoch): an acknowledgement of an older epoch (the lease expired and
was handed to another consumer) is refused, so the new holder's work is never lost.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from domain.errors import FieldError


class Poison(str, Enum):
    DEAD_LETTER = "dead_letter"
    SKIP = "skip"
    HALT = "halt"


class AckPolicy(str, Enum):
    EXPLICIT = "explicit"  # at-least-once: processed once acknowledged (the default)
    NONE = "none"  # at-most-once: processed when handed out


MAX_BACKOFF_S = 7 * 86_400  # a redelivery waits a week at most, as a nack's delay


def check_backoff(value: object, max_deliveries: int, field: str = "backoff_s") -> tuple[float, ...]:
    """A group's backoff as sent: a non-empty list of seconds (numbers from 0 to a week), at most
    `max_deliveries` long (a delivery is redelivered fewer times than that); `None` clears it."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise FieldError(field, "must be a non-empty list of seconds, e.g. [1, 5, 30] (null: no backoff)")
    if len(value) > max_deliveries:
        raise FieldError(
            field, f"holds {len(value)} waits; at most max_deliveries ({max_deliveries}), one per redelivery"
        )
    out = []
    for i, wait in enumerate(value):
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait != wait:
            raise FieldError(f"{field}[{i}]", "must be a number of seconds")
        if not 0 <= wait <= MAX_BACKOFF_S:
            raise FieldError(f"{field}[{i}]", f"must be from 0 to {MAX_BACKOFF_S} seconds")
        out.append(float(wait))
    return tuple(out)


def redelivery_delay(backoff: Sequence[float], epoch: int) -> float:
    """Seconds before the redelivery of a delivery in its `epoch`-th hand-out (its lease expired,
    or it was given back without a delay of its own): the `epoch`-th value of the group's backoff,
    the last one repeating (JetStream's `BackOff`); no backoff, none."""
    if not backoff:
        return 0.0
    return float(backoff[min(epoch, len(backoff)) - 1])


@dataclass
class Lease:
    consumer: str
    expires_at: float
    epoch: int  # 1 for the first delivery, then one more per redelivery


class Delivery(NamedTuple):
    """One handed-out (offset, epoch). A named tuple rather than a frozen dataclass: a read and
    an ack make one per event, and a frozen dataclass's `__init__` cost a microsecond each (a
    tenth of the web workers' CPU per event in bench/consume.py)."""

    offset: int
    epoch: int

    @property
    def delivery_count(self) -> int:
        return self.epoch


@dataclass(frozen=True)
class HandOut:
    deliveries: list[Delivery]
    dead_letter: list[int]  # offsets to append to the dead-letter stream, then `dead_lettered`
    missed: int  # events truncated away before this group processed them
    floor: int
    next: int  # the next offset never handed out, after this hand-out
    # redelivered offsets some of whose sinks acknowledged them already (fan-out groups)
    sinks_acked: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # first deliveries given as runs of offsets [a, b), each at delivery count 1, after
    # `deliveries` (a read's hand-out asks for them so: no Delivery per event); empty otherwise
    first_runs: list[tuple[int, int]] = field(default_factory=list)
    # the life of the state that handed them out, named in their delivery ids (0: a state of an
    # older release, or the plain model); -1: nothing handed out, the state must be started anew
    life: int = field(default=0, compare=False)
    expired: int = 0  # offsets past their time to live it passed over, processed (`domain.ttl`)


@dataclass(frozen=True)
class AckResult:
    acked: bool  # counted (every sink has acknowledged it)
    reason: str = ""  # why not: "unknown", "stale", "waiting-for-sinks", "already-acked"


@dataclass
class SegmentAcks:
    floor: int = 0
    next: int = 0
    leases: dict[int, Lease] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    retry: dict[int, float] = field(default_factory=dict)  # offset -> due time
    epochs: dict[int, int] = field(default_factory=dict)  # deliveries so far, above the floor
    poisoned: dict[int, str] = field(default_factory=dict)  # offset -> what on_poison did
    dead: dict[int, float] = field(default_factory=dict)  # offset -> when its append was claimed
    sinks_acked: dict[int, set[str]] = field(default_factory=dict)  # offset -> sinks that acked it
    halted_at: int | None = None
    started: bool = False

    # -- handing out ---------------------------------------------------------------------------

    def hand_out(
        self,
        now: float,
        consumer: str,
        limit: int,
        tail: int,
        lease_s: float,
        max_deliveries: int,
        on_poison: Poison,
        *,
        floor: int = 0,
        head: int = 0,
        delayed: Mapping[int, float] | None = None,
        scan_until: int | None = None,
        released: float = 0.0,
        index_live: bool = True,
        present: Collection[int] | None = None,
        backoff: Sequence[float] = (),
        ack_policy: AckPolicy = AckPolicy.EXPLICIT,
        expired: Collection[int] = (),
    ) -> HandOut:
        """Up to `limit` deliveries: due redeliveries and delayed events first, by the time they
        came due, then offset (a delayed event is handed out in `(deliver_at, offset)` order), then
        offsets never handed out, in order, up to `tail`.

        `floor` is the persisted floor: it seeds a state never seen (a new group, or after Redis
        lost everything) and lifts one that is behind it (Redis restored from an old snapshot).
        `head` is the segment's head: offsets truncated away are skipped and counted as missed.
        `delayed` maps offsets of events not yet due (within `scan_until`, the end of what the
        caller looked at) to their delivery time: they are passed over, holding the floor, and
        the stream's shared delayed index hands them back when due (`fan_out`). `released` is
        the latest delivery time that index has released: an event due by then is handed out
        as an ordinary one (the index may have released it before this cursor passed it). While
        the index is not live (Redis lost it and recovery has not finished) the cursor stops at
        the first delayed event instead: recovery skips what is due by then, so nothing it
        skips may be passed over before. `present`, for a group reading a compacted view, holds
        the offsets the view has (within `scan_until`): the others were compacted away and
        count as processed without a delivery. `expired` (within `scan_until`): offsets of events
        past their time to live (`domain.ttl`): never handed out, they count as processed
        (`HandOut.expired` says how many this hand-out passed so). `backoff`: how long an expired lease waits before
        it is handed out again (`redelivery_delay`). Under `ack_policy` none every delivery handed
        out counts as processed at once (at-most-once).
        An offset out of deliveries is not handed out again: `on_poison` decides (see `poison`);
        a halted segment resumes once `max_deliveries` is raised above the halted offset's
        deliveries (it is delivered again) or `on_poison` is no longer `halt` (it is poisoned
        the new way)."""
        if not self.started:
            self.floor = self.next = floor
            self.started = True
        elif floor > self.floor:
            self._drop_below(floor)
        missed = self.skip_to(head)
        self.expire(now, backoff)
        dead = [o for o, claimed in self.dead.items() if claimed + lease_s <= now]
        for offset in dead:
            self.dead[offset] = now
        if self.halted_at is not None:
            halted = self.halted_at
            if self.epochs.get(halted, 0) < max_deliveries:  # max_deliveries was raised
                self.halted_at = None
                self.retry[halted] = now
            elif on_poison is not Poison.HALT:  # on_poison was changed
                self.halted_at = None
                if self.poison(halted, on_poison, now):
                    dead.append(halted)
        out: list[Delivery] = []
        for _, offset in sorted((due, o) for o, due in self.retry.items() if due <= now):
            if len(out) >= limit or self.halted_at is not None:
                break
            del self.retry[offset]
            if self.epochs.get(offset, 0) >= max_deliveries:
                if self.poison(offset, on_poison, now):
                    dead.append(offset)
                continue
            out.append(self._lease(offset, consumer, now, lease_s))
        end = tail if scan_until is None else min(tail, scan_until)
        delayed = delayed or {}
        gone = 0
        while len(out) < limit and self.next < end and self.halted_at is None:
            offset = self.next
            if present is not None and offset not in present:
                self.next += 1
                self._processed(offset)  # compacted away: nothing to deliver
                continue
            if offset in expired:
                self.next += 1
                self._processed(offset)  # past its time to live: delivered to no group
                gone += 1
                continue
            due = delayed.get(offset)
            if due is not None and due > now and due > released and not index_live:
                break
            self.next += 1
            if due is not None and due > now and due > released:
                continue  # the shared index hands it back when due
            out.append(self._lease(offset, consumer, now, lease_s))
        done = {d.offset: tuple(sorted(self.sinks_acked[d.offset])) for d in out if self.sinks_acked.get(d.offset)}
        if ack_policy is AckPolicy.NONE:
            for delivery in out:  # processed when handed out: no lease to wait for
                del self.leases[delivery.offset]
                self._processed(delivery.offset)
        return HandOut(out, sorted(dead), missed, self.floor, self.next, done, expired=gone)

    def fan_out(self, due: Mapping[int, float]) -> list[int]:
        """Delayed events the stream's index released (offset -> delivery time): each one this
        cursor passed over and that is not processed, handed out or queued already is queued
        to be handed out (by delivery time). Returns the offsets queued."""
        queued = []
        for offset, at in sorted(due.items()):
            if (
                not self.started
                or not self.floor <= offset < self.next
                or offset in self.acked
                or offset in self.leases
                or offset in self.retry
                or offset in self.dead
                or offset in self.poisoned
                or offset == self.halted_at
            ):
                continue
            self.retry[offset] = at
            queued.append(offset)
        return queued

    def _lease(self, offset: int, consumer: str, now: float, lease_s: float) -> Delivery:
        epoch = self.epochs.get(offset, 0) + 1
        self.epochs[offset] = epoch
        self.leases[offset] = Lease(consumer, now + lease_s, epoch)
        return Delivery(offset, epoch)

    def in_flight(self, now: float) -> dict[str, int]:
        """Deliveries in flight by now, counted by the consumer each was handed to ("": unnamed):
        leases not acknowledged, given back or expired (an expired one stays in `leases` until
        the next hand-out gives it back, but is no longer in anyone's hands)."""
        out: dict[str, int] = {}
        for lease in self.leases.values():
            if lease.expires_at > now:
                out[lease.consumer] = out.get(lease.consumer, 0) + 1
        return out

    def expire(self, now: float, backoff: Sequence[float] = ()) -> list[int]:
        """Leases past their expiry become due for redelivery: at once, or with a backoff, that
        long after the lease expired (not before now)."""
        gone = [o for o, lease in self.leases.items() if lease.expires_at <= now]
        for offset in gone:
            lease = self.leases.pop(offset)
            due = lease.expires_at + redelivery_delay(backoff, lease.epoch) if backoff else now
            self.retry[offset] = max(now, due)
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
            acked = self.sinks_acked.setdefault(delivery.offset, set())
            acked.add(sink)
            if not required <= acked:  # a sink no longer declared counts for nothing
                return AckResult(False, "waiting-for-sinks")
        del self.leases[delivery.offset]
        self._processed(delivery.offset)
        return AckResult(True)

    def nack(
        self,
        delivery: Delivery,
        now: float,
        delay_s: float | None = 0.0,
        backoff: Sequence[float] = (),
        sink: str | None = None,
    ) -> AckResult:
        """Give a delivery back: it is handed out again once `delay_s` has passed (None: the
        group's backoff). The sinks that acknowledged it stay acknowledged; a sink that gives it
        back (`sink`) is one that has not."""
        lease = self.leases.get(delivery.offset)
        if lease is None:
            return AckResult(False, "unknown")
        if lease.epoch != delivery.epoch:
            return AckResult(False, "stale")
        del self.leases[delivery.offset]
        if sink is not None and delivery.offset in self.sinks_acked:
            self.sinks_acked[delivery.offset].discard(sink)
        delay = redelivery_delay(backoff, lease.epoch) if delay_s is None else delay_s
        self.retry[delivery.offset] = now + delay
        return AckResult(True)

    def sinks_pending(self, offset: int, sinks: Iterable[str]) -> list[str]:
        """The declared sinks that have not acknowledged the offset yet, in order."""
        acked = self.sinks_acked.get(offset, set())
        return [s for s in sorted(sinks) if s not in acked]

    def poison(self, offset: int, on_poison: Poison, now: float) -> bool:
        """An offset out of deliveries: skipped, it counts as processed; halted, the floor stops
        there; dead-lettered, it waits for its append to the dead-letter stream (returns True:
        the caller appends it, then calls `dead_lettered`)."""
        self.poisoned[offset] = on_poison.value
        if on_poison is Poison.HALT:
            self.halted_at = offset if self.halted_at is None else min(self.halted_at, offset)
            return False
        if on_poison is Poison.DEAD_LETTER:
            self.dead[offset] = now
            return True
        self._processed(offset)
        return False

    def dead_lettered(self, offsets: Iterable[int]) -> None:
        """The appends of these offsets to the dead-letter stream are durable: processed."""
        for offset in offsets:
            if self.dead.pop(offset, None) is not None:
                self._processed(offset)

    def _processed(self, offset: int) -> None:
        self.sinks_acked.pop(offset, None)
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
        self._drop_below(head)
        return missed

    def _drop_below(self, offset: int) -> None:
        self.floor = offset
        self.next = max(self.next, offset)
        self.acked = {o for o in self.acked if o >= offset}
        self.leases = {o: lease for o, lease in self.leases.items() if o >= offset}
        self.retry = {o: due for o, due in self.retry.items() if o >= offset}
        self.epochs = {o: e for o, e in self.epochs.items() if o >= offset}
        self.dead = {o: t for o, t in self.dead.items() if o >= offset}
        self.sinks_acked = {o: s for o, s in self.sinks_acked.items() if o >= offset}
        if self.halted_at is not None and self.halted_at < offset:
            self.halted_at = None
        while self.floor in self.acked:  # acks above the new floor may close the gap
            self.acked.remove(self.floor)
            self.epochs.pop(self.floor, None)
            self.floor += 1
