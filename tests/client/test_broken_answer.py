"""The client against a server that dies mid-answer: a cut-off body is a ConnectionError (an
OSError, which a consumer's retry loop already catches), never http.client's own exception."""

import socket
import threading

import pytest

from cbr_client import Client


class CutOffServer:
    """Answers every request with a header promising 100 bytes, sends 10, and closes."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                conn.sendall(
                    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"deliver'
                )

    def close(self):
        self.sock.close()


@pytest.fixture
def server():
    s = CutOffServer()
    yield s
    s.close()


def test_a_cut_off_answer_to_a_publish_is_a_connection_error_not_repeated(server):
    cbr = Client(server.url, token="t")
    with pytest.raises(ConnectionError, match="broke while reading"):
        cbr.request("POST", "streams/a/b/events/", {"events": [{"payload": "x"}]})
    assert server.requests == 1  # a publish is not sent twice


def test_a_cut_off_answer_to_a_read_is_tried_once_more_then_a_connection_error(server):
    cbr = Client(server.url, token="t")
    with pytest.raises(OSError):
        cbr.request("POST", "reader-groups/a/g/read/", {"max_events": 1})
    assert server.requests == 2
