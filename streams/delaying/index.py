"""The hot part of a stream's delayed index, in Redis: shared by every reader group of the stream.

Keys, per stream (`{dl:S}` keeps them in one Redis Cluster slot):
    cbr:dl:{S}:state        hash: gen (the mutable bucket's chunk of the index: numbered from
                            the clock in ms when the index starts, +1 per seal), count (indexes it
                            took), released (the latest delivery time handed to the groups, ms),
                            recovered (set once the index is live: see `recover`), sealing
                            (generations being sealed), lo:<segment> / hi:<segment> (the offsets
                            the mutable bucket spans)
    cbr:dl:{S}:mutable      sorted set: "segment:offset" by delivery time: the last mutable bucket
    cbr:dl:{S}:sealing:<g>  the same, for a bucket being sealed (renamed from mutable), with
    cbr:dl:{S}:sealrange:<g> its offsets' span per segment
    cbr:dl:{S}:queue        sorted set: the shared queue: the loaded snapshot segment of each
                            sealed bucket (and indexes recovery queued directly)
    cbr:dl:{S}:frontier     sorted set: bucket id by the latest time of its loaded segment, for
                            buckets with more segments to load: nothing at or past it is handed
                            out before that bucket's next segment is loaded
    cbr:dl:{S}:loaded       hash: bucket id -> snapshot segments loaded so far
    cbr:dl:{S}:due          sorted set: the hand-out area: indexes released and being handed to
                            the groups, by claim expiry (0: not claimed yet); a member is one
                            index "segment:offset:deliver_at" (due when added) or a round's batch
                            "#n,segment:offset:deliver_at,…"

An index chunk (Pulsar's ledger) is one publish batch on one segment: the mutable bucket is
sealed when the first batch after it holds `min_index_count_per_bucket` indexes arrives, so a
batch's indexes live in one bucket. A bucket is named by its generation (`gen`) and, after a
merge, spans generations `[first_chunk, last_chunk]`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streams.delaying.scripts import ADD, DROP_GEN, LOAD, RELEASE

_SCRIPTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PARTS = ("state", "mutable", "queue", "due", "frontier", "loaded")


def tag(stream_key: str) -> str:
    """The prefix of a stream's index keys, named by the stream's `storage_key` (never by its
    database id: see `Stream.storage_key`)."""
    return f"cbr:dl:{{{stream_key}}}"


def state_key(stream_key: str) -> str:
    return f"{tag(stream_key)}:state"


@dataclass(frozen=True)
class Released:
    """An index handed to the groups: its position and delivery time (ms)."""

    segment: int
    offset: int
    deliver_at: int

    @property
    def member(self) -> str:
        return f"{self.segment}:{self.offset}:{self.deliver_at}"


@dataclass(frozen=True)
class HotState:
    """What a stream's index holds in Redis: the snapshot segments loaded per bucket
    (`DelayIndex.loaded`), the indexes held (`DelayIndex.counts`), the earliest delivery time
    among them (`DelayIndex.next_due`)."""

    loaded: dict[int, int]
    counts: dict[str, int]  # mutable, sealing, queue, due
    next_due: int | None


def hot_states(indexes: Sequence[DelayIndex]) -> list[HotState]:
    """The `HotState` of each index (all on one Redis client), in two round trips whatever their
    number: the keys every index has, then the buckets being sealed that the first named (the
    console asks for one stream, /metrics for every stream with an index)."""
    if not indexes:
        return []
    redis = indexes[0].redis
    pipe = redis.pipeline(transaction=False)
    for index in indexes:
        state, mutable, queue, due, _, loaded = index.keys
        pipe.hget(state, "sealing")
        pipe.hgetall(loaded)
        pipe.zcard(mutable)
        pipe.zcard(queue)
        pipe.zrange(due, 0, -1)  # small: what is being handed out right now
        pipe.zrange(mutable, 0, 0, withscores=True)
        pipe.zrange(queue, 0, 0, withscores=True)
    first = pipe.execute()
    gens = [_generations(value) for value in first[::7]]
    pipe = redis.pipeline(transaction=False)
    for index, index_gens in zip(indexes, gens, strict=True):
        for g in index_gens:
            pipe.zcard(f"{index.prefix}:sealing:{g}")
            pipe.zrange(f"{index.prefix}:sealing:{g}", 0, 0, withscores=True)
    second = iter(pipe.execute() if any(gens) else [])
    out = []
    for i, index_gens in enumerate(gens):
        _, loaded, mutable, queue, due, *earliest = first[7 * i : 7 * i + 7]
        sealing = 0
        for _ in index_gens:
            sealing += next(second)
            earliest.append(next(second))
        times = [int(rows[0][1]) for rows in earliest if rows]
        out.append(
            HotState(
                loaded={int(k): int(v) for k, v in loaded.items()},
                counts={
                    "mutable": mutable,
                    "queue": queue,
                    "due": sum(len(unpacked(_text(m))) for m in due),
                    "sealing": sealing,
                },
                next_due=min(times) if times else None,
            )
        )
    return out


EARLIEST_UNKNOWN = -1  # `earliest_on`'s answer while buckets are being sealed


def _earliest(answers: list) -> int | None:
    sealing, *earliest = answers
    if _generations(sealing):
        return EARLIEST_UNKNOWN
    times = [int(rows[0][1]) for rows in earliest if rows]
    return min(times) if times else None


def _generations(sealing) -> list[int]:
    """The generations being sealed, from the state hash's `sealing` field (absent: none)."""
    return [int(g) for g in _text(sealing).split(",") if g] if sealing else []


