"""Waiting consumers and delivery latency (issue 38), CBR beside NATS JetStream and RabbitMQ, in
one sitting. Prints its figures; bench/RESULTS.md keeps them with the date and the machine.

  waiting   N consumers, each of its own group (CBR: a reader group read with `wait_ms`;
            JetStream: a durable pull consumer fetching; RabbitMQ: a quorum queue bound to a fanout
            exchange, pushed to its consumer), all waiting on one stream. While they wait: the
            server's CPU, and the p50/p99 of `/healthz` (CBR) and of a one-event publish to another
            stream. Then one event is published: how many have it within 1 s and 5 s, p50/p99.
  herd      (CBR) one group, N consumers waiting; one event: how many are answered (1 expected).
  steady    one producer at `--rate` events/s (one event per request, durable before the answer),
            one consumer: publish → delivery latency p50/p99, and the publish's p50/p99.

CBR runs as `make run` starts it (cbrweb.web: gunicorn, 2 processes of uvicorn's worker × 8
threads) on PostgreSQL and Redis (`--database-url`, `--redis-url`: a database made afresh, a
Redis database flushed). `--only` picks the systems, `--waiters` the counts.

`http-floor` (in `--only`) runs the waiting scenario's client against a server with nothing
behind it (`FLOOR_SERVER`): what N HTTP long polls answered at once cost this machine before any
of CBR's work. JetStream's client, as its users run it, carries all its pull consumers on one
connection; CBR's consumers each hold one. `cbr-many` (in `--only`) sends CBR's waiting reads
as many reads in one request (`POST /api/v1/reads/`) over `--connections` connections, as a
client holding many consumers would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

from _common import ROOT, cpu_seconds, machine, manage, wait_http
from consume import free_port
from consume_common import pct

from cbrweb import web


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5) * 1000:7.2f} ms  p99 {pct(values, 0.99) * 1000:7.2f} ms" if values else "none"


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- CBR ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet_collector():
    """This client's garbage collector kept out of what is timed: its objects so far (a thousand
    waiting connections' worth) frozen, so that a collection does not walk them in the middle of
    a probe or of the answers to the event. Without it the probes' p99 measured this process's
    collections (35-55 ms at 1 000 waiters on a 2-core machine), not the server."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class CBR:
    def __init__(self, args):
        self.args = args

    def __enter__(self) -> CBR:
        a = self.args
        self.work = tempfile.mkdtemp(dir=ROOT / "var")
        name = f"cbr_latency_{os.getpid()}"
        import psycopg
        import redis

        admin = a.database_url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        self.db_admin, self.db_name = admin, name
        redis.Redis.from_url(a.redis_url).flushdb()
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
            "DATABASE_URL": a.database_url.rsplit("/", 1)[0] + "/" + name,
            "REDIS_URL": a.redis_url,
            "CBR_DATA_DIR": f"{self.work}/data",
            "DJANGO_SECRET_KEY": "bench-only",
            "CBR_LOG_LEVEL": "WARNING",
            "CBR_WEB_THREADS": "8",
            "CBR_MAX_WAITING_READS": "50000",
        }
        manage(self.env, "migrate", "--noinput")
        self.token = manage(
            self.env,
            "shell",
            "-c",
            "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
            "u, _ = User.objects.get_or_create(username='bench', defaults={'is_staff': True, 'is_superuser': True});"
            "print(Token.objects.get_or_create(user=u)[0].key)",
        ).split()[-1]
        self.port = free_port()
        self.server = subprocess.Popen(
            web.command(
                f"127.0.0.1:{self.port}", 2, "--log-level", "warning", "--keep-alive", "30", "--graceful-timeout", "5"
            ),
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )
        wait_http(f"http://127.0.0.1:{self.port}/login/")
        for stream in ("orders", "probe"):
            self.call("POST", "/api/v1/streams/", {"scope": "lat", "name": stream, "segment_count": 1})
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self.server.pid, signal.SIGTERM)
        try:
            self.server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait(10)
        subprocess.run(["rm", "-rf", self.work])
        import psycopg

        with psycopg.connect(self.db_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')

    def call(self, method: str, path: str, body: object = None) -> tuple[float, dict]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        t = time.perf_counter()
        with urllib.request.urlopen(request, timeout=120) as response:
            out = response.read()
        return time.perf_counter() - t, json.loads(out) if out else {}

    def cpu(self) -> float:
        """CPU seconds the web server's processes have used so far."""
        import psutil

        return cpu_seconds(psutil.Process(self.server.pid).children(recursive=True))

    async def _create_groups(self, names: list[str]) -> None:
        loop = asyncio.get_running_loop()
        sem = asyncio.Semaphore(16)

        async def one(name: str) -> None:
            async with sem:
                body = {
                    "scope": "lat",
                    "name": name,
                    "streams": ["lat/orders"],
                    "retention_type": "NONE",
                    "start": "tail",
                }
                await loop.run_in_executor(None, self.call, "POST", "/api/v1/reader-groups/", body)

        await asyncio.gather(*(one(n) for n in names))

    async def _read(self, group: str, consumer: str, wait_ms: int) -> tuple[float, dict]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        body = json.dumps({"max_events": 1, "wait_ms": wait_ms, "consumer": consumer}).encode()
        writer.write(
            (
                f"POST /api/v1/reader-groups/lat/{group}/read/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {self.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        raw = await reader.read()
        done = time.perf_counter()
        writer.close()
        head, _, content = raw.partition(b"\r\n\r\n")
        return done, json.loads(content) if content else {}

    async def _many(self, reads: list[dict], answers: list[asyncio.Future]) -> None:
        """Many reads in one request (`POST /api/v1/reads/`): each read's answer (the time its
        line came, the answer) into its future as its line comes."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        body = json.dumps({"reads": reads}).encode()
        writer.write(
            (
                f"POST /api/v1/reads/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {self.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"many reads refused: {head!r} {await reader.read(300)!r}")
        buffer = b""
        try:
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                data = await reader.readexactly(size + 2)
                done = time.perf_counter()
                if size == 0:
                    return
                buffer += data[:-2]
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    answered = json.loads(line)
                    answers[answered["read"]].set_result((done, answered["answer"]))
        finally:
            writer.close()

    def waiting(self, n: int, herd: bool = False, connections: int = 0) -> dict:
        """N waiting reads (N groups, or one group's N consumers); probes while they wait; one
        event. `connections`: the reads sent as many reads in that many requests (0: each read a
        request and a connection of its own)."""
        return asyncio.run(self._waiting(n, herd, connections))

    async def _waiting(self, n: int, herd: bool, connections: int = 0) -> dict:
        loop = asyncio.get_running_loop()
        run = f"r{time.monotonic_ns() % 10**9}"
        groups = [f"{run}h"] if herd else [f"{run}g{i}" for i in range(n)]
        await self._create_groups(groups)
        if connections:
            reads: list = [loop.create_future() for _ in range(n)]
            bodies = [
                {"reader_group": f"lat/{groups[0] if herd else groups[i]}", "max_events": 1, "wait_ms": 60_000}
                | {"consumer": f"c{i}"}
                for i in range(n)
            ]
            share = -(-n // connections)
            senders = [
                asyncio.create_task(self._many(bodies[k : k + share], reads[k : k + share])) for k in range(0, n, share)
            ]
        else:
            senders = []
            reads = [
                asyncio.create_task(self._read(groups[0] if herd else groups[i], f"c{i}", 60_000)) for i in range(n)
            ]
        parked_in = await self._all_parked(n, reads)
        cpu0, t0 = self.cpu(), time.monotonic()
        await asyncio.sleep(5)
        idle_cpu = (self.cpu() - cpu0) / (time.monotonic() - t0)
        health, publish = [], []
        with quiet_collector():
            for _ in range(50):
                health.append((await loop.run_in_executor(None, self.call, "GET", "/healthz"))[0])
                publish.append(
                    (
                        await loop.run_in_executor(
                            None, self.call, "POST", "/api/v1/streams/lat/probe/events/", {"events": [{"payload": "p"}]}
                        )
                    )[0]
                )
            early = sum(t.done() for t in reads)
            cpu0 = self.cpu()
            sent = time.perf_counter()
            await loop.run_in_executor(
                None, self.call, "POST", "/api/v1/streams/lat/orders/events/", {"events": [{"payload": "now"}]}
            )
            await asyncio.wait(reads, timeout=5 if not herd else 3)
        woken_cpu = self.cpu() - cpu0  # the publish and every answer (read in clock ticks: 10 ms)
        got = sorted(t.result()[0] - sent for t in reads if t.done() and t.result()[1].get("deliveries"))
        for t in [*reads, *senders]:
            t.cancel()
        return {
            "idle_cpu": idle_cpu,
            "health": health,
            "publish": publish,
            "got": got,
            "early": early,
            "woken_cpu": woken_cpu / max(1, len(got)),
            "parked_in": parked_in,
        }

    async def _all_parked(self, n: int, reads: list) -> float | None:
        """Seconds until the server's processes say that all N reads wait (`cbr_reads_waiting`,
        which each process writes to Redis every second or so), plus a second: the idle figures
        are taken after the last read has parked, not while the first looks still run."""
        import redis

        from streams import wait_stats

        client, t0 = redis.Redis.from_url(self.args.redis_url), time.monotonic()
        while wait_stats.totals(client)[0] < n and time.monotonic() - t0 < 600:
            if any(t.done() for t in reads):
                break  # a read answered early (refused, failed): the figures say so
            await asyncio.sleep(0.5)
        parked_in = time.monotonic() - t0
        await asyncio.sleep(1)
        return parked_in

    def steady(self, rate: int, seconds: float) -> dict:
        """One producer at `rate` events/s (one per request), one consumer reading with waits."""
        from cbr_client import Client

        self.call(
            "POST",
            "/api/v1/reader-groups/",
            {"scope": "lat", "name": "steady", "streams": ["lat/orders"], "retention_type": "NONE", "start": "tail"},
        )
        latencies: list[float] = []
        stop = threading.Event()
        total = int(rate * seconds)

        def consume() -> None:
            with Client(f"http://127.0.0.1:{self.port}", token=self.token) as cbr:
                group = cbr.reader_group("lat/steady")
                for message in group.consume(max_events=100, wait_ms=1000):
                    latencies.append(time.time() - float(message.data["payload"]))
                    message.ack()
                    if len(latencies) >= total or stop.is_set():
                        return

        consumer = threading.Thread(target=consume)
        consumer.start()
        time.sleep(1)
        publish = []
        with Client(f"http://127.0.0.1:{self.port}", token=self.token) as cbr:
            start = time.monotonic()
            for i in range(total):
                due = start + i / rate
                time.sleep(max(0.0, due - time.monotonic()))
                t = time.perf_counter()
                cbr.publish("lat/orders", [{"payload": repr(time.time())}])
                publish.append(time.perf_counter() - t)
        consumer.join(30)
        stop.set()
        return {"latency": latencies, "publish": publish}


# -- the floor of HTTP long polls ---------------------------------------------------------------

# A server with nothing behind it, in a process of its own as CBR's web workers are (asyncio on
# uvloop, as the front runs): every read it parks, any other request it answers at once with an
# empty object, and a publish to `lat/orders` answers every parked read with one delivery's JSON,
# as large as CBR's. What a fan-out to N HTTP long polls costs this machine, the kernel and the
# same client code before any work of CBR's: no server can answer such waiters sooner.
FLOOR_SERVER = r"""
import asyncio, sys, uvloop
READ = b'{"deliveries":[{"segment":"0","offset":0,"routing_key":null,"key":null,"headers":null,' \
    b'"published_at":"2026-11-28T07:00:00.000Z","deliver_at":null,"payload_b64":"bm93","payload":"now",' \
    b'"stream":"lat/orders","delivery_id":"1-1-0-0-1","delivery_count":1,' \
    b'"lease_expires_at":"2026-11-28T07:00:30.000Z"}],"missed":0,"missed_by_stream":{},' \
    b'"pending_limit_reached":false}'
parked = []
def answer(writer, body):
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                 b"connection: close\r\n\r\n%s" % (len(body), body))
    writer.close()
async def serve(reader, writer):
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")), 0)
    if length:
        await reader.readexactly(length)
    path = head.split(b" ")[1]
    if path.endswith(b"/read/"):
        parked.append(writer)
        return
    if path == b"/api/v1/streams/lat/orders/events/":
        woken = parked[:]
        parked.clear()
        for w in woken:
            answer(w, READ)
    answer(writer, b"{}")
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=4096)
    async with server:
        await server.serve_forever()
uvloop.run(main())
"""


class HttpFloor(CBR):
    """The same waiting scenario and client as CBR's, against FLOOR_SERVER."""

    def __enter__(self) -> HttpFloor:
        import sys

        self.token = "-"
        self.port = free_port()
        self.server = subprocess.Popen(
            [sys.executable, "-c", FLOOR_SERVER, str(self.port)], start_new_session=True, cwd=ROOT
        )
        wait_http(f"http://127.0.0.1:{self.port}/healthz")
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self.server.pid, signal.SIGTERM)
        self.server.wait(10)

    def cpu(self) -> float:
        import psutil

        return cpu_seconds([psutil.Process(self.server.pid)])

    async def _all_parked(self, n: int, reads: list) -> float | None:
        """The floor counts no waiting reads: it parks each as its request arrives, with no work,
        so a while after the last is sent they all wait (None: not measured)."""
        await asyncio.sleep(2 + n / 1000)
        return None


