"""The acknowledgement rules of `domain.acks`, kept in Redis so that every web worker sees
one state and each step is atomic (one Lua script per read, per ack batch, per nack batch). The
plain model is the reference: the tests run the same random interleavings through both and
compare.

Keys, per subscription (a reader group on one stream) and segment, named by the subscription's
random `state_key` (never by database ids: a database recreated or restored beside a kept Redis
reuses ids, and a new group would take another's floor) and the segment; `{key:seg}` keeps them in
one Redis Cluster slot:
    cbr:acks:{key:seg}:state     hash: floor, next, halted (absent: not halted), abase, layout,
                               and counters redelivered, dead_lettered, skipped
    cbr:acks:{key:seg}:leased    bitmap: bit (offset - abase) set while the offset is handed out
                               (a live delivery: not acknowledged, given back or expired)
    cbr:acks:{key:seg}:leases    sorted set: one member per hand-out, by its leases' expiry,
                               naming its deliveries (offset and epoch; runs of first deliveries
                               as ranges); a lease it names is live while the offset's `leased`
                               bit is set and the offset's epoch is the one named
    cbr:acks:{key:seg}:sinks     hash: offset -> "sink,sink" that acknowledged its live delivery
    cbr:acks:{key:seg}:epochs    hash: offset -> deliveries so far, kept only where that is not
                               what `next` implies (1 below it, 0 from it): redeliveries, and
                               delayed events the stream's index handed back (0)
    cbr:acks:{key:seg}:acked     bitmap: bit (offset - abase) set once the offset is processed;
                               every bit below the floor is set (state's `abase`, a multiple
                               of 8 at or below the floor, moves up with it; both bitmaps are
                               cut below it)
    cbr:acks:{key:seg}:retry     sorted set: offset by the time it is due (again)
    cbr:acks:{key:seg}:poison    hash: offset -> what on_poison did (above the floor)
    cbr:acks:{key:seg}:dead      sorted set: offset by when its dead-letter append was claimed
    cbr:acks:{key:seg}:reason    hash: offset -> why it was last given back (nack reason, timeout)
    cbr:acks:{key:seg}:scratch   a mask of many bits, written and deleted within one script
If Redis loses these keys, the tracker starts again from the floor persisted in the database:
everything above it is delivered again (at-least-once), nothing is lost. A state kept in another
shape (`layout`: an older release's, whose `leases` held one member per offset) is treated the
same way by the next hand-out.
"""

from __future__ import annotations

import os
import random
import struct
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat

import numpy as np

from domain.acks import AckPolicy, AckResult, Delivery, HandOut, Poison
from groups.ack_scripts import (
    ACK_MANY,
    CLAIM,
    DEAD_LETTERED,
    FAN_OUT,
    HAND_OUT,
    IN_FLIGHT,
    LOOK,
    LOOK_MANY,
    NACK_MANY,
    READ_COUNTS,
)
from store.redis_connection import ScriptPipeline

_PREFIX = "cbr:acks:"
_PARTS = ("state", "leases", "sinks", "epochs", "acked", "retry", "poison", "dead", "reason", "leased", "scratch")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class TrackerState:
    """What the tests compare with the plain model."""

    floor: int
    next: int
    leases: dict[int, int]  # offset -> epoch
    acked: set[int]
    retry: dict[int, float]
    poisoned: dict[int, str]  # above the floor
    dead: dict[int, float]
    halted_at: int | None
    sinks_acked: dict[int, set[str]]  # offsets not processed yet, by the sinks that acked them


@dataclass(frozen=True)
class TrackerStats:
    """What the console and /metrics show of one group on one segment."""

    floor: int | None  # None: Redis holds nothing (never read, or lost)
    next: int | None
    pending: int  # live leases
    waiting: int  # due later: nacked with a delay, or a delayed event
    acked_above_floor: int
    dead_pending: int
    halted_at: int | None
    redelivered: int
    dead_lettered: int
    skipped: int


@dataclass(frozen=True)
class KnownCounts:
    """What the database knows of a segment's deliveries (`ReadPosition.handed`, `DeliveryCount`),
    for a state Redis starts afresh: offsets from the floor up to `handed` were handed out at
    least once, `counts` the highest count of those handed out more than once."""

    handed: int = 0
    counts: dict[int, int] = field(default_factory=dict)


