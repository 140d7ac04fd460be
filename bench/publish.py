"""Publish throughput: 100-byte events in batches of 1000.

(a) straight into the segment store (fsync per batch, CBR_FSYNC=batch);
(b) over HTTP to the real server (gunicorn, 2 workers x 2 threads) from 4 client processes, each
    waiting for its batch's 201 (the events durable) before the next;
peers, from as many client processes, each waiting for its batch's acknowledgements before the
next:
    Redis Streams XADD pipelined in batches of 1000 (REDIS_URL or 127.0.0.1:6379; one client);
    NATS JetStream (--nats-url): nats-py `publish_async` of a batch, then
        `publish_async_completed()` (every publish acknowledged by the server), into a stream
        with file storage;
    RabbitMQ (--rabbitmq-url): pika, a channel in confirm mode publishing a batch of persistent
        messages to a durable quorum queue, then waiting for the broker's confirms of all of it.
Prints the median events/s of interleaved rounds and the ratios (--no-peers: CBR and Redis only;
a peer whose server does not answer is skipped, with a line saying so).
Usage: python bench/publish.py [--seconds N] [--rounds N] [--clients N] [--no-peers]
"""

from __future__ import annotations

import argparse
import contextlib
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
THREADS = int(os.environ.get("CBR_BENCH_WEB_THREADS", "2"))


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
    with web_server(f"http{os.getpid()}", segments, workers=2, threads=THREADS) as server:
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


def _jetstream_client(url: str, subject: str, seconds: float, counter) -> None:
    import asyncio

    import nats

    async def run() -> int:
        nc = await nats.connect(url)
        js = nc.jetstream()
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(BATCH):
                await js.publish_async(subject, EVENT)
            await js.publish_async_completed()  # every publish of the batch acknowledged
            n += BATCH
        await nc.close()
        return n

    n = asyncio.run(run())
    with counter.get_lock():
        counter.value += n


def bench_jetstream(url: str, seconds: float, clients: int) -> float:
    import asyncio

    import nats
    from nats.js.api import StorageType

    name, subject = f"CBR_BENCH_PUBLISH_{os.getpid()}", f"cbr.bench.publish.{os.getpid()}"

    async def admin(create: bool) -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(name)
        if create:
            await js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE)
        await nc.close()

    asyncio.run(admin(True))
    try:
        return _crew(_jetstream_client, (url, subject, seconds), clients)
    finally:
        asyncio.run(admin(False))


def _rabbitmq_client(url: str, queue: str, seconds: float, counter) -> None:
    import pika

    state: dict = {"sent": 0, "confirmed": 0, "t0": 0.0, "channel": None}

    def publish_batch(channel) -> None:
        persistent = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
        for _ in range(BATCH):
            channel.basic_publish("", queue, EVENT, persistent)
        state["sent"] += BATCH

    def on_confirm(frame) -> None:
        ack = frame.method
        if not isinstance(ack, pika.spec.Basic.Ack):
            raise SystemExit("rabbitmq: a publish was refused (nack)")
        state["confirmed"] = ack.delivery_tag if ack.multiple else state["confirmed"] + 1
        if state["confirmed"] == state["sent"]:  # the whole batch confirmed: the next, or stop
            if time.perf_counter() - state["t0"] < seconds:
                publish_batch(state["channel"])
            else:
                connection.close()

    def on_channel(ch) -> None:
        state["channel"] = ch
        ch.confirm_delivery(on_confirm, callback=lambda _frame: start(ch))

    def start(ch) -> None:
        state["t0"] = time.perf_counter()
        publish_batch(ch)

    connection = pika.SelectConnection(
        pika.URLParameters(url),
        on_open_callback=lambda conn: conn.channel(on_open_callback=on_channel),
        on_open_error_callback=lambda conn, error: conn.ioloop.stop(),
        on_close_callback=lambda conn, reason: conn.ioloop.stop(),
    )
    connection.ioloop.start()
    with counter.get_lock():
        counter.value += state["confirmed"]


def bench_rabbitmq(url: str, seconds: float, clients: int) -> float:
    import pika

    queue = f"cbr-bench-publish-{os.getpid()}"
    connection = pika.BlockingConnection(pika.URLParameters(url))
    ch = connection.channel()
    ch.queue_delete(queue)
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    try:
        return _crew(_rabbitmq_client, (url, queue, seconds), clients)
    finally:
        ch.queue_delete(queue)
        connection.close()


def _crew(target, args: tuple, clients: int) -> float:
    """`clients` processes of `target(*args, counter)`; events/s of all together."""
    counter = mp.Value("q", 0)
    procs = [mp.Process(target=target, args=(*args, counter)) for _ in range(clients)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a {target.__name__} process failed ({p.exitcode})")
    return counter.value / (time.perf_counter() - t0)


def _reachable(url: str, default_port: int) -> bool:
    """Whether a peer's server answers at `url` (`make bench` on a machine without it skips it)."""
    import socket
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2).close()
        return True
    except OSError:
        print(f"peer at {parts.hostname}:{parts.port or default_port} not reachable: skipped")
        return False


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
    parser.add_argument("--clients", type=int, default=4, help="HTTP client processes (and the peers')")
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--rabbitmq-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="without JetStream and RabbitMQ")
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
    if args.peers and _reachable(args.nats_url, 4222):
        runs.append(
            ("JetStream publish_async, acked/batch", lambda: bench_jetstream(args.nats_url, args.seconds, args.clients))
        )
    if args.peers and _reachable(args.rabbitmq_url, 5672):
        runs.append(
            ("RabbitMQ quorum, confirms/batch", lambda: bench_rabbitmq(args.rabbitmq_url, args.seconds, args.clients))
        )
    for _ in range(args.rounds):
        for name, run in runs:
            figures.setdefault(name, []).append(run())
    redis_rate = statistics.median(figures["redis XADD pipelined"])
    peers = {k: statistics.median(figures[n]) for k, n in PEER_FIGURES.items() if n in figures}
    for name, rates in figures.items():
        median = statistics.median(rates)
        ratios = "".join(f"  {median / rate:5.2f}x {peer}" for peer, rate in peers.items())
        print(
            f"{name:42s} {median:10,.0f} events/s  (range {min(rates):,.0f}-{max(rates):,.0f})"
            f"  {median / redis_rate:5.2f}x redis{ratios}"
        )
    for seg in (1, 4):  # issue 26: HTTP publish stays ahead of JetStream's publish with acks
        name = f"HTTP, gunicorn 2 workers, {seg} segment(s)"
        if "JetStream" in peers:
            met = statistics.median(figures[name]) >= peers["JetStream"]
            print(f"target: {name} >= 1.0x JetStream publish_async: {'met' if met else 'NOT met'}")


PEER_FIGURES = {"JetStream": "JetStream publish_async, acked/batch", "RabbitMQ": "RabbitMQ quorum, confirms/batch"}


if __name__ == "__main__":
    main()