# -- JetStream ---------------------------------------------------------------------------------


class JetStream:
    def __init__(self, args):
        self.args = args
        self.stream = f"CBR_BENCH_LAT_{os.getpid()}"
        self.subject = f"cbr.bench.lat.{os.getpid()}"

    async def _setup(self, nc):
        from nats.js.api import StorageType

        js = nc.jetstream()
        with contextlib.suppress(Exception):  # none yet
            await js.delete_stream(self.stream)
        await js.add_stream(
            name=self.stream, subjects=[self.subject, self.subject + ".probe"], storage=StorageType.FILE
        )
        return js

    def waiting(self, n: int) -> dict:
        return asyncio.run(self._waiting(n))

    async def _waiting(self, n: int) -> dict:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        nc = await nats.connect(self.args.nats_url)
        js = await self._setup(nc)
        subs = []
        for i in range(n):
            await js.add_consumer(
                self.stream,
                config=ConsumerConfig(
                    durable_name=f"w{i}",
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy.NEW,
                    filter_subject=self.subject,
                ),
            )
            subs.append(await js.pull_subscribe_bind(f"w{i}", self.stream))

        async def fetch(sub) -> float:
            msgs = await sub.fetch(1, timeout=60)
            done = time.perf_counter()
            await msgs[0].ack()
            return done

        reads = [asyncio.create_task(fetch(s)) for s in subs]
        await asyncio.sleep(2 + n / 250)  # every pull request at the server (slow machines: 10 000 take seconds)
        publish = []
        with quiet_collector():
            for _ in range(50):
                t = time.perf_counter()
                await js.publish(self.subject + ".probe", b"p", timeout=10)
                publish.append(time.perf_counter() - t)
            sent = time.perf_counter()
            await js.publish(self.subject, b"now", timeout=10)
            await asyncio.wait(reads, timeout=5)
        got = sorted(t.result() - sent for t in reads if t.done() and not t.exception())
        for t in reads:
            t.cancel()
        try:  # with 10 000 consumers the server may take longer than the client's 5 s
            await js.delete_stream(self.stream)
        except nats.errors.TimeoutError:
            print(f"jetstream: stream {self.stream} not deleted in time; delete it by hand", flush=True)
        await nc.close()
        return {"publish": publish, "got": got}

    def steady(self, rate: int, seconds: float) -> dict:
        return asyncio.run(self._steady(rate, seconds))

    async def _steady(self, rate: int, seconds: float) -> dict:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        nc = await nats.connect(self.args.nats_url)
        js = await self._setup(nc)
        await js.add_consumer(
            self.stream,
            config=ConsumerConfig(
                durable_name="steady", ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW
            ),
        )
        sub = await js.pull_subscribe_bind("steady", self.stream)
        total = int(rate * seconds)
        latencies: list[float] = []

        async def consume() -> None:
            while len(latencies) < total:
                try:
                    msgs = await sub.fetch(100, timeout=1)
                except nats.errors.TimeoutError:
                    continue
                for m in msgs:
                    latencies.append(time.time() - float(m.data))
                    await m.ack()

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.5)
        publish = []
        start = time.monotonic()
        for i in range(total):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            t = time.perf_counter()
            await js.publish(self.subject, repr(time.time()).encode())
            publish.append(time.perf_counter() - t)
        await asyncio.wait_for(task, 30)
        await js.delete_stream(self.stream)
        await nc.close()
        return {"latency": latencies, "publish": publish}


