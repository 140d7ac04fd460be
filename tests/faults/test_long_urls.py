"""An over-long URL against the real web server (gunicorn, as `make run` starts it) is answered
414 in the API's error shape, naming `url`, whatever its length: past `CBR_MAX_URL_BYTES` by the
application (cbrweb/url_limit.py), past the longest URL the server reads by its HTTP protocol
(cbrweb/http_protocol.py), as soon as that much has arrived. It answered gunicorn's HTML page
to any request line over 4094 bytes, which a client generated from the schema could not read
(issue 37); uvicorn answered a plain-text 400 to a URL over 64 KiB."""

import select
import socket

import orjson
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LIST = "/api/v1/streams/?search="


def get(web_server, token, target: str) -> tuple[int, str, bytes]:
    """GET `target` as sent on the request line, in pieces until the server answers (it may
    answer and close before the line is whole); the status, Content-Type and body answered."""
    request = (
        f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", web_server.port), timeout=30) as sock:
        answered = select.poll()  # not select(): a whole test run holds descriptors past FD_SETSIZE
        answered.register(sock, select.POLLIN)
        try:
            for start in range(0, len(request), 65536):
                if answered.poll(0):
                    break
                sock.sendall(request[start : start + 65536])
        except (BrokenPipeError, ConnectionResetError):
            pass  # it answered and closed before the client finished: read the answer
        data = b""
        while more := sock.recv(65536):
            data += more
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:])}
    return int(lines[0].split()[1]), headers.get("content-type", ""), body


@pytest.mark.parametrize("url_bytes", [8001, 8173, 8174, 20_000, 100_000, 2_000_000])
def test_an_over_long_url_is_answered_414_in_the_apis_error_shape(web_server, token, url_bytes):
    status, content_type, body = get(web_server, token, LIST + "x" * (url_bytes - len(LIST)))

    assert status == 414, body[:300]
    assert content_type == "application/json"
    error = orjson.loads(body)
    assert error["code"] == "url_too_long" and error["field"] == "url"
    assert error["message"].startswith("url: ")


def test_a_url_of_the_cap_is_served_and_the_server_goes_on(web_server, token):
    for _ in range(2):  # a refusal closes its connection; the worker serves the next one
        assert get(web_server, token, LIST + "x" * 20_000)[0] == 414
        status, content_type, body = get(web_server, token, LIST + "x" * (8000 - len(LIST)))
        assert status == 200 and orjson.loads(body)["results"] == [], body[:300]