KNOWN_NOTHING = KnownCounts()


def new_life() -> int:
    """A state's life, named in its delivery ids (`domain.delivery_ids.prefix`): random, so that
    no id of a state Redis lost names a delivery of the state started after it, whatever the
    database managed to persist in between."""
    return _random.randrange(1, 1_000_000_000)


# seeded from the system's randomness, and again in each forked process (a web worker's draws are
# not its siblings'); not a system call per draw, as SystemRandom's were (2 % of a 10 000-read
# fan-out's CPU)
_random = random.Random()
os.register_at_fork(after_in_child=_random.seed)

_SCRIPT_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scripts(redis) -> tuple:
    """The scripts, registered once per client (registering hashes the source)."""
    if redis not in _SCRIPT_CACHE:
        _SCRIPT_CACHE[redis] = tuple(
            redis.register_script(src)
            for src in (
                HAND_OUT,
                ACK_MANY,
                NACK_MANY,
                DEAD_LETTERED,
                FAN_OUT,
                READ_COUNTS,
                IN_FLIGHT,
                CLAIM,
                LOOK,
                LOOK_MANY,
            )
        )
    return _SCRIPT_CACHE[redis]


class SegmentTracker:
    """One reader group's acknowledgement state on one segment, in Redis."""

    def __init__(self, redis, subscription_key: str, segment: str, index_key: str = ""):
        """`subscription_key`: the subscription's `state_key`; `index_key`: the state hash of the
        stream's delayed index (its `released` time and `recovered` mark; see streams.delaying)."""
        self.redis = redis
        self.keys = self.keys_of(subscription_key, segment)
        self.index_key = index_key or f"{_PREFIX}{{{subscription_key}:{segment}}}:no-index"
        self.life = 0  # of the state, as the last hand-out through this tracker found it
        (
            self._hand_out,
            self._ack,
            self._nack,
            self._dead_lettered,
            self._fan_out,
            self._read_counts,
            self._in_flight,
            self._claim,
            self._look,
            self._look_many,
        ) = _scripts(redis)

    @staticmethod
    def keys_of(subscription_key: str, segment: str) -> list[str]:
        tag = f"{_PREFIX}{{{subscription_key}:{segment}}}"
        return [f"{tag}:{part}" for part in _PARTS]

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
        delayed: dict[int, float] | None = None,
        scan_until: int | None = None,
        present: list[int] | None = None,
        backoff: Sequence[float] = (),
        ack_policy: AckPolicy = AckPolicy.EXPLICIT,
        pipe: ScriptPipeline | None = None,
        runs: bool = False,
        known: KnownCounts | None = KNOWN_NOTHING,
        owned: bool = False,
        expired: Sequence[int] = (),
    ):
        """As `SegmentAcks.hand_out`; with `owned` (an ordered group), only if `consumer` owns
        the segment now (`claim`), checked in the same call; the consumer's name ("": unnamed) goes with the hand-out's
        leases, for `in_flight` (a lease is a lease: any consumer may acknowledge it). With
        `pipe`, queues the script and returns a function that reads its answer into the HandOut
        (a read's segments then hand out in one round trip). `runs`: its first deliveries as
        runs (`HandOut.first_runs`), not spelled out in `deliveries`. `known`: what the database
        knows of the deliveries so far, read after the caller found no state in Redis; a state
        is started only from it (None: the caller saw a state, and if it is gone meanwhile this
        hand-out gives nothing and says so with `life` -1)."""
        args = self._hand_out_args(
            now,
            consumer,
            limit,
            tail,
            lease_s,
            max_deliveries,
            on_poison,
            floor,
            head,
            delayed,
            scan_until,
            present,
            backoff,
            ack_policy,
            known,
            owned,
            expired,
        )
        keys = [*self.keys, self.index_key]
        as_hand_out = _handed_out_as_runs if runs else _handed_out

        def read(answer: list) -> HandOut:
            out = as_hand_out(answer)
            if out.life >= 0:
                self.life = out.life
            return out

        if pipe is not None:
            pipe.run_script(self._hand_out, keys, args)
            return read
        return read(self._hand_out(keys=keys, args=args))

    @staticmethod
    def _hand_out_args(
        now,
        consumer,
        limit,
        tail,
        lease_s,
        max_deliveries,
        on_poison,
        floor,
        head,
        delayed,
        scan_until,
        present,
        backoff,
        ack_policy,
        known,
        owned,
        expired=(),
    ) -> list:
        seeded = known is not None
        known = known or KNOWN_NOTHING
        return [
            now,
            limit,
            tail,
            lease_s,
            max_deliveries,
            Poison(on_poison).value,
            tail if scan_until is None else scan_until,
            floor,
            head,
            ",".join(f"{o}:{due!r}" for o, due in (delayed or {}).items()),
            "" if present is None else ",".join(map(str, present)),
            "0" if present is None else "1",
            ",".join(map(repr, map(float, backoff))),
            AckPolicy(ack_policy).value,
            max(known.handed, floor),
            ",".join(f"{o}:{c}" for o, c in known.counts.items()),
            "1" if seeded else "0",
            new_life(),
            consumer,
            "1" if owned else "0",
            ",".join(map(str, expired)),
        ]

    def look(
        self,
        expected_next: int,
        most_live: int,
        now: float,
        consumer: str,
        limit: int,
        tail: int,
        lease_s: float,
        max_deliveries: int,
        on_poison: Poison,
        *,
        pipe: ScriptPipeline,
        floor: int = 0,
        head: int = 0,
        delayed: dict[int, float] | None = None,
        scan_until: int | None = None,
        backoff: Sequence[float] = (),
        ack_policy: AckPolicy = AckPolicy.EXPLICIT,
        noted: tuple[list[str], list] | None = None,
        expired: Sequence[int] = (),
        batch: LookBatch | None = None,
    ):
        """A read's counts (`read_counts`) and, if the segment's state is as a read that knows
        where it stopped expects (`next` at `expected_next`, nothing halted, expired, due again or
        to dead-letter, at most `most_live` live leases), its hand-out from there (as
        `hand_out(..., runs=True, known=None)`, its records read ahead from `expected_next`), in
        one call queued on `pipe`. Returns a function that reads its answer into (the counts, the
        HandOut; None when the state was not as expected: nothing changed, and the caller hands
        out as a read that counted first). `noted`: what the read writes of its group besides
        (`floors.read_noted`), written by the same call. With `batch` (and `noted`), the look
        joins the looks of other reads at the same place of the segment (`LookBatch`): one call
        for them all, queued by `batch.queue(pipe)`; its function (called with no argument
        once the pipeline has run) reads the look's own answer out of that call's."""

        def read(answer: list) -> tuple[list, HandOut | None]:
            counts, handed = answer
            if not handed:
                return counts, None
            out = _handed_out_as_runs(handed)
            if out.life >= 0:
                self.life = out.life
            return counts, out

        def look_args() -> tuple[list, list]:
            return self.look_args(
                expected_next,
                most_live,
                now,
                consumer,
                limit,
                tail,
                lease_s,
                max_deliveries,
                on_poison,
                floor,
                head,
                delayed,
                scan_until,
                backoff,
                ack_policy,
                noted,
                expired,
            )

        if batch is not None and noted is not None:
            place = (self.index_key, expected_next, limit, tail, scan_until, head, now, id(delayed), id(expired))
            mine = (
                lease_s,
                max_deliveries,
                Poison(on_poison).value,
                floor,
                ",".join(map(repr, map(float, backoff))),
                AckPolicy(ack_policy).value,
                consumer,
                most_live,
                noted[1][1],
            )
            return batch.add(place, self, [*self.keys, *noted[0]], mine, (delayed, expired), read, look_args)
        keys, args = look_args()
        pipe.run_script(self._look, keys, args)
        return read

    def look_args(
        self,
        expected_next,
        most_live,
        now,
        consumer,
        limit,
        tail,
        lease_s,
        max_deliveries,
        on_poison,
        floor,
        head,
        delayed,
        scan_until,
        backoff,
        ack_policy,
        noted,
        expired,
    ) -> tuple[list, list]:
        """`look`'s keys and arguments (LOOK's)."""
        args = self._hand_out_args(
            now,
            consumer,
            limit,
            tail,
            lease_s,
            max_deliveries,
            on_poison,
            floor,
            head,
            delayed,
            scan_until,
            None,
            backoff,
            ack_policy,
            None,
            False,
            expired,
        )
        keys, more = [*self.keys, self.index_key], [expected_next, most_live]
        if noted is not None:
            keys += noted[0]
            more += noted[1]
        return keys, [*args, *more]

    def fan_out(self, due: dict[int, float] | bytes, pipe: ScriptPipeline | None = None) -> list[int] | None:
        """As `SegmentAcks.fan_out`; `due` may come packed already (`released_packed`, built
        once for every group); with `pipe`, queued on the pipeline (returns None)."""
        args = [due if isinstance(due, bytes) else released_packed(due.keys(), due.values())]
        if pipe is not None:
            pipe.run_script(self._fan_out, self.keys, args)
            return None
        return [int(o) for o in self._fan_out(keys=self.keys, args=args)]

    def ack_many(
        self, deliveries: list[Delivery], sink: str | None = None, sinks: tuple[str, ...] = ()
    ) -> tuple[list[AckResult], int]:
        """Acknowledge a batch; returns each delivery's result and the floor after them (the
        acks of a request go by `ack_runs`, on its pipeline)."""
        refused, floor = self.ack_runs(runs_of(deliveries), sink, sinks)
        return _as_results(len(deliveries), refused, floor)

    def ack_runs(
        self,
        runs: list[Run],
        sink: str | None = None,
        sinks: tuple[str, ...] = (),
        pipe: ScriptPipeline | None = None,
        life: int | None = None,
    ):
        """`ack_many` of the deliveries these runs name (each run: first offset, last offset
        included, epoch), in that order, without a Python object per delivery; `life`: the life
        their ids name (a delivery of another life holds no live lease; None: the life the last
        hand-out through this tracker found). Returns the
        deliveries not counted (0-based position in that order → why) and the floor after them;
        with `pipe`, queues the script and returns a function that reads its answer so."""
        args = [sink or "", len(sinks), *sinks, self.life if life is None else life, _packed_runs(runs)]
        if pipe is not None:
            pipe.run_script(self._ack, self.keys, args)
            return lambda answer: (_refused(answer[1]), int(answer[0]))
        floor, bad = self._ack(keys=self.keys, args=args)
        return _refused(bad), int(floor)

    def ack(self, delivery: Delivery, sink: str | None = None, sinks: tuple[str, ...] = ()) -> AckResult:
        return self.ack_many([delivery], sink, sinks)[0][0]

    def nack_many(
        self,
        deliveries: list[Delivery],
        now: float,
        delay_s: float | None = 0.0,
        reason: str = "",
        backoff: Sequence[float] = (),
        sink: str | None = None,
    ) -> list[AckResult]:
        """As `SegmentAcks.nack`, for a batch (`delay_s` None: the group's backoff)."""
        refused = self.nack_runs(runs_of(deliveries), now, delay_s, reason, backoff, sink)
        return _as_results(len(deliveries), refused)[0]

    def nack_runs(
        self,
        runs: list[Run],
        now: float,
        delay_s: float | None = 0.0,
        reason: str = "",
        backoff: Sequence[float] = (),
        sink: str | None = None,
        life: int | None = None,
    ) -> dict[int, str]:
        """`nack_many` of the deliveries these runs name (their ids of `life`); returns those not
        given back (0-based position → why)."""
        delay = "" if delay_s is None else repr(float(delay_s))
        args = [
            now,
            delay,
            reason,
            ",".join(map(repr, map(float, backoff))),
            sink or "",
            self.life if life is None else life,
            _packed_runs(runs),
        ]
        return _refused(self._nack(keys=self.keys, args=args))

    def nack(
        self,
        delivery: Delivery,
        now: float,
        delay_s: float | None = 0.0,
        reason: str = "",
        backoff: Sequence[float] = (),
        sink: str | None = None,
    ) -> AckResult:
        return self.nack_many([delivery], now, delay_s, reason, backoff, sink)[0]

    def dead_lettered(self, offsets: list[int]) -> int:
        """The appends of these offsets to the dead-letter stream are durable; returns the floor."""
        return int(self._dead_lettered(keys=self.keys, args=offsets)) if offsets else 0

    def read_counts(self, now: float, lease_s: float, pipe: ScriptPipeline | None = None):
        """What a read needs to know first, in one script: [next, halted (both None when unset),
        live leases, leases expired by `now` and not yet given back, retries due by `now`,
        dead-letter claims older than `lease_s`, the earliest time something comes due later
        (None: nothing will)]; with `pipe`, queued on the pipeline, whose answer is that list."""
        if pipe is not None:
            pipe.run_script(self._read_counts, self.keys, [now, lease_s])
            return None
        return self._read_counts(keys=self.keys, args=[now, lease_s])

    def in_flight(self, now: float, pipe: ScriptPipeline | None = None):
        """The live leases not expired by `now`, counted by the consumer each was handed to ("":
        unnamed), as `SegmentAcks.in_flight`; with `pipe`, queued, its answer read by
        `in_flight_of`."""
        if pipe is not None:
            pipe.run_script(self._in_flight, self.keys, [now])
            return None
        return in_flight_of(self._in_flight(keys=self.keys, args=[now]))

    def owner(self, pipe=None):
        """An ordered group's owner of the segment ("": none); with `pipe`, queued (its answer
        bytes or None)."""
        if pipe is not None:
            pipe.hget(self.keys[0], "owner")
            return None
        return _text(self.redis.hget(self.keys[0], "owner") or b"")

    def leases_live(self, now: float, pipe):
        """Queue the count of leases not expired by `now` (deliveries in flight) on `pipe`."""
        pipe.zcount(self.keys[1], f"({now!r}", "+inf")

    def claim(self, now: float, consumer: str, pipe: ScriptPipeline | None = None):
        """Make `consumer` ("": nobody) the segment's owner, unless another owner still has
        deliveries of it in flight; returns the owner after it (with `pipe`, queued)."""
        if pipe is not None:
            pipe.run_script(self._claim, self.keys, [now, consumer])
            return None
        return _text(self._claim(keys=self.keys, args=[now, consumer]))

    def lease_counts(self, now: float) -> tuple[int, int]:
        """(live leases, leases expired by `now` and not yet given back)."""
        _, _, live, expired, _, _, _ = self.read_counts(now, 0.0)
        return int(live), int(expired)

    def reasons(self, offsets: list[int]) -> dict[int, str]:
        if not offsets:
            return {}
        values = self.redis.hmget(self.keys[8], offsets)
        return {o: _text(v) for o, v in zip(offsets, values, strict=True) if v is not None}

    def state(self) -> TrackerState:
        r = self.redis
        state = {_text(k): _text(v) for k, v in r.hgetall(self.keys[0]).items()}
        nxt = int(state.get("next", 0))
        epochs = {int(k): int(v) for k, v in r.hgetall(self.keys[3]).items()}
        base, floor = int(state.get("abase", 0)), int(state.get("floor", 0))
        leased = _bits_from(r.get(self.keys[9]) or b"", base, base)  # all: one below the floor is a fault
        acked = _bits_from(r.get(self.keys[4]) or b"", base, floor)
        sinks = {
            int(o): set(_text(names).split(","))
            for o, names in r.hgetall(self.keys[2]).items()
            if int(o) >= floor and int(o) not in acked
        }
        return TrackerState(
            floor=int(state.get("floor", 0)),
            next=nxt,
            leases={o: epochs.get(o, 1 if o < nxt else 0) for o in leased},
            acked=acked,
            retry={int(m): s for m, s in r.zrange(self.keys[5], 0, -1, withscores=True)},
            poisoned={int(k): _text(v) for k, v in r.hgetall(self.keys[6]).items()},
            dead={int(m): s for m, s in r.zrange(self.keys[7], 0, -1, withscores=True)},
            halted_at=int(state["halted"]) if "halted" in state else None,
            sinks_acked=sinks,
        )

    def forget(self) -> None:
        self.redis.delete(*self.keys)


