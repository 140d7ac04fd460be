"""Reading: a read's passes (`groups.consuming.read_pass`) and its wait between them. A read
that finds nothing waits for a wake-up (a publish, a lease or a retry coming due, a seek) in its
thread, or parked without one (`read_woken`, the ASGI front's), and is read again as its group
is now (docs/design/acks.md, docs/design/waiting-reads.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from domain.errors import FieldError
from groups.consuming import floors
from groups.consuming.acking import PendingAck, ack_part
from groups.consuming.answers import ReadResult
from groups.consuming.floors import (
    GROUP_CHANGES,
    Slot,
    group_and_slots,
    note_waiting,
    note_waiting_all,
    slots,
)
from groups.consuming.read_pass import Waiting, read_passes
from groups.models import ReaderGroup
from streams import wait_stats, waking
from streams.delaying.index import hot_states
from streams.delaying.stream_index import index_of
from streams.models import Stream
from streams.waking import group_channel, stream_channel


def read(
    group: ReaderGroup,
    max_events: int,
    wait_ms: int = 0,
    consumer: str = "",
    group_slots: list[Slot] | None = None,
    ack: object = None,
    ranges: bool = False,
    frames: bool = False,
    park: bool = False,
) -> ReadResult:
    """Up to `max_events` deliveries, fair across the group's segments; with `wait_ms`, waits up
    to that long for the first one (long poll), woken by what makes events available to the
    group (`streams.waking`), never polling. `group_slots`: the group's `slots`, when the
    caller has them already. `ack`: the previous batch's acknowledgement (`acking.ack_part`),
    applied first: one request where a consumer would send two (JetStream's AckNext). `ranges`:
    the answer also names its deliveries as id ranges (`delivery_ranges`), which an ack takes
    in place of the ids: a few strings where a batch has a thousand ids. `frames`: the events
    read from the log are left as stored (`framing.Frame`), for an answer that sends them so
    (`streams.wire.encode_read_batch`). `park`: instead of waiting in this thread, answer a
    result whose `wait` (a `GroupWait`) says what to wait for: the ASGI front waits without a
    thread, then reads again with `read_woken`."""
    group_slots = slots(group) if group_slots is None else group_slots
    pending = None if ack is None else ack_part(group, ack, group_slots)
    channels = wake_channels(group, group_slots) if wait_ms > 0 else ()
    deadline = time.monotonic() + wait_ms / 1000
    reading = Waiting(group, group_slots, max_events, consumer or "default", ranges, frames, channels, deadline)
    reading.ticket = GROUP_CHANGES.ticket() if channels else None
    while True:
        seen = waking.listener().snapshot(channels) if channels else None
        try:
            result = read_passes([(reading, pending)])[0]
        except (RedisConnectionError, RedisTimeoutError):
            # Redis lost while the read waits: it waits on (looking every `FALLBACK_POLL_S`) and
            # answers 503 only if Redis is still gone when its wait ends
            if not reading.woken or deadline - time.monotonic() <= 0:
                raise
            result = ReadResult()
        if pending is not None:  # applied by the first pass, on its first pipeline
            reading.acked, pending = result.acked, None
        result = _looked(reading, result, seen)
        if result.wait is None or park:
            return result
        reading.woken = waking.wait(channels, reading.group_key, result.wait.seen, result.wait.timeout_s)
        gone = _as_it_is_now([reading])
        if gone:
            raise gone[0]
        channels = reading.channels


@dataclass
class ReadArgs:
    """One read of many sent together (`read_many`): `read`'s arguments."""

    group: ReaderGroup
    group_slots: list[Slot]
    max_events: int
    wait_ms: int = 0
    consumer: str = ""
    ack: object = None
    ranges: bool = False


def read_many(reads: list[ReadArgs]) -> list[ReadResult | Exception]:
    """The first pass of many reads sent together (one request carrying many consumers' reads):
    each answered, or parked (its `wait` set) as `read(..., park=True)` answers it, in one pass
    for all (`read_passes`: one round trip to Redis for all their counts, one statement for all
    their floors). What a read's own carried ack refuses is that read's answer alone; a pass that
    meets Redis or the database gone is every read's."""
    out: list[ReadResult | Exception | None] = [None] * len(reads)
    started: list[tuple[int, Waiting, PendingAck | None]] = []
    for n, args in enumerate(reads):
        try:
            pending = None if args.ack is None else ack_part(args.group, args.ack, args.group_slots)
        except Exception as exc:  # noqa: BLE001 - this read's answer (a refusal, or a bug answered as one)
            out[n] = exc
            continue
        channels = wake_channels(args.group, args.group_slots) if args.wait_ms > 0 else ()
        deadline = time.monotonic() + args.wait_ms / 1000
        reading = Waiting(
            args.group,
            args.group_slots,
            args.max_events,
            args.consumer or "default",
            args.ranges,
            False,
            channels,
            deadline,
        )
        reading.ticket = GROUP_CHANGES.ticket() if channels else None
        started.append((n, reading, pending))
    seens = waking.listener().snapshots(reading.channels for _, reading, _ in started)
    try:
        results: list[ReadResult] = read_passes([(reading, pending) for _, reading, pending in started])
    except Exception as exc:  # noqa: BLE001 - every read's answer (503 for a service lost)
        for n, _, _ in started:
            out[n] = exc
        return out  # type: ignore[return-value]
    waits: list[tuple[ReaderGroup, str, float]] = []
    for (n, reading, pending), result, seen in zip(started, results, seens, strict=True):
        if pending is not None:
            reading.acked = result.acked
        out[n] = _looked(reading, result, seen if reading.channels else None, waits)
    note_waiting_all(waits)
    return out  # type: ignore[return-value]


def read_woken(reads: list[Waiting], causes: list[str]) -> list[ReadResult | Exception]:
    """The next pass of parked reads (`read(..., park=True)`), woken by `causes`: all of them
    at once (`read_passes`), each answered or parked again as `read` would. A read whose pass
    failed because Redis is gone waits on, or gets the error once its wait is over."""
    for reading, cause in zip(reads, causes, strict=True):
        reading.woken = cause
    out: list[ReadResult | Exception | None] = [None] * len(reads)
    for n, error in _as_it_is_now(reads).items():
        out[n] = error
    which = [n for n, answer in enumerate(out) if answer is None]
    live = [reads[n] for n in which]
    seens = waking.listener().snapshots(reading.channels for reading in live)
    try:
        results: list[ReadResult] = read_passes([(reading, None) for reading in live])
    except (RedisConnectionError, RedisTimeoutError) as exc:
        now = time.monotonic()
        results = [exc if reading.deadline - now <= 0 else ReadResult() for reading in live]  # type: ignore[misc]
    waits: list[tuple[ReaderGroup, str, float]] = []
    for n, reading, result, seen in zip(which, live, results, seens, strict=True):
        out[n] = result if isinstance(result, Exception) else _looked(reading, result, seen, waits)
    note_waiting_all(waits)
    return out  # type: ignore[return-value]


def _as_it_is_now(reads: list[Waiting]) -> dict[int, Exception]:
    """Reads that waited take their group as it is now: a group whose generation moved on while
    they waited (a seek, new settings, a stream added or removed), or one of whose streams scaled
    (new segments), is loaded again with its
    positions and the channels to wait on, for the pass to read from where the group is, not
    from where it was. A read whose group was deleted meanwhile (by its index) gets
    `reader_group_not_found`, as its request would now. The database is asked (one query for
    all) only for reads whose `GROUP_CHANGES` ticket no longer holds: a group changed somewhere,
    or a change may have gone unheard (the listener lost its subscription)."""
    now = GROUP_CHANGES.ticket()  # before the query: a change made during it is seen next time
    unsure = [n for n, reading in enumerate(reads) if now is None or reading.ticket != now]
    if not unsure:
        return {}
    generations = dict(
        ReaderGroup.objects.filter(pk__in={reads[n].group.pk for n in unsure}).values_list("pk", "generation")
    )
    epochs = dict(
        Stream.objects.filter(pk__in={s.stream.pk for n in unsure for s in reads[n].group_slots}).values_list(
            "pk", "epoch"
        )
    )
    gone: dict[int, Exception] = {}
    for n in unsure:
        reading = reads[n]
        reading.ticket = now
        group = reading.group
        scaled = any(epochs.get(s.stream.pk, s.stream.epoch) != s.stream.epoch for s in reading.group_slots)
        if generations.get(group.pk) == group.generation and not scaled:
            continue
        found = group_and_slots(group.scope.name, group.name) if group.pk in generations else None
        if found is None or found[0].pk != group.pk:
            gone[n] = FieldError("reader_group", f"{group} was deleted while the read waited", "reader_group_not_found")
            continue
        reading.group, reading.group_slots = found
        if reading.channels:
            reading.channels = wake_channels(*found)
    return gone


@dataclass
class GroupWait(waking.Wait):
    """What a group's parked read waits for, and the read (for `read_woken`)."""

    reading: Waiting | None = None


def _looked(
    reading: Waiting,
    result: ReadResult,
    seen: waking.Snapshot | None,
    waits: list[tuple[ReaderGroup, str, float]] | None = None,
) -> ReadResult:
    """A pass's result, final, or (when it found nothing and may wait on) with the `wait` it
    waits for; `seen` is what the listener had seen before the pass looked. `waits`: where a
    read that waits says so (`floors.note_waiting_all`, once for many reads), else said now."""
    result.acked = reading.acked
    left = reading.deadline - time.monotonic()
    if result.parts or result.pending_limit_reached or left <= 0 or seen is None:
        if reading.since is not None:
            wait_stats.waited(time.monotonic() - reading.since)
        if reading.woken and sum(len(p.items) for p in result.parts) >= reading.max_events:
            waking.listener().wake_more(reading.group_key, reading.channels)  # more may be there for the next waiter
        return result
    timeout = _wait_for(reading.group_slots, result, left)
    reading.since = time.monotonic() if reading.since is None else reading.since
    if waits is None:
        note_waiting(reading.group, reading.consumer, timeout)
    else:
        waits.append((reading.group, reading.consumer, timeout))
    result.wait = GroupWait(
        reading.channels, reading.group_key, seen, timeout, reading.deadline, reading.since, reading
    )
    return result


def wake_channels(group: ReaderGroup, group_slots: list[Slot]) -> tuple[str, ...]:
    """The channels a waiting read of the group listens on: its streams', then its own."""
    streams = dict.fromkeys(slot.stream.storage_key for slot in group_slots)
    return (*map(stream_channel, streams), group_channel(group.state_key))


def _wait_for(group_slots: list[Slot], result: ReadResult, left: float) -> float:
    """How long a read that found nothing waits before it looks again, at most `left`: until
    the earliest thing that comes due (a lease, a retry, a delayed event of its streams), and no
    longer than `waking.FALLBACK_POLL_S` while the wake-up channel is down."""
    now = floors.clock()
    try:
        delayed = result.delayed_due if result.delayed_known else _next_delayed(group_slots)
    except (RedisConnectionError, RedisTimeoutError):  # Redis lost: look again soon
        return min(left, waking.FALLBACK_POLL_S)
    due = [t - now for t in (result.next_due, delayed) if t is not None]
    timeout = min([left, *due])
    if not waking.listener().healthy:
        timeout = min(timeout, waking.FALLBACK_POLL_S)
    return max(timeout, 0.001)


def _next_delayed(group_slots: list[Slot]) -> float | None:
    """The earliest delivery time of a delayed event held by the indexes of the group's streams
    (seconds), if any."""
    streams = list({slot.stream.pk: slot.stream for slot in group_slots}.values())
    dues = [st.next_due for st in hot_states([index_of(stream) for stream in streams]) if st.next_due is not None]
    return min(dues) / 1000 if dues else None
