"""Where a one-event publish's time goes inside a web process (issue 38): the same publish, in one
process, over PostgreSQL and Redis, answered three ways, and a read's floor UPDATE two ways.

  wsgi      through the WSGI application (Django's whole request handling: middleware, DRF);
  lane      through `api.lane` (the views' own function, without Django's request handling);
  view      the view's function alone (`api.stream_views.publish`): the floor of the two above;
  floors    a one-segment group's floor persisted (`persist_floors`), and the statement for many
            rows (arrays, rows locked in order) run for that one row.

Each p50/p90/p99 over `--calls` calls with a pause of `--pause-ms` between them, as requests come
(back to back, the caches stay warmer than any server sees them). Run it from two checkouts in
turn for a before/after (the `lane` and `floors` lines need a checkout that has them)."""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    at = [xs[int(len(xs) * q)] * 1000 for q in (0.5, 0.9, 0.99)]
    return f"p50 {at[0]:5.2f} ms  p90 {at[1]:5.2f} ms  p99 {at[2]:5.2f} ms"


def timed(call, calls: int, pause_s: float) -> list[float]:
    for _ in range(50):  # warm
        call()
    took = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        took.append(time.perf_counter() - start)
        time.sleep(pause_s)
    return took


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--pause-ms", type=float, default=3.0)
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))
    p.add_argument("--redis-url", default=os.environ.get("REDIS_URL_BENCH", "redis://127.0.0.1:6379/9"))
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="cbrweb.settings",
        DATABASE_URL=args.database_url,
        REDIS_URL=args.redis_url,
        CBR_DATA_DIR=tempfile.mkdtemp(prefix="cbr-web-stack-"),
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from _common import machine
    from django.contrib.auth import get_user_model
    from django.core.wsgi import get_wsgi_application
    from rest_framework.authtoken.models import Token

    from api import stream_views
    from streams import services
    from streams.models import Stream

    print(f"bench/web_stack.py on {machine()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    user = get_user_model().objects.get_or_create(username="bench-web", defaults={"is_superuser": True})[0]
    token = Token.objects.get_or_create(user=user)[0].key
    name = f"s{os.getpid()}"
    services.do_create_stream(scope="bench-web", name=name, segment_count=1)
    path = f"/api/v1/streams/bench-web/{name}/events/"
    body = b'{"events":[{"payload":"x"}]}'
    application = get_wsgi_application()

    def environ() -> dict:
        return {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "HTTP_HOST": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_AUTHORIZATION": f"Token {token}",
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
        }

    def through_wsgi() -> None:
        status = []
        answer = application(environ(), lambda s, headers, exc_info=None: status.append(s))
        b"".join(answer)
        answer.close()
        assert status[0].startswith("201"), status

    def alone() -> None:
        import orjson

        assert stream_views.publish("bench-web", name, orjson.loads(body)).status_code == 201

    ways = [("wsgi", through_wsgi), ("view", alone)]
    try:
        from api import lane

        def through_lane() -> None:
            response = lane.answer(environ(), body)
            assert response is not None and response.status_code == 201

        ways.insert(1, ("lane", through_lane))
    except ImportError:
        pass
    pause = args.pause_ms / 1000
    for label, call in ways:
        print(f"publish {label:5} {stats(timed(call, args.calls, pause))}", flush=True)

    from groups import reader_groups
    from groups.consuming import floors

    stream = Stream.objects.get(scope__name="bench-web", name=name)
    group = reader_groups.do_create_reader_group(scope="bench-web", name=name, streams=[stream], retention_type="NONE")
    slot = floors.slots(group)[0]
    upto = [slot.position.handed]

    def persisted() -> None:
        upto[0] += 1
        floors.persist_floors([], {slot.position.pk: (slot, upto[0])})

    print(f"floors  one   {stats(timed(persisted, args.calls, pause))}", flush=True)
    if hasattr(floors, "_update_positions_postgresql"):
        from django.db import connection
        from django.utils import timezone

        def as_many() -> None:  # the statement for many rows, given one (what one row cost before)
            upto[0] += 1
            rows = [(slot.position.pk, 0, 0, upto[0])]
            now = connection.ops.adapt_datetimefield_value(timezone.now())
            many = rows + [(-1, 0, 0, 0)]  # a row that does not exist: the statement for many rows
            floors._update_positions_postgresql(many, now)

        print(f"floors  many  {stats(timed(as_many, args.calls, pause))}", flush=True)


if __name__ == "__main__":
    main()
