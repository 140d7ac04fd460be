"""Soak (issue 7): mixed load against the real stack for `--minutes` (10), then every invariant.

The stack, as `make run` starts it but on PostgreSQL and the machine's Redis: gunicorn (2 gthread
workers × 8 threads), a Celery worker (`-c 1`, the default queue), the compactor (a Celery worker
of the `compaction` queue, `-c 1`) and Celery beat with the database scheduler.
Beat runs a retention cycle every 10 s, seals due chunks every 10 s, compacts every 60 s,
checkpoints every 5 s and looks after the delayed indexes every 2 s. Chunks roll at 256 KiB
and seal after 20 s, so truncation deletes whole chunk files and compaction has sealed input.

The load:
  20 streams of 2 segments, 20 producer threads, --rate events/s in all (--batches requests a second
  per stream (2), ~200-byte JSON payloads):
    s00–s13  consumption-based size retention (min 256 KiB, max 64 MiB); 1 event in 2 000 poison;
    s14–s16  the same, 20 % of the events delayed 0.2–15 s;
    s17–s19  `compact,delete`, 1 000 keys each (3 % tombstones), consumption-based time
             retention (min 180 s); s19's view also has `compacted_retention_bytes`.
  10 reader groups (processes of 2 consumers each), each subscribed to 3 streams (every even
  stream has two groups), read 200 at a time and settle out of order: the batch shuffled and
  acked in two requests, a tenth held back to the next round; 1 % of first deliveries nacked with
  a 0.5 s delay, 0.2 % dropped (the lease expires after 10 s and it comes again), poison nacked
  until `max_deliveries` (3) dead-letters it (g9 skips it). g0–g7 release automatically at their
  checkpoints (every 5 s); g8 and g9 checkpoint and release by hand every 10 s.

Then producers stop, consumers drain every group (floor at the tail, nothing pending or waiting),
every compacted stream is compacted once more (as an operator would ask), beat and the worker stop, and the checks run on what is on disk and in the database:
  - every event answered 201 is readable, whole and unchanged, or a recorded truncation passed it;
  - no event before the head readable (store and API);
  - every subscriber's floors only moved forward (sampled every 10 s);
  - no subscriber's unconsumed data deleted unless a max-limit rule is recorded; every truncation
    complete and the history agreeing with the heads (tests/faults/invariants.py);
  - at least once: every group acknowledged every 201'd event of its streams, except the poison
    ones, which it dead-lettered (or skipped) — exactly as many as were published;
  - no delayed event handed out before it was due;
  - the compacted views hold the latest event of every key before their horizon.
Reported: events published and consumed, truncations, p50/p99 of publish, read and ack, errors
(target 0), bytes on disk and RSS every 10 s (with the RSS slope after the first two minutes).

Usage: .venv/bin/python bench/soak.py [--minutes 10] [--rate 600] [--batches 2]
       [--database-url postgres://postgres@127.0.0.1:5432/cbr_soak] [--redis-url redis://127.0.0.1:6379/5]
The database is dropped and created again; the Redis database is emptied. Exit 1 if a check
fails or any request failed. Figures also go to var/soak-<time>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from _common import ROOT, machine, manage, wait_http
from consume import free_port
from consume_common import pct

from cbr_client import CBRError, Client
from cbrweb import web
from cbrweb.run import celery_commands

STREAMS = 20
SEGMENTS = 2
DELAYED = range(14, 17)
COMPACTED = range(17, 20)
KEYS = 1000
POISON_EVERY = 2000
GROUPS = 10
CONSUMERS_PER_GROUP = 2
READ_MAX = 200
ACK_TIMEOUT_S = 10
MAX_DELIVERIES = 3
VIEW_BYTES = 150_000  # s19's compacted_retention_bytes
SAMPLE_S = 10
SERVICE_ENV = {
    "CBR_RETENTION_INTERVAL": "10",
    "CBR_SEAL_INTERVAL": "10",
    "CBR_COMPACTION_INTERVAL": "60",
    "CBR_CHUNK_BYTES": str(256 * 1024),
    "CBR_CHUNK_SECONDS": "20",
    "CBR_FSYNC": "batch",
    "CBR_LOG_LEVEL": "WARNING",
    "DJANGO_SECRET_KEY": "soak-only",
}


def stream_name(n: int) -> str:
    return f"s{n:02d}"


def group_streams(g: int) -> list[int]:
    return [2 * g, 2 * g + 1, (2 * g + 2) % STREAMS]


def group_config(g: int) -> dict:
    config = {
        "ack_timeout_s": ACK_TIMEOUT_S,
        "max_deliveries": MAX_DELIVERIES,
        "max_ack_pending": 2000,
        "on_poison": "skip" if g == 9 else "dead_letter",
    }
    if g >= 8:
        return {**config, "retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT"}
    return {**config, "retention_type": "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", "checkpoint_interval_s": 5}


def stream_config(n: int) -> dict:
    if n in COMPACTED:
        config = {
            "cleanup_policy": "compact,delete",
            "min_compaction_lag_s": 0,
            "delete_retention_s": 30,
            "retention_policy": {"limit_type": "time", "min": 180, "max": 3600, "consumption_based": True},
        }
        if n == COMPACTED[-1]:
            config["compacted_retention_bytes"] = VIEW_BYTES
        return config
    config = {
        "retention_policy": {"limit_type": "size", "min": 256 * 1024, "max": 64 * 2**20, "consumption_based": True}
    }
    if n in DELAYED:
        config["max_delay_s"] = 60
    return config


def now_ms() -> int:
    return int(time.time() * 1000)


# -- producers (one process, a thread per stream) ----------------------------------------------------


def produce(url: str, token: str, rate: float, per_s: int, stop, t0: float, out) -> None:
    results = [None] * STREAMS

    def run(n: int) -> None:
        rng = random.Random(n)
        client = Client(url, token=token, timeout=120)
        name = f"soak/{stream_name(n)}"
        per_batch = max(1, round(rate / STREAMS / per_s))
        ledger: dict[tuple[str, int], tuple[int, str | None]] = {}  # (segment, offset) → (crc, key)
        poison: set[tuple[str, int]] = set()
        latencies, errors, seq, tick = [], Counter(), 0, time.monotonic()
        while not stop.is_set():
            events, meta = [], []
            for _ in range(per_batch):
                seq += 1
                if n in COMPACTED:
                    key = f"k{rng.randrange(KEYS)}"
                    body = "" if rng.random() < 0.03 else json.dumps({"n": seq, "t": now_ms(), "v": "x" * 150})
                    events.append({"payload": body, "key": key, "routing_key": key})
                    meta.append((body, key, False))
                    continue
                bad = rng.randrange(POISON_EVERY) == 0
                delay = rng.randrange(200, 15_000) if n in DELAYED and rng.random() < 0.2 else 0
                body = json.dumps({"n": seq, "t": now_ms(), "due": now_ms() + delay, "poison": bad, "v": "x" * 120})
                event = {"payload": body, "routing_key": f"r{seq % 64}"}
                if delay:
                    event["delay_ms"] = delay
                events.append(event)
                meta.append((body, None, bad))
            started = time.monotonic()
            try:
                positions = client.publish(name, events)
            except (CBRError, OSError) as exc:
                errors[_error_kind(exc)] += 1
                client.close()
                time.sleep(0.5)
                continue
            latencies.append((started - t0, time.monotonic() - started))
            for pos, (body, key, bad) in zip(positions, meta):
                where = (pos["segment"], pos["offset"])
                ledger[where] = (zlib.crc32(body.encode()), key)
                if bad:
                    poison.add(where)
            tick += 1 / per_s
            time.sleep(max(0.0, tick - time.monotonic()))
            tick = max(tick, time.monotonic() - 5 / per_s)  # behind by more than 5 batches: no burst
        client.close()
        results[n] = {"ledger": ledger, "poison": poison, "latencies": latencies, "errors": errors}

    threads = [threading.Thread(target=run, args=(n,)) for n in range(STREAMS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(("producers", results))


def _error_kind(exc: Exception) -> str:
    if isinstance(exc, CBRError):
        return f"{exc.status} {exc.code}"
    return type(exc).__name__


# -- consumers (a process per group, a thread per consumer) -------------------------------------------


@dataclass
class ConsumerResult:
    acked: dict = field(default_factory=lambda: defaultdict(set))  # (stream, segment) → offsets
    deliveries: int = 0
    redeliveries: int = 0
    early: list = field(default_factory=list)  # (stream, segment, offset, ms early)
    refused: int = 0
    nacked: int = 0
    dropped: int = 0
    releases: int = 0
    read: list = field(default_factory=list)  # (t, seconds)
    ack: list = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)


def consume(g: int, url: str, token: str, done, t0: float, out) -> None:
    try:
        result = ConsumerResult()
        lock = threading.Lock()
        threads = [
            threading.Thread(target=_consumer, args=(g, c, url, token, done, t0, result, lock))
            for c in range(CONSUMERS_PER_GROUP)
        ]
        if g >= 8:
            threads.append(threading.Thread(target=_releaser, args=(g, url, token, done, result)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        result.acked = {k: sorted(v) for k, v in result.acked.items()}
        out.put(("group", g, result))
    except BaseException:
        out.put(("error", g, traceback.format_exc()))


def _consumer(g, c, url, token, done, t0, result: ConsumerResult, lock) -> None:
    rng = random.Random(g * 100 + c)
    client = Client(url, token=token, timeout=120)
    group = client.reader_group(f"soak/g{g}")
    held: list = []  # acknowledgements kept back to the next round (out of order across reads)

    def settle(to_ack, to_nack, delayed_nack):
        calls = (
            (to_ack, group.ack),
            (to_nack, lambda ids: group.nack(ids, reason="poison")),
            (delayed_nack, lambda ids: group.nack(ids, delay_ms=500, reason="try later")),
        )
        for deliveries, call in calls:
            if not deliveries:
                continue
            started = time.monotonic()
            try:
                call([d["delivery_id"] for d in deliveries])
                refused = set()
            except CBRError as exc:
                if exc.code not in ("lease_lost", "unknown_delivery"):
                    raise
                refused = {r["delivery_id"] for r in exc.body.get("refused", [])}
            with lock:
                result.ack.append((started - t0, time.monotonic() - started))
                result.refused += len(refused)
                if deliveries is to_ack:
                    for d in deliveries:
                        if d["delivery_id"] not in refused:
                            result.acked[(d["stream"], d["segment"])].add(d["offset"])

    while not done.is_set():
        started = time.monotonic()
        try:
            got = group.read(max_events=READ_MAX, consumer=f"c{c}")
        except (CBRError, OSError) as exc:
            with lock:
                result.errors[_error_kind(exc)] += 1
            client.close()
            time.sleep(0.5)
            continue
        received = now_ms()
        with lock:
            result.read.append((started - t0, time.monotonic() - started))
        if not got:
            try:
                settle(held, [], [])
            except (CBRError, OSError) as exc:
                with lock:
                    result.errors[_error_kind(exc)] += 1
            held = []
            time.sleep(0.05)
            continue
        to_ack, to_nack, later = [], [], []
        for message in got:
            d = message.data
            first = d["delivery_count"] == 1
            body = json.loads(d["payload"]) if d.get("payload") else {}
            with lock:
                result.deliveries += 1
                result.redeliveries += not first
                due = max(body.get("due", 0), _ms(d.get("deliver_at")))
                if received < due:
                    result.early.append((d["stream"], d["segment"], d["offset"], due - received))
            if body.get("poison"):
                to_nack.append(d)
            elif first and rng.random() < 0.01:
                later.append(d)
            elif first and rng.random() < 0.002:
                with lock:
                    result.dropped += 1  # as if the consumer died holding it: the lease expires
            else:
                to_ack.append(d)
        rng.shuffle(to_ack)
        keep = len(to_ack) // 10
        now_acks, next_held = held + to_ack[keep:], to_ack[:keep]
        half = len(now_acks) // 2
        try:
            settle(now_acks[half:], to_nack, later)
            settle(now_acks[:half], [], [])
        except (CBRError, OSError) as exc:
            with lock:
                result.errors[_error_kind(exc)] += 1
            client.close()
        with lock:
            result.nacked += len(to_nack) + len(later)
        held = next_held
    if held:
        settle(held, [], [])
    client.close()


def _ms(deliver_at) -> int:
    if not deliver_at:
        return 0
    from datetime import datetime

    return int(datetime.fromisoformat(deliver_at.replace("Z", "+00:00")).timestamp() * 1000)


def _releaser(g, url, token, done, result: ConsumerResult) -> None:
    """A manual-release group: checkpoint, then release the checkpoint's cuts, every 10 s."""
    client = Client(url, token=token, timeout=120)
    group = client.reader_group(f"soak/g{g}")
    n = 0
    while not done.wait(10):
        n += 1
        try:
            group.checkpoint(f"soak-{n}", persist=True)
            group.release(f"soak-{n}")
            result.releases += 1
        except (CBRError, OSError) as exc:
            result.errors[_error_kind(exc)] += 1
            client.close()
    client.close()