# -- RabbitMQ ----------------------------------------------------------------------------------


class RabbitMQ:
    """Quorum queues (durable; a publish confirmed once on disk), pushed to their consumers."""

    def __init__(self, args):
        self.args = args
        self.prefix = f"cbr-bench-lat-{os.getpid()}"

    def _conn(self):
        import pika

        params = pika.URLParameters(self.args.rabbitmq_url)
        # no heartbeats: a blocking connection answers them only inside its own calls, and making
        # or consuming thousands of quorum queues keeps the other connection silent for minutes
        params.heartbeat = 0
        params.blocked_connection_timeout = None
        # and patient: a broker busy starting 1 000 quorum queues answers a new connection late
        params.socket_timeout = params.stack_timeout = 600
        return pika.BlockingConnection(params)

    def waiting(self, n: int) -> dict:
        conn = self._conn()
        ch = conn.channel()
        exchange = self.prefix + "-fan"
        ch.exchange_declare(exchange, "fanout", durable=True)
        queues = [f"{self.prefix}-{i}" for i in range(n)]
        for q in queues:
            ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
            ch.queue_bind(q, exchange)
        ch.queue_declare(self.prefix + "-probe", durable=True, arguments={"x-queue-type": "quorum"})
        got: list[float] = []
        ready = threading.Event()
        sent = [0.0]

        def consume() -> None:
            c = self._conn()
            cc = c.channel()

            def on_message(channel, method, properties, body) -> None:
                got.append(time.perf_counter() - sent[0])
                channel.basic_ack(method.delivery_tag)

            for q in queues:
                cc.basic_consume(q, on_message)
            ready.set()
            deadline = time.monotonic() + 10 + n / 100
            while len(got) < n and time.monotonic() < deadline:
                c.process_data_events(time_limit=0.1)
            c.close()

        consumer = threading.Thread(target=consume)
        consumer.start()
        ready.wait(600)
        time.sleep(1)
        ch.confirm_delivery()
        publish = []
        with quiet_collector():
            for _ in range(50):
                t = time.perf_counter()
                ch.basic_publish("", self.prefix + "-probe", b"p")
                publish.append(time.perf_counter() - t)
            sent[0] = time.perf_counter()
            ch.basic_publish(exchange, "", b"now")
            consumer.join(60)
        for q in queues:
            ch.queue_delete(q)
        ch.queue_delete(self.prefix + "-probe")
        ch.exchange_delete(exchange)
        conn.close()
        return {"publish": publish, "got": sorted(got)}

    def steady(self, rate: int, seconds: float) -> dict:
        conn = self._conn()
        ch = conn.channel()
        q = self.prefix + "-steady"
        ch.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        total = int(rate * seconds)
        latencies: list[float] = []

        def consume() -> None:
            c = self._conn()
            cc = c.channel()
            cc.basic_qos(prefetch_count=100)

            def on_message(channel, method, properties, body) -> None:
                latencies.append(time.time() - float(body))
                channel.basic_ack(method.delivery_tag)

            cc.basic_consume(q, on_message)
            deadline = time.monotonic() + seconds + 30
            while len(latencies) < total and time.monotonic() < deadline:
                c.process_data_events(time_limit=0.05)
            c.close()

        consumer = threading.Thread(target=consume)
        consumer.start()
        time.sleep(0.5)
        publish = []
        start = time.monotonic()
        for i in range(total):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            t = time.perf_counter()
            ch.basic_publish("", q, repr(time.time()).encode())
            publish.append(time.perf_counter() - t)
        consumer.join(60)
        ch.queue_delete(q)
        conn.close()
        return {"latency": latencies, "publish": publish}


