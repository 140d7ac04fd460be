"""Publish throughput: 100-byte events in batches of 1000.

(a) straight into the segment store (fsync per batch, CBR_FSYNC=batch);
(b) over HTTP to the real server (gunicorn, 2 workers x 2 threads) from 4 client processes;
peer: Redis Streams XADD pipelined in batches of 1000 to the local Redis (REDIS_URL or
127.0.0.1:6379). Prints the median events/s of interleaved rounds and the ratios.\nUsage: python bench/publish.py [--seconds N] [--rounds N] [--clients N]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import orjson
from _common import ROOT, machine, web_server

BATCH = 1000
EVENT = b"x" * 100
GUNICORN_ARGS = os.environ.get("CBR_BENCH_GUNICORN", "-k gthread --threads 2").split()


def bench_store(seconds: float, segments: int) -> float:
    from domain.events import EventIn
    from store.segment import StoreConfig
    from store.store import SegmentStore

    with tempfile.TemporaryDirectory(dir=ROOT / "var") as d:
        log = SegmentStore(Path(d), StoreConfig(fsync="batch")).stream("bench", segments)
        batch = [EventIn(EVENT) for _ in range(BATCH)]
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            log.append(batch)
            n += BATCH
        return n / (time.perf_counter() - t0)


def bench_redis(seconds: float) -> float:
    import redis

    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    key = f"cbr-bench-{secrets.token_hex(4)}"
    try:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            pipe = client.pipeline(transaction=False)
            for _ in range(BATCH):
                pipe.xadd(key, {"p": EVENT})
            pipe.execute()
            n += BATCH
        return n / (time.perf_counter() - t0)
    finally:
        client.delete(key)


def _http_client(port: int, token: str, path: str, seconds: float, counter) -> None:
    body = orjson.dumps({"events": [{"payload": EVENT.decode()}] * BATCH})
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        response.read()
        if response.status != 201:
            raise SystemExit(f"publish answered {response.status}")
        n += BATCH
    with counter.get_lock():
        counter.value += n


def bench_http(seconds: float, segments: int, clients: int = 2) -> float:
    with web_server(f"http{os.getpid()}", segments, ["-w", "2", *GUNICORN_ARGS]) as server:
        _http_client(server.port, server.token, server.path, 1.0, mp.Value("q", 0))  # warm both workers
        counter = mp.Value("q", 0)
        procs = [
            mp.Process(target=_http_client, args=(server.port, server.token, server.path, seconds, counter))
            for _ in range(clients)
        ]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return counter.value / (time.perf_counter() - t0)


def fsync_latency_ms(samples: int = 200) -> float:
    with tempfile.NamedTemporaryFile(dir=ROOT / "var") as f:
        t0 = time.perf_counter()
        for _ in range(samples):
            f.write(EVENT * 1000)
            f.flush()
            os.fdatasync(f.fileno())
        return (time.perf_counter() - t0) / samples * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8, help="per figure and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--clients", type=int, default=4, help="HTTP client processes")
    args = parser.parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    print(f"workload: {len(EVENT)}-byte events, batches of {BATCH}, {args.seconds:.0f} s x {args.rounds} rounds")
    print(f"fdatasync of a 100 KB write: {fsync_latency_ms():.2f} ms")
    figures: dict[str, list[float]] = {}
    runs = [("redis XADD pipelined", lambda: bench_redis(args.seconds))]
    for seg in (1, 4):
        runs.append((f"store, {seg} segment(s), fsync/batch", lambda seg=seg: bench_store(args.seconds, seg)))
    for seg in (1, 4):
        runs.append(
            (f"HTTP, gunicorn 2 workers, {seg} segment(s)", lambda seg=seg: bench_http(args.seconds, seg, args.clients))
        )
    for _ in range(args.rounds):
        for name, run in runs:
            figures.setdefault(name, []).append(run())
    redis_rate = statistics.median(figures["redis XADD pipelined"])
    for name, rates in figures.items():
        median = statistics.median(rates)
        print(
            f"{name:42s} {median:10,.0f} events/s  (range {min(rates):,.0f}-{max(rates):,.0f})"
            f"  {median / redis_rate:5.2f}x redis"
        )


if __name__ == "__main__":
    main()