# -- the stack ---------------------------------------------------------------------------------------


class Stack:
    def __init__(self, args):
        self.args = args
        (ROOT / "var").mkdir(exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="soak-", dir=ROOT / "var"))
        self.data = self.work / "data"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {
            **os.environ,
            **SERVICE_ENV,
            "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
            "DATABASE_URL": args.database_url,
            "REDIS_URL": args.redis_url,
            "CBR_DATA_DIR": str(self.data),
            "CBR_VAR_DIR": str(self.work / "var"),
        }

    def start(self) -> None:
        import redis

        _fresh_database(self.args.database_url)
        redis.Redis.from_url(self.args.redis_url).flushdb()
        manage(self.env, "migrate", "--noinput")
        self.token = manage(
            self.env,
            "shell",
            "-c",
            (
                "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
                "u = User.objects.create_user('soak', is_staff=True, is_superuser=True);"
                "print(Token.objects.create(user=u).key)"
            ),
        ).split()[-1]
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        commands = {
            "web": web.command(
                f"127.0.0.1:{port}", 2, "--graceful-timeout", "5", "--keep-alive", "30", "--log-level", "warning"
            ),
            **celery_commands("warning", str(self.work / "celerybeat-schedule")),  # as make run starts them
        }
        for name, command in commands.items():
            log = open(self.work / f"{name}.log", "wb")
            self.procs[name] = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_http(f"{self.url}/login/")

    def stop(self, name: str, timeout: float = 60) -> None:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.send_signal(signal.SIGTERM)  # Celery's warm shutdown: running tasks finish
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        except ProcessLookupError:
            pass

    def log_problems(self) -> dict[str, int]:
        """Tracebacks and ERROR lines in each service's log."""
        found = {}
        for name in self.procs:
            text = (self.work / f"{name}.log").read_text(errors="replace")
            found[name] = text.count("Traceback") + sum(1 for line in text.splitlines() if "ERROR" in line)
        return found

    def cleanup(self, keep: bool) -> None:
        for name in ("beat", "compactor", "worker", "web"):
            self.stop(name, 20)
        if not keep:
            shutil.rmtree(self.work, ignore_errors=True)


