"""The peers of bench/consume.py on the same machine: Redis Streams (XREADGROUP + XACK,
pipelined) and NATS JetStream (interest retention, a durable pull consumer, explicit acks)."""

import asyncio
import contextlib
import multiprocessing as mp
import os
import time

from consume_common import (
    JETSTREAM,
    JETSTREAM_RAW,
    PUBLISH_BATCH,
    RABBITMQ,
    REDIS,
    Figure,
    ms,
    payload,
    run_crew,
    settle,
)


def _redis_consumer(i: int, start, url: str, key: str, group: str, batch: int) -> dict:
    import redis

    r = redis.Redis.from_url(url)
    r.ping()
    start()
    trips, ids, n_read, n_acked, t_end = [], [], 0, 0, time.monotonic()
    while True:
        t = time.monotonic()
        pipe = r.pipeline(transaction=False)
        if ids:
            pipe.xack(key, group, *ids)
        pipe.xreadgroup(group, f"c{i}", {key: ">"}, count=batch)
        answers = pipe.execute()
        t1 = time.monotonic()
        trips.append(t1 - t)
        if ids:
            n_acked += answers[0]
            t_end = t1
        got = answers[-1]
        if isinstance(got, dict):  # RESP3
            got = list(got.items())
        ids = [mid for mid, _ in got[0][1]] if got else []
        if not ids:
            break
        n_read += len(ids)
    r.close()
    return {"trip": trips, "n_read": n_read, "n_acked": n_acked, "t_end": t_end}


async def _ack_all(messages, t: float, fetches: list, acks: list, fetched) -> float:
    """Ack a fetched batch (`msg.ack()`, no reply awaited), time the fetch and the acks, count it
    in the shared total; returns when the acks were sent."""
    t1 = time.monotonic()
    for m in messages:
        await m.ack()
    t_end = time.monotonic()
    fetches.append(t1 - t)
    acks.append(t_end - t1)
    with fetched.get_lock():
        fetched.value += len(messages)
    return t_end


def _jetstream_consumer(i: int, start, url: str, stream: str, durable: str, batch: int, total: int, fetched) -> dict:
    return asyncio.run(_jetstream_consume(start, url, stream, durable, batch, total, fetched))


async def _jetstream_consume(start, url: str, stream: str, durable: str, batch: int, total: int, fetched) -> dict:
    import nats

    nc = await nats.connect(url)
    sub = await nc.jetstream().pull_subscribe_bind(durable=durable, stream=stream)
    start()
    fetches, acks, n_read, t_end = [], [], 0, time.monotonic()
    # A fetch with nothing left waits for its timeout; the shared count of fetched messages says
    # when there is nothing left (the lease, ack_wait, outlasts the run: nothing comes twice).
    while fetched.value < total:
        t = time.monotonic()
        try:
            messages = await sub.fetch(batch, timeout=0.5)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        t_end = await _ack_all(messages, t, fetches, acks, fetched)
        n_read += len(messages)
    await nc.flush()
    await nc.close()
    return {"read": fetches, "ack": acks, "n_read": n_read, "t_end": t_end}


def _jetstream_raw_consumer(
    i: int, start, url: str, stream: str, durable: str, batch: int, total: int, fetched
) -> dict:
    return asyncio.run(_jetstream_raw_consume(start, url, stream, durable, batch, total, fetched))


async def _jetstream_raw_consume(start, url: str, stream: str, durable: str, batch: int, total: int, fetched) -> dict:
    """The same pull consumer without nats-py's `fetch`, which waits for each message with a
    task and a timer of its own: one no_wait pull request, the batch collected by a callback."""
    import json

    import nats

    nc = await nats.connect(url)
    inbox = nc.new_inbox()
    got: list = []
    complete = asyncio.Event()

    async def on_message(msg) -> None:
        if msg.headers and msg.headers.get("Status"):  # 404 no messages, 408: the pull is over
            complete.set()
            return
        got.append(msg)
        if len(got) >= batch:
            complete.set()

    await nc.subscribe(inbox, cb=on_message, pending_msgs_limit=4 * batch)
    request = json.dumps({"batch": batch, "no_wait": True}).encode()
    next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
    start()
    fetches, acks, n_read, t_end = [], [], 0, time.monotonic()
    while fetched.value < total:
        got.clear()
        complete.clear()
        t = time.monotonic()
        await nc.publish(next_subject, request, reply=inbox)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(complete.wait(), 5)
        messages = list(got)
        if not messages:
            await asyncio.sleep(0.01)
            continue
        t_end = await _ack_all(messages, t, fetches, acks, fetched)
        n_read += len(messages)
    await nc.flush()
    await nc.close()
    return {"read": fetches, "ack": acks, "n_read": n_read, "t_end": t_end}


