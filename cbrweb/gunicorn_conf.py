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
import sys

import gunicorn.util  # type: ignore[import-untyped]  # (gunicorn ships no type information)

from cbrweb.body_limit import after_large_body
from cbrweb.url_limit import REQUEST_LINE_BYTES, too_long_body


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


def _switch_interval_ms() -> float:
    raw = os.environ.get("CBR_WEB_SWITCH_INTERVAL_MS", "0.5")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 100:
        raise SystemExit(f"CBR_WEB_SWITCH_INTERVAL_MS must be a number of milliseconds above 0, up to 100, not {raw!r}")
    return value


SWITCH_INTERVAL_MS = _switch_interval_ms()


# Request lines as long as gunicorn reads any (its default was 4094 bytes): every URL up to the
# longest `CBR_MAX_URL_BYTES` may be reaches the application, which answers an over-long one in
# the API's error shape (cbrweb/url_limit.py). Not 0 (no limit): gunicorn would then hold a line
# of any size, copying it whole for every piece that arrives.
limit_request_line = REQUEST_LINE_BYTES


def on_starting(server) -> None:
    """In the master, before it starts the workers (they inherit it): gunicorn's own refusal of
    a request line over `limit_request_line` answers 414 in the API's error shape, naming `url`,
    not with an HTML page; its other answers stay its own. gunicorn has no setting for its
    error pages: its writer is replaced (tests/faults/test_long_urls.py holds it to the shape)."""
    gunicorn.util.write_error = _url_too_long_as_json(gunicorn.util.write_error)


def _url_too_long_as_json(write_error):
    if getattr(write_error, "url_too_long_as_json", False):  # already (a config reloaded)
        return write_error

    def write(sock, status_int, reason, mesg):
        if status_int != 414:
            return write_error(sock, status_int, reason, mesg)
        body = too_long_body(f"the request line is over {REQUEST_LINE_BYTES} bytes")
        head = (
            f"HTTP/1.1 414 {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        gunicorn.util.write_nonblock(sock, head.encode("latin-1") + body)

    write.url_too_long_as_json = True
    return write


def post_request(worker, req, environ, resp) -> None:
    """After a request with a large body, its memory goes back to the system."""
    after_large_body(environ)


def pre_request(worker, req) -> None:
    """The connection's `KEEPALIVE_REQUESTS`-th request gets the last answer on it."""
    if KEEPALIVE_REQUESTS and req.req_number >= KEEPALIVE_REQUESTS:
        req.must_close = True


def tune_collector() -> None:
    """What a web worker does to the garbage collector once it has loaded the application (see
    `post_worker_init`); the benchmarks that run the application in their own process call it
    too, so that they measure what a worker does. Nothing with `CBR_WEB_GC_FREEZE=0`."""
    if GC_TUNED:
        gc.freeze()
        gc.set_threshold(GC_GEN0, *gc.get_threshold()[1:])


def post_worker_init(worker) -> None:
    """Once the worker has loaded Django and the application, those objects leave the garbage
    collector's view (`gc.freeze`), and young collections run every 10 000 allocations instead of
    700. A read of 1 000 events makes thousands of objects that live for one request; each
    collection of the oldest generation walked the whole loaded application again. Measured
    (bench/RESULTS.md, 2026-11-27): 12-18 % of a read's CPU in the web worker. Reference cycles
    are still collected; `CBR_WEB_GC_FREEZE=0` keeps Python's defaults.

    A uvicorn worker (cbrweb/web.py) parses HTTP with CBR's protocol, which reads URLs no longer
    than gunicorn's own parser does (cbrweb/http_protocol.py): uvicorn's worker takes its
    protocol from a class attribute, not from a setting, and starts serving after this hook."""
    config = getattr(worker, "config", None)
    if config is not None and getattr(config, "http", None) in ("auto", "httptools"):
        config.http = "cbrweb.http_protocol:CbrHttpToolsProtocol"
    tune_collector()
    sys.setswitchinterval(SWITCH_INTERVAL_MS / 1000)