def _fresh_database(url: str) -> None:
    if not url.startswith("postgres"):
        raise SystemExit("the soak runs on PostgreSQL: --database-url postgres://…")
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def set_up_streams(stack: Stack) -> None:
    with Client(stack.url, token=stack.token) as api:
        for n in range(STREAMS):
            api.create_stream("soak", stream_name(n), segment_count=SEGMENTS, **stream_config(n))
        for g in range(GROUPS):
            api.create_reader_group(
                "soak", f"g{g}", [f"soak/{stream_name(n)}" for n in group_streams(g)], **group_config(g)
            )


# -- sampling ------------------------------------------------------------------------------------------


def rss_mib(proc: subprocess.Popen) -> tuple[float, float]:
    """(Python processes, JVMs) of a service and its children, MiB."""
    import psutil

    try:
        root = psutil.Process(proc.pid)
        python = java = 0
        for p in [root, *root.children(recursive=True)]:
            try:
                rss = p.memory_info().rss
                if p.name() == "java":
                    java += rss
                else:
                    python += rss
            except psutil.NoSuchProcess:
                pass
        return python / 2**20, java / 2**20
    except psutil.NoSuchProcess:
        return 0.0, 0.0


def disk_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total


class Sampler(threading.Thread):
    def __init__(self, stack: Stack, t0: float):
        super().__init__(daemon=True)
        self.stack, self.t0 = stack, t0
        self.rows: list[dict] = []
        self.floors: list[dict] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        import redis
        from django.db import connection

        from retention.models import TruncationRecord
        from tests.faults.invariants import floors

        r = redis.Redis.from_url(self.stack.args.redis_url)
        while not self.stopped.wait(SAMPLE_S):
            web, _ = rss_mib(self.stack.procs["web"])
            worker, _ = rss_mib(self.stack.procs["worker"])
            compactor, jvm = rss_mib(self.stack.procs["compactor"])
            beat, _ = rss_mib(self.stack.procs["beat"])
            with connection.cursor() as cur:
                cur.execute("SELECT pg_database_size(current_database())")
                db = cur.fetchone()[0]
            self.floors.append(floors())
            lag = subscribers_lag(self.floors[-1])
            self.rows.append(
                {
                    "t": round(time.monotonic() - self.t0),
                    "disk_mib": disk_bytes(self.stack.data) / 2**20,
                    "web_mib": web,
                    "worker_mib": worker,
                    "compactor_mib": compactor,
                    "jvm_mib": jvm,
                    "beat_mib": beat,
                    "redis_mib": r.info("memory")["used_memory"] / 2**20,
                    "db_mib": db / 2**20,
                    "truncations": TruncationRecord.objects.count(),
                    "lag": lag,
                }
            )
            connection.close()


