"""The client against a server older than reads that carry an ack: the server refuses the read's
`ack` as an unknown field (as every older release refuses an unknown field); the client then sends
the ack alone, the read without it, and never tries again on that client. An older server is not
something this repository can start, so a small HTTP server answers as one would."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cbr_client import Client


class OldServer(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict]] = []
    accepts: list[str] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body))
        type(self).accepts.append(self.headers["Accept"])
        if self.headers["Accept"] != "application/json":  # as DRF answers a type none of its renderers has
            self._answer(406, {"code": "not_acceptable", "message": "Could not satisfy the request Accept header."})
        elif self.path.endswith("/read/") and "ack" in body:
            self._answer(400, {"code": "invalid", "message": "ack: is not a field of a read", "field": "ack"})
        elif self.path.endswith("/read/"):
            self._answer(200, {"deliveries": [], "missed": 0, "missed_by_stream": {}, "pending_limit_reached": False})
        else:
            self._answer(200, {"acked": len(body["delivery_ids"]), "waiting_for_sinks": 0, "given_back": 0})

    def _answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@pytest.fixture
def old_server():
    OldServer.requests, OldServer.accepts = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), OldServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_older_server_gets_the_ack_alone_then_the_read(old_server):
    group = Client(old_server, token="t").reader_group("shop/billing")
    assert group.read(max_events=5, ack=["1-2-0-7-1"]) == []
    assert group.read(max_events=5, ack=["1-2-0-8-1"]) == []
    paths = [(path.rsplit("/", 2)[-2], "ack" in body) for path, body in OldServer.requests]
    # the binary answer refused once (406: nothing applied), then the ack refused once; from then
    # on the read asks for JSON, and the ack goes alone, before it
    assert paths == [("read", True), ("read", True), ("ack", False), ("read", False), ("ack", False), ("read", False)]
    assert OldServer.accepts[0] == "application/vnd.cbr.read-batch"
    assert set(OldServer.accepts[1:]) == {"application/json"}
    assert [body["delivery_ids"] for path, body in OldServer.requests if path.endswith("/ack/")] == [
        ["1-2-0-7-1"],
        ["1-2-0-8-1"],
    ]
    assert group.last_ack is None
