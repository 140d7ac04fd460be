"""The client sends again what the server says to send again (a 503 or 429 with `Retry-After`),
pausing as long as it says and longer each time, within `retry_for_s`; an error without
`Retry-After` is the caller's at once."""

import json
import socket
import threading
import time

import pytest

from cbr_client import CBRError, Client


class Refusing:
    """Answers the first `refusals` requests with `status` (and `Retry-After` when given), then
    200 `{"ok": true}`; notes when each request came."""

    def __init__(self, refusals: int, status: int = 503, retry_after: str | None = "0.2"):
        self.refusals, self.status, self.retry_after = refusals, status, retry_after
        self.times: list[float] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn):
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        return
                    data += got
                head, _, data = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(v)
                        for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                        if k.lower() == b"content-length"
                    ),
                    0,
                )
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                self.times.append(time.monotonic())
                if len(self.times) <= self.refusals:
                    body = json.dumps({"code": "redis_unavailable", "message": "Redis was lost: send it again"})
                    extra = f"Retry-After: {self.retry_after}\r\n" if self.retry_after is not None else ""
                    status = f"{self.status} Refused"
                else:
                    body, extra, status = '{"ok": true}', "", "200 OK"
                conn.sendall(
                    f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
                    f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
                )

    def close(self):
        self.sock.close()


@pytest.fixture
def refusing(request):
    servers = []

    def make(*args, **kwargs):
        servers.append(Refusing(*args, **kwargs))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_a_503_with_retry_after_is_sent_again_after_it_and_longer_each_time(refusing, caplog):
    server = refusing(3)
    with Client(server.url, token="t") as cbr:
        assert cbr.request("POST", "streams/s/x/events/", {"events": [{"payload": "p"}]}) == {"ok": True}
    gaps = [b - a for a, b in zip(server.times, server.times[1:])]
    assert len(server.times) == 4
    # 0.2 s, then 0.4, then 0.8: never sooner than the server said, and backing off
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4 and gaps[2] >= 0.8
    assert "answered 503: sent again in 0.2 s" in caplog.text


def test_a_429_with_retry_after_is_sent_again_too(refusing):
    server = refusing(1, status=429)
    with Client(server.url, token="t") as cbr:
        assert cbr.request("GET", "streams/") == {"ok": True}


def test_without_retry_after_the_error_is_the_callers_at_once(refusing):
    server = refusing(5, retry_after=None)
    with Client(server.url, token="t") as cbr, pytest.raises(CBRError) as error:
        cbr.request("GET", "streams/")
    assert error.value.status == 503 and len(server.times) == 1


def test_the_retries_stop_within_the_budget_and_the_last_answer_is_raised(refusing):
    server = refusing(100, retry_after="0.3")
    started = time.monotonic()
    with Client(server.url, token="t", retry_for_s=1.0) as cbr, pytest.raises(CBRError) as error:
        cbr.request("GET", "streams/")
    # 0.3 + 0.6 fit in 1 s, the next 1.2 would not: it is not begun
    assert error.value.code == "redis_unavailable" and len(server.times) == 3
    assert time.monotonic() - started < 1.5


def test_no_budget_no_retry(refusing):
    server = refusing(1)
    with Client(server.url, token="t", retry_for_s=0) as cbr, pytest.raises(CBRError):
        cbr.request("GET", "streams/")
    assert len(server.times) == 1