_OK = AckResult(True)


class LookBatch:
    """The looks of many reads gathered by the place of a segment they look at (the same state
    of the stream's index, expected `next`, events asked for, ends and records read ahead:
    `SegmentTracker.look(..., batch=)`), each group's state its own. `queue` puts one call on a
    pipeline per place and per `PER_CALL` reads (LOOK_MANY: the arguments they share sent once),
    or the look alone (LOOK) for a place one read looks at; each look's function reads its own
    answer once the pipeline has run. A woken fan-out's thousand reads thus send a few dozen
    calls, not a thousand."""

    PER_CALL = 64  # reads per call: Redis runs a call alone, so it stays short (tens of microseconds a read)

    def __init__(self) -> None:
        self._places: dict[tuple, _Place] = {}

    def add(self, place: tuple, tracker: SegmentTracker, keys: list, mine: tuple, keep: tuple, read, shared):
        """A look at `place` (`keys`: its 11 state keys and its group's two noted keys; `mine`:
        its own arguments, as LOOK_MANY takes them; `keep`: objects whose identity `place`
        names, kept alive with it; `shared`: what makes the whole LOOK arguments of this look).
        Returns the function that reads its answer (`SegmentTracker.look`'s)."""
        at = self._places.get(place)
        if at is None:
            at = self._places[place] = _Place(tracker, shared, keep)
        held: list = []
        at.members.append((keys, mine, held))

        def read_mine(_answer=None):
            answers, i = held
            answer = answers.one()
            return read(answer if i is None else answer[i])

        return read_mine

    def queue(self, pipe: ScriptPipeline) -> None:
        """One call per place (per `PER_CALL` of its reads) on `pipe`."""
        for at in self._places.values():
            keys, args = at.shared()
            members = at.members
            if len(members) == 1:
                with pipe.step() as answers:
                    pipe.run_script(at.tracker._look, keys, args)
                members[0][2].extend((answers, None))
                continue
            for start in range(0, len(members), self.PER_CALL):
                part = members[start : start + self.PER_CALL]
                call_keys = keys[:12]
                call_args = [*args, len(part)]
                for mine_keys, mine, _ in part:
                    call_keys += mine_keys
                    call_args += mine
                with pipe.step() as answers:
                    pipe.run_script(at.tracker._look_many, call_keys, call_args)
                for i, (_, _, held) in enumerate(part):
                    held.extend((answers, i))
        self._places = {}


