"""Acknowledging and giving back deliveries, in batches, in any order."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import groupby
from typing import cast

from django.conf import settings

from domain import delivery_ids
from domain.acks import AckPolicy, Delivery
from domain.errors import FieldError
from groups.ack_tracker import Run
from groups.consuming import floors
from groups.consuming.checkpoints import maybe_checkpoint
from groups.consuming.floors import (
    Slot,
    count_consumer,
    fresh_positions,
    mark_seen,
    note_consumer,
    persist_floors,
    slots,
)
from groups.models import ReaderGroup
from store.redis_connection import ScriptPipeline, scripted_pipeline
from streams.waking import group_channel, publish_notice

# Where an id's prefix (`<incarnation>[.<life>]-<stream>-<segment>`) points: one of the group's
# segments at a life ((stream id, segment, life)), or why not
Where = tuple[int, str, int]
# an id an ack a read carries sets apart: (its index, why, its first and last offset, its epoch)
Apart = tuple[int, str, int, int, int]
MALFORMED, NOT_READ, FOREIGN, STALE = "malformed", "not-read", "foreign", "stale"


class IdPrefixes:
    """The group's segments as delivery ids name them (`domain.delivery_ids.prefix`), to tell
    what an id's prefix points at: a segment and the life of the Redis state that handed it out
    (`Where`), or `NOT_READ` (a stream or segment the group does not read), `STALE` (the
    segment's, handed out before one of the subscription's last seeks), `FOREIGN` (the
    segment's, but of another incarnation: another group's, or this one's before it last
    subscribed to the stream) or `MALFORMED`. Each distinct prefix is looked at once."""

    def __init__(
        self, incarnations: dict[tuple[int, str], int], former: dict[tuple[int, str], list[int]] | None = None
    ):
        """`incarnations`: (stream id, segment) → the subscription's incarnation; `former`: its
        incarnations before its last seeks."""
        former = former or {}
        self.segments = {
            f"{sid}-{seg}": (sid, seg, str(inc), {str(f) for f in former.get((sid, seg), ())})
            for (sid, seg), inc in incarnations.items()
        }
        self.seen: dict[str, Where | str] = {}

    @classmethod
    def of(cls, group_slots: list[Slot]) -> IdPrefixes:
        return cls(
            {(s.stream.pk, s.segment): s.subscription.incarnation for s in group_slots},
            {(s.stream.pk, s.segment): s.subscription.former_incarnations for s in group_slots},
        )

    def where(self, prefix: str) -> Where | str:
        found = self.seen.get(prefix)
        if found is None:
            found = self.seen[prefix] = self._where(prefix)
        return found

    def _where(self, prefix: str) -> Where | str:
        split = delivery_ids.split_prefix(prefix)
        if split is None:
            return MALFORMED
        incarnation, life, rest = split
        segment = self.segments.get(rest)
        if segment is None:
            return NOT_READ if delivery_ids.names_a_segment(rest) else MALFORMED
        sid, seg, mine, former = segment
        if incarnation in former:
            return STALE
        if incarnation != mine:
            return FOREIGN
        return (sid, seg, life)


_WHY = {
    NOT_READ: "names a stream this group does not read",
    STALE: "was handed out before the group was sought: its lease went with the seek",
    FOREIGN: "belongs to another reader group, or to this group before it last subscribed to the stream",
}


@dataclass
class AckOutcome:
    acked: int = 0  # counted as processed
    waiting_for_sinks: int = 0
    given_back: int = 0  # nacks
    refused: list[dict] = field(default_factory=list)


class Named:
    """One segment's deliveries named by an ack or a nack, in the order named: runs of offsets
    (first, last included, epoch), and for each run the index of the id that named it (an id
    names one delivery, a range a run). A batch a read handed out is a few runs, never an object
    per delivery; `items` spells them out, for the rare answer that names a refused one."""

    __slots__ = ("runs", "index", "count")

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.index: list[int] = []
        self.count = 0

    def add(self, i: int, first: int, last: int, epoch: int) -> None:
        self.runs.append((first, last, epoch))
        self.index.append(i)
        self.count += last - first + 1

    def items(self) -> list[tuple[int, Delivery]]:
        """(index of the id that named it, delivery) of each delivery, in order."""
        return [
            (i, Delivery(o, epoch))
            for i, (first, last, epoch) in zip(self.index, self.runs, strict=True)
            for o in range(first, last + 1)
        ]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Named) and self.items() == other.items()

    def __repr__(self) -> str:
        return f"Named({self.items()!r})"


def _id_list(ids: object, name: str = "delivery_ids") -> list:
    """The request's `delivery_ids` (named `name` in errors), checked to be a non-empty list, not
    longer than a read."""
    if not isinstance(ids, list) or not ids:
        raise FieldError(name, "must be a non-empty list of delivery ids")
    if len(ids) > settings.CBR_MAX_READ_EVENTS:
        raise FieldError(name, f"holds {len(ids)} ids; at most {settings.CBR_MAX_READ_EVENTS}")
    return ids


def _parse_ids(
    ids: list, group_slots: list[Slot], name: str = "delivery_ids", lenient: bool = False
) -> tuple[dict[Where, Named], list[Apart]]:
    """Delivery ids by where they point (stream, segment, life) → the deliveries they name
    there; anything wrong is refused before anything is applied. `lenient` (an ack a read
    carries): ids handed out before one of the group's last seeks are not refused but returned
    apart (`Apart`, reason "stale"): a consumer that carried them across a seek goes on
    reading."""
    prefixes = IdPrefixes.of(group_slots)
    by_slot = _parse_plain_ids(ids, prefixes)
    return (by_slot, []) if by_slot is not None else _parse_each(ids, prefixes, name, lenient)


def _parse_each(
    ids: list, prefixes: IdPrefixes, name: str = "delivery_ids", lenient: bool = False
) -> tuple[dict[Where, Named], list[Apart]]:
    """`_parse_ids` id by id: the first bad one is refused, naming its index and why. An id may
    be a range, `<…>-<first>..<last>-<epoch>`: the deliveries of offsets first to last (both
    included) at that epoch, as a read's `delivery_ranges` gives them; all of them count towards
    the batch's bound."""
    by_slot: dict[Where, Named] = defaultdict(Named)
    apart: list[Apart] = []
    total = 0
    for i, raw in enumerate(ids):
        if type(raw) is not str:
            raise FieldError(f"{name}[{i}]", f"{raw!r} is not a delivery id", "unknown_delivery")
        split = delivery_ids.split(raw)
        if split is None:
            what = "a delivery id range of this group" if ".." in raw else "a delivery id"
            raise FieldError(f"{name}[{i}]", f"{raw!r} is not {what}", "unknown_delivery")
        prefix, a, b, epoch = split
        total += b - a + 1
        if b < a or total > settings.CBR_MAX_READ_EVENTS:
            raise FieldError(
                f"{name}[{i}]",
                f"{raw!r}: a range runs from its first offset to a last one not below it, and a batch "
                f"names at most {settings.CBR_MAX_READ_EVENTS} deliveries",
            )
        where = prefixes.where(prefix)
        if where == MALFORMED:
            raise FieldError(f"{name}[{i}]", f"{raw!r} is not a delivery id", "unknown_delivery")
        if isinstance(where, str):
            if not (lenient and where == STALE):
                raise FieldError(f"{name}[{i}]", _WHY[where], "unknown_delivery")
            apart.append((i, "stale", a, b, epoch))
            continue
        by_slot[where].add(i, a, b, epoch)
    return by_slot, apart