def subscribers_lag(floors: dict[tuple[str, str, str], int]) -> int:
    """Events published and not yet processed, summed over every subscriber and segment."""
    from streams import logs
    from tests.faults.invariants import stream_named

    tails = {}
    for _, name, _ in floors:
        if name not in tails:
            tails[name] = logs.stream_log(stream_named(name)).tail_cut()
    return sum(tails[name][seg] - floor for (_, name, seg), floor in floors.items())


def slope_per_min(rows: list[dict], key: str, after_s: float) -> float:
    points = [(r["t"], r[key]) for r in rows if r["t"] >= after_s]
    if len(points) < 3:
        return float("nan")
    xs, ys = zip(*points)
    mx, my = statistics.mean(xs), statistics.mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


# -- the checks ------------------------------------------------------------------------------------


def check_all(stack: Stack, produced: list[dict], groups: dict[int, ConsumerResult], floor_samples) -> list[str]:
    """Every invariant; answers the failures (empty: all hold)."""
    from tests.faults import invariants as inv

    failures: list[str] = []

    def check(what: str, fn, *args) -> None:
        try:
            fn(*args)
        except AssertionError as exc:
            failures.append(f"{what}: {exc}")

    cuts = inv.acknowledgement_cuts()
    with Client(stack.url, token=stack.token) as api:
        for n in range(STREAMS):
            name = f"soak/{stream_name(n)}"
            stream = inv.stream_named(name)
            check(f"{name} whole", _check_published, stream, produced[n]["ledger"])
            check(f"{name} nothing before the head (API)", inv.check_nothing_before_head_over_api, api, name)
            check(f"{name} retention safe", inv.check_retention_safe, stream, cuts)
        check("floors never back", inv.check_floors_never_regress, floor_samples)
        for g, result in groups.items():
            info = api.reader_group(f"soak/g{g}").info()
            for n in group_streams(g):
                check(f"g{g} on s{n:02d}", _check_at_least_once, g, n, produced[n], result, info)
            if result.early:
                failures.append(f"g{g}: {len(result.early)} delayed events handed out early, e.g. {result.early[:3]}")
        for n in COMPACTED:
            check(f"s{n} compacted view", _check_view, api, n, produced[n]["ledger"])
    return failures