@dataclass
class _Place:
    tracker: SegmentTracker
    shared: Callable[[], tuple[list, list]]  # the keys and arguments of the first look's LOOK call
    keep: tuple
    members: list = field(default_factory=list)


def in_flight_of(answer: list) -> dict[str, int]:
    """The IN_FLIGHT script's answer ({owner, count, …}) as consumer -> leases."""
    return {_text(answer[i]): int(answer[i + 1]) for i in range(0, len(answer), 2)}


def _handed_out(answer: list) -> HandOut:
    """The HAND_OUT script's answer as a HandOut."""
    out = _handed_out_as_runs(answer)
    deliveries = out.deliveries
    for a, b in out.first_runs:  # one Delivery per event, made in C
        deliveries += map(tuple.__new__, repeat(Delivery), zip(range(a, b), repeat(1)))
    return replace(out, first_runs=[])


def _handed_out_as_runs(answer: list) -> HandOut:
    """The HAND_OUT script's answer as a HandOut whose first deliveries stay runs (`first_runs`)."""
    again, first, dead, missed, new_floor, nxt, sinks_done, life, expired = answer
    deliveries = []
    if again:
        for item in _text(again).split(","):
            offset, epoch = item.split(":")
            deliveries.append(Delivery(int(offset), int(epoch)))
    first_runs = []
    if first:  # runs "a-b" of first deliveries (offsets a to b - 1)
        for run in _text(first).split(","):
            a, _, b = run.partition("-")
            first_runs.append((int(a), int(b)))
    done = {}
    if sinks_done:
        for item in _text(sinks_done).split(";"):
            offset, _, names = item.partition("=")
            done[int(offset)] = tuple(names.split(","))
    return HandOut(
        deliveries,
        [int(o) for o in dead],
        int(missed),
        int(new_floor),
        int(nxt),
        done,
        first_runs,
        int(life),
        int(expired),
    )