def _parse_plain_ids(ids: list, prefixes: IdPrefixes) -> dict[Where, Named] | None:
    """The common case of `_parse_ids` without a Python step per id (an ack carries a thousand):
    every id a string naming one of the group's segments, as the server wrote it, offset and epoch
    plain ASCII digits (at most 18 and 9) with no leading zero. Ids are split, checked and
    converted by C-level `map`s, and handed to their segments in runs (a read's ids come segment
    by segment); each distinct prefix is looked at once. None when any id is not so (the id-by-id
    parse then says which, and why)."""
    split = delivery_ids.split_plain(ids)
    if split is None:
        return None
    heads, numbers, epochs = split
    where = {head: prefixes.where(head) for head in set(heads)}
    if any(isinstance(w, str) for w in where.values()):
        return None
    keys = list(map(where.__getitem__, heads))
    runs = list(zip(numbers, numbers, epochs, strict=True))  # one delivery each
    by_slot: dict[Where, Named] = defaultdict(Named)
    at = 0
    for key, group in groupby(keys):
        n = len(list(group))
        named = by_slot[cast(Where, key)]
        named.runs += runs[at : at + n]
        named.index += range(at, at + n)
        named.count += n
        at += n
    return by_slot


def _refusal(outcome: AckOutcome, ids: list, verb: str) -> None:
    if not outcome.refused:
        return
    unknown = [r for r in outcome.refused if r["reason"] not in ("stale", "lost")]
    code = "unknown_delivery" if unknown else "lease_lost"
    first = (unknown or outcome.refused)[0]
    detail = {
        "unknown": "is not a live delivery of this group (never handed out, or already given back)",
        "stale": "its lease expired (or the group's state in Redis was lost) and the event was handed out "
        "again: this delivery is void",
        "lost": "the group's state in Redis was lost (Redis restarted empty): the event will be handed out "
        "again, and this delivery is void",
    }.get(first["reason"], first["reason"])
    details = {
        "refused": outcome.refused,
        "acked": outcome.acked,
        "waiting_for_sinks": outcome.waiting_for_sinks,
        "given_back": outcome.given_back,
    }
    raise FieldError(
        first["field"],
        f"{detail}; {len(outcome.refused)} of {len(ids)} refused, the others were {verb}",
        code,
        details,
    )


