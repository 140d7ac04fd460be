"""What one pass over woken reads costs, in one process, without a network (issue 38's fan-out
and steady-latency targets, taken apart).

N reader groups on one stream, each with one read parked at the tail (`consuming.read(...,
park=True)`, as the ASGI front parks it); one event published; then the pass that the front runs
in a thread for the reads it woke (`api.reader_group_views._ParkedRead.together`: the groups'
counts, the store, the hand-outs, the floors persisted, every answer rendered), timed. The groups
have read before (a warm-up event each, acknowledged), as a waiting consumer's group has: a
brand-new group's first pass also asks the database where its state starts. The garbage
collector is set as a web worker sets it (`cbrweb.gunicorn_conf.tune_collector`: with Python's
defaults a 1 000-read pass spent nearly half its time in collections), and kept waiting during
the pass as the front keeps it (`cbrweb.front._Collector`).

Printed per N: the pass's wall time, and where it went (this process's CPU, PostgreSQL's and
Redis's, the rest waiting), per read. The CPU figures are read in
clock ticks (10 ms) and include the process's other threads: they mean something for hundreds of
reads, not for one. bench/latency.py measures the whole path (HTTP, the wake-up,
the answers sent) against JetStream and RabbitMQ; this one says which part of the server to work
on. Against PostgreSQL (`DATABASE_URL`, default a fresh database `cbr_bench_woken` on 127.0.0.1)
and Redis (`REDIS_URL`, default database 3 on 127.0.0.1, flushed); keep the machine otherwise quiet.

Usage: .venv/bin/python bench/woken_pass.py [--groups 1,200,1000] [--rounds 5] [--profile FILE]
       (--profile: a cProfile, CPU time, of the largest N's passes, to FILE)
"""

from __future__ import annotations

import argparse
import cProfile
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import orjson
from _common import ROOT, in_process_environment, machine, postgres_cpu_seconds


def _setup_environment() -> Path:
    return in_process_environment("woken-pass-", "cbr_bench_woken", 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", default="1,200,1000", help="how many groups' reads one publish wakes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="write a cProfile of the largest N's passes here")
    args = parser.parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
    sys.path.insert(0, str(ROOT))
    work = _setup_environment()
    try:
        run(args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    import redis

    from cbrweb import front, gunicorn_conf

    gunicorn_conf.tune_collector()  # as a gunicorn worker does once it has loaded the application

    from api.reader_group_views import _ParkedRead
    from domain.events import EventIn
    from groups import consuming, reader_groups
    from streams import services, waking

    r = redis.Redis.from_url(os.environ["REDIS_URL"])

    def redis_cpu() -> float:
        info = r.info("cpu")
        return info["used_cpu_user"] + info["used_cpu_sys"]

    listener = waking.listener()
    while not listener.healthy:
        time.sleep(0.01)
    sizes = [int(n) for n in args.groups.split(",") if n]
    print(f"machine: {machine()}")
    print("one publish wakes one parked read of each of N groups; the pass that reads them all, per round")
    for n in sizes:
        stream = services.do_create_stream(scope="woken", name=f"s{n}", segment_count=1)
        groups = [
            reader_groups.do_create_reader_group(
                scope="woken", name=f"g{n}-{i}", streams=[stream], start="tail", retention_type="NONE"
            )
            for i in range(n)
        ]
        walls, cpus, pgs, reds = [], [], [], []
        profiler = cProfile.Profile(time.process_time) if args.profile and n == max(sizes) else None
        for _ in range(args.rounds + 1):  # the first round warms the groups up
            services.do_publish(stream, [EventIn(b"warm")])
            for group in groups:  # read it, carrying no ack: then acknowledge it with the next read
                got = consuming.read(group, max_events=10, consumer="c")
                consuming.ack(group, [d["delivery_id"] for d in got.deliveries])
            parked = []
            for group in groups:
                result = consuming.read(group, max_events=1, wait_ms=60_000, consumer="c", park=True)
                assert result.wait is not None, "nothing to read yet: the read parks"
                parked.append(_ParkedRead(result, binary=False))
            services.do_publish(stream, [EventIn(b"now")])
            cpu0, pg0, redis0, t0 = time.process_time(), postgres_cpu_seconds(), redis_cpu(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            with front._COLLECTOR.quiet(n >= front._QUIET_FROM):  # as the front reads them
                answers = _ParkedRead.together(parked, ["stream"] * n)
            if profiler is not None:
                profiler.disable()
            wall = time.perf_counter() - t0
            cpu, pg, red = time.process_time() - cpu0, postgres_cpu_seconds() - pg0, redis_cpu() - redis0
            assert all(a.status_code == 200 and b'"now"' in a.content for a in answers), "each read got the event"
            for group, answer in zip(groups, answers, strict=True):  # acknowledged: not handed out again
                consuming.ack(group, [d["delivery_id"] for d in orjson.loads(answer.content)["deliveries"]])
            walls.append(wall)
            cpus.append(cpu)
            pgs.append(pg)
            reds.append(red)
        walls, cpus, pgs, reds = walls[1:], cpus[1:], pgs[1:], reds[1:]
        wall = statistics.median(walls)
        per = 1e6 / n
        print(
            f"N={n:5}: pass {wall * 1e3:8.2f} ms (min {min(walls) * 1e3:8.2f}); per read {wall * per:6.1f} us:"
            f" this process CPU {statistics.median(cpus) * per:6.1f}, PostgreSQL {statistics.median(pgs) * per:6.1f},"
            f" Redis {statistics.median(reds) * per:6.1f} us",
            flush=True,
        )
        if profiler is not None:
            profiler.dump_stats(args.profile)
            print(f"profile of the N={n} passes: {args.profile}")
    listener.stop()


if __name__ == "__main__":
    main()
