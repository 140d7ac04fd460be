"""What one `/metrics` scrape costs as the reader groups grow (issue 37, point 6), in one process.

One consumption-based stream of 4 segments (--segments) holding 1 000 events, a delayed index
on a second stream, and N reader groups on the first (half of them subscribers with an
acknowledgement cut, the rest NONE), made in bulk straight into the tables (rows as the services
leave them: a subscription and a read position per segment each); a few of them have read and
acknowledged through the REST API, so their trackers hold state in Redis. For each N (added to
the groups already there), the application's `/metrics` is called in this process through its
WSGI entry (no network, no web server; the garbage collector set as cbrweb/gunicorn_conf.py sets a
worker's): the wall time of a scrape (median of --repeat, with the range, and the CPU this process
spent in it: the rest is PostgreSQL, Redis and the machine's other load), its SQL queries and
its Redis round trips (commands sent, a pipeline counting once), and the size of the answer.

Against PostgreSQL (`DATABASE_URL`, default a fresh database `cbr_bench_metrics` on 127.0.0.1,
dropped and made again) and Redis (`REDIS_URL`, default database 5 on 127.0.0.1, flushed); the
store in a temporary directory under var/, removed at the end.

Usage: .venv/bin/python bench/metrics_scrape.py [--groups 0,1000,10000] [--repeat 3] [--segments 4]
       [--profile FILE]  (a cProfile of one more scrape at the last size, to FILE)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from wsgiref.util import setup_testing_defaults

from _common import ROOT, in_process_environment, machine

TRACKED = 5  # groups that read and acknowledge through the API, so Redis holds their trackers


def _setup_environment() -> Path:
    return in_process_environment("metrics-scrape-", "cbr_bench_metrics", 5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", default="0,1000,10000", help="group counts to measure at, ascending")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--segments", type=int, default=4, help="segments of the stream the groups read")
    parser.add_argument("--profile", help="write a cProfile of the last scrape to this file")
    args = parser.parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
    work = _setup_environment()
    try:
        run([int(n) for n in args.groups.split(",")], args.repeat, args.segments, args.profile)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class RoundTrips:
    """Counts what this process sends Redis: one per command, one per pipeline."""

    def __init__(self):
        import redis.connection

        self.count = 0
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(conn, command, check_health=True):
            self.count += 1
            return original(conn, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted


def run(sizes: list[int], repeat: int, segments: int, profile: str | None = None) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)

    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from cbrweb import gunicorn_conf
    from cbrweb.wsgi import application
    from domain.events import EventIn
    from domain.policy_spec import parse_policy
    from groups.models import ReaderGroup, ReadPosition, Subscription
    from retention import services as retention_services
    from streams import services
    from streams.models import Scope

    def call(method: str, path: str, body: bytes = b"", token: str | None = None) -> tuple[int, bytes]:
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
        }
        if token:
            environ["HTTP_AUTHORIZATION"] = f"Token {token}"
        setup_testing_defaults(environ)
        answer: dict = {}

        def start_response(status, headers, exc_info=None):
            answer["status"] = int(status.split()[0])

        chunks = application(environ, start_response)
        raw = b"".join(chunks)
        if hasattr(chunks, "close"):
            chunks.close()
        return answer["status"], raw

    token = Token.objects.create(user=User.objects.create(username="bench", is_staff=True)).key
    policy = parse_policy({"limit_type": "size", "min": 1, "consumption_based": True})
    stream = retention_services.do_create_stream(scope="bench", name="s", segment_count=segments, policy=policy)
    services.do_publish(stream, [EventIn(b"x" * 100, routing_key=f"k{i}".encode()) for i in range(1000)])
    delayed = services.do_create_stream(scope="bench", name="later", segment_count=1)
    later = int(time.time() * 1000) + 3_600_000
    services.do_publish(delayed, [EventIn(b"d", deliver_at_ms=later) for _ in range(100)])
    scope = Scope.objects.get(name="bench")
    gunicorn_conf.tune_collector()  # as a gunicorn worker runs
    trips = RoundTrips()
    made = 0
    print(f"machine: {machine()}")
    print(f"one stream of {segments} segment(s) (1 000 events), one delayed stream; N groups on the first")
    for n in sizes:
        now = timezone.now()
        groups = ReaderGroup.objects.bulk_create(
            ReaderGroup(
                scope=scope,
                name=f"g{i:06d}",
                retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT" if i % 2 else "NONE",
            )
            for i in range(made, n)
        )
        subs = Subscription.objects.bulk_create(
            Subscription(
                reader_group=g,
                stream=stream,
                acknowledgement_cut={s: 10 for s in stream.segment_ids} if g.retention_type != "NONE" else None,
                acknowledged_at=now if g.retention_type != "NONE" else None,
            )
            for g in groups
        )
        ReadPosition.objects.bulk_create(
            (ReadPosition(subscription=sub, segment_id=seg) for sub in subs for seg in stream.segment_ids),
            batch_size=5000,
        )
        for g in groups[:TRACKED] if made == 0 else []:
            path = f"/api/v1/reader-groups/bench/{g.name}/"
            status, raw = call("POST", path + "read/", b'{"max_events": 20}', token)
            assert status == 200, raw[:300]
            ids = [d["delivery_id"] for d in json.loads(raw)["deliveries"][:10]]
            status, raw = call("POST", path + "ack/", json.dumps({"delivery_ids": ids}).encode(), token)
            assert status == 200, raw[:300]
        made = max(made, n)
        times, cpu, size, queries = [], [], 0, []
        for _ in range(repeat):
            trips.count, queries = 0, []
            with connection.execute_wrapper(lambda execute, sql, *rest: queries.append(sql) or execute(sql, *rest)):
                start, start_cpu = time.perf_counter(), time.process_time()
                status, raw = call("GET", "/metrics")
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            assert status == 200, raw[:300]
            size = len(raw)
        print(
            f"groups {n:>6,}: scrape median {statistics.median(times) * 1000:8.1f} ms"
            f" (range {min(times) * 1000:.1f}-{max(times) * 1000:.1f}, {repeat} runs; this process's CPU"
            f" {statistics.median(cpu) * 1000:.0f} ms);"
            f" {len(queries)} SQL queries, {trips.count} Redis round trips; {size / 1024:,.0f} KiB",
            flush=True,
        )
        if profile and n == sizes[-1]:
            profiler = cProfile.Profile()
            profiler.runcall(call, "GET", "/metrics")
            profiler.dump_stats(profile)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
