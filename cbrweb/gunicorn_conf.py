"""gunicorn settings of every CBR web server (`make run`, the benchmarks, the integration tests):
`gunicorn -c python:cbrweb.gunicorn_conf ...`.

Keep-alive connections are closed after `CBR_WEB_KEEPALIVE_REQUESTS` requests (default 10; 0
keeps them open for good), as nginx's `keepalive_requests` does. A gunicorn worker process keeps
every connection it accepted, so two busy consumers whose connections both landed on one worker
share that worker's interpreter while the other worker idles, for as long as they run. The last
answer on a connection says `Connection: close`; the client opens a new connection for its next
request, which a worker that is not busy tends to accept (a busy one holds its interpreter lock),
and the load spreads again. Clients that keep connections (`cbr_client`, `http.client`,
requests, browsers) reconnect by themselves. Measured with two consumers (bench/RESULTS.md,
2026-11-24): with 100 the workers' shares stayed 23 %/77 % for whole rounds and the group
consumed 55-65k events/s; with 10, 42-58 % and 81-91k; with 1 (a connection per request),
balanced too, and 81-88k.
"""

from __future__ import annotations

import gc
import os

from cbrweb.body_limit import after_large_body


def _keepalive_requests() -> int:
    raw = os.environ.get("CBR_WEB_KEEPALIVE_REQUESTS", "10")
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise SystemExit(f"CBR_WEB_KEEPALIVE_REQUESTS must be a whole number >= 0 (0: no limit), not {raw!r}")
    return value


KEEPALIVE_REQUESTS = _keepalive_requests()


def _gc_tuned() -> bool:
    raw = os.environ.get("CBR_WEB_GC_FREEZE", "1")
    if raw not in ("0", "1"):
        raise SystemExit(f"CBR_WEB_GC_FREEZE must be 1 (freeze the loaded application) or 0, not {raw!r}")
    return raw == "1"


GC_TUNED = _gc_tuned()
GC_GEN0 = 10_000  # allocations between young collections (Python's default: 700)


def post_request(worker, req, environ, resp) -> None:
    """After a request with a large body, its memory goes back to the system."""
    after_large_body(environ)


def pre_request(worker, req) -> None:
    """The connection's `KEEPALIVE_REQUESTS`-th request gets the last answer on it."""
    if KEEPALIVE_REQUESTS and req.req_number >= KEEPALIVE_REQUESTS:
        req.must_close = True


def post_worker_init(worker) -> None:
    """Once the worker has loaded Django and the application, those objects leave the garbage
    collector's view (`gc.freeze`), and young collections run every 10 000 allocations instead of
    700. A read of 1 000 events makes thousands of objects that live for one request; each
    collection of the oldest generation walked the whole loaded application again. Measured
    (bench/RESULTS.md, 2026-11-27): 12-18 % of a read's CPU in the web worker. Reference cycles
    are still collected; `CBR_WEB_GC_FREEZE=0` keeps Python's defaults."""
    if GC_TUNED:
        gc.freeze()
        gc.set_threshold(GC_GEN0, *gc.get_threshold()[1:])