Run = tuple[int, int, int]  # deliveries of offsets first to last (included) at one epoch


def runs_of(deliveries: list[Delivery]) -> list[Run]:
    """The deliveries as runs, in their order: consecutive offsets at one epoch make one run."""
    runs: list[list[int]] = []
    for offset, epoch in deliveries:
        if runs and runs[-1][2] == epoch and runs[-1][1] + 1 == offset:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset, epoch])
    return [(a, b, e) for a, b, e in runs]


def _packed_runs(runs: list[Run]) -> bytes:
    """The runs as one msgpack array: first offset (uint 64), last offset (uint 64), epoch
    (uint 32), first, … (the scripts decode it with cmsgpack, in C, and spell the runs out).
    Offsets and epochs are whole numbers ≥ 0 (acking parses them as digits, at most 18 and 9),
    and a run's last offset is not below its first."""
    flat: list[int] = [0xDD, 3 * len(runs)]
    for first, last, epoch in runs:
        flat += (0xCF, first, 0xCF, last, 0xCE, epoch)
    return struct.pack(">BI" + "BQBQBI" * len(runs), *flat)


def released_packed(offsets, dues) -> bytes:
    """Released delayed events for FAN_OUT as one msgpack array: offset (uint 64), due (float 64,
    seconds), offset, … (decoded in C)."""
    offsets, dues = list(offsets), list(dues)
    if len(offsets) != len(dues):
        raise ValueError("one due per offset")
    items = np.empty(len(offsets), dtype=_RELEASED)
    items["o_tag"], items["offset"], items["d_tag"], items["due"] = 0xCF, offsets, 0xCB, dues
    return struct.pack(">BI", 0xDD, 2 * len(offsets)) + items.tobytes()