def _scripts(redis) -> tuple:
    if redis not in _SCRIPTS:
        _SCRIPTS[redis] = tuple(redis.register_script(src) for src in (ADD, RELEASE, LOAD, DROP_GEN))
    return _SCRIPTS[redis]


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def unpacked(member: str) -> list[tuple[int, int, int]]:
    """A hand-out area member's (segment, offset, deliver_at) triples (a batch's "#n" left out)."""
    out = []
    for item in member.split(","):
        if item and item[0] != "#":
            seg, off, at = item.split(":")
            out.append((int(seg), int(off), int(at)))
    return out


@dataclass(frozen=True)
class Direct:
    """Indexes of snapshot segments a round loads and releases at once (all due by its bound)."""

    packed: str  # "segment:offset:deliver_at,…"
    latest: int  # the latest delivery time among them


@dataclass(frozen=True)
class Load:
    """A round's load of a bucket's snapshot segments: it had `expected` segments loaded, has
    `loaded` after; `edge` is its new frontier (None: no segment left); `queued` the loaded
    indexes past the round's bound, packed, for the shared queue."""

    bucket_id: int
    expected: int
    loaded: int
    edge: int | None
    queued: str


@dataclass(frozen=True)
class Round:
    """What a RELEASE call did: `status` 1 done, 0 the plan was stale;
    the hand-out area members it claimed (`reclaimed`, and `batch`: the new one, '' for none),
    the indexes it popped from Redis (`popped`, "segment:offset:deliver_at", in `batch` too),
    and the buckets whose frontier is due: (edge, bucket id, segments loaded), earliest first;
    `after`: the frontier after those when more were due than listed."""

    status: int
    reclaimed: list[str]
    popped: list[str]
    batch: str
    frontier: list[tuple[int, int, int]]
    after: int | None

    @property
    def members(self) -> list[str]:
        return [*self.reclaimed, *([self.batch] if self.batch else [])]


def _release_args(
    now_ms: int, limit: int, claim_ms: int, bound: int | None, direct: Direct | None, loads: Sequence[Load]
) -> list:
    args: list = [
        now_ms,
        limit,
        now_ms + claim_ms,
        "" if bound is None else bound,
        direct.latest if direct else "",
        direct.packed if direct else "",
    ]
    for ld in loads:
        args += [ld.bucket_id, ld.expected, ld.loaded, "" if ld.edge is None else ld.edge, ld.queued]
    return args


def _round(answer: list) -> Round:
    """The RELEASE script's answer as a Round."""
    status, reclaimed, popped, batch, listed, after = answer
    frontier = []
    for item in listed:
        bucket, edge, count = _text(item).split(":")
        frontier.append((int(edge), int(bucket), int(count)))
    return Round(
        int(status),
        [_text(m) for m in reclaimed],
        [_text(m) for m in popped],
        _text(batch),
        frontier,
        int(_text(after)) if after else None,
    )


def packed(entries) -> str:
    """(segment, offset, deliver_at) triples as the scripts take them."""
    return ",".join(f"{s}:{o}:{d}" for s, o, d in entries)


