"""Delayed delivery at scale (issue 5): the bucket-based index against its targets, in one process.

One stream of 4 segments, default delayed-index settings (buckets of >= 50 000 indexes, snapshot
segments of 300 s / <= 5000 indexes, no merging; --delayed-index changes them, for experiments).
N events of a few bytes, each due at a random time within 24 h (from 30 min after the start, so none comes due while publishing), published in
batches of 10 000 straight into the store with the index's publish hook (what `do_publish` does,
minus its Celery nudge: `maintain` runs here, after every batch that sealed a bucket).

  (a) memory   Redis: INFO used_memory before the stream vs. after publishing and sealing, and the
               index's own keys (MEMORY USAGE ... SAMPLES 0 of every cbr:dl:{S}:* key), at the
               end and at their peak (sampled just before each seal, when a full mutable bucket
               and its sealing set coexist); this process's RSS before vs. after publishing, and
               across the first seal (the index itself holds nothing in the process).
               Target: the hot index <= 24 MB at 10M pending, and no growth with the backlog
               (run --events 1000000 as well).
  (b) baseline a Python-heap tracker holding every index in memory (heapq of (deliver_at,
               segment, offset) tuples, as Pulsar's in-memory tracker), in a spawned child: RSS
               delta, time to push N, time to pop the due ones of (d).
  (c) restart  the index's Redis keys flushed (only cbr:dl:{S}:*; no group has acks keys yet),
               then `buckets.recover` (snapshots' metadata, first not-due segment of each bucket,
               the stream re-read above what the buckets cover) vs. the same flush and
               `buckets.replay` (the whole stream re-read, buckets sealed again). Target:
               recovery >= 50x faster than replay.
  (d) hand-out one NONE reader group whose cursor passed every event over (reads through
               `groups.consuming.read` until each segment's tracker is at the tail; they answer
               nothing, every event is delayed), then "now" moved so ~1M events are due (all of
               them below 1M events) and `release_due(stream, now)` called until it releases no
               more: its rounds (each: the next snapshot segments of the buckets whose frontier
               is due read from Parquet, one RELEASE script loading them and claiming what is
               due), the fan-out into the group's tracker (each index queued in the group's retry
               set), the hand-out area cleared. Target >= 100 000 events/s.
               Checked: released == events due, the group's retry sets hold them all, and no
               index is released after one due later than it. Where the time goes: the wall
               time of each step (round_loads, release, fan_out, handed) and INFO commandstats.

Usage: .venv/bin/python bench/delayed.py [--events 10000000 | --quick] [--segments 4]
       [--database-url postgres://postgres@127.0.0.1:5432/cbr_bench_delayed]
       [--redis-url redis://127.0.0.1:6379/4] [--profile publish,recover,replay,release]
       [--no-baseline] [--delayed-index '{"max_time_step_per_segment_s": 3600}']
The database is created if missing, migrated and emptied of streams and groups; the Redis
database of --redis-url is emptied (FLUSHDB); the store lives in a temporary directory under
/tmp, removed at the end. The figures, from a quiet machine, go into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import multiprocessing as mp
import os
import pstats
import random
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from _common import machine

BATCH = 10_000
SPREAD_MS = 24 * 3600 * 1000
MARGIN_MS = 30 * 60 * 1000  # nothing comes due while publishing
DUE_TARGET = 1_000_000  # events made due for the hand-out figure
TARGET_INDEX_BYTES = 24 * 2**20
TARGET_RECOVERY_RATIO = 50
TARGET_RELEASE_S = 100_000
SEED = 5


def configure(args) -> Path:
    work = Path(tempfile.mkdtemp(prefix="cbr-bench-delayed-", dir="/tmp"))
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["REDIS_URL"] = args.redis_url
    os.environ["CBR_VAR_DIR"] = str(work / "var")
    os.environ["CBR_DATA_DIR"] = str(work / "data")
    os.environ.setdefault("CBR_FSYNC", "batch")
    os.environ.setdefault("CBR_LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")
    if args.database_url.startswith("postgres"):
        import psycopg

        name = args.database_url.rsplit("/", 1)[1]
        admin = args.database_url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return work


def empty() -> None:
    from groups.models import ReaderGroup
    from store.redis_connection import get_redis
    from streams.models import DelayedBucket, DelayedIndex, DelayedOp, Scope, Stream

    for model in (ReaderGroup, DelayedOp, DelayedBucket, DelayedIndex, Stream, Scope):
        model.objects.all().delete()
    get_redis().flushdb()


# -- measuring -----------------------------------------------------------------------------------


def rss_bytes(pid: str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MB"


def used_memory() -> int:
    from store.redis_connection import get_redis

    return int(get_redis().info("memory")["used_memory"])


def index_keys(stream) -> dict[str, int]:
    """MEMORY USAGE (every element counted) of each of the index's keys in Redis."""
    from store.redis_connection import get_redis
    from streams.delaying.index import tag

    redis = get_redis()
    prefix = f"{tag(stream.storage_key)}:"
    out = {}
    for key in redis.scan_iter(match=prefix + "*", count=1000):
        size = redis.memory_usage(key, samples=0)
        if size is not None:
            out[key.decode()[len(prefix) :]] = int(size)
    return out