def ack(
    group: ReaderGroup,
    ids: object,
    sink: object = None,
    group_slots: list[Slot] | None = None,
    consumer: str = "",
) -> AckOutcome:
    """Acknowledge deliveries, in any order. For a fan-out group, `sink` says which sink
    acknowledges; an event counts once every sink has. A retried ack is harmless. `group_slots`:
    the group's `slots`, when the caller has them already; `consumer`: who acknowledges (the
    console lists the consumers seen). Refused deliveries (leases lost, never handed out) are a
    FieldError naming the first, raised once the others are acknowledged."""
    outcome, id_list = _ack(group, ids, sink, group_slots, consumer, "")
    _refusal(outcome, id_list, "acknowledged")
    return outcome


def ack_part(group: ReaderGroup, part: object, group_slots: list[Slot]) -> PendingAck:
    """The `ack` of a read that acknowledges the previous batch on its way (as an ack request's
    body: `delivery_ids`, and `sink` for a fan-out group), checked and ready to go on the read's
    first pipeline, before the read's own commands. Errors name `ack.…`. A malformed id refuses
    the whole request before anything is applied, as an ack does; deliveries refused as such (a
    lease lost, one never handed out, one handed out before a seek) are listed in the outcome's
    `refused`, the others acknowledged, and the read goes on: a consumer carrying the last batch's ack across a seek or a loss of Redis state
    keeps consuming."""
    if not isinstance(part, dict):
        raise FieldError("ack", "must be an object: delivery_ids, and sink for a group with sinks")
    unknown = sorted(set(part) - {"delivery_ids", "sink"})
    if unknown:
        raise FieldError(f"ack.{unknown[0]}", "is not a field of an ack")
    return _pending(group, part.get("delivery_ids"), part.get("sink"), group_slots, "ack.", lenient=True)