_RELEASED = np.dtype([("o_tag", "u1"), ("offset", ">u8"), ("d_tag", "u1"), ("due", ">f8")])


def _bits_from(bitmap: bytes, base: int, floor: int) -> set[int]:
    """The offsets at or above the floor whose bits are set (`acked`, `leased`)."""
    out = set()
    for i, byte in enumerate(bitmap):
        if byte:
            for bit in range(8):
                if byte & (0x80 >> bit) and base + 8 * i + bit >= floor:
                    out.add(base + 8 * i + bit)
    return out


def _refused(bad: list) -> dict[int, str]:
    """The script's (1-based index, reason) pairs as 0-based position → reason."""
    return {int(bad[i]) - 1: _text(bad[i + 1]) for i in range(0, len(bad), 2)}


def _as_results(n: int, refused: dict[int, str], floor: int = 0) -> tuple[list[AckResult], int]:
    """Each of n deliveries' result (all acknowledged but the refused), and the floor."""
    results = [_OK] * n
    for i, reason in refused.items():
        results[i] = AckResult(False, reason)
    return results, floor


def stats_many(redis, trackers: list[SegmentTracker]) -> list[TrackerStats]:
    """The stats of many trackers in one round trip."""
    pipe = redis.pipeline(transaction=False)
    for t in trackers:
        state_key, _, _, _, acked, retry, _, dead, _, leased, _ = t.keys
        pipe.hgetall(state_key)
        pipe.bitcount(leased)
        pipe.zcard(retry)
        pipe.bitcount(acked)
        pipe.zcard(dead)
    answers = pipe.execute()
    out = []
    for i in range(len(trackers)):
        state_raw, pending, waiting, acked, dead = answers[5 * i : 5 * i + 5]
        state = {_text(k): int(v) for k, v in state_raw.items() if k != b"owner"}  # (an ordered group's owner: a name)
        acked -= state.get("floor", 0) - state.get("abase", 0)  # the bits below the floor
        out.append(
            TrackerStats(
                floor=state.get("floor"),
                next=state.get("next"),
                pending=pending,
                waiting=waiting,
                acked_above_floor=acked,
                dead_pending=dead,
                halted_at=state.get("halted"),
                redelivered=state.get("redelivered", 0),
                dead_lettered=state.get("dead_lettered", 0),
                skipped=state.get("skipped", 0),
            )
        )
    return out