def flush_index(stream) -> int:
    """What a Redis restart without persistence does to the index: every cbr:dl:{S}:* key goes."""
    from store.redis_connection import get_redis
    from streams.delaying.index import tag

    redis = get_redis()
    keys = list(redis.scan_iter(match=f"{tag(stream.storage_key)}:*", count=1000))
    if keys:
        redis.delete(*keys)
    return len(keys)


def pending_total(stream) -> tuple[int, dict]:
    """Indexes the index holds: sealed buckets' (registered counts) plus what is only in Redis
    (the mutable bucket and any set being sealed)."""
    from django.db.models import Sum

    from streams.delaying import stream_index
    from streams.models import DelayedBucket

    counts = stream_index.index_of(stream).counts()
    rows = DelayedBucket.objects.filter(stream=stream)
    sealed = rows.aggregate(n=Sum("index_count"))["n"] or 0
    counts["buckets"] = rows.count()
    return sealed + counts["mutable"] + counts["sealing"], counts


@contextmanager
def profiled(on: bool, label: str, top: int = 25):
    if not on:
        yield
        return
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out).sort_stats("tottime")
        stats.print_stats(top)
        print(f"--- cProfile of {label} (by own time) ---")
        print("\n".join(line for line in out.getvalue().splitlines()[4:] if line.strip()))
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
        print(f"--- cProfile of {label} (cumulative) ---")
        print("\n".join(line for line in out.getvalue().splitlines()[4:] if line.strip()), flush=True)


class Phases:
    """Seconds spent in named functions while a step runs (module attributes wrapped)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._undo = []

    def wrap(self, owner, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t
                self.calls[label] = self.calls.get(label, 0) + 1

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, original))

    def undo(self) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()

    def line(self, total: float) -> str:
        parts = [
            f"{k} {v:.2f} s ({self.calls[k]:,} calls)" for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])
        ]
        return ", ".join(parts) + f", the rest {total - sum(self.seconds.values()):.2f} s"


# -- the workload ----------------------------------------------------------------------------------


def delivery_times(n: int, base_ms: int, seed: int = SEED):
    """Each event's delivery time, in publish order (the baseline draws the same ones)."""
    rng = random.Random(seed)
    randrange = rng.randrange
    for _ in range(n):
        yield base_ms + randrange(SPREAD_MS)


def warm_up() -> None:
    """Imports, Lua scripts, a seal and a load once, on a small stream of its own (dropped
    after): first-use costs are not the benchmark's business."""
    from domain.events import EventIn
    from streams import logs, services
    from streams.delaying import buckets, indexing, maintenance, stream_index

    stream = services.do_create_stream(
        scope="bench", name="warm-up", segment_count=2, delayed_index={"min_index_count_per_bucket": 500}
    )
    base = int(time.time() * 1000) + MARGIN_MS
    log = logs.stream_log(stream)
    for start in range(0, 5000, 1000):
        hook = indexing.publish_hook(stream)
        log.append([EventIn(b"w", deliver_at_ms=base + i) for i in range(start, start + 1000)], on_commit=hook)
        if hook.not_live:
            indexing.ensure_live(stream, stream_index.index_of(stream))
    maintenance.maintain(stream)
    buckets.forget_index(stream)()


