"""The cap on a request's URL (`CBR_MAX_URL_BYTES`: its path and query string as the client sent
them), applied in front of Django (WSGI), so that every server answers an over-long URL alike:
414 in the API's error shape, naming `url`. gunicorn refused a request line over 4094 bytes
itself, with an HTML page a generated client could not read (issue 37); uvicorn answers a URL
over 64 KiB with a plain-text 400, Django's dev server has a limit of its own (64 KiB).

The web server reads URLs up to `LONGEST_URL_BYTES`, the longest this cap may be, and refuses a
longer one itself in the same shape, as soon as that much has arrived: uvicorn's worker with
CBR's HTTP protocol (cbrweb/http_protocol.py), or gunicorn's own workers reading request lines
up to their largest limit (cbrweb/gunicorn_conf.py)."""

from __future__ import annotations

from urllib.parse import quote

import orjson

REQUEST_LINE_BYTES = 8190  # gunicorn's largest `limit_request_line` (0, no limit, reads a line of any size)
# the longest URL such a line holds: "OPTIONS <url> HTTP/1.1", the longest method
LONGEST_URL_BYTES = REQUEST_LINE_BYTES - len("OPTIONS  HTTP/1.1")


class RequestUrlLimit:
    """WSGI middleware: `RequestUrlLimit(app, max_bytes)`."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    def __call__(self, environ, start_response):
        size = url_bytes(environ)
        if size > self.max_bytes:
            return too_long(start_response, f"is {size} bytes; the limit is {self.max_bytes} bytes (CBR_MAX_URL_BYTES)")
        return self.app(environ, start_response)


def url_bytes(environ) -> int:
    """The URL's length as the client sent it: gunicorn gives it (`RAW_URI`); other servers give
    the path decoded, so it is measured encoded again. (WSGI strings are bytes read as latin-1.)"""
    raw = environ.get("RAW_URI")
    if raw is not None:
        return len(raw)
    path = quote(
        (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")).encode("latin-1"), safe="/:@!$&'()*+,;=-._~"
    )
    query = environ.get("QUERY_STRING", "")
    return len(path) + (len(query) + 1 if query else 0)


def too_long_body(size: str) -> bytes:
    """The 414 answer's body: the API's error shape, naming `url`."""
    return orjson.dumps(
        {
            "code": "url_too_long",
            "message": f"url: {size}: send long selections in a request body, or fewer of them",
            "field": "url",
        }
    )


def too_long(start_response, size: str) -> list[bytes]:
    body = too_long_body(size)
    start_response("414 URI Too Long", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
