"""The server's own part of publish and delivery latency (issue 38): `bench/latency.py`'s steady
scenario measured without the Python client, so that a change to the server shows apart from the
client's and the scheduler's share of the same two cores.

CBR starts as `bench/latency.py` starts it (gunicorn, 2 processes of uvicorn's worker, PostgreSQL
and Redis). Over `http.client` keep-alive connections:

  publish   one-event publishes, one every 3 ms: p50/p90/p99 (after a warm-up of 200);
  healthz   the same for `/healthz`, the floor of any request through the web stack;
  woken     a read of a group waits (`wait_ms` 5 s, carrying the previous answer's ack); one
            event is published; from the publish's start to the read's answer, and the publish's
            own time, p50/p90/p99 over `--rounds` (after a warm-up of 100).

Run it twice in turn against two checkouts for a before/after (`--root`: the checkout whose
server runs); one sitting, A B A B, as this machine drifts."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from pathlib import Path


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    at = [xs[int(len(xs) * q)] * 1000 for q in (0.5, 0.9, 0.99)]
    return f"p50 {at[0]:5.2f} ms  p90 {at[1]:5.2f} ms  p99 {at[2]:5.2f} ms"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    p.add_argument("--requests", type=int, default=1500)
    p.add_argument("--rounds", type=int, default=600)
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"))
    p.add_argument("--redis-url", default=os.environ.get("REDIS_URL_BENCH", "redis://127.0.0.1:6379/9"))
    args = p.parse_args()
    sys.path[:0] = [f"{args.root}/bench", args.root]
    os.chdir(args.root)
    Path(args.root, "var").mkdir(exist_ok=True)
    import latency  # the checkout's own (its server and its settings)
    from _common import machine

    print(f"bench/latency_server.py on {machine()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with latency.CBR(args) as cbr:
        headers = {"Authorization": f"Token {cbr.token}", "Content-Type": "application/json"}

        def connection() -> http.client.HTTPConnection:
            return http.client.HTTPConnection("127.0.0.1", cbr.port, timeout=30)

        def call(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None) -> bytes:
            conn.request(method, path, body=body, headers=headers)
            return conn.getresponse().read()

        event = b'{"events":[{"payload":"x"}]}'
        for name, method, path, body in (
            ("publish", "POST", "/api/v1/streams/lat/orders/events/", event),
            ("healthz", "GET", "/healthz", None),
        ):
            conn, took = connection(), []
            for _ in range(args.requests):
                start = time.perf_counter()
                call(conn, method, path, body)
                took.append(time.perf_counter() - start)
                time.sleep(0.003)
            print(f"{name:8} {stats(took[200:])}", flush=True)

        cbr.call(
            "POST",
            "/api/v1/reader-groups/",
            {"scope": "lat", "name": "woken", "streams": ["lat/orders"], "retention_type": "NONE", "start": "tail"},
        )
        producer, consumer = connection(), connection()
        published, delivered, ack = [], [], None
        for n in range(args.rounds + 100):
            answer: dict = {}

            def read(ack=ack, answer=answer) -> None:
                request = {"max_events": 10, "wait_ms": 5000, **({"ack": ack} if ack else {})}
                answer["body"] = json.loads(
                    call(consumer, "POST", "/api/v1/reader-groups/lat/woken/read/", json.dumps(request).encode())
                )
                answer["at"] = time.perf_counter()

            reader = threading.Thread(target=read)
            reader.start()
            time.sleep(0.004)  # the read is waiting by then
            start = time.perf_counter()
            call(producer, "POST", "/api/v1/streams/lat/orders/events/", event)
            answered = time.perf_counter()
            reader.join()
            deliveries = answer["body"].get("deliveries", [])
            ack = {"delivery_ids": [d["delivery_id"] for d in deliveries]} if deliveries else None
            if n >= 100 and deliveries:
                published.append(answered - start)
                delivered.append(answer["at"] - start)
        print(
            f"woken    publish → delivery {stats(delivered)}; the publish {stats(published)} ({len(delivered)} rounds)"
        )


if __name__ == "__main__":
    main()