def _check_published(stream, ledger: dict) -> None:
    from retention.models import TruncationRecord
    from streams import logs
    from tests.faults.invariants import check_log_whole

    readable = check_log_whole(stream)
    heads = logs.stream_log(stream).head_cut()
    truncated = TruncationRecord.objects.filter(stream=stream).exists()
    for (seg, offset), (crc, _) in ledger.items():
        if offset < heads[seg]:
            assert truncated, f"{stream} {seg}:{offset} gone with no truncation recorded"
        else:
            assert zlib.crc32(readable.get((seg, offset), b"?")) == crc, f"{stream} {seg}:{offset} lost or changed"


def _check_at_least_once(g: int, n: int, produced: dict, result: ConsumerResult, info: dict) -> None:
    name = f"soak/{stream_name(n)}"
    poison = produced["poison"]
    for seg in map(str, range(SEGMENTS)):
        acked = set(result.acked.get((name, seg), ()))
        missing = [off for (s, off) in produced["ledger"] if s == seg and off not in acked and (s, off) not in poison]
        assert not missing, f"{len(missing)} events never acknowledged, e.g. {sorted(missing)[:5]}"
        wrongly = [off for (s, off) in poison if s == seg and off in acked]
        assert not wrongly, f"poison events acknowledged: {wrongly[:5]}"
    positions = [p for p in info["positions"] if p["stream"] == name]
    for p in positions:
        assert p["floor"] == p["tail"] and not p["pending"] and not p["waiting"], f"not drained: {p}"
        assert not p["missed"] and p["halted_at"] is None, f"missed or halted: {p}"
    counted = sum(p["skipped" if g == 9 else "dead_lettered"] for p in positions)
    assert counted == len(poison), f"{counted} dead-lettered/skipped, {len(poison)} poison published"


