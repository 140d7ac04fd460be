"""cbrweb/url_limit.py without a server: an over-long URL is answered 414 in the API's error
shape before Django sees it, measured as the client sent it whichever server passes it on, and the
settings keep the cap within what gunicorn reads. tests/faults/test_long_urls.py holds a real
gunicorn to the same."""

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from cbrweb.url_limit import LONGEST_URL_BYTES, REQUEST_LINE_BYTES, RequestUrlLimit, url_bytes

ROOT = Path(__file__).resolve().parent.parent
CAP = 100


def call(environ):
    seen, started = [], {}

    def app(environ, start_response):
        seen.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b""]

    def start_response(status, headers):
        started["status"], started["headers"] = status, dict(headers)

    body = b"".join(RequestUrlLimit(app, CAP)(environ, start_response))
    return started, body, seen


def test_a_url_over_the_cap_is_refused_in_the_apis_error_shape_naming_url():
    started, body, seen = call({"RAW_URI": "/api/v1/streams/?search=" + "x" * CAP, "PATH_INFO": "/api/v1/streams/"})
    assert started["status"] == "414 URI Too Long"
    assert started["headers"]["Content-Type"] == "application/json"
    error = orjson.loads(body)
    assert error["code"] == "url_too_long" and error["field"] == "url"
    assert f"is {CAP + 24} bytes; the limit is {CAP} bytes (CBR_MAX_URL_BYTES)" in error["message"]
    assert not seen  # Django never saw it


def test_a_url_of_the_cap_reaches_the_app():
    started, _, seen = call({"RAW_URI": "/" + "x" * (CAP - 1), "PATH_INFO": "/" + "x" * (CAP - 1)})
    assert started["status"] == "200 OK" and seen


@pytest.mark.parametrize(
    "environ, size",
    [
        ({"RAW_URI": "/a%20b?q=1"}, 10),  # as sent (gunicorn)
        ({"PATH_INFO": "/a b", "QUERY_STRING": "q=1"}, 10),  # decoded (other servers): encoded again
        ({"PATH_INFO": "/caf\xc3\xa9"}, 10),  # WSGI's latin-1 reading of UTF-8 bytes: /caf%C3%A9
        ({"SCRIPT_NAME": "/cbr", "PATH_INFO": "/x", "QUERY_STRING": ""}, 6),
    ],
)
def test_a_url_is_measured_as_the_client_sent_it(environ, size):
    assert url_bytes(environ) == size


def test_the_longest_cap_fits_the_longest_request_line_gunicorn_reads():
    assert LONGEST_URL_BYTES + len("OPTIONS  HTTP/1.1") == REQUEST_LINE_BYTES


@pytest.mark.parametrize("raw", [str(LONGEST_URL_BYTES + 1), "100"])
def test_settings_refuse_a_cap_gunicorn_could_not_honour_or_a_tiny_one(raw):
    out = subprocess.run(
        [sys.executable, "-c", "import django; from django.conf import settings; settings.INSTALLED_APPS"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "cbrweb.settings", "CBR_MAX_URL_BYTES": raw},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "CBR_MAX_URL_BYTES" in out.stderr