# -- CBR -------------------------------------------------------------------------------------


class RedisStreams:
    def __init__(self, args):
        import redis

        self.args = args
        self.redis = redis.Redis.from_url(args.redis_url)
        self.key = f"cbr-bench-consume-{os.getpid()}"

    def start(self) -> None:
        a = self.args
        self.redis.delete(self.key)
        for start in range(0, a.events, PUBLISH_BATCH):
            pipe = self.redis.pipeline(transaction=False)
            for i in range(start, min(a.events, start + PUBLISH_BATCH)):
                pipe.xadd(self.key, {"p": payload(i)})
            pipe.execute()

    def consume(self, round_no: int) -> Figure:
        a = self.args
        group = f"g{round_no}"
        self.redis.xgroup_create(self.key, group, id="0")
        t0, results = run_crew(_redis_consumer, a.consumers, (a.redis_url, self.key, group, a.batch))
        seconds = max(r["t_end"] for r in results) - t0
        n_read = sum(r["n_read"] for r in results)
        n_acked = sum(r["n_acked"] for r in results)
        pending = self.redis.xpending(self.key, group)["pending"]
        fig = Figure(
            REDIS,
            n_acked,
            seconds,
            [
                f"round trip (XACK previous + XREADGROUP) {ms([x for r in results for x in r['trip']])}",
            ],
        )
        if n_read != a.events or n_acked != a.events or pending:
            fig.notes.append(f"CHECK FAILED: read {n_read:,}, acked {n_acked:,} of {a.events:,}; pending {pending:,}")
        return fig

    def stop(self) -> None:
        self.redis.delete(self.key)


# -- NATS JetStream ------------------------------------------------------------------------------


class JetStream:
    """Interest retention removes each message once acked, so every round publishes again."""

    def __init__(self, args):
        self.args = args
        self.stream = f"CBR_BENCH_CONSUME_{os.getpid()}"
        self.subject = f"cbr.bench.consume.{os.getpid()}"

    async def _prepare(self, durable: str) -> None:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType

        a = self.args
        nc = await nats.connect(a.nats_url)
        js = nc.jetstream()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(self.stream)
        await js.add_stream(
            name=self.stream, subjects=[self.subject], retention=RetentionPolicy.INTEREST, storage=StorageType.FILE
        )
        # the consumer first: an interest stream drops what is published while nobody is interested
        await js.add_consumer(
            self.stream,
            config=ConsumerConfig(
                durable_name=durable,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=600,
                max_ack_pending=max(10_000, a.consumers * a.batch),
                filter_subject=self.subject,
            ),
        )
        t0 = time.monotonic()
        for i in range(a.events):
            await js.publish_async(self.subject, payload(i).encode())
        await js.publish_async_completed()
        el = time.monotonic() - t0
        info = await js.stream_info(self.stream)
        if info.state.messages != a.events:
            raise SystemExit(f"jetstream: the stream holds {info.state.messages} messages, not {a.events}")
        print(
            f"jetstream: published {a.events:,} events in {el:.1f} s ({a.events / el:,.0f} events/s, untimed)",
            flush=True,
        )
        await nc.close()

    async def _wait_empty(self, t0: float) -> float:
        import nats

        nc = await nats.connect(self.args.nats_url)
        js = nc.jetstream()
        deadline = t0 + max(120, self.args.events / 500)
        while True:
            info = await js.stream_info(self.stream)
            if info.state.messages == 0:
                at = time.monotonic()
                await nc.close()
                return at
            if time.monotonic() > deadline:
                raise SystemExit(f"jetstream: {info.state.messages} messages still unacked")
            await asyncio.sleep(0.005)

    async def _delete(self) -> None:
        import nats

        nc = await nats.connect(self.args.nats_url)
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await nc.jetstream().delete_stream(self.stream)
        await nc.close()

    def consume(self, round_no: int, raw: bool = False) -> Figure:
        a = self.args
        durable = f"bench{round_no}{'raw' if raw else ''}"
        asyncio.run(self._prepare(durable))
        settle()  # the publish's own writes done before the clock starts
        fetched = mp.get_context("spawn").Value("q", 0)
        emptied: list[float] = []
        t0, results = run_crew(
            _jetstream_raw_consumer if raw else _jetstream_consumer,
            a.consumers,
            (a.nats_url, self.stream, durable, a.batch, a.events, fetched),
            while_running=lambda t0: emptied.append(asyncio.run(self._wait_empty(t0))),
        )
        last_ack_sent = max(r["t_end"] for r in results)
        n_read = sum(r["n_read"] for r in results)
        name = JETSTREAM_RAW if raw else JETSTREAM
        fig = Figure(
            name,
            n_read,
            max(emptied[0], last_ack_sent) - t0,
            [
                f"{'pull request' if raw else 'fetch'} {ms([x for r in results for x in r['read']])}",
                f"acks of one batch (msg.ack(), no reply awaited) {ms([x for r in results for x in r['ack']])}",
                f"the stream was empty {(emptied[0] - last_ack_sent) * 1000:+.0f} ms after the last ack was sent",
            ],
        )
        if n_read != a.events:
            fig.notes.append(f"CHECK FAILED: fetched {n_read:,} of {a.events:,}")
        return fig

    def stop(self) -> None:
        asyncio.run(self._delete())