def _check_view(api: Client, n: int, ledger: dict) -> None:
    """The view against a model: per key, the latest 201'd event before the horizon (routing by key
    keeps a key on one segment, so latest is highest offset)."""
    name = f"soak/{stream_name(n)}"
    rows, after = [], None
    while True:
        query = "limit=10000" + (f"&after={after}" if after else "")
        page = api.request("GET", f"streams/{name}/compacted/?{query}")
        rows += page["events"]
        after = page["next_after"]
        if not after:
            break
    horizon = page["horizon"]
    assert any(horizon.values()), f"never compacted (horizon {horizon})"
    latest: dict[str, tuple[int, str, int]] = {}
    for (seg, offset), (crc, key) in ledger.items():
        if offset < horizon.get(seg, 0) and (key not in latest or offset > latest[key][2]):
            latest[key] = (crc, seg, offset)
    empty = zlib.crc32(b"")
    got = {r["key"]: r for r in rows}
    for key, r in got.items():
        assert key in latest, f"key {key} in the view was never published before the horizon"
        crc, seg, offset = latest[key]
        assert (r["segment"], r["offset"]) == (seg, offset), (
            f"key {key}: view has {r['segment']}:{r['offset']}, latest {seg}:{offset}"
        )
        assert zlib.crc32(base64_payload(r)) == crc, f"key {key}: payload differs"
    if n == COMPACTED[-1]:  # retention marks by bytes: a subset, within the bound
        held = sum(len(base64_payload(r)) for r in rows)
        assert held <= VIEW_BYTES, f"view holds {held} payload bytes > {VIEW_BYTES}"
        return
    absent = [k for k, (crc, _, _) in latest.items() if k not in got and crc != empty]
    assert not absent, f"{len(absent)} keys missing from the view, e.g. {absent[:5]}"


def base64_payload(event: dict) -> bytes:
    import base64

    return base64.b64decode(event["payload_b64"])


# -- the run --------------------------------------------------------------------------------------


def drain(stack: Stack, timeout: float) -> float:
    """Waits until every group's floors are at the tails with nothing pending or waiting."""
    started = time.monotonic()
    with Client(stack.url, token=stack.token) as api:
        while time.monotonic() - started < timeout:
            left = 0
            for g in range(GROUPS):
                for p in api.reader_group(f"soak/g{g}").info()["positions"]:
                    left += p["tail"] - p["floor"] + p["pending"] + p["waiting"]
            if not left:
                return time.monotonic() - started
            time.sleep(2)
    raise SystemExit(f"groups not drained after {timeout} s")


def compact_now(stack: Stack, timeout: float) -> None:
    """One more compaction of every compacted stream, as an operator would ask for it, so the view
    checked covers what the run published (a run beat already started counts)."""
    with Client(stack.url, token=stack.token) as api:
        for n in COMPACTED:
            try:
                api.request("POST", f"streams/soak/{stream_name(n)}/compactions/")
            except CBRError as exc:
                if exc.code != "compaction_running":
                    raise
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            states = [
                run["state"]
                for n in COMPACTED
                for run in api.request("GET", f"streams/soak/{stream_name(n)}/compactions/")["results"]
            ]
            if not {"queued", "running"} & set(states):
                return
            time.sleep(2)
    raise SystemExit(f"compactions not finished after {timeout} s")


def latency_line(what: str, samples: list[tuple[float, float]]) -> str:
    values = [s for _, s in samples]
    return (
        f"{what:8} {len(values):>9,} requests   p50 {pct(values, 0.5) * 1000:7.1f} ms   "
        f"p99 {pct(values, 0.99) * 1000:7.1f} ms   max {max(values, default=0) * 1000:7.0f} ms"
    )


