"""cbrweb/body_limit.py without a server: what reaches Django, and what is refused before it is
read. tests/faults/test_request_body_cap.py holds a real gunicorn worker to the same."""

import io

import orjson

from cbrweb.body_limit import RequestBodyLimit

CAP = 1000


class Unreadable(io.RawIOBase):
    """A body that fails the test if anything reads it."""

    def read(self, size=-1):
        raise AssertionError("the body was read")


class Counting(io.BytesIO):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.taken = 0

    def read(self, size=-1):
        data = super().read(size)
        self.taken += len(data)
        return data


def call(environ):
    seen, started = {}, {}

    def app(environ, start_response):
        seen["length"] = environ.get("CONTENT_LENGTH")
        seen["body"] = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        start_response("201 Created", [])
        return [b""]

    def start_response(status, headers):
        started["status"], started["headers"] = status, dict(headers)

    body = b"".join(RequestBodyLimit(app, CAP)(environ, start_response))
    return started, body, seen


def test_a_body_longer_than_the_cap_is_refused_unread_in_the_apis_error_shape():
    started, body, seen = call({"CONTENT_LENGTH": str(10 * 1024**3), "wsgi.input": Unreadable()})
    assert started["status"].startswith("413")
    assert started["headers"]["Content-Type"] == "application/json"
    error = orjson.loads(body)
    assert error["code"] == "body_too_large" and error["field"] == "body"
    assert f"is {10 * 1024**3} bytes; the limit is {CAP} bytes (CBR_MAX_REQUEST_BYTES)" in error["message"]
    assert not seen  # Django never saw the request


def test_a_body_of_the_cap_reaches_the_app():
    started, _, seen = call({"CONTENT_LENGTH": str(CAP), "wsgi.input": io.BytesIO(b"x" * CAP)})
    assert started["status"].startswith("201") and seen["body"] == b"x" * CAP


def test_a_chunked_body_over_the_cap_is_refused_once_one_byte_more_has_arrived():
    stream = Counting(b"y" * (50 * CAP))
    started, body, seen = call({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": stream})
    assert started["status"].startswith("413") and not seen
    assert stream.taken == CAP + 1
    assert orjson.loads(body)["message"].startswith(f"body: is over {CAP} bytes")


def test_a_chunked_body_within_the_cap_reaches_the_app_with_its_length():
    # without this Django reads a body of unknown length as empty
    started, _, seen = call({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"z" * CAP)})
    assert started["status"].startswith("201")
    assert seen == {"length": str(CAP), "body": b"z" * CAP}
