"""What each consumer of a reader group does, by the name it reads under (`consumer`; unnamed reads
are `default`): when it last read and acknowledged, whether a read of its waits now, how many
events per second were handed to it and acknowledged by it over the last minute, and how many
deliveries are in its hands (leases handed to it, neither acknowledged, given back nor expired).

The times and the waiting mark come from each request (`floors.note_consumer`,
`floors.note_waiting`), the counts from the web processes' tallies added into Redis every second
(`floors.count_consumer`), the deliveries in flight from the leases themselves (each hand-out
names the consumer it was for: `SegmentTracker.in_flight`). A consumer silent for a day is
forgotten here. Nothing here costs a read or an ack anything."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from domain.rates import windowed_rate
from groups.ack_tracker import SegmentTracker, in_flight_of
from groups.consuming import floors
from groups.consuming.floors import CONSUMER_SHOWN_S, RATE_WINDOW_S, consumers_key, rates_key
from groups.models import ReaderGroup, Subscription
from store.redis_connection import as_text, get_redis, scripted_pipeline

DEFAULT = "default"  # the name of a consumer that gives none
OTHERS = "_other"  # the consumer label of those past a group's bound in /metrics


@dataclass(frozen=True)
class ConsumerFigures:
    name: str
    last_read: datetime | None
    last_ack: datetime | None
    waiting: bool  # a read of its waits now
    read_rate: float  # events handed to it per second, over the last minute
    ack_rate: float  # events it acknowledged per second, over the last minute
    in_flight: int  # deliveries in its hands now
    delivered: int  # events handed to it since it was first heard from (a day's silence forgets)
    acked: int  # events it acknowledged since then


@dataclass(frozen=True)
class _Group:
    """A group as `_figures` needs it: the key of its own state, and its trackers."""

    state_key: str
    trackers: list[SegmentTracker]


def consumer_figures(group: ReaderGroup, now: float | None = None) -> list[ConsumerFigures]:
    """The group's consumers heard from within a day (or holding deliveries), the most recently
    heard first: one query and one Redis round trip."""
    trackers = [slot.tracker for slot in floors.slots(group)]
    return _figures([_Group(group.state_key, trackers)], floors.clock() if now is None else now)[0]


def every_consumer_figures(tails: dict[int, dict[str, int]], now: float | None = None) -> dict[str, list]:
    """`ConsumerFigures` of every group that has consumers, by the group's full name: two queries
    and two Redis round trips whatever the number of groups (/metrics). `tails`: each stream's
    tail cut by its id (its segments); a stream not in them is left out."""
    now = floors.clock() if now is None else now
    redis = get_redis()
    rows = ReaderGroup.objects.order_by("scope__name", "name").values_list("pk", "scope__name", "name", "state_key")
    groups = {pk: (f"{scope}/{name}", key) for pk, scope, name, key in rows}
    if not groups:
        return {}
    keys = [consumers_key(key) for _, key in groups.values()]
    pipe = redis.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    heard = [pk for pk, known in zip(groups, pipe.execute(), strict=True) if known]
    trackers: dict[int, list[SegmentTracker]] = {pk: [] for pk in heard}
    subs = Subscription.objects.filter(reader_group_id__in=heard).values_list(
        "reader_group_id", "state_key", "stream_id"
    )
    for group_pk, sub_key, stream_pk in subs:
        for segment in tails.get(stream_pk, {}):
            trackers[group_pk].append(SegmentTracker(redis, sub_key, segment))
    figures = _figures([_Group(groups[pk][1], trackers[pk]) for pk in heard], now)
    return {groups[pk][0]: rows for pk, rows in zip(heard, figures, strict=True)}


def _figures(groups: list[_Group], now: float) -> list[list[ConsumerFigures]]:
    """Each group's consumers, read in one round trip (their hash, the current and the previous
    rate window, the in-flight deliveries of each tracker); entries of consumers silent for a
    day dropped as they are found."""
    redis = get_redis()
    window = int(now // RATE_WINDOW_S)
    pipe = scripted_pipeline(redis)
    asked = []
    for group in groups:
        with pipe.step() as hashes:
            pipe.hgetall(consumers_key(group.state_key))
            pipe.hgetall(rates_key(group.state_key, window))
            pipe.hgetall(rates_key(group.state_key, window - 1))
        with pipe.step() as leases:
            for tracker in group.trackers:
                tracker.in_flight(now, pipe)
        asked.append((group, hashes, leases))
    pipe.execute()
    out = []
    stale_pipe = redis.pipeline(transaction=False)
    for group, hashes, leases in asked:
        seen, current, previous = ({as_text(k): as_text(v) for k, v in h.items()} for h in hashes.all())
        holding: dict[str, int] = {}
        for answer in leases.all():
            for name, n in in_flight_of(answer).items():
                holding[name or DEFAULT] = holding.get(name or DEFAULT, 0) + n
        rows, stale = _rows(seen, current, previous, holding, now)
        out.append(rows)
        if stale:
            stale_pipe.hdel(consumers_key(group.state_key), *stale)
    if len(stale_pipe):
        stale_pipe.execute()
    return out


def _rows(
    seen: dict[str, str], current: dict[str, str], previous: dict[str, str], holding: dict[str, int], now: float
) -> tuple[list[ConsumerFigures], list[str]]:
    """One group's consumers from its hashes (fields "r:name"/"a:name": last read/ack time,
    "w:name": "since until" of a waiting read, "nr:name"/"na:name": totals), and the fields of
    those silent for a day (to drop)."""
    by_name: dict[str, dict[str, str]] = {}
    for field, value in seen.items():
        what, _, name = field.partition(":")
        by_name.setdefault(name, {})[what] = value
    into = now - (now // RATE_WINDOW_S) * RATE_WINDOW_S
    rows, stale = [], []
    for name in by_name.keys() | holding.keys():
        fields = by_name.get(name, {})
        read_at, ack_at = _time(fields.get("r")), _time(fields.get("a"))
        last = max((t for t in (read_at, ack_at) if t is not None), default=None)
        if name not in holding and (last is None or now - last > CONSUMER_SHOWN_S):
            stale += [f"{what}:{name}" for what in fields]
            continue
        since, _, until = fields.get("w", "0 0").partition(" ")
        waiting = float(until) >= now and float(since) >= (read_at or 0.0)

        def rate(what: str, name: str = name) -> float:
            key = f"{what}:{name}"
            return windowed_rate(int(previous.get(key, 0)), int(current.get(key, 0)), into, RATE_WINDOW_S)

        rows.append(
            ConsumerFigures(
                name,
                _when(read_at),
                _when(ack_at),
                waiting,
                rate("r"),
                rate("a"),
                holding.get(name, 0),
                int(fields.get("nr", 0)),
                int(fields.get("na", 0)),
            )
        )
    rows.sort(key=lambda c: (_stamp(c), c.name), reverse=True)
    return rows, stale


def _time(value: str | None) -> float | None:
    return None if value is None else float(value)


def _when(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


def _stamp(row: ConsumerFigures) -> float:
    times = [t.timestamp() for t in (row.last_read, row.last_ack) if t is not None]
    return max(times, default=0.0)


def bounded(rows: Iterable[ConsumerFigures], limit: int) -> tuple[list[ConsumerFigures], ConsumerFigures | None]:
    """The `limit` consumers a metric names (those holding the most deliveries, then the most
    recently heard), and the rest summed as one (None when there is no rest): a group's series
    never number more than `limit` + 1, however many names its consumers take."""
    ranked = sorted(rows, key=lambda c: (c.in_flight, _stamp(c)), reverse=True)
    named, rest = ranked[:limit], ranked[limit:]
    if not rest:
        return named, None
    return named, ConsumerFigures(
        OTHERS,
        None,
        None,
        any(c.waiting for c in rest),
        sum(c.read_rate for c in rest),
        sum(c.ack_rate for c in rest),
        sum(c.in_flight for c in rest),
        sum(c.delivered for c in rest),
        sum(c.acked for c in rest),
    )


def assignments(group: ReaderGroup) -> dict[str, list[str]]:
    """An ordered group's owners: each consumer's segments, as `scope/name:segment`, by name (a
    shared group's are empty: every consumer reads every segment). One Redis round trip."""
    if group.delivery != "ordered":
        return {}
    slots = floors.slots(group)
    pipe = get_redis().pipeline(transaction=False)
    for slot in slots:
        slot.tracker.owner(pipe)
    out: dict[str, list[str]] = {}
    for slot, owner in zip(slots, pipe.execute(), strict=True):
        if owner:
            out.setdefault(as_text(owner), []).append(f"{slot.stream.full_name}:{slot.segment}")
    return dict(sorted(out.items()))