def per_minute_p99(samples: list[tuple[float, float]]) -> str:
    minutes: dict[int, list[float]] = defaultdict(list)
    for t, s in samples:
        minutes[int(t // 60)].append(s)
    return " ".join(f"{pct(v, 0.99) * 1000:.0f}" for _, v in sorted(minutes.items()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--rate", type=float, default=600, help="events/s published in all")
    p.add_argument("--batches", type=int, default=2, help="publish requests per second per stream")
    p.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cbr_soak")
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/5")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, store)")
    args = p.parse_args()

    stack = Stack(args)
    for key in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "CBR_DATA_DIR"):
        os.environ[key] = stack.env[key]
    print(f"soak: {args.minutes:g} min at {args.rate:,.0f} events/s on {machine()}", flush=True)
    ok = False
    try:
        stack.start()
        import django

        django.setup()
        set_up_streams(stack)
        ctx = mp.get_context("spawn")
        out, stop, done = ctx.Queue(), ctx.Event(), ctx.Event()
        t0 = time.monotonic()
        sampler = Sampler(stack, t0)
        sampler.start()
        children = [ctx.Process(target=produce, args=(stack.url, stack.token, args.rate, args.batches, stop, t0, out))]
        children += [
            ctx.Process(target=consume, args=(g, stack.url, stack.token, done, t0, out)) for g in range(GROUPS)
        ]
        for c in children:
            c.start()
        load_s = args.minutes * 60
        while time.monotonic() - t0 < load_s:
            time.sleep(5)
            if sampler.rows and int(time.monotonic() - t0) % 60 < 5:
                row = sampler.rows[-1]
                print(
                    f"  {row['t']:>4} s  disk {row['disk_mib']:6.1f} MiB  web {row['web_mib']:5.0f} MiB  "
                    f"worker {row['worker_mib']:5.0f} MiB  compactor {row['compactor_mib']:.0f}+{row['jvm_mib']:.0f} MiB  "
                    f"truncations {row['truncations']}  lag {row['lag']:,}",
                    flush=True,
                )
        stop.set()
        results: dict = {}
        while "producers" not in results:
            kind, *value = out.get(timeout=120)
            results[kind] = value
        produced = results.pop("producers")[0]
        drained_s = drain(stack, timeout=max(300, load_s))
        done.set()
        groups: dict[int, ConsumerResult] = {}
        if results:  # a consumer that failed while the producers ran
            raise SystemExit(f"unexpected before the drain: {results}")
        while len(groups) < GROUPS:
            kind, g, value = out.get(timeout=120)
            if kind == "error":
                raise SystemExit(f"group g{g} failed:\n{value}")
            groups[g] = value
        for c in children:
            c.join(30)
        compact_now(stack, timeout=300)
        elapsed = time.monotonic() - t0
        sampler.stopped.set()
        sampler.join(30)
        for name in ("beat", "compactor", "worker"):  # nothing changes the store while it is checked
            stack.stop(name, 120)
        ok = report(stack, args, produced, groups, sampler, drained_s, elapsed)
    finally:
        stack.cleanup(keep=args.keep or not ok)
        if not ok:
            print(f"soak: logs and store kept in {stack.work}")
    return 0 if ok else 1


def durations(runs) -> str:
    """p50/max of how long runs took, and the mean time between their starts (seconds)."""
    rows = sorted((r.started_at, r.finished_at) for r in runs if r.started_at and r.finished_at)
    if not rows:
        return "none finished"
    took = [(b - a).total_seconds() for a, b in rows]
    gaps = [(b[0] - a[0]).total_seconds() for a, b in zip(rows, rows[1:])]
    gap = f", one every {statistics.mean(gaps):.1f} s (longest gap {max(gaps):.0f} s)" if gaps else ""
    return f"took p50 {pct(took, 0.5):.1f} s, max {max(took):.1f} s{gap}"


def report(stack, args, produced, groups, sampler, drained_s, elapsed) -> bool:
    from compaction.models import CompactionRun
    from retention.models import RetentionCycle, TruncationRecord

    failures = check_all(stack, produced, groups, sampler.floors)
    published = sum(len(p["ledger"]) for p in produced)
    publish_lat = [x for p in produced for x in p["latencies"]]
    read_lat = [x for r in groups.values() for x in r.read]
    ack_lat = [x for r in groups.values() for x in r.ack]
    errors = Counter()
    for p in produced:
        errors.update(p["errors"])
    for r in groups.values():
        errors.update(r.errors)
    consumed = sum(len(v) for r in groups.values() for v in r.acked.values())
    cycles = RetentionCycle.objects.all()
    runs = Counter(CompactionRun.objects.values_list("state", flat=True))
    truncations = TruncationRecord.objects.all()
    reclaimed = sum(t.bytes_deleted for t in truncations)
    max_rules = sum(1 for t in truncations if "limit_max" in t.rule or "max_bound" in t.rule)
    logs = stack.log_problems()
    rows = sampler.rows
    load_s = args.minutes * 60
    lines = [
        f"duration {load_s / 60:g} min of load + {drained_s:.0f} s to drain ({elapsed:.0f} s in all)",
        f"published {published:,} events ({published / load_s:,.0f}/s) on {STREAMS} streams; "
        f"{sum(len(p['poison']) for p in produced)} poison",
        f"consumed  {consumed:,} acknowledgements in {GROUPS} groups; {sum(r.deliveries for r in groups.values()):,} "
        f"deliveries, {sum(r.redeliveries for r in groups.values()):,} redeliveries, "
        f"{sum(r.nacked for r in groups.values()):,} nacks, {sum(r.dropped for r in groups.values()):,} dropped "
        f"(lease expiry), {sum(r.refused for r in groups.values())} acks refused (lease lost), "
        f"{sum(r.releases for r in groups.values())} manual releases",
        latency_line("publish", publish_lat) + f"   ({round(args.rate / STREAMS / args.batches)} events each)",
        latency_line("read", read_lat) + f"   (up to {READ_MAX})",
        latency_line("ack/nack", ack_lat),
        "p99 per minute, ms: publish "
        + per_minute_p99(publish_lat)
        + " | read "
        + per_minute_p99(read_lat)
        + " | ack "
        + per_minute_p99(ack_lat),
        f"retention: {cycles.count()} cycles ({cycles.filter(state='failed').count()} failed; "
        f"{durations(cycles)}), {truncations.count():,} truncations ({max_rules} by a max limit), "
        f"{reclaimed / 2**20:,.0f} MiB of chunk files deleted",
        f"compaction: {sum(runs.values())} runs {dict(runs)} ({durations(CompactionRun.objects.all())})",
        f"errors: {sum(errors.values())} {dict(errors) or ''}; service logs (tracebacks/ERROR lines): {logs}",
        f"disk MiB every {SAMPLE_S * 6} s: " + " ".join(f"{r['disk_mib']:.0f}" for r in rows[5::6]),
        f"subscribers' lag (events not yet processed) every {SAMPLE_S * 6} s: "
        + " ".join(f"{r['lag']:,}" for r in rows[5::6]),
        f"   max {max(r['disk_mib'] for r in rows):.0f}, last {rows[-1]['disk_mib']:.0f}; "
        f"database {rows[-1]['db_mib']:.0f} MiB; Redis used_memory {rows[-1]['redis_mib']:.0f} MiB",
        f"RSS MiB every {SAMPLE_S * 6} s, web (master+2 workers): "
        + " ".join(f"{r['web_mib']:.0f}" for r in rows[5::6]),
        "   worker (Python): "
        + " ".join(f"{r['worker_mib']:.0f}" for r in rows[5::6])
        + "   compactor (Python): "
        + " ".join(f"{r['compactor_mib']:.0f}" for r in rows[5::6])
        + "   its JVM: "
        + " ".join(f"{r['jvm_mib']:.0f}" for r in rows[5::6])
        + "   beat: "
        + " ".join(f"{r['beat_mib']:.0f}" for r in rows[5::6]),
        f"   slope after 2 min: web {slope_per_min(rows, 'web_mib', 120):+.2f} MiB/min, worker "
        f"{slope_per_min(rows, 'worker_mib', 120):+.2f}, compactor {slope_per_min(rows, 'compactor_mib', 120):+.2f}, beat {slope_per_min(rows, 'beat_mib', 120):+.2f}, "
        f"disk {slope_per_min(rows, 'disk_mib', 120):+.2f}",
        "invariants: " + ("all hold" if not failures else f"{len(failures)} FAILED"),
        *(f"   {f}" for f in failures[:20]),
    ]
    print("\n".join(lines), flush=True)
    out = ROOT / "var" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"lines": lines, "samples": rows, "failures": failures}, indent=1))
    print(f"figures in {out}")
    return not failures and not errors


if __name__ == "__main__":
    sys.exit(main())
