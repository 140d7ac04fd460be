"""The cap on a request's body (`CBR_MAX_REQUEST_BYTES`), applied in front of Django (WSGI), so
that a body over it is refused before anything reads it: one 300 MiB publish used to grow a web
worker by 2.1 GiB, and stay 820 MiB bigger.

A body with a `Content-Length` over the cap is answered 413 without reading a byte of it (the
web server then drains a little of it and closes the connection). A chunked body (no
`Content-Length`) is read up to the cap and refused as soon as more arrives; one within it is
handed to Django as a body of known length, which Django reads like any other (without this,
Django sees a chunked body as empty). It never holds more than the cap of a body.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io

import orjson

READ_SIZE = 64 * 1024
TRIM_AFTER_BYTES = 8 * 1024 * 1024  # a body this large leaves the memory it took to the system


LARGE_EVENT_PATH = "/events/raw/"  # a large event's publish (api/large_events.py): its own cap


class RequestBodyLimit:
    """WSGI middleware: `RequestBodyLimit(app, max_bytes, max_large_event_bytes)`. A large
    event's publish (a path ending in `LARGE_EVENT_PATH`) has the large event's cap, and its
    chunked body is left to the view, which spools it to disk up to its cap (never read whole
    here)."""

    def __init__(self, app, max_bytes: int, max_large_event_bytes: int = 0):
        self.app = app
        self.max_bytes = max_bytes
        self.max_large_bytes = max_large_event_bytes or max_bytes

    def __call__(self, environ, start_response):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0  # as Django reads it; the web server refuses a malformed one first
        large = environ.get("PATH_INFO", "").endswith(LARGE_EVENT_PATH)
        if large and length > self.max_large_bytes:
            return self._too_large(start_response, f"is {length} bytes", self.max_large_bytes)
        if length > self.max_bytes and not large:
            return self._too_large(start_response, f"is {length} bytes")
        if large:
            return self.app(environ, start_response)
        if not length and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            body = _read_at_most(environ["wsgi.input"], self.max_bytes)
            if body is None:
                return self._too_large(start_response, f"is over {self.max_bytes} bytes")
            environ["CONTENT_LENGTH"] = str(len(body))
            environ["wsgi.input"] = io.BytesIO(body)
        return self.app(environ, start_response)

    def _too_large(self, start_response, size: str, cap: int = 0):
        limit = f"{cap} bytes (CBR_MAX_LARGE_EVENT_BYTES)" if cap else f"{self.max_bytes} bytes (CBR_MAX_REQUEST_BYTES)"
        body = orjson.dumps(
            {
                "code": "event_too_large" if cap else "body_too_large",
                "message": f"body: {size}; the limit is {limit}: send fewer or smaller events per request",
                "field": "body",
            }
        )
        start_response(
            "413 Content Too Large",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
            ],
        )
        return [body]


def _read_at_most(stream, max_bytes: int) -> bytes | None:
    """The stream's bytes, or None as soon as more than `max_bytes` have arrived."""
    chunks: list[bytes] = []
    size = 0
    while True:
        data = stream.read(min(READ_SIZE, max_bytes + 1 - size))
        if not data:
            return b"".join(chunks)
        size += len(data)
        if size > max_bytes:
            return None
        chunks.append(data)


def _libc_malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to give back this way
        return None


_MALLOC_TRIM = _libc_malloc_trim()


def after_large_body(environ) -> None:
    """Once the answer to a request with a large body is sent, give the memory freed since back
    to the system. A large publish is parsed into many objects of a few kB; freed, glibc keeps
    their pages in the worker's heaps (one 300 MiB publish left a worker 820 MiB bigger for
    good), so the next large request would find the worker bigger still."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return
    if length >= TRIM_AFTER_BYTES and _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
