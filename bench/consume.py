"""Consume throughput (issue 4): read 1000 / ack 1000 per request over HTTP, against two peers.

What it measures, all on this machine and in one run:
  cbr        the real server (gunicorn, gthread; PostgreSQL; Redis; CBR_FSYNC=batch): N events
             published first (untimed), then C consumer processes, each with its own
             `cbr_client.Client`, loop until every event is acked, either each
             `read(max_events=1000)` carrying the previous batch's ack (`--acks carried`, as the
             client's `consume()` does: one request per batch, answered in the binary form the
             client asks for; `--acks carried-json`: the same answered in JSON) or `read` →
             `ack(those ids)`
             (`--acks alone`: two requests per batch): events/s end to end, p50/p99 of the
             requests, and the Redis time in the tracker's scripts. Once for
             a NONE group and once for an AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT group (which
             checkpoints every --checkpoint-interval seconds, from the ack path). Before the
             timed rounds, one untimed round of the same (a group of its own) warms the web
             workers: their first requests of a run were much slower (--no-warm-up skips it).
  redis      Redis Streams: the same N events XADDed (untimed), then C consumers each sending
             the XACK of their previous batch and XREADGROUP COUNT 1000 in one pipeline.
  jetstream  NATS JetStream (file storage, interest retention, a durable pull consumer with
             explicit acks), the same N events published (untimed) before each figure:
             (a) C consumers `fetch(1000)`, then `msg.ack()` each message: JetStream's ordinary
                 ack, sent without waiting for a reply (not `ack_sync`). The target is against
                 this figure;
             (b) the same acks after a raw no_wait pull request whose batch a callback collects,
                 since nats-py's fetch, which waits for every message with a task and a timer of
                 its own, bounds (a) rather than the server (--no-jetstream-raw skips it).
             The clock stops when the stream reports 0 messages: interest retention removes a
             message once it is acked, so that is when the server has every ack.
  rabbitmq   RabbitMQ (--rabbitmq-url, the machine's): a durable quorum queue filled with the same
             N events before each figure (untimed), then C consumers with pika's blocking
             consumer, a prefetch of two batches and one basic_ack(multiple=True) per batch; the
             clock stops at the last ack, and the queue must be empty after.
  tracker    `groups.ack_tracker.SegmentTracker` alone against Redis: 100k offsets handed out,
             then acked in a shuffled order 1000 at a time (out-of-order acks/s, and how much of
             that is inside Redis), and the Redis memory one pending delivery costs (MEMORY USAGE
             of the tracker's keys, and INFO used_memory).
Targets: ≥ 50 000 events/s acked end to end and ≥ 1.0× JetStream (the Redis ratio is shown too);
the tracker ≥ 200 000 out-of-order acks/s.

Usage: .venv/bin/python bench/consume.py [--events 200000] [--segments 4] [--consumers 2]
       [--batch 1000] [--only cbr,redis,jetstream,rabbitmq,tracker] [--rounds 1] [--acks carried,alone]
       [--database-url postgres://postgres@127.0.0.1:5432/cbr_bench_consume]
       [--redis-url redis://127.0.0.1:6379/3] [--nats-url nats://127.0.0.1:4222]
       [--rabbitmq-url amqp://guest:guest@127.0.0.1:5672/%2F]
       [--web-workers 2] [--web-threads 8] [--no-warm-up]
The database is created if missing and migrated; the Redis database of --redis-url is emptied
(FLUSHDB) before the CBR part. The figures, from a quiet machine, go into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import ROOT, cpu_seconds, machine, manage, postgres_cpu_seconds, wait_http
from consume_common import (  # noqa: E402
    GROUP_TYPES,
    JETSTREAM,
    JETSTREAM_RAW,
    PARTS,
    PUBLISH_BATCH,
    RABBITMQ,
    REDIS,
    TARGET_EVENTS_S,
    TARGET_TRACKER_ACKS_S,
    TRACKER_SHUFFLED,
    Figure,
    ms,
    payload,
    run_crew,
    script_seconds,
    settle,
)
from consume_peers import JetStream, RabbitMQ, RedisStreams  # noqa: E402

from cbr_client import Client
from cbrweb import web

FIGURE_NAMES = {
    "carried": "CBR HTTP read carrying ack, {} group",
    "carried-json": "CBR HTTP read carrying ack, JSON, {} group",
    "alone": "CBR HTTP read, then ack, {} group",
}


def _cbr_consumer(i: int, start, url: str, token: str, group: str, batch: int, acks_mode: str) -> dict:
    """One consumer: `read` then `ack` each batch ("alone"), or each read carrying the previous
    batch's ack and one ack of its own for the last ("carried", as `consume()` does)."""
    client = Client(url, token=token)
    if acks_mode == "carried-json":  # answers in JSON, not the binary form the client asks for
        client.binary_reads = False
        acks_mode = "carried"
    rg = client.reader_group(group)
    rg.info()  # the connection is open before the clock starts
    start()
    cpu0 = time.process_time()
    reads, acks, sizes, n_acked, t_end = [], [], [], 0, time.monotonic()
    messages: list = []
    while True:
        t = time.monotonic()
        if acks_mode == "carried":
            messages = rg.read(max_events=batch, consumer=f"c{i}", ack=messages)
            n_acked += rg.last_ack["acked"] if rg.last_ack else 0
        else:
            messages = rg.read(max_events=batch, consumer=f"c{i}")
        t1 = time.monotonic()
        reads.append(t1 - t)
        t_end = t1
        if not messages:
            break  # everything handed out (max_ack_pending leaves room for every consumer's batch)
        sizes.append(len(messages))
        if acks_mode == "alone":
            answer = rg.ack(messages)
            t_end = time.monotonic()
            acks.append(t_end - t1)
            n_acked += answer["acked"]
    client.close()
    return {
        "read": reads,
        "ack": acks,
        "sizes": sizes,
        "n_read": sum(sizes),
        "n_acked": n_acked,
        "t_end": t_end,
        "cpu": time.process_time() - cpu0,
    }