class PendingAck:
    """An ack parsed and checked, not applied yet: `queue` puts its scripts (one per segment) on
    a request's pipeline, `finish` reads their answers into the outcome and the floors to
    persist. A read carrying an ack queues them on its own first pipeline: one round trip, one
    floor update for both."""

    def __init__(
        self,
        group: ReaderGroup,
        ids: list,
        by_slot: dict[Where, Named],
        group_slots: list[Slot],
        sink,
        name,
        apart: list[Apart] | None = None,
    ):
        self.group, self.ids, self.by_slot, self.sink, self.name = group, ids, by_slot, sink, name
        self.apart = apart or []  # ids refused by their prefix alone
        self.slot_of = {(s.stream.pk, s.segment): s for s in group_slots}
        self.readers: list = []

    def queue(self, pipe: ScriptPipeline) -> None:
        """Queue the scripts (one per segment); `finish` reads their answers, in order (the
        caller takes them as one step: `ScriptPipeline.step`)."""
        sinks = self.group.sink_names
        self.readers = []
        for (sid, seg, life), named in self.by_slot.items():
            slot = self.slot_of[sid, seg]
            self.readers.append(
                (slot, named, slot.tracker.ack_runs(named.runs, self.sink, sinks, pipe=pipe, life=life))
            )

    def finish(self, answers: list) -> tuple[AckOutcome, list[tuple[Slot, int, int]]]:
        """The outcome, and the (slot, floor, missed) moves to persist, from the scripts' answers."""
        outcome = AckOutcome()
        moves = []
        for (slot, named, reader), answer in zip(self.readers, answers, strict=True):
            refused, floor = reader(answer)
            _tally(outcome, self.ids, named, refused, name=self.name, slot=slot)
            moves.append((slot, floor, 0))
        for i, why, first, last, epoch in self.apart:  # each delivery of a range on its own, as the scripts' refusals
            outcome.refused += [
                {"field": f"{self.name}[{i}]", "delivery_id": _one_id(self.ids[i], Delivery(o, epoch)), "reason": why}
                for o in range(first, last + 1)
            ]
        return outcome, moves


def _pending(
    group: ReaderGroup, ids: object, sink: object, group_slots: list[Slot] | None, prefix: str, lenient: bool = False
) -> PendingAck:
    """An ack checked (errors name `<prefix>delivery_ids` and `<prefix>sink`), ready to queue;
    `lenient` as `_parse_ids` has it."""
    sinks = group.sink_names
    if sinks:
        if sink not in sinks:
            raise FieldError(f"{prefix}sink", f"must be one of {', '.join(sinks)} (the group's sinks)")
    elif sink is not None:
        raise FieldError(f"{prefix}sink", "this group declares no sinks")
    group_slots = slots(group) if group_slots is None else group_slots
    id_list = _id_list(ids, f"{prefix}delivery_ids")
    by_slot, apart = _parse_ids(id_list, group_slots, f"{prefix}delivery_ids", lenient)
    return PendingAck(group, id_list, by_slot, group_slots, sink, f"{prefix}delivery_ids", apart)


def _ack(
    group: ReaderGroup,
    ids: object,
    sink: object,
    group_slots: list[Slot] | None,
    consumer: str,
    prefix: str,
) -> tuple[AckOutcome, list]:
    """`ack`, but refusals stay in the outcome; errors name `<prefix>delivery_ids` and
    `<prefix>sink`."""
    pending = _pending(group, ids, sink, group_slots, prefix)
    pipe = scripted_pipeline()
    with pipe.step() as acked:
        pending.queue(pipe)
    now = floors.clock()
    mark_seen(group, now, pipe)
    note_consumer(group, consumer, "a", now, pipe)
    pipe.execute()
    outcome, moves = pending.finish(acked.all())
    persist_floors(moves)
    maybe_checkpoint(group)
    count_consumer(group, consumer, "a", outcome.acked + outcome.waiting_for_sinks, now)
    return outcome, pending.ids