class DelayIndex:
    """One stream's index in Redis (the scripts do every step atomically)."""

    def __init__(self, redis, stream_key: str):
        self.redis = redis
        self.prefix = tag(stream_key)
        self.keys = [f"{self.prefix}:{part}" for part in _PARTS]
        self._add, self._release, self._load, self._drop_gen = _scripts(redis)

    # -- adding ----------------------------------------------------------------------------------

    def add(self, entries: list[tuple[int, int, int]], now_ms: int, min_count: int) -> tuple[int, int, int, int, bool]:
        """Index one publish batch's delayed events on one segment: (segment, offset,
        deliver_at ms). Returns (added, duplicates, due already, generation sealed or 0, live)."""
        added, dups, due, sealed, live = self._add(keys=self.keys, args=[now_ms, min_count, packed(entries)])
        return int(added), int(dups), int(due), int(sealed), bool(live)

    # -- handing out -----------------------------------------------------------------------------

    def release(
        self,
        now_ms: int,
        limit: int,
        claim_ms: int = 30_000,
        bound: int | None = None,
        direct: Direct | None = None,
        loads: Sequence[Load] = (),
    ) -> Round:
        """One hand-out round (the RELEASE script): apply `loads`, then release `direct` and what
        is due by the bound in Redis into the hand-out area as one claimed batch (see the script).
        Changes nothing when the plan is stale (`Round.status` 0)."""
        return _round(self._release(keys=self.keys, args=_release_args(now_ms, limit, claim_ms, bound, direct, loads)))

    def release_on(self, pipe, now_ms: int, limit: int, claim_ms: int = 30_000) -> Callable[[list], Round]:
        """A round that loads nothing (what `release` does without a plan), queued on `pipe` (a
        `ScriptPipeline`): a read asks it on its first round trip. Returns what reads the
        pipeline's answer to it into a `Round`."""
        pipe.run_script(self._release, self.keys, _release_args(now_ms, limit, claim_ms, None, None, ()))
        return _round

    def earliest_on(self, pipe) -> Callable[[list], int | None]:
        """What `hot_states` says of the index's earliest delivery time, asked on `pipe` (a read's
        first round trip): returns what reads the three answers into that time (ms, None when
        nothing is delayed), or into `EARLIEST_UNKNOWN` while buckets are being sealed (their
        earliest are on keys only the first answer names: `hot_states` then)."""
        state, mutable, queue, *_ = self.keys
        pipe.hget(state, "sealing")
        pipe.zrange(mutable, 0, 0, withscores=True)
        pipe.zrange(queue, 0, 0, withscores=True)
        return _earliest

    def handed(self, members: list[str]) -> None:
        """Every group has them: these hand-out area members leave it."""
        if members:
            self.redis.zrem(self.keys[3], *members)

    def load(self, bucket_id: int, expected: int, entries, edge: int | None, drop_gen: int | None = None) -> bool:
        """Load a bucket's next snapshot segment into the shared queue, unless another process
        did (`expected`: segments loaded before this one)."""
        args = [
            bucket_id,
            expected,
            "" if edge is None else edge,
            "" if drop_gen is None else drop_gen,
            packed(entries),
        ]
        return bool(self._load(keys=self.keys, args=args))

    def drop_gen(self, gen: int) -> None:
        self._drop_gen(keys=self.keys, args=[gen])

    # -- reading state ---------------------------------------------------------------------------

    def state(self) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in self.redis.hgetall(self.keys[0]).items()}

    def sealing(self) -> list[int]:
        return _generations(self.redis.hget(self.keys[0], "sealing"))

    def sealing_entries(self, gen: int) -> tuple[list[tuple[int, int, int]], dict[str, list[int]]]:
        """The indexes of a bucket being sealed, and its offsets' span per segment."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(f"{self.prefix}:sealing:{gen}", 0, -1, withscores=True)
        pipe.hgetall(f"{self.prefix}:sealrange:{gen}")
        rows, marks = pipe.execute()
        entries = []
        for m, score in rows:
            seg, off = _text(m).split(":")
            entries.append((int(seg), int(off), int(score)))
        ranges: dict[str, list[int]] = {}
        for k, v in marks.items():
            kind, seg = _text(k).split(":")
            ranges.setdefault(seg, [0, 0])[0 if kind == "lo" else 1] = int(v)
        return entries, ranges

    def loaded(self) -> dict[int, int]:
        return {int(k): int(v) for k, v in self.redis.hgetall(self.keys[5]).items()}

    def frontier(self) -> dict[int, int]:
        return {int(m): int(s) for m, s in self.redis.zrange(self.keys[4], 0, -1, withscores=True)}

    def queued(self, members: list[str]) -> list[bool]:
        if not members:
            return []
        return [s is not None for s in self.redis.zmscore(self.keys[2], members)]

    def counts(self) -> dict[str, int]:
        """Indexes held in Redis: mutable, being sealed, queued, being handed out."""
        return hot_states([self])[0].counts

    def next_due(self) -> int | None:
        """The earliest delivery time the index holds in Redis (ms)."""
        return hot_states([self])[0].next_due

    def mark_recovered(self) -> None:
        self.redis.hset(self.keys[0], "recovered", 1)

    def is_recovered(self) -> bool:
        return bool(self.redis.hexists(self.keys[0], "recovered"))

    def forget_bucket(self, bucket_id: int) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(self.keys[4], bucket_id)
        pipe.hdel(self.keys[5], bucket_id)
        pipe.execute()

    def forget(self) -> None:
        """Drop every key of the index (the stream was deleted)."""
        keys = list(self.redis.scan_iter(match=f"{self.prefix}:*", count=1000))
        if keys:
            self.redis.delete(*keys)