# -- main --------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="cbr,jetstream,rabbitmq")
    p.add_argument("--scenarios", default="steady,waiting,herd")
    p.add_argument("--waiters", default="200,1000")
    p.add_argument("--connections", type=int, default=16, help="cbr-many: the requests (connections) its reads go in")
    p.add_argument("--rate", type=int, default=200)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))
    p.add_argument("--redis-url", default=os.environ.get("REDIS_URL_BENCH", "redis://127.0.0.1:6379/9"))
    p.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    p.add_argument("--rabbitmq-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    return p.parse_args()


def show_waiting(name: str, n: int, fig: dict) -> None:
    got = fig["got"]
    line = (
        f"{name:9} waiting {n:>6}: {sum(1 for g in got if g <= 1):>6} within 1 s, {len(got):>6} within 5 s; "
        f"delivery {ms(got)}; probe publish {ms(fig['publish'])}"
    )
    if "health" in fig:
        line += f"; /healthz {ms(fig['health'])}; server CPU while waiting {fig['idle_cpu'] * 100:.1f} % of a core"
        line += f"; answered before the event: {fig['early']}"
        line += f"; server CPU per answer {fig['woken_cpu'] * 1e6:.0f} us"
    if fig.get("parked_in") is not None:
        line += f"; all waiting after {fig['parked_in']:.1f} s"
    print(line, flush=True)


def main() -> None:
    args = parse_args()
    raise_fd_limit()
    (ROOT / "var").mkdir(exist_ok=True)
    systems = args.only.split(",")
    scenarios = args.scenarios.split(",")
    counts = [int(n) for n in args.waiters.split(",")]
    print(f"bench/latency.py on {machine()}, {time.strftime('%Y-%m-%d %H:%M %Z')}", flush=True)
    if "cbr" in systems or "cbr-many" in systems:
        with CBR(args) as cbr:
            if "steady" in scenarios and "cbr" in systems:
                fig = cbr.steady(args.rate, args.seconds)
                print(f"cbr       steady {args.rate}/s: delivery {ms(fig['latency'])}; publish {ms(fig['publish'])}")
            ways = [("cbr", 0)] * ("cbr" in systems) + [("cbr-many", args.connections)] * ("cbr-many" in systems)
            for name, connections in ways:
                for n in counts if "waiting" in scenarios else []:
                    show_waiting(name, n, cbr.waiting(n, connections=connections))
                for n in counts if "herd" in scenarios else []:
                    fig = cbr.waiting(n, herd=True, connections=connections)
                    print(f"{name:9} herd {n:>6}: {len(fig['got'])} of {n} answered (1 expected), {ms(fig['got'])}")
    if "http-floor" in systems:
        with HttpFloor(args) as floor:
            for n in counts if "waiting" in scenarios else []:
                show_waiting("floor", n, floor.waiting(n))
    peers = {"jetstream": JetStream, "rabbitmq": RabbitMQ}
    for name in ("jetstream", "rabbitmq"):
        if name not in systems:
            continue
        peer = peers[name](args)
        if "steady" in scenarios:
            fig = peer.steady(args.rate, args.seconds)
            print(f"{name:9} steady {args.rate}/s: delivery {ms(fig['latency'])}; publish {ms(fig['publish'])}")
        for n in counts if "waiting" in scenarios else []:
            show_waiting(name, n, peer.waiting(n))


if __name__ == "__main__":
    main()