class CBRServer:
    """A database, a flushed Redis database, a temporary store and gunicorn, as cbrweb/run.py
    starts it; a staff user's token; a stream with N events published before any timing."""

    def __init__(self, args):
        self.args = args
        self.work = Path(tempfile.mkdtemp(prefix="bench-consume-", dir=ROOT / "var"))
        self.server: subprocess.Popen | None = None
        self.stream = f"consume{time.strftime('%m%d%H%M%S')}"

    def start(self) -> None:
        a = self.args
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
            "DATABASE_URL": a.database_url,
            "REDIS_URL": a.redis_url,
            "CBR_DATA_DIR": str(self.work / "data"),
            "CBR_FSYNC": "batch",
            "DJANGO_SECRET_KEY": "bench-only",
            "CBR_LOG_LEVEL": "WARNING",
            "CBR_WEB_THREADS": str(a.web_threads),
        }
        create_database(a.database_url)
        import redis

        self.redis = redis.Redis.from_url(a.redis_url)
        self.redis.flushdb()
        manage(env, "migrate", "--noinput")
        self.token = manage(
            env,
            "shell",
            "-c",
            (
                "from django.contrib.auth.models import User; from rest_framework.authtoken.models import Token;"
                "u, _ = User.objects.get_or_create(username='bench', defaults={'is_staff': True, 'is_superuser': True});"
                "print(Token.objects.get_or_create(user=u)[0].key)"
            ),
        ).split()[-1]
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = subprocess.Popen(
            web.command(
                f"127.0.0.1:{port}",
                a.web_workers,
                "--log-level",
                "warning",
                "--graceful-timeout",
                "5",
            ),
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        wait_http(f"{self.url}/login/")
        self._warm_up()
        self._publish()

    def api(self) -> Client:
        """A new client for each set-up step: gunicorn closes a keep-alive connection idle for 2 s,
        and the client reopens one only for requests that are safe to repeat."""
        return Client(self.url, token=self.token)

    def _warm_up(self) -> None:
        """Each worker imports the consuming views on its first request: not the benchmark's
        business. A few reads and acks on a small stream, over separate connections so that
        both workers are likely to take some."""
        with self.api() as api:
            api.create_stream("bench", f"{self.stream}-warm", segment_count=1)
            api.publish(f"bench/{self.stream}-warm", [payload(i) for i in range(200)])
            api.create_reader_group("bench", f"{self.stream}-warm", [f"bench/{self.stream}-warm"])
        for _ in range(8):
            with self.api() as c:
                rg = c.reader_group(f"bench/{self.stream}-warm")
                rg.ack(rg.read(max_events=20))

    def _publish(self) -> None:
        a = self.args
        with self.api() as api:
            api.create_stream("bench", self.stream, segment_count=a.segments)
            t0 = time.monotonic()
            for start in range(0, a.events, PUBLISH_BATCH):
                api.publish(
                    f"bench/{self.stream}", [payload(i) for i in range(start, min(a.events, start + PUBLISH_BATCH))]
                )
            el = time.monotonic() - t0
        print(
            f"cbr: published {a.events:,} events on {a.segments} segment(s) in {el:.1f} s "
            f"({a.events / el:,.0f} events/s, untimed)",
            flush=True,
        )

    def consume(self, retention_type: str, round_no: int | str, acks_mode: str = "carried") -> Figure:
        a = self.args
        name = f"{self.stream}-{GROUP_TYPES[retention_type]}-{acks_mode}-{round_no}"
        config = {
            "retention_type": retention_type,
            "ack_timeout_s": 600,
            "max_ack_pending": max(10_000, a.consumers * a.batch),
        }
        if retention_type == "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT":
            config["checkpoint_interval_s"] = a.checkpoint_interval
        with self.api() as api:
            api.create_reader_group("bench", name, [f"bench/{self.stream}"], **config)
        scripts0 = script_seconds(self.redis)
        cpu0 = self.cpu_seconds()
        t0, results = run_crew(_cbr_consumer, a.consumers, (self.url, self.token, f"bench/{name}", a.batch, acks_mode))
        cpu = {k: v - cpu0[k] for k, v in self.cpu_seconds().items()}
        in_scripts = script_seconds(self.redis) - scripts0
        seconds = max(r["t_end"] for r in results) - t0
        n_read = sum(r["n_read"] for r in results)
        n_acked = sum(r["n_acked"] for r in results)
        reads = [x for r in results for x in r["read"]]
        acks = [x for r in results for x in r["ack"]]
        sizes = [x for r in results for x in r["sizes"]]
        in_read, in_ack = sum(reads), sum(acks) or 1e-9
        with self.api() as api:
            detail = api.reader_group(f"bench/{name}").info()
        lag = sum(p["lag_events"] for p in detail["positions"])
        pending = sum(p["pending"] for p in detail["positions"])
        fig = Figure(
            FIGURE_NAMES[acks_mode].format(GROUP_TYPES[retention_type]),
            n_acked,
            seconds,
            [
                f"read  {ms(reads)}  ({len(reads)} requests{'' if acks else ', each carrying the previous batch ack'})",
                *([f"ack   {ms(acks)}  ({len(acks)} requests)"] if acks else []),
                *(
                    [
                        f"consumers' time: {in_read / (in_read + in_ack):.0%} in reads, {in_ack / (in_read + in_ack):.0%} in acks"
                    ]
                    if acks
                    else []
                ),
                f"events per read: mean {statistics.mean(sizes):,.0f}; {sum(1 for x in sizes if x < a.batch)} of "
                f"{len(sizes)} reads answered fewer than {a.batch}",
                f"Redis ran the tracker's scripts {in_scripts:.2f} s of the {seconds:.2f} s "
                f"({in_scripts / max(1, n_acked) * 1e6:.0f} us per event)",
                "CPU per 1000 events acked: "
                + ", ".join(
                    f"{k} {v / max(1, n_acked) * 1e6:.1f} ms"
                    for k, v in {"consumers (client)": sum(r["cpu"] for r in results), **cpu}.items()
                    if not k.startswith("worker ")
                ),
                f"CPU used {(sum(r['cpu'] for r in results) + cpu['web workers'] + cpu['Redis'] + cpu['PostgreSQL']) / seconds:.2f}"
                f" of the {os.cpu_count()} cores; the web workers' share each: "
                + ", ".join(
                    f"{v / max(1e-9, cpu['web workers']):.0%}" for k, v in cpu.items() if k.startswith("worker ")
                ),
            ],
        )
        if retention_type == "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT":
            fig.notes.append(
                f"checkpoint interval {a.checkpoint_interval} s; "
                f"{len(detail['checkpoints'])} automatic checkpoint(s) kept at the end"
            )
        if n_read != a.events or n_acked != a.events or lag or pending:
            fig.notes.append(
                f"CHECK FAILED: read {n_read:,}, acked {n_acked:,} of {a.events:,}; "
                f"lag {lag:,}, pending {pending:,} after the run"
            )
        return fig

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by the web workers (gunicorn's children), Redis (INFO cpu) and
        PostgreSQL (`postgres_cpu_seconds`: the server has no other client during the run)."""
        import psutil

        info = self.redis.info("cpu")
        workers = sorted(psutil.Process(self.server.pid).children(), key=lambda w: w.pid)
        return {
            "web workers": cpu_seconds(workers),
            **{f"worker {i + 1}": cpu_seconds([w]) for i, w in enumerate(workers)},
            "Redis": info["used_cpu_user"] + info["used_cpu_sys"],
            "PostgreSQL": postgres_cpu_seconds(),
        }

    def stop(self) -> None:
        if self.server is not None:
            try:
                os.killpg(self.server.pid, signal.SIGTERM)
                self.server.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.server.kill()
        shutil.rmtree(self.work, ignore_errors=True)


def create_database(url: str) -> None:
    if not url.startswith("postgres"):
        return
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- Redis Streams -----------------------------------------------------------------------------


def bench_tracker(redis_url: str, deliveries: int, hand_out_limit: int = 10_000, ack_batch: int = 1000) -> list[Figure]:
    import redis

    from domain.acks import Poison
    from groups.ack_tracker import SegmentTracker

    r = redis.Redis.from_url(redis_url)
    run = f"bench-{os.getpid()}"  # no real subscription has such a key
    now = time.time()

    def tracker(n: int) -> SegmentTracker:
        t = SegmentTracker(r, f"{run}-{n}", "0")
        t.forget()
        return t

    def hand_out_all(t: SegmentTracker, limit: int = hand_out_limit, n: int = deliveries) -> list:
        out = []
        while len(out) < n:
            got = t.hand_out(now, "bench", limit, n, 3600.0, 5, Poison.DEAD_LETTER)
            if not got.deliveries:
                raise SystemExit("tracker: hand_out gave nothing before the tail")
            out += got.deliveries
        return out

    def ack_all(t: SegmentTracker, handed: list) -> tuple[float, int]:
        t0 = time.perf_counter()
        floor = 0
        for i in range(0, len(handed), ack_batch):
            results, floor = t.ack_many(handed[i : i + ack_batch])
            if not all(x.acked for x in results):
                raise SystemExit(f"tracker: an ack was refused: {next(x for x in results if not x.acked)}")
        return time.perf_counter() - t0, floor

    figures = []
    trackers = [tracker(n) for n in (1, 2, 3)]
    try:
        shuffled = trackers[0]
        t0 = time.perf_counter()
        handed = hand_out_all(shuffled)
        hand_out_s = time.perf_counter() - t0
        random.Random(4).shuffle(handed)
        scripts0 = script_seconds(r)
        ack_s, floor = ack_all(shuffled, handed)
        in_scripts = script_seconds(r) - scripts0
        fig = Figure(
            TRACKER_SHUFFLED,
            deliveries,
            ack_s,
            [
                f"{deliveries:,} offsets acked in a shuffled order, {ack_batch} per ack_many",
                f"inside Redis: {in_scripts / deliveries * 1e6:.1f} us per ack; in this process and on the way: "
                f"{(ack_s - in_scripts) / deliveries * 1e6:.1f} us",
                f"hand_out of the same, {hand_out_limit:,} per call: {deliveries / hand_out_s:,.0f} deliveries/s",
            ],
        )
        if floor != deliveries:
            fig.notes.append(f"CHECK FAILED: floor {floor:,} after acking all {deliveries:,}")
        figures.append(fig)

        in_order = trackers[1]
        ack_s, _ = ack_all(in_order, hand_out_all(in_order))
        figures.append(Figure("tracker: in-order acks (reference)", deliveries, ack_s))
        in_order.forget()

        # Memory: Redis's own accounting of the keys, and the server's used_memory around it.
        pending = trackers[2]
        used0 = r.info("memory")["used_memory"]
        handed = hand_out_all(pending)
        used1 = r.info("memory")["used_memory"]
        by_keys = sum(r.memory_usage(k, samples=0) or 0 for k in pending.keys)
        # everything acked but the first offset: the floor cannot move, every ack is remembered
        ack_all(pending, handed[1:])
        used2 = r.info("memory")["used_memory"]
        by_keys_acked = sum(r.memory_usage(k, samples=0) or 0 for k in pending.keys)
        pending.forget()
        # the worst case: hand-outs of one delivery each (a lease record each)
        singles = 10_000
        hand_out_all(pending, limit=1, n=singles)
        by_keys_single = sum(r.memory_usage(k, samples=0) or 0 for k in pending.keys)
        figures.append(
            Figure(
                "tracker: Redis memory per pending delivery",
                deliveries,
                1.0,
                bytes_per_pending=by_keys / deliveries,
                notes=[
                    f"MEMORY USAGE of the tracker's keys: {by_keys / deliveries:,.1f} B per pending delivery "
                    f"({by_keys / 2**20:.2f} MiB for {deliveries:,}, handed out {hand_out_limit:,} per call)",
                    f"INFO used_memory delta: {(used1 - used0) / deliveries:,.1f} B per pending delivery",
                    f"acked but held above a stuck floor (all but the first acked): "
                    f"{by_keys_acked / (deliveries - 1):,.1f} B per offset by MEMORY USAGE, "
                    f"{(used2 - used0) / (deliveries - 1):,.1f} B by used_memory",
                    f"handed out one per call ({singles:,}): {by_keys_single / singles:,.1f} B per pending delivery",
                ],
            )
        )
    finally:
        for t in trackers:
            t.forget()
        r.close()
    return figures


# -- the run -----------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=2, help="consumer processes, for every peer")
    parser.add_argument("--batch", type=int, default=1000, help="events per read / fetch, and ids per ack")
    parser.add_argument("--only", action="append", help=f"parts to run ({', '.join(PARTS)}): repeat or comma-separate")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds; medians are reported")
    parser.add_argument(
        "--retention-types", default=",".join(GROUP_TYPES), help="CBR reader groups to time, one run each per round"
    )
    parser.add_argument(
        "--acks",
        default="carried,alone",
        help="how CBR consumers acknowledge: carried (each read carries the previous batch's ack, as "
        "consume() does; answers in binary, as the client asks for them), carried-json (the same, answers in "
        "JSON), alone (a read, then an ack request); comma-separated, each timed",
    )
    parser.add_argument("--checkpoint-interval", type=int, default=1, help="of the AUTOMATIC group, seconds")
    parser.add_argument(
        "--no-jetstream-raw",
        dest="jetstream_raw",
        action="store_false",
        help="skip the second JetStream figure (pull requests without nats-py's fetch)",
    )
    parser.add_argument("--tracker-deliveries", type=int, default=100_000)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cbr_bench_consume")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/3")
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--rabbitmq-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="skip the untimed CBR round run before the timed ones",
    )
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--web-threads", type=int, default=8)
    args = parser.parse_args()
    parts = {p.strip() for group in (args.only or [",".join(PARTS)]) for p in group.split(",") if p.strip()}
    if parts - set(PARTS):
        parser.error(f"--only takes {', '.join(PARTS)}, not {', '.join(sorted(parts - set(PARTS)))}")
    args.parts = [p for p in PARTS if p in parts]
    args.types = [t.strip() for t in args.retention_types.split(",") if t.strip()]
    args.acks = [m.strip() for m in args.acks.split(",") if m.strip()]
    if not args.acks or set(args.acks) - set(FIGURE_NAMES):
        parser.error(f"--acks takes {', '.join(FIGURE_NAMES)}")
    if set(args.types) - set(GROUP_TYPES):
        parser.error(f"--retention-types takes {', '.join(GROUP_TYPES)}")
    return args


def show(fig: Figure) -> None:
    unit = "acks/s" if fig.name.startswith("tracker") else "events/s"
    if fig.bytes_per_pending is None:
        print(f"{fig.name:48s} {fig.rate:10,.0f} {unit}  ({fig.events:,} in {fig.seconds:.2f} s)", flush=True)
    else:
        print(fig.name, flush=True)
    for note in fig.notes:
        print(f"    {note}", flush=True)


def main() -> None:
    args = parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    print(
        f"workload: {args.events:,} events of ~100 B, {args.consumers} consumer processes, "
        f"batches of {args.batch}, {args.rounds} round(s); parts: {', '.join(args.parts)}",
        flush=True,
    )
    cbr = redis_streams = jetstream = rabbitmq = None
    figures: dict[str, list[Figure]] = {}

    def keep(fig: Figure) -> None:
        show(fig)
        figures.setdefault(fig.name, []).append(fig)

    try:
        if "cbr" in args.parts:
            print(
                f"cbr: database {args.database_url}, Redis {args.redis_url} (flushed), "
                f"gunicorn {args.web_workers} workers x {args.web_threads} threads, fsync per batch",
                flush=True,
            )
            cbr = CBRServer(args)
            cbr.start()
        if "redis" in args.parts:
            redis_streams = RedisStreams(args)
            redis_streams.start()
        if "jetstream" in args.parts:
            jetstream = JetStream(args)
        if "rabbitmq" in args.parts:
            rabbitmq = RabbitMQ(args)
        if cbr is not None and args.warm_up:
            # untimed: a whole consume of the stream first, so that every web worker's first
            # requests (imports, prepared queries, connections, PostgreSQL's cache) are not timed
            warm = cbr.consume(args.types[0], "warm", args.acks[0])
            print(f"cbr: warm-up round (untimed, not counted): {warm.rate:,.0f} events/s", flush=True)
        for round_no in range(args.rounds):
            if cbr is not None:
                for acks_mode in args.acks:
                    for retention_type in args.types:
                        settle()
                        keep(cbr.consume(retention_type, round_no, acks_mode))
            if redis_streams is not None:
                settle()
                keep(redis_streams.consume(round_no))
            if jetstream is not None:
                settle()
                keep(jetstream.consume(round_no))
                if args.jetstream_raw:
                    settle()
                    keep(jetstream.consume(round_no, raw=True))
            if rabbitmq is not None:
                settle()
                keep(rabbitmq.consume(round_no))
            if "tracker" in args.parts:
                for fig in bench_tracker(args.redis_url, args.tracker_deliveries):
                    keep(fig)
    finally:
        for part in (cbr, redis_streams, jetstream, rabbitmq):
            if part is not None:
                part.stop()
    summary(args, figures)


def summary(args, figures: dict[str, list[Figure]]) -> None:
    """Medians over the rounds; each CBR figure against the peers, and the targets. The JetStream
    target is against the fetch figure (the issue's definition); the raw pull is shown beside it
    because nats-py's fetch, not the server, bounds the first."""

    def median(name: str) -> float | None:
        figs = figures.get(name)
        return statistics.median(f.rate for f in figs) if figs else None

    peers = {
        "JetStream": median(JETSTREAM),
        "JS raw": median(JETSTREAM_RAW),
        "RabbitMQ": median(RABBITMQ),
        "Redis": median(REDIS),
    }
    print()
    print(
        f"summary: medians of {args.rounds} round(s), {args.events:,} events, {args.consumers} consumers, "
        f"batches of {args.batch}"
    )
    print(f"{'':48s} {'per s':>10s}  " + "  ".join(f"{'vs ' + k:>12s}" for k in peers) + "  target")
    for name, figs in figures.items():
        if figs[0].bytes_per_pending is not None:
            continue
        rate = median(name)
        ratios = "  ".join(
            f"{rate / v:11.2f}x" if v and not name.startswith("tracker") else f"{'':12s}" for v in peers.values()
        )
        target = ""
        if name.startswith("CBR"):
            target = f">= {TARGET_EVENTS_S:,}/s {'met' if rate >= TARGET_EVENTS_S else 'NOT met'}"
            for peer in ("JetStream", "JS raw", "RabbitMQ"):  # issue 26: the servers, not only nats-py's fetch
                if peers[peer]:
                    target += f"; >= 1.0x {peer} {'met' if rate >= peers[peer] else 'NOT met'}"
        elif name == TRACKER_SHUFFLED:
            target = f">= {TARGET_TRACKER_ACKS_S:,} acks/s {'met' if rate >= TARGET_TRACKER_ACKS_S else 'NOT met'}"
        spread = f"  (range {min(f.rate for f in figs):,.0f}-{max(f.rate for f in figs):,.0f})" if len(figs) > 1 else ""
        print(f"{name:48s} {rate:10,.0f}  {ratios}  {target}{spread}")
    for name, figs in figures.items():
        if figs[0].bytes_per_pending is not None:
            bytes_each = statistics.median(f.bytes_per_pending for f in figs)
            print(f"{name:48s} {bytes_each:10,.1f} B  (MEMORY USAGE of the tracker's keys / pending deliveries)")


if __name__ == "__main__":
    main()
