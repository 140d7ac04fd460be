"""What a web worker spends per read, in one process, without a network (issue 26's web-CPU target).

The Python client's own `read`, each read carrying the previous batch's ack (as `consume()` and
bench/consume.py do), with its requests handed straight to the WSGI application instead of a
socket: the figures are the CPU time (`time.process_time`) spent inside the application only,
per 1 000 events acked, so neither the client's decoding nor gunicorn's HTTP parsing is in them.
bench/consume.py measures the whole path, gunicorn included, with real consumers.

With them, the CPU PostgreSQL and Redis spent meanwhile (the whole servers: keep the machine
otherwise quiet). Against PostgreSQL (`DATABASE_URL`, default a fresh database `cbr_bench_cpu` on 127.0.0.1) and
Redis (`REDIS_URL`, default database 3 on 127.0.0.1, flushed), a temporary store; the
worker's garbage-collector settings as cbrweb/gunicorn_conf.py gives them.

Usage: .venv/bin/python bench/read_cpu.py [--events 100000] [--batch 1000] [--segments 4]
       [--rounds 3] [--types NONE,AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT] [--json]
       [--profile FILE]  (cProfile of the application's part of the last round, to FILE)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import shutil
import sys
import time
from pathlib import Path
from wsgiref.util import setup_testing_defaults

from _common import ROOT, in_process_environment, machine, postgres_cpu_seconds

sys.path.insert(0, str(ROOT / "client"))


def _setup_environment() -> Path:
    return in_process_environment("read-cpu-", "cbr_bench_cpu", 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--types", default="NONE,AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    parser.add_argument("--json", action="store_true", help="answers in JSON, not the client's binary form")
    parser.add_argument("--profile", help="write a cProfile of the application's part of the last round here")
    args = parser.parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
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

    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from cbr_client import Client
    from cbrweb import gunicorn_conf
    from cbrweb.wsgi import application

    spent = {"cpu": 0.0}
    profiler: list[cProfile.Profile] = []

    class InProcess(Client):
        """The client, its requests answered by the application in this process."""

        def _exchange(self, method, path, body, accept, timeout=None):  # no socket: nothing to time out
            import orjson

            data = b"" if body is None else orjson.dumps(body)
            path, _, query = (self._prefix + path).partition("?")
            environ = {
                "REQUEST_METHOD": method,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REMOTE_ADDR": "127.0.0.1",
                "CONTENT_TYPE": "application/json",
                "CONTENT_LENGTH": str(len(data)),
                "HTTP_ACCEPT": accept,
                "HTTP_AUTHORIZATION": f"Token {self.token}",
                "wsgi.input": io.BytesIO(data),
            }
            setup_testing_defaults(environ)  # the rest of what a WSGI server passes (host 127.0.0.1)
            answer: dict = {}

            def start_response(status, headers, exc_info=None):
                answer["status"], answer["headers"] = int(status.split()[0]), dict(headers)

            if profiler:
                profiler[0].enable()
            t = time.process_time()
            chunks = application(environ, start_response)
            raw = b"".join(chunks)
            if hasattr(chunks, "close"):
                chunks.close()
            spent["cpu"] += time.process_time() - t
            if profiler:
                profiler[0].disable()
            binary = answer["status"] < 400 and answer["headers"].get("Content-Type", "").startswith(
                "application/vnd.cbr.read-batch"
            )
            return answer["status"], binary, raw

    user = User.objects.create(username="bench", is_staff=True)
    token = Token.objects.create(user=user).key
    client = InProcess("http://127.0.0.1", token=token)
    client.binary_reads = not args.json
    client.create_stream("bench", "s", segment_count=args.segments)
    for start in range(0, args.events, 1000):
        client.publish("bench/s", [f"{i:09d} " + "x" * 90 for i in range(start, min(args.events, start + 1000))])
    gunicorn_conf.tune_collector()  # as a gunicorn worker runs
    print(f"machine: {machine()}")
    print(
        f"{args.events:,} events on {args.segments} segment(s), reads of {args.batch} carrying the previous ack, "
        f"answers in {'JSON' if args.json else 'binary'}; application CPU per 1 000 events acked, and per read"
    )
    types = [t for t in args.types.split(",") if t]
    figures: dict[str, list[float]] = {t: [] for t in types}
    others: dict[str, list[tuple[float, float]]] = {t: [] for t in types}  # (PostgreSQL, Redis) per 1 000
    import redis

    r = redis.Redis.from_url(os.environ["REDIS_URL"])

    def redis_cpu() -> float:
        info = r.info("cpu")
        return info["used_cpu_user"] + info["used_cpu_sys"]

    for round_no in range(args.rounds):
        if args.profile and round_no == args.rounds - 1:
            profiler.append(cProfile.Profile(time.process_time))  # CPU, not waiting
        for retention_type in types:
            name = f"g-{retention_type[:4].lower()}-{round_no}"
            config = {"retention_type": retention_type, "ack_timeout_s": 600, "max_ack_pending": 10_000}
            if retention_type != "NONE":
                config["checkpoint_interval_s"] = 1
            client.create_reader_group("bench", name, ["bench/s"], **config)
            rg = client.reader_group(f"bench/{name}")
            spent["cpu"], reads, acked, messages = 0.0, 0, 0, []
            pg0, redis0 = postgres_cpu_seconds(), redis_cpu()
            while True:
                messages = rg.read(max_events=args.batch, consumer="c", ack=messages)
                acked += rg.last_ack["acked"] if rg.last_ack else 0
                reads += 1
                if not messages:
                    break
            pg, in_redis = (postgres_cpu_seconds() - pg0) / acked * 1e6, (redis_cpu() - redis0) / acked * 1e6
            assert acked == args.events, (acked, args.events)
            figures[retention_type].append(spent["cpu"] / acked * 1e6)
            others[retention_type].append((pg, in_redis))
            print(
                f"round {round_no + 1} {retention_type:<38} {spent['cpu'] / acked * 1e6:5.2f} ms per 1 000"
                f"  ({spent['cpu'] / reads * 1e3:5.2f} ms per read, {reads} reads); PostgreSQL {pg:4.2f} ms,"
                f" Redis {in_redis:4.2f} ms",
                flush=True,
            )
    for retention_type, ms in figures.items():
        ms.sort()
        pgs, rs = sorted(x[0] for x in others[retention_type]), sorted(x[1] for x in others[retention_type])
        print(
            f"{retention_type:<38} application median {ms[len(ms) // 2]:5.2f} (min {ms[0]:5.2f}),"
            f" PostgreSQL {pgs[len(pgs) // 2]:4.2f}, Redis {rs[len(rs) // 2]:4.2f} ms per 1 000"
        )
    if profiler:
        profiler[0].dump_stats(args.profile)
        print(f"profile of the last round: {args.profile}")


if __name__ == "__main__":
    main()