def nack(
    group: ReaderGroup,
    ids: object,
    delay_ms: int | None = 0,
    reason: str = "",
    group_slots: list[Slot] | None = None,
    sink: str | None = None,
) -> AckOutcome:
    """Give deliveries back: each is handed out again after `delay_ms` (None: after the group's
    backoff, at once without one). For a fan-out group, `sink` says which sink gives it back: the
    others that acknowledged it stay acknowledged."""
    if group.ack_policy == AckPolicy.NONE.value:
        raise FieldError(
            "delivery_ids",
            "the group's ack_policy is none (at-most-once): a delivery is processed when handed out "
            "and cannot be given back",
            "ack_policy_none",
        )
    if sink is not None and sink not in group.sink_names:
        names = ", ".join(group.sink_names)
        raise FieldError(
            "sink", f"must be one of {names} (the group's sinks)" if names else "this group declares no sinks"
        )
    group_slots = slots(group) if group_slots is None else group_slots
    id_list = _id_list(ids)
    by_slot, _ = _parse_ids(id_list, group_slots)
    slot_of = {(s.stream.pk, s.segment): s for s in group_slots}
    outcome = AckOutcome()
    now = floors.clock()
    delay_s = None if delay_ms is None else delay_ms / 1000
    backoff = tuple(group.backoff_s or ())
    for (sid, seg, life), named in by_slot.items():
        slot = slot_of[sid, seg]
        refused = slot.tracker.nack_runs(named.runs, now, delay_s, reason, backoff, sink, life=life)
        _tally(outcome, id_list, named, refused, nack=True, slot=slot)
    if outcome.given_back:
        # the group's waiting reads look again when the first of them is due (a read woken then
        # finds the next due time in Redis)
        wait_s = delay_s if delay_s is not None else min(backoff, default=0.0)
        publish_notice([group_channel(group.state_key)], int((now + wait_s) * 1000) if wait_s > 0 else None)
    _refusal(outcome, id_list, "given back")
    return outcome


def _one_id(raw: str, delivery: Delivery) -> str:
    """The id of one delivery named by `raw`: itself, or of one of the range it is."""
    if ".." not in raw:
        return raw
    prefix = raw.rsplit("-", 2)[0]
    return f"{prefix}-{delivery.offset}-{delivery.epoch}"


def _tally(
    outcome: AckOutcome,
    ids: list,
    named: Named,
    refused: dict[int, str],
    nack: bool = False,
    name: str = "delivery_ids",
    slot: Slot | None = None,
) -> None:
    """Count what a segment's script did with the deliveries `named` there: all of them but those
    `refused` (position among them → why) were acknowledged (given back, with `nack`). A
    delivery the script found no state for ('lost': Redis lost it, or the segment was never
    read) is told apart by what the database knows of the segment (`slot`): below the floor it
    was processed, at or past `handed` it was never handed out, and in between its lease was
    lost with the state."""
    if not refused:  # the common case: no delivery spelled out
        if nack:
            outcome.given_back += named.count
        else:
            outcome.acked += named.count
        return
    if slot is not None and "lost" in refused.values():
        fresh_positions([slot])  # told apart by what the database knows now, not what was remembered
    for k, (i, d) in enumerate(named.items()):
        reason = refused.get(k)
        if reason == "lost" and slot is not None:
            if d.offset < slot.position.floor:
                reason = "already-acked"
            elif d.offset >= max(slot.position.handed, slot.position.floor):
                reason = "unknown"
        if reason is None:
            if nack:
                outcome.given_back += 1
            else:
                outcome.acked += 1
        elif reason == "waiting-for-sinks":
            outcome.waiting_for_sinks += 1
        elif reason != "already-acked":
            outcome.refused.append({"field": f"{name}[{i}]", "delivery_id": _one_id(ids[i], d), "reason": reason})
