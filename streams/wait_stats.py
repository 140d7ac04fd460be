"""What waiting reads and deliveries look like to whoever watches (`/metrics`): reads waiting now,
what woke them, how long they waited, and the time from an event's publish to its first
hand-out. Counted in each web process and added into Redis every second by the process's
wake-up listener (`streams.waking`), so that whichever process answers a scrape shows every
process's figures. It also carries other hashes' counts the same way (`counts.add_to`: each
reader group consumer's deliveries and acknowledgements, `groups.consuming.floors.count_consumer`).
It must never cost a read a round trip: counting is a few additions under a lock."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from bisect import bisect_left
from collections import defaultdict
from importlib.resources import files

from store.redis_connection import ScriptPipeline, registered
from store.tier import reading

OFFLOAD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)  # seconds, one object's copy
WAIT_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0)  # seconds
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)
COUNTERS_KEY = "cbr:metrics:reads"  # hash: field -> total (every process's)
EXPIRED = "events:expired"  # counted: events a group passed over past their time to live (domain.ttl)
WAITING_KEY = "cbr:metrics:waiting"  # hash: process -> "<reads waiting> <unix time>"
STALE_S = 10.0  # a process that has not said how many reads wait for this long is gone

KEYS_A_CALL = 500  # hashes counted into by one call of `add_counts.lua` (Redis serves others between calls)
_ADD_COUNTS = (files("streams") / "lua" / "add_counts.lua").read_text()

_PUBLISHED_MS = struct.Struct("<q")
_BODY = 8 + 1 + 8  # a frame's header (length, CRC), then the body's flags and offset


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: defaultdict[str, float] = defaultdict(float)
        # other hashes' counters (a reader group's consumers', `groups.consuming.floors`):
        # (key, field) -> count, and each key's expiry in seconds (0: none)
        self.keyed: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.expiry: dict[str, int] = {}
        self.latest: dict[tuple[str, str], str] = {}  # (key, field) -> the value it is to take

    def add_to(self, key: str, field: str, n: int, expire_s: int = 0) -> None:
        """`n` more in the hash `key`'s `field`, which expires `expire_s` after its last flush."""
        with self.lock:
            self.keyed[key, field] += n
            self.expiry[key] = expire_s

    def set_in(self, key: str, field: str, value: str) -> None:
        """The hash `key`'s `field` to be `value` (the last one set before a flush wins)."""
        with self.lock:
            self.latest[key, field] = value

    def take_keyed(self) -> tuple[dict[tuple[str, str], int], dict[str, int], dict[tuple[str, str], str]]:
        with self.lock:
            out, self.keyed, expiry, self.expiry = dict(self.keyed), defaultdict(int), self.expiry, {}
            latest, self.latest = self.latest, {}
        return out, expiry, latest

    def add(self, field: str, value: float = 1.0) -> None:
        with self.lock:
            self.pending[field] += value

    def observe(self, name: str, buckets: tuple[float, ...], value: float, n: int = 1) -> None:
        """A histogram's observation (`n` of them with this value): its bucket, count and sum."""
        i = bisect_left(buckets, value)
        le = repr(buckets[i]) if i < len(buckets) else "+Inf"
        with self.lock:
            self.pending[f"{name}:{le}"] += n
            self.pending[f"{name}:count"] += n
            self.pending[f"{name}:sum"] += value * n

    def take(self) -> dict[str, float]:
        with self.lock:
            out, self.pending = dict(self.pending), defaultdict(float)
        return out


counts = _Counts()
PROCESS = f"{socket.gethostname()}:{os.getpid()}"


def woken(cause: str, n: int = 1) -> None:
    counts.add(f"woken:{cause}", n)


def waited(seconds: float) -> None:
    counts.observe("wait", WAIT_BUCKETS, seconds)