def publish(args, stream, base_ms: int, due_by: int, profile: bool) -> dict:
    """N delayed events in batches of 10 000, maintenance after each batch that sealed a bucket;
    samples memory just before each seal (the peak) and every 50 batches."""
    from domain.events import EventIn
    from streams import logs
    from streams.delaying import indexing, maintenance, stream_index

    log = logs.stream_log(stream)
    index = stream_index.index_of(stream)
    times = delivery_times(args.events, base_ms)
    seconds = {"append": 0.0, "maintain": 0.0}
    peak = {"index": 0, "used": 0, "rss": 0, "index_counts": {}, "first_seal": (0, 0)}
    due = 0
    seals = 0

    def sample() -> None:
        keys = index_keys(stream)
        size = sum(keys.values())
        if size > peak["index"]:
            peak["index"], peak["index_counts"] = size, index.counts()
        peak["used"] = max(peak["used"], used_memory())
        peak["rss"] = max(peak["rss"], rss_bytes())

    t_start = time.monotonic()
    with profiled(profile, "publishing"):
        for b, start in enumerate(range(0, args.events, BATCH)):
            events = []
            for i in range(start, min(args.events, start + BATCH)):
                at = next(times)
                due += at <= due_by
                events.append(EventIn(b"%d" % i, deliver_at_ms=at))
            hook = indexing.publish_hook(stream)
            t = time.perf_counter()
            log.append(events, on_commit=hook)
            if hook.not_live:
                indexing.ensure_live(stream, index)
            seconds["append"] += time.perf_counter() - t
            if hook.sealed:
                sample()
                rss_before = rss_bytes()
                t = time.perf_counter()
                done = maintenance.maintain(stream)
                seconds["maintain"] += time.perf_counter() - t
                if not seals:
                    peak["first_seal"] = (rss_before, rss_bytes())
                seals += done["sealed"]
            elif b % 50 == 0:
                sample()
            if (start + BATCH) % (args.events // 10 or BATCH) < BATCH:
                print(
                    f"    published {min(args.events, start + BATCH):>11,} in {time.monotonic() - t_start:6.1f} s "
                    f"(appends {seconds['append']:.1f} s, maintenance {seconds['maintain']:.1f} s, "
                    f"{seals} buckets sealed)",
                    flush=True,
                )
        t = time.perf_counter()
        done = maintenance.maintain(stream)  # anything left to seal
        seconds["maintain"] += time.perf_counter() - t
        seals += done["sealed"]
    sample()
    return {"seconds": time.monotonic() - t_start, **seconds, "due": due, "peak": peak, "seals": seals}


# -- (b) the in-memory baseline, in a child process ---------------------------------------------------


def heap_baseline(n: int, base_ms: int, due_by: int, answer) -> None:
    import heapq
    from array import array

    times = array("q", delivery_times(n, base_ms))  # drawn before measuring: not the tracker's
    gc.collect()
    rss0 = rss_bytes()
    heap: list[tuple[int, int, int]] = []
    push = heapq.heappush
    t = time.perf_counter()
    for i, at in enumerate(times):
        push(heap, (at, i & 3, i >> 2))  # (deliver_at, segment, offset): 4 segments round-robin
    add_s = time.perf_counter() - t
    rss1 = rss_bytes()
    pop = heapq.heappop
    popped = 0
    t = time.perf_counter()
    while heap and heap[0][0] <= due_by:
        pop(heap)
        popped += 1
    pop_s = time.perf_counter() - t
    answer.put({"rss": rss1 - rss0, "add_s": add_s, "pop_s": pop_s, "popped": popped, "left": len(heap)})


def baseline(n: int, base_ms: int, due_by: int) -> dict:
    ctx = mp.get_context("spawn")
    answer = ctx.Queue()
    proc = ctx.Process(target=heap_baseline, args=(n, base_ms, due_by, answer))
    proc.start()
    try:
        return answer.get(timeout=1200)
    finally:
        proc.join(60)


# -- (c) restart -------------------------------------------------------------------------------------


def restart(stream, now_ms: int, expected: int, profile: set[str]) -> dict:
    from store import delayed_snapshots
    from streams.delaying import buckets
    from streams.delaying.index import DelayIndex

    def phases(step: str) -> Phases:
        """Not nested: a seal reads a segment and loads it, so replay's seals are timed whole."""
        p = Phases()
        p.wrap(DelayIndex, "add", "index adds (Lua)")
        p.wrap(buckets, "seal", "sealing (cut, Parquet, register, load)")
        if step == "recover":
            p.wrap(delayed_snapshots, "read_metadata", "snapshot metadata")
            p.wrap(delayed_snapshots, "read_segment", "snapshot segment reads")
            p.wrap(DelayIndex, "load", "queue loads (Lua)")
        return p

    out = {"flushed": flush_index(stream)}
    for step, fn in (("recover", buckets.recover), ("replay", buckets.replay)):
        if step == "replay":
            flush_index(stream)
        p = phases(step)
        t = time.perf_counter()
        try:
            with profiled(step in profile, step):
                out[f"{step}_done"] = fn(stream, now_ms)
        finally:
            out[f"{step}_s"] = time.perf_counter() - t
            p.undo()
        out[f"{step}_phases"] = p.line(out[f"{step}_s"])
        out[f"{step}_total"], out[f"{step}_counts"] = pending_total(stream)
    out["expected"] = expected
    return out


# -- (d) hand-out ----------------------------------------------------------------------------------


def hand_out(stream, now_ms: int, expected_due: int, profile: bool) -> dict:
    from groups import consuming, delayed_release, reader_groups
    from streams import logs
    from streams.delaying import buckets, stream_index
    from streams.delaying.index import DelayIndex

    group = reader_groups.do_create_reader_group(
        scope="bench",
        name="delayed-readers",
        streams=[stream],
        retention_type="NONE",
        max_ack_pending=1_000_000,
        ack_timeout_s=3600,
    )
    tails = {s: t.next_offset for s, (_, t) in logs.stream_log(stream).ends().items()}
    trackers = dict(delayed_release.trackers_of(stream, {int(s) for s in tails}))
    redis = next(iter(trackers.values())).redis
    t = time.perf_counter()
    reads = handed_early = 0
    while True:
        result = consuming.read(group, max_events=200_000)
        reads += 1
        handed_early += len(result.deliveries)
        nexts = {s: int(redis.hget(trackers[int(s)].keys[0], "next") or 0) for s in tails}
        if all(nexts[s] >= tails[s] for s in tails) or reads > 10_000:
            break
    pass_s = time.perf_counter() - t

    phases = Phases()
    phases.wrap(DelayIndex, "release", "release (Lua: loads, pop, claim)")
    order = {"latest": 0, "earlier": 0}  # indexes released after a later one: out of time order
    timed_fan_out = delayed_release.fan_out

    def checked_fan_out(stream, released, *a, **kw):
        times = [at for offsets in released.values() for at in offsets.values()]
        order["earlier"] += sum(1 for at in times if at < order["latest"])
        if times:
            order["latest"] = max(order["latest"], max(times))
        return timed_fan_out(stream, released, *a, **kw)

    delayed_release.fan_out = checked_fan_out
    phases.wrap(delayed_release, "fan_out", "fan_out (Lua per group and segment)")
    phases.wrap(DelayIndex, "handed", "handed (ZREM)")
    phases.wrap(buckets, "round_loads", "round_loads (plan, Parquet reads, packing)")
    released = calls = 0
    redis.config_resetstat()
    t = time.perf_counter()
    try:
        with profiled(profile, "release_due"):
            while True:
                k = delayed_release.release_due(stream, now_ms)
                calls += 1
                released += k
                if k == 0:
                    break
    finally:
        release_s = time.perf_counter() - t
        phases.undo()
        delayed_release.fan_out = timed_fan_out
    stats = redis.info("commandstats")
    in_redis = {k[len("cmdstat_") :]: (v["usec"] / 1e6, v["calls"]) for k, v in stats.items() if v["usec"] >= 10_000}
    queued = sum(redis.zcard(tr.keys[5]) for tr in trackers.values())
    return {
        "reads": reads,
        "pass_s": pass_s,
        "handed_early": handed_early,
        "passed": sum(tails.values()),
        "released": released,
        "release_s": release_s,
        "calls": calls,
        "expected": expected_due,
        "queued_in_group": queued,
        "out_of_order": order["earlier"],
        "in_redis": in_redis,
        "phases": phases.line(release_s),
        "left": stream_index.index_of(stream).counts(),
    }


# -- the run -----------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--quick", action="store_true", help="200 000 events: a smoke run")
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cbr_bench_delayed")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/4")
    parser.add_argument("--profile", default="", help="comma list of publish,recover,replay,release")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--no-restart", action="store_true", help="skip (c): for hand-out experiments")
    parser.add_argument(
        "--delayed-index",
        type=json.loads,
        default={},
        help='settings other than the defaults, as JSON: {"max_time_step_per_segment_s": 3600}',
    )
    args = parser.parse_args()
    if args.quick:
        args.events = 200_000
    args.profile = {p.strip() for p in args.profile.split(",") if p.strip()}
    return args


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    work = configure(args)
    try:
        run(args)
        print(f"whole run: {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args) -> None:
    from streams import services
    from streams.delaying import stream_index

    print(f"machine: {machine()}")
    empty()
    warm_up()
    from django.conf import settings

    print(
        f"workload: {args.events:,} delayed events of <= 8 B on {args.segments} segments, due uniformly within "
        f"24 h (from +30 min), batches of {BATCH:,}; delayed settings {stream_index.DEFAULTS | args.delayed_index}"
        f"{' (NOT the defaults)' if args.delayed_index else ' (the defaults)'}; "
        f"PostgreSQL {args.database_url}, Redis {args.redis_url} (flushed), fsync {settings.CBR_FSYNC}",
        flush=True,
    )
    n = args.events
    base_ms = int(time.time() * 1000) + MARGIN_MS
    due_by = base_ms + int(SPREAD_MS * min(1.0, DUE_TARGET / n))

    # (a) publishing, and the index's memory
    gc.collect()
    used0, rss0, blocks0 = used_memory(), rss_bytes(), sys.getallocatedblocks()
    stream = services.do_create_stream(
        scope="bench", name=f"delayed-{n}", segment_count=args.segments, delayed_index=args.delayed_index
    )
    print("(a) publishing", flush=True)
    pub = publish(args, stream, base_ms, due_by, "publish" in args.profile)
    gc.collect()
    used1, rss1, blocks1 = used_memory(), rss_bytes(), sys.getallocatedblocks()
    import pyarrow as pa

    pool = pa.default_memory_pool()
    keys = index_keys(stream)
    total, counts = pending_total(stream)
    print(
        f"(a) published {n:,} in {pub['seconds']:.1f} s ({n / pub['seconds']:,.0f} events/s): appends with the "
        f"index's hook {pub['append']:.1f} s, maintenance (sealing) {pub['maintain']:.1f} s, "
        f"{pub['seals']} buckets sealed",
        flush=True,
    )
    print(
        f"    pending {total:,} (expected {n:,}){'' if total == n else '  CHECK FAILED'}; held in Redis: "
        f"{counts['mutable']:,} mutable, {counts['queue']:,} queued, {counts['sealing']:,} sealing, "
        f"{counts['due']:,} due; {counts['buckets']} buckets registered"
    )
    print(
        f"    index keys (MEMORY USAGE): {mb(sum(keys.values()))} at the end  "
        + "  ".join(f"{k} {mb(v)}" for k, v in sorted(keys.items(), key=lambda kv: -kv[1]) if v > 4096)
    )
    pk = pub["peak"]
    print(f"    index keys at their peak: {mb(pk['index'])} (with {pk['index_counts']})")
    print(
        f"    Redis used_memory: +{mb(used1 - used0)} at the end, +{mb(pk['used'] - used0)} at the peak "
        f"(whole instance, before: {mb(used0)})"
    )
    print(
        f"    this process's RSS: {mb(rss0)} before, {mb(rss1)} after (+{mb(rss1 - rss0)}); "
        f"peak sampled {mb(pk['rss'])} (+{mb(pk['rss'] - rss0)}); "
        f"{mb(pk['first_seal'][0])} -> {mb(pk['first_seal'][1])} across the first seal; Python objects +{blocks1 - blocks0:,} blocks "
        f"after a collection; pyarrow's pool ({pool.backend_name}) holds {mb(pool.bytes_allocated())}, "
        f"peaked at {mb(pool.max_memory())}",
        flush=True,
    )
    peak_index = max(pk["index"], sum(keys.values()))

    # (b) the in-memory baseline
    heap = None
    if not args.no_baseline:
        heap = baseline(n, base_ms, due_by)
        print(
            f"(b) Python heapq tracker, {n:,} (deliver_at, segment, offset) tuples: RSS +{mb(heap['rss'])} "
            f"({heap['rss'] / n:.0f} B each); {n / heap['add_s']:,.0f} pushes/s ({heap['add_s']:.1f} s); "
            f"popped the {heap['popped']:,} due in {heap['pop_s']:.2f} s ({heap['popped'] / heap['pop_s']:,.0f} pops/s)",
            flush=True,
        )

    # (c) restart: recovery from snapshots vs. replay
    rs = None
    if not args.no_restart:
        rs = restart(stream, int(time.time() * 1000), n, args.profile)
        report_restart(rs, n)

    # (d) hand-out of due events
    ho = hand_out(stream, due_by, pub["due"], "release" in args.profile)
    report_hand_out(args, n, ho, heap, rs, keys, peak_index, used1 - used0, rss1 - rss0)


def report_restart(rs: dict, n: int) -> None:
    ratio = rs["replay_s"] / rs["recover_s"]
    print(
        f"(c) recovery from snapshots: {rs['recover_s']:.2f} s ({rs['recover_done']['buckets']} buckets loaded, "
        f"{rs['recover_done']['replayed']:,} indexes re-read from the stream); pending after {rs['recover_total']:,}"
        f"{'' if rs['recover_total'] == n else '  CHECK FAILED'} ({rs['recover_counts']})"
    )
    print(
        f"    replay from the head: {rs['replay_s']:.2f} s ({rs['replay_done']['replayed']:,} indexes re-read); "
        f"pending after {rs['replay_total']:,}{'' if rs['replay_total'] == n else '  CHECK FAILED'} "
        f"({rs['replay_counts']})"
    )
    print(f"    where recovery's time went: {rs['recover_phases']} (the rest: the database, re-reading the stream)")
    print(f"    where replay's time went: {rs['replay_phases']} (the rest: re-reading the stream)")
    print(f"    replay / recovery = {ratio:,.0f}x", flush=True)


def report_hand_out(args, n: int, ho: dict, heap, rs, keys: dict, peak_index: int, used: int, rss: int) -> None:
    rate = ho["released"] / ho["release_s"] if ho["release_s"] else 0.0
    ok = ho["released"] == ho["expected"] == ho["queued_in_group"] and not ho["handed_early"] and not ho["out_of_order"]
    print(
        f"(d) cursor passed {ho['passed']:,} delayed events in {ho['reads']} reads ({ho['pass_s']:.1f} s, "
        f"{ho['handed_early']} handed out early)"
    )
    print(
        f"    release_due x{ho['calls']}: {ho['released']:,} released in {ho['release_s']:.2f} s = {rate:,.0f} events/s; "
        f"due {ho['expected']:,}, queued in the group's tracker {ho['queued_in_group']:,}, "
        f"released after a later one {ho['out_of_order']:,}"
        f"{'' if ok else '  CHECK FAILED'}"
    )
    print(f"    where the time went: {ho['phases']}")
    print(
        "    inside Redis (INFO commandstats over the release): "
        + ", ".join(
            f"{k} {s:.2f} s ({c:,} calls)" for k, (s, c) in sorted(ho["in_redis"].items(), key=lambda kv: -kv[1][0])
        )
    )
    print(f"    left in Redis: {ho['left']}", flush=True)

    print()
    print(f"summary ({n:,} events)")
    print(
        f"  (a) hot index in Redis: peak {mb(peak_index)}, end {mb(sum(keys.values()))}; "
        f"target <= 24 MB {'met' if peak_index <= TARGET_INDEX_BYTES else 'NOT met'}; "
        f"used_memory +{mb(used)}; RSS +{mb(rss)}"
    )
    if heap:
        print(
            f"  (b) heapq baseline: RSS +{mb(heap['rss'])}; {n / heap['add_s']:,.0f} adds/s, "
            f"{heap['popped'] / heap['pop_s']:,.0f} pops/s"
        )
    if rs:
        ratio = rs["replay_s"] / rs["recover_s"]
        print(
            f"  (c) recovery {rs['recover_s']:.2f} s vs replay {rs['replay_s']:.1f} s: {ratio:,.0f}x; "
            f"target >= {TARGET_RECOVERY_RATIO}x {'met' if ratio >= TARGET_RECOVERY_RATIO else 'NOT met'}"
            # the issue sets it for 10M pending: below that, re-reading the open bucket (a
            # fixed 50,000 indexes) weighs more against a shorter replay
            f"{'' if n >= 10_000_000 else ' (the target is set at 10M events)'}"
        )
    print(
        f"  (d) release_due {rate:,.0f} events/s ({ho['released']:,} in {ho['release_s']:.1f} s); "
        f"target >= {TARGET_RELEASE_S:,}/s {'met' if rate >= TARGET_RELEASE_S else 'NOT met'}",
        flush=True,
    )


if __name__ == "__main__":
    main()