# -- the ack tracker alone ---------------------------------------------------------------------


# -- RabbitMQ ----------------------------------------------------------------------------------


def _rabbitmq_consumer(i: int, start, url: str, queue_name: str, batch: int, total: int, acked) -> dict:
    """pika's blocking consumer with a prefetch of two batches; one `basic_ack(multiple=True)`
    per `batch` messages (and for what is left when the queue falls quiet)."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=2 * batch)
    start()
    n_read, unacked, last_tag, acks, t_end = 0, 0, None, [], time.monotonic()

    def ack() -> None:
        nonlocal unacked, t_end
        t = time.monotonic()
        ch.basic_ack(last_tag, multiple=True)
        t_end = time.monotonic()
        acks.append(t_end - t)
        with acked.get_lock():
            acked.value += unacked
        unacked = 0

    for method, _, _ in ch.consume(queue_name, inactivity_timeout=0.2):
        if method is None:  # quiet for a moment: settle what is held, stop once everything is acked
            if unacked:
                ack()
            if acked.value >= total:
                break
            continue
        n_read += 1
        unacked += 1
        last_tag = method.delivery_tag
        if unacked >= batch:
            ack()
    ch.cancel()
    conn.close()
    return {"ack": acks, "n_read": n_read, "t_end": t_end}


class RabbitMQ:
    """A durable quorum queue on the machine's RabbitMQ, manual acks: the same events, filled
    before each figure (untimed: published without confirms, then waited for in the queue)."""

    def __init__(self, args):
        self.args = args
        self.queue = f"cbr-bench-consume-{os.getpid()}"

    def _channel(self):
        import pika

        conn = pika.BlockingConnection(pika.URLParameters(self.args.rabbitmq_url))
        return conn, conn.channel()

    def _fill(self) -> None:
        a = self.args
        conn, ch = self._channel()
        ch.queue_delete(self.queue)
        ch.queue_declare(self.queue, durable=True, arguments={"x-queue-type": "quorum"})
        t0 = time.monotonic()
        for i in range(a.events):
            ch.basic_publish("", self.queue, payload(i).encode())
        deadline = time.monotonic() + max(120, a.events / 500)
        while ch.queue_declare(self.queue, passive=True).method.message_count < a.events:
            if time.monotonic() > deadline:
                raise SystemExit("rabbitmq: the queue did not fill")
            time.sleep(0.05)
        el = time.monotonic() - t0
        print(
            f"rabbitmq: queued {a.events:,} events in {el:.1f} s ({a.events / el:,.0f} events/s, untimed)", flush=True
        )
        conn.close()

    def consume(self, round_no: int) -> Figure:
        a = self.args
        self._fill()
        settle()
        acked = mp.get_context("spawn").Value("q", 0)
        t0, results = run_crew(_rabbitmq_consumer, a.consumers, (a.rabbitmq_url, self.queue, a.batch, a.events, acked))
        n_read = sum(r["n_read"] for r in results)
        conn, ch = self._channel()
        left = ch.queue_declare(self.queue, passive=True).method.message_count
        conn.close()
        fig = Figure(
            RABBITMQ,
            n_read,
            max(r["t_end"] for r in results) - t0,
            [f"basic_ack(multiple) of one batch {ms([x for r in results for x in r['ack']])}"],
        )
        if n_read != a.events or acked.value != a.events or left:
            fig.notes.append(f"CHECK FAILED: read {n_read:,}, acked {acked.value:,} of {a.events:,}; {left:,} left")
        return fig

    def stop(self) -> None:
        conn, ch = self._channel()
        ch.queue_delete(self.queue)
        conn.close()
