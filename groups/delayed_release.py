"""Delayed events out: what is due in a stream's delayed index is released to every reader group
of the stream (each group's tracker takes what its cursor passed over), by reads and by the
index's maintenance (`streams.delaying.maintenance`, which calls `release_due` as this app
registered it: groups.apps). Indexing a publish's delayed events is the stream's
(`streams.delaying.indexing`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection

from groups.ack_tracker import SegmentTracker, released_packed
from groups.models import Subscription
from store.redis_connection import ScriptPipeline, get_redis, scripted_pipeline
from streams.delaying.buckets import round_loads
from streams.delaying.index import Direct, Load, Round, state_key, unpacked
from streams.delaying.stream_index import index_of
from streams.models import Stream


def trackers_of(stream: Stream, segments: set[int]) -> list[tuple[int, SegmentTracker]]:
    """Every reader group's tracker on these segments of the stream."""
    redis = get_redis()
    key = state_key(stream.storage_key)
    subs = Subscription.objects.filter(stream=stream).values_list("state_key", flat=True)
    return [(seg, SegmentTracker(redis, sub, str(seg), key)) for sub in subs for seg in sorted(segments)]


ROUND_BUDGET = 20_000  # snapshot indexes one hand-out round loads at least (domain.delayed.round_budget)
FAN_OUT_CHUNK = 25_000  # indexes per FAN_OUT script: a round's batch may be larger, a script stays short


def fan_out(stream: Stream, released: dict[int, dict[int, int]], trackers=None) -> None:
    """Hand released indexes (segment -> offset -> delivery time, ms) to every reader group of
    the stream: each group queues those its cursor passed over and has not processed
    (domain.acks.fan_out); the others are ordinary events to it, or below its floor.
    One script per group and segment, its argument built once for all groups. `trackers`
    (from `trackers_of`) spares a query."""
    if trackers is None:
        trackers = trackers_of(stream, set(released))
    args: dict[int, list[bytes]] = {}
    for seg, offsets in released.items():
        pairs: Collection[tuple[int, int]] = offsets.items()
        if len(offsets) > FAN_OUT_CHUNK:
            # the scripts run one at a time and a group's read may come between two of them: split
            # in delivery-time order, so no chunk holds an event due before one of an earlier chunk
            # (the batch lists the reclaimed, the popped and the loaded indexes, each in its order)
            pairs = sorted(pairs, key=lambda item: (item[1], item[0]))
        offs, ats = [off for off, _ in pairs], [at / 1000 for _, at in pairs]
        args[seg] = [
            released_packed(offs[i : i + FAN_OUT_CHUNK], ats[i : i + FAN_OUT_CHUNK])
            for i in range(0, len(offs), FAN_OUT_CHUNK)
        ]
    pipe = scripted_pipeline()
    for seg, tracker in trackers:
        for part in args.get(seg, ()):
            tracker.fan_out(part, pipe)
    pipe.execute()


READ_RELEASE_LIMIT = 10_000  # indexes a round of a read's release takes at most


def release_due(
    stream: Stream, now_ms: int, limit: int = READ_RELEASE_LIMIT, rounds: int = 20, first: Round | None = None
) -> int:
    """Release what is due from the stream's index to its reader groups; at most `rounds` rounds
    (a read does a few, maintenance many). Each round is one RELEASE script: it loads the next
    snapshot segments of the buckets whose frontier came due (several per round, read here first:
    `buckets.round_loads`), and claims what is due by the round's bound as one batch in the
    hand-out area; the batch goes to every group, then leaves the area. A crash before that
    leaves the claim to expire and the batch to be handed out again (the groups drop what they
    have already). `first`: the first round, already run by the caller (`queue_release`, on a
    read's first pipeline). Returns how many indexes went out."""
    index = index_of(stream)
    total = 0
    trackers = None
    due: list[tuple[int, int, int]] = []
    after: int | None = None
    plain = True  # the first round loads nothing: it learns what is due
    rows: dict = {}  # bucket registrations, read once per hand-out
    loads: list[Load]
    direct: Direct | None
    columns: tuple[list, list, list]
    bound: int | None
    for _ in range(rounds):
        loads, direct, columns, bound, failed = [], None, ([], [], []), None, False
        if due and not plain:
            loads, direct, columns, bound, failed = round_loads(stream, index, due, after, now_ms, ROUND_BUDGET, rows)
        if first is not None:  # a first round loads nothing: the caller's is that round
            done, first = first, None
        else:
            done = index.release(now_ms, limit, bound=bound, direct=direct, loads=loads)
        due, after = done.frontier, done.after
        plain = done.status != 1 or failed  # a stale plan: pop without loading next, then plan again
        if done.status != 1:
            continue
        released: dict[int, dict[int, int]] = defaultdict(dict)
        for member in done.reclaimed:
            for seg, off, at in unpacked(member):
                released[seg][off] = at
        for item in done.popped:
            seg_s, off_s, at_s = item.split(":")
            released[int(seg_s)][int(off_s)] = int(at_s)
        times, segs, offs = columns
        if direct is not None:
            for seg, off, at in zip(segs, offs, times):
                released[seg][off] = at
        if released:
            if trackers is None:
                trackers = trackers_of(stream, {int(s) for s in stream.segment_ids})
            fan_out(stream, released, trackers)
            index.handed(done.members)
            total += sum(len(offsets) for offsets in released.values())
        if failed or (not due and len(done.reclaimed) + len(done.popped) < limit):
            break  # nothing more due (or a snapshot to rebuild first)
    return total


def queue_release(stream: Stream, now_ms: int, pipe: ScriptPipeline) -> Callable[[list], Round]:
    """`release_due`'s first round queued on `pipe`: a read asks it with its counts, in one round
    trip. What it returns reads the pipeline's answer to it into the Round `release_due` takes
    as `first`."""
    return index_of(stream).release_on(pipe, now_ms, READ_RELEASE_LIMIT)