def delivered_first(published_ms: int, now: float, n: int = 1) -> None:
    """`n` events handed out for the first time, the oldest of them published at `published_ms`
    (a read counts each run of first deliveries by its oldest event: no work per event)."""
    counts.observe("latency", LATENCY_BUCKETS, max(0.0, now - published_ms / 1000), n)


def published_ms_of(item) -> int:
    """An event's publish time from its record, or from its stored frame without decoding it."""
    published = getattr(item, "published_ms", None)
    if published is not None:
        return published
    return _PUBLISHED_MS.unpack_from(item.data, item.start + _BODY)[0]


def flush(redis, waiting_now: int | None) -> None:
    """Add this process's counts into Redis and say how many reads wait in it (the listener
    calls it every second; a process with no waiting reads, a worker, passes None). The reads of
    chunks released to long-term storage are counted by the store (`store.tier.reading`) and
    carried here."""
    for outcome, n in reading.take_counts().items():
        counts.add(f"tier:{outcome}", n)
    pending = counts.take()
    keyed, expiry, latest = counts.take_keyed()
    pipe = ScriptPipeline(redis)
    for field, value in pending.items():
        pipe.hincrbyfloat(COUNTERS_KEY, field, value)
    _add_keyed(redis, pipe, keyed, expiry, latest)
    if waiting_now is not None:
        pipe.hset(WAITING_KEY, PROCESS, f"{waiting_now} {time.time()}")
    pipe.hgetall(WAITING_KEY)
    try:
        *_, processes = pipe.execute()
    except Exception:
        for field, value in pending.items():  # counted again at the next flush
            counts.add(field, value)
        for (key, field), n in keyed.items():
            counts.add_to(key, field, n, expiry.get(key, 0))
        with counts.lock:  # set again, unless set anew meanwhile
            counts.latest = latest | counts.latest
        raise
    gone = [p for p, value in processes.items() if time.time() - float(value.split()[1]) > STALE_S]
    if gone:  # processes that stopped: dropped here, never by a scrape (a fixed cost)
        redis.hdel(WAITING_KEY, *gone)


def _add_keyed(
    redis,
    pipe: ScriptPipeline,
    keyed: dict[tuple[str, str], int],
    expiry: dict[str, int],
    latest: dict[tuple[str, str], str] | None = None,
) -> None:
    """Other hashes' counts queued on `pipe`, `KEYS_A_CALL` hashes a script call: after a fan-out
    to thousands of groups, a command each (an HINCRBY per consumer's field, an EXPIRE per hash)
    cost the listener's thread hundreds of milliseconds of redis-py, while it had wake-ups to
    hand out. The fields set (`latest`) go in the same calls, named with a leading `=`."""
    if not keyed and not latest:
        return
    fields: defaultdict[str, list] = defaultdict(list)
    for (key, field), n in keyed.items():
        fields[key] += (field, n)
    for (key, field), value in (latest or {}).items():
        fields[key] += ("=" + field, value)
    script = registered(redis, _ADD_COUNTS)
    keys = list(fields)
    for start in range(0, len(keys), KEYS_A_CALL):
        batch = keys[start : start + KEYS_A_CALL]
        args: list = []
        for key in batch:
            args += (expiry.get(key, 0), len(fields[key]) // 2, *fields[key])
        pipe.run_script(script, batch, args)


def totals(redis) -> tuple[int, dict[str, float]]:
    """Every live process's reads waiting now, and the counters: one round trip, always."""
    pipe = redis.pipeline(transaction=False)
    pipe.hgetall(WAITING_KEY)
    pipe.hgetall(COUNTERS_KEY)
    waiting_raw, counters_raw = pipe.execute()
    now, waiting = time.time(), 0
    for value in waiting_raw.values():
        n, _, at = value.decode().partition(" ")
        if now - float(at) <= STALE_S:  # a stopped process's entry: left for a live one's flush to drop
            waiting += int(n)
    return waiting, {k.decode(): float(v) for k, v in counters_raw.items()}
